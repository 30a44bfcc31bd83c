"""Serving under continuous batching in a closed-loop benchmark: TTFT, TPOT and throughput.

With ``C`` requests in flight per attention rank (a client that sends a new request whenever one
finishes), each request lives ``TTFT + (osl-1) x TPOT``, so requests arrive at
``λ = C / lifetime`` per rank. All terms are per attention rank, in milliseconds:

* ``t_decode(C)``: one decode step of the ``C`` sequences (timing.StepModel.decode);
* ``t_prefill``: one request's prefill (compute + communication + ``n_chunks x t_chunk``);
* ``TPOT = t_decode + κ x (C-1) x t_prefill / osl``: during one request's ``osl`` steps the
  other ``C-1`` requests each prefill once; a share ``κ`` (interference, per backend) of that
  time lands on the decode steps (chunked prefill mixes it into them, non-mixed schedulers stop
  decoding for it);
* ``TTFT = t_request + isl x t_in_token + t_prefill + k_step x t_decode + φ x (C-1)/2 x
  t_prefill + ψ x (osl-1) x TPOT / (C-1) [+ dp_wait x t_decode]``: a fixed per-request cost
  (HTTP, first sampling) and a cost per prompt token before the engine (tokenisation, IPC);
  the own prefill; admission at step boundaries (``k_step`` decode steps); the share ``φ`` of
  the arrival burst left in the average (benchmark clients start all ``C`` requests at once,
  and identical requests stay partly in step); the share ``ψ`` of requests that find the
  batch full and wait for the next completion (one completes every ``(osl-1) x TPOT / (C-1)``
  on average); and, with attention data parallel, the decode steps a new request waits until
  the ranks prefill together (``dp_wait``).

The form is closed (no fixed-point iteration): estimate is a few microseconds of arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from servewise.engine.common.deferred import Deferred
from servewise.engine.domain.perf.architecture import (
    attended_context,
    attention_flops_per_token,
    tp_split_problem,
    windowed,
)
from servewise.engine.domain.perf.bands import CLOSED_BINS, OPEN_BINS, load_bands, load_bin, lookup, regime
from servewise.engine.domain.perf.calibration import (
    CHUNK_TOKENS,
    MIXED_PREFILL_BACKENDS,
    Profile,
    gpu_class,
    load_calibration,
    profile,
)
from servewise.engine.domain.perf.memory import Layout, memory, usable_fraction
from servewise.engine.domain.perf.precision import check_precision, default_kv_precision
from servewise.engine.domain.perf.speculative import Speculation
from servewise.engine.domain.perf.timing import DSA_INDEXER_FLOOR_US, StepModel
from servewise.engine.domain.perf.types import Estimate, Step

MAX_BATCH = {"vllm": 1024, "trtllm": 2048, "sglang": 1024}  # max sequences per engine step
ARRIVALS = ("closed", "poisson")
LENGTHS = ("fixed", "random")  # request lengths of a closed-loop client
STATISTICS = ("mean", "median", "p99")
RHO_MAX = 0.995  # utilisation at which an open-loop queue is reported as saturated
# What sends the requests and pays the fixed per-request client cost ``t_client_ms`` of a TTFT:
# ``openai-http``: a client of the engine's OpenAI-compatible HTTP server (vllm serve, SGLang's
# server, trtllm-serve, a Dynamo frontend): the profile's fitted ``t_request_ms``, fitted on runs
# measured so (the rules above data.benchmark_harness); ``in-process``: a load generator calling the engine in its own
# process (trtllm-bench, MLPerf LoadGen, vLLM's LLM class): policy harness_in_process_client_ms.
HARNESSES = ("openai-http", "in-process")


def check_harness(harness: str) -> str:
    """``harness`` lower-cased, or ValueError naming the allowed ones."""
    h = str(harness).strip().lower()
    if h not in HARNESSES:
        raise ValueError(f"harness '{harness}': expected one of {', '.join(HARNESSES)}")
    return h


def default_harness() -> str:
    """The harness plans and estimates assume (policy harness_default)."""
    return check_harness(_policy("harness_default"))


def _policy(name: str) -> Any:
    from servewise.engine.domain.catalog import load_catalog

    return load_catalog().table("policies").get(name)["value"]


def client_ms(sm: StepModel) -> float:
    """The fixed per-request client cost of ``sm.harness``: the profile's ``t_request_ms`` through
    an OpenAI-compatible HTTP server, policy harness_in_process_client_ms in process."""
    if sm.harness == "openai-http":
        return sm.prof.t_request_ms
    return float(_policy("harness_in_process_client_ms"))


def front_ms(sm: StepModel, isl: int) -> float:
    """The request's cost before the engine: ``t_client_ms + isl x t_in_token_us / 1e3``."""
    return client_ms(sm) + isl * sm.prof.t_in_token_us / 1e3


def _base(sm: StepModel, c_rank: float, isl: int, osl: int,
          lockstep: bool = False) -> dict[str, Any]:
    """Prefill, decode step and TPOT with ``c_rank`` requests in flight on one attention rank.
    ``lockstep``: a closed loop of fixed-length requests, whose prefills land on the others'
    decode steps with the share ``interference_lockstep`` instead of ``interference`` where the
    backend runs prefills as steps of their own (not in MIXED_PREFILL_BACKENDS)."""
    prof = sm.prof
    pf = sm.prefill_once(isl)
    # a speculative step (sm.spec) emits tokens_per_step tokens: the time per token is the step's
    # share; the prefills landing in a request's life are the same whatever its step count
    dec = (sm.spec_decode if sm.spec else sm.decode)(max(c_rank, 1.0), isl + osl / 2.0)
    per_token = dec["total"] / dec.get("tokens_per_step", 1.0)
    others = max(c_rank - 1.0, 0.0)
    kappa = (prof.interference_lockstep if lockstep and prof.backend not in MIXED_PREFILL_BACKENDS
             else prof.interference)
    interf = kappa * others * pf["total"] / osl
    return {"prefill": pf, "dec": dec, "interference": interf, "tpot": per_token + interf,
            "batch": max(c_rank, 1.0), "n_dec": max(osl - 1, 0), "kappa": kappa}


def _solve(sm: StepModel, c_rank: float, isl: int, osl: int,
           recv_interval: int = 1, lengths: str = "fixed") -> dict[str, Any]:
    """Closed loop: TTFT, TPOT and arrival rate for ``c_rank`` requests in flight per rank.

    ``recv_interval`` N > 1: the scheduler takes new requests only every N decode steps
    (SGLang ``--scheduler-recv-interval``, set by benchmark recipes; default 1). A request
    arriving at a random point of the cycle waits ``(N-1)/2`` decode steps more than with N = 1,
    and the requests taken together are prefilled in one batch: its TTFT also holds the
    prefills of the others that arrived in the window, ``λ (N-1) t_decode`` of them.
    """
    prof = sm.prof
    s = _base(sm, c_rank, isl, osl, lockstep=lengths == "fixed")
    t_pf, t_dec, tpot, n_dec = s["prefill"]["total"], s["dec"]["total"], s["tpot"], s["n_dec"]
    others = max(c_rank - 1.0, 0.0)
    many = 1.0 if c_rank > 1 else 0.0
    step_wait = prof.k_step * t_dec * many
    burst = prof.burst * others / 2.0 * t_pf
    admission = prof.admission * n_dec * tpot / max(others, 1.0) * many
    dp_wait = prof.dp_wait * t_dec if sm.lay.dp > 1 else 0.0
    front = front_ms(sm, isl)
    ttft = front + t_pf + step_wait + burst + admission + dp_wait
    recv_wait = recv_batch = 0.0
    if recv_interval > 1 and c_rank > 1:
        window = (recv_interval - 1) * t_dec
        recv_wait = window / 2.0
        life0 = ttft + recv_wait + n_dec * tpot
        recv_batch = min(others, c_rank * window / life0) * t_pf
        ttft += recv_wait + recv_batch
    life = ttft + n_dec * tpot
    s.update(arrival="closed", lam=c_rank / life, step_wait=step_wait, burst=burst,
             admission=admission, dp_wait=dp_wait, front=front, recv_wait=recv_wait,
             recv_batch=recv_batch, ttft=ttft, ttft_p99=None, life=life, c_rank=c_rank)
    return s


def prefill_service_ms(sm: StepModel, t_prefill: float, t_decode: float, isl: int) -> float:
    """Engine time one request's prefill takes: its compute plus the decode steps its chunks share
    (``t_prefill + isl / chunk_tokens x t_decode``)."""
    return t_prefill + isl / CHUNK_TOKENS.get(sm.prof.backend, 8192) * t_decode


def md1_tail(rho: float) -> tuple[float, float]:
    """(x, c) of the M/D/1 waiting-time tail ``P(W > t) ≈ c exp(-x t / S)``.

    ``x`` is the positive root of ``ρ (e^x - 1) = x`` (Cramér-Lundberg: ``λ (E[e^{θS}] - 1) =
    θ`` with ``θ = x / S``), found by Newton's method from the right (``f`` is convex, so the
    iterates decrease monotonically to the root); ``c = (1-ρ) / (λ E[S e^{θS}] - 1) = (1-ρ) /
    (ρ e^x - 1)``. ρ is taken as at least 1e-9 (the values stay finite).
    """
    rho = max(rho, 1e-9)
    x = 2.0 * math.log(1.0 / rho) + 2.0
    expm1, exp = math.expm1, math.exp
    for _ in range(100):
        step = (rho * expm1(x) - x) / (rho * exp(x) - 1.0)
        x -= step
        if abs(step) < 1e-12 * (1.0 if 1.0 > x else x):  # max(x, 1.0), written out
            break
    return x, (1.0 - rho) / (rho * math.exp(x) - 1.0)


def _queue(sm: StepModel, s: dict[str, Any], lam: float, c_rank: float, isl: int) -> dict:
    """Open-loop TTFT terms at ``lam`` requests/ms per rank (M/D/1 queue of prefills).

    A request's prefill occupies the engine for ``S = t_prefill + isl/chunk x t_decode`` (its
    chunks share steps with the running decodes); prefills are served in arrival order, so the
    queue is M/D/1 with utilisation ``ρ = λ x S``: mean wait ``ρ S / (2 (1-ρ))`` (Pollaczek-
    Khinchine), P99 from the Cramér-Lundberg tail of the M/D/1 wait ``P(W > t) ≈ c exp(-x t /
    S)`` (``x`` the positive root of ``ρ (e^x - 1) = x``, ``c = (1-ρ) / (ρ e^x - 1)``; exact
    decay for deterministic service, where the exponential tail ``ρ exp(-ρ t / W_mean)`` of
    M/M/1 overstates the P99 at low load about 1.3-2x). An arrival also waits for the running
    step to end (mean half a decode step, at most one).
    """
    prof = sm.prof
    t_pf, t_dec = s["prefill"]["total"], s["dec"]["total"]
    chunk = CHUNK_TOKENS.get(prof.backend, 8192)
    svc = prefill_service_ms(sm, t_pf, t_dec, isl)
    rho = min(lam * svc, RHO_MAX)
    w_mean = rho * svc / (2 * (1 - rho))
    x, c_tail = md1_tail(rho)
    # P(W > 0) = ρ exactly (M/G/1): at ρ <= 1 % the P99 does not wait
    w_p99 = svc * max(math.log(c_tail / 0.01), 0.0) / x if rho > 0.01 else 0.0
    busy = 1 - math.exp(-c_rank)
    mix = prof.interference * math.ceil(isl / chunk) * t_dec * (1.0 if c_rank > 1 else 0.0)
    base = s["front"] + t_pf + mix
    return {"service": svc, "rho": rho, "chunk": chunk, "wait_mean": w_mean, "wait_p99": w_p99,
            "tail_x": x, "tail_c": c_tail,
            "busy": busy, "mix": mix, "ttft": base + t_dec / 2 * busy + w_mean,
            "ttft_p99": base + t_dec * busy + w_p99, "saturated": lam * svc >= RHO_MAX}


def _open_at(sm: StepModel, c_rank: float, isl: int, osl: int,
             base: dict[str, Any] | None = None) -> dict[str, Any]:
    """Open loop (Poisson arrivals) with ``c_rank`` requests in flight on average per rank.

    The rate that keeps ``c_rank`` in flight solves ``λ = C / (TTFT(λ) + (osl-1) x TPOT)``
    (Little's law); TTFT grows with λ, so the root is found by bisection. ``base``: ``_base``
    of the same arguments, when the caller has it already (it is completed in place).
    """
    s = _base(sm, c_rank, isl, osl) if base is None else base
    s["front"] = front_ms(sm, isl)
    tail = s["n_dec"] * s["tpot"]

    # the mean TTFT of ``_queue`` with the terms that do not depend on the rate taken out of
    # the loop (same operations in the same order, so the same floating-point result; the
    # P99 tail is not needed to find the rate)
    chunk = CHUNK_TOKENS.get(sm.prof.backend, 8192)
    t_pf, t_dec = s["prefill"]["total"], s["dec"]["total"]
    svc = prefill_service_ms(sm, t_pf, t_dec, isl)
    busy = 1 - math.exp(-c_rank)
    mix = sm.prof.interference * math.ceil(isl / chunk) * t_dec * (1.0 if c_rank > 1 else 0.0)
    fixed = s["front"] + t_pf + mix + t_dec / 2 * busy

    def gap(lam: float) -> float:
        rho = min(lam * svc, RHO_MAX)
        return lam * (fixed + rho * svc / (2 * (1 - rho)) + tail) - c_rank

    lo, hi = 0.0, RHO_MAX / svc
    if gap(hi) < 0:
        lam = hi
    else:
        # 60 halvings, ``gap`` written out; a halving that leaves (lo, hi) as they were leaves
        # every later one so too (same mid, same side), so the loop ends there: the same result
        for _ in range(60):
            mid = (lo + hi) / 2
            rho = mid * svc
            if RHO_MAX < rho:  # min(mid * svc, RHO_MAX), written out
                rho = RHO_MAX
            if mid * (fixed + rho * svc / (2 * (1 - rho)) + tail) - c_rank < 0:
                if mid == lo:
                    break
                lo = mid
            else:
                if mid == hi:
                    break
                hi = mid
        lam = (lo + hi) / 2
    return _finish_open(sm, s, lam, c_rank, isl)


def _open_rate(sm: StepModel, lam: float, isl: int, osl: int, limit: float) -> dict[str, Any]:
    """Open loop at ``lam`` requests/ms per rank: requests in flight from Little's law."""
    def life(c: float) -> tuple[float, dict[str, Any]]:
        s = _base(sm, c, isl, osl)
        s["front"] = front_ms(sm, isl)
        q = _queue(sm, s, lam, c, isl)
        return q["ttft"] + s["n_dec"] * s["tpot"], s

    lo, hi = 0.0, float(limit)
    at_cap = life(hi)
    lam_max = max_rate_per_rank(sm, hi, isl, osl)
    if lam >= lam_max or lam * at_cap[0] > hi:
        # saturated: more arrive than the engine completes with its batch full. TPOT stays at
        # the full batch's step; the state is the last steady one (the maximum rate, the batch
        # full), and the waiting line grows from there: the engine completes lam_max while lam
        # arrive, so a request arriving t after the overload began finds (lam - lam_max) t
        # requests waiting ahead of it and waits (lam / lam_max - 1) t longer (saturated_ttft)
        s = _finish_open(sm, at_cap[1], min(lam, lam_max), hi, isl)
        s.update(saturated=True, lam_offered=lam, lam_max=lam_max, batch_cap=hi,
                 ttft_growth=max(lam / lam_max - 1.0, 0.0))
        return s
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if lam * life(mid)[0] > mid else (lo, mid)
    c = (lo + hi) / 2
    s = _finish_open(sm, life(c)[1], lam, c, isl)
    s.update(saturated=False, lam_offered=lam, lam_max=lam_max, batch_cap=float(limit))
    return s


def saturated_ttft(s: dict[str, Any], run_ms: float, statistic: str = "mean") -> float:
    """TTFT of a saturated open loop (``s["saturated"]``) over a run whose requests arrive during
    ``run_ms``: a request arriving t into the overload waits ``growth x t`` (``s["ttft_growth"]``
    = offered / sustainable rate - 1) beyond the TTFT of the last steady state, so the mean over
    the run adds ``growth x run_ms / 2`` to that state's mean TTFT and the P99 adds
    ``growth x 0.99 x run_ms`` to its P99 (the fluid limit of the queue: the waiting line grows
    linearly while the load lasts; arrival noise is small beside it)."""
    growth = float(s.get("ttft_growth") or 0.0)
    if statistic == "p99":
        return float(s["ttft_p99"]) + growth * 0.99 * run_ms
    return float(s["ttft"]) + growth * run_ms / 2.0


def max_rate_per_rank(sm: StepModel, cap: float, isl: int, osl: int) -> float:
    """The largest arrival rate (requests/ms per rank) with a steady state: over the batch sizes
    ``c`` up to ``cap``, the most of ``min(c / lifetime(c), RHO_MAX / S(c))`` — the rate ``c``
    requests in flight complete (lifetime without a waiting line) and the rate the prefill
    queue serves below ``RHO_MAX`` (``S(c)``, a prefill's engine time beside ``c`` decodes).
    The first grows with ``c``, the second falls: the maximum is where they cross (found on a
    geometric grid of 48 sizes, then by golden-section search around the best)."""
    front = front_ms(sm, isl)

    def rate(c: float) -> float:
        b = _base(sm, c, isl, osl)
        t_pf, t_dec = b["prefill"]["total"], b["dec"]["total"]
        return min(c / (front + t_pf + b["n_dec"] * b["tpot"]),
                   RHO_MAX / prefill_service_ms(sm, t_pf, t_dec, isl))

    grid = [cap ** (i / 47) for i in range(48)] if cap > 1 else [1.0]
    vals = [rate(c) for c in grid]
    k = max(range(len(grid)), key=lambda i: (vals[i], -i))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    g = (5 ** 0.5 - 1) / 2
    for _ in range(30 if hi > lo else 0):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if rate(a) >= rate(b) else (a, hi)
    return max(vals[k], rate((lo + hi) / 2))


def _finish_open(sm: StepModel, s: dict[str, Any], lam: float, c_rank: float,
                 isl: int) -> dict[str, Any]:
    q = _queue(sm, s, lam, c_rank, isl)
    s.update(arrival="poisson", lam=lam, queue=q, ttft=q["ttft"], ttft_p99=q["ttft_p99"],
             life=q["ttft"] + s["n_dec"] * s["tpot"], c_rank=c_rank, step_wait=0.0, burst=0.0,
             admission=0.0, dp_wait=0.0)
    return s


COMPUTE_FORMULA = (
    "t_compute_ms = gemm_gflops / (peak_tflops x eta_flops x eta_lowp) + moe_gflops /"
    " (moe_peak_tflops x eta_flops x eta_lowp_moe x eta_moe) + (attention_gflops -"
    " sparse_mla_gflops) / (attention_peak_tflops x eta_flops x eta_lowp_attention) +"
    " sparse_mla_gflops / (bf16_peak_tflops x sparse_kernel_eff) + moe_route_gb / bw_gbs x 1e3")


def compute_values(sm: StepModel, gemm: float, moe: float, attn: float,
                   sparse: float = 0.0, route_tokens: float = 0.0) -> dict[str, Any]:
    """The printed inputs of :data:`COMPUTE_FORMULA` (FLOPs in GFLOP); ``sparse``: the part of
    ``attn`` FlashMLA's sparse prefill kernel runs (counted only where that kernel runs);
    ``route_tokens``: tokens the step routes through the MoE layers."""
    prof = sm.prof
    moe_peak, lowp_moe = sm.moe_rate
    eff = sm.sparse_kernel_eff
    return {"gemm_gflops": gemm / 1e9, "moe_gflops": moe / 1e9, "eta_moe": prof.eta_moe,
            "peak_tflops": sm.tflops, "eta_flops": prof.eta_flops,
            "eta_lowp": prof.eta_lowp if sm.low_precision else 1.0,
            "moe_peak_tflops": moe_peak, "eta_lowp_moe": lowp_moe,
            "attention_gflops": attn / 1e9, "attention_peak_tflops": sm.attn_tflops,
            "eta_lowp_attention": prof.eta_lowp if sm.attn_tflops > sm.tflops16 else 1.0,
            "sparse_mla_gflops": (sparse if eff else 0.0) / 1e9, "bf16_peak_tflops": sm.tflops16,
            "sparse_kernel_eff": eff or 1.0, "moe_route_gb": sm.route_bytes(route_tokens) / 1e9,
            "bw_gbs": sm.bw_gbs}


def _steps(sm: StepModel, s: dict[str, Any], isl: int, osl: int) -> list[Step]:
    """Explanation steps; every formula recomputes its result from its printed values."""
    d, pf, prof, lay, p = s["dec"], s["prefill"], sm.prof, sm.lay, sm.p
    c_rank = s["c_rank"]
    ctx = isl + osl / 2.0
    b = s["batch"]
    t_tokens = b * lay.dp
    share = sm.expert_fraction(t_tokens)
    exp_read = sm.expert_bytes * share
    mb = sm.micro_batches(b)
    kv = sm.kv_read_bytes(b, ctx) / mb
    comm_d = sm.comm_parts(b, t_tokens)
    comm_p = sm.comm_parts(isl, isl * lay.dp)
    link = sm.link
    mf = d.get("moe_flops", 0.0)
    steps = [Step("compute_rate", "peak = peak_tflops", {"how": sm.rate_note,
                                                         "peak_tflops": sm.tflops},
                  sm.tflops, "TFLOPS", "dense tensor rate of the GEMMs at this precision")]
    if p.is_moe:
        steps.append(Step(
            "experts_touched",
            "experts_touched_per_gpu = E / ep x (1 - (1 - k/E)^T)",
            {"E": p.num_experts, "k": p.experts_per_token, "ep": lay.ep, "T": t_tokens,
             "moe_tp": sm.moe_tp},
            sm.experts_per_gpu * share, "experts per layer",
            "T = tokens routed per MoE layer in the step (B sequences x dp attention ranks); "
            "each token picks k of E experts (uniform routing assumed); a GPU holds E/ep experts,"
            " each a 1/moe_tp slice; the fused MoE kernels read only the experts that received "
            "tokens (vLLM fused-MoE kernel latency, ops/*_moe_perf)"))
    window = sm.window_tok_gpu  # sliding-window layers (gpt-oss): min(context, window) tokens
    steps += [
        Step("decode_bytes",
             "bytes_gb = W_dense_per_gpu_gb + W_experts_per_gpu_gb x experts_touched_per_gpu"
             " / experts_per_gpu + (kv_per_token_per_gpu_b x attended + index_key_b x context"
             + (" + window_kv_b x windowed" if window else "") + ")"
             " x B / micro_batches / 1e9",
             {"W_dense_per_gpu_gb": sm.dense_bytes / 1e9,
              "W_experts_per_gpu_gb": sm.expert_bytes / 1e9,
              "experts_touched_per_gpu": sm.experts_per_gpu * share,
              "experts_per_gpu": sm.experts_per_gpu or 1.0, "B": b, "context": ctx,
              "attended": attended_context(sm.model, ctx), "index_key_b": sm.index_tok_gpu,
              "kv_per_token_per_gpu_b": sm.kv_tok_gpu, "micro_batches": mb}
             | ({"window_kv_b": window, "windowed": windowed(sm.model, ctx)} if window else {}),
             d["bytes"] / 1e9, "GB", "context = isl + osl/2 (mean over the output); attended = "
             "context, or the DSA indexer's top-k tokens (index_key_b: its FP8 keys, read for "
             "every token); with pipeline parallelism min(pp, B) micro-batches share a round, "
             "each stage reading its own layers' KV at the same time (micro_batches = 1 without "
             "PP)" + ("; window_kv_b: the sliding-window layers' KV per token, read for the "
                      "last windowed = min(context, sliding_window) tokens" if window else "")),
        Step("decode_memory",
             "t_mem_ms = (W_dense_gb + W_experts_read_gb / (eta_moe x moe_read) + kv_gb) /"
             " (bw_gbs x eta_bw) x 1e3",
             {"W_dense_gb": sm.dense_bytes / 1e9, "W_experts_read_gb": exp_read / 1e9,
              "eta_moe": prof.eta_moe, "moe_read": sm.moe_read, "kv_gb": kv / 1e9,
              "bw_gbs": sm.bw_gbs, "eta_bw": prof.eta_bw}, d["t_mem"], "ms",
             ("moe_read: expert-read efficiency of the precision's fused-MoE kernels relative "
              "to FP8 (weight-only INT4 de-quantises every weight): " + sm.moe_note
              if p.is_moe else "moe_read = 1: a dense model has no routed experts")),
        Step("decode_compute",
             COMPUTE_FORMULA,
             compute_values(sm, d["gemm_flops"], mf, d["attn_flops"], 0.0, d["route_tokens"]),
             d["t_compute"], "ms",
             "eta_lowp applies to native 8/4-bit GEMMs; the grouped expert GEMMs run at the "
             "measured fused-MoE kernels' rate relative to BF16 where the GPU class has kernel "
             "data (moe_peak_tflops = bf16 peak x that rate, eta_lowp_moe = 1), else like the "
             "dense GEMMs; attention runs at the FP8 rate over an FP8 KV cache on GPUs with "
             "native FP8; FLOPs per round of min(pp, B) pipeline micro-batches"),
        Step("decode_comm",
             "t_comm_ms = 2 x layers x (2 x (tp - 1) / tp x B x hidden x act_bytes / (link_gbs"
             " x eta_link x 1e6) + latency_us / 1e3) x (tp > 1) + moe_dispatch_ms + pp_hops_ms",
             {"layers": sm.layers, "tp": lay.tp, "B": b, "hidden": sm.hidden,
              "act_bytes": sm.act_bytes, "link": link[0], "link_gbs": link[1],
              "eta_link": link[2], "latency_us": link[3], "moe_dispatch_ms": comm_d["moe_a2a"],
              "pp_hops_ms": comm_d["pp_hops"]}, d["t_comm"], "ms",
             "TP all-reduces (2 per layer); MoE dispatch/combine when experts span more GPUs "
             "than tp; pipeline hops"),
        Step("overhead",
             "t_overhead_ms = t_step_ms + layers x (t_layer_us + t_moe_layer_us) / 1e3"
             " + B x t_seq_us / 1e3 + dsa_layers x t_indexer_us / 1e3",
             {"t_step_ms": prof.t_step_ms, "layers": sm.layers, "t_layer_us": prof.t_layer_us,
              "t_moe_layer_us": prof.t_moe_layer_us if p.is_moe else 0.0,
              "B": b, "t_seq_us": prof.t_seq_us, "dsa_layers": sm.dsa_layers,
              "t_indexer_us": DSA_INDEXER_FLOOR_US}, d["t_overhead"], "ms",
             "t_indexer_us: the DSA indexer's logits and top-k kernels at their launch floors "
             "(measured on H200, SGLang); dsa_layers = 0 without sparse attention"),
        Step("decode_step", "t_decode_ms = t_mem_ms + t_compute_ms + t_comm_ms + t_overhead_ms",
             {"t_mem_ms": d["t_mem"], "t_compute_ms": d["t_compute"], "t_comm_ms": d["t_comm"],
              "t_overhead_ms": d["t_overhead"]}, d["total"], "ms",
             "reading and computing are added: at served batch sizes they overlap little"),
        Step("prefill_compute",
             COMPUTE_FORMULA,
             {**compute_values(sm, pf["gemm_flops"], pf["moe_flops"], pf["attn_flops"],
                               pf["sparse_flops"], pf["route_tokens"]),
              "isl": isl}, pf["t_compute"], "ms",
             "isl tokens x 2 x weights per GPU (lm_head for the last token only; experts see "
             "dp x isl tokens) + causal attention at mean context isl/2; under DSA each token "
             "attends to its top-k in FlashMLA's sparse kernel (absorbed MLA, the GPU's heads "
             "padded to 64 on Hopper / 128 on Blackwell, at the kernel's measured share of the "
             "BF16 peak: sparse_mla_gflops, sparse_kernel_eff)"),
        Step("prefill",
             "t_prefill_ms = t_compute_ms + t_comm_ms + n_chunks x t_chunk_ms + t_topk_ms",
             {"t_compute_ms": pf["t_compute"], "t_comm_ms": pf["t_comm"],
              "n_chunks": pf["n_chunks"], "t_chunk_ms": prof.t_chunk_ms,
              "t_topk_ms": pf["t_topk"],
              "tp_allreduce_ms": comm_p["tp_allreduce"], "moe_dispatch_ms": comm_p["moe_a2a"]},
             pf["total"], "ms", "t_topk_ms: the DSA indexer's top-k over the prompt's scores "
             "(dsa_layers x isl x isl/2 scores x 16 bytes at the decode bandwidth, the measured "
             "top-k kernel on H200; 0 without DSA)"),
        Step("tpot", "TPOT_ms = t_decode_ms + kappa x max(C - 1, 0) x t_prefill_ms / osl",
             {"t_decode_ms": d["total"], "kappa": s["kappa"], "C": c_rank,
              "t_prefill_ms": pf["total"], "osl": osl}, s["tpot"], "ms",
             "the other requests' prefills land on this request's decode steps (share kappa: "
             "interference_lockstep in a closed loop of fixed-length requests, which start and "
             "finish together and stay in step; interference otherwise)"),
    ]
    front = {"t_client_ms": client_ms(sm), "harness": sm.harness, "isl": isl,
             "t_in_token_us": prof.t_in_token_us}
    if s["arrival"] == "closed":
        steps.append(Step(
            "ttft",
            "TTFT_ms = t_client_ms + isl x t_in_token_us / 1e3 + t_prefill_ms + k_step x"
            " t_decode_ms x (C > 1) + phi x max(C - 1, 0) / 2 x t_prefill_ms + admission_ms"
            " + dp_wait_ms",
            {**front, "t_prefill_ms": pf["total"], "k_step": prof.k_step,
             "t_decode_ms": d["total"], "phi": prof.burst, "C": c_rank,
             "admission_ms": s["admission"], "dp_wait_ms": s["dp_wait"]},
            s["ttft"], "ms",
            "t_client_ms: the fixed per-request client cost of the harness (openai-http: the "
            "calibration's t_request_ms, the engine's OpenAI-compatible HTTP server and its client;"
            " in-process: none); closed loop (a benchmark client with C requests in flight, started together): "
            "admission = psi x (osl-1) x TPOT / (C-1), the wait for a completion when the batch "
            "is full; dp_wait = decode steps waited for lockstep prefill with attention DP"))
    else:
        q = s["queue"]
        steps += [
            Step("prefill_service",
                 "S_ms = t_prefill_ms + isl / chunk_tokens x t_decode_ms",
                 {"t_prefill_ms": pf["total"], "isl": isl, "chunk_tokens": q["chunk"],
                  "t_decode_ms": d["total"]}, q["service"], "ms",
                 "engine time one request's prefill takes (its chunks share steps with decodes)"),
            Step("utilisation", "rho = lambda_per_s x S_ms / 1e3",
                 {"lambda_per_s": s["lam"] * 1e3, "S_ms": q["service"]}, q["rho"], "",
                 "open loop: Poisson arrivals at lambda per attention rank"
                 + ("; SATURATED (rho capped)" if q["saturated"] else "")),
            Step("queue_wait", "W_mean_ms = rho x S_ms / (2 x (1 - rho))",
                 {"rho": q["rho"], "S_ms": q["service"]}, q["wait_mean"], "ms",
                 "M/D/1 mean wait (Pollaczek-Khinchine) for the prefills ahead"),
            Step("queue_tail_decay", "decay = ln(1 + decay / rho)",
                 {"decay": q["tail_x"], "rho": q["rho"]}, q["tail_x"], "",
                 "decay of the M/D/1 wait per service time: the positive root of rho x "
                 "(exp(decay) - 1) = decay (Cramér-Lundberg)"),
            Step("queue_tail_share", "c_tail = (1 - rho) / (rho x exp(decay) - 1)",
                 {"rho": q["rho"], "decay": q["tail_x"]}, q["tail_c"], "",
                 "P(W > t) = c_tail x exp(-decay x t / S_ms): the tail of the wait"),
            Step("queue_wait_p99",
                 "W_p99_ms = S_ms x max(ln(c_tail / 0.01), 0) / decay x (rho > 0.01)",
                 {"S_ms": q["service"], "c_tail": q["tail_c"], "decay": q["tail_x"],
                  "rho": q["rho"]}, q["wait_p99"], "ms",
                 "P(W > W_p99) = 1 %; P(W > 0) = rho, so no wait at rho <= 1 %"),
            Step("ttft",
                 "TTFT_ms = t_client_ms + isl x t_in_token_us / 1e3 + t_decode_ms / 2 x busy"
                 " + W_mean_ms + t_prefill_ms + kappa x n_chunks x t_decode_ms x (C > 1)",
                 {**front, "t_decode_ms": d["total"], "busy": q["busy"],
                  "W_mean_ms": q["wait_mean"], "t_prefill_ms": pf["total"],
                  "kappa": prof.interference, "n_chunks": math.ceil(isl / q["chunk"]),
                  "C": c_rank}, s["ttft"], "ms",
                 "mean: the harness's client cost (t_client_ms), residual of the running step "
                 "(busy = 1 - exp(-C)), queue wait, own prefill, decode steps mixed into its "
                 "chunks"),
            Step("ttft_p99",
                 "TTFT_p99_ms = t_client_ms + isl x t_in_token_us / 1e3 + t_decode_ms x busy"
                 " + W_p99_ms + t_prefill_ms + kappa x n_chunks x t_decode_ms x (C > 1)",
                 {**front, "t_decode_ms": d["total"], "busy": q["busy"],
                  "W_p99_ms": q["wait_p99"], "t_prefill_ms": pf["total"],
                  "kappa": prof.interference, "n_chunks": math.ceil(isl / q["chunk"]),
                  "C": c_rank}, s["ttft_p99"], "ms"),
        ]
    steps += [
        Step("lifetime", "life_ms = TTFT_ms + (osl - 1) x TPOT_ms",
             {"TTFT_ms": s["ttft"], "osl": osl, "TPOT_ms": s["tpot"]}, s["life"], "ms"),
    ]
    if s["arrival"] == "closed":
        steps.append(Step("arrival_rate", "lambda_per_s = C / life_ms x 1e3",
                          {"C": c_rank, "life_ms": s["life"]}, s["lam"] * 1e3, "req/s",
                          "per attention rank: the rate C requests in flight produce"))
    else:
        q = s["queue"]
        steps.append(Step(
            "arrival_rate", "lambda_per_s = min(C / life_ms, rho_max / S_ms) x 1e3",
            {"C": c_rank, "life_ms": s["life"], "rho_max": RHO_MAX, "S_ms": q["service"]},
            s["lam"] * 1e3, "req/s",
            "per attention rank: Little's law (C in flight over their lifetime), at most the "
            "rate the prefill queue can serve (rho_max)"))
    return steps


def _step_model(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, precision: str,
                backend: str, kv_precision: str | None,
                calibration: dict[str, Any] | None,
                speculative: Speculation | None = None,
                harness: str = "openai-http") -> StepModel:
    kvp = kv_precision or default_kv_precision(gpu, precision)
    sm = StepModel.build(model, gpu, lay, precision, kvp, profile(gpu, backend, calibration),
                         calibration)
    if harness != sm.harness:
        sm = replace(sm, harness=check_harness(harness))
    return replace(sm, spec=speculative) if speculative else sm


def _check_arrival(arrival: str, request_rate: float | None) -> str:
    arrival = "poisson" if request_rate is not None else str(arrival).lower()
    if arrival not in ARRIVALS:
        raise ValueError(f"arrival '{arrival}': expected one of {', '.join(ARRIVALS)}")
    if request_rate is not None and not request_rate > 0:
        raise ValueError("request_rate must be positive (requests/s)")
    return arrival


def solve(sm: StepModel, *, isl: int, osl: int, concurrency: float, arrival: str = "closed",
          request_rate: float | None = None, limit: float = 1024,
          recv_interval: int = 1, lengths: str = "fixed") -> dict[str, Any]:
    """The serving state of one replica: closed loop at ``concurrency`` in flight, or open loop
    (Poisson) at ``request_rate`` requests/s (``concurrency`` then comes from Little's law) or,
    without a rate, at the rate that keeps ``concurrency`` in flight on average.
    ``recv_interval``: the scheduler's receive interval of a closed-loop run (``_solve``);
    ``lengths``: a closed loop's request lengths, ``fixed`` (every request isl / osl: they stay
    in step) or ``random`` (drawn from a range around the means isl / osl)."""
    arrival = _check_arrival(arrival, request_rate)
    if lengths not in LENGTHS:
        raise ValueError(f"lengths '{lengths}': expected one of {', '.join(LENGTHS)}")
    dp = sm.lay.dp
    if arrival == "closed":
        return _solve(sm, concurrency / dp, isl, osl, recv_interval, lengths)
    if request_rate is not None:
        return _open_rate(sm, request_rate / 1e3 / dp, isl, osl, limit)
    return _open_at(sm, concurrency / dp, isl, osl)


def predict(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, *, precision: str,
            isl: int, osl: int, concurrency: float, backend: str = "vllm",
            kv_precision: str | None = None,
            calibration: dict[str, Any] | None = None, arrival: str = "closed",
            request_rate: float | None = None, statistic: str = "mean",
            recv_interval: int = 1, lengths: str = "fixed",
            speculative: Speculation | None = None,
            harness: str = "openai-http") -> tuple[float | None, float, float]:
    """(TTFT ms, TPOT ms, output tokens/s) without memory check or explanation (fast path);
    ``speculative``: speculative decoding (perf.speculative), off when None.

    ``statistic`` ``p99`` gives the P99 TTFT of the open-loop queue (None in closed loop, which
    models the mean); ``mean`` and ``median`` give the mean. ``recv_interval``: the scheduler's
    receive interval of a measured closed-loop run (data.RECV_INTERVAL_RULES).
    """
    ttft, tpot, tput, _ = predict_state(
        model, gpu, lay, precision=precision, isl=isl, osl=osl, concurrency=concurrency,
        backend=backend, kv_precision=kv_precision, calibration=calibration, arrival=arrival,
        request_rate=request_rate, statistic=statistic, recv_interval=recv_interval,
        lengths=lengths, speculative=speculative, harness=harness)
    return ttft, tpot, tput


def predict_state(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, *, precision: str,
                  isl: int, osl: int, concurrency: float, backend: str = "vllm",
                  kv_precision: str | None = None,
                  calibration: dict[str, Any] | None = None, arrival: str = "closed",
                  request_rate: float | None = None, statistic: str = "mean",
                  recv_interval: int = 1, lengths: str = "fixed",
                  speculative: Speculation | None = None, harness: str = "openai-http"
                  ) -> tuple[float | None, float, float, dict[str, Any]]:
    """:func:`predict` with the solved serving state and its profile (``state["prof"]``), from
    which the estimate's regime and band follow (:func:`regime_of`, :func:`band_of`);
    ``harness``: what sent the requests (HARNESSES), which sets the client cost of a TTFT."""
    sm = _step_model(model, gpu, lay, precision, backend, kv_precision, calibration, speculative,
                     harness)
    limit = (batch_cap(model, gpu, lay, precision, kv_precision or default_kv_precision(gpu, precision),
                       isl, osl, sm.prof.backend)
             if request_rate else MAX_BATCH.get(sm.prof.backend, 1024))
    s = solve(sm, isl=isl, osl=osl, concurrency=concurrency, arrival=arrival,
              request_rate=request_rate, limit=limit,
              recv_interval=recv_interval, lengths=lengths)
    ttft = s["ttft_p99"] if statistic == "p99" else s["ttft"]
    return ttft, s["tpot"], s["lam"] * 1e3 * osl * lay.dp, {**s, "prof": sm.prof}


def batch_cap(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, precision: str,
              kv_precision: str, isl: int, osl: int, backend: str,
              gpu_memory_utilization: float | None = None) -> float:
    """The most sequences one engine rank holds in its batch: the backend's sequence limit
    (MAX_BATCH), or fewer where the KV cache holds fewer sequences of ``isl + osl / 2`` tokens
    (a request waits outside the batch until one finishes)."""
    gpu_memory_utilization = usable_fraction() if gpu_memory_utilization is None else gpu_memory_utilization
    mem = memory(model, gpu, tp=lay.tp, pp=lay.pp, ep=lay.ep, precision=precision,
                 tokens_in_flight=0, kv_precision=kv_precision,
                 gpu_memory_utilization=gpu_memory_utilization, attention_dp=lay.attention_dp,
                 context=isl + osl / 2.0)
    limit = float(MAX_BATCH.get(backend, 1024))
    if not mem.kv_capacity_tokens:
        return limit
    return max(1.0, min(limit, mem.kv_capacity_tokens / lay.dp / (isl + osl / 2.0)))


def regime_of(prof: Profile, s: dict[str, Any] | None, *, offline: bool = False) -> dict[str, str]:
    """The band regime of a solved state (perf.bands): backend, arrival, load relative to
    capacity (requests in flight per engine rank, or the open-loop queue's utilisation)."""
    if offline:
        arrival = "offline"
    else:
        arrival = "closed" if not s or s.get("arrival") == "closed" else "open"
    rho = ((s or {}).get("queue") or {}).get("rho")
    load = load_bin(arrival, per_rank=(s or {}).get("c_rank"), rho=rho)
    reg = regime(prof.backend, arrival, load)
    if arrival == "open":  # its batch, as a closed loop of the same requests in flight holds it
        reg["closed_load"] = load_bin("closed", per_rank=(s or {}).get("c_rank"))
    return reg


_BANDS_SEEN: dict[tuple, tuple[dict[str, Any], tuple[list[float], str]]] = {}


def band_of(prof: Profile, reg: dict[str, str], metric: str,
            calibration: dict[str, Any] | None = None) -> tuple[list[float], str]:
    """``([low, high] multipliers, where they come from)`` of ``metric``'s 80 % band: the
    out-of-sample band of the regime (perf.bands), widened like the profile's own band for a
    GPU class or backend without measured rows; the profile's in-sample band without a bands
    file. Remembered per (profile class, regime, metric) while the same bands file is loaded (a
    plan asks the same few thousands of times)."""
    bands = load_bands()
    key = (prof.gpu_class, prof.backend, prof.band_widening, prof.vendor, reg["backend"],
           reg["arrival"], reg["load"], reg.get("closed_load"), metric)
    hit = _BANDS_SEEN.get(key)
    if bands and hit is not None and hit[0] is bands:
        lo_hi, what = hit[1]
        return list(lo_hi), what
    out = _band_of(prof, reg, metric)
    if bands:
        _BANDS_SEEN[key] = (bands, (list(out[0]), out[1]))
    return out


def _band_of(prof: Profile, reg: dict[str, str], metric: str) -> tuple[list[float], str]:
    closed = reg.get("closed_load")
    if closed is not None and metric == "ttft_ms":
        # an open loop's TTFT is the front, the prefill and the queue the model computes; a
        # loaded closed loop's TTFT error is mostly its clients' start-together waits, which
        # Poisson arrivals do not have: the front and prefill err as in a lightly loaded one
        closed = CLOSED_BINS[0][1]
    hit = lookup(reg["backend"], reg["arrival"], reg["load"], metric, closed_load=closed)
    if hit is None:
        return list(prof.band[metric]), "in-sample band of the calibration profile"
    (lo, hi), used = hit
    what = (f"held-out residuals of {used['backend']} / {used['arrival']} / {used['load']}"
            " (facts/calibration-bands.yaml)")
    w = widening(prof, metric)
    if w != 1.0:  # constants borrowed from another class or backend: a wider band
        lo, hi = lo ** w, hi ** w
        what += f", widened ** {w:.3g} (no measured rows of this class and backend)"
    return [lo, hi], what


def widening(prof: Profile, metric: str) -> float:
    """The exponent on a held-out band for a profile whose constants are borrowed: the measured
    leave-one-class-out exponent of ``metric`` (facts/calibration-bands.yaml
    ``unmeasured_widening``, tools/perf/class_widening.py) for a class without measured rows,
    its square root for a backend borrowed by ratio from another class (as the profile's own
    ``band_widening`` relates to calibration.yaml's ``unmeasured_band_widening``); without
    measured exponents, or for a vendor whose classes were not held out (the exponents were
    measured on NVIDIA classes only: AMD and Ascend run other software stacks), the profile's
    own."""
    if prof.band_widening == 1.0:
        return 1.0
    section = load_bands().get("unmeasured_widening") or {}
    measured = section.get(metric)
    if measured is None or prof.vendor not in section.get("vendors", ["nvidia"]):
        # no measured exponent, or a vendor none of whose classes was held out (another
        # software stack too): the assumed widening of calibration.yaml
        return prof.band_widening
    full = float(load_calibration().get("unmeasured_band_widening", 2.0))
    share = math.log(prof.band_widening) / math.log(full) if full > 1 else 1.0
    return float(measured) ** share


def engine_prefill_ms(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, *,
                      precision: str, isl: int, backend: str = "vllm",
                      kv_precision: str | None = None,
                      calibration: dict[str, Any] | None = None) -> float:
    """One prefill as a single engine step: compute + communication + the step's kernel costs.

    What an in-process single-stream prefill benchmark times (no server, queue or chunked
    scheduler); a served TTFT adds t_request, admission and queueing (``predict``).
    """
    sm = _step_model(model, gpu, lay, precision, backend, kv_precision, calibration)
    pf = sm.prefill(isl)
    return pf["t_compute"] + pf["t_comm"] + sm.overhead_ms(1.0)


def _band(prof: Profile, reg: dict[str, str], ttft: float, tpot: float, tput: float,
          calibration: dict[str, Any] | None = None) -> dict[str, tuple[float, float]]:
    out = {}
    for metric, v in (("ttft_ms", ttft), ("tpot_ms", tpot), ("output_tokens_per_s", tput)):
        (lo, hi), _ = band_of(prof, reg, metric, calibration)
        out[metric] = (v * lo, v * hi)
    return out


def estimate(model: dict[str, Any], gpu: dict[str, Any], **kwargs: Any) -> Estimate:
    """TTFT, TPOT and total output tokens/s of one replica with ``concurrency`` requests in flight
    (the arguments of :func:`estimate_parts`), with every formula step of its explanation."""
    est, more = estimate_parts(model, gpu, **kwargs)
    extra = more()
    return replace(est, steps=est.steps + tuple(extra)) if extra else est


def estimate_record(model: dict[str, Any], gpu: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """:func:`estimate` as plain values (``Estimate.to_dict``) whose formula steps are a
    :class:`~servewise.engine.common.deferred.Deferred`: made and written out only if a plan shows
    them (most of the hundreds of estimates a plan makes never are)."""
    est, more = estimate_parts(model, gpu, **kwargs)
    out = est.to_dict()
    out["steps"] = Deferred(lambda: [st.to_dict() for st in (*est.steps, *more())])
    return out


def estimate_parts(model: dict[str, Any], gpu: dict[str, Any], *, tp: int = 1, pp: int = 1,
                   ep: int = 1, precision: str, isl: int, osl: int, concurrency: int,
                   backend: str = "vllm", kv_precision: str | None = None,
                   gpu_memory_utilization: float | None = None, attention_dp: int = 1,
                   check_memory: bool = True, calibration: dict[str, Any] | None = None,
                   arrival: str = "closed", request_rate: float | None = None,
                   request_lengths: str = "fixed", speculative: Speculation | None = None,
                   harness: str | None = None
                   ) -> tuple[Estimate, Callable[[], list[Step]]]:
    """The estimate with the memory steps of its explanation, and a function making the rest of
    its steps (a pure function of the solved state: the same steps whenever it is called).

    ``arrival`` ``closed`` (default): a benchmark client keeps ``concurrency`` requests in
    flight, started together. ``poisson``: open-loop arrivals at the rate that keeps
    ``concurrency`` in flight on average, or at ``request_rate`` requests/s when given (the
    requests in flight then follow from Little's law); TTFT is then the mean and ``ttft_p99_ms``
    its 99th percentile. ``request_lengths`` (closed loop): ``fixed`` (every request isl / osl:
    the requests stay in step) or ``random`` (drawn from a range with those means).
    ``attention_dp`` > 1 runs attention data-parallel (each rank its own
    sequences) with MoE layers shared by all ``tp x attention_dp`` GPUs. ``check_memory=False``
    estimates timings even when the KV cache would not fit (used to validate against measured
    rows); ``calibration`` overrides facts/calibration.yaml (used by the refit);
    ``speculative``: speculative decoding (perf.speculative) — the steps explain the plain decode
    step, then the speculative step that gives TPOT, TTFT and throughput. ``harness``: what
    sends the requests (HARNESSES; default: policy harness_default), which sets TTFT's client cost.
    """
    gpu_memory_utilization = usable_fraction() if gpu_memory_utilization is None else gpu_memory_utilization
    precision = check_precision(precision)
    if isl < 1 or osl < 1 or concurrency < 1:
        raise ValueError("isl, osl and concurrency must be positive")
    arrival = _check_arrival(arrival, request_rate)
    harness = check_harness(harness) if harness is not None else default_harness()
    problem = tp_split_problem(model, tp)
    if problem:
        raise ValueError(problem)
    lay = Layout(tp, pp, ep, attention_dp)
    kvp = kv_precision or default_kv_precision(gpu, precision)
    prof = profile(gpu, backend, calibration)
    try:
        sm: StepModel | None = StepModel.build(model, gpu, lay, precision, kvp, prof, calibration)
    except ValueError as exc:
        sm, why = None, str(exc)
    if sm is not None and sm.harness != harness:
        sm = replace(sm, harness=harness)
    s = plain = None
    if sm is not None:
        limit = (batch_cap(model, gpu, lay, precision, kvp, isl, osl, prof.backend,
                           gpu_memory_utilization) if request_rate
                 else MAX_BATCH.get(prof.backend, 1024))
        plain = solve(sm, isl=isl, osl=osl, concurrency=concurrency, arrival=arrival,
                      request_rate=request_rate, limit=limit, lengths=request_lengths)
        s = plain if speculative is None else solve(
            replace(sm, spec=speculative), isl=isl, osl=osl, concurrency=concurrency,
            arrival=arrival, request_rate=request_rate, limit=limit, lengths=request_lengths)
    in_flight = s["c_rank"] * lay.dp if s is not None and request_rate else float(concurrency)
    tokens = in_flight * (isl + osl / 2.0)
    mem = memory(model, gpu, tp=tp, pp=pp, ep=ep, precision=precision, tokens_in_flight=tokens,
                 kv_precision=kvp, gpu_memory_utilization=gpu_memory_utilization,
                 attention_dp=attention_dp, context=isl + osl / 2.0)
    cal = {"gpu_class": gpu_class(gpu), "backend": prof.backend, "measured": prof.measured,
           "source": prof.source}
    inputs = {"model": model.get("id"), "gpu": gpu.get("id"), "tp": tp, "pp": pp, "ep": ep,
              "attention_dp": attention_dp, "n_gpus": lay.n_gpus, "precision": precision,
              "kv_precision": kvp, "isl": isl, "osl": osl, "concurrency": concurrency,
              "backend": prof.backend, "gpu_memory_utilization": gpu_memory_utilization,
              "arrival": arrival, "request_rate": request_rate,
              "request_lengths": request_lengths if arrival == "closed" else None,
              "harness": harness,
              "speculative": None if speculative is None else {
                  "tokens": speculative.tokens, "acceptance": speculative.acceptance,
                  "source": speculative.source}}
    steps = tuple(mem.steps)
    null_band = {"ttft_ms": None, "tpot_ms": None, "output_tokens_per_s": None}
    if check_memory and not mem.fits:
        return Estimate(None, None, None, False, mem.reason, mem, null_band, cal, steps, inputs), list
    if sm is None or s is None:
        return Estimate(None, None, None, mem.fits, why, mem, null_band, cal, steps, inputs), list
    tput = s["lam"] * 1e3 * osl * lay.dp

    def more() -> list[Step]:
        out = _steps(sm, plain, isl, osl)
        if speculative is not None:
            d = s["dec"]
            out.append(Step(
                "speculative_tpot",
                "tpot_ms = (t_verify_ms + t_draft_ms) / tokens_per_step + interference_ms",
                {"t_verify_ms": d["total"] - d["t_draft"], "t_draft_ms": d["t_draft"],
                 "tokens_per_step": d["tokens_per_step"], "interference_ms": s["interference"],
                 "k": speculative.tokens, "a": speculative.acceptance},
                s["tpot"], "ms",
                f"speculative decoding: the draft proposes k tokens (k passes of {speculative.draft_layers:g} "
                "layer(s) of this model), one target step verifies k + 1 positions per sequence (weights "
                "and KV read once), tokens_per_step = (1 - a^(k+1)) / (1 - a); acceptance a from "
                f"{speculative.source}; TTFT with it {s['ttft']:.1f} ms (the step above is the plain one)"))
        out.append(Step("throughput", "tokens_per_s = lambda_per_s x osl x dp",
                        {"lambda_per_s": s["lam"] * 1e3, "osl": osl, "dp": lay.dp}, tput,
                        "tokens/s"))
        if request_rate:
            out.append(Step("in_flight", "C_total = C x dp", {"C": s["c_rank"], "dp": lay.dp},
                            in_flight, "requests", "requests in flight at the offered rate"))
        return out

    reg = regime_of(prof, s)
    band = _band(prof, reg, s["ttft"], s["tpot"], tput, calibration)
    p99 = s["ttft_p99"]
    if p99 is not None:
        (lo, hi), _ = band_of(prof, reg, "ttft_ms", calibration)
        band["ttft_p99_ms"] = (p99 * lo, p99 * hi)
    cal["band_regime"] = reg
    cal["band_source"] = band_of(prof, reg, "tpot_ms", calibration)[1]
    return Estimate(s["ttft"], s["tpot"], tput, mem.fits, mem.reason, mem, band, cal,
                    steps, inputs, ttft_p99_ms=p99, load=open_load(s, lay.dp)), more


def open_load(s: dict[str, Any], dp: int) -> dict[str, Any] | None:
    """How loaded an open loop at an offered rate is: the prefill queue's utilisation, the
    batch's occupancy, the largest sustainable rate and whether the offered one exceeds it."""
    if s.get("lam_max") is None:
        return None
    return {"offered_requests_per_s": round(s["lam_offered"] * 1e3 * dp, 4),
            "max_requests_per_s": round(s["lam_max"] * 1e3 * dp, 4),
            "utilisation": round(s["lam_offered"] / s["lam_max"], 4),
            "prefill_queue_rho": round(s["queue"]["rho"], 4),
            "in_flight_per_rank": round(s["c_rank"], 2), "batch_cap_per_rank": round(s["batch_cap"], 1),
            "saturated": bool(s.get("saturated")),
            # saturated: TTFT grows by this much for every second the overload lasts
            # (saturated_ttft); ttft_ms is the last steady state's, at the sustainable maximum
            "ttft_growth_ms_per_s": round(float(s.get("ttft_growth") or 0.0) * 1e3, 4)}


TTFT_STATISTICS = ("p99", "mean")
CONFIDENCES = ("p80", "median")


def sla_ttft(s: dict[str, Any], up_ttft: float, statistic: str = "p99", confidence: str = "p80") -> float:
    """The TTFT an SLA is checked against. The mean at the ``confidence`` edge of its band
    (``p80``: ``up_ttft`` x the estimate, the upper end of the 80 % band of measured / predicted on
    held-out campaigns (perf.bands); ``median``: the estimate); for a ``p99`` target in open loop also the queue's
    P99, at its central value whatever the confidence: the band was measured on mean and median
    latencies, not on P99s (the plan warns when the band, applied to the P99 as well, would
    reach the target)."""
    mean = s["ttft"] * (up_ttft if confidence == "p80" else 1.0)
    if statistic == "mean" or s.get("ttft_p99") is None:
        return mean
    return max(mean, s["ttft_p99"])


def replica_setup(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, precision: str, isl: int, osl: int,
                  backend: str = "vllm", limit: int = 1024, kv_precision: str | None = None,
                  gpu_memory_utilization: float | None = None,
                  speculative: Speculation | None = None) -> tuple[StepModel, int] | None:
    """The step model of one replica and the most requests it can hold (its KV capacity in
    sequences of ``isl + osl/2`` tokens, at most ``limit``); None when the engines refuse the tp,
    the weights do not fit or not one sequence's KV cache does. What :func:`max_concurrency` and
    :func:`decode_floor_ms` start from (a caller may compute it once for both)."""
    gpu_memory_utilization = usable_fraction() if gpu_memory_utilization is None else gpu_memory_utilization
    precision = check_precision(precision)
    if tp_split_problem(model, lay.tp):  # the engines refuse this tp (estimate_parts raises): no request runs
        return None
    kvp = kv_precision or default_kv_precision(gpu, precision)
    mem = memory(model, gpu, tp=lay.tp, pp=lay.pp, ep=lay.ep, precision=precision, tokens_in_flight=0,
                 kv_precision=kvp, gpu_memory_utilization=gpu_memory_utilization,
                 attention_dp=lay.attention_dp, context=isl + osl / 2.0)
    if not mem.fits:
        return None
    cap = int(mem.kv_capacity_tokens // (isl + osl / 2.0)) if mem.kv_capacity_tokens else 0
    hi = min(max(1, int(limit)), cap)
    if hi < 1:
        return None
    try:
        sm = StepModel.build(model, gpu, lay, precision, kvp, profile(gpu, backend))
    except ValueError:
        return None
    return (sm if speculative is None else replace(sm, spec=speculative)), hi


def prefill_floor_ms(setup: tuple[StepModel, int] | None, *, isl: int) -> float | None:
    """The prefill of one request's ``isl`` tokens on the replica of ``setup`` (ms): what its time
    to first token is at least, whatever the load (the front end, queueing and the step it waits
    for only add), so a request occupies a replica at least this plus its decode steps. None when
    no request runs."""
    return None if setup is None else setup[0].prefill_once(isl)["total"]


def decode_floor_ms(setup: tuple[StepModel, int] | None, *, isl: int, osl: int, concurrency: int) -> float | None:
    """What every TPOT the model gives the replica of ``setup`` (:func:`replica_setup`) with
    ``concurrency`` requests in flight is at least (ms per output token): its decode step's share
    per token, plus the other requests' prefills landing on its steps at the smaller of the
    profile's two interference shares (open loop and closed), capped at 1 (so that, with
    :func:`prefill_floor_ms`, ``C / (t_prefill + osl x this)`` never falls as C grows). None when
    no request runs."""
    if setup is None:
        return None
    sm = setup[0]
    c_rank = max(concurrency / sm.lay.dp, 1.0)
    dec = (sm.spec_decode if sm.spec else sm.decode)(c_rank, isl + osl / 2.0)
    kappa = min(sm.prof.interference, sm.prof.interference_lockstep, 1.0)
    return dec["total"] / dec.get("tokens_per_step", 1.0) + kappa * (c_rank - 1.0) * sm.prefill_once(isl)["total"] / osl


def max_concurrency(model: dict[str, Any], gpu: dict[str, Any], *, tp: int, pp: int = 1,
                    ep: int = 1, precision: str, isl: int, osl: int, ttft_ms: float | None,
                    tpot_ms: float | None, backend: str = "vllm", limit: int = 1024,
                    kv_precision: str | None = None, gpu_memory_utilization: float | None = None,
                    attention_dp: int = 1, arrival: str = "closed",
                    ttft_statistic: str = "p99", confidence: str = "p80",
                    speculative: Speculation | None = None,
                    setup: tuple[StepModel, int] | None | bool = False) -> int:
    """Largest concurrency whose upper-band TTFT/TPOT meet the targets and whose KV fits (0: none).
    ``setup``: the replica's :func:`replica_setup` for these arguments when the caller has it.

    ``arrival="poisson"`` sizes for production traffic: the open-loop queue at the rate that keeps
    C in flight, its TTFT checked as ``sla_ttft`` (P99 of the queue or the mean's upper band;
    ``ttft_statistic="mean"``: the mean's upper band alone); ``confidence`` the edge of the
    estimate band the targets are met at (``p80``: its upper end; ``median``: the central
    estimate), for TTFT and TPOT alike.
    Memory is checked once (KV capacity in sequences of ``isl + osl/2`` tokens); TTFT and TPOT
    grow with concurrency, so the latency limit is found by bisection over the fast path.
    """
    gpu_memory_utilization = usable_fraction() if gpu_memory_utilization is None else gpu_memory_utilization
    precision = check_precision(precision)
    arrival = _check_arrival(arrival, None)
    if ttft_statistic not in TTFT_STATISTICS:
        raise ValueError(f"ttft_statistic must be one of {', '.join(TTFT_STATISTICS)}, not {ttft_statistic!r}")
    if confidence not in CONFIDENCES:
        raise ValueError(f"confidence must be one of {', '.join(CONFIDENCES)}, not {confidence!r}")
    if setup is False:
        setup = replica_setup(model, gpu, Layout(tp, pp, ep, attention_dp), precision, isl, osl, backend, limit,
                              kv_precision, gpu_memory_utilization, speculative)
    if setup is None:
        return 0
    sm, hi = setup
    prof = sm.prof
    dp = sm.lay.dp

    def up(s: dict[str, Any]) -> tuple[float, float]:
        """The upper edges (TTFT, TPOT) of the state's band: its regime's (perf.bands)."""
        reg = regime_of(prof, s)
        t_hi = band_of(prof, reg, "ttft_ms")[0][1]
        return t_hi, (1.0 if confidence == "median" else band_of(prof, reg, "tpot_ms")[0][1])

    # the smallest TPOT edge of any open-loop regime: a TPOT above the target at it fails in all
    open_tpot = 1.0 if confidence == "median" else min(
        band_of(prof, {**regime(prof.backend, "open", name), "closed_load": closed}, "tpot_ms")[0][1]
        for _, name in OPEN_BINS for _, closed in CLOSED_BINS)

    def ok(c: int) -> bool:
        if arrival == "poisson" and tpot_ms is not None:
            # TPOT does not depend on the arrival rate (_open_at keeps _base's): a concurrency
            # that misses it at every open-loop band fails without solving for the rate
            base = _base(sm, c / dp, isl, osl)
            if base["tpot"] * open_tpot > tpot_ms:
                return False
            s = _open_at(sm, c / dp, isl, osl, base)
        else:
            s = solve(sm, isl=isl, osl=osl, concurrency=c, arrival=arrival)
        if s.get("queue", {}).get("saturated"):
            return False
        up_ttft, up_tpot = up(s)
        if ttft_ms is not None and sla_ttft(s, up_ttft, ttft_statistic, confidence) > ttft_ms:
            return False
        return not (tpot_ms is not None and s["tpot"] * up_tpot > tpot_ms)

    if not ok(1):
        return 0
    lo = 1
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def estimate_embedding(model: dict[str, Any], gpu: dict[str, Any], *, tp: int = 1,
                       precision: str, isl: int, concurrency: int, backend: str = "vllm",
                       gpu_memory_utilization: float | None = None, check_memory: bool = True,
                       calibration: dict[str, Any] | None = None) -> Estimate:
    """An encoder (embedding / reranking) pass: prefill only, no KV cache kept, no decode.

    ``concurrency`` requests of ``isl`` tokens run as one batch per engine step: the GEMMs see
    ``concurrency x isl`` tokens, attention is bidirectional over the whole input (context
    ``isl``, not the causal ``isl/2``), no lm_head. Latency = per-request front-end cost +
    the batch step; throughput = ``concurrency`` requests per step.
    """
    gpu_memory_utilization = usable_fraction() if gpu_memory_utilization is None else gpu_memory_utilization
    precision = check_precision(precision)
    if isl < 1 or concurrency < 1:
        raise ValueError("isl and concurrency must be positive")
    lay = Layout(tp, 1, 1, 1)
    kvp = default_kv_precision(gpu, precision)
    prof = profile(gpu, backend, calibration)
    mem = memory(model, gpu, tp=tp, precision=precision, tokens_in_flight=0, kv_precision=kvp,
                 gpu_memory_utilization=gpu_memory_utilization)
    cal = {"gpu_class": gpu_class(gpu), "backend": prof.backend, "measured": prof.measured,
           "source": prof.source}
    inputs = {"model": model.get("id"), "gpu": gpu.get("id"), "tp": tp, "pp": 1, "ep": 1,
              "attention_dp": 1, "n_gpus": lay.n_gpus, "precision": precision,
              "kv_precision": None, "isl": isl, "osl": 0, "concurrency": concurrency,
              "backend": prof.backend, "gpu_memory_utilization": gpu_memory_utilization,
              "task": "embedding", "arrival": "closed", "request_rate": None}
    null_band = {"ttft_ms": None, "tpot_ms": None, "output_tokens_per_s": None}
    steps = list(mem.steps[:1]) + list(mem.steps[2:])
    if check_memory and not mem.fits:
        return Estimate(None, None, None, False, mem.reason, mem, null_band, cal, tuple(steps),
                        inputs)
    try:
        sm = StepModel.build(model, gpu, lay, precision, kvp, prof, calibration)
    except ValueError as exc:
        return Estimate(None, None, None, mem.fits, str(exc), mem, null_band, cal,
                        tuple(steps), inputs)
    tokens = concurrency * isl
    dense, moe = sm.linear_flops_per_token(lm_head=False)
    attn = tokens * attention_flops_per_token(model, isl, decode=False) / tp
    t_cmp = sm.compute_ms(tokens * dense, tokens * moe, attn, route_tokens=tokens)
    t_comm = sm.comm_ms(tokens, tokens)
    t_ovh = sm.overhead_ms(concurrency) + sm.n_chunks(tokens) * prof.t_chunk_ms
    t_step = t_cmp + t_comm + t_ovh
    front = front_ms(sm, isl)
    latency = front + t_step
    rps = concurrency / t_step * 1e3
    steps += [
        Step("compute_rate", "peak = peak_tflops", {"how": sm.rate_note, "peak_tflops": sm.tflops},
             sm.tflops, "TFLOPS"),
        Step("encoder_compute",
             COMPUTE_FORMULA,
             compute_values(sm, tokens * dense, tokens * moe, attn, 0.0, tokens),
             t_cmp, "ms", "a batch of concurrency x isl tokens; bidirectional attention over "
                          "the whole input; no lm_head"),
        Step("encoder_step", "t_step_ms = t_compute_ms + t_comm_ms + t_overhead_ms",
             {"t_compute_ms": t_cmp, "t_comm_ms": t_comm, "t_overhead_ms": t_ovh}, t_step, "ms"),
        Step("latency", "latency_ms = t_client_ms + isl x t_in_token_us / 1e3 + t_step_ms",
             {"t_client_ms": client_ms(sm), "harness": sm.harness, "isl": isl,
              "t_in_token_us": prof.t_in_token_us, "t_step_ms": t_step}, latency, "ms",
             "time to the embedding (reported as ttft_ms)"),
        Step("requests_per_s", "requests_per_s = concurrency / t_step_ms x 1e3",
             {"concurrency": concurrency, "t_step_ms": t_step}, rps, "req/s"),
        Step("input_tokens_per_s", "input_tokens_per_s = requests_per_s x isl",
             {"requests_per_s": rps, "isl": isl}, rps * isl, "tokens/s"),
    ]
    b = prof.band["ttft_ms"]
    band = {"ttft_ms": (latency * b[0], latency * b[1]), "tpot_ms": None,
            "output_tokens_per_s": None}
    return Estimate(latency, None, None, mem.fits, mem.reason, mem, band, cal, tuple(steps),
                    inputs)


def max_rate_meeting(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, *, precision: str,
                     isl: int, osl: int, ttft_ms: float | None, tpot_ms: float | None,
                     backend: str = "vllm", kv_precision: str | None = None,
                     ttft_statistic: str = "p99", confidence: str = "p80",
                     speculative: Speculation | None = None,
                     harness: str = "openai-http",
                     calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """The largest offered rate (Poisson, requests/s over the replica) whose TTFT (its P99, or
    mean) and TPOT meet the targets at the ``confidence`` edge of their bands, by bisection
    below the sustainable maximum; ``{"requests_per_s", "max_requests_per_s", "limited_by"}``
    (``requests_per_s`` 0 when even a trickle misses a target)."""
    def state(rate: float) -> dict[str, Any]:
        return predict_state(model, gpu, lay, precision=precision, isl=isl, osl=osl,
                             concurrency=1, backend=backend, kv_precision=kv_precision,
                             request_rate=rate, speculative=speculative, harness=harness,
                             calibration=calibration)[3]

    def miss(rate: float) -> str | None:
        s = state(rate)
        if s.get("saturated"):
            return "saturation"
        prof, reg = s["prof"], regime_of(s["prof"], s)
        hi_t = band_of(prof, reg, "ttft_ms")[0][1] if confidence == "p80" else 1.0
        hi_p = band_of(prof, reg, "tpot_ms")[0][1] if confidence == "p80" else 1.0
        ttft = s["ttft_p99"] if ttft_statistic == "p99" else s["ttft"]
        if ttft_ms is not None and ttft * hi_t > ttft_ms:
            return "ttft"
        if tpot_ms is not None and s["tpot"] * hi_p > tpot_ms:
            return "tpot"
        return None

    top = state(1e-3)["lam_max"] * 1e3 * lay.dp
    lo, hi = 0.0, top * 0.999
    why = miss(hi)
    if why is None:
        return {"requests_per_s": round(hi, 4), "max_requests_per_s": round(top, 4),
                "limited_by": "saturation"}
    if miss(top * 1e-4) is not None:
        return {"requests_per_s": 0.0, "max_requests_per_s": round(top, 4),
                "limited_by": miss(top * 1e-4)}
    for _ in range(40):
        mid = (lo + hi) / 2
        w = miss(mid)
        lo, hi, why = (mid, hi, why) if w is None else (lo, mid, w)
    return {"requests_per_s": round(lo, 4), "max_requests_per_s": round(top, 4),
            "limited_by": why}
