"""Invariants (hypothesis): more traffic never needs fewer GPUs of the same kind; a bigger model
never needs less memory; the same input gives the same plan."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from servewise.engine.app.inputs import fill_defaults
from servewise.engine.app.plan import plan_workload
from servewise.engine.domain.perf import weights_gib

SLOW = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))


def _gpus(rulebase, qps: float) -> int:
    workload, defaults = fill_defaults({
        "model": "Llama-3.1-8B", "precision": "fp8", "traffic": {"peak_qps": qps},
        "constraints": {"gpu_models": ["L40S"]}})
    plan = plan_workload(workload, defaults, rulebase).plan
    return plan["components"]["gpu"]["count"] if plan["feasible"] else 10**9


@SLOW
@given(st.floats(min_value=0.5, max_value=40), st.floats(min_value=1.0, max_value=3.0))
def test_more_qps_never_needs_fewer_gpus(rulebase, qps, factor):
    assert _gpus(rulebase, qps) <= _gpus(rulebase, qps * factor)


def _model(layers: int, hidden: int) -> dict:
    heads = hidden // 128
    return {"id": "m", "total_params_b": 12 * layers * hidden * hidden / 1e9, "num_layers": layers,
            "hidden_size": hidden, "num_attention_heads": heads, "num_kv_heads": max(1, heads // 4),
            "head_dim": 128, "intermediate_size": 4 * hidden, "vocab_size": 32000, "attention_type": "GQA"}


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 120), st.integers(1, 60), st.sampled_from([1024, 2048, 4096, 8192]),
       st.sampled_from(["bf16", "fp8", "int8", "int4"]))
def test_bigger_model_never_needs_less_memory(layers, extra, hidden, precision):
    assert weights_gib(_model(layers, hidden), precision) <= weights_gib(_model(layers + extra, hidden), precision)


def test_same_input_same_plan(rulebase):
    workload, defaults = fill_defaults({"model": "Qwen2.5-7B", "traffic": {"peak_qps": 3}})
    a = json.dumps(plan_workload(workload, defaults, rulebase).plan, sort_keys=True)
    b = json.dumps(plan_workload(workload, defaults, rulebase).plan, sort_keys=True)
    assert a == b
