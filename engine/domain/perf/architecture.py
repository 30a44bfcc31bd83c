"""Parameter and KV-cache arithmetic from a model's architecture (catalog fields)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# MLA query/value dims when the catalog entry does not give them (DeepSeek-V2/V3 values).
MLA_DEFAULTS = {"q_lora_rank": 1536, "qk_nope_head_dim": 128, "v_head_dim": 128}


def _num(m: dict[str, Any], key: str, default: float | None = None) -> float | None:
    v = m.get(key)
    return float(v) if isinstance(v, (int, float)) else default


@dataclass(frozen=True)
class Params:
    """Parameter counts (not bytes) of a model, split by how they are read and sharded."""

    total: float            # all parameters
    active: float           # used per token (shared + k experts)
    embedding: float        # input embedding (looked up, never streamed in decode)
    lm_head: float          # output projection (streamed every decode step)
    experts: float          # all routed experts (0 for dense models)
    per_expert: float       # one routed expert summed over all MoE layers
    num_experts: int
    experts_per_token: int
    layers: int

    @property
    def shared(self) -> float:
        """Non-expert weights other than embedding/lm_head: attention, dense FFN, shared experts."""
        return self.total - self.experts - self.embedding - self.lm_head

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1


def attention_params_per_layer(m: dict[str, Any]) -> float:
    h = _num(m, "hidden_size", 0)
    heads = _num(m, "num_attention_heads", 0)
    d = _num(m, "head_dim") or (h / heads if heads else 0)
    if str(m.get("attention_type", "")).upper() == "MLA":
        ql = _num(m, "q_lora_rank", MLA_DEFAULTS["q_lora_rank"])
        kvl = _num(m, "kv_lora_rank", 512)
        rope = _num(m, "qk_rope_head_dim", 64)
        nope = _num(m, "qk_nope_head_dim", MLA_DEFAULTS["qk_nope_head_dim"])
        vd = _num(m, "v_head_dim", MLA_DEFAULTS["v_head_dim"])
        return (h * ql + ql * heads * (nope + rope) + h * (kvl + rope)
                + kvl * heads * (nope + vd) + heads * vd * h)
    kvh = _num(m, "num_kv_heads") or heads
    return h * heads * d * 2 + 2 * h * kvh * d


def params(m: dict[str, Any]) -> Params:
    """Split the catalog's parameter count into embedding, lm_head, experts and shared weights.

    MoE: one routed expert over all layers is ``(total - active) / (E - k)`` (the difference
    between total and active parameters is exactly the E - k experts not chosen), so the split
    needs only the published total/active counts. Dense models without ``total_params_b`` are
    counted from the architecture (gated FFN, untied embeddings).
    """
    layers = int(_num(m, "num_layers", 0) or 0)
    h = _num(m, "hidden_size", 0) or 0
    vocab = _num(m, "vocab_size", 0) or 0
    emb = vocab * h
    # encoders (embedding, reranker models) have no LM head; tied heads reuse the embedding
    head = 0.0 if m.get("tie_word_embeddings") or m.get("task") in ("embedding", "reranker") else emb
    e = int(_num(m, "num_experts", 0) or 0)
    k = int(_num(m, "experts_per_token", 0) or 0)
    total_b = _num(m, "total_params_b")
    if total_b:
        total = total_b * 1e9
    else:
        inter = _num(m, "intermediate_size", 4 * h) or 4 * h
        ffn = 3 * h * inter * (e if e > 1 else 1)
        total = layers * (attention_params_per_layer(m) + ffn) + emb + head
    if e > k > 0:  # (k = E would route every token to every expert: a dense model)
        active_b = _num(m, "active_params_b")
        if active_b:
            per_expert = (total - active_b * 1e9) / (e - k)
        else:
            per_expert = layers * 3 * h * (_num(m, "intermediate_size", 0) or 0)
        experts = per_expert * e
        active = total - per_expert * (e - k)
    else:
        per_expert, experts, active, e, k = 0.0, 0.0, total, 0, 0
    return Params(total=total, active=active, embedding=emb, lm_head=head, experts=experts,
                  per_expert=per_expert, num_experts=e, experts_per_token=k, layers=layers)


# DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5.x): a "lightning indexer" scores every
# cached token with index_n_heads FP8 heads of index_head_dim and the MLA attends only to the
# index_topk best. SGLang keeps the index keys as FP8 with one FP32 scale per 128 values
# (head_dim_with_sf = 132 bytes for 128 dims, python/sglang/srt/layers/attention/nsa/
# nsa_indexer.py) and runs the indexer's projections replicated on every TP rank
# (ReplicatedLinear wq_b, wk, weights_proj).
INDEX_SCALE_BYTES = 4


def dsa(m: dict[str, Any]) -> tuple[float, float, float] | None:
    """(index_n_heads, index_head_dim, index_topk) of an MLA model with DeepSeek sparse
    attention, else None."""
    if str(m.get("attention_type", "")).upper() != "MLA":
        return None
    vals = [_num(m, k) for k in ("index_n_heads", "index_head_dim", "index_topk")]
    if not all(vals):
        return None
    return vals[0], vals[1], vals[2]  # type: ignore[return-value]


def attended_context(m: dict[str, Any], context: float) -> float:
    """Tokens the attention reads for a query at ``context``: all of them, or the indexer's
    top-k under DSA."""
    d = dsa(m)
    return min(context, d[2]) if d else context


def sparse_prefill_attended(m: dict[str, Any], past: float, tokens: float) -> float:
    """Mean tokens one prompt token attends under DSA: ``min(position, top-k)`` averaged over
    the prompt's positions ``past .. past + tokens`` (continuous); ``past + tokens/2`` without
    DSA."""
    d = dsa(m)
    lo, hi = max(past, 0.0), max(past, 0.0) + max(tokens, 0.0)
    if not d or hi <= d[2] or tokens <= 0:
        return (lo + hi) / 2.0
    k = d[2]
    if lo >= k:
        return k
    return ((k * k - lo * lo) / 2.0 + k * (hi - k)) / (hi - lo)


def moe_layers(m: dict[str, Any], p: Params) -> float:
    """Layers with routed experts: one expert's parameters over all layers / (3 x hidden x the
    expert's intermediate size) (DeepSeek-R1: 58 of 61, GLM-5: 75 of 78); 0 for a dense model."""
    if p.num_experts <= 1:
        return 0.0
    h = _num(m, "hidden_size", 0)
    inter = _num(m, "moe_intermediate_size") or _num(m, "intermediate_size", 0)
    return float(round(p.per_expert / (3 * h * inter))) if h and inter else float(p.layers)


def sparse_mla_flops_per_head(m: dict[str, Any]) -> float:
    """FLOPs per query head and attended token of MLA in the absorbed (MQA) form that the
    sparse kernels run for prefill and decode alike: scores over the ``kv_lora_rank + rope``
    latent, weighted sum over the ``kv_lora_rank`` values."""
    kvl = _num(m, "kv_lora_rank", 512) or 512.0
    rope = _num(m, "qk_rope_head_dim", 64) or 64.0
    return 2 * (kvl + rope) + 2 * kvl


def index_key_bytes_per_token(m: dict[str, Any]) -> float:
    """Bytes of the DSA index keys per token over all layers (0 without DSA): FP8 keys plus
    their scale, kept for every cached token and replicated on every TP rank."""
    d = dsa(m)
    return kv_layers(m) * (d[1] + INDEX_SCALE_BYTES) if d else 0.0


def indexer_flops_per_token(m: dict[str, Any], context: float) -> float:
    """FLOPs of the DSA indexer's scores for one query token at ``context`` (all layers; every
    TP rank computes them all): 2 x index_n_heads x index_head_dim per cached token."""
    d = dsa(m)
    return kv_layers(m) * 2 * d[0] * d[1] * context if d else 0.0


def indexer_params(m: dict[str, Any]) -> float:
    """Parameters of the DSA indexer's projections over all layers (wq_b from the query LoRA
    rank, wk and the head weights from the hidden state), which every TP rank holds whole."""
    d = dsa(m)
    if not d:
        return 0.0
    h = _num(m, "hidden_size", 0) or 0
    ql = _num(m, "q_lora_rank", MLA_DEFAULTS["q_lora_rank"]) or 0
    return kv_layers(m) * (ql * d[0] * d[1] + h * d[1] + h * d[0])


def kv_layers(m: dict[str, Any]) -> float:
    """Layers whose KV cache grows with the context (``kv_layers`` in the catalog for hybrid
    models: sliding-window, linear-attention and SSM layers keep a bounded state per sequence;
    the sliding-window layers' is :func:`sliding_kv_elements`, linear/SSM state is not
    modelled), else every layer."""
    return _num(m, "kv_layers") or _num(m, "num_layers", 0) or 0


# Sliding-window attention (gpt-oss, Step-3.7-Flash, MiMo-V2-Flash, Gemma 4): a sliding layer
# attends to the last ``sliding_window`` tokens only, and the engines keep only those tokens'
# KV: vLLM builds gpt-oss's layers with ``per_layer_sliding_window`` on every other layer
# (vllm/model_executor/models/gpt_oss.py, "Only apply sliding window to every other layer",
# commit 0025d69bcf08; TensorRT-LLM the same in tensorrt_llm/_torch/models/modeling_gpt_oss.py,
# commit 050b6cb92871) and its KV-cache manager frees a sliding group's blocks that fall out of
# the window (vllm/v1/core/single_type_kv_cache_manager.py, SlidingWindowManager). The catalog
# gives the number of such layers (``sliding_layers``) and one token's K+V elements in one of
# them over all its KV heads (``sliding_kv_elements``; their heads may differ from the full
# layers': MiMo-V2 8 SWA KV heads of 192 + 128, Gemma 4 8 or 16 heads of 256).


def sliding(m: dict[str, Any]) -> tuple[float, float, float] | None:
    """(sliding layers, K+V elements per token of one sliding layer, window) of a model with
    sliding-window layers, else None."""
    n, e, w = (_num(m, k) for k in ("sliding_layers", "sliding_kv_elements", "sliding_window"))
    return (n, e, w) if n and e and w else None  # type: ignore[return-value]


def sliding_kv_heads(m: dict[str, Any]) -> float:
    """KV heads of a sliding-window layer (``sliding_kv_heads``, else the model's)."""
    return (_num(m, "sliding_kv_heads") or _num(m, "num_kv_heads")
            or _num(m, "num_attention_heads", 1) or 1.0)


def sliding_kv_shard(m: dict[str, Any], tp: int) -> float:
    """Share of a sliding layer's KV one TP rank holds: its KV heads split over the ranks,
    replicated when fewer than ``tp`` (as :func:`kv_shard_factor`)."""
    kvh = sliding_kv_heads(m)
    return max(1.0, kvh / tp) / kvh


def sliding_flops_per_attended(m: dict[str, Any]) -> float:
    """Attention FLOPs per query token and attended token over all sliding layers: scores and
    weighted sum, 2 x (K + V width) per query head; query heads per KV head from the layer's
    heads (``num_attention_heads / sliding_kv_heads``)."""
    s = sliding(m)
    if not s:
        return 0.0
    heads = _num(m, "num_attention_heads", 1) or 1.0
    return s[0] * 2 * heads * s[1] / sliding_kv_heads(m)


def sliding_kv_elements(m: dict[str, Any]) -> float:
    """KV elements per cached token over all sliding-window layers (0 without them); a sequence
    holds them for at most ``sliding_window`` tokens (:func:`windowed`)."""
    s = sliding(m)
    return s[0] * s[1] if s else 0.0


def windowed(m: dict[str, Any], context: float) -> float:
    """Tokens a sliding-window layer keeps and attends to at ``context``: ``min(context,
    window)`` (0 without sliding layers)."""
    s = sliding(m)
    return min(max(context, 0.0), s[2]) if s else 0.0


def windowed_prefill(m: dict[str, Any], past: float, tokens: float) -> float:
    """Mean tokens one prompt token attends in a sliding-window layer: ``min(position,
    window)`` averaged over the prompt's positions ``past .. past + tokens`` (continuous)."""
    s = sliding(m)
    return _mean_capped(past, tokens, s[2]) if s else 0.0


def _mean_capped(past: float, tokens: float, k: float) -> float:
    """Mean of ``min(x, k)`` for x uniform over ``past .. past + tokens``."""
    lo, hi = max(past, 0.0), max(past, 0.0) + max(tokens, 0.0)
    if hi <= k or tokens <= 0:
        return (lo + min(hi, k)) / 2.0 if hi > lo else min(lo, k)
    if lo >= k:
        return k
    return ((k * k - lo * lo) / 2.0 + k * (hi - k)) / (hi - lo)


# Attention sinks (gpt-oss; MiMo-V2's SWA layers): one learned logit per query head and layer
# that joins the softmax's denominator (vLLM OAIAttention: ``self.sinks`` of
# num_attention_heads / tp values, passed to the attention kernel as ``sinks``; gpt_oss.py
# above). It reads no KV and adds one exponential and one addition per head and query token:
# counted as SINK_FLOPS per head and token, which is below 0.1 % of the attention at any context
# of more than 16 tokens (4 x head_dim FLOPs per attended token).
SINK_FLOPS = 2.0


def sink_flops_per_token(m: dict[str, Any]) -> float:
    """FLOPs of the attention sinks for one query token over all layers (0 without them)."""
    if not m.get("attention_sinks"):
        return 0.0
    return (_num(m, "num_layers", 0) or 0) * (_num(m, "num_attention_heads", 1) or 1) * SINK_FLOPS


def kv_elements_per_token(m: dict[str, Any]) -> tuple[float, str]:
    """KV-cache elements per token (all layers) and the formula used."""
    layers = kv_layers(m)
    what = "kv_layers" if m.get("kv_layers") else "layers"
    if str(m.get("attention_type", "")).upper() == "MLA":
        kvl = _num(m, "kv_lora_rank", 512)
        rope = _num(m, "qk_rope_head_dim", 64)
        return (kvl + rope) * layers, f"(kv_lora_rank + qk_rope_head_dim) x {what}"
    heads = _num(m, "num_attention_heads", 1)
    kvh = _num(m, "num_kv_heads") or heads
    d = _num(m, "head_dim") or (_num(m, "hidden_size", 0) / heads)
    return 2 * layers * kvh * d, f"2 x {what} x kv_heads x head_dim"


def kv_shard_factor(m: dict[str, Any], tp: int) -> float:
    """Share of one token's KV held by one GPU under tensor parallelism.

    GQA/MHA heads are split across TP ranks (replicated when kv_heads < tp); the MLA latent is
    replicated on every TP rank.
    """
    if str(m.get("attention_type", "")).upper() == "MLA":
        return 1.0
    kvh = _num(m, "num_kv_heads") or _num(m, "num_attention_heads", 1)
    return max(1.0, kvh / tp) / kvh


def tp_split_problem(m: dict[str, Any], tp: int) -> str | None:
    """Why tensor parallelism ``tp`` cannot split this model's attention, or None.

    vLLM, SGLang and TensorRT-LLM split the query heads evenly over the TP ranks (vLLM
    ``ModelConfig.verify_with_parallel_config``: "Total number of attention heads must be
    divisible by tensor parallel size"), and the KV heads too, or replicate them when there are
    fewer KV heads than ranks (then ``tp`` must be a multiple of them; vLLM
    ``QKVParallelLinear``)."""
    heads = _num(m, "num_attention_heads")
    if tp <= 1 or not heads:
        return None
    name = m.get("id", "the model")
    if heads % tp:
        return (f"tp {tp}: {name} has {heads:g} attention heads, which tensor parallelism "
                f"splits evenly (vLLM, SGLang and TensorRT-LLM require heads divisible by tp)")
    kvh = _num(m, "num_kv_heads")
    if str(m.get("attention_type", "")).upper() == "MLA" or not kvh:
        return None
    if (kvh >= tp and kvh % tp) or (kvh < tp and tp % kvh):
        return (f"tp {tp}: {name} has {kvh:g} KV heads; tensor parallelism needs a tp that "
                f"divides them, or a multiple of them (each KV head then replicated)")
    return None


def attention_flops_per_token(m: dict[str, Any], context: float, decode: bool = True) -> float:
    """FLOPs of the attention scores and weighted sum for one query token at ``context``.

    MLA decodes in the absorbed form (attention over the 576-wide latent) and prefills in the
    expanded form (192-wide keys, 128-wide values per head). Only the layers with a full KV
    cache attend over the whole context (``kv_layers``); bounded layers are left out. Under
    DSA the attention reads the indexer's top-k tokens only (``attended_context``; in prefill
    ``context`` is the mean context, so a prompt longer than top-k is slightly over-counted);
    the indexer's own scores are :func:`indexer_flops_per_token`.
    """
    if m.get("index_topk"):  # DSA (attended_context checks the rest)
        context = attended_context(m, context)
    layers = kv_layers(m)
    heads = _num(m, "num_attention_heads", 1) or 1
    if str(m.get("attention_type", "")).upper() == "MLA":
        kvl = _num(m, "kv_lora_rank", 512)
        rope = _num(m, "qk_rope_head_dim", 64)
        if decode:
            per_head = 2 * (kvl + rope) + 2 * kvl
        else:
            nope = _num(m, "qk_nope_head_dim", MLA_DEFAULTS["qk_nope_head_dim"])
            per_head = 2 * (nope + rope) + 2 * _num(m, "v_head_dim", MLA_DEFAULTS["v_head_dim"])
    else:
        d = _num(m, "head_dim") or (_num(m, "hidden_size", 0) / heads)
        per_head = 4 * d
    return layers * heads * per_head * context
