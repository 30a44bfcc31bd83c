"""Fit a calibration overlay (perf.overlay) to a buyer's measured rows.

Per (GPU, backend): the four overlay constants minimise the robust sum of ``log(predicted /
measured)`` over the rows' TTFT and TPOT (soft-L1 with a 10 % scale: one odd run pulls little),
plus a log-space prior that keeps each constant near the shipped value unless the rows move it
(:data:`PRIOR_WIDTH`). A constant the rows say nothing about is not fitted: no TTFT → the
request cost stays; no TPOT → bandwidth and interference stay. Derivative-free (Nelder-Mead in
log space, pure Python, deterministic). The error is reported before, after and cross-validated
(each fold's rows predicted by an overlay fitted on the other folds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from servewise.engine.domain.perf.calibration import profile, using_overlay
from servewise.engine.domain.perf.data import Row
from servewise.engine.domain.perf.overlay import CONSTANTS, LIMITS, Overlay, Scope
from servewise.engine.domain.perf.validate import predict_row, quantile

SCALE = 0.1       # soft-L1 scale of a log error (10 %)
# log-space width of each constant's prior: a change of this factor (e^width) costs as much as one
# row 10 % off. The request cost differs most between harnesses (HTTP, tokeniser, client).
PRIOR_WIDTH = {"t_request_ms": 1.0, "eta_bw_scale": 0.3, "eta_flops_scale": 0.3,
               "interference_scale": 0.5, "wait_scale": 0.7}
MAX_ITER = 400
FOLDS = 5

MetricRows = list[tuple[Row, str, float]]


def _observations(rows: Sequence[Row]) -> MetricRows:
    out = []
    for r in rows:
        if r.ttft_ms:
            out.append((r, "ttft_ms", float(r.ttft_ms)))
        if r.tpot_ms and r.osl > 1:
            out.append((r, "tpot_ms", float(r.tpot_ms)))
    return out


def _predict(rows: Sequence[Row], scope: Scope | None,
             calibration: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    with using_overlay(Overlay((scope,)) if scope is not None else None):
        return [predict_row(r, calibration) for r in rows]


def errors(rows: Sequence[Row], scope: Scope | None,
           calibration: dict[str, Any] | None = None) -> dict[str, list[float]]:
    """Signed relative errors (predicted − measured) / measured per metric; ``calibration``:
    the base calibration (default: the shipped one; a held-out refit in tools/perf)."""
    preds = _predict(rows, scope, calibration)
    out: dict[str, list[float]] = {"ttft_ms": [], "tpot_ms": []}
    for r, p in zip(rows, preds, strict=True):
        for m, meas in (("ttft_ms", r.ttft_ms), ("tpot_ms", r.tpot_ms)):
            if meas and p.get(m):
                out[m].append((p[m] - meas) / meas)
    return out


def summary(errs: dict[str, list[float]]) -> dict[str, Any]:
    return {m: {"n": len(v), "median_ape": round(quantile([abs(x) for x in v], 0.5), 4)}
            for m, v in errs.items() if v}


def _free(rows: Sequence[Row]) -> tuple[str, ...]:
    """The constants the rows inform."""
    has_ttft = any(r.ttft_ms for r in rows)
    has_tpot = any(r.tpot_ms and r.osl > 1 for r in rows)
    free = []
    if has_ttft:
        free += ["t_request_ms", "eta_flops_scale", "wait_scale"]
    if has_tpot:
        free += ["eta_bw_scale", "interference_scale"]
        if not has_ttft:
            free.append("eta_flops_scale")
    return tuple(k for k in CONSTANTS if k in free)


def nelder_mead(f: Callable[[list[float]], float], x0: list[float], step: float = 0.3,
                max_iter: int = MAX_ITER, tol: float = 1e-5) -> list[float]:
    """Minimise ``f`` from ``x0`` (standard reflection / expansion / contraction / shrink)."""
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(max_iter):
        order = sorted(range(n + 1), key=lambda i: (vals[i], i))
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) <= tol * (abs(vals[0]) + tol):
            break
        cen = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        refl = [cen[j] + (cen[j] - pts[-1][j]) for j in range(n)]
        fr = f(refl)
        if fr < vals[0]:
            exp = [cen[j] + 2 * (cen[j] - pts[-1][j]) for j in range(n)]
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [cen[j] + 0.5 * (pts[-1][j] - cen[j]) for j in range(n)]
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                pts = [pts[0]] + [[pts[0][j] + 0.5 * (p[j] - pts[0][j]) for j in range(n)]
                                  for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    best = min(range(n + 1), key=lambda i: (vals[i], i))
    return pts[best]


def _bounded(k: str, v: float) -> float:
    lo, hi = LIMITS[k]
    return min(max(v, max(lo, 1e-3)), hi)


def fit_scope(rows: Sequence[Row], gpu: str, backend: str,
              calibration: dict[str, Any] | None = None) -> Scope:
    """The overlay constants of one GPU and backend fitted on ``rows`` (all of that GPU and
    backend) over ``calibration`` (default: the shipped one)."""
    obs = _observations(rows)
    free = _free(rows)
    if not obs or not free:
        return Scope(gpu, backend, {})
    assert rows[0].gpu is not None
    t0 = profile(rows[0].gpu, backend, calibration).t_request_ms
    centre = {k: 1.0 for k in CONSTANTS} | {"t_request_ms": t0}

    def consts(x: list[float]) -> dict[str, float]:
        return {k: _bounded(k, centre[k] * math.exp(v)) for k, v in zip(free, x, strict=True)}

    def loss(x: list[float]) -> float:
        preds = _predict([r for r, _, _ in obs], Scope(gpu, backend, consts(x)), calibration)
        total = 0.0
        for (_, m, meas), p in zip(obs, preds, strict=True):
            pred = p.get(m)
            if not pred:
                total += 10.0
                continue
            z = math.log(pred / meas) / SCALE
            total += 2.0 * (math.sqrt(1.0 + z * z) - 1.0)
        return total + sum((v / PRIOR_WIDTH[k]) ** 2 for k, v in zip(free, x, strict=True))

    x = nelder_mead(loss, [0.0] * len(free))
    return Scope(gpu, backend, {k: round(v, 4) for k, v in consts(x).items()})


def cross_validated(rows: Sequence[Row], gpu: str, backend: str,
                    folds: int = FOLDS) -> dict[str, list[float]]:
    """Errors of each fold's rows predicted by an overlay fitted on the other folds."""
    k = min(folds, len(rows))
    out: dict[str, list[float]] = {"ttft_ms": [], "tpot_ms": []}
    if k < 2:
        return out
    for f in range(k):
        train = [r for i, r in enumerate(rows) if i % k != f]
        test = [r for i, r in enumerate(rows) if i % k == f]
        sc = fit_scope(train, gpu, backend)
        for m, v in errors(test, sc).items():
            out[m].extend(v)
    return out


def calibrate(rows: Sequence[Row], cross_validate: bool = True) -> list[dict[str, Any]]:
    """Per (GPU, backend) of ``rows``: the fitted scope as the overlay file writes it, with its
    error before, fitted and cross-validated."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        assert r.gpu is not None
        groups.setdefault((str(r.gpu["id"]), r.backend), []).append(r)
    out = []
    for (gpu, backend), rs in sorted(groups.items()):
        sc = fit_scope(rs, gpu, backend)
        entry: dict[str, Any] = {
            "gpu": gpu, "backend": backend, "constants": dict(sorted(sc.constants.items())),
            "rows": len(rs), "models": sorted({r.model_name for r in rs}),
            "error": {"shipped": summary(errors(rs, None)), "fitted": summary(errors(rs, sc))}}
        if cross_validate:
            entry["error"]["cross_validated"] = summary(cross_validated(rs, gpu, backend))
        out.append(entry)
    return out
