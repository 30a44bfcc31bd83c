"""Compare the model's predictions with measured rows: error per row, median/p90 per group."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from servewise.engine.domain.perf.calibration import load_calibration, profile
from servewise.engine.domain.perf.data import DEFAULT_FILES, Row, read_rows
from servewise.engine.domain.perf.disagg import Pool, predict_disagg
from servewise.engine.domain.perf.memory import memory
from servewise.engine.domain.perf.serving import (
    MAX_BATCH,
    band_of,
    engine_prefill_ms,
    max_rate_meeting,
    predict_state,
    regime_of,
    saturated_ttft,
)
from servewise.engine.domain.perf.speculative import speculation

METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
# issue #40: median APE on campaigns the calibration never saw (leave-one-campaign-out, measured by
# tools/perf/bands.py); `validate` with the shipped calibration measures them in sample, which
# flatters them. The 80 % bands should hold 70-90 % of the measurements.
TARGETS = {"ttft_ms": 0.25, "tpot_ms": 0.12}
COVERAGE_TARGET = (0.7, 0.9)
# issue #40: on open-loop runs at fixed P99 limits (MLPerf Inference's Server scenario), the largest
# rate meeting them within +-25 % of the measured one on at least three quarters of the runs
MAX_RATE_TOLERANCE = 0.25
MAX_RATE_SHARE_TARGET = 0.75


def offline_concurrency(row: Row) -> float:
    """Requests in flight of an offline (max-load) run: the KV capacity, capped by the backend."""
    assert row.model is not None and row.gpu is not None
    lay = row.layout
    mem = memory(row.model, row.gpu, tp=lay.tp, pp=lay.pp, ep=lay.ep, precision=row.precision,
                 tokens_in_flight=0, kv_precision=row.kv_precision,
                 attention_dp=lay.attention_dp, context=row.isl + row.osl / 2.0)
    per_seq = row.isl + row.osl / 2.0
    return float(max(1, min(MAX_BATCH.get(row.backend, 1024) * lay.dp,
                            int(mem.kv_capacity_tokens / per_seq))))


def predict_row(row: Row, calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Predictions for one row (numbers only where the row measured them)."""
    out: dict[str, Any] = {"row": row.index, "ttft_ms": None, "tpot_ms": None,
                           "output_tokens_per_s": None, "skipped": row.skipped,
                           "note": row.unused}
    if row.skipped:
        return out
    assert row.model is not None and row.gpu is not None
    if row.disagg is not None:
        return _predict_disagg(row, out, calibration)
    if row.max_rate_run:
        return _predict_max_rate(row, out, calibration)
    state: dict[str, Any] | None = None
    try:
        if row.prefill_only:  # an in-engine prefill benchmark: nothing else was measured
            ttft = engine_prefill_ms(row.model, row.gpu, row.layout, precision=row.precision,
                                     isl=row.isl, backend=row.backend,
                                     kv_precision=row.kv_precision, calibration=calibration)
            tpot = tput = None
        else:
            conc = offline_concurrency(row) if row.offline else float(row.concurrency or 1)
            # a row with an offered request rate ran open loop (Poisson arrivals)
            arrival = "poisson" if row.request_rate and not row.offline else "closed"
            spec = (speculation(row.model, row.speculative_tokens, None,
                                calibration or load_calibration())
                    if row.speculative_tokens else None)
            ttft, tpot, tput, state = predict_state(
                row.model, row.gpu, row.layout, precision=row.precision, isl=row.isl,
                osl=row.osl, concurrency=conc, backend=row.backend,
                kv_precision=row.kv_precision, calibration=calibration, arrival=arrival,
                request_rate=row.request_rate if arrival == "poisson" else None,
                statistic=row.statistic, recv_interval=row.recv_interval,
                lengths=row.lengths, speculative=spec, harness=row.harness)
            if row.statistic == "p99":  # the model gives no P99 of TPOT (nor closed-loop TTFT)
                tpot = None
    except ValueError as exc:
        out["skipped"] = str(exc)
        return out
    saturated = bool(state and state.get("saturated"))
    if row.ttft_ms and ttft is not None and not saturated:
        out["ttft_ms"] = ttft
    if saturated:  # no steady state: the measured TTFT depends on how long the run lasted
        assert state is not None and row.request_rate
        sustained = state["lam_max"] * 1e3 * row.layout.dp
        if row.ttft_ms and row.num_requests:  # the run's arrivals span num_requests / rate
            run_ms = row.num_requests / row.request_rate * 1e3
            out["ttft_ms"] = saturated_ttft(state, run_ms, row.statistic)
            what = (f"TTFT over the run's {row.num_requests:g} arrivals ({run_ms / 1e3:.1f} s): "
                    f"+{state['ttft_growth'] * 1e3:.0f} ms per second of overload")
        else:
            what = "TTFT has no steady value (the run's num_requests would give it)"
        out["note"] = ((out["note"] + "; ") if out["note"] else "") + (
            f"saturated: {row.request_rate:g} requests/s offered, at most {sustained:.2f} "
            f"sustained; {what}")
    if row.tpot_ms and row.osl > 1 and tpot is not None:
        out["tpot_ms"] = tpot
    if row.tput:
        out["output_tokens_per_s"] = tput
    prof = state["prof"] if state else profile(row.gpu, row.backend, calibration)
    reg = regime_of(prof, state, offline=row.offline)
    out["regime"] = reg
    for m in METRICS:
        if out[m] is not None:
            (lo, hi), _ = band_of(prof, reg, m, calibration)
            out[f"{m}_band"] = [round(out[m] * lo, 4), round(out[m] * hi, 4)]
    if not (out["ttft_ms"] or out["tpot_ms"] or out["output_tokens_per_s"]):
        out["skipped"] = ("p99 latency of a closed-loop run is not modelled"
                          if row.statistic == "p99" else "no measurement the model predicts")
    return out


def _predict_disagg(row: Row, out: dict[str, Any],
                    calibration: dict[str, Any] | None) -> dict[str, Any]:
    """A disaggregated run's predictions (perf.disagg), banded like a closed loop of its backend at
    the decode ranks' batch."""
    assert row.disagg is not None and row.model is not None and row.gpu is not None
    run = row.disagg
    try:
        spec = (speculation(row.model, row.speculative_tokens, None,
                            calibration or load_calibration())
                if row.speculative_tokens else None)
        s = predict_disagg(row.model, Pool(row.gpu, run.prefill, run.prefill_workers),
                           Pool(row.gpu, row.layout, run.decode_workers),
                           precision=row.precision, isl=row.isl, osl=row.osl,
                           concurrency=float(row.concurrency or 1), backend=row.backend,
                           kv_precision=row.kv_precision, calibration=calibration,
                           speculative=spec, decode_batch=run.decode_batch)
    except ValueError as exc:
        out["skipped"] = str(exc)
        return out
    if row.ttft_ms:
        out["ttft_ms"] = s["ttft"]
    if row.tpot_ms and row.osl > 1:
        out["tpot_ms"] = s["tpot"]
    if row.tput:
        out["output_tokens_per_s"] = s["output_tokens_per_s"]
    prof = s["prof_decode"]
    reg = regime_of(prof, {"arrival": "closed", "c_rank": s["c_decode_rank"]})
    out["regime"] = reg
    out["state"] = {k: s[k] for k in ("c_total", "prefill_ranks", "t_prefill", "c_decode_rank",
                                       "admission")}
    out["note"] = f"disaggregated: {run.prefill_workers} prefill + {run.decode_workers} decode " \
        f"workers ({run.source})"
    for m in METRICS:
        if out[m] is not None:
            (lo, hi), _ = band_of(prof, reg, m, calibration)
            out[f"{m}_band"] = [round(out[m] * lo, 4), round(out[m] * hi, 4)]
    if not (out["ttft_ms"] or out["tpot_ms"] or out["output_tokens_per_s"]):
        out["skipped"] = "no measurement the model predicts"
    return out


def _predict_max_rate(row: Row, out: dict[str, Any],
                      calibration: dict[str, Any] | None) -> dict[str, Any]:
    """A maximum-rate run: the largest Poisson rate whose P99 TTFT and TPOT the model puts within
    the run's limits (serving.max_rate_meeting at the central estimate), times its replicas. The
    model's TPOT is a mean over the batch, compared with the P99 TPOT limit as it is (the
    per-request TPOT of a loaded engine varies little); the TTFT is the queue's P99."""
    assert row.model is not None and row.gpu is not None
    try:
        r = max_rate_meeting(row.model, row.gpu, row.layout, precision=row.precision,
                             isl=row.isl, osl=row.osl, ttft_ms=row.p99_ttft_limit_ms,
                             tpot_ms=row.p99_tpot_limit_ms, backend=row.backend,
                             kv_precision=row.kv_precision, ttft_statistic="p99",
                             confidence="median", harness=row.harness, calibration=calibration)
    except ValueError as exc:
        out["skipped"] = str(exc)
        return out
    out["max_request_rate"] = r["requests_per_s"] * row.replicas
    out["regime"] = {"backend": row.backend, "arrival": "poisson", "load": "max-rate"}
    out["note"] = (f"largest rate meeting P99 limits (TTFT {row.p99_ttft_limit_ms or '-'} ms, "
                   f"TPOT {row.p99_tpot_limit_ms or '-'} ms) over {row.replicas} replica(s): "
                   f"limited by {r['limited_by']}; sustainable at most "
                   f"{r['max_requests_per_s'] * row.replicas:.2f} requests/s")
    if not out["max_request_rate"]:
        out["skipped"] = f"no rate meets the limits (limited by {r['limited_by']})"
    return out


def _measured(row: Row, metric: str) -> float | None:
    return {"ttft_ms": row.ttft_ms, "tpot_ms": row.tpot_ms, "output_tokens_per_s": row.tput}[metric]


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def errors(rows: Iterable[Row], preds: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (row, metric) with prediction, measurement and signed relative error."""
    out = []
    for row, pr in zip(rows, preds, strict=True):
        for m in METRICS:
            meas = _measured(row, m)
            if pr.get(m) is None or not meas:
                continue
            metric = "offline_output_tokens_per_s" if (m == "output_tokens_per_s"
                                                       and row.offline) else m
            band = pr.get(f"{m}_band")
            reg = pr.get("regime") or {}
            out.append({"row": row.index, "metric": metric, "pred": pr[m], "meas": meas,
                        "err": (pr[m] - meas) / meas, "gpu": row.gpu_name,
                        "in_band": None if not band else band[0] <= meas <= band[1],
                        "regime": "/".join(reg.get(k, "?") for k in ("backend", "arrival", "load")),
                        "backend": row.backend, "model": row.model_name,
                        "concurrency": row.concurrency,
                        "arrival": "poisson" if row.request_rate else "closed",
                        "harness": row.harness,
                        "lengths": None if row.request_rate else row.lengths})
        if row.max_rate_run and pr.get("max_request_rate") and row.request_rate:
            err = (pr["max_request_rate"] - row.request_rate) / row.request_rate
            out.append({"row": row.index, "metric": "max_request_rate",
                        "pred": pr["max_request_rate"], "meas": row.request_rate, "err": err,
                        "gpu": row.gpu_name, "in_band": abs(err) <= MAX_RATE_TOLERANCE,
                        "regime": f"{row.backend}/poisson/max-rate", "backend": row.backend,
                        "model": row.model_name, "concurrency": None, "arrival": "poisson",
                        "harness": row.harness, "lengths": None})
    return out


def summarise(errs: list[dict[str, Any]],
              by: tuple[str, ...] = ("gpu", "backend", "model", "regime")) -> dict[str, Any]:
    """Median / p90 absolute percentage error and 80 % band coverage (the share of measurements
    inside the predicted band) per metric, overall and per group (``regime``: the band's
    backend / arrival / load, perf.bands)."""
    def stats(sel: list[dict[str, Any]]) -> dict[str, Any]:
        ape = [abs(e["err"]) for e in sel]
        inside = [e["in_band"] for e in sel if e.get("in_band") is not None]
        return {"n": len(ape), "median_ape": round(quantile(ape, 0.5), 4),
                "p90_ape": round(quantile(ape, 0.9), 4),
                "median_signed": round(quantile([e["err"] for e in sel], 0.5), 4),
                "band_coverage": round(sum(inside) / len(inside), 4) if inside else None}

    metrics = sorted({e["metric"] for e in errs})
    summary: dict[str, Any] = {"overall": {m: stats([e for e in errs if e["metric"] == m])
                                           for m in metrics}}
    for key in by:
        groups = sorted({e[key] for e in errs})
        summary[f"by_{key}"] = {
            g: {m: stats(sel) for m in metrics
                if (sel := [e for e in errs if e[key] == g and e["metric"] == m])}
            for g in groups}
    lo, hi = COVERAGE_TARGET
    summary["targets"] = {m: {"target_median_ape": t,
                              "met": (summary["overall"].get(m, {}).get("median_ape", 1e9) <= t),
                              "target_band_coverage": [lo, hi],
                              "coverage_met": lo <= (summary["overall"][m].get("band_coverage")
                                                     or 0.0) <= hi}
                          for m, t in TARGETS.items() if m in summary["overall"]}
    rate = [e for e in errs if e["metric"] == "max_request_rate"]
    share = (sum(abs(e["err"]) <= MAX_RATE_TOLERANCE for e in rate) / len(rate)) if rate else None
    # the max-rate rows' "band" is the +-25 % tolerance: band_coverage above is the same share
    summary["max_rate"] = {"n": len(rate), "tolerance": MAX_RATE_TOLERANCE,
                           "share_within": round(share, 4) if share is not None else None,
                           "target_share": MAX_RATE_SHARE_TARGET,
                           "met": None if share is None else share >= MAX_RATE_SHARE_TARGET}
    return summary


def validate(paths: Iterable[str | Path] | None = None,
             calibration: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate against CSV files (default: the shipped measured.csv and benchmarks.csv)."""
    files = [Path(p) for p in (paths or DEFAULT_FILES)]
    result: dict[str, Any] = {"files": [], "rows": [], "errors": []}
    for f in files:
        kind, rows = read_rows(f)
        preds = [predict_row(r, calibration) for r in rows]
        for pr in preds:
            pr["file"] = f.name
        errs = errors(rows, preds)
        for e in errs:
            e["file"] = f.name
        result["files"].append({"file": str(f), "layout": kind, "rows": len(rows),
                                "skipped": sum(1 for p in preds if p["skipped"])})
        result["rows"].extend(preds)
        result["errors"].extend(errs)
    result["summary"] = summarise(result["errors"])
    return result
