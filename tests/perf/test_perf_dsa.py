"""DeepSeek sparse attention (DSA: GLM-5.x, DeepSeek-V3.2) with hand-checked numbers."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import kv_bytes_per_token
from servewise.engine.domain.perf.architecture import (
    attended_context,
    attention_flops_per_token,
    dsa,
    indexer_flops_per_token,
    sparse_mla_flops_per_head,
    sparse_prefill_attended,
)
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.timing import (
    DSA_INDEXER_FLOOR_US,
    SPARSE_MLA_KERNEL_EFF,
    StepModel,
)


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _sm(cat, model: str, tp: int) -> StepModel:
    gpu = cat.gpu("B200")
    return StepModel.build(cat.model(model), gpu, Layout(tp), "fp8", "fp8", profile(gpu, "sglang"))


def test_only_mla_models_with_an_indexer_are_sparse(cat):
    assert dsa(cat.model("GLM-5")) == (32, 128, 2048)
    assert dsa(cat.model("DeepSeek-V3.2")) == (64, 128, 2048)
    assert dsa(cat.model("DeepSeek-V3")) is None and dsa(cat.model("Llama-3.1-8B")) is None
    assert attended_context(cat.model("GLM-5"), 8000) == 2048
    assert attended_context(cat.model("GLM-5"), 1000) == 1000
    assert attended_context(cat.model("DeepSeek-V3"), 8000) == 8000


def test_index_keys_are_cached_for_every_token(cat):
    # MLA latent (512 + 64) x 78 layers at FP8, plus FP8 index keys and scales 78 x (128 + 4)
    assert kv_bytes_per_token(cat.model("GLM-5"), "fp8") == (512 + 64) * 78 + 78 * 132
    assert kv_bytes_per_token(cat.model("GLM-5"), "bf16") == (512 + 64) * 78 * 2 + 78 * 132


def test_decode_reads_topk_latents_and_every_index_key(cat):
    sm = _sm(cat, "GLM-5", 8)
    assert sm.kv_tok_gpu == (512 + 64) * 78 and sm.index_tok_gpu == 78 * 132
    assert sm.kv_read_bytes(16, 8000) == 16 * ((512 + 64) * 78 * 2048 + 78 * 132 * 8000)
    assert sm.kv_read_bytes(16, 1000) == 16 * ((512 + 64) * 78 * 1000 + 78 * 132 * 1000)
    dense = _sm(cat, "DeepSeek-V3", 8)  # no indexer: every token, nothing else
    assert dense.index_tok_gpu == 0 and dense.kv_read_bytes(16, 8000) == 16 * dense.kv_tok_gpu * 8000


def test_indexer_floor_per_layer_and_replicated_scores(cat):
    glm, ds = _sm(cat, "GLM-5", 8), _sm(cat, "DeepSeek-V3", 8)
    prof = glm.prof
    base = prof.t_step_ms + 78 * (prof.t_layer_us + prof.t_moe_layer_us) / 1e3 + 4 * prof.t_seq_us / 1e3
    assert glm.overhead_ms(4) == pytest.approx(base + 78 * DSA_INDEXER_FLOOR_US / 1e3)
    assert ds.dsa_layers == 0
    # the indexer's scores are computed whole on every TP rank, the heads' attention split by TP
    idx = indexer_flops_per_token(cat.model("GLM-5"), 4000)
    assert idx == 78 * 2 * 32 * 128 * 4000
    one, eight = _sm(cat, "GLM-5", 1), glm
    assert one.attention_flops(1, 4000) - idx == pytest.approx(8 * (eight.attention_flops(1, 4000) - idx))


def test_prefill_top_k_reads_and_writes_every_score(cat):
    sm = _sm(cat, "GLM-5", 8)
    pf = sm.prefill(8192)
    assert pf["t_topk"] == pytest.approx(sm.mem_ms(78 * 8192 * 4096 * 16))
    assert _sm(cat, "DeepSeek-V3", 8).prefill(8192)["t_topk"] == 0


def test_prefill_attended_tokens_are_the_mean_of_min_position_topk(cat):
    glm = cat.model("GLM-5")
    # a prompt of 8,192 tokens: positions 0..2048 attend to themselves (mean 1,024), the rest to 2,048
    assert sparse_prefill_attended(glm, 0, 8192) == pytest.approx((2048 * 1024 + 6144 * 2048) / 8192)
    assert sparse_prefill_attended(glm, 0, 1000) == 500  # shorter than top-k: the causal mean
    assert sparse_prefill_attended(glm, 4000, 1000) == 2048  # every position past top-k
    # the closed form against a sum over positions (continuous positions i + 0.5)
    exact = sum(min(i + 0.5, 2048) for i in range(1500, 3500)) / 2000
    assert sparse_prefill_attended(glm, 1500, 2000) == pytest.approx(exact, rel=1e-9)
    assert sparse_prefill_attended(cat.model("DeepSeek-V3"), 0, 8192) == 4096  # dense MLA


def test_sparse_prefill_runs_absorbed_mla_with_kernel_padded_heads(cat):
    """GLM-5 has 64 heads: 8 per GPU at TP 8, run as 128 on Blackwell (FlashMLA sparse on
    SM100) and 64 on Hopper; the absorbed form costs 2 x (512 + 64) + 2 x 512 FLOPs per head
    and attended token."""
    glm = cat.model("GLM-5")
    per_head = 2 * (512 + 64) + 2 * 512
    assert sparse_mla_flops_per_head(glm) == per_head
    tokens = 7372.0
    attended = sparse_prefill_attended(glm, 0, tokens)
    idx = indexer_flops_per_token(glm, tokens / 2)
    for gpu, heads in (("B200", 128), ("H200 SXM", 64), ("RTX PRO 6000 Blackwell Server", 8)):
        g = cat.gpu(gpu)
        sm = StepModel.build(glm, g, Layout(8), "fp8", "fp8", profile(g, "sglang"))
        assert sm.prefill_heads == heads
        sparse = tokens * 78 * heads * per_head * attended
        assert sm.sparse_prefill_flops(tokens, tokens / 2) == pytest.approx(sparse)
        assert sm.attention_flops(tokens, tokens / 2, decode=False) == pytest.approx(
            sparse + tokens * idx)
    # decode keeps the heads split by TP (no padding: the decode kernels take any head count)
    b200 = _sm(cat, "GLM-5", 8)
    assert b200.attention_flops(1, 4000) == pytest.approx(
        78 * 64 * per_head * 2048 / 8 + indexer_flops_per_token(glm, 4000))


def test_sparse_prefill_runs_at_the_kernels_measured_bf16_rate(cat):
    """FlashMLA's sparse prefill: up to 640 TFLOPS on H800 (BF16 peak 989) and 1,450 on B200
    (2,250); the rest of the prefill keeps the fitted efficiencies."""
    glm = cat.model("GLM-5")
    g = cat.gpu("B200")
    sm = StepModel.build(glm, g, Layout(8), "fp8", "fp8", profile(g, "sglang"))
    assert SPARSE_MLA_KERNEL_EFF == {"hopper-hbm": 0.647, "blackwell-hbm": 0.644}
    tokens = 7372.0
    pf = sm.prefill(tokens)
    sparse = sm.sparse_prefill_flops(tokens, tokens / 2)
    assert pf["sparse_flops"] == sparse > 0
    t_sparse = sparse / (sm.tflops16 * 1e12 * 0.644) * 1e3
    assert pf["t_compute"] == pytest.approx(
        sm.compute_ms(pf["gemm_flops"], pf["moe_flops"], pf["attn_flops"] - sparse) + t_sparse
        + sm.route_ms(tokens))
    # a GPU class without the kernel runs the same FLOPs through the fitted attention rate
    r = cat.gpu("RTX PRO 6000 Blackwell Server")
    other = StepModel.build(glm, r, Layout(8), "fp4", "fp8", profile(r, "sglang"))
    assert other.sparse_kernel_eff is None
    o = other.prefill(tokens)
    assert o["t_compute"] == pytest.approx(other.compute_ms(o["gemm_flops"], o["moe_flops"],
                                                            o["attn_flops"]) + other.route_ms(tokens))


def test_short_prompts_prefill_dense_except_glm5_on_blackwell(cat):
    """SGLang prefills a DSA batch whose sequences fit in the top-k with dense MHA (top-k is all
    of them); on Blackwell its dense kernel takes only DeepSeek's 192 / 128 heads, so GLM-5
    (256-wide values) stays sparse there."""
    glm, v32 = cat.model("GLM-5"), cat.model("DeepSeek-V3.2")

    def sm(model, gpu):
        g = cat.gpu(gpu)
        return StepModel.build(model, g, Layout(8), "fp8", "fp8", profile(g, "sglang"))

    h_glm, b_glm, b_v32 = sm(glm, "H200 SXM"), sm(glm, "B200"), sm(v32, "B200")
    assert h_glm.dense_prefill(2048) and not h_glm.dense_prefill(2049)
    assert not b_glm.dense_prefill(1000) and b_v32.dense_prefill(1000)
    assert h_glm.sparse_prefill_flops(1000, 500) == 0  # dense: the expanded MLA of every token
    assert h_glm.attention_flops(1000, 500, decode=False) == pytest.approx(
        1000 * (attention_flops_per_token(glm, 500, decode=False) / 8
                + indexer_flops_per_token(glm, 500)))
    assert b_glm.sparse_prefill_flops(1000, 500) > 0
