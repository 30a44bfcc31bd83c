"""Workloads the schema accepts plan (exit 0 or 1) or are refused with exit 2 naming the field,
never an internal error (issue #42): reproducers of each class the probe found, and a
property-based test over workloads generated from the schema itself (tests/workload_strategies.py).

The property test's default profile is small (the suite's time budget); ``SERVEWISE_FUZZ_SCALE=20``
runs twenty times as many. ``tests/bench/probe_workloads.py`` runs thousands in forked processes
with a time and memory budget each (the closing note of #42 quotes it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, ROOT
from hypothesis import HealthCheck, given, settings
from workload_strategies import workloads

from servewise.cli.main import run

SCALE = float(os.environ.get("SERVEWISE_FUZZ_SCALE", "1"))
CUSTOM = {"name": "my-model", "params_b": 7, "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32}


def plan(tmp_path: Path, workload: dict | str, *args: str, capsys=None) -> tuple[int, str, str]:
    path = tmp_path / "w.yaml"
    path.write_text(workload if isinstance(workload, str) else yaml.safe_dump(workload, allow_unicode=True))
    code = run(["plan", str(path), *args])
    out, err = capsys.readouterr() if capsys else ("", "")
    return code, out, err


@pytest.mark.parametrize(("workload", "field", "says"), [
    ({"model": "Stable-Diffusion-v1-5"}, "model", "no transformer dimensions"),
    ({"models": [{"model": "Qwen2.5-7B"}, {"model": "Stable-Diffusion-v1-5"}]}, "models.1.model",
     "no transformer dimensions"),
    ({"models": [{"model": "Qwen2.5-7B"}, {"model": "Qwen2.5-7"}]}, "models.1.model", "did you mean"),
    ({"model": {**CUSTOM, "num_kv_heads": 5}}, "model.num_kv_heads", "multiple of num_kv_heads"),
    ({"model": {**CUSTOM, "num_kv_heads": 64}}, "model.num_kv_heads", "multiple of num_kv_heads"),
    ({"model": {**CUSTOM, "hidden_size": 16}}, "model.hidden_size", "give head_dim"),
    ({"model": {**CUSTOM, "num_experts": 8, "experts_per_token": 8}}, "model.experts_per_token", "dense"),
    ({"model": {**CUSTOM, "active_params_b": 9}}, "model.active_params_b", "part of the total"),
    ({"model": {**CUSTOM, "vocab_size": 10**12}}, "model.vocab_size", "maximum"),
    ({"model": {**CUSTOM, "intermediate_size": 10**12}}, "model.intermediate_size", "maximum"),
    ({"models": [{"model": "Qwen2.5-7B", "peak_qps": 1e12}]}, "models.0.peak_qps", "0.001..100000"),
    ({"models": [{"model": "Qwen2.5-7B", "tenant": 5}]}, "models.0.tenant", "string"),
    ({"models": [{"model": "Qwen2.5-7B"}] * 17}, "models", "at most 16 models"),
    ({"models": None}, "model", "missing required field"),
    ({"model": "Llama-3.1-8B", "traffic": {"peak_qps": 10, "requests_per_day": 10**9}},
     "traffic.requests_per_day", "whole day at the peak"),
])
def test_schema_valid_but_unplannable_inputs_are_refused_naming_the_field(tmp_path, capsys, workload, field, says):
    code, out, err = plan(tmp_path, workload, capsys=capsys)
    assert code == 2, err
    assert f" {field}: " in err and says in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("workload", [
    {"model": "Llama-3.1-8B", "traffic": {"peak_qps": 100000, "avg_input_tokens": 1000000}},
    {"model": "Llama-3.1-405B", "traffic": {"peak_qps": 100000, "avg_input_tokens": 2000000,
                                            "avg_output_tokens": 200000, "max_context_tokens": 2000000}},
    {"model": "Llama-3.1-8B", "mode": "offline", "deployment": {"log_retention_days": 3650},
     "traffic": {"peak_qps": 100000, "avg_input_tokens": 2000000, "avg_output_tokens": 200000}},
    {"model": {**CUSTOM, "num_attention_heads": 1, "hidden_size": 1, "params_b": 31, "num_layers": 2}},
])
def test_in_range_extremes_plan_or_are_refused_in_one_line(tmp_path, capsys, workload):
    """Values at the schema's bounds: a plan (feasible or not), or exit 2 saying which numbers are
    too large for the rules' arithmetic; never exit 3."""
    code, out, err = plan(tmp_path, workload, "--format", "json", capsys=capsys)
    assert code in (0, 1, 2), err
    if code == 2:
        assert "too large to plan" in err and len(err.strip().splitlines()) == 1
    else:
        assert json.loads(out)["workload"]


def test_a_plan_beyond_the_gpu_limit_is_infeasible_with_the_reason(tmp_path, capsys):
    code, out, err = plan(tmp_path, {"model": "Llama-3.1-8B", "traffic": {"peak_qps": 100000,
                                                                          "avg_input_tokens": 1000000}},
                          "--format", "json", capsys=capsys)
    assert code == 1
    rules = {w["rule"] for w in json.loads(out)["warnings"]}
    assert "plan.beyond-plan-scale" in rules or not json.loads(out)["components"]["gpu"].get("count")


@pytest.mark.parametrize("name", ["multi-model-tenants", "saas-five-tenants"])
def test_markdown_report_of_a_several_model_plan(example_plans, name):
    from servewise.cli.render import to_markdown

    text = to_markdown(example_plans[name].plan, "en")
    assert text.startswith("# servewise plan: Qwen2.5-7B + ")


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "shift_jis", "ascii"])
def test_any_output_encoding(encoding):
    """Text replaces what the encoding cannot show; the plan's JSON stays UTF-8 and whole."""
    env = {**os.environ, "PYTHONIOENCODING": encoding, "SERVEWISE_WORKERS": "1"}
    exe = [str(Path(sys.executable).parent / "servewise")]
    example = str(EXAMPLES / "chat-70b-online.yaml")
    text = subprocess.run([*exe, "--lang", "zh", "plan", example], env=env, capture_output=True, cwd=ROOT)
    assert text.returncode == 0, text.stderr[-300:]
    assert b"Traceback" not in text.stderr and text.stdout
    js = subprocess.run([*exe, "--lang", "zh", "plan", example, "--format", "json"], env=env,
                        capture_output=True, cwd=ROOT)
    assert js.returncode == 0
    assert json.loads(js.stdout.decode("utf-8"))["workload"]["model"] == "Llama-3.1-70B"


def test_packing_places_groups_by_count_not_one_by_one():
    """First-fit decreasing by counts: the same servers as placing each group in turn, and the
    work grows with the servers made (100,000 GPUs, the policy's limit, well under a second)."""
    from servewise.engine.domain.fn_packing import Demand, pack_servers

    def reference(demands, capacity):  # one group at a time, first fit, largest size first
        servers: list[list[str]] = []
        groups = sorted(((d.group_size, d.pool) for d in demands for _ in range(d.groups)), key=lambda g: -g[0])
        for size, pool in groups:
            home = next((s for s in servers if len(s) + size <= capacity), None)
            if home is None:
                servers.append(home := [])
            home.extend([pool] * size)
        return servers

    for demands in ([Demand("a", 4, 3), Demand("b", 1, 5), Demand("c", 2, 7)],
                    [Demand("a", 3, 5), Demand("b", 2, 4), Demand("c", 1, 3)],
                    [Demand("a", 8, 2), Demand("b", 1, 1)]):
        got = [[g[0][0] for g in s.gpus] for s in pack_servers(demands, 8)]
        assert got == reference(demands, 8)
    start = time.process_time()  # CPU time of this process: a busy machine does not inflate it
    servers = pack_servers([Demand("a", 1, 60000), Demand("b", 4, 10000)], 8)
    assert time.process_time() - start < 3.0  # placing one GPU group at a time would take minutes
    assert sum(s.used for s in servers) == 100000 and len(servers) == 12500


def test_a_tp_that_cannot_split_the_heads_holds_no_request():
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.perf.serving import max_concurrency

    one_head = {"id": "m", "total_params_b": 1, "num_layers": 2, "hidden_size": 64, "num_attention_heads": 1,
                "num_kv_heads": 1, "head_dim": 64, "vocab_size": 1000, "intermediate_size": 256}
    gpu = load_catalog().gpu("L20")
    assert max_concurrency(one_head, gpu, tp=4, precision="fp8", isl=100, osl=10, ttft_ms=None, tpot_ms=None) == 0
    assert max_concurrency(one_head, gpu, tp=1, precision="fp8", isl=100, osl=10, ttft_ms=None, tpot_ms=None) > 0


@settings(max_examples=max(1, int(12 * SCALE)), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(workloads())
def test_generated_schema_valid_workloads_plan_or_are_refused(tmp_path_factory, data):
    """Any workload the schema accepts: exit 0, 1 or 2 (one line), within the time budget, and the
    same bytes when planned again."""
    folder = tmp_path_factory.mktemp("gen")
    path = folder / "w.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    out = folder / "p.json"
    start = time.perf_counter()
    code = run(["plan", str(path), "--format", "json", "-o", str(out)])
    assert time.perf_counter() - start < 20
    assert code in (0, 1, 2)
    if code in (0, 1):
        first = out.read_bytes()
        assert run(["plan", str(path), "--format", "json", "-o", str(out)]) == code
        assert out.read_bytes() == first
