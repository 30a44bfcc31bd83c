"""Domain functions for GPU sizing rules: the performance model with pipeline parallelism and an
end-to-end latency target, and small helpers for rule-of-thumb comparisons.

Every timing and memory number comes from :mod:`servewise.engine.domain.perf` (the calibrated model that
``servewise estimate`` uses); nothing here is a second performance formula.
"""

from __future__ import annotations

import math
from typing import Any

from servewise.engine.common.deferred import Deferred
from servewise.engine.domain.functions import current, domain_function, note_detail

PRECISION_ORDER = ("bf16", "fp16", "fp8", "int8", "fp4", "int4")  # widest first


def _perf():
    from servewise.engine.domain import perf

    return perf


# Sizing is for production traffic: open-loop (Poisson) arrivals, TTFT checked at its P99.
ARRIVAL = "poisson"


def _backend(framework: str | None) -> str:
    from servewise.engine.domain.perf.calibration import framework_backend

    return framework_backend(framework)


def attention_layout(tp: int, ep: int, attention_dp: int) -> tuple[int, int, int]:
    """The performance model's (attention tp, ep, attention_dp) of an engine of ``tp`` GPUs as
    SGLang and TensorRT-LLM count it: with ``attention_dp`` > 1 each of the attention_dp ranks runs
    attention on tp ÷ attention_dp GPUs and the MoE layers span all tp GPUs, ``ep``-way by expert
    (SGLang ``--tp 8 --dp 8 --enable-dp-attention``; TensorRT-LLM ``tensor_parallel_size 8,
    enable_attention_dp``)."""
    tp, ep, adp = int(tp), max(1, int(ep)), max(1, int(attention_dp))
    if adp > 1 and tp % adp:
        raise ValueError(f"attention_dp {adp} must divide the engine's tp {tp}")
    return (tp // adp if adp > 1 else tp), ep, adp


def _speculation(model: str, tokens: int, acceptance: float | None,
                 framework: str | None = None, pp: int = 1) -> Any:
    """The Speculation a rule asks for (``tokens`` > 0), with ``acceptance`` or the family's
    fitted one; None when off, when ``framework`` (a plan's) does not run MTP (policy
    mtp_frameworks) or with pipeline parallelism (vLLM's speculative decoding docs: 'not
    compatible with pipeline parallelism'; no MTP + PP recipe is catalogued for the others)."""
    if not tokens or int(tokens) < 1 or int(pp) > 1:
        return None
    from servewise.engine.domain.fn_cost import mtp_frameworks

    if framework is not None and framework not in mtp_frameworks():
        return None
    from servewise.engine.domain.perf.calibration import load_calibration
    from servewise.engine.domain.perf.speculative import speculation

    return speculation(current().model(model), int(tokens),
                       None if acceptance is None else float(acceptance), load_calibration())


@domain_function(reads=(("models", 0),))
def speculative_acceptance(model: str, given: float | None = None) -> float | None:
    """The acceptance a plan's speculative decoding is sized with: ``given`` (the workload's), else
    the model family's fitted on measured runs (facts/calibration.yaml ``speculative``), else None."""
    if given is not None:
        return float(given)
    from servewise.engine.domain.perf.calibration import load_calibration
    from servewise.engine.domain.perf.speculative import acceptance_for

    fitted = acceptance_for(current().model(model), load_calibration())
    note_detail({"function": "speculative_acceptance", "result": None if fitted is None else fitted[0],
                 "formula": "the family's acceptance fitted on measured MTP runs"
                            + (f": {fitted[1]}" if fitted else " (none catalogued)")})
    return None if fitted is None else fitted[0]


def _replica(model: str, gpu: str, atp: int, pp: int, ep: int, adp: int, precision: str, isl: int, osl: int,
             backend: str, spec: Any) -> Any:
    """The replica's :func:`perf.replica_setup` (step model, KV capacity), memoised per run: the
    operating-point search and the cost floor start from the same one."""
    ctx = current()
    key = ("replica_setup", model, gpu, atp, int(pp), ep, adp, str(precision), int(isl), int(osl), backend, spec)
    if key not in ctx.cache:
        from servewise.engine.domain.perf.memory import Layout

        ctx.cache[key] = _perf().replica_setup(ctx.model(model), ctx.catalog.gpu(gpu), Layout(atp, int(pp), ep, adp),
                                               str(precision), int(isl), int(osl), backend, speculative=spec)
    return ctx.cache[key]


def _estimate_pp(model: str, gpu: str, tp: int, pp: int, precision: str, isl: int, osl: int,
                 concurrency: int, arrival: str = ARRIVAL, framework: str | None = None,
                 ep: int = 1, attention_dp: int = 1, spec_tokens: int = 0,
                 spec_acceptance: float | None = None) -> dict[str, Any]:
    """The performance model's estimate for a tp x pp replica (``ep``, ``attention_dp`` as in
    :func:`attention_layout`) under production (open-loop) traffic at the rate that keeps
    ``concurrency`` requests in flight, with the measured profile of the serving ``framework``
    (vLLM's when none is given), memoised per run."""
    ctx = current()
    c = max(1, int(concurrency))
    backend = _backend(framework)
    atp, ep, adp = attention_layout(tp, ep, attention_dp)
    spec = _speculation(model, spec_tokens, spec_acceptance, framework, pp)
    key = ("estimate_pp", model, gpu, atp, int(pp), str(precision), int(isl), int(osl), c,
           str(arrival), backend, ep, adp, spec)
    if key not in ctx.cache:
        ctx.cache[key] = _perf().estimate_record(  # steps made only where a plan shows them
            ctx.model(model), ctx.catalog.gpu(gpu), tp=atp, pp=int(pp), precision=str(precision),
            isl=int(isl), osl=int(osl), concurrency=c, arrival=str(arrival), backend=backend,
            ep=ep, attention_dp=adp, speculative=spec)
    return ctx.cache[key]


def _metric(data: dict[str, Any], metric: str) -> Any:
    if metric in data:
        return data[metric]
    if metric in data.get("memory", {}):
        return data["memory"][metric]
    if metric.endswith("_hi") or metric.endswith("_lo"):
        band = data.get("band", {}).get(metric[:-3])
        return None if not band else band[1 if metric.endswith("_hi") else 0]
    raise ValueError(f"unknown estimate metric '{metric}'")


@domain_function(reads=(("models", 0), ("gpus", 1)))
def estimate_pp(model: str, gpu: str, tp: int, pp: int, precision: str, isl: int, osl: int,
                concurrency: int, metric: str, arrival: str = ARRIVAL,
                framework: str | None = None, ep: int = 1, attention_dp: int = 1,
                spec_tokens: int = 0, spec_acceptance: float | None = None) -> Any:
    """One metric of the performance estimate of a replica of ``tp`` x ``pp`` GPUs (``ttft_ms``,
    ``tpot_ms``, ``output_tokens_per_s``, ``fits``, ``weights_gib``, ``kv_cache_gib``,
    ``overhead_gib``, ``per_gpu_gib``, ``budget_gib``, ``kv_capacity_tokens``, ``*_hi``/``*_lo``
    band ends, ``ttft_p99_ms`` in open loop); ``arrival`` ``poisson`` (production traffic at the
    rate that keeps ``concurrency`` in flight) or ``closed`` (a full batch queue, offline);
    ``framework`` the serving framework whose measured profile applies (``SGLang``, ``vLLM``,
    ``TensorRT-LLM`` ...; vLLM's when None); ``ep`` and ``attention_dp`` the engine's expert and
    attention data parallelism (:func:`attention_layout`); ``spec_tokens`` > 0 draft tokens of
    speculative decoding at ``spec_acceptance`` (the family's fitted one when None); records the
    formula steps as details."""
    data = _estimate_pp(model, gpu, tp, pp, precision, isl, osl, concurrency, arrival, framework,
                        ep, attention_dp, spec_tokens, spec_acceptance)
    value = _metric(data, metric)
    note_detail({"function": "estimate_pp", "metric": metric, "steps": data.get("steps", []),
                 "calibration": data.get("calibration")})
    return value


@domain_function(reads=(("models", 0), ("gpus", 1)))
def perf(model: str, gpu: str, tp: int, pp: int, precision: str, isl: int, osl: int,
         concurrency: int, framework: str | None = None, ep: int = 1,
         attention_dp: int = 1, spec_tokens: int = 0,
         spec_acceptance: float | None = None) -> dict[str, Any]:
    """The whole performance estimate of a tp x pp replica as a record, so a rule computes it once:
    ``let: {p: "perf(model.id, chosen.gpu, ...)"}`` then ``p.ttft_ms``, ``p.weights_gib``,
    ``p.tpot_ms_hi`` ... (the metrics of ``estimate_pp``, open-loop arrivals, ``framework``,
    ``ep``, ``attention_dp`` and the speculation as there)."""
    data = _estimate_pp(model, gpu, tp, pp, precision, isl, osl, concurrency, ARRIVAL, framework,
                        ep, attention_dp, spec_tokens, spec_acceptance)
    note_detail({"function": "perf", "steps": data.get("steps", []), "calibration": data.get("calibration")})
    out = {k: v for k, v in data.items() if not isinstance(v, (dict, list, Deferred))}
    out.update(data.get("memory", {}))
    for name, band in (data.get("band") or {}).items():
        if band:
            out[f"{name}_lo"], out[f"{name}_hi"] = band[0], band[1]
    return out


def _meets(data: dict[str, Any], osl: int, ttft_ms: float | None, tpot_ms: float | None,
           e2e_ms: float | None, ttft_statistic: str = "p99", confidence: str = "p80") -> bool:
    if not data.get("fits") or data.get("ttft_ms") is None:
        return False
    edge = "_hi" if confidence == "p80" else ""
    ttft, tpot = _metric(data, "ttft_ms" + edge), _metric(data, "tpot_ms" + edge)
    if ttft_statistic == "p99" and data.get("ttft_p99_ms") is not None:  # open loop: the queue's P99 (central)
        ttft = max(ttft, data["ttft_p99_ms"])
    if ttft_ms is not None and ttft > ttft_ms:
        return False
    if tpot_ms is not None and tpot > tpot_ms:
        return False
    return not (e2e_ms is not None and ttft + max(int(osl) - 1, 0) * tpot > e2e_ms)


@domain_function(reads=(("models", 0), ("gpus", 1)))
def max_concurrency_pp(model: str, gpu: str, tp: int, pp: int, precision: str, isl: int, osl: int,
                       ttft_ms: float | None, tpot_ms: float | None,
                       e2e_ms: float | None = None, arrival: str = ARRIVAL,
                       framework: str | None = None, ttft_statistic: str = "p99",
                       confidence: str = "p80", ep: int = 1, attention_dp: int = 1,
                       spec_tokens: int = 0, spec_acceptance: float | None = None) -> int:
    """Largest number of requests in flight per ``tp`` x ``pp`` replica, under open-loop
    (Poisson) arrivals (``arrival="closed"``: a full batch queue), whose TTFT (P99 of the queue
    and upper band of the mean), upper-band TPOT and full response time ``TTFT + (osl-1) x
    TPOT`` meet the targets (``None``: no target) and whose KV cache fits; 0 when even one
    request fails. TTFT and TPOT grow with concurrency, so the answer is found by bisection over
    [1, 1024]. ``framework``: the serving framework whose measured profile applies (vLLM's when
    None); ``ttft_statistic``: what the TTFT target is, ``p99`` (the default: the queue's P99
    and the mean's upper band) or ``mean`` (the mean's upper band alone); ``confidence``: the edge
    of the estimate band the targets are met at, ``p80`` (the upper end of the 80 % band) or
    ``median`` (the central estimate); ``ep`` and ``attention_dp`` the engine's expert and attention
    data parallelism (:func:`attention_layout`; the requests counted over all its ranks);
    ``spec_tokens``/``spec_acceptance`` speculative decoding as in :func:`estimate_pp`."""
    ctx = current()
    backend = _backend(framework)
    atp, ep, adp = attention_layout(tp, ep, attention_dp)
    ttft_statistic = str(ttft_statistic)
    if ttft_statistic not in ("p99", "mean"):
        raise ValueError(f"ttft_statistic must be 'p99' or 'mean', not {ttft_statistic!r}")
    confidence = str(confidence)
    if confidence not in ("p80", "median"):
        raise ValueError(f"confidence must be 'p80' or 'median', not {confidence!r}")
    spec = _speculation(model, spec_tokens, spec_acceptance, framework, pp)
    key = ("max_concurrency_pp", model, gpu, atp, int(pp), str(precision), int(isl), int(osl),
           ttft_ms, tpot_ms, e2e_ms, str(arrival), backend, ttft_statistic, confidence, ep, adp,
           spec)
    if key not in ctx.cache:
        if e2e_ms is None:
            n = _perf().max_concurrency(
                ctx.model(model), ctx.catalog.gpu(gpu), tp=atp, pp=int(pp), ep=ep,
                attention_dp=adp, precision=str(precision), isl=int(isl), osl=int(osl),
                ttft_ms=ttft_ms, tpot_ms=tpot_ms, arrival=str(arrival), backend=backend,
                ttft_statistic=ttft_statistic, confidence=confidence, speculative=spec,
                setup=_replica(model, gpu, atp, pp, ep, adp, precision, isl, osl, backend, spec))
        else:
            def ok(c: int) -> bool:
                data = _estimate_pp(model, gpu, tp, pp, precision, isl, osl, c, arrival, framework,
                                    ep, adp, spec_tokens, spec_acceptance)
                return _meets(data, osl, ttft_ms, tpot_ms, e2e_ms, ttft_statistic, confidence)

            n = 0
            from servewise.engine.domain.perf.architecture import tp_split_problem

            if not tp_split_problem(ctx.model(model), atp) and ok(1):
                lo, hi = 1, 1024
                if ok(hi):
                    lo = hi
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if ok(mid) else (lo, mid)
                n = lo
        ctx.cache[key] = int(n)
    n = ctx.cache[key]
    e = "_hi" if confidence == "p80" else "_median"
    note_detail({"function": "max_concurrency_pp", "result": n,
                 "formula": f"largest C ({arrival} arrivals) with "
                            + (f"max(TTFT_p99(C), TTFT{e}(C))" if ttft_statistic == "p99" else f"TTFT{e}(C)")
                            + f" ≤ TTFT target, TPOT{e}(C) ≤ TPOT target, TTFT + (osl-1) x TPOT{e}(C) ≤ "
                            "inference budget and KV(C) fitting"})
    return int(n)


@domain_function(reads=(("models", 0), ("gpus", 1)))
def replicas_floor(model: str, gpu: str, tp: int, pp: int, precision: str, isl: int, osl: int,
                   concurrency: int | None, peak_qps: float, peak_concurrency: float | None = None,
                   offline: bool = False, framework: str | None = None, ep: int = 1,
                   attention_dp: int = 1, spec_tokens: int = 0,
                   spec_acceptance: float | None = None) -> int:
    """The fewest replicas of a tp x pp engine (``ep``, ``attention_dp`` as in
    :func:`attention_layout`) holding ``concurrency`` requests each (its operating point) that the
    load can need, from its prefill and decode times alone: a replica serves at most ``concurrency
    / (t_prefill + osl x t_decode)`` requests/s (offline: ``concurrency x osl / (t_prefill + (osl -
    1) x t_decode)`` tokens/s), since queueing, the front end and the prefills' interference only
    add to a request's time. With
    ``concurrency`` None, before its operating point is searched: the most requests its KV cache
    holds (within the 1,024 the search tries), a bound as well, since a batch's decode step grows
    no faster than its size (weights read once, KV and compute per request), so a replica serves
    no more at fewer requests. At least 1 (and 1 when no request runs: the full sizing rejects
    such a candidate)."""
    atp, ep, adp = attention_layout(tp, ep, attention_dp)
    spec = _speculation(model, spec_tokens, spec_acceptance, framework, pp)
    backend = _backend(framework)
    setup = _replica(model, gpu, atp, pp, ep, adp, precision, isl, osl, backend, spec)
    if setup is None:
        return 1
    c = max(1, int(setup[1] if concurrency is None else concurrency))
    t_ms = _perf().decode_floor_ms(setup, isl=int(isl), osl=int(osl), concurrency=c)
    if not t_ms:
        return 1
    pf_ms = _perf().prefill_floor_ms(setup, isl=int(isl)) or 0.0
    if offline:  # a request's life: its prefill, then osl - 1 decode steps
        life = pf_ms + max(int(osl) - 1, 0) * t_ms
        per_s = c * int(osl) * 1000.0 / life if life > 0 else None  # tokens/s
        need = float(peak_qps) * int(osl)
    else:  # the sizing's C / (TTFT + osl x TPOT)
        per_s = c * 1000.0 / (pf_ms + int(osl) * t_ms)  # requests/s
        need = float(peak_qps)
    n = max(1, math.ceil(need / per_s) if per_s else 1)
    if peak_concurrency is not None and not offline:
        n = max(n, math.ceil(float(peak_concurrency) / c))
    note_detail({"function": "replicas_floor", "result": n,
                 "formula": f"{c} requests in flight, prefill {pf_ms:.1f} ms, decode {t_ms:.2f} ms per token: at most "
                            + (f"{per_s:,.1f} {'tokens' if offline else 'requests'}/s per replica"
                               if per_s else "no throughput bound")})
    return n


LOAD_POINTS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)  # shares of the operating point's concurrency
# an offline replica's operating point is its memory-limited batch: smaller batches only below it
OFFLINE_LOAD_POINTS = (0.125, 0.25, 0.5, 0.75, 1.0)


@domain_function(reads=(("models", 0), ("gpus", 1)))
def load_curve(model: str, gpu: str, tp: int, pp: int, precision: str, isl: int, osl: int,
               concurrency: int, framework: str | None = None, ep: int = 1,
               attention_dp: int = 1, spec_tokens: int = 0,
               spec_acceptance: float | None = None, arrival: str = ARRIVAL) -> list[dict[str, Any]]:
    """Latency against load for one replica: under open-loop (Poisson) traffic at shares
    ``LOAD_POINTS`` of ``concurrency`` (the operating point, share 1.0), or for an offline job
    (``arrival='closed'``: a batch refilled as requests finish) at shares ``OFFLINE_LOAD_POINTS``
    of its memory-limited batch (no larger batch fits), the requests in flight, the requests/s they
    serve (``C / (TTFT + osl x TPOT)``, Little's law), mean and P99 TTFT, mean TPOT and the upper
    end of its band, and the output tokens/s — what the reports' latency-vs-load chart draws
    (``ep``, ``attention_dp`` as in :func:`attention_layout`)."""
    rows = []
    seen: set[int] = set()
    for share in OFFLINE_LOAD_POINTS if arrival == "closed" else LOAD_POINTS:
        c = max(1, round(int(concurrency) * share))
        if c in seen:
            continue
        seen.add(c)
        d = _estimate_pp(model, gpu, tp, pp, precision, isl, osl, c, arrival, framework, ep,
                         attention_dp, spec_tokens, spec_acceptance)
        if d.get("ttft_ms") is None or d.get("tpot_ms") is None:
            continue
        seconds = (d["ttft_ms"] + int(osl) * d["tpot_ms"]) / 1000
        row = {"share": share, "concurrency": c, "requests_per_s": round(c / seconds, 3),
               "ttft_ms": round(d["ttft_ms"], 1),
               "ttft_p99_ms": None if d.get("ttft_p99_ms") is None else round(d["ttft_p99_ms"], 1),
               "tpot_ms": round(d["tpot_ms"], 2), "tpot_ms_hi": round(_metric(d, "tpot_ms_hi"), 2)}
        if arrival == "closed":
            row["output_tokens_per_s"] = round(_metric(d, "output_tokens_per_s"), 1)
        rows.append(row)
    return rows


@domain_function
def framework_profile(framework: str | None) -> str:
    """The measured backend whose profile sizes ``framework`` (``vLLM``, ``SGLang`` or
    ``TensorRT-LLM``): itself when measured, vLLM's for vLLM (ROCm) and MindIE, which have no
    measured rows of their own (calibration.FRAMEWORK_PROFILE)."""
    from servewise.engine.domain.perf.calibration import BACKEND_NAMES

    return BACKEND_NAMES[_backend(framework)]


@domain_function(memoise=False)
def widest_precision(precisions: Any) -> str:
    """The least compressed precision of a list (bf16 before fp8 before int4)."""
    items = [str(p) for p in (precisions or [])]
    for p in PRECISION_ORDER:
        if p in items:
            return p
    return items[0] if items else "bf16"


@domain_function(memoise=False)
def gib(gb: float) -> float:
    """GB (10^9 bytes, how vendors state memory) as GiB (2^30 bytes, how the model sizes weights)."""
    return float(gb) * 1e9 / 2**30


@domain_function(reads=(("gpus", 0),))
def compute_tflops(gpu: str, precision: str) -> float | None:
    """Dense tensor TFLOPS (TOPS for int8) the performance model runs ``precision`` GEMMs at on
    ``gpu`` (e.g. weight-only int4 at the 16-bit rate); None when the catalog has no figure."""
    rate, _ = _perf().compute_rate(current().catalog.gpu(gpu), str(precision))
    return None if rate is None else float(rate)
