"""CLI contract of `estimate` and `validate` (CONTRACTS §2)."""

import json

import pytest
from click.testing import CliRunner

from servewise.cli.perf_commands import estimate_cmd, validate_cmd

ARGS = ["--model", "Llama-3.1-70B", "--gpu", "H200 SXM", "--tp", "4", "--precision", "fp8",
        "--isl", "1024", "--osl", "256", "--concurrency", "32"]


@pytest.fixture
def run():
    return lambda cmd, args: CliRunner().invoke(cmd, args)


def test_estimate_json_contract(run):
    r = run(estimate_cmd, [*ARGS, "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert isinstance(d["ttft_ms"], float) and isinstance(d["tpot_ms"], float)
    assert isinstance(d["output_tokens_per_s"], float) and d["fits"] is True
    assert set(d["memory"]) >= {"weights_gib", "kv_cache_gib", "total_gib", "per_gpu_gib"}


def test_estimate_text_shows_band_and_formulas(run):
    r = run(estimate_cmd, ARGS)
    assert r.exit_code == 0
    assert "band" in r.output and "TPOT" in r.output and "t_decode_ms = " in r.output


def test_estimate_attention_dp(run):
    """--attention-dp: each rank holds its own requests; the TTFT carries the lockstep wait."""
    base = ["--model", "DeepSeek-V3", "--gpu", "B200", "--ep", "8", "--precision", "fp4",
            "--isl", "1024", "--osl", "1024", "--concurrency", "128", "--backend", "trtllm",
            "--format", "json"]
    adp = json.loads(run(estimate_cmd, [*base, "--tp", "1", "--attention-dp", "8"]).output)
    tp8 = json.loads(run(estimate_cmd, [*base, "--tp", "8"]).output)
    assert adp["inputs"]["attention_dp"] == 8 and adp["inputs"]["n_gpus"] == 8
    assert adp["memory"]["kv_cache_gib"] < tp8["memory"]["kv_cache_gib"]  # MLA not replicated
    assert adp["ttft_ms"] > tp8["ttft_ms"]
    ttft = next(s for s in adp["steps"] if s["name"] == "ttft")
    assert ttft["values"]["dp_wait_ms"] > 0
    text = run(estimate_cmd, [*base[:-2], "--tp", "1", "--attention-dp", "8"]).output
    assert "attention-dp 8" in text


def test_estimate_case_insensitive_names(run):
    r = run(estimate_cmd, ["--model", "llama-3.1-70b", "--gpu", "h200 sxm", *ARGS[4:],
                           "--format", "json"])
    assert r.exit_code == 0, r.output


def test_estimate_does_not_fit(run):
    r = run(estimate_cmd, ["--model", "Llama-3.1-70B", "--gpu", "L40S", "--tp", "1",
                           "--precision", "bf16", "--isl", "1024", "--osl", "256",
                           "--concurrency", "1", "--format", "json"])
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert d["fits"] is False and d["reason"] and d["ttft_ms"] is None


@pytest.mark.parametrize("bad, needle", [
    (["--model", "Llama-9000"], "--model"),
    (["--gpu", "H300"], "--gpu"),
    (["--precision", "fp3"], "--precision"),
    (["--tp", "0"], "--tp"),
    (["--tp", "3"], "64 attention heads"),  # Llama-3.1-70B: no engine splits 64 heads 3 ways
])
def test_estimate_bad_input_exit_2(run, bad, needle):
    args = list(ARGS)
    i = args.index(bad[0])
    args[i + 1] = bad[1]
    r = run(estimate_cmd, args)
    assert r.exit_code == 2
    assert needle in r.output
    assert "Traceback" not in r.output


def test_unknown_model_suggests(run):
    args = list(ARGS)
    args[1] = "Llama-3.1-70"
    r = run(estimate_cmd, args)
    assert r.exit_code == 2 and "did you mean" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_validate_json_rows(run, tmp_path):
    src = open(__import__("servewise.engine.domain.perf.data", fromlist=["x"]).DEFAULT_FILES[0]).read()
    lines = src.splitlines()
    f = tmp_path / "m.csv"
    f.write_text("\n".join(lines[:6]) + "\n")
    r = run(validate_cmd, ["--data", str(f), "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert [x["row"] for x in d["rows"]] == [0, 1, 2, 3, 4]
    assert all(x["tpot_ms"] > 0 and x["skipped"] is None for x in d["rows"])
    assert "overall" in d["summary"]


def _validate(run, tmp_path, csv_text: str, *args: str):
    f = tmp_path / "rows.csv"
    f.write_text(csv_text)
    r = run(validate_cmd, ["--data", str(f), *args])
    assert r.exit_code == 0, r.output
    return r


def test_validate_text(run, tmp_path):
    r = _validate(run, tmp_path, "model,gpu,n_gpus,framework,precision,tp,input_len,output_len,"
                  "concurrency_or_batch,ttft_ms,tpot_or_itl_ms,output_tokens_per_s_total\n"
                  "Llama-3.1-8B,H100 SXM,1,vLLM,BF16,1,1000,200,8,100,8,900\n"
                  "Nope-1B,H100 SXM,1,vLLM,BF16,1,1000,200,8,100,8,900\n", "--rows")
    assert "median" in r.output and "p90" in r.output and "skipped" in r.output


def test_validate_prints_a_summary_unless_asked_for_rows(run, tmp_path):
    """Issue 39 item 4: the rows compared and not, the error per metric and per group; --rows adds
    a line per row with its error or why it was not compared."""
    csv = ("model,gpu,n_gpus,framework,precision,tp,input_len,output_len,"
           "concurrency_or_batch,ttft_ms,tpot_or_itl_ms,output_tokens_per_s_total\n"
           + "Llama-3.1-8B,H100 SXM,1,vLLM,BF16,1,1000,200,8,100,8,900\n" * 3
           + "Nope-1B,H100 SXM,1,vLLM,BF16,1,1000,200,8,100,8,900\n")
    summary = _validate(run, tmp_path, csv).output
    rows = _validate(run, tmp_path, csv, "--rows").output
    assert "3 of 4 rows compared, 1 not compared (rows.csv)" in summary
    assert "skipped" not in summary and "Nope-1B" not in summary and "--rows" in summary
    assert "by model: median" in summary and "Llama-3.1-8B" in summary and "(3)" in summary
    assert "skipped: " in rows and rows.count("rows.csv") >= 4


def test_validate_bad_file_exit_2(run, tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    r = run(validate_cmd, ["--data", str(f)])
    assert r.exit_code == 2 and "--data" in r.output and "Traceback" not in r.output
    r = run(validate_cmd, ["--data", str(tmp_path / "missing.csv")])
    assert r.exit_code == 2


def test_estimate_open_loop_cli(run):
    """--request-rate runs the open-loop queue: mean and P99 TTFT, requests in flight printed."""
    r = run(estimate_cmd, [*ARGS, "--request-rate", "4", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["inputs"]["arrival"] == "poisson" and d["inputs"]["request_rate"] == 4
    assert d["ttft_p99_ms"] > d["ttft_ms"] > 0
    assert any(s["name"] == "in_flight" for s in d["steps"])
    t = run(estimate_cmd, [*ARGS, "--arrival", "poisson"])
    assert t.exit_code == 0 and "TTFT p99" in t.output and "open loop" in t.output
    bad = run(estimate_cmd, [*ARGS, "--request-rate", "0"])
    assert bad.exit_code == 2


def test_validate_names_a_measurement_it_leaves_out(run, tmp_path):
    """A row whose TTFT is not compared says why, in text and JSON; its TPOT is compared."""
    text = ("model,gpu,backend,backend_version,precision,isl,osl,concurrency,tp,pp,"
            "attention_dp,moe_tp,moe_ep,ttft_ms,tpot_ms,source\n"
            "DeepSeek-R1,B200,sglang,,fp4,8192,1024,8,8,1,1,8,1,9188.19,14.823,"
            "id=2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_8192x1024_c8_tp8_ep1_6\n")
    r = _validate(run, tmp_path, text, "--rows")
    assert "TTFT not compared" in r.output and "tpot_ms" in r.output
    d = json.loads(_validate(run, tmp_path, text, "--format", "json").output)
    (row,) = d["rows"]
    assert row["ttft_ms"] is None and row["tpot_ms"] > 0 and "no warm-up" in row["note"]


def test_estimate_request_lengths_cli(run):
    """--request-lengths random takes the full interference in a closed loop (never a lower
    TPOT than fixed lengths); it names itself on the workload line; open loop refuses it (2)."""
    sg = ["--model", "DeepSeek-R1", "--gpu", "B200", "--tp", "8", "--precision", "fp8",
          "--backend", "sglang", "--isl", "7372", "--osl", "922", "--concurrency", "64",
          "--format", "json"]
    fixed = json.loads(run(estimate_cmd, sg).output)
    rand = json.loads(run(estimate_cmd, [*sg, "--request-lengths", "random"]).output)
    assert fixed["inputs"]["request_lengths"] == "fixed"
    assert rand["inputs"]["request_lengths"] == "random"
    assert rand["tpot_ms"] > fixed["tpot_ms"] and rand["ttft_ms"] > 0
    t = run(estimate_cmd, [*ARGS, "--request-lengths", "random"])
    assert t.exit_code == 0 and "(closed loop, random lengths)" in t.output
    bad = run(estimate_cmd, [*ARGS, "--arrival", "poisson", "--request-lengths", "fixed"])
    assert bad.exit_code == 2 and "--request-lengths: applies to a closed loop" in bad.output


def test_every_estimated_latency_names_its_statistic(run):
    """Issue 39 item 3: the mean is called the mean, the P99 the P99, each with its band; the open-
    loop numbers are the plan's for the same configuration (tests/test_plan_consistency.py)."""
    t = run(estimate_cmd, [*ARGS, "--arrival", "poisson"])
    assert t.exit_code == 0, t.output
    lines = [x.strip() for x in t.output.split("how:")[0].splitlines() if x.strip().startswith(("TTFT", "TPOT"))]
    assert [x.split(":")[0] for x in lines] == ["TTFT mean", "TTFT p99", "TPOT mean"], lines
    assert all("(band " in x for x in lines), lines
