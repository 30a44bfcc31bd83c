"""Out-of-sample 80 % bands of the performance model per regime: facts/calibration-bands.yaml.

    python -m tools.perf.bands [--folds 8] [--max-nfev 30] [--workers 2] [--residuals FILE]
                               [--from-residuals FILE] [--out facts/calibration-bands.yaml]
                               [--min-rows 30] [--date YYYY-MM-DD]

Grouped K-fold cross-validation by campaign (a campaign: the rows of one (file, model, backend,
GPU, precision)): the campaigns are split into K folds of about equal row counts
(``assign_folds``, deterministic); per fold the calibration is refitted without the fold's
campaigns, cold (``warm=False``: not from the shipped constants, which saw the rows), and the
fold's rows are predicted with it. Each (row, metric) gives the ratio measured / predicted, with
the row's regime from ``validate.predict_row`` (engine/domain/perf/bands.py). Per regime
(backend x arrival x load) and each coarser level ``bands.lookup`` falls back to, per metric:
the rows n, the band [p10, p90] of the ratios, the median absolute percentage error of the
held-out predictions, and ``coverage_cv``: the share of rows inside the band computed from the
*other* folds' ratios only (nested, so the coverage is on rows the band never saw).

The refits need numpy and scipy (``fit`` extra); ``--from-residuals`` rebuilds the bands from
a residuals file written by ``--residuals`` without refitting. The pure parts (folds, bands,
coverage, YAML layout) need neither.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from servewise.engine.domain.perf.bands import ANY, BANDS_FILE, METRICS
from servewise.engine.domain.perf.validate import quantile

Campaign = tuple[str, str, str, str, str]  # (file name, model_name, backend, gpu_name, precision)
LEVELS = ("regime", "arrival", "backend", "all")
LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "output_tokens_per_s": "throughput"}
MIN_CV_ROWS = 5  # other-fold ratios needed for a nested band; fewer: the fold's rows uncounted


def campaign_of(file_name: str, row: Any) -> Campaign:
    """The campaign key of a row (what ``fit.usable_rows(exclude_campaigns=...)`` matches)."""
    return (file_name, row.model_name, row.backend, row.gpu_name, row.precision)


# ---------------------------------------------------------------- folds

def assign_folds(counts: dict[Campaign, int], k: int) -> dict[Campaign, int]:
    """Fold (0..k-1) of each campaign: largest campaigns first (ties by key), each to the fold
    with the fewest rows so far (ties: the lowest fold). Deterministic and balanced."""
    if k < 1:
        raise ValueError("folds must be >= 1")
    load = [0] * k
    out: dict[Campaign, int] = {}
    for key in sorted(counts, key=lambda c: (-counts[c], c)):
        f = min(range(k), key=lambda i: (load[i], i))
        out[key] = f
        load[f] += counts[key]
    return out


# ---------------------------------------------------------------- bands

def ape(ratio: float) -> float:
    """Absolute percentage error of a prediction from measured / predicted."""
    return abs(1.0 / ratio - 1.0)


def band(ratios: Sequence[float]) -> list[float]:
    """[p10, p90] of the ratios (linear-interpolated quantiles), rounded to 4 digits."""
    return [round(quantile(list(ratios), 0.1), 4), round(quantile(list(ratios), 0.9), 4)]


def coverage_cv(pairs: Sequence[tuple[int, float]], min_rows: int = MIN_CV_ROWS
                ) -> tuple[float | None, int]:
    """``(share, n)`` of ``(fold, ratio)`` pairs inside the [p10, p90] band of the other folds'
    ratios (the band that never saw the fold); a fold whose other folds have fewer than
    ``min_rows`` ratios is not counted. None when no fold is counted."""
    by_fold: dict[int, list[float]] = defaultdict(list)
    for f, x in pairs:
        by_fold[f].append(x)
    inside = total = 0
    for f, xs in sorted(by_fold.items()):
        others = [x for g, ys in by_fold.items() if g != f for x in ys]
        if len(others) < min_rows:
            continue
        lo, hi = quantile(others, 0.1), quantile(others, 0.9)
        inside += sum(1 for x in xs if lo <= x <= hi)
        total += len(xs)
    return (round(inside / total, 4) if total else None), total


def metric_entry(pairs: Sequence[tuple[int, float]]) -> dict[str, Any]:
    """``{n, band, median_ape, coverage_cv, coverage_n}`` of one metric's (fold, ratio) pairs."""
    xs = [x for _, x in pairs]
    cov, cov_n = coverage_cv(pairs)
    return {"n": len(xs), "band": band(xs), "median_ape": round(quantile([ape(x) for x in xs],
                                                                          0.5), 4),
            "coverage_cv": cov, "coverage_n": cov_n}


def level_keys(reg: dict[str, str]) -> list[tuple[str, str, str]]:
    """The keys a record counts in: its regime and the coarser levels ``bands.lookup`` tries."""
    b, a, load = reg["backend"], reg["arrival"], reg["load"]
    return [(b, a, load), (b, a, ANY), (b, ANY, ANY), (ANY, ANY, ANY)]


def build_regimes(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``regimes`` list of the bands file, sorted by (backend, arrival, load); a metric
    without rows in a regime is left out."""
    pairs: dict[tuple[str, str, str], dict[str, list[tuple[int, float]]]] = defaultdict(
        lambda: defaultdict(list))
    for r in records:
        for key in level_keys(r["regime"]):
            pairs[key][r["metric"]].append((int(r["fold"]), float(r["ratio"])))
    out = []
    for key in sorted(pairs):
        entry: dict[str, Any] = dict(zip(("backend", "arrival", "load"), key, strict=True))
        for m in METRICS:
            if pairs[key].get(m):
                entry[m] = metric_entry(pairs[key][m])
        out.append(entry)
    return out


def median_ape(records: Iterable[dict[str, Any]], by: str | None = None
               ) -> dict[str, dict[str, dict[str, Any]]]:
    """``{group: {metric: {n, median_ape}}}`` of the held-out predictions (group ``all``
    without ``by``)."""
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        groups[str(r[by]) if by else ANY][r["metric"]].append(ape(float(r["ratio"])))
    return {g: {m: {"n": len(groups[g][m]), "median_ape": round(quantile(groups[g][m], 0.5), 4)}
                for m in METRICS if groups[g].get(m)} for g in sorted(groups)}


# ---------------------------------------------------------------- refits (numpy, scipy)

def campaign_counts(paths: Sequence[Path]) -> dict[Campaign, int]:
    """Usable rows per campaign of ``paths``."""
    from tools.perf.fit import usable_rows

    counts: dict[Campaign, int] = defaultdict(int)
    for p in paths:
        for r in usable_rows([p]):
            counts[campaign_of(p.name, r)] += 1
    return dict(counts)


def _fold_job(job: tuple[int, list[Campaign], int, list[str]]) -> tuple[int, list[dict[str, Any]],
                                                                         float]:
    """Refit without fold ``k``'s campaigns (cold start), predict its rows: residual records."""
    from servewise.engine.domain.perf.validate import predict_row
    from tools.perf.fit import fit, usable_rows

    k, held, max_nfev, files = job
    t0 = time.monotonic()
    paths = [Path(f) for f in files]
    held_set = set(held)
    cal = fit(paths, warm=False, max_nfev=max_nfev, exclude_campaigns=held_set)
    recs = []
    for p in paths:
        for r in usable_rows([p]):
            c = campaign_of(p.name, r)
            if c not in held_set:
                continue
            pr = predict_row(r, cal)
            if pr.get("skipped") or "regime" not in pr:
                continue
            meas = {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms, "output_tokens_per_s": r.tput}
            for m in METRICS:
                if pr.get(m) and meas[m]:
                    recs.append({"fold": k, "file": p.name, "row": r.index, "campaign": list(c),
                                 "model": r.model_name, "gpu": r.gpu_name, "backend": r.backend,
                                 "precision": r.precision, "offline": bool(r.offline),
                                 "regime": dict(pr["regime"]), "metric": m,
                                 "pred": float(pr[m]), "meas": float(meas[m]),
                                 "ratio": float(meas[m]) / float(pr[m])})
    return k, recs, time.monotonic() - t0


def cross_validate(paths: Sequence[Path], folds: int, max_nfev: int, workers: int
                   ) -> dict[str, Any]:
    """Every fold's refit and held-out residual records, with the run's metadata."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tools.perf.fit import _sha

    counts = campaign_counts(paths)
    fold_of = assign_folds(counts, folds)
    jobs = [(k, sorted(c for c, f in fold_of.items() if f == k), max_nfev,
             [str(p) for p in paths]) for k in range(folds)]
    for k, held, _, _ in jobs:
        print(f"fold {k}: {len(held)} campaigns, {sum(counts[c] for c in held)} rows",
              file=sys.stderr)
    t0 = time.monotonic()
    results: dict[int, list[dict[str, Any]]] = {}
    if workers <= 1:
        done = map(_fold_job, jobs)
        for k, recs, dt in done:
            results[k] = recs
            print(f"fold {k} done ({len(results)}/{folds}, {dt:.0f} s, "
                  f"{time.monotonic() - t0:.0f} s elapsed)", file=sys.stderr, flush=True)
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            for fut in as_completed([ex.submit(_fold_job, j) for j in jobs]):
                k, recs, dt = fut.result()
                results[k] = recs
                print(f"fold {k} done ({len(results)}/{folds}, {dt:.0f} s, "
                      f"{time.monotonic() - t0:.0f} s elapsed)", file=sys.stderr, flush=True)
    records = [r for k in sorted(results) for r in results[k]]
    meta = {"method": "grouped K-fold cross-validation by campaign (file, model, backend, GPU, "
                      "precision); cold refit (warm=False) without each fold",
            "folds": folds, "max_nfev": max_nfev, "fitted_on": [p.name for p in paths],
            "data_sha256": {p.name: _sha([p]) for p in paths},
            "data_sha256_16": _sha(paths), "rows": sum(counts.values()),
            "campaigns": len(counts), "seconds": round(time.monotonic() - t0)}
    return {"meta": meta, "records": records}


# ---------------------------------------------------------------- output

def bands_dict(run: dict[str, Any], min_rows: int, date: str) -> dict[str, Any]:
    """The bands file's content: ``meta``, ``min_rows``, ``regimes``."""
    m = run["meta"]
    records = run["records"]
    overall = median_ape(records).get(ANY, {})
    meta = {"method": m["method"], "folds": m["folds"], "max_nfev": m["max_nfev"],
            "warm": False, "fitted_on": list(m["fitted_on"]),
            "data_sha256_16": m["data_sha256_16"], "date": date, "rows": m["rows"],
            "campaigns": m["campaigns"],
            "rows_predicted": len({(r["file"], r["row"]) for r in records}),
            "held_out_median_ape": {k: v["median_ape"] for k, v in overall.items()}}
    return {"meta": meta, "min_rows": int(min_rows), "regimes": build_regimes(records)}


def _minutes(meta: dict[str, Any]) -> str:
    s = meta.get("seconds")
    return "?" if s is None else f"{max(1, round(s / 60))} min"


def header(run: dict[str, Any], date: str) -> str:
    m = run["meta"]
    files = "\n".join(f"#   {name}  sha256[:16] {m['data_sha256'].get(name, '?')}"
                      for name in m["fitted_on"])
    return f"""\
# Out-of-sample 80 % uncertainty bands of the performance model, per regime
# (read by engine/domain/perf/bands.py; written by `python -m tools.perf.bands`: do not edit by
# hand, regenerate instead).
#
# Per regime -- backend x arrival (closed | open | offline) x load bin, and the coarser levels
# (backend, arrival, all), (backend, all, all), (all, all, all) that bands.lookup falls back to
# when a regime has fewer than min_rows rows of a metric -- and per metric (ttft_ms, tpot_ms,
# output_tokens_per_s):
#   n            held-out (row, metric) ratios
#   band         [p10, p90] of measured / predicted (linear-interpolated quantiles): an
#                estimate's 80 % band is its central value times these two numbers
#   median_ape   median absolute percentage error of the held-out predictions
#   coverage_cv  share of the rows inside the band computed from the other folds' ratios only
#                (nested cross-validation: coverage on rows the band never saw; 0.8 is honest)
#   coverage_n   rows counted in coverage_cv (a fold whose other folds have < {MIN_CV_ROWS} ratios
#                is not counted)
# Method: grouped K-fold cross-validation by campaign (rows of one (file, model, backend, GPU,
#   precision) held out together), K = {m['folds']} folds balanced by row count (largest
#   campaign first, to the fold with the fewest rows; deterministic). Per fold the calibration
#   is refitted without the fold's campaigns (tools/perf/fit.py fit(), warm=False: a cold start
#   from START, not from the shipped constants that saw the rows; max_nfev = {m['max_nfev']}), and the
#   fold's rows are predicted with it (validate.predict_row, which also gives the regime).
# Data ({m['rows']} usable rows, {m['campaigns']} campaigns; data_sha256_16 {m['data_sha256_16']}):
{files}
# Date: {date}
# Regenerate (needs numpy and scipy, the `fit` extra; this run took {_minutes(m)} with 2 workers):
#   python -m tools.perf.bands --folds {m['folds']} --max-nfev {m['max_nfev']} --workers 2 \\
#       --residuals /tmp/bands-residuals.json > /tmp/bands.md
#   (`--from-residuals /tmp/bands-residuals.json` rebuilds this file without refitting)
# unmeasured_widening (kept when this file is rewritten): the exponents on these bands for a GPU
#   class without measured rows, written by `python -m tools.perf.class_widening --write`.
"""


def write(run: dict[str, Any], out: Path, min_rows: int, date: str) -> dict[str, Any]:
    import yaml

    d = bands_dict(run, min_rows, date)
    if out.exists():  # the class-widening exponents are another tool's (tools/perf/class_widening.py)
        kept = (yaml.safe_load(out.read_text(encoding="utf-8")) or {}).get("unmeasured_widening")
        if kept:
            d["unmeasured_widening"] = kept
    text = header(run, date) + yaml.safe_dump(d, sort_keys=False, width=100)
    out.write_text(text, encoding="utf-8")
    return d


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def summary(run: dict[str, Any], d: dict[str, Any]) -> str:
    """Markdown summary: held-out median APE overall and per backend, bands per regime."""
    records = run["records"]
    m = d["meta"]
    lines = [f"Held-out errors: grouped {m['folds']}-fold cross-validation by campaign "
             f"({m['campaigns']} campaigns, {m['rows_predicted']} rows predicted; cold refits, "
             f"max_nfev {m['max_nfev']}; {m['date']}).", "",
             "| backend | " + " | ".join(f"{LABELS[k]} median APE (n)" for k in METRICS) + " |",
             "|---|" + "---|" * len(METRICS)]
    groups = {"all": median_ape(records)[ANY], **median_ape(records, "backend")}
    for g, ms in groups.items():
        cells = [f"{_pct(ms[k]['median_ape'])} ({ms[k]['n']})" if k in ms else "–"
                 for k in METRICS]
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    off = [r for r in records if r["metric"] == "output_tokens_per_s" and r.get("offline")]
    if off:
        mo = median_ape(off)[ANY]["output_tokens_per_s"]
        lines += ["", f"Offline throughput alone: median APE {_pct(mo['median_ape'])} "
                      f"(n = {mo['n']})."]
    lines += ["", "80 % bands (measured / predicted, [p10, p90]) and nested coverage "
                  f"(min_rows {d['min_rows']}):", "",
              "| backend | arrival | load | " + " | ".join(
                  f"{LABELS[k]} n, band, coverage" for k in METRICS) + " |",
              "|---|---|---|" + "---|" * len(METRICS)]
    for e in d["regimes"]:
        cells = []
        for k in METRICS:
            x = e.get(k)
            cells.append("–" if not x else
                         f"{x['n']}, [{x['band'][0]:.2f}, {x['band'][1]:.2f}], "
                         f"{_pct(x['coverage_cv'])}")
        lines.append(f"| {e['backend']} | {e['arrival']} | {e['load']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, default=8)
    ap.add_argument("--max-nfev", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--residuals", help="write the residual records (JSON) here")
    ap.add_argument("--from-residuals", help="rebuild the bands from this residuals file")
    ap.add_argument("--out", default=str(BANDS_FILE))
    ap.add_argument("--min-rows", type=int, default=30)
    ap.add_argument("--date", default=_dt.date.today().isoformat())
    a = ap.parse_args(argv)
    if a.from_residuals:
        run = json.loads(Path(a.from_residuals).read_text(encoding="utf-8"))
    else:
        from servewise.engine.domain.perf.data import DEFAULT_FILES

        run = cross_validate([Path(p) for p in DEFAULT_FILES], a.folds, a.max_nfev, a.workers)
        if a.residuals:
            Path(a.residuals).write_text(json.dumps(run, indent=1), encoding="utf-8")
            print(f"wrote {a.residuals}", file=sys.stderr)
    d = write(run, Path(a.out), a.min_rows, a.date)
    print(f"wrote {a.out}", file=sys.stderr)
    sys.stdout.write(summary(run, d))


if __name__ == "__main__":
    main()
