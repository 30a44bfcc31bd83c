"""Domain functions for disaggregated prefill/decode layouts: how many prefill and decode workers a
peak request rate needs within the SLA, from the two-pool performance model
(:mod:`servewise.engine.domain.perf.disagg`, the model ``servewise estimate --prefill-workers``
uses). Nothing here is a second performance formula: the pools are searched, the model decides.

Sizing, for a GPU, a precision and a worker of ``n`` GPUs (attention data parallel ``n`` × expert
parallel ``n`` in each pool, as the measured disaggregated recipes run large MoE models):

* TPOT depends only on the decode pool at the peak rate (no prefill interference), and falls as
  decode workers are added: the fewest decode workers ``D`` whose TPOT (at the plan's confidence
  edge) meets the target and whose KV cache holds the requests decoding;
* TTFT depends only on the prefill pool (its queue, prefill, the hand-off): the fewest prefill
  workers ``P`` whose TTFT (P99 of the prefill queue and the mean's edge) meets the target;
* both searches double, then bisect, over at most ``MAX_WORKERS`` workers a pool.
"""

from __future__ import annotations

import math
from typing import Any

from servewise.engine.domain.functions import current, domain_function, note_detail

MAX_WORKERS = 256  # a pool larger than this is not a plan servewise can size (and not a buyer's)


def _disagg():
    from servewise.engine.domain.perf import disagg

    return disagg


def _state(model: str, gpu: str, n: int, precision: str, isl: int, osl: int, rate: float,
           prefill: int, decode: int, backend: str, spec: Any,
           memo: dict[str, Any] | None = None) -> dict[str, Any]:
    """The two-pool model's state at ``rate`` requests/s (open loop), memoised per run;
    ``memo``: the search's memory of the pools' states by size (``predict_disagg``'s)."""
    ctx = current()
    key = ("disagg_state", model, gpu, n, precision, isl, osl, rate, prefill, decode, backend, spec)
    if key not in ctx.cache:
        from servewise.engine.domain.perf.memory import Layout

        d = _disagg()
        lay = Layout(1, 1, n, n)  # attention DP n x EP n: n ranks of one GPU each
        g = ctx.catalog.gpu(gpu)
        ctx.cache[key] = d.predict_disagg(
            ctx.model(model), d.Pool(g, lay, prefill), d.Pool(g, lay, decode),
            precision=precision, isl=isl, osl=osl, request_rate=rate, backend=backend,
            speculative=spec, memo=memo)
    return ctx.cache[key]


def _p99_wait(rho: float, t_prefill: float) -> float:
    """P99 of the prefill queue's wait (M/D/1 Cramér-Lundberg tail, as the aggregated model)."""
    from servewise.engine.domain.perf.serving import md1_tail

    if rho <= 0.01:
        return 0.0
    x, c_tail = md1_tail(rho)
    return t_prefill * max(math.log(c_tail / 0.01), 0.0) / x


def _smallest(ok: Any, start: int = 1) -> int | None:
    """Fewest workers in [``start``, MAX_WORKERS] with ``ok`` (monotone; every count below
    ``start`` is known to fail), or None: the largest pool first (a target no pool meets fails
    at once), then doubling from ``start`` and bisection."""
    start = max(1, min(int(start), MAX_WORKERS))
    if not ok(MAX_WORKERS):
        return None
    lo, hi = start - 1, start
    while not ok(hi):
        lo, hi = hi, min(hi * 2, MAX_WORKERS)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _size(model: str, gpu: str, n: int, precision: str, isl: int, osl: int, rate: float,
          ttft_ms: float | None, tpot_ms: float | None, framework: str | None,
          ttft_statistic: str, confidence: str, spec_tokens: int,
          spec_acceptance: float | None) -> dict[str, Any]:
    from servewise.engine.domain.fn_sizing import _backend, _speculation
    from servewise.engine.domain.perf.calibration import profile
    from servewise.engine.domain.perf.precision import default_kv_precision
    from servewise.engine.domain.perf.serving import band_of, regime_of

    ctx = current()
    backend = _backend(framework)
    spec = _speculation(model, spec_tokens, spec_acceptance, framework, 1)
    g = ctx.catalog.gpu(gpu)
    prof = profile(g, backend)
    hi = confidence == "p80"
    out: dict[str, Any] = {"feasible": False, "reason": None, "prefill_workers": None,
                           "decode_workers": None}
    # the decode pool's state depends on its own size (and the KV link), the prefill queue on its
    # own: the search solves each once per size, not once per pair of sizes (perf/disagg.py)
    pools: dict[str, Any] = {}

    def at(p: int, d: int) -> dict[str, Any]:
        return _state(model, gpu, n, precision, isl, osl, rate, p, d, backend, spec, pools)

    def tpot_band(s: dict[str, Any]) -> list[float]:
        reg = regime_of(prof, {"arrival": "closed", "c_rank": s["c_decode_rank"]})
        return band_of(prof, reg, "tpot_ms")[0]

    def tpot_edge(s: dict[str, Any]) -> float:
        return s["tpot"] * (tpot_band(s)[1] if hi else 1.0)

    ttft_mult = band_of(prof, regime_of(prof, {"arrival": "closed", "c_rank": 1.0}), "ttft_ms")[0]

    def ttft_sla(s: dict[str, Any]) -> float:
        mean = s["ttft"] * (ttft_mult[1] if hi else 1.0)
        if ttft_statistic != "p99":
            return mean
        return max(mean, s["ttft"] - s["wait"] + _p99_wait(s["rho_prefill"], s["t_prefill"]))

    big = MAX_WORKERS  # a prefill pool large enough not to matter while the decode pool is sized
    try:  # the first state builds the pools' step models (every later state reuses them)
        at(big, MAX_WORKERS)
    except ValueError as exc:  # the catalog lacks what the GPU's timing needs at this precision
        out["reason"] = str(exc)  # as the aggregated estimate reports it (perf/serving.py)
        return out

    def decode_ok(d: int) -> bool:
        s = at(big, d)
        return (s["c_decode_rank"] < s["batch_cap"]
                and (tpot_ms is None or tpot_edge(s) <= tpot_ms))

    # the decode pool must at least hold the requests decoding at the fastest TPOT (that of the
    # largest pool): D x n ranks x the batch cap >= rate x (osl - 1) x that TPOT
    s_big = at(big, MAX_WORKERS)
    d = _smallest(decode_ok, math.floor(rate / 1e3 * max(osl - 1, 0) * s_big["tpot"]
                                        / (n * s_big["batch_cap"])) + 1)
    if d is None:
        s = at(big, MAX_WORKERS)
        out["reason"] = (f"decode: TPOT {tpot_edge(s):.1f} ms with {MAX_WORKERS} decode workers "
                         f"(target {tpot_ms} ms)")
        return out

    def prefill_ok(p: int) -> bool:
        s = at(p, d)
        return (rate / 1e3 * s["t_prefill"] / (p * n) < _disagg().RHO_MAX
                and not s["saturated"] and (ttft_ms is None or ttft_sla(s) <= ttft_ms))

    # the prefill pool must at least keep up: P x n ranks x RHO_MAX >= rate x the shortest prefill
    # (with attention DP a prefill only lengthens as the ranks' concurrent prefills share the MoE)
    t_min = at(big, d)["t_prefill"]
    p = _smallest(prefill_ok, math.floor(rate / 1e3 * t_min / (n * _disagg().RHO_MAX)) + 1)
    if p is None:
        s = at(MAX_WORKERS, d)
        out["reason"] = (f"prefill: TTFT {ttft_sla(s):.0f} ms with {MAX_WORKERS} prefill workers "
                         f"(target {ttft_ms} ms)")
        return out
    s = at(p, d)
    kvp = default_kv_precision(g, precision)
    mems = {name: _disagg()._pool_memory(ctx.model(model), _disagg().Pool(g, s_lay, w), precision,
                                         kvp, tokens)
            for name, s_lay, w, tokens in (
                ("prefill", _layout(n), p, isl * n),
                ("decode", _layout(n), d, s["c_decode_rank"] * n * (isl + osl / 2.0)))}
    bad = [f"{k} worker: {m.reason}" for k, m in mems.items() if not m.fits]
    if bad:
        out["reason"] = "; ".join(bad)
        return out
    tb = tpot_band(s)
    p99 = s["ttft"] - s["wait"] + _p99_wait(s["rho_prefill"], s["t_prefill"])
    out.update(
        feasible=True, prefill_workers=p, decode_workers=d, workers=p + d, gpus=(p + d) * n,
        ttft_ms=s["ttft"], ttft_ms_hi=s["ttft"] * ttft_mult[1], ttft_p99_ms=p99,
        ttft_p99_ms_hi=p99 * ttft_mult[1], tpot_ms=s["tpot"], tpot_ms_hi=s["tpot"] * tb[1],
        requests_per_s=rate, output_tokens_per_s=s["output_tokens_per_s"],
        decode_concurrency=s["c_decode_rank"] * n, prefill_rho=s["rho_prefill"],
        t_prefill_ms=s["t_prefill"], kv_mb_per_request=s["kv_bytes_per_token"] * isl / 1e6,
        kv_gbps=rate * s["kv_bytes_per_token"] * isl * 8 / 1e9, kv_link=s["kv_link"],
        kv_ms=s["t_kv"], t_handoff_ms=s["t_handoff"], backend=backend,
        speculative_tokens=0 if spec is None else spec.tokens)
    return out


def _layout(n: int) -> Any:
    from servewise.engine.domain.perf.memory import Layout

    return Layout(1, 1, n, n)


@domain_function(reads=(("models", 0), ("gpus", 1)))
def disagg_size(model: str, gpu: str, n: int, precision: str, isl: int, osl: int,
                peak_qps: float, ttft_ms: float | None, tpot_ms: float | None,
                framework: str | None = None, ttft_statistic: str = "p99",
                confidence: str = "p80", spec_tokens: int = 0,
                spec_acceptance: float | None = None) -> dict[str, Any]:
    """Prefill and decode workers of ``n`` GPUs (attention DP ``n`` × EP ``n``) a disaggregated
    deployment needs at ``peak_qps`` (open loop) within ``ttft_ms`` (P99 of the prefill queue and
    the mean's band edge when ``ttft_statistic`` is ``p99``) and ``tpot_ms`` (at ``confidence``'s
    band edge), as a record: ``feasible``, ``reason`` (why not), ``prefill_workers``,
    ``decode_workers``, ``workers``, ``gpus``, ``ttft_ms``/``_hi``, ``ttft_p99_ms``/``_hi``,
    ``tpot_ms``/``_hi``, ``output_tokens_per_s``, ``decode_concurrency`` (requests decoding per
    decode worker), ``kv_mb_per_request``, ``kv_gbps`` (the KV cache the prefill pool sends the
    decode pool at the peak, Gb/s), ``kv_link``, ``t_prefill_ms``, ``prefill_rho``."""
    ctx = current()
    key = ("disagg_size", model, gpu, int(n), str(precision), int(isl), int(osl), float(peak_qps),
           ttft_ms, tpot_ms, framework, str(ttft_statistic), str(confidence), int(spec_tokens or 0),
           spec_acceptance)
    if key not in ctx.cache:
        ctx.cache[key] = _size(model, gpu, int(n), str(precision), int(isl), int(osl),
                               float(peak_qps), ttft_ms, tpot_ms, framework, str(ttft_statistic),
                               str(confidence), int(spec_tokens or 0), spec_acceptance)
    rec = ctx.cache[key]
    note_detail({"function": "disagg_size", "result": {k: rec[k] for k in (
        "feasible", "prefill_workers", "decode_workers")},
        "formula": "fewest decode workers with TPOT at the band edge <= target and the KV cache "
                   "holding the requests decoding; then fewest prefill workers with TTFT (P99 of "
                   "the prefill queue, M/D/1) <= target; the two-pool model of perf/disagg.py at "
                   "the peak rate"})
    return dict(rec)
