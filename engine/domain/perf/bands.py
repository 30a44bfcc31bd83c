"""Uncertainty bands of the performance model, per regime, from out-of-sample residuals.

``facts/calibration-bands.yaml`` (written by ``python -m tools.perf.bands``) holds, per regime,
the 10th and 90th percentiles of ``measured / predicted`` of TTFT, TPOT and throughput on rows
predicted by a calibration fitted *without their campaign* (grouped cross-validation by
campaign: the rows of one (file, model, backend, GPU, precision) campaign are held out together).
An estimate's 80 % band is its central value times those two numbers. A regime is

* the backend (``vllm`` | ``sglang`` | ``trtllm``);
* the arrival: ``closed`` (a client keeps C requests in flight), ``open`` (Poisson arrivals at an
  offered rate) or ``offline`` (maximum throughput, the engine's batch full);
* the load relative to capacity: requests in flight per engine rank for a closed loop
  (``1-4`` | ``5-32`` | ``33-128`` | ``129+``: the batch from latency-bound to throughput-bound),
  the prefill queue's utilisation for an open loop (``rho<0.5`` | ``rho0.5-0.85`` | ``rho0.85+``),
  ``max`` offline.

A regime with fewer than ``min_rows`` held-out rows of a metric falls back (``lookup``) — for an open
loop first to the closed loop at the same requests in flight per rank — to the same backend and
arrival over every load, then to the backend, then to all rows. Without the file the
calibration profile's in-sample band applies (calibration.Profile.band).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT

BANDS_FILE = PACKAGE_ROOT / "facts" / "calibration-bands.yaml"
METRICS = ("ttft_ms", "tpot_ms", "output_tokens_per_s")
ARRIVALS = ("closed", "open", "offline")
CLOSED_BINS = ((4, "1-4"), (32, "5-32"), (128, "33-128"), (float("inf"), "129+"))
OPEN_BINS = ((0.5, "rho<0.5"), (0.85, "rho0.5-0.85"), (float("inf"), "rho0.85+"))
ANY = "all"


def load_bin(arrival: str, per_rank: float | None = None, rho: float | None = None) -> str:
    """The load bin of a regime: requests in flight per engine rank (closed loop), the prefill
    queue's utilisation (open loop), ``max`` (offline)."""
    if arrival == "offline":
        return "max"
    if arrival == "open":
        x = 0.0 if rho is None else float(rho)
        return next(name for edge, name in OPEN_BINS if x < edge)
    x = 1.0 if per_rank is None else float(per_rank)
    return next(name for edge, name in CLOSED_BINS if x <= edge)


def regime(backend: str, arrival: str, load: str) -> dict[str, str]:
    """A regime as the bands file keys it."""
    return {"backend": str(backend).lower(), "arrival": str(arrival), "load": str(load)}


@lru_cache(maxsize=4)
def load_bands(path: str | None = None) -> dict[str, Any]:
    """The bands file as a dict (empty when it does not exist)."""
    p = Path(path) if path else BANDS_FILE
    if not p.exists():
        return {}
    if p == BANDS_FILE:
        from servewise.engine.common.rulecache import cached_yaml

        return cached_yaml(p) or {}
    import yaml

    return yaml.safe_load(p.read_text(encoding="utf-8")) or {}


def _index(bands: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    key = id(bands)
    hit = _INDEX.get(key)
    if hit is not None and hit[0] is bands:
        return hit[1]
    idx = {(str(e["backend"]), str(e["arrival"]), str(e["load"])): e
           for e in bands.get("regimes") or []}
    _INDEX[key] = (bands, idx)
    return idx


_INDEX: dict[int, tuple[dict[str, Any], dict[tuple[str, str, str], dict[str, Any]]]] = {}


def lookup(backend: str, arrival: str, load: str, metric: str,
           bands: dict[str, Any] | None = None, closed_load: str | None = None
           ) -> tuple[list[float], dict[str, str]] | None:
    """``([low, high], regime used)`` of ``metric``: the most specific regime with at least
    ``min_rows`` held-out rows of it (backend × arrival × load, then backend × arrival, then
    backend, then all rows); None without a bands file. ``closed_load``: for an open loop, the
    closed-loop load bin of the same requests in flight per rank, tried after the open regime
    itself (a batch of C sequences steps alike whether a client or Poisson arrivals keep C in
    flight; only the queue in front of it differs)."""
    bands = load_bands() if bands is None else bands
    if not bands:
        return None
    idx = _index(bands)
    need = int(bands.get("min_rows", 30))
    b = str(backend).lower()
    keys = [(b, arrival, load)]
    if closed_load is not None and arrival == "open":
        keys += [(b, "closed", closed_load)]
    keys += [(b, arrival, ANY), (b, ANY, ANY), (ANY, ANY, ANY)]
    for key in keys:
        e = idx.get(key)
        if e is None:
            continue
        m = e.get(metric)
        if m and int(m.get("n", 0)) >= need:
            used = dict(zip(("backend", "arrival", "load"), key, strict=True))
            return [float(m["band"][0]), float(m["band"][1])], used
    return None
