"""How well `servewise calibrate` pins the model to a campaign it never saw, from a few of its rows.

    python -m tools.perf.calibrate_check [--rows 5] [--held-out] [--folds 8] [--max-nfev 30]
                                         [--workers 2] [--cache DIR]

For every campaign (file, model, backend, GPU, precision: tools/perf/bands.py) with at least
``2 x rows`` closed-loop rows measuring both TTFT and TPOT: take ``rows`` of them spread over its
lengths and loads (sorted by input, output, concurrency and TP, evenly spaced), fit an overlay on
them (engine/domain/perf/overlay_fit.py), and predict the campaign's other rows. ``--held-out``
(the honest check, needs the ``fit`` extra): the base calibration of a campaign is refitted
without its fold (the folds of tools/perf/bands.py), so neither the calibration nor the overlay
saw the predicted rows; without it the shipped calibration is the base (it saw them: in sample).
Prints the median APE of TTFT and TPOT before and after the overlay, pooled over rows and as the
median of the campaigns' medians, and the share of campaigns within 10 % TPOT / 15 % TTFT
(issue #40's target). Analysis only: it changes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.perf.data import DEFAULT_FILES, Row, read_rows
from servewise.engine.domain.perf.overlay_fit import errors, fit_scope
from tools.perf.bands import assign_folds, campaign_counts, campaign_of

Campaign = tuple[str, str, str, str, str]


def campaigns(paths: list[Path], rows_needed: int) -> dict[Campaign, list[Row]]:
    """Campaigns with at least ``rows_needed`` closed-loop rows measuring TTFT and TPOT."""
    out: dict[Campaign, list[Row]] = defaultdict(list)
    for p in paths:
        _, rows = read_rows(p)
        for r in rows:
            if (r.skipped or r.offline or r.request_rate or not r.ttft_ms or not r.tpot_ms
                    or r.osl <= 1 or r.model is None or r.gpu is None):
                continue
            out[campaign_of(p.name, r)].append(r)
    return {c: sorted(rs, key=lambda r: (r.isl, r.osl, r.concurrency or 0, r.layout.tp, r.index))
            for c, rs in sorted(out.items()) if len(rs) >= rows_needed}


def split(rows: list[Row], n: int) -> tuple[list[Row], list[Row]]:
    """``n`` rows evenly spaced over the sorted campaign, and the others."""
    idx = sorted({round(i * (len(rows) - 1) / (n - 1)) for i in range(n)}) if n > 1 else [0]
    return [rows[i] for i in idx], [r for i, r in enumerate(rows) if i not in idx]


def _fold_cal(job: tuple[int, list[Campaign], int, list[str], str | None]) -> tuple[int, dict]:
    from tools.perf.fit import fit

    k, held, max_nfev, files, cache = job
    path = Path(cache) / f"fold{k}.yaml" if cache else None
    if path is not None and path.exists():
        return k, yaml.safe_load(path.read_text(encoding="utf-8"))
    cal = fit([Path(f) for f in files], warm=False, max_nfev=max_nfev, exclude_campaigns=set(held))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cal, sort_keys=True), encoding="utf-8")
    print(f"fold {k} refitted", file=sys.stderr, flush=True)
    return k, cal


def base_calibrations(paths: list[Path], folds: int, max_nfev: int, workers: int,
                      cache: str | None) -> dict[Campaign, dict[str, Any]]:
    """The held-out calibration of every campaign: refitted without its fold."""
    from concurrent.futures import ProcessPoolExecutor

    fold_of = assign_folds(campaign_counts(paths), folds)
    jobs = [(k, sorted(c for c, f in fold_of.items() if f == k), max_nfev,
             [str(p) for p in paths], cache) for k in range(folds)]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            cals = dict(ex.map(_fold_cal, jobs))
    else:
        cals = dict(map(_fold_cal, jobs))
    return {c: cals[f] for c, f in fold_of.items()}


def check(paths: list[Path], n_rows: int, bases: dict[Campaign, dict[str, Any]] | None
          ) -> dict[str, Any]:
    pooled: dict[str, dict[str, list[float]]] = {"before": defaultdict(list), "after": defaultdict(list)}
    per: list[dict[str, Any]] = []
    for c, rows in campaigns(paths, 2 * n_rows).items():
        cal = bases.get(c) if bases is not None else None
        train, test = split(rows, n_rows)
        sc = fit_scope(train, str(train[0].gpu["id"]), train[0].backend, cal)  # type: ignore[index]
        entry: dict[str, Any] = {"campaign": "/".join(c), "rows": len(rows)}
        for when, scope in (("before", None), ("after", sc)):
            errs = errors(test, scope, cal)
            for m, v in errs.items():
                pooled[when][m] += [abs(x) for x in v]
                if v:
                    entry[f"{when}_{m}"] = statistics.median(abs(x) for x in v)
        per.append(entry)
    out: dict[str, Any] = {"campaigns": len(per), "per_campaign": per}
    for when in ("before", "after"):
        for m in ("ttft_ms", "tpot_ms"):
            v = pooled[when][m]
            out[f"{when}_{m}_pooled"] = statistics.median(v) if v else None
            meds = [e[f"{when}_{m}"] for e in per if f"{when}_{m}" in e]
            out[f"{when}_{m}_campaign_median"] = statistics.median(meds) if meds else None
    ok = [e for e in per if e.get("after_tpot_ms", 1) <= 0.10 and e.get("after_ttft_ms", 1) <= 0.15]
    out["campaigns_within_target"] = len(ok)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5)
    ap.add_argument("--held-out", action="store_true")
    ap.add_argument("--folds", type=int, default=8)
    ap.add_argument("--max-nfev", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache", default=None, help="folder for the folds' refitted calibrations")
    a = ap.parse_args(argv)
    paths = [Path(p) for p in DEFAULT_FILES]
    bases = (base_calibrations(paths, a.folds, a.max_nfev, a.workers, a.cache)
             if a.held_out else None)
    r = check(paths, a.rows, bases)
    base = "refitted without the campaign's fold" if a.held_out else "shipped (in sample)"
    print(f"{r['campaigns']} campaigns, {a.rows} rows each fitted, the others predicted; base "
          f"calibration {base}")
    print("| metric | before, pooled | after, pooled | before, median of campaigns | after, "
          "median of campaigns |")
    print("|---|---|---|---|---|")
    for m, label in (("tpot_ms", "TPOT"), ("ttft_ms", "TTFT")):
        cells = [r[f"{w}_{m}_{k}"] for k in ("pooled", "campaign_median") for w in ("before", "after")]
        cells = [cells[0], cells[1], cells[2], cells[3]]
        print(f"| {label} | " + " | ".join(f"{100 * x:.1f} %" for x in cells) + " |")
    print(f"campaigns within 10 % TPOT and 15 % TTFT after: {r['campaigns_within_target']} of "
          f"{r['campaigns']}")


if __name__ == "__main__":
    main()
