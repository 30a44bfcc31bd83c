"""Steady-state serving under continuous batching: TTFT, TPOT and throughput at a concurrency.

With ``C`` requests in flight per attention rank, each request lives ``TTFT + (osl-1) x TPOT``,
so requests arrive (and finish) at ``λ = C / lifetime``. The engine interleaves their prefills
with the decode steps of the others:

* ``ρ = λ x t_prefill_marginal`` is the share of GPU time spent on other requests' prefills, so
  decode steps stretch to ``TPOT = t_decode(B) / (1 - ρ)``;
* a new request waits for the step in progress and for the prefills queued before it
  (M/D/1 wait ``ρ / (2(1-ρ)) x t_prefill``), then runs its own prefill in
  ``n_chunks = ceil(isl / chunk)`` engine steps, each also carrying the decode batch;
* benchmark clients start all requests at once, and identical requests stay partly in step:
  a calibrated share ``φ`` (per backend) of the burst wait ``(C-1)/2 x t_prefill`` remains:
  ``TTFT = t_prefill + (n_chunks - 1/2) x t_decode + ρ/(2(1-ρ)) x t_prefill
  + φ x (C-1)/2 x t_prefill``;
* ``B = C - λ x t_prefill`` sequences are decoding at any time.

``λ`` is the fixed point of ``λ x lifetime(λ) = C``, found by bisection.
"""

from __future__ import annotations

import math
from typing import Any

from .calibration import CHUNK_TOKENS, Profile, gpu_class, profile
from .memory import Layout, memory
from .precision import check_precision, default_kv_precision
from .timing import StepModel
from .types import Estimate, Step

MAX_BATCH = {"vllm": 1024, "trtllm": 2048, "sglang": 1024}  # max sequences per engine step


def _solve(sm: StepModel, c_rank: float, isl: int, osl: int) -> dict[str, Any]:
    """Fixed point of the closed loop for ``c_rank`` requests in flight on one attention rank."""
    pf = sm.prefill(isl)
    t_pf, t_marg = pf["total"], max(pf["marginal"], 1e-9)
    ctx = isl + osl / 2.0
    n_dec = max(osl - 1, 0)
    n_chunks = math.ceil(isl / CHUNK_TOKENS.get(sm.prof.backend, 8192))
    burst = sm.prof.burst * max(c_rank - 1.0, 0.0) / 2.0 * t_marg

    def state(lam: float) -> dict[str, Any]:
        rho = min(lam * t_marg, 0.999999)
        batch = max(1.0, c_rank - lam * t_pf)
        dec = sm.decode(batch, ctx)
        tpot = dec["total"] / (1.0 - rho)
        if c_rank > 1:
            mixed = (n_chunks - 0.5) * dec["total"]
            queue = rho / (2.0 * (1.0 - rho)) * t_pf
        else:
            mixed = queue = 0.0
        ttft = t_pf + mixed + queue + burst
        return {"lam": lam, "rho": rho, "batch": batch, "dec": dec, "tpot": tpot,
                "mixed": mixed, "queue": queue, "burst": burst, "n_chunks": n_chunks,
                "ttft": ttft, "life": ttft + n_dec * tpot}

    lo, hi = 0.0, 1.0 / t_marg
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        s = state(mid)
        if mid * s["life"] > c_rank:
            hi = mid
        else:
            lo = mid
    s = state(lo)
    s["prefill"] = pf
    return s


def _steps(sm: StepModel, s: dict[str, Any], isl: int, osl: int, c_rank: float) -> list[Step]:
    d, pf, prof = s["dec"], s["prefill"], sm.prof
    lay = sm.lay
    ctx = isl + osl / 2.0
    link = sm.link
    out = [
        Step("compute_rate", "peak = dense TFLOPS at the GEMM precision",
             {"how": sm.rate_note}, sm.tflops, "TFLOPS"),
        Step("decode_bytes",
             "bytes_per_step = W_dense/tp + W_experts/gpus x (1-(1-k/E)^(B x dp)) "
             "+ kv_per_token x B x context",
             {"W_dense_per_gpu_gb": sm.dense_bytes / 1e9,
              "W_experts_per_gpu_gb": sm.expert_bytes / 1e9,
              "experts_touched_share": sm.expert_fraction(s["batch"] * lay.dp),
              "B": s["batch"], "dp": lay.dp, "context": ctx,
              "kv_per_token_per_gpu_b": sm.kv_tok_gpu},
             d["bytes"] / 1e9, "GB"),
        Step("decode_step",
             "t_decode = max(bytes / (bw x η_bw), flops / (peak x η_flops)) + t_comm + t_overhead",
             {"bytes_gb": d["bytes"] / 1e9, "bw_gbs": sm.bw_gbs, "eta_bw": prof.eta_bw,
              "t_mem_ms": d["t_mem"], "gflops": d["flops"] / 1e9, "peak_tflops": sm.tflops,
              "eta_flops": prof.eta_flops, "t_compute_ms": d["t_compute"],
              "t_comm_ms": d["t_comm"], "t_overhead_ms": d["t_overhead"]},
             d["total"], "ms"),
        Step("tp_comm",
             "t_comm = 2 x layers x (2(tp-1)/tp x B x hidden x 2 B / (link x η_link) + latency)"
             " [+ MoE dispatch/combine across the stage]",
             {"layers": sm.layers, "tp": lay.tp, "B": s["batch"], "hidden": sm.hidden,
              "link": link[0], "link_gbs": link[1], "eta_link": link[2],
              "latency_us": link[3]}, d["t_comm"], "ms"),
        Step("overhead", "t_overhead = t_step + layers x t_layer",
             {"t_step_ms": prof.t_step_ms, "layers": sm.layers, "t_layer_us": prof.t_layer_us},
             d["t_overhead"], "ms"),
        Step("prefill",
             "t_prefill = max(isl x (2 x active/tp + attn(ctx)) / (peak x η_flops), "
             "W / (bw x η_bw)) + t_comm + t_overhead",
             {"isl": isl, "gflops": pf["flops"] / 1e9, "peak_tflops": sm.tflops,
              "eta_flops": prof.eta_flops, "t_compute_ms": pf["t_compute"],
              "t_mem_ms": pf["t_mem"], "t_comm_ms": pf["t_comm"],
              "t_overhead_ms": pf["t_overhead"]}, pf["total"], "ms"),
        Step("arrival_rate", "λ = C / (TTFT + (osl-1) x TPOT)  (closed loop, per attention rank)",
             {"C": c_rank, "osl": osl}, s["lam"] * 1e3, "req/s"),
        Step("prefill_share", "ρ = λ x t_prefill_compute",
             {"lambda_per_s": s["lam"] * 1e3, "t_prefill_compute_ms": pf["marginal"]},
             s["rho"], ""),
        Step("tpot", "TPOT = t_decode / (1 - ρ)",
             {"t_decode_ms": d["total"], "rho": s["rho"]}, s["tpot"], "ms"),
        Step("ttft", "TTFT = t_prefill + (n_chunks - 1/2) x t_decode + ρ/(2(1-ρ)) x t_prefill"
             " + φ x (C-1)/2 x t_prefill_compute",
             {"t_prefill_ms": pf["total"], "n_chunks": s["n_chunks"], "t_decode_ms": d["total"],
              "rho": s["rho"], "queue_ms": s["queue"], "phi": prof.burst, "C": c_rank,
              "burst_ms": s["burst"]}, s["ttft"], "ms"),
    ]
    return out


def predict(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, *, precision: str,
            isl: int, osl: int, concurrency: float, backend: str = "vllm",
            kv_precision: str | None = None,
            calibration: dict[str, Any] | None = None) -> tuple[float, float, float]:
    """(TTFT ms, TPOT ms, output tokens/s) without memory check or explanation (fast path)."""
    kvp = kv_precision or default_kv_precision(gpu, precision)
    sm = StepModel.build(model, gpu, lay, precision, kvp, profile(gpu, backend, calibration),
                         calibration)
    s = _solve(sm, concurrency / lay.dp, isl, osl)
    return s["ttft"], s["tpot"], s["lam"] * 1e3 * osl * lay.dp


def _band(prof: Profile, ttft: float, tpot: float, tput: float) -> dict[str, tuple[float, float]]:
    b = prof.band
    return {"ttft_ms": (ttft * b["ttft_ms"][0], ttft * b["ttft_ms"][1]),
            "tpot_ms": (tpot * b["tpot_ms"][0], tpot * b["tpot_ms"][1]),
            "output_tokens_per_s": (tput * b["output_tokens_per_s"][0],
                                    tput * b["output_tokens_per_s"][1])}


def estimate(model: dict[str, Any], gpu: dict[str, Any], *, tp: int = 1, pp: int = 1,
             ep: int = 1, precision: str, isl: int, osl: int, concurrency: int,
             backend: str = "vllm", kv_precision: str | None = None,
             gpu_memory_utilization: float = 0.9, attention_dp: int = 1,
             check_memory: bool = True, calibration: dict[str, Any] | None = None) -> Estimate:
    """TTFT, TPOT and total output tokens/s of one replica with ``concurrency`` requests in flight.

    ``attention_dp`` > 1 runs attention data-parallel (each rank its own sequences) with MoE
    layers shared by all ``tp x attention_dp`` GPUs. ``check_memory=False`` estimates timings even
    when the KV cache would not fit (used to validate against measured rows);
    ``calibration`` overrides facts/calibration.yaml (used by the refit).
    """
    precision = check_precision(precision)
    if isl < 1 or osl < 1 or concurrency < 1:
        raise ValueError("isl, osl and concurrency must be positive")
    lay = Layout(tp, pp, ep, attention_dp)
    kvp = kv_precision or default_kv_precision(gpu, precision)
    prof = profile(gpu, backend, calibration)
    tokens = concurrency * (isl + osl / 2.0)
    mem = memory(model, gpu, tp=tp, pp=pp, ep=ep, precision=precision, tokens_in_flight=tokens,
                 kv_precision=kvp, gpu_memory_utilization=gpu_memory_utilization,
                 attention_dp=attention_dp)
    cal = {"gpu_class": gpu_class(gpu), "backend": prof.backend, "measured": prof.measured,
           "source": prof.source}
    inputs = {"model": model.get("id"), "gpu": gpu.get("id"), "tp": tp, "pp": pp, "ep": ep,
              "attention_dp": attention_dp, "n_gpus": lay.n_gpus, "precision": precision,
              "kv_precision": kvp, "isl": isl, "osl": osl, "concurrency": concurrency,
              "backend": prof.backend, "gpu_memory_utilization": gpu_memory_utilization}
    steps = list(mem.steps)
    null_band = {"ttft_ms": None, "tpot_ms": None, "output_tokens_per_s": None}
    if check_memory and not mem.fits:
        return Estimate(None, None, None, False, mem.reason, mem, null_band, cal,
                        tuple(steps), inputs)
    try:
        sm = StepModel.build(model, gpu, lay, precision, kvp, prof, calibration)
    except ValueError as exc:
        return Estimate(None, None, None, mem.fits, str(exc), mem, null_band, cal,
                        tuple(steps), inputs)
    c_rank = concurrency / lay.dp
    s = _solve(sm, c_rank, isl, osl)
    tput = s["lam"] * 1e3 * osl * lay.dp
    steps += _steps(sm, s, isl, osl, c_rank)
    steps.append(Step("throughput", "tokens/s = λ x osl x dp",
                      {"lambda_per_s": s["lam"] * 1e3, "osl": osl, "dp": lay.dp}, tput,
                      "tokens/s"))
    return Estimate(s["ttft"], s["tpot"], tput, mem.fits, mem.reason, mem,
                    _band(prof, s["ttft"], s["tpot"], tput), cal, tuple(steps), inputs)


def max_concurrency(model: dict[str, Any], gpu: dict[str, Any], *, tp: int, pp: int = 1,
                    ep: int = 1, precision: str, isl: int, osl: int, ttft_ms: float | None,
                    tpot_ms: float | None, backend: str = "vllm", limit: int = 1024,
                    kv_precision: str | None = None, gpu_memory_utilization: float = 0.9,
                    attention_dp: int = 1) -> int:
    """Largest concurrency whose upper-band TTFT/TPOT meet the targets and whose KV fits (0: none).

    TTFT and TPOT grow with concurrency, so the answer is found by bisection over [1, limit].
    """
    kw = {"tp": tp, "pp": pp, "ep": ep, "precision": precision, "isl": isl, "osl": osl,
          "backend": backend, "kv_precision": kv_precision,
          "gpu_memory_utilization": gpu_memory_utilization, "attention_dp": attention_dp}

    def ok(c: int) -> bool:
        e = estimate(model, gpu, concurrency=c, **kw)
        if not e.fits or e.ttft_ms is None:
            return False
        if ttft_ms is not None and e.upper("ttft_ms") > ttft_ms:
            return False
        return not (tpot_ms is not None and e.upper("tpot_ms") > tpot_ms)

    if not ok(1):
        return 0
    lo, hi = 1, max(1, int(limit))
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
