"""GPU memory of a model replica: weights, KV cache, activations/overhead, fit per GPU."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from servewise.engine.domain.perf.architecture import (
    Params,
    index_key_bytes_per_token,
    indexer_params,
    kv_elements_per_token,
    kv_shard_factor,
    params,
    sliding,
    sliding_kv_elements,
    sliding_kv_shard,
    windowed,
)
from servewise.engine.domain.perf.precision import (
    bytes_per_weight,
    default_kv_precision,
    kv_bytes,
    weight_format,
)
from servewise.engine.domain.perf.types import MemoryEstimate, Step


@functools.cache
def usable_fraction() -> float:
    """The share of a GPU's memory weights and KV cache may fill when the caller does not say:
    policy vram_usable_fraction (facts/catalog/policies.yaml), the fraction the plan sizes with."""
    from servewise.engine.domain.catalog import load_catalog

    return float(load_catalog().table("policies").get("vram_usable_fraction")["value"])

GIB = 2.0**30
EMBED_BYTES = 2.0  # embedding and lm_head stay 16-bit in quantised checkpoints
OVERHEAD_BASE_GIB = 1.5  # CUDA context, NCCL buffers, CUDA graphs, allocator slack (per GPU)
ACT_TOKENS = 8192  # tokens per engine step the activation workspace is sized for


@dataclass(frozen=True)
class Layout:
    """How a replica is split over GPUs.

    ``tp`` shards attention and dense layers; ``attention_dp`` replicates attention (each rank
    serves its own sequences); MoE layers are sharded over all ``tp x attention_dp`` GPUs of a
    stage, ``ep``-way by expert and the rest by tensor. ``ep`` larger than ``tp x attention_dp``
    adds data-parallel attention ranks (vLLM/SGLang DP+EP). ``pp`` stages split the layers.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1

    def __post_init__(self) -> None:
        for k in ("tp", "pp", "ep", "attention_dp"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive integer, got {v!r}")

    @property
    def stage_gpus(self) -> int:
        return max(self.tp * self.attention_dp, self.ep)

    @property
    def dp(self) -> int:
        """Attention data-parallel ranks per stage."""
        return max(1, self.stage_gpus // self.tp)

    @property
    def n_gpus(self) -> int:
        return self.stage_gpus * self.pp


def weight_bytes(p: Params, precision: str, model: dict[str, Any] | None = None) -> dict[str, float]:
    """Bytes of one copy of the weights, by part; ``model``: its checkpoint's format
    (precision.weight_format: gpt-oss at fp4 keeps BF16 attention and MXFP4 experts)."""
    wf = weight_format(model, precision)
    return {"embedding": p.embedding * EMBED_BYTES, "lm_head": p.lm_head * EMBED_BYTES,
            "shared": p.shared * wf.dense_bytes, "experts": p.experts * wf.expert_bytes}


def weights_gib(model: dict[str, Any], precision: str) -> float:
    """GiB of all weights at ``precision`` (MoE: every expert resident)."""
    return sum(weight_bytes(params(model), precision, model).values()) / GIB


def kv_bytes_per_token(model: dict[str, Any], kv_precision: str = "bf16",
                       context: float | None = None) -> float:
    """KV-cache bytes per token over all layers (before any sharding), with the DSA index keys
    (FP8 whatever the KV format) of a sparse-attention model. ``context``: the mean tokens of a
    sequence, to add the sliding-window layers' KV (at most ``sliding_window`` tokens a
    sequence: :func:`sliding_kv_bytes_per_token` x min(context, window) / context); without
    it only the layers whose KV grows with the context are counted."""
    elements, _ = kv_elements_per_token(model)
    full = elements * kv_bytes(kv_precision) + index_key_bytes_per_token(model)
    if context and context > 0 and sliding(model):
        full += sliding_kv_bytes_per_token(model, kv_precision) * windowed(model, context) / context
    return full


def sliding_kv_bytes_per_token(model: dict[str, Any], kv_precision: str = "bf16") -> float:
    """KV bytes of one cached token in all sliding-window layers (0 without them); a sequence
    keeps at most ``sliding_window`` such tokens."""
    return sliding_kv_elements(model) * kv_bytes(kv_precision)


def replicated_bytes(model: dict[str, Any], precision: str, tp: int) -> float:
    """Weight bytes (all layers) a GPU holds beyond its 1/tp share of the shared weights: the
    DSA indexer's projections, which every TP rank holds whole (0 for other models)."""
    return indexer_params(model) * bytes_per_weight(precision) * (1 - 1 / tp)


def weights_per_gpu_bytes(p: Params, precision: str, lay: Layout,
                          model: dict[str, Any] | None = None) -> float:
    """Weight bytes on the busiest GPU of the replica."""
    wb = weight_bytes(p, precision, model)
    vocab = (wb["embedding"] + wb["lm_head"]) if lay.pp == 1 else max(wb["embedding"],
                                                                       wb["lm_head"])
    return (vocab / lay.tp + wb["shared"] / (lay.tp * lay.pp)
            + wb["experts"] / (lay.stage_gpus * lay.pp))


def overhead_gib(model: dict[str, Any], lay: Layout) -> float:
    """Per-GPU activations and framework overhead (documented constant + activation workspace)."""
    h = float(model.get("hidden_size") or 0)
    inter = float(model.get("intermediate_size") or 4 * h)
    k = float(model.get("experts_per_token") or 1)
    act = ACT_TOKENS * 2.0 * (4 * h + 2 * inter * k / lay.tp) / GIB
    return OVERHEAD_BASE_GIB + act


def memory(model: dict[str, Any], gpu: dict[str, Any], *, tp: int = 1, pp: int = 1, ep: int = 1,
           precision: str, tokens_in_flight: float, kv_precision: str | None = None,
           gpu_memory_utilization: float | None = None, attention_dp: int = 1,
           context: float | None = None) -> MemoryEstimate:
    """Memory per GPU for ``tokens_in_flight`` tokens of KV cache, and whether it fits.
    ``context``: mean tokens of a sequence, which sizes the sliding-window layers' KV (each
    sequence keeps min(context, window) tokens there); without it they are not counted."""
    gpu_memory_utilization = usable_fraction() if gpu_memory_utilization is None else gpu_memory_utilization
    lay = Layout(tp, pp, ep, attention_dp)
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError("gpu_memory_utilization must be in (0, 1]")
    kvp = kv_precision or default_kv_precision(gpu, precision)
    p = params(model)
    wf = weight_format(model, precision)
    w_total = sum(weight_bytes(p, precision, model).values())
    w_gpu = (weights_per_gpu_bytes(p, precision, lay, model)
             + replicated_bytes(model, precision, tp) / pp)
    kv_tok = kv_bytes_per_token(model, kvp)
    kv_tok_gpu = kv_tok * kv_shard_factor(model, tp) / pp
    swa = (sliding_kv_bytes_per_token(model, kvp) * windowed(model, context) / context
           if context and context > 0 and sliding(model) else 0.0)
    kv_tok_gpu += swa * sliding_kv_shard(model, tp) / pp
    kv_gpu = kv_tok_gpu * tokens_in_flight / lay.dp
    ovh = overhead_gib(model, lay)
    cap = float(gpu.get("memory_gb") or 0)
    budget = cap * gpu_memory_utilization
    per_gpu = w_gpu / GIB + kv_gpu / GIB + ovh
    free_kv = budget - w_gpu / GIB - ovh
    kv_capacity = int(max(0.0, free_kv) * GIB / kv_tok_gpu * lay.dp) if kv_tok_gpu > 0 else 0
    kv_replica = kv_gpu * lay.n_gpus / GIB  # includes MLA/narrow-GQA replication across TP
    reason = None
    name = gpu.get("id", "GPU")
    if free_kv <= 0:
        reason = (f"weights need {w_gpu / GIB:.1f} GiB per GPU plus {ovh:.1f} GiB overhead, but "
                  f"{lay.n_gpus}x {name} offer {budget:.1f} GiB each "
                  f"({cap:g} GB x utilisation {gpu_memory_utilization:g})")
    elif per_gpu > budget:
        reason = (f"KV cache for {tokens_in_flight:,.0f} tokens needs {kv_gpu / GIB:.1f} GiB per "
                  f"GPU, only {free_kv:.1f} GiB left after weights on {name} "
                  f"(room for {kv_capacity:,} tokens)")
    kv_elems, kv_how = kv_elements_per_token(model)
    if wf.split:  # a checkpoint that quantises only its experts (gpt-oss: MXFP4 experts)
        w_step = Step(
            "weights",
            "W_gib = (shared_params_b x shared_bytes + expert_params_b x expert_bytes"
            " + embedding_lm_head_params_b x embed_bytes) x 1e9 / 2^30",
            {"shared_params_b": p.shared / 1e9, "expert_params_b": p.experts / 1e9,
             "embedding_lm_head_params_b": (p.embedding + p.lm_head) / 1e9,
             "shared_bytes": wf.dense_bytes, "expert_bytes": wf.expert_bytes,
             "embed_bytes": EMBED_BYTES, "precision": precision},
            w_total / GIB, "GiB",
            f"the checkpoint keeps its routed experts in {wf.expert_format.upper()} (4 bits + "
            f"one scale byte per {round(1 / (wf.expert_bytes - 0.5))} weights) and every other "
            f"weight in {wf.dense_precision.upper()}; MoE: every expert resident")
    else:
        w_step = Step(
            "weights",
            "W_gib = ((shared_params_b + expert_params_b) x bytes_per_weight"
            " + embedding_lm_head_params_b x embed_bytes) x 1e9 / 2^30",
            {"shared_params_b": p.shared / 1e9, "expert_params_b": p.experts / 1e9,
             "embedding_lm_head_params_b": (p.embedding + p.lm_head) / 1e9,
             "bytes_per_weight": bytes_per_weight(precision), "embed_bytes": EMBED_BYTES,
             "precision": precision},
            w_total / GIB, "GiB", "embedding and lm_head stay 16-bit; MoE: every expert resident")
    if swa:
        m_step = Step(
            "memory_per_gpu",
            "m_gpu_gib = W_shard_gib + (kv_per_token_b x kv_shard + window_kv_b x window_shard)"
            " x tokens / dp / 2^30 + overhead_gib",
            {"W_shard_gib": w_gpu / GIB, "kv_per_token_b": kv_tok,
             "kv_shard": kv_shard_factor(model, tp) / pp, "window_kv_b": swa,
             "window_shard": sliding_kv_shard(model, tp) / pp, "tokens": tokens_in_flight,
             "dp": lay.dp, "overhead_gib": ovh}, per_gpu, "GiB",
            f"fits when m_gpu_gib <= budget_gib; window_kv_b: the sliding-window layers' KV "
            f"per token, kept for min(context, window) = {windowed(model, context or 0):g} of a "
            f"sequence's {context:g} tokens")
    else:
        m_step = Step(
            "memory_per_gpu",
            "m_gpu_gib = W_shard_gib + kv_per_token_b x kv_shard x tokens / dp / 2^30"
            " + overhead_gib",
            {"W_shard_gib": w_gpu / GIB, "kv_per_token_b": kv_tok,
             "kv_shard": kv_shard_factor(model, tp) / pp, "tokens": tokens_in_flight,
             "dp": lay.dp, "overhead_gib": ovh}, per_gpu, "GiB",
            "fits when m_gpu_gib <= budget_gib")
    steps = (
        w_step,
        Step("kv_per_token", "kv_b = elements x bytes + index_keys_b",
             {"elements": kv_elems, "kv_precision": kvp, "bytes": kv_bytes(kvp),
              "index_keys_b": index_key_bytes_per_token(model)}, kv_tok,
             "B/token", f"elements = {kv_how}"
             + ("; index_keys_b: the DSA indexer's FP8 keys and scales (kv_layers x "
                "(index_head_dim + 4))" if index_key_bytes_per_token(model) else "")),
        m_step,
        Step("budget_per_gpu", "budget_gib = memory_gb x util",
             {"memory_gb": cap, "util": gpu_memory_utilization}, budget, "GiB",
             "HBM capacities are binary: an '80 GB' H100 holds 80 GiB (81,559 MiB)"),
    )
    return MemoryEstimate(
        weights_gib=w_total / GIB, kv_cache_gib=kv_replica, overhead_gib=ovh,
        total_gib=w_gpu / GIB * lay.n_gpus + kv_replica + ovh * lay.n_gpus,
        per_gpu_gib=per_gpu, budget_gib=budget, kv_capacity_tokens=kv_capacity,
        fits=reason is None, reason=reason, n_gpus=lay.n_gpus, steps=steps)
