"""`servewise calibrate` and `--calibration` on plan / estimate / validate, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests" / "fixtures" / "bench"
VLLM = BENCH / "vllm-infqps-concurrency16-Llama-3.1-8B-Instruct-20250919-101530.json"
CSV = BENCH / "measured-llama8b.csv"
H100 = ("--gpu", "H100 SXM", "--tp", "1", "--precision", "fp8", "--backend", "vllm")


def test_calibrate_writes_an_overlay_and_reports_its_error(cli, tmp_path):
    out = tmp_path / "o.yaml"
    r = cli("calibrate", str(VLLM), "-o", str(out), *H100)
    assert r.exit_code == 0, r.output
    assert "H100 SXM / vllm" in r.output and "TPOT median error: shipped" in r.output
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert data["format"] == "servewise-calibration-overlay"
    (scope,) = data["scopes"]
    assert scope["gpu"] == "H100 SXM" and scope["backend"] == "vllm"
    assert set(scope["constants"]) <= {"t_request_ms", "eta_bw_scale", "eta_flops_scale",
                                       "interference_scale", "wait_scale"}
    err = scope["fitted"]["error"]
    assert err["fitted"]["tpot_ms"]["median_ape"] < err["shipped"]["tpot_ms"]["median_ape"]
    assert data["meta"]["fitted_on"][0]["file"] == VLLM.name and len(data["meta"]["fitted_on"][0]["sha256"]) == 64


def _campaign_csv(tmp_path: Path, n: int = 8) -> Path:
    """``n`` rows of one shipped measured campaign (SGLang Qwen3-32B on H100, bf16)."""
    lines = (ROOT / "facts" / "data" / "measured.csv").read_text(encoding="utf-8").splitlines()
    rows = [x for x in lines[1:] if x.startswith("Qwen3-32B,Qwen/Qwen3-32B,H100 SXM,sglang")][:n]
    p = tmp_path / "campaign.csv"
    p.write_text("\n".join([lines[0], *rows]) + "\n", encoding="utf-8")
    return p


def test_calibrate_csv_reports_a_cross_validated_error(cli, tmp_path):
    out = tmp_path / "o.yaml"
    r = cli("calibrate", str(_campaign_csv(tmp_path)), "-o", str(out), "--format", "json")
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["rows"] == 8
    (scope,) = rep["scopes"]
    assert scope["gpu"] == "H100 SXM" and scope["backend"] == "sglang"
    assert scope["error"]["cross_validated"]["tpot_ms"]["n"] == 8


def test_calibrate_asks_for_what_the_file_does_not_say(cli, tmp_path):
    out = tmp_path / "o.yaml"
    r = cli("calibrate", str(VLLM), "-o", str(out))
    assert r.exit_code == 2
    assert "gpu: not stated in the file (give --gpu)" in r.output
    assert not out.exists()


def test_calibrate_refuses_an_option_the_file_contradicts(cli, tmp_path):
    r = cli("calibrate", str(CSV), "-o", str(tmp_path / "o.yaml"), "--precision", "fp4")
    assert r.exit_code == 2 and "the file says" in r.output and "--precision says 'fp4'" in r.output


def test_calibrate_bad_files(cli, tmp_path):
    r = cli("calibrate", str(tmp_path / "missing.json"), "-o", str(tmp_path / "o.yaml"))
    assert r.exit_code == 2 and "not found" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    r = cli("calibrate", str(bad), "-o", str(tmp_path / "o.yaml"), *H100)
    assert r.exit_code == 2 and str(bad) in r.output


def _overlay(tmp_path: Path, gpu: str, **constants: float) -> Path:
    p = tmp_path / "ov.yaml"
    p.write_text(yaml.safe_dump({"format": "servewise-calibration-overlay", "version": 1,
                                 "scopes": [{"gpu": gpu, "backend": "vllm", "constants": constants}]}),
                 encoding="utf-8")
    return p


def test_estimate_and_validate_use_the_overlay(cli, tmp_path):
    ov = _overlay(tmp_path, "H100 SXM", eta_bw_scale=0.5)
    args = ("estimate", "--model", "Llama-3.1-8B", "--gpu", "H100 SXM", "--tp", "1", "--precision",
            "fp8", "--isl", "1024", "--osl", "128", "--concurrency", "8", "--format", "json")
    plain = json.loads(cli(*args).output)
    slow = json.loads(cli(*args, "--calibration", str(ov)).output)
    assert slow["tpot_ms"] > 1.3 * plain["tpot_ms"]  # half the bandwidth: the weight reads take twice as long
    r = cli("validate", "--data", str(CSV), "--format", "json", "--calibration", str(ov))
    data = json.loads(r.output)
    assert data["calibration_overlay"]["sha256"] and data["rows"][0]["tpot_ms_band"]
    assert cli("validate", "--calibration", str(tmp_path / "none.yaml")).exit_code == 2


def test_plan_with_an_overlay_records_it_and_says_what_it_changed(cli, tmp_path):
    workload = ROOT / "examples" / "chat-8b-small.yaml"
    base = json.loads(cli("plan", str(workload), "--format", "json").output)
    gpu = base["components"]["gpu"]["model"]
    ov = _overlay(tmp_path, gpu, eta_bw_scale=0.3, eta_flops_scale=0.3)
    r = cli("plan", str(workload), "--format", "json", "--calibration", str(ov))
    plan = json.loads(r.output)
    rec = plan["calibration_overlay"]
    assert rec["file"] == "ov.yaml" and len(rec["sha256"]) == 64 and rec["scopes"][0]["gpu"] == gpu
    note = next(w for w in plan["warnings"] if w["rule"] == "engine.calibration-overlay")
    changed = (plan["components"]["gpu"]["count"], gpu) != (base["components"]["gpu"]["count"],
                                                             plan["components"]["gpu"]["model"])
    assert ("It changed the plan" in note["message"]) == changed
    assert changed  # a GPU at 30 % of its efficiencies cannot serve the same load with as few
    assert "calibration_overlay" not in base
    brief = cli("plan", str(workload), "--calibration", str(ov)).output
    assert "Calibrated with ov.yaml" in brief


def test_estimate_reports_saturation_and_the_largest_rate_meeting_targets(cli):
    base = ("estimate", "--model", "Llama-3.1-70B", "--gpu", "H100 SXM", "--tp", "4", "--precision",
            "fp8", "--isl", "1024", "--osl", "256", "--concurrency", "8")
    args = (*base, "--format", "json", "--ttft-target-ms", "1000", "--tpot-target-ms", "50")
    light = json.loads(cli(*args, "--request-rate", "2").output)
    heavy = json.loads(cli(*args, "--request-rate", "200").output)
    assert not light["load"]["saturated"] and heavy["load"]["saturated"]
    top = light["load"]["max_requests_per_s"]
    assert heavy["load"]["max_requests_per_s"] == top and 2 < top < 200
    assert heavy["output_tokens_per_s"] <= top * 256 * 1.001  # the engine completes no more than that
    mr = light["max_rate_meeting_sla"]
    assert 0 < mr["requests_per_s"] <= top and mr["limited_by"] in ("ttft", "tpot", "saturation")
    text = cli(*base, "--request-rate", "200").output
    assert "SATURATED" in text
    bad = cli(*base, "--ttft-target-ms", "100")
    assert bad.exit_code == 2  # a target without open-loop traffic
