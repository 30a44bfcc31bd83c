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

from typing import Any

from .calibration import Profile, gpu_class, profile
from .memory import Layout, memory
from .precision import check_precision, default_kv_precision
from .timing import StepModel
from .types import Estimate, Step

MAX_BATCH = {"vllm": 1024, "trtllm": 2048, "sglang": 1024}  # max sequences per engine step


def _solve(sm: StepModel, c_rank: float, isl: int, osl: int) -> dict[str, Any]:
    """TTFT, TPOT and arrival rate for ``c_rank`` requests in flight on one attention rank."""
    prof = sm.prof
    pf = sm.prefill(isl)
    t_pf = pf["total"]
    ctx = isl + osl / 2.0
    dec = sm.decode(max(c_rank, 1.0), ctx)
    others = max(c_rank - 1.0, 0.0)
    interf = prof.interference * others * t_pf / osl
    tpot = dec["total"] + interf
    n_dec = max(osl - 1, 0)
    many = 1.0 if c_rank > 1 else 0.0
    step_wait = prof.k_step * dec["total"] * many
    burst = prof.burst * others / 2.0 * t_pf
    admission = prof.admission * n_dec * tpot / max(others, 1.0) * many
    dp_wait = prof.dp_wait * dec["total"] if sm.lay.dp > 1 else 0.0
    ttft = (prof.t_request_ms + isl * prof.t_in_token_us / 1e3 + t_pf + step_wait + burst
            + admission + dp_wait)
    life = ttft + n_dec * tpot
    return {"lam": c_rank / life, "batch": max(c_rank, 1.0), "dec": dec, "prefill": pf,
            "interference": interf, "tpot": tpot, "step_wait": step_wait, "burst": burst,
            "admission": admission, "dp_wait": dp_wait, "ttft": ttft, "life": life}


def _steps(sm: StepModel, s: dict[str, Any], isl: int, osl: int, c_rank: float) -> list[Step]:
    d, pf, prof = s["dec"], s["prefill"], sm.prof
    lay = sm.lay
    ctx = isl + osl / 2.0
    link = sm.link
    return [
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
             "t_decode = bytes / (bw x η_bw) + gemm / (peak x η_flops [x η_lowp]) + attention /"
             " (peak_attn x η_flops) + t_comm + t_overhead  (expert bytes and FLOPs / η_moe;"
             " η_lowp for native 8/4-bit GEMMs)",
             {"bytes_gb": d["bytes"] / 1e9, "bw_gbs": sm.bw_gbs, "eta_bw": prof.eta_bw,
              "eta_moe": prof.eta_moe, "t_mem_ms": d["t_mem"], "gflops": d["flops"] / 1e9,
              "peak_tflops": sm.tflops, "eta_flops": prof.eta_flops,
              "eta_lowp": prof.eta_lowp if sm.low_precision else 1.0,
              "attention_peak_tflops": sm.attn_tflops,
              "t_compute_ms": d["t_compute"], "t_comm_ms": d["t_comm"],
              "t_overhead_ms": d["t_overhead"]},
             d["total"], "ms"),
        Step("tp_comm",
             "t_comm = 2 x layers x (2(tp-1)/tp x B x hidden x 2 B / (link x η_link) + latency)"
             " [+ MoE dispatch/combine across the stage]",
             {"layers": sm.layers, "tp": lay.tp, "B": s["batch"], "hidden": sm.hidden,
              "link": link[0], "link_gbs": link[1], "eta_link": link[2],
              "latency_us": link[3]}, d["t_comm"], "ms"),
        Step("overhead", "t_overhead = t_step + layers x (t_layer [+ t_moe_layer]) + B x t_seq",
             {"t_step_ms": prof.t_step_ms, "layers": sm.layers, "t_layer_us": prof.t_layer_us,
              "t_moe_layer_us": prof.t_moe_layer_us if sm.p.is_moe else 0.0,
              "B": s["batch"], "t_seq_us": prof.t_seq_us}, d["t_overhead"], "ms"),
        Step("prefill",
             "t_prefill = (isl x 2 x active/tp [lm_head for the last token only; experts see dp x"
             " isl tokens]) / (peak x η_flops [x η_lowp]) + isl x attn(ctx) / (peak_attn x"
             " η_flops) + t_comm + n_chunks x t_chunk",
             {"isl": isl, "gflops": pf["flops"] / 1e9, "peak_tflops": sm.tflops,
              "eta_flops": prof.eta_flops, "t_compute_ms": pf["t_compute"],
              "t_comm_ms": pf["t_comm"], "n_chunks": pf["n_chunks"],
              "t_chunk_ms": prof.t_chunk_ms}, pf["total"], "ms"),
        Step("tpot", "TPOT = t_decode + κ x (C-1) x t_prefill / osl",
             {"t_decode_ms": d["total"], "kappa": prof.interference, "C": c_rank,
              "t_prefill_ms": pf["total"], "osl": osl}, s["tpot"], "ms"),
        Step("ttft", "TTFT = t_request + isl x t_in_token + t_prefill + k_step x t_decode"
             " + φ x (C-1)/2 x t_prefill + ψ x (osl-1) x TPOT / (C-1)"
             " [+ dp_wait x t_decode with attention DP]",
             {"t_request_ms": prof.t_request_ms, "isl": isl,
              "t_in_token_us": prof.t_in_token_us, "t_prefill_ms": pf["total"],
              "k_step": prof.k_step, "t_decode_ms": d["total"], "phi": prof.burst, "C": c_rank,
              "burst_ms": s["burst"], "psi": prof.admission, "admission_ms": s["admission"],
              "dp_wait_ms": s["dp_wait"]},
             s["ttft"], "ms"),
        Step("arrival_rate", "λ = C / (TTFT + (osl-1) x TPOT)  (closed loop, per attention rank)",
             {"C": c_rank, "osl": osl, "lifetime_ms": s["life"]}, s["lam"] * 1e3, "req/s"),
    ]


def _step_model(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, precision: str,
                backend: str, kv_precision: str | None,
                calibration: dict[str, Any] | None) -> StepModel:
    kvp = kv_precision or default_kv_precision(gpu, precision)
    return StepModel.build(model, gpu, lay, precision, kvp, profile(gpu, backend, calibration),
                           calibration)


def predict(model: dict[str, Any], gpu: dict[str, Any], lay: Layout, *, precision: str,
            isl: int, osl: int, concurrency: float, backend: str = "vllm",
            kv_precision: str | None = None,
            calibration: dict[str, Any] | None = None) -> tuple[float, float, float]:
    """(TTFT ms, TPOT ms, output tokens/s) without memory check or explanation (fast path)."""
    sm = _step_model(model, gpu, lay, precision, backend, kv_precision, calibration)
    s = _solve(sm, concurrency / lay.dp, isl, osl)
    return s["ttft"], s["tpot"], s["lam"] * 1e3 * osl * lay.dp


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

    Memory is checked once (KV capacity in sequences of ``isl + osl/2`` tokens); TTFT and TPOT
    grow with concurrency, so the latency limit is found by bisection over the fast ``predict``
    path (the same arithmetic as ``estimate``, without explanation steps).
    """
    precision = check_precision(precision)
    lay = Layout(tp, pp, ep, attention_dp)
    kvp = kv_precision or default_kv_precision(gpu, precision)
    prof = profile(gpu, backend)
    mem = memory(model, gpu, tp=tp, pp=pp, ep=ep, precision=precision, tokens_in_flight=0,
                 kv_precision=kvp, gpu_memory_utilization=gpu_memory_utilization,
                 attention_dp=attention_dp)
    if not mem.fits:
        return 0
    cap = int(mem.kv_capacity_tokens // (isl + osl / 2.0)) if mem.kv_capacity_tokens else 0
    hi = min(max(1, int(limit)), cap)
    if hi < 1:
        return 0
    try:
        sm = StepModel.build(model, gpu, lay, precision, kvp, prof)
    except ValueError:
        return 0
    up_ttft, up_tpot = prof.band["ttft_ms"][1], prof.band["tpot_ms"][1]

    def ok(c: int) -> bool:
        s = _solve(sm, c / lay.dp, isl, osl)
        if ttft_ms is not None and s["ttft"] * up_ttft > ttft_ms:
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
