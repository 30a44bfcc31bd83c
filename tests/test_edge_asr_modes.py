"""Edge and speech as they run (issue #38 item 5), through the CLI: an edge module runs in the
lowest-power nvpmodel mode that carries its load (catalog power_modes), and live speech is sized by
concurrent streams and chunk latency rather than by the offline real-time factor. Expected numbers
are recomputed from the catalog and the plan's own figures, never copied from a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

from servewise.engine.domain.catalog import load_catalog

JAO = "NVIDIA Jetson AGX Orin 64GB"


def _plan(cli, tmp_path: Path, workload: dict, *extra: str) -> dict:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(workload, allow_unicode=True))
    return json.loads(cli("plan", str(path), "--format", "json", *extra).output)


def _example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


def _modes() -> dict[str, dict]:
    return {m["name"]: m for m in load_catalog().gpu(JAO)["power_modes"]}


def _ratios(mode: dict, top: dict) -> tuple[float, float]:
    return (mode["gpu_tpc"] * mode["gpu_max_mhz"] / (top["gpu_tpc"] * top["gpu_max_mhz"]),
            mode["emc_max_mhz"] / top["emc_max_mhz"])


def test_catalogued_modes_are_sourced_and_ordered():
    g = load_catalog().gpu(JAO)
    modes = _modes()
    assert {"MAXN", "50W", "30W", "15W"} <= set(modes)
    assert max(m["power_w"] for m in modes.values()) == g["tdp_w"]
    assert min(m["power_w"] for m in modes.values()) == g["power_min_w"]
    assert any("power_modes" in s.get("fields", []) and s["ref"].startswith("https://docs.nvidia.com")
               for s in g["sources"])
    # a cheaper mode never has more GPU or memory capability than a dearer one
    by_power = sorted(modes.values(), key=lambda m: m["power_w"])
    caps = [_ratios(m, modes["MAXN"]) for m in by_power]
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(caps, caps[1:], strict=False))


def _mode_load(plan: dict, mode: dict, top: dict) -> float:
    """The box's load in ``mode`` from the plan's own shares: the detector's by the compute ratio,
    the LLM's by the memory-clock ratio."""
    perf = plan["performance"]
    rc, rb = _ratios(mode, top)
    boxes = plan["components"]["gpu"]["replicas"]
    video = perf["video_frames_per_s_needed"] / (perf["video_frames_per_s_capacity"] * 0.7) / boxes
    return video / rc + perf["llm_share_of_replicas"] / boxes / rb


def test_edge_video_runs_in_the_lowest_mode_that_carries_it(cli, tmp_path):
    plan = _plan(cli, tmp_path, _example("edge-video"))
    modes, comp = _modes(), plan["components"]
    chosen = modes[comp["edge"]["power_mode"]]
    assert comp["edge"]["power_mode_id"] == chosen["id"]
    assert comp["power"]["server_draw_w"] == chosen["power_w"] <= plan["workload"]["edge"]["power_budget_w"]
    assert comp["software"]["power_mode_command"].startswith(f"sudo nvpmodel -m {chosen['id']} ")
    assert _mode_load(plan, chosen, modes["MAXN"]) <= 1
    # every cheaper mode is overloaded or misses a latency target
    for m in modes.values():
        if m["power_w"] < chosen["power_w"]:
            rc, rb = _ratios(m, modes["MAXN"])
            perf = plan["performance"]
            assert (_mode_load(plan, m, modes["MAXN"]) > 1
                    or perf["ttft_ms_band_hi"] / rc > plan["workload"]["sla"]["ttft_ms"]
                    or perf["tpot_ms_band_hi"] / rb > plan["workload"]["sla"]["tpot_ms"]), m["name"]


def test_fewer_streams_run_in_a_cheaper_mode_for_less_electricity(cli, tmp_path):
    wl = _example("edge-video")
    base = _plan(cli, tmp_path, wl)
    light = _plan(cli, tmp_path, {**wl, "edge": {**wl["edge"], "video_streams": 2}})
    assert light["components"]["gpu"]["count"] == base["components"]["gpu"]["count"]
    assert light["components"]["power"]["server_draw_w"] < base["components"]["power"]["server_draw_w"]
    assert light["cost"]["electricity_cny_per_month"] < base["cost"]["electricity_cny_per_month"]
    mode = _modes()[light["components"]["edge"]["power_mode"]]
    assert _mode_load(light, mode, _modes()["MAXN"]) <= 1
    brief = cli("plan", str(tmp_path / "w.yaml")).output
    full = cli("plan", str(tmp_path / "w.yaml"), "--full").output
    assert f"nvpmodel mode {mode['id']}" in brief and f"sudo nvpmodel -m {mode['id']}" in full


def test_edge_plan_text_shows_the_mode_in_both_languages(cli):
    path = str(EXAMPLES / "edge-video.yaml")
    en = cli("plan", path, "--full").output
    zh = cli("--lang", "zh", "plan", path, "--full").output
    assert "Power mode    sudo nvpmodel -m" in en and "nvpmodel mode" in en
    assert "sudo nvpmodel -m" in zh


def _streaming(model: str) -> dict:
    m = load_catalog().model(model)
    return m["asr_reference"]


def test_live_asr_is_sized_by_streams_and_chunk_latency(cli, tmp_path):
    wl = _example("asr-whisper-100-streams")
    plan = _plan(cli, tmp_path, wl)
    perf = plan["performance"]
    streams = wl["asr"]["concurrent_streams"]
    assert perf["asr_streams"] == streams and perf["meets_sla"]
    assert perf["asr_partial_latency_ms"] <= perf["asr_partial_latency_target_ms"]
    gpus_for_peak = plan["components"]["availability"]["replicas_for_peak"]
    assert gpus_for_peak * perf["asr_streams_per_gpu"] >= streams
    assert (gpus_for_peak - 1) * perf["asr_streams_per_gpu"] < streams
    # one update re-runs the fixed window and the buffer: its cost over the offline cost of a chunk
    ref = _streaming(plan["workload"]["model"])
    buffer_s = next(p for p in load_catalog().table("policies") if p["id"] == "asr_streaming_buffer_s")["value"]
    enc = ref["encoder_gflops_per_audio_s"] / ref["gflops_per_audio_s"]
    multiple = (ref["window_s"] * enc + buffer_s * (1 - enc)) / (plan["workload"]["asr"]["chunk_ms"] / 1000)
    assert perf["asr_offline_multiple"] == pytest.approx(multiple, abs=0.1)
    # within the latency target, the rounds of updates keep up at 70 %
    assert perf["asr_streams_per_gpu"] * perf["asr_update_ms"] <= 0.7 * plan["workload"]["asr"]["chunk_ms"]
    text = cli("plan", str(tmp_path / "w.yaml"), "--full").output
    assert "streaming: 100 live streams" in text


def test_streaming_costs_more_than_batch_and_longer_chunks_cost_less(cli, tmp_path):
    wl = _example("asr-whisper-100-streams")

    def gpus(asr: dict) -> tuple[int, float]:
        p = _plan(cli, tmp_path, {**wl, "asr": {**wl["asr"], **asr}})
        assert p["feasible"]
        return p["components"]["availability"]["replicas_for_peak"], p["cost"]["capex_cny"]

    live, live_capex = gpus({})
    batch, batch_capex = gpus({"streaming": False})
    longer, longer_capex = gpus({"chunk_ms": 2000})
    assert batch_capex < live_capex and longer_capex < live_capex
    assert longer <= live


def test_a_gpu_too_slow_for_the_latency_target_is_rejected_with_the_numbers(cli, tmp_path):
    wl = {**_example("asr-whisper-100-streams"), "constraints": {"gpu_models": ["A10"]}}
    plan = _plan(cli, tmp_path, wl)
    assert not plan["feasible"]
    why = [r for r in plan["rejected"] if r.get("rule") == "asr.reject-streaming-latency"]
    assert why and "within 2000 ms" in why[0]["because"]
    relaxed = _plan(cli, tmp_path, {**wl, "asr": {**wl["asr"], "partial_latency_ms": 4000}})
    assert relaxed["feasible"]


def test_a_budget_below_the_modules_maximum_runs_it_in_a_lower_mode(cli, tmp_path):
    """A 40 W budget no longer excludes the 60 W AGX Orin at proposal: its 30 W mode (nvpmodel 2)
    carries a small LLM within the targets; a budget below its lowest mode still excludes it."""
    wl = {"model": "Llama-3.2-3B", "mode": "edge", "precision": "int4",
          "sla": {"ttft_ms": 2000, "tpot_ms": 100},
          "traffic": {"peak_qps": 0.2, "avg_input_tokens": 256, "avg_output_tokens": 64},
          "edge": {"power_budget_w": 40}}
    plan = _plan(cli, tmp_path, wl)
    assert plan["feasible"] and plan["components"]["edge"]["power_mode_w"] <= 40
    tiny = _plan(cli, tmp_path, {**wl, "edge": {"power_budget_w": 10}})
    assert not tiny["feasible"]
    assert any("even in its lowest power mode" in r["because"] for r in tiny["rejected"])
