"""Score a model change the way docs/accuracy-attempts.md does, without touching shipped files.

    python -m tools.perf.experiment --out /tmp/x [--backend B ...] [--calibration F] [--lomo]

Refits by the shipped procedure (``tools.perf.fit.fit``: warm start from facts/calibration.yaml,
FIT_MAX_NFEV iterations; ``--backend``: only those backends, the others keep their constants)
and writes the result to ``OUT.yaml`` (``--calibration F``: score F instead of refitting); prints
the fitted median APE overall, per backend and per GPU, and the constants at a bound. ``--lomo``
adds report.py's leave-one-out refits (four held-out models and B200: cold start,
LOMO_NFEV iterations). Everything printed is also written to ``OUT.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.perf.calibration import BOUNDS
from servewise.engine.domain.perf.data import DEFAULT_FILES
from servewise.engine.domain.perf.validate import validate
from tools.perf.fit import fit, write
from tools.perf.report import HELD_OUT, HELD_OUT_GPUS, _held_out


def _cells(ms: dict[str, Any]) -> str:
    def g(m: str) -> str:
        return f"{100 * ms[m]['median_ape']:.1f}" if m in ms else "-"
    return f"TPOT {g('tpot_ms')} TTFT {g('ttft_ms')} offline {g('offline_output_tokens_per_s')}"


def at_bounds(cal: dict[str, Any]) -> dict[str, list[str]]:
    """Constants within 6 % of a bound, per (class, backend)."""
    out = {}
    for cls, v in (cal.get("classes") or {}).items():
        for be, e in (v.get("backends") or {}).items():
            out[f"{cls} {be}"] = [f"{k}={e[k]:.4g}" for k, (lo, hi) in BOUNDS.items()
                                  if k in e and (e[k] <= lo * 1.06 or e[k] >= hi / 1.06)]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="path stem of the OUT.yaml / OUT.json written")
    ap.add_argument("--backend", action="append", help="refit only this backend (repeatable)")
    ap.add_argument("--calibration", help="score this calibration file instead of refitting")
    ap.add_argument("--lomo", action="store_true", help="also run the leave-one-out refits")
    a = ap.parse_args(argv)
    if a.calibration:
        path = Path(a.calibration)
    else:
        path = Path(a.out + ".yaml")
        write(fit(DEFAULT_FILES, backends=a.backend), list(DEFAULT_FILES), path, "experiment")
    cal = yaml.safe_load(path.read_text(encoding="utf-8"))
    s = validate(DEFAULT_FILES, calibration=cal)["summary"]
    out: dict[str, Any] = {"calibration": str(path), "overall": s["overall"],
                           "by_backend": s["by_backend"], "by_gpu": s["by_gpu"],
                           "at_bounds": at_bounds(cal)}
    print("all", _cells(s["overall"]))
    for key in ("by_backend", "by_gpu"):
        for g, ms in s[key].items():
            print(" ", g, _cells(ms))
    for k, v in out["at_bounds"].items():
        print("  at a bound:", k, " ".join(v))
    if a.lomo:
        out["held_out"] = {}
        for job in [("model", m) for m in HELD_OUT] + [("gpu", g) for g in HELD_OUT_GPUS]:
            _, name, sm = _held_out(job)
            out["held_out"][name] = {"overall": sm["overall"], "by_backend": sm["by_backend"]}
            print("held out", name, _cells(sm["overall"]), flush=True)
    Path(a.out + ".json").write_text(json.dumps(out), encoding="utf-8")


if __name__ == "__main__":
    main()
