"""How much wider the error is on a GPU class the calibration has no rows of (the band widening).

    python -m tools.perf.class_widening [--max-nfev 30] [--workers 2] [--residuals FILE]
                                        [--from-residuals FILE] [--write]

For each measured GPU class other than the default one (hopper-hbm, which every unmeasured class
inherits from): refit the calibration without any row of that class (cold start, as
tools/perf/bands.py), so its GPUs are predicted the way a plan predicts a GPU nobody measured —
with the efficiencies of the class it inherits (calibration.yaml ``inherit`` / the default class)
— and collect ``measured / predicted``. Compare the spread with the held-out (leave-campaign-out)
spread of facts/calibration-bands.yaml: the exponent ``e`` with ``band_unseen ≈ band_seen ** e``
(per side: ln(p90_unseen) / ln(p90_seen), ln(p10_unseen) / ln(p10_seen); the larger) is what
``unmeasured_band_widening`` should be for bands of held-out residuals. ``--write`` stores the
pooled exponent of each metric (at least 1: a class that errs no wider than an unseen campaign
keeps the campaign band) as ``unmeasured_widening`` in facts/calibration-bands.yaml, which
serving.band_of applies to a GPU class without measured rows (its square root to a backend
borrowed from another class's ratio).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from servewise.engine.domain.perf.bands import METRICS, load_bands
from servewise.engine.domain.perf.calibration import gpu_class
from servewise.engine.domain.perf.data import DEFAULT_FILES
from servewise.engine.domain.perf.validate import quantile

DEFAULT_CLASS = "hopper-hbm"


def _job(job: tuple[str, list[str], int]) -> tuple[str, list[dict[str, Any]]]:
    from servewise.engine.domain.perf.validate import predict_row
    from tools.perf.fit import fit, usable_rows

    cls, gpus, nfev = job
    cal = fit(DEFAULT_FILES, exclude_gpus=gpus, warm=False, max_nfev=nfev)
    # the held-out class must not be in the refit: its GPUs then inherit (as an unmeasured GPU)
    cal.get("classes", {}).pop(cls, None)
    out = []
    for p in DEFAULT_FILES:
        for r in usable_rows([p]):
            if r.gpu_name not in gpus:
                continue
            pr = predict_row(r, cal)
            meas = {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms, "output_tokens_per_s": r.tput}
            for m in METRICS:
                if pr.get(m) and meas[m]:
                    out.append({"class": cls, "gpu": r.gpu_name, "backend": r.backend, "metric": m,
                                "ratio": meas[m] / pr[m]})
    print(f"{cls} done ({len(out)} ratios)", file=sys.stderr, flush=True)
    return cls, out


def exponent(unseen: list[float], band: list[float]) -> float:
    lo, hi = quantile(unseen, 0.1), quantile(unseen, 0.9)
    e = []
    if band[1] > 1 and hi > 1:
        e.append(math.log(hi) / math.log(band[1]))
    if band[0] < 1 and lo < 1:
        e.append(math.log(lo) / math.log(band[0]))
    return max(e) if e else 1.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-nfev", type=int, default=30)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--residuals", default=None)
    ap.add_argument("--from-residuals", default=None)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    if a.from_residuals:
        results = json.loads(Path(a.from_residuals).read_text(encoding="utf-8"))
    else:
        from tools.perf.fit import usable_rows

        by_class: dict[str, set[str]] = defaultdict(set)
        for r in usable_rows(DEFAULT_FILES):
            by_class[gpu_class(r.gpu)].add(r.gpu_name)
        jobs = [(c, sorted(g), a.max_nfev) for c, g in sorted(by_class.items())
                if c != DEFAULT_CLASS]
        with ProcessPoolExecutor(max_workers=a.workers) as ex:
            results = dict(ex.map(_job, jobs))
    if a.residuals:
        Path(a.residuals).write_text(json.dumps(results), encoding="utf-8")
    coarse = next(e for e in load_bands()["regimes"]
                  if (e["backend"], e["arrival"], e["load"]) == ("all", "all", "all"))
    print("| held-out class | GPUs | metric | n | unseen [p10, p90] | held-out campaign band | exponent |")
    print("|---|---|---|---|---|---|---|")
    pooled: dict[str, list[float]] = defaultdict(list)
    for cls, recs in sorted(results.items()):
        for m in METRICS:
            v = [x["ratio"] for x in recs if x["metric"] == m]
            if len(v) < 10:
                continue
            pooled[m] += v
            band = coarse[m]["band"]
            print(f"| {cls} | {', '.join(sorted({x['gpu'] for x in recs}))} | {m} | {len(v)} | "
                  f"[{quantile(v, 0.1):.2f}, {quantile(v, 0.9):.2f}] | {band} | {exponent(v, band):.2f} |")
    widening: dict[str, Any] = {}
    for m, v in pooled.items():
        e = exponent(v, coarse[m]["band"])
        widening[m] = round(max(1.0, e), 3)
        print(f"| all held-out classes | | {m} | {len(v)} | [{quantile(v, 0.1):.2f}, "
              f"{quantile(v, 0.9):.2f}] | {coarse[m]['band']} | {e:.2f} |")
    if a.write:
        write_widening(widening, {m: len(v) for m, v in pooled.items()}, sorted(results))


def write_widening(widening: dict[str, float], n: dict[str, int], classes: list[str]) -> None:
    """Set ``unmeasured_widening`` in facts/calibration-bands.yaml, leaving the rest as it is."""
    import yaml

    from servewise.engine.domain.perf.bands import BANDS_FILE

    text = BANDS_FILE.read_text(encoding="utf-8")
    head = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    data = yaml.safe_load(text)
    data["unmeasured_widening"] = {
        **dict(sorted(widening.items())), "n": dict(sorted(n.items())), "classes_held_out": classes,
        "vendors": ["nvidia"],
        "method": "leave-one-GPU-class-out refits (tools/perf/class_widening.py): the exponent e "
                  "with unseen-class [p10, p90] = held-out campaign band ** e, the wider side, "
                  "at least 1; applied as band ** e to a class without measured rows, band ** "
                  "sqrt(e) to a backend borrowed by ratio from another class; only for the "
                  "vendors whose classes were held out (other vendors keep calibration.yaml's "
                  "unmeasured_band_widening); the latency exponents rest on the Blackwell HBM "
                  "rows alone (the other held-out classes have offline throughput only)"}
    BANDS_FILE.write_text(head + yaml.safe_dump(data, sort_keys=False, width=100), encoding="utf-8")
    print(f"wrote unmeasured_widening to {BANDS_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
