"""The performance model's memos (issue #41 item 6): a search over disaggregated worker counts
solves each pool once per size, and a step model computes its per-context factors once; both give
the numbers computed without them, bit for bit, and never those of other inputs."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import disagg as disagg_mod
from servewise.engine.domain.perf.architecture import (
    attended_context,
    attention_flops_per_token,
    indexer_flops_per_token,
    windowed,
)
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.disagg import Pool, predict_disagg
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.precision import default_kv_precision
from servewise.engine.domain.perf.timing import StepModel

LAY = Layout(1, 1, 8, 8)  # attention DP 8 x EP 8, as the planner's disaggregated workers


@pytest.fixture(scope="module")
def v3():
    cat = load_catalog()
    return cat.model("DeepSeek-V3"), cat.gpu("GB200"), cat.gpu("B200")


def _predict(m, g, p, d, memo=None, isl=2000, osl=800, **kw):
    args = {"request_rate": 40.0} if "concurrency" not in kw else {}
    return predict_disagg(m, Pool(g, LAY, p), Pool(g, LAY, d), precision="fp8", isl=isl, osl=osl,
                          backend="sglang", memo=memo, **args, **kw)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key  # exact: floats bit for bit


@pytest.mark.parametrize("gpu", [1, 2])  # GB200: the KV link changes with the pools' size (NVL72)
def test_a_search_with_the_memo_gives_every_state_as_without_it(v3, gpu):
    m, g = v3[0], v3[gpu]
    memo: dict = {}
    for d in (1, 3, 8, 30):
        for p in (1, 2, 5, 9, 40, 256):
            _same(_predict(m, g, p, d, memo), _predict(m, g, p, d))


def test_a_closed_loop_with_the_memo_gives_the_same_state(v3):
    m, g = v3[0], v3[2]
    memo: dict = {}
    for p, d in ((1, 4), (2, 4), (2, 6)):
        _same(_predict(m, g, p, d, memo, concurrency=96.0), _predict(m, g, p, d, concurrency=96.0))


def test_the_decode_pool_is_solved_once_for_every_prefill_size(v3, monkeypatch):
    m, g = v3[0], v3[2]
    calls = []
    real = disagg_mod._decode_step
    monkeypatch.setattr(disagg_mod, "_decode_step", lambda *a: calls.append(a) or real(*a))
    memo: dict = {}
    _predict(m, g, 1, 6, memo)
    solved = len(calls)
    assert solved > 1  # the fixed point took steps
    for p in range(2, 12):
        _predict(m, g, p, 6, memo)
    assert len(calls) == solved  # the same decode pool (B200: NIC link at any size): no new step
    _predict(m, g, 3, 7, memo)
    assert len(calls) > solved  # another decode size is solved


def test_a_memo_is_not_used_for_other_inputs(v3):
    """A memo filled for one deployment and then given another (longer prompts, another GPU,
    another precision) gives that deployment's own numbers, not the remembered ones."""
    m, gb200, b200 = v3
    memo: dict = {}
    _predict(m, b200, 2, 6, memo)
    _same(_predict(m, b200, 2, 6, memo, isl=4000), _predict(m, b200, 2, 6, isl=4000))
    _same(_predict(m, gb200, 2, 6, memo), _predict(m, gb200, 2, 6))
    fresh = predict_disagg(m, Pool(b200, LAY, 2), Pool(b200, LAY, 6), precision="fp4", isl=2000,
                           osl=800, backend="sglang", request_rate=40.0)
    again = predict_disagg(m, Pool(b200, LAY, 2), Pool(b200, LAY, 6), precision="fp4", isl=2000,
                           osl=800, backend="sglang", request_rate=40.0, memo=memo)
    _same(again, fresh)
    assert _predict(m, b200, 2, 6, memo)["tpot"] != fresh["tpot"]  # fp8 again: not fp4's state


def _step_model(model: str, gpu: str, precision: str, lay: Layout) -> StepModel:
    cat = load_catalog()
    m, g = cat.model(model), cat.gpu(gpu)
    return StepModel.build(m, g, lay, precision, default_kv_precision(g, precision), profile(g, "vllm"))


@pytest.mark.parametrize("model,gpu,precision,lay", [
    ("Llama-3.1-8B", "L40S", "bf16", Layout(1)),            # dense attention
    ("gpt-oss-120b", "H100 SXM", "fp4", Layout(2)),         # sliding-window layers and sinks
    ("DeepSeek-V3.2", "H200 SXM", "fp8", Layout(1, 1, 8, 8)),  # DSA: top-k attention, indexer
])
def test_the_per_context_factors_are_the_formulas(model, gpu, precision, lay):
    """A step model's decode attention FLOPs and KV bytes read are computed once per context:
    what it gives, first and later, is the formula's value at that context, exactly."""
    sm = _step_model(model, gpu, precision, lay)
    for context in (1.0, 700.0, 4096.0, 100000.0):
        if sm.dsa_layers:
            attn = (attention_flops_per_token(sm.model, context) / sm.lay.tp
                    + indexer_flops_per_token(sm.model, context))
            kv = sm.kv_tok_gpu * attended_context(sm.model, context) + sm.index_tok_gpu * context
        else:
            attn = (attention_flops_per_token(sm.model, context) / sm.lay.tp
                    + sm.window_flops(context, 1.0, True))
            kv = sm.kv_tok_gpu * context + sm.window_tok_gpu * windowed(sm.model, context)
        for batch in (1.0, 3.0, 57.5):
            for _ in range(2):  # computed, then remembered
                assert sm.attention_flops(batch, context) == batch * attn
                assert sm.kv_read_bytes(batch, context) == batch * kv
    assert sm.decode(8.0, 700.0) == _step_model(model, gpu, precision, lay).decode(8.0, 700.0)
