"""Calibration overlays: the shipped calibration pinned to a buyer's own benchmark.

``servewise calibrate`` fits, per (GPU, backend) the benchmark ran, five named constants
(:data:`CONSTANTS`) over the shipped profile and writes them to a YAML file; ``--calibration
FILE`` on ``plan`` / ``estimate`` / ``validate`` applies it (``calibration.using_overlay``).
The constants:

* ``t_request_ms`` — the fixed request cost before the first token (HTTP, tokenise, queue
  hand-off), absolute: it depends on the server and client, not on the GPU;
* ``eta_bw_scale`` — × the shipped share of peak memory bandwidth that decode steps reach;
* ``eta_flops_scale`` — × the shipped share of peak tensor FLOPS that prefills reach;
* ``interference_scale`` — × the shipped share of other requests' prefill time that lands on
  decode steps (both the random-length and the lock-step value);
* ``wait_scale`` — × the shipped waits before a request's prefill starts (decode steps waited,
  the arrival-burst share, the completion-admission share): how the scheduler admits requests.

An overlay changes only the profiles of the GPU (catalog id) and backend it was fitted on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.perf.calibration import BOUNDS, Profile, clip

FORMAT = "servewise-calibration-overlay"
VERSION = 1
CONSTANTS = ("t_request_ms", "eta_bw_scale", "eta_flops_scale", "interference_scale",
             "wait_scale")
# what each constant may be (outside it the benchmark is not what the model describes)
LIMITS = {"t_request_ms": BOUNDS["t_request_ms"], "eta_bw_scale": (0.25, 4.0),
          "eta_flops_scale": (0.25, 4.0), "interference_scale": (0.0, 10.0),
          "wait_scale": (0.0, 20.0)}


class OverlayError(ValueError):
    """A bad overlay file: ``str()`` is ``<file>: <field>: <what was expected>``."""

    def __init__(self, path: str, where: str, expected: str) -> None:
        super().__init__(f"{path}: {where}: {expected}")
        self.path, self.where, self.expected = path, where, expected


@dataclass(frozen=True)
class Scope:
    """The constants fitted for one GPU and backend."""

    gpu: str
    backend: str
    constants: dict[str, float]

    def apply(self, p: Profile) -> Profile:
        c = self.constants
        scale_i = c.get("interference_scale", 1.0)
        scale_w = c.get("wait_scale", 1.0)
        return replace(
            p,
            t_request_ms=clip("t_request_ms", c.get("t_request_ms", p.t_request_ms)),
            eta_bw=clip("eta_bw", p.eta_bw * c.get("eta_bw_scale", 1.0)),
            eta_flops=clip("eta_flops", p.eta_flops * c.get("eta_flops_scale", 1.0)),
            interference=clip("interference", p.interference * scale_i),
            interference_lockstep=clip("interference_lockstep",
                                       p.interference_lockstep * scale_i),
            k_step=clip("k_step", p.k_step * scale_w),
            burst=clip("burst", p.burst * scale_w),
            admission=clip("admission", p.admission * scale_w),
            source=f"{p.source}; overlay fitted on the buyer's benchmark ({self.gpu}, "
                   f"{self.backend})")


@dataclass(frozen=True)
class Overlay:
    """An overlay file: its scopes, where it came from and its hash."""

    scopes: tuple[Scope, ...]
    path: str = ""
    sha256: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def scope_for(self, gpu: dict[str, Any], backend: str) -> Scope | None:
        gid = str(gpu.get("id", ""))
        return next((s for s in self.scopes
                     if s.gpu == gid and s.backend == str(backend).lower()), None)

    def apply(self, p: Profile, gpu: dict[str, Any]) -> Profile:
        sc = self.scope_for(gpu, p.backend)
        return sc.apply(p) if sc is not None else p

    def record(self) -> dict[str, Any]:
        """What a plan records of the overlay it used."""
        return {"file": Path(self.path).name if self.path else "", "sha256": self.sha256,
                "scopes": [{"gpu": s.gpu, "backend": s.backend,
                            "constants": dict(sorted(s.constants.items()))}
                           for s in self.scopes]}


def _number(path: str, where: str, v: Any, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise OverlayError(path, where, f"a number, not {v!r}")
    lo, hi = LIMITS[key]
    if not lo <= float(v) <= hi:
        raise OverlayError(path, where, f"a number in [{lo:g}, {hi:g}], not {v!r}")
    return float(v)


def parse_overlay(data: Any, path: str = "<overlay>", sha256: str = "") -> Overlay:
    """An overlay from its YAML mapping; :class:`OverlayError` naming the field when bad."""
    if not isinstance(data, dict):
        raise OverlayError(path, "(top level)", "a mapping written by `servewise calibrate`")
    if data.get("format") != FORMAT:
        raise OverlayError(path, "format", f"'{FORMAT}' (a file written by `servewise calibrate`)")
    if data.get("version") != VERSION:
        raise OverlayError(path, "version", f"{VERSION}")
    raw = data.get("scopes")
    if not isinstance(raw, list) or not raw:
        raise OverlayError(path, "scopes", "a non-empty list of {gpu, backend, constants}")
    scopes = []
    for i, sc in enumerate(raw):
        where = f"scopes[{i}]"
        if not isinstance(sc, dict):
            raise OverlayError(path, where, "a mapping {gpu, backend, constants}")
        gpu, backend, consts = sc.get("gpu"), sc.get("backend"), sc.get("constants")
        if not isinstance(gpu, str) or not gpu:
            raise OverlayError(path, f"{where}.gpu", "a catalog GPU name")
        if backend not in ("vllm", "sglang", "trtllm"):
            raise OverlayError(path, f"{where}.backend", "one of vllm, sglang, trtllm")
        if not isinstance(consts, dict):
            raise OverlayError(path, f"{where}.constants", f"a mapping of {', '.join(CONSTANTS)}")
        unknown = sorted(set(consts) - set(CONSTANTS))
        if unknown:
            raise OverlayError(path, f"{where}.constants.{unknown[0]}",
                               f"one of {', '.join(CONSTANTS)}")
        scopes.append(Scope(gpu, backend, {k: _number(path, f"{where}.constants.{k}", v, k)
                                           for k, v in sorted(consts.items())}))
    return Overlay(tuple(scopes), path, sha256, {k: v for k, v in data.items() if k != "scopes"})


def load_overlay(path: str | Path) -> Overlay:
    """Read and check an overlay file (:class:`OverlayError` when it is missing or bad)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise OverlayError(str(p), "(file)", f"a readable overlay file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise OverlayError(str(p), "(file)", f"YAML ({str(exc).splitlines()[0]})") from None
    return parse_overlay(data, str(p), hashlib.sha256(raw).hexdigest())


def dump_overlay(scopes: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    """The overlay file's text: a header, then ``format``, ``version``, ``scopes`` and ``meta``."""
    head = ("# servewise calibration overlay, written by `servewise calibrate`.\n"
            "# Apply it with `servewise plan|estimate|validate --calibration FILE`. Per scope (the\n"
            "# GPU and backend the benchmark ran): t_request_ms is the fixed request cost before\n"
            "# the first token (ms, absolute); eta_bw_scale, eta_flops_scale, interference_scale\n"
            "# and wait_scale multiply the shipped decode-bandwidth efficiency, prefill-compute\n"
            "# efficiency, prefill interference and admission waits (facts/calibration.yaml,\n"
            "# engine/domain/perf/overlay.py). `meta` records the\n"
            "# files fitted on (sha256), the rows, and the error before, after and cross-validated.\n")
    body = {"format": FORMAT, "version": VERSION, "scopes": scopes, "meta": meta}
    return head + yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
