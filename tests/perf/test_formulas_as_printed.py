"""Every printed explanation step recomputes its printed result from its printed inputs.

Checked on the performance steps of every example plan (as the plan JSON records them) and on a
sample of the rows `servewise validate` predicts, in closed and open loop (the MoE expert share,
the queue, every time term: what the user reads is what the model computed).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import EXAMPLES

from servewise.engine.domain.perf import estimate
from servewise.engine.domain.perf.data import DEFAULT_FILES, read_rows
from servewise.engine.domain.perf.types import evaluate

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


def _steps(obj: Any) -> list[dict[str, Any]]:
    """All explanation steps (dicts with formula, values and result) inside a plan."""
    out: list[dict[str, Any]] = []
    if isinstance(obj, dict):
        if {"formula", "values", "result"} <= obj.keys() and "name" in obj:
            return [obj]
        for v in obj.values():
            out += _steps(v)
    elif isinstance(obj, list):
        for v in obj:
            out += _steps(v)
    return out


def _check(step: dict[str, Any]) -> None:
    res = step["result"]
    if not isinstance(res, (int, float)) or isinstance(res, bool):
        return
    got = evaluate(step["formula"], step["values"])
    # printed values are rounded to 4 decimals (4 significant digits below 1e-3)
    assert math.isclose(got, res, rel_tol=0.01, abs_tol=2e-3), (
        f"{step['name']}: {step['formula']} with {step['values']} gives {got}, printed {res}")


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_example_plan_steps_recompute(path, example_plans):
    # the plan JSON `plan --format json` prints (tests/test_examples.py checks the CLI gives it)
    steps = _steps(json.loads(example_plans[path.stem].json_text))
    for s in steps:
        _check(s)


def test_example_plans_print_perf_steps(example_plans):
    """The check above is not vacuous: sized plans carry the performance steps."""
    names = {s["name"] for s in _steps(json.loads(example_plans["chat-70b-online"].json_text))}
    assert {"decode_bytes", "decode_step", "prefill", "tpot", "ttft", "weights"} <= names


def _sample_rows(every: int = 23) -> list[Any]:
    rows = []
    for f in DEFAULT_FILES:
        _, rs = read_rows(f)
        rows += [r for r in rs if not r.skipped and not r.prefill_only and not r.offline]
    return rows[::every]


@pytest.mark.parametrize("arrival", ["closed", "poisson"])
def test_validate_rows_steps_recompute(arrival):
    rows = _sample_rows()
    assert len(rows) > 40
    moe = 0
    for r in rows:
        lay = r.layout
        e = estimate(r.model, r.gpu, tp=lay.tp, pp=lay.pp, ep=lay.ep,
                     attention_dp=lay.attention_dp, precision=r.precision, isl=r.isl,
                     osl=r.osl, concurrency=max(1, round(r.concurrency or 1)),
                     backend=r.backend, kv_precision=r.kv_precision, check_memory=False,
                     arrival=arrival).to_dict()
        for s in e["steps"]:
            _check(s)
        moe += any(s["name"] == "experts_touched" for s in e["steps"])
    assert moe > 5


def test_moe_low_batch_reads_touched_experts():
    """Mixtral (k=2 of E=8) at one request reads a quarter of the experts, as printed."""
    from servewise.engine.domain.catalog import load_catalog

    cat = load_catalog()
    e = estimate(cat.model("Mixtral-8x7B"), cat.gpu("L40S"), tp=2, precision="fp8", isl=1024,
                 osl=256, concurrency=1).to_dict()
    st = {s["name"]: s for s in e["steps"]}
    assert st["experts_touched"]["result"] == pytest.approx(2.0)
    v = st["decode_bytes"]["values"]
    assert v["experts_touched_per_gpu"] / v["experts_per_gpu"] == pytest.approx(0.25)
    big = estimate(cat.model("Mixtral-8x7B"), cat.gpu("L40S"), tp=2, precision="fp8",
                   isl=1024, osl=256, concurrency=64).to_dict()
    st64 = {s["name"]: s for s in big["steps"]}
    assert st64["experts_touched"]["result"] == pytest.approx(8.0, rel=1e-3)


def test_validate_honours_request_rate_and_statistic(tmp_path):
    """A row with a request rate is predicted open loop; p99 rows get the queue's P99."""
    from servewise.engine.domain.perf.validate import validate

    head = ("model,gpu,backend,precision,isl,osl,concurrency,request_rate,tp,pp,ttft_ms,tpot_ms,"
            "statistic\n")
    body = ("Llama-3.1-70B,H100 SXM,vllm,fp8,2048,256,8,,4,1,300,20,mean\n"
            "Llama-3.1-70B,H100 SXM,vllm,fp8,2048,256,8,3,4,1,300,20,mean\n"
            "Llama-3.1-70B,H100 SXM,vllm,fp8,2048,256,8,3,4,1,300,20,p99\n"
            "Llama-3.1-70B,H100 SXM,vllm,fp8,2048,256,8,,4,1,300,20,p99\n"
            "Llama-3.1-70B,H100 SXM,vllm,fp8,2048,256,8,,4,1,300,20,p95\n")
    f = tmp_path / "rows.csv"
    f.write_text(head + body, encoding="utf-8")
    rows = validate([f])["rows"]
    closed, open_mean, open_p99, closed_p99, bad = rows
    assert closed["ttft_ms"] != open_mean["ttft_ms"]
    assert open_p99["ttft_ms"] > open_mean["ttft_ms"] and open_p99["tpot_ms"] is None
    assert closed_p99["skipped"] and "p99" in closed_p99["skipped"]
    assert bad["skipped"] and "statistic" in bad["skipped"]
