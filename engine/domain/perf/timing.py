"""Time of one engine step: decode (memory + compute), prefill (compute-bound), TP/EP communication.

A decode step reads the weights (or the experts touched at this batch) and the KV of every
sequence, and runs the GEMMs and attention of the batch; reading and computing are added (they
overlap little at the batch sizes served), plus the per-step, per-layer and per-sequence
overheads of the engine. A prefill is compute time plus communication plus a fixed cost per
chunk of the backend's scheduler.

All times are milliseconds on one GPU of a replica. Pipeline stages run one after another for a
token, so a step costs the same as one stage holding every layer, plus ``pp - 1`` hops. In decode
the engines keep up to ``pp`` micro-batches in flight (one per stage: TRT-LLM in-flight
batching, vLLM virtual engines, SGLang pipeline micro-batches), so the batch's KV reads and
FLOPs are spread over the stages working at once (``1/min(pp, B)`` of them per round); each
stage still reads its weights once per micro-batch, so the weight read does not shrink.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from servewise.engine.domain.perf.architecture import (
    Params,
    attended_context,
    attention_flops_per_token,
    dsa,
    index_key_bytes_per_token,
    indexer_flops_per_token,
    kv_layers,
    kv_shard_factor,
    moe_layers,
    params,
    sink_flops_per_token,
    sliding_flops_per_attended,
    sliding_kv_shard,
    sparse_mla_flops_per_head,
    sparse_prefill_attended,
    windowed,
    windowed_prefill,
)
from servewise.engine.domain.perf.calibration import (
    CHUNK_TOKENS,
    Profile,
    link_params,
    moe_kernel_rates,
)
from servewise.engine.domain.perf.memory import (
    EMBED_BYTES,
    Layout,
    kv_bytes_per_token,
    replicated_bytes,
    sliding_kv_bytes_per_token,
)
from servewise.engine.domain.perf.precision import compute_rate, weight_format
from servewise.engine.domain.perf.speculative import Speculation

# DSA indexer (DeepSeek-V3.2, GLM-5.x) per layer and decode step beyond the token reads: the FP8
# paged MQA logits kernel and the top-k selection at their launch floors, 0.008 + 0.013 ms on an
# H200 at one sequence of 4,096 tokens (SGLang's stage profile of the baseline indexer,
# python/sglang/srt/layers/attention/nsa/hisa/benchmarks/_results/
# 2026-04-21_h200_stage_profile_full.txt, commit bf606193). Used for every GPU (launch-bound
# kernels); the indexer's projection, norm, rotary and quantisation kernels are not added.
DSA_INDEXER_FLOOR_US = 21.0
# prefill top-k: the scores' FP32 pass at the measured kernel's speed: 8,192 x 8,192 scores in
# 0.238 ms on an H200 (the same profile) = 16 bytes per score at 92 % of its bandwidth
TOPK_LOGIT_BYTES = 16.0
# DSA prefill attention runs in the absorbed MQA form (576-wide latent keys, 512-wide values) over
# each query's top-k tokens in FlashMLA's sparse kernel, which needs the query heads on a GPU
# padded to a multiple of 64 on Hopper and of 128 on Blackwell (SM100): SGLang
# python/sglang/srt/layers/attention/nsa_backend.py ``_forward_flashmla_sparse``
# (``required_padding = 128 if self.device_sm_major >= 10 else 64``) and vLLM
# v1/attention/backends/mla/flashmla_sparse.py (``self.padding = 128 if SM100 else 64``). The
# padded heads cost FLOPs like real ones (GLM-5 at TP 8: 8 heads per GPU run as 128 on B200).
# Classes without that kernel (Ampere, Ada, RTX PRO 6000's SM120, AMD) run their own heads.
SPARSE_MLA_HEAD_PAD = {"hopper-hbm": 64, "blackwell-hbm": 128}
# That kernel multiplies in BF16 (an FP8 cache is de-quantised first) and reaches up to 640 TFLOPS
# on an H800 SXM5 and 1,450 on a B200 (deepseek-ai/FlashMLA README, "MLA prefill (Sparse)"):
# 0.647 and 0.644 of their dense BF16 peaks (989, 2,250). The sparse prefill attention runs at
# that share of the GPU's BF16 peak, a measured kernel rate, not at the fitted eta_flops.
SPARSE_MLA_KERNEL_EFF = {"hopper-hbm": round(640 / 989, 3), "blackwell-hbm": round(1450 / 2250, 3)}


@dataclass(frozen=True)
class StepModel:
    """Per-GPU constants of one (model, GPU, layout, precision, profile) combination."""

    p: Params
    model: dict[str, Any]
    lay: Layout
    prof: Profile
    bw_gbs: float              # peak memory bandwidth
    tflops: float              # peak dense tensor rate of the GEMMs
    rate_note: str
    dense_bytes: float         # attention/dense/shared + lm_head bytes read per step per GPU
    expert_bytes: float        # all routed experts' bytes per GPU (read in part per step)
    kv_tok_gpu: float          # KV bytes per token on one GPU (the DSA index keys apart)
    link: tuple[str, float, float, float]
    hidden: float
    layers: float
    act_bytes: float = 2.0     # activation bytes exchanged by collectives
    low_precision: bool = False  # GEMMs run at a native 8/4-bit rate above the 16-bit one
    tflops16: float = 0.0      # peak dense 16-bit rate
    attn_tflops: float = 0.0   # peak rate attention runs at (FP8 over an FP8 KV cache)
    moe_read: float = 1.0      # expert-read efficiency of this precision relative to FP8
    moe_tflops: float = 0.0    # rate of the grouped expert GEMMs (0: tflops x eta_lowp)
    moe_note: str = ""
    index_tok_gpu: float = 0.0  # DSA index-key bytes per token on one GPU (every context token)
    dsa_layers: float = 0.0     # layers running the DSA indexer (0: dense attention)
    moe_route_bytes: float = 0.0  # fused-MoE bytes per routed (token x hidden) element, per GPU
    moe_layers: float = 0.0     # layers with routed experts
    spec: Speculation | None = None  # speculative decoding (perf.speculative), None: off
    window_tok_gpu: float = 0.0  # sliding-window layers' KV bytes per cached token on one GPU
    expert_tflops: float = 0.0  # peak rate of the experts' own format when it differs (gpt-oss)
    harness: str = "openai-http"  # what sends the requests (serving.HARNESSES): its client cost

    @classmethod
    def build(cls, model: dict[str, Any], gpu: dict[str, Any], lay: Layout, precision: str,
              kv_precision: str, prof: Profile,
              calibration: dict[str, Any] | None = None) -> StepModel:
        p = params(model)
        wf = weight_format(model, precision)  # gpt-oss at fp4: BF16 attention, MXFP4 experts
        tflops, note = compute_rate(gpu, wf.dense_precision)
        t_exp = compute_rate(gpu, precision)[0] if wf.split else tflops
        t16, _ = compute_rate(gpu, "bf16")
        t_attn = compute_rate(gpu, "fp8")[0] if kv_precision == "fp8" else t16
        bw = gpu.get("bandwidth_gbs")
        if not isinstance(bw, (int, float)) or bw <= 0 or not tflops:
            raise ValueError(f"{gpu.get('id', 'GPU')}: catalog lacks memory bandwidth or "
                             f"{precision} TFLOPS, cannot estimate timings")
        # the DSA indexer's projections are whole on every TP rank (their 1/tp share is in shared)
        dense = (p.shared * wf.dense_bytes / lay.tp + p.lm_head * EMBED_BYTES / lay.tp
                 + replicated_bytes(model, precision, lay.tp))
        experts = p.experts * wf.expert_bytes / lay.stage_gpus
        index_gpu = index_key_bytes_per_token(model)  # replicated on every TP rank
        kv_gpu = (kv_bytes_per_token(model, kv_precision) - index_gpu) * kv_shard_factor(model, lay.tp)
        window_gpu = sliding_kv_bytes_per_token(model, kv_precision) * sliding_kv_shard(model, lay.tp)
        # the experts' kernels: on Blackwell the measured FP4 ones (gpt-oss's MXFP4 experts run
        # in FlashInfer's TRT-LLM-gen MXFP4 kernels there); on Hopper FP4 weights are
        # de-quantised to BF16 inside the kernel (vLLM Marlin / Triton matmul_ogs, TensorRT-LLM's
        # Triton MoE): the 4.25-bit bytes are read and multiplied at the 16-bit rate
        # (compute_rate: "weight-only FP4"), no FP4 kernel table applies
        # (precision.weight_format; vllm mxfp4.py get_mxfp4_backend, commit 007d50058a06)
        moe = moe_kernel_rates(gpu, precision, calibration) if p.is_moe else None
        mult = moe.multiply if moe else None
        if mult and t16 and t_exp:  # never above the precision's own peak (W4A16 multiplies in 16 bit)
            mult = min(mult, float(t_exp) / float(t16))
        return cls(p=p, model=model, lay=lay, prof=prof, bw_gbs=float(bw), tflops=float(tflops),
                   rate_note=note, dense_bytes=dense, expert_bytes=experts, kv_tok_gpu=kv_gpu,
                   link=link_params(gpu, calibration, lay.tp), hidden=float(model.get("hidden_size") or 0),
                   layers=float(p.layers),
                   low_precision=bool(t16 and tflops > t16),
                   tflops16=float(t16 or tflops), attn_tflops=float(t_attn or t16 or tflops),
                   moe_read=moe.read if moe else 1.0,
                   moe_tflops=float(t16 or tflops) * mult if mult else 0.0,
                   moe_note=moe.source if moe else "",
                   index_tok_gpu=index_gpu, dsa_layers=kv_layers(model) if dsa(model) else 0.0,
                   moe_route_bytes=moe.route if moe else 0.0, moe_layers=moe_layers(model, p),
                   window_tok_gpu=window_gpu,
                   expert_tflops=float(t_exp or 0.0) if wf.split else 0.0)

    # -- building blocks -------------------------------------------------------------------
    def expert_fraction(self, tokens: float) -> float:
        """Expected share of a GPU's routed experts that ``tokens`` tokens route to: 1-(1-k/E)^T.

        Each token picks ``k`` of the ``E`` experts (uniform routing assumed); a GPU holds
        ``E/ep`` experts (each sliced ``1/moe_tp``), and the expected share of them touched is
        the same as of all experts. The fused MoE kernels read only the experts that received
        tokens: vLLM's measured fused-MoE latency (ops/*_moe_perf, Mixtral 8x7B shape on H100)
        at 1 token is 27 % of the latency at 16+ tokens, where 2 of 8 experts = 25 % are read.
        """
        if not self.p.is_moe:
            return 0.0
        return 1.0 - (1.0 - self.p.experts_per_token / self.p.num_experts) ** max(tokens, 0.0)

    @property
    def expert_groups(self) -> int:
        """Expert-parallel groups the routed experts are split into: ``ep``, at most one per expert."""
        return max(1, min(self.lay.ep, self.p.num_experts or 1))

    @property
    def experts_per_gpu(self) -> float:
        """Routed experts held by one GPU of a stage (each a 1/moe_tp slice)."""
        return self.p.num_experts / self.expert_groups

    @property
    def moe_tp(self) -> int:
        """Tensor-parallel slices of each expert: the stage's GPUs over the expert groups."""
        return max(1, self.lay.stage_gpus // max(1, self.lay.ep))

    def micro_batches(self, batch: float) -> float:
        """Pipeline micro-batches in flight in a decode round: ``min(pp, B)`` (1 without PP)."""
        return min(float(self.lay.pp), max(batch, 1.0)) if self.lay.pp > 1 else 1.0

    def mem_ms(self, nbytes: float) -> float:
        return nbytes / (self.bw_gbs * 1e9 * self.prof.eta_bw) * 1e3

    def flops_ms(self, gemm: float, attention: float = 0.0) -> float:
        """Compute time of ``gemm`` FLOPs at the weights' precision and ``attention`` FLOPs.

        Native 8/4-bit GEMMs run at ``eta_lowp`` of the efficiency of 16-bit ones (activation
        quantisation, scales, smaller tiles); attention runs at the FP8 rate over an FP8 KV
        cache on GPUs with native FP8 (FP8 FlashAttention/FMHA), else at the 16-bit rate.
        """
        pr = self.prof
        eta_gemm = pr.eta_flops * (pr.eta_lowp if self.low_precision else 1.0)
        eta_attn = pr.eta_flops * (pr.eta_lowp if self.attn_tflops > self.tflops16 else 1.0)
        return (gemm / (self.tflops * 1e12 * eta_gemm)
                + attention / (self.attn_tflops * 1e12 * eta_attn)) * 1e3

    def comm_parts(self, tokens_rank: float, tokens_stage: float) -> dict[str, float]:
        """TP all-reduces (2 per layer), MoE dispatch/combine across the stage, PP hops (ms)."""
        _, bw, eta, lat_us = self.link
        tp, n = self.lay.tp, self.lay.stage_gpus
        out = {"tp_allreduce": 0.0, "moe_a2a": 0.0, "pp_hops": 0.0}
        if tp > 1:
            msg = tokens_rank * self.hidden * self.act_bytes
            out["tp_allreduce"] = 2 * self.layers * (
                2 * (tp - 1) / tp * msg / (bw * 1e9 * eta) * 1e3 + lat_us / 1e3)
        if self.p.is_moe and n > tp:
            msg = tokens_stage * self.hidden * self.act_bytes * min(self.p.experts_per_token, n)
            out["moe_a2a"] = 2 * self.layers * (
                (n - 1) / n * msg / n / (bw * 1e9 * eta) * 1e3 + lat_us / 1e3)
        if self.lay.pp > 1:
            out["pp_hops"] = (self.lay.pp - 1) * (
                lat_us / 1e3 + tokens_rank * self.hidden * 2 / (bw * 1e6))
        return out

    def comm_ms(self, tokens_rank: float, tokens_stage: float) -> float:
        """All communication of one step on one GPU (sum of :meth:`comm_parts`)."""
        return sum(self.comm_parts(tokens_rank, tokens_stage).values())

    def overhead_ms(self, batch: float = 1.0) -> float:
        """Engine cost per step: fixed + per layer + per sequence in the batch (+ the DSA
        indexer's kernel floors per layer, :data:`DSA_INDEXER_FLOOR_US`)."""
        pr = self.prof
        per_layer = pr.t_layer_us + (pr.t_moe_layer_us if self.p.is_moe else 0.0)
        return (pr.t_step_ms + self.layers * per_layer / 1e3 + batch * pr.t_seq_us / 1e3
                + self.dsa_layers * DSA_INDEXER_FLOOR_US / 1e3)

    def kv_read_bytes(self, batch: float, context: float) -> float:
        """KV bytes one decode step reads for ``batch`` sequences at ``context`` tokens: the
        attended tokens' cache (all of them, or the DSA top-k), every token's index key, and
        the sliding-window layers' last ``min(context, window)`` tokens."""
        return batch * self._per_context("kv", context)

    def _per_context(self, what: str, context: float) -> float:
        """The per-sequence (``kv``: KV bytes read) or per-query-token (``attn``: decode attention
        FLOPs on one GPU) factor at ``context``, computed once per step model and context (a
        serving solve asks for it at every batch it tries; the same arithmetic, so the same float)."""
        memo = self.__dict__.setdefault("_context_memo", {})  # not a field: eq and repr ignore it
        key = (what, type(context), context)
        hit = memo.get(key)
        if hit is not None:
            return hit
        if what == "kv":
            if not self.dsa_layers:
                hit = (self.kv_tok_gpu * context + self.window_tok_gpu * windowed(self.model, context))
            else:
                hit = (self.kv_tok_gpu * attended_context(self.model, context)
                       + self.index_tok_gpu * context)
        else:
            dense = attention_flops_per_token(self.model, context, decode=True) / self.lay.tp
            if not self.dsa_layers:
                hit = dense + self.window_flops(context, 1.0, True)
            else:
                hit = dense + indexer_flops_per_token(self.model, context)
        memo[key] = hit
        return hit

    def attention_flops(self, tokens: float, context: float, decode: bool = True) -> float:
        """Attention FLOPs on one GPU for ``tokens`` queries at ``context``: the heads split by
        TP, the DSA indexer's scores on every TP rank; a DSA prefill in the sparse kernel
        (:meth:`sparse_prefill_flops`) unless it runs dense (:meth:`dense_prefill`)."""
        if decode:  # the same per-token factor at every batch: computed once per context
            return tokens * self._per_context("attn", context)
        dense = attention_flops_per_token(self.model, context, decode=decode) / self.lay.tp
        if not self.dsa_layers:
            return tokens * (dense + self.window_flops(context, tokens, decode))
        sparse = 0.0 if decode else self.sparse_prefill_flops(tokens, context)
        main = sparse / tokens if sparse else dense
        return tokens * (main + indexer_flops_per_token(self.model, context))

    def window_flops(self, context: float, tokens: float, decode: bool) -> float:
        """Attention FLOPs per query token on one GPU of the sliding-window layers (over
        ``min(position, window)`` tokens: at ``context`` in decode, averaged over the prompt's
        positions in prefill, where ``context`` is the mean ``past + tokens / 2``) and of the
        attention sinks (perf.architecture.SINK_FLOPS); 0 for other models."""
        per = sliding_flops_per_attended(self.model)
        if not per and not self.model.get("attention_sinks"):
            return 0.0
        att = (windowed(self.model, context) if decode
               else windowed_prefill(self.model, context - tokens / 2.0, tokens))
        return (per * att + sink_flops_per_token(self.model)) / self.lay.tp

    def sparse_prefill_flops(self, tokens: float, context: float) -> float:
        """FLOPs of the DSA sparse MLA prefill on one GPU (0 without DSA): ``tokens`` queries at
        mean ``context`` (past + tokens/2), each over its attended top-k tokens, in the absorbed
        form with the kernel's padded heads (:attr:`prefill_heads`)."""
        if not self.dsa_layers or self.dense_prefill(context + tokens / 2.0):
            return 0.0
        attended = sparse_prefill_attended(self.model, context - tokens / 2.0, tokens)
        return (tokens * self.dsa_layers * self.prefill_heads
                * sparse_mla_flops_per_head(self.model) * attended)

    def dense_prefill(self, kv_len: float) -> bool:
        """Whether a DSA prefill whose longest sequence reaches ``kv_len`` tokens runs dense MHA
        (expanded MLA over every token) instead of the sparse kernel: SGLang does so up to the
        indexer's top-k (``SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD``, set to
        ``index_topk`` for DSA models), where top-k attention is all of them; on Blackwell only
        for MLA heads of 192 / 128 (its dense kernel, FlashInfer's ``trtllm_ragged_attention_
        deepseek``, takes no other; SGLang sets the threshold to 0 for GLM-5's 256-wide values:
        server_args.py, "Force NSA prefill to use sparse MLA ... on Blackwell")."""
        d = dsa(self.model)
        if not d or kv_len > d[2]:
            return False
        if self.prof.gpu_class.startswith("blackwell"):
            m = self.model
            return (float(m.get("qk_nope_head_dim") or 128) + float(m.get("qk_rope_head_dim") or 64)
                    == 192 and float(m.get("v_head_dim") or 128) == 128)
        return True

    @property
    def sparse_kernel_eff(self) -> float | None:
        """Share of the BF16 peak FlashMLA's sparse prefill kernel reaches on this GPU class
        (:data:`SPARSE_MLA_KERNEL_EFF`), None where that kernel does not run."""
        return SPARSE_MLA_KERNEL_EFF.get(self.prof.gpu_class)

    @property
    def prefill_heads(self) -> float:
        """Query heads one GPU's sparse MLA prefill kernel runs: its ``heads / tp``, padded up to
        :data:`SPARSE_MLA_HEAD_PAD` of the GPU class where FlashMLA's sparse kernel runs."""
        heads = float(self.model.get("num_attention_heads") or 1) / self.lay.tp
        pad = SPARSE_MLA_HEAD_PAD.get(self.prof.gpu_class)
        return math.ceil(heads / pad) * pad if pad else heads

    def n_chunks(self, tokens: float) -> int:
        """Prefill chunks of the backend's scheduler for a prompt of ``tokens`` tokens."""
        return max(1, math.ceil(tokens / CHUNK_TOKENS.get(self.prof.backend, 8192)))

    def linear_flops_per_token(self, stage_tokens_ratio: float = 1.0,
                               lm_head: bool = True) -> tuple[float, float]:
        """GEMM FLOPs per token on one GPU: (dense/shared split by TP, routed experts by stage).

        ``lm_head=False``: a prompt token whose logits are not computed (all but the last).
        ``stage_tokens_ratio``: tokens the MoE layers see per attention-rank token (dp).
        """
        p = self.p
        shared = 2 * (p.shared + (p.lm_head if lm_head else 0.0)) / self.lay.tp
        experts = 2 * p.experts_per_token * p.per_expert / self.lay.stage_gpus * stage_tokens_ratio
        return shared, experts

    @property
    def moe_rate(self) -> tuple[float, float]:
        """(peak TFLOPS, low-precision efficiency) of the grouped expert GEMMs: the 16-bit peak
        times the measured kernels' rate relative to BF16 (``moe_kernels``), else the
        precision's peak at ``eta_lowp`` like the dense GEMMs."""
        if self.moe_tflops:
            return self.moe_tflops, 1.0
        if self.expert_tflops:  # experts stored apart from the BF16 rest (gpt-oss MXFP4)
            return self.expert_tflops, (self.prof.eta_lowp if self.expert_tflops > self.tflops16
                                        else 1.0)
        return self.tflops, self.prof.eta_lowp if self.low_precision else 1.0

    def compute_ms(self, gemm: float, moe: float, attention: float, sparse: float = 0.0,
                   route_tokens: float = 0.0) -> float:
        """Compute time (:data:`serving.COMPUTE_FORMULA`); grouped expert GEMMs run at ``eta_moe``
        of dense efficiency at their own rate (:attr:`moe_rate`); ``sparse``: the part of
        ``attention`` that FlashMLA's sparse prefill kernel runs, at its measured share of the
        BF16 peak; ``route_tokens``: tokens the step routes through the MoE layers
        (:meth:`route_ms`)."""
        peak, lowp = self.moe_rate
        t_moe = moe / (peak * 1e12 * self.prof.eta_flops * lowp * self.prof.eta_moe) * 1e3
        t_route = self.route_ms(route_tokens) if route_tokens else 0.0
        eff = self.sparse_kernel_eff
        if not sparse or not eff:
            return self.flops_ms(gemm, attention) + t_moe + t_route
        t_sparse = sparse / (self.tflops16 * 1e12 * eff) * 1e3
        return self.flops_ms(gemm, attention - sparse) + t_moe + t_sparse + t_route

    def route_bytes(self, stage_tokens: float) -> float:
        """Bytes the fused-MoE kernels move on one GPU to route ``stage_tokens`` tokens through
        the MoE layers: every (token, expert) pair's activations, permuted, scattered and
        gathered by each of the ``moe_tp`` ranks in full (an EP rank only for its 1/ep share of
        the experts), at the measured kernels' ``moe_route_bytes`` per hidden element."""
        if not self.moe_route_bytes:
            return 0.0
        return (self.moe_layers * stage_tokens * self.p.experts_per_token * self.hidden
                / self.expert_groups * self.moe_route_bytes)

    def route_ms(self, stage_tokens: float) -> float:
        """:meth:`route_bytes` at the GPU's datasheet bandwidth (the kernel fit's unit)."""
        return self.route_bytes(stage_tokens) / (self.bw_gbs * 1e9) * 1e3

    # -- steps --------------------------------------------------------------------------------
    def decode(self, batch: float, context: float) -> dict[str, float]:
        """One decode step for ``batch`` sequences per DP rank at mean ``context`` tokens."""
        batch = max(batch, 1.0)
        stage_tokens = batch * self.lay.dp
        w_exp = self.expert_bytes * self.expert_fraction(stage_tokens)
        # pipeline micro-batches: stages work on min(pp, B) micro-batches at once
        mb = self.micro_batches(batch)
        kv = self.kv_read_bytes(batch, context) / mb
        nbytes = self.dense_bytes + w_exp + kv
        t_mem = self.mem_ms(self.dense_bytes + kv + w_exp / (self.prof.eta_moe * self.moe_read))
        attn = self.attention_flops(batch, context) / mb
        dense, moe = self.linear_flops_per_token(self.lay.dp)
        gemm, moe = batch * dense / mb, batch * moe / mb
        route = stage_tokens / mb
        t_cmp = self.compute_ms(gemm, moe, attn, route_tokens=route)
        t_comm = self.comm_ms(batch, stage_tokens)
        t_ovh = self.overhead_ms(batch)
        return {"bytes": nbytes, "weights_bytes": self.dense_bytes + w_exp, "kv_bytes": kv,
                "t_mem": t_mem, "flops": gemm + moe + attn, "gemm_flops": gemm,
                "moe_flops": moe, "attn_flops": attn, "route_tokens": route, "t_compute": t_cmp,
                "t_comm": t_comm, "t_overhead": t_ovh, "total": t_mem + t_cmp + t_comm + t_ovh}

    def verify(self, batch: float, context: float, positions: float) -> dict[str, float]:
        """One target step verifying ``positions`` tokens of each of ``batch`` sequences per DP rank
        (speculative decoding): weights and each sequence's KV cache read once, GEMMs, attention,
        expert routing and collectives for every position, the engine's per-step cost once."""
        batch = max(batch, 1.0)
        stage_tokens = batch * self.lay.dp * positions
        w_exp = self.expert_bytes * self.expert_fraction(stage_tokens)
        kv = self.kv_read_bytes(batch, context)
        t_mem = self.mem_ms(self.dense_bytes + kv + w_exp / (self.prof.eta_moe * self.moe_read))
        attn = self.attention_flops(batch * positions, context)
        dense, moe = self.linear_flops_per_token(self.lay.dp)
        t_cmp = self.compute_ms(batch * positions * dense, batch * positions * moe, attn,
                                route_tokens=stage_tokens)
        t_comm = self.comm_ms(batch * positions, stage_tokens)
        t_ovh = self.overhead_ms(batch)
        return {"t_mem": t_mem, "t_compute": t_cmp, "t_comm": t_comm, "t_overhead": t_ovh,
                "total": t_mem + t_cmp + t_comm + t_ovh}

    def spec_decode(self, batch: float, context: float) -> dict[str, float]:
        """A speculative step (``spec``): the draft's ``k`` forward passes (each ``draft_layers``
        of this model's per-layer decode cost), then one verify step of ``k + 1`` positions; it
        emits ``tokens_per_step`` tokens."""
        assert self.spec is not None
        k = int(self.spec.tokens)
        plain = self.decode(batch, context)
        per_layer = (plain["t_mem"] + plain["t_compute"]) / max(self.layers, 1.0)
        draft = k * self.spec.draft_layers * per_layer
        ver = self.verify(batch, context, k + 1)
        return {**ver, "t_draft": draft, "total": ver["total"] + draft,
                "tokens_per_step": self.spec.tokens_per_step}

    def prefill_once(self, tokens: float, ranks: float | None = None) -> dict[str, float]:
        """:meth:`prefill` of ``tokens`` (no cached tokens), computed once per step model (a
        serving solve asks for it at every concurrency tried); a copy each time."""
        memo = self.__dict__.setdefault("_prefill_memo", {})  # not a field: eq and repr ignore it
        key = (type(tokens), tokens) if ranks is None else (type(tokens), tokens, ranks)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = self.prefill(tokens, ranks=ranks)
        return dict(hit)

    def prefill(self, tokens: float, past: float = 0.0,
                ranks: float | None = None) -> dict[str, float]:
        """Prefill of ``tokens`` new tokens of one sequence after ``past`` cached tokens.
        ``ranks``: attention-DP ranks prefilling at the same time (their tokens meet in the MoE
        layers); all ``dp`` of them by default (an aggregated engine's ranks prefill in
        lockstep), fewer on a lightly loaded prefill worker of a disaggregated deployment."""
        tokens = max(tokens, 1.0)
        ctx = past + tokens / 2  # causal: mean context seen by a new token
        attn = self.attention_flops(tokens, ctx, decode=False)
        sparse = self.sparse_prefill_flops(tokens, ctx)
        dp = self.lay.dp if ranks is None else min(max(ranks, 1.0), float(self.lay.dp))
        d0, m0 = self.linear_flops_per_token(dp, lm_head=False)
        d1, m1 = self.linear_flops_per_token(dp)
        gemm, moe = (tokens - 1) * d0 + d1, (tokens - 1) * m0 + m1
        t_cmp = self.compute_ms(gemm, moe, attn, sparse, tokens * dp)
        t_comm = self.comm_ms(tokens, tokens * dp)
        n = self.n_chunks(tokens)
        t_ovh = n * self.prof.t_chunk_ms
        # DSA top-k over every query-key score of the prompt, per layer (TOPK_LOGIT_BYTES)
        t_topk = self.mem_ms(self.dsa_layers * tokens * ctx * TOPK_LOGIT_BYTES)
        return {"flops": gemm + moe + attn, "gemm_flops": gemm, "moe_flops": moe,
                "attn_flops": attn, "sparse_flops": sparse, "route_tokens": tokens * dp,
                "t_compute": t_cmp, "t_comm": t_comm, "n_chunks": n,
                "t_overhead": t_ovh, "t_topk": t_topk, "total": t_cmp + t_comm + t_ovh + t_topk}
