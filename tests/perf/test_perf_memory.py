"""Memory formulas with hand-checked numbers."""

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import kv_bytes_per_token, memory, weights_gib
from servewise.engine.domain.perf.architecture import params

GIB = 2**30


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_llama70b_kv_per_token(cat):
    # 2 (K and V) x 80 layers x 8 KV heads x 128 head_dim x 2 bytes
    assert kv_bytes_per_token(cat.model("Llama-3.1-70B"), "bf16") == 2 * 80 * 8 * 128 * 2 == 327_680
    assert kv_bytes_per_token(cat.model("Llama-3.1-70B"), "fp8") == 163_840


def test_deepseek_mla_latent_cache(cat):
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x bytes
    m = cat.model("DeepSeek-V3")
    assert kv_bytes_per_token(m, "bf16") == (512 + 64) * 61 * 2 == 70_272
    assert kv_bytes_per_token(m, "fp8") == (512 + 64) * 61


def test_moe_all_experts_resident(cat):
    m = cat.model("DeepSeek-V3")
    p = params(m)
    # one routed expert over all layers = (671B - 37B) / (256 - 8)
    assert p.per_expert == pytest.approx((671e9 - 37e9) / 248)
    assert p.experts == pytest.approx(256 * p.per_expert)
    emb = 129_280 * 7168  # embedding and lm_head, kept 16-bit
    expected = ((671e9 - 2 * emb) * 1 + 2 * emb * 2) / GIB
    assert weights_gib(m, "fp8") == pytest.approx(expected)
    assert weights_gib(m, "fp8") > 620  # all 671B resident, not the 37B active


def test_dense_bf16_weights(cat):
    # bf16: every parameter 2 bytes
    assert weights_gib(cat.model("Llama-3.1-8B"), "bf16") == pytest.approx(8.03e9 * 2 / GIB)


def test_int4_has_scales(cat):
    m = cat.model("Llama-3.1-70B")
    w4 = weights_gib(m, "int4")
    assert weights_gib(m, "bf16") / 4 < w4 < weights_gib(m, "fp8")


def test_llama70b_bf16_does_not_fit_one_l40s(cat):
    mem = memory(cat.model("Llama-3.1-70B"), cat.gpu("L40S"), tp=1, precision="bf16",
                 tokens_in_flight=1024)
    assert not mem.fits
    assert "weights need" in mem.reason and "L40S" in mem.reason


def test_tp_shards_weights_and_kv(cat):
    m, g = cat.model("Llama-3.1-70B"), cat.gpu("H100 SXM")
    one = memory(m, g, tp=2, precision="fp8", tokens_in_flight=100_000)
    four = memory(m, g, tp=4, precision="fp8", tokens_in_flight=100_000)
    assert four.per_gpu_gib < one.per_gpu_gib
    assert four.kv_cache_gib == pytest.approx(one.kv_cache_gib)  # GQA: sharded, not copied
    assert four.kv_capacity_tokens > one.kv_capacity_tokens


def test_mla_latent_replicated_across_tp(cat):
    m, g = cat.model("DeepSeek-V3"), cat.gpu("B200")
    a = memory(m, g, tp=8, precision="fp8", tokens_in_flight=10_000)
    # each of the 8 TP ranks holds the full latent of every token
    assert a.kv_cache_gib == pytest.approx(8 * 10_000 * 576 * 61 / GIB)


def test_fits_with_utilisation_cap(cat):
    m, g = cat.model("Llama-3.1-8B"), cat.gpu("L4")
    low = memory(m, g, tp=1, precision="bf16", tokens_in_flight=0, gpu_memory_utilization=0.5)
    high = memory(m, g, tp=1, precision="bf16", tokens_in_flight=0, gpu_memory_utilization=0.95)
    assert not low.fits and high.fits


def test_tp_must_split_the_attention_heads():
    """Engines split query heads evenly over TP ranks; KV heads evenly, or replicated when the
    ranks are a multiple of them; an MLA latent is replicated whatever tp is."""
    from servewise.engine.domain.perf.architecture import tp_split_problem

    gqa = {"id": "m", "num_attention_heads": 28, "num_kv_heads": 4}
    assert tp_split_problem(gqa, 1) is None and tp_split_problem(gqa, 4) is None
    assert "28 attention heads" in tp_split_problem(gqa, 8)
    assert "4 KV heads" in tp_split_problem(gqa, 7)  # 28 % 7 == 0, but 7 ranks over 4 KV heads
    assert tp_split_problem({"num_attention_heads": 32, "num_kv_heads": 8}, 16) is None
    mla = {"num_attention_heads": 128, "num_kv_heads": 128, "attention_type": "MLA"}
    assert tp_split_problem(mla, 16) is None and tp_split_problem(mla, 3)
