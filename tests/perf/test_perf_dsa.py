"""DeepSeek sparse attention (DSA: GLM-5.x, DeepSeek-V3.2) with hand-checked numbers."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import kv_bytes_per_token
from servewise.engine.domain.perf.architecture import attended_context, dsa, indexer_flops_per_token
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.timing import DSA_INDEXER_FLOOR_US, StepModel


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
