"""Issue #40 item 3: the harness's client cost as a named term, and the saturated open loop."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest
from click.testing import CliRunner

from servewise.cli.main import cli
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.bench_formats import HARNESS_OF_FORMAT
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.data import DEFAULT_FILES, benchmark_harness, read_measured, read_rows
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.serving import (
    HARNESSES,
    check_harness,
    default_harness,
    predict_state,
    saturated_ttft,
)
from servewise.engine.domain.perf.validate import predict_row

CAT = load_catalog()
M70, H100 = CAT.model("Llama-3.1-70B"), CAT.gpu("H100 SXM")
LAY = Layout(4, 1, 1, 1)
KW = dict(precision="fp8", isl=1024, osl=256, backend="vllm")


def test_harnesses_and_default():
    assert HARNESSES == ("openai-http", "in-process")
    assert default_harness() == "openai-http"
    assert check_harness(" In-Process ") == "in-process"
    with pytest.raises(ValueError, match="harness 'grpc': expected one of openai-http, in-process"):
        check_harness("grpc")


def test_in_process_pays_no_client_cost():
    """The same closed-loop run without the HTTP server in front: TTFT is shorter by exactly the
    profile's t_request_ms (the openai-http client cost); TPOT does not change."""
    http = predict_state(M70, H100, LAY, concurrency=1, **KW)
    inproc = predict_state(M70, H100, LAY, concurrency=1, harness="in-process", **KW)
    t_req = profile(H100, "vllm").t_request_ms
    assert t_req > 1
    assert http[0] - inproc[0] == pytest.approx(t_req)
    assert http[1] == inproc[1]
    # in the open loop too (front of the queue's TTFT and its P99)
    o_http = predict_state(M70, H100, LAY, concurrency=1, request_rate=2.0, **KW)[3]
    o_in = predict_state(M70, H100, LAY, concurrency=1, request_rate=2.0, harness="in-process",
                         **KW)[3]
    assert o_http["ttft"] - o_in["ttft"] == pytest.approx(t_req, rel=1e-3)
    assert o_http["ttft_p99"] - o_in["ttft_p99"] == pytest.approx(t_req, rel=1e-3)


def test_shipped_rows_carry_their_sources_harness():
    """Every measured.csv-layout row ran through an HTTP server (InferenceX benchmark_serving,
    aiconfigurator's aiperf against Dynamo); the engine benchmarks of benchmarks*.csv ran in
    process, the AIPerf / vLLM-serve rows did not."""
    seen: dict[str, set[str]] = {}
    for f in DEFAULT_FILES:
        _, rows = read_rows(f)
        seen[f.name] = {r.harness for r in rows}
    assert seen["measured.csv"] == seen["measured-extra.csv.gz"] == {"openai-http"}
    assert seen["benchmarks-extra.csv.gz"] == {"in-process"}
    assert seen["benchmarks.csv"] == {"openai-http", "in-process"}
    assert benchmark_harness({"framework": "NVIDIA NIM 1.8.0", "scenario": "online (AIPerf, fixed concurrency)"}) == "openai-http"
    assert benchmark_harness({"framework": "TensorRT-LLM v0.5", "scenario": "single-stream prefill (batch 1)"}) == "in-process"
    assert benchmark_harness({"framework": "vLLM nightly", "scenario": "offline latency (fixed batch 8)"}) == "in-process"
    assert HARNESS_OF_FORMAT["trtllm-bench"] == "in-process"
    assert HARNESS_OF_FORMAT["vllm-bench"] == "openai-http"


def _row(**cols: str) -> dict[str, str]:
    base = {"model": "Llama-3.1-70B", "gpu": "H100 SXM", "backend": "vllm", "precision": "fp8",
            "isl": "1024", "osl": "256", "concurrency": "8", "tp": "4", "pp": "1",
            "ttft_ms": "100", "tpot_ms": "15"}
    return {**base, **cols}


def test_harness_column_sets_the_client_cost():
    http, inproc, bad = read_measured([_row(), _row(harness="in-process"), _row(harness="grpc")])
    assert (http.harness, inproc.harness) == ("openai-http", "in-process")
    assert bad.skipped == "harness 'grpc': expected one of openai-http, in-process"
    t_req = profile(H100, "vllm").t_request_ms
    assert predict_row(http)["ttft_ms"] - predict_row(inproc)["ttft_ms"] == pytest.approx(t_req)


def test_saturated_open_loop():
    """Above the largest sustainable rate TPOT stays at the full batch's step whatever the
    offered rate, and TTFT grows by (offered / sustainable - 1) per unit of the overload's
    time; below it the state is steady."""
    states = [predict_state(M70, H100, LAY, concurrency=1, request_rate=r, **KW)[3]
              for r in (10.0, 40.0, 80.0)]
    top = states[0]["lam_max"] * 1e3
    assert 10.0 < top < 40.0
    low, hi1, hi2 = states
    assert not low.get("saturated") and hi1["saturated"] and hi2["saturated"]
    assert hi1["tpot"] == hi2["tpot"] > low["tpot"]
    assert hi1["c_rank"] == hi1["batch_cap"]
    assert hi1["ttft_growth"] == pytest.approx(40.0 / top - 1)
    assert hi2["ttft_growth"] == pytest.approx(80.0 / top - 1)
    run = 60_000.0
    assert saturated_ttft(hi1, run) == pytest.approx(hi1["ttft"] + hi1["ttft_growth"] * run / 2)
    assert saturated_ttft(hi1, run, "p99") == pytest.approx(hi1["ttft_p99"] + hi1["ttft_growth"] * 0.99 * run)
    assert saturated_ttft(hi2, run) > saturated_ttft(hi1, run) > hi1["ttft"]


def test_saturated_wait_matches_a_simulated_overloaded_queue():
    """The fluid growth of the wait against a Lindley recursion: Poisson arrivals at 1.5 x a
    deterministic server's rate, 20,000 requests; mean and P99 wait over the run."""
    rng = random.Random(7)
    mu, lam, n = 1.0, 1.5, 20_000
    t = free = 0.0
    waits = []
    for _ in range(n):
        t += rng.expovariate(lam)
        start = max(t, free)
        waits.append(start - t)
        free = start + 1 / mu
    s = {"ttft": 0.0, "ttft_p99": 0.0, "ttft_growth": lam / mu - 1}
    run = n / lam
    waits.sort()
    assert sum(waits) / n == pytest.approx(saturated_ttft(s, run), rel=0.03)
    assert waits[int(0.99 * n)] == pytest.approx(saturated_ttft(s, run, "p99"), rel=0.03)


def test_validate_predicts_a_saturated_runs_ttft_from_its_length():
    """A row above the sustainable rate gets a TTFT only with the number of requests it sent
    (the wait grows for as long as arrivals continue); its TPOT always."""
    short, long_, unknown = read_measured([
        _row(request_rate="60", num_requests="600"), _row(request_rate="60", num_requests="3000"),
        _row(request_rate="60")])
    ps, pl, pu = predict_row(short), predict_row(long_), predict_row(unknown)
    assert pu["ttft_ms"] is None and "no steady value" in pu["note"]
    assert pu["tpot_ms"] == ps["tpot_ms"] == pl["tpot_ms"]
    assert pl["ttft_ms"] > ps["ttft_ms"] > 0
    assert "saturated: 60 requests/s offered" in ps["note"]


def test_estimate_cli_harness_and_saturation():
    args = ["estimate", "--model", "Llama-3.1-70B", "--gpu", "H100 SXM", "--tp", "4",
            "--precision", "fp8", "--isl", "1024", "--osl", "256", "--concurrency", "8",
            "--format", "json"]
    r = CliRunner()
    http = json.loads(r.invoke(cli, args).output)
    inproc = json.loads(r.invoke(cli, [*args, "--harness", "in-process"]).output)
    assert http["inputs"]["harness"] == "openai-http" and inproc["inputs"]["harness"] == "in-process"
    assert http["ttft_ms"] - inproc["ttft_ms"] == pytest.approx(profile(H100, "vllm").t_request_ms, rel=1e-3)
    sat = json.loads(r.invoke(cli, [*args, "--request-rate", "80"]).output)
    assert sat["load"]["saturated"] and sat["load"]["ttft_growth_ms_per_s"] > 0
    assert sat["load"]["ttft_growth_ms_per_s"] == pytest.approx(
        (sat["load"]["utilisation"] - 1) * 1e3, rel=1e-3)
    text = r.invoke(cli, args[:-2] + ["--request-rate", "80"]).output
    assert "SATURATED" in text and "for every second of overload" in text
    bad = r.invoke(cli, [*args, "--harness", "grpc"])
    assert bad.exit_code == 2


def test_bench_results_carry_harness_and_requests(tmp_path):
    from servewise.engine.domain.perf.bench_formats import read_results

    doc = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": 200,
           "completed": 198, "max_concurrency": None, "request_rate": 12.0,
           "total_input_tokens": 198 * 1000, "total_output_tokens": 198 * 200,
           "output_throughput": 2000.0, "median_ttft_ms": 80.0, "mean_ttft_ms": 90.0,
           "median_tpot_ms": 12.0, "mean_tpot_ms": 12.5}
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    (rec,) = read_results(p)
    assert rec["harness"] == "openai-http" and rec["num_requests"] == "198"
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rec))
    w.writeheader()
    w.writerow({**rec, "gpu": "H100 SXM", "precision": "bf16", "tp": "1", "pp": "1",
                "model": "Llama-3.1-8B"})
    (row,) = read_measured(list(csv.DictReader(io.StringIO(out.getvalue()))))
    assert (row.harness, row.num_requests, row.request_rate) == ("openai-http", 198.0, 12.0)
