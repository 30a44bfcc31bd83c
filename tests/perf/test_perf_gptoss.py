"""gpt-oss in the performance model: sliding-window KV, attention sinks, MXFP4 experts (native on
Blackwell, de-quantised on Hopper), and the accuracy reached on its measured runs, which the
calibration never saw (facts/data/measured-gptoss.csv, data.HELD_OUT_FILES)."""

from __future__ import annotations

import math

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate, kv_bytes_per_token, memory, weights_gib
from servewise.engine.domain.perf.architecture import (
    attention_flops_per_token,
    params,
    sink_flops_per_token,
    sliding,
    windowed_prefill,
)
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.data import DEFAULT_FILES, HELD_OUT_FILES, read_rows
from servewise.engine.domain.perf.memory import GIB, Layout, sliding_kv_bytes_per_token
from servewise.engine.domain.perf.precision import weight_format
from servewise.engine.domain.perf.timing import StepModel
from servewise.engine.domain.perf.types import evaluate
from servewise.engine.domain.perf.validate import quantile, validate


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


@pytest.fixture(scope="module")
def oss(cat):
    return cat.model("gpt-oss-120b")


def _sm(cat, model, gpu: str, tp: int = 1, kv: str = "bf16") -> StepModel:
    g = cat.gpu(gpu)
    return StepModel.build(model, g, Layout(tp), "fp4", kv, profile(g, "vllm"))


def test_catalog_reads_the_config(oss, cat):
    # config.json: 36 layers alternating sliding (window 128) / full, 8 KV heads of 64
    assert sliding(oss) == (18, 1024, 128)
    assert oss["kv_layers"] == 18 and oss["attention_sinks"] is True
    assert oss["quantization"] == {"format": "mxfp4", "modules": "experts"}
    assert sliding(cat.model("gpt-oss-20b")) == (12, 1024, 128)
    assert sliding(cat.model("Llama-3.1-70B")) is None


def test_kv_per_token_full_layers_only_without_context(oss):
    # 18 full layers x 8 KV heads x 64 x (K + V) x 2 bytes
    assert kv_bytes_per_token(oss, "bf16") == 18 * 2 * 8 * 64 * 2 == 36_864
    assert sliding_kv_bytes_per_token(oss, "bf16") == 18 * 1024 * 2


def test_sliding_kv_capped_at_the_window(oss):
    full, swa = kv_bytes_per_token(oss, "bf16"), sliding_kv_bytes_per_token(oss, "bf16")
    # below the window every token is kept in the sliding layers too
    assert kv_bytes_per_token(oss, "bf16", context=100) == pytest.approx(full + swa)
    # above it a sequence keeps 128 tokens there: per token the share falls as 128 / context
    for ctx in (1000, 8000, 100_000):
        assert kv_bytes_per_token(oss, "bf16", context=ctx) == pytest.approx(
            full + swa * 128 / ctx)
    # a sequence's KV: linear in the context in the full layers, constant in the sliding ones
    per_seq = [kv_bytes_per_token(oss, "bf16", context=c) * c for c in (1000, 2000, 3000)]
    assert per_seq[1] - per_seq[0] == pytest.approx(full * 1000)
    assert per_seq[2] - per_seq[1] == pytest.approx(full * 1000)


def test_memory_capacity_counts_the_window_per_sequence(oss, cat):
    gpu = cat.gpu("H200")
    kw = dict(tp=1, precision="fp4", tokens_in_flight=0, kv_precision="bf16")
    bare = memory(oss, gpu, **kw)
    for ctx in (500.0, 5000.0):
        m = memory(oss, gpu, context=ctx, **kw)
        per_tok = kv_bytes_per_token(oss, "bf16") + sliding_kv_bytes_per_token(oss, "bf16") * 128 / ctx
        assert m.kv_capacity_tokens == pytest.approx(bare.kv_capacity_tokens
                                                     * kv_bytes_per_token(oss, "bf16") / per_tok,
                                                     rel=1e-6)
        assert m.kv_capacity_tokens < bare.kv_capacity_tokens
    # the printed memory step recomputes its result with the window term
    m = memory(oss, gpu, context=1000.0, **{**kw, "tokens_in_flight": 64_000})
    step = next(s for s in m.steps if s.name == "memory_per_gpu")
    assert "window_kv_b" in step.values
    assert evaluate(step.formula, step.values) == pytest.approx(step.result)


def test_decode_reads_only_the_window_of_sliding_layers(oss, cat):
    sm = _sm(cat, oss, "H200")
    full = sm.kv_tok_gpu
    # beyond the window, 1,000 more tokens of context read 1,000 more tokens of the full layers
    assert sm.kv_read_bytes(1, 3000) - sm.kv_read_bytes(1, 2000) == pytest.approx(full * 1000)
    # within it the sliding layers grow too
    assert sm.kv_read_bytes(1, 100) - sm.kv_read_bytes(1, 50) == pytest.approx(
        (full + sm.window_tok_gpu) * 50)
    assert sm.kv_read_bytes(1, 5000) == pytest.approx(full * 5000 + sm.window_tok_gpu * 128)


def test_sliding_attention_flops_bounded(oss, cat):
    sm = _sm(cat, oss, "H200")
    heads, d = 64, 64
    at = lambda ctx: sm.attention_flops(1, ctx)  # noqa: E731
    # full layers: 18 x 64 heads x 4 x 64 per attended token; sliding ones stop at 128
    assert at(4000) - at(2000) == pytest.approx(18 * heads * 4 * d * 2000)
    assert at(100) - at(50) == pytest.approx(36 * heads * 4 * d * 50)
    # prefill: mean attended tokens of a sliding layer is min(position, 128) averaged
    assert windowed_prefill(oss, 0, 100) == pytest.approx(50)
    assert windowed_prefill(oss, 0, 256) == pytest.approx((128 * 128 / 2 + 128 * 128) / 256)
    assert windowed_prefill(oss, 1000, 500) == 128


def test_attention_sinks_cost_is_tiny(oss):
    sink = sink_flops_per_token(oss)
    assert sink == 36 * 64 * 2 > 0
    # under 0.1 % of the attention at any context above 16 tokens
    for ctx in (17, 1000, 100_000):
        attn = attention_flops_per_token(oss, ctx) + 18 * 64 * 4 * 64 * min(ctx, 128)
        assert sink / attn < 1e-3
    assert sink_flops_per_token(load_catalog().model("Llama-3.1-8B")) == 0.0


def test_mxfp4_experts_bf16_rest(oss):
    wf = weight_format(oss, "fp4")
    assert (wf.dense_bytes, wf.expert_bytes, wf.dense_precision) == (2.0, 0.5 + 1 / 32, "bf16")
    # a model without a stated checkpoint format: NVFP4 (one FP8 scale per 16) on every weight
    llama = load_catalog().model("Llama-3.1-8B")
    assert weight_format(llama, "fp4").expert_bytes == 0.5 + 1 / 16 == weight_format(llama, "fp4").dense_bytes
    # other precisions store every weight at the precision
    assert weight_format(oss, "fp8") == weight_format(None, "fp8")
    p = params(oss)
    expected = (p.experts * (0.5 + 1 / 32) + p.shared * 2 + (p.embedding + p.lm_head) * 2) / GIB
    assert weights_gib(oss, "fp4") == pytest.approx(expected)
    # 4.25 bits per expert weight: about 61 GiB, under a third of the BF16 copy
    assert 59 < weights_gib(oss, "fp4") < 62
    assert weights_gib(oss, "fp4") < weights_gib(oss, "bf16") / 3.5


def test_hopper_dequantises_blackwell_runs_fp4(oss, cat):
    h200, b200 = _sm(cat, oss, "H200"), _sm(cat, oss, "B200")
    # the same MXFP4 bytes are read on both
    assert h200.expert_bytes == b200.expert_bytes
    assert h200.dense_bytes == b200.dense_bytes
    # attention and lm_head GEMMs run BF16 on both (not at a 4-bit rate)
    assert h200.tflops == h200.tflops16 and b200.tflops == b200.tflops16
    assert not h200.low_precision and not b200.low_precision
    # experts: Hopper multiplies the de-quantised weights at its BF16 peak; Blackwell at the
    # measured FP4 kernels' rate, above its BF16 peak
    assert h200.moe_rate[0] == pytest.approx(h200.tflops16)
    assert b200.moe_rate[0] > b200.tflops16 * 1.5
    # the same expert FLOPs: on Hopper at the BF16 peak (x eta_flops x eta_moe), on Blackwell
    # faster than its BF16 peak would give
    f = 1e15
    t16 = f / (b200.tflops16 * 1e12 * b200.prof.eta_flops * b200.prof.eta_moe) * 1e3
    assert b200.compute_ms(0.0, f, 0.0) < t16 / 1.5
    assert h200.compute_ms(0.0, f, 0.0) == pytest.approx(
        f / (h200.tflops16 * 1e12 * h200.prof.eta_flops * h200.prof.eta_moe) * 1e3)


def test_estimate_steps_recompute(oss, cat):
    for gpu in ("H100", "B200"):
        e = estimate(oss, cat.gpu(gpu), tp=2, precision="fp4", isl=2000, osl=500, concurrency=32)
        assert e.fits and e.tpot_ms and e.ttft_ms
        for s in e.steps:
            if isinstance(s.result, (int, float)) and not isinstance(s.result, bool):
                assert math.isclose(evaluate(s.formula, s.values), s.result, rel_tol=1e-6,
                                    abs_tol=1e-9), s.name
        names = {s.name for s in e.steps}
        assert "weights" in names and "decode_bytes" in names
        dec = next(s for s in e.steps if s.name == "decode_bytes")
        assert dec.values["windowed"] == 128


def test_mi355x_native_fp4_inherits_hopper(cat):
    g = cat.gpu("MI355X")
    prof = profile(g, "vllm")
    assert prof.gpu_class == "cdna4-hbm" and not prof.measured
    assert prof.band_widening == 2.0  # no rows: the assumed widening (non-NVIDIA vendor)
    sm = StepModel.build(cat.model("gpt-oss-120b"), g, Layout(1), "fp4", "fp8", prof)
    assert sm.moe_rate[0] == pytest.approx(2 * 5033.2)  # native MXFP4 = 2 x FP8


def test_held_out_of_the_fit():
    assert not set(HELD_OUT_FILES) & set(DEFAULT_FILES)
    _, rows = read_rows(HELD_OUT_FILES[0])
    assert len(rows) == 368 and not [r for r in rows if r.skipped]
    assert {r.model_name for r in rows} == {"gpt-oss-120b"}
    assert {r.kv_precision for r in rows} == {"fp8", "bf16", None}


@pytest.fixture(scope="module")
def held_out():
    return validate(HELD_OUT_FILES)["errors"]


def _ape(errs, metric, **sel):
    x = [abs(e["err"]) for e in errs if e["metric"] == metric
         and all(e[k] == v for k, v in sel.items())]
    return len(x), quantile(x, 0.5)


def test_accuracy_on_unseen_gpt_oss(held_out):
    """The level reached on a model family the calibration never saw (docs/accuracy.md): TPOT
    26.6 %, TTFT 57.2 % median APE over 368 runs; #40 asks 15 % TPOT, not met."""
    n, tpot = _ape(held_out, "tpot_ms")
    assert n == 368 and tpot < 0.29
    n, ttft = _ape(held_out, "ttft_ms")
    assert n == 368 and ttft < 0.60
    # vLLM on H200 (Marlin MXFP4 experts) is the closest: under 20 % for both
    assert _ape(held_out, "tpot_ms", gpu="H200 SXM", backend="vllm")[1] < 0.20
    assert _ape(held_out, "ttft_ms", gpu="H200 SXM", backend="vllm")[1] < 0.20


def test_data_tool_writes_each_run_once():
    from tools.perf.gptoss_data import convert

    base = {"model_path": "openai/gpt-oss-120b", "mode": "agg", "batch_size": "8",
            "silicon_ttft_ms": "50.0", "silicon_tpot_ms": "5.0", "system": "h200_sxm",
            "backend": "vllm", "isl": "1024", "osl": "1024", "tp_size": "2", "pp_size": "1",
            "attention_dp_size": "1", "moe_tp_size": "2", "moe_ep_size": "1",
            "backend_version": "0.18.0", "precision": "fp4", "gemm_quant_mode": "nvfp4",
            "moe_quant_mode": "nvfp4"}
    src = "source_file=2026-03-25.csv; silicon_concurrency=8; measured=2026-03-27"
    sample = [
        {**base, "id": "2026_03_25_gpt_oss_120b_h200_sxm_vllm_c8_1", "silicon_data_source": src},
        {**base, "id": "2026_04_06_gpt_oss_120b_h200_sxm_vllm_c8_2", "silicon_data_source": src},
        {**base, "id": "2026_04_06_gpt_oss_120b_b200_disagg", "mode": "disagg",
         "silicon_data_source": src},
        {**base, "id": "2026_04_06_qwen", "model_path": "Qwen/Qwen3-32B", "silicon_data_source": src},
        {**base, "id": "openai_gpt_oss_120b_h100_gap", "system": "h100_sxm", "backend": "trtllm",
         "silicon_data_source": "source_file=/x/gap.csv; silicon_concurrency=16"},
    ]
    rows, repeats = convert(sample, "0" * 40)
    assert repeats == 1 and len(rows) == 2
    ix, gap = sorted(rows, key=lambda r: r["gpu"], reverse=True)
    assert (ix["gpu"], ix["kv_precision"], ix["concurrency"], ix["precision"]) == (
        "H200 SXM", "bf16", "8", "fp4")
    assert "id=2026_03_25_" in ix["source"] and ix["statistic"] == "median"
    # not an InferenceX run: its recipe (and KV format) is not public
    assert (gap["gpu"], gap["kv_precision"], gap["concurrency"]) == ("H100 SXM", "", "16")
