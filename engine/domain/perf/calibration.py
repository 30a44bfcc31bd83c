"""Calibration profiles: a few efficiencies per GPU class and serving backend.

The constants live in ``facts/calibration.yaml`` (written by ``python -m
tools.perf.fit``). A GPU is mapped to a class by architecture and memory technology
(``hopper-hbm``, ``blackwell-hbm``, ``ada-gddr``, ...). Classes with measured rows have fitted
profiles; other classes borrow the profile of a measured class (``inherit``) and carry a wider
uncertainty band. A backend missing from a measured class is derived from the same backend's
ratio in the reference class.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from servewise.engine.common.paths import PACKAGE_ROOT

CALIBRATION_FILE = PACKAGE_ROOT / "facts" / "calibration.yaml"
BACKENDS = ("vllm", "trtllm", "sglang")
# The measured backend whose constants size a plan's serving framework (the framework a plan
# recommends, rules/candidates/gpu.yaml). The ROCm build of vLLM runs vLLM's scheduler and
# engine; MindIE (Ascend) has no measured rows of its own, and vLLM's profile stands for it as
# for vLLM-Ascend (the Ascend class borrows Hopper's efficiencies anyway, with a widened band).
FRAMEWORK_PROFILE = {"vLLM": "vllm", "vLLM (ROCm)": "vllm", "SGLang": "sglang",
                     "TensorRT-LLM": "trtllm", "MindIE": "vllm"}
BACKEND_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}  # as plans name them


def framework_backend(framework: str | None) -> str:
    """The backend profile (``vllm`` / ``sglang`` / ``trtllm``) that sizes ``framework`` (a
    framework name as plans give it, or a backend name); vLLM's for an unknown or absent one."""
    name = str(framework or "vLLM")
    if name.lower() in BACKENDS:
        return name.lower()
    return FRAMEWORK_PROFILE.get(name, "vllm")


# First-order values used when no calibration file exists (public efficiency figures:
# decode 74-77% of peak bandwidth at batch 1, prefill 54-69% of peak FLOPS).
FALLBACK_PROFILE = {"eta_bw": 0.75, "eta_flops": 0.5, "eta_moe": 0.8, "t_step_ms": 1.0,
                    "t_layer_us": 20.0, "t_seq_us": 10.0, "interference": 1.0, "t_chunk_ms": 2.0,
                    "t_request_ms": 50.0, "k_step": 1.0, "burst": 0.1, "admission": 0.05,
                    "dp_wait": 1.0, "eta_lowp": 0.75, "t_moe_layer_us": 10.0,
                    "t_in_token_us": 1.0, "interference_lockstep": 1.0}
PARAMS = ("eta_bw", "eta_flops", "eta_moe", "t_step_ms", "t_layer_us", "t_seq_us", "interference",
          "t_chunk_ms", "t_request_ms", "k_step", "burst", "admission",
          "dp_wait", "eta_lowp", "t_moe_layer_us", "t_in_token_us", "interference_lockstep")
# Physical range of each constant: the fit's bounds, and the clip of a borrowed (ratio) profile.
# eta_bw is capped at 92 %: more than that of peak HBM bandwidth is not reached by real kernels,
# and without the cap the fit trades bandwidth against per-step overhead. t_layer is capped at
# 60 us (a layer's small kernels: norms, rotary, routing, a few launches): above that the fit
# would turn one model's slow MoE kernels into a per-layer cost charged to every model.
BOUNDS = {"eta_bw": (0.2, 0.92), "eta_flops": (0.05, 0.9), "eta_moe": (0.1, 1.0),
          "t_step_ms": (0.01, 30.0), "t_layer_us": (0.01, 60.0), "t_seq_us": (0.01, 500.0),
          "interference": (0.05, 3.0), "t_chunk_ms": (0.01, 100.0),
          "t_request_ms": (0.1, 500.0), "k_step": (0.01, 20.0), "burst": (0.001, 3.0),
          "admission": (0.001, 3.0),
          "dp_wait": (0.01, 200.0), "eta_lowp": (0.5, 1.0),
          "t_moe_layer_us": (0.01, 300.0), "t_in_token_us": (0.001, 100.0),
          "interference_lockstep": (0.01, 3.0)}
# Backends whose scheduler mixes prefill chunks into the decode steps (vLLM's chunked prefill,
# TensorRT-LLM's in-flight batching of context and generation requests): requests that start and
# finish together (a closed loop of fixed-length requests) still have the others' prefill chunks
# in their decode steps, so their interference_lockstep is their interference (not fitted).
# SGLang runs prefill batches as steps of their own unless --enable-mixed-chunk is set
# (sgl-project/sglang python/sglang/srt/server_args.py: enable_mixed_chunk: bool = False).
MIXED_PREFILL_BACKENDS = ("vllm", "trtllm")
# Prefill chunk (tokens per engine step) of each backend's default scheduler.
CHUNK_TOKENS = {"vllm": 2048, "sglang": 8192, "trtllm": 8192}
FALLBACK_LINKS = {
    "nvlink": {"latency_us": 8.0, "eta": 0.7},
    "pcie": {"latency_us": 25.0, "eta": 0.6},
    "xgmi": {"latency_us": 12.0, "eta": 0.6},
    "hccs": {"latency_us": 15.0, "eta": 0.6},
}
FALLBACK_BAND = {"ttft_ms": [0.6, 1.6], "tpot_ms": [0.8, 1.25], "output_tokens_per_s": [0.8, 1.25]}
PCIE_GBS = {3: 13.0, 4: 26.0, 5: 52.0}  # effective one-direction x16 bandwidth per generation


@dataclass(frozen=True)
class Profile:
    """Efficiencies of one GPU class with one backend."""

    gpu_class: str
    backend: str
    eta_bw: float          # achieved share of peak memory bandwidth in decode steps
    eta_flops: float       # achieved share of peak dense tensor FLOPS (GEMMs, attention)
    eta_moe: float         # efficiency of grouped expert GEMMs / expert reads relative to dense
    t_step_ms: float       # fixed cost per engine step (scheduler, launch)
    t_layer_us: float      # per-layer cost per step (small kernels, norms, routing)
    t_seq_us: float        # per-sequence cost per step (sampling, detokenisation, bookkeeping)
    interference: float    # share of other requests' prefill time that lands on decode steps
    t_chunk_ms: float      # extra cost of each prefill chunk (its own step / launch)
    t_request_ms: float    # fixed per-request cost of the OpenAI-compatible HTTP path (serving.client_ms)
    k_step: float          # decode steps a new request waits for (admission at step boundaries)
    burst: float           # share of the arrival-burst wait (C-1)/2 x t_prefill left in TTFT
    admission: float       # share of the completion interval (osl-1) x TPOT / (C-1) waited
    dp_wait: float         # decode steps a new request waits when attention runs data-parallel
    eta_lowp: float        # efficiency of native 8/4-bit GEMMs relative to 16-bit ones
    t_moe_layer_us: float  # extra cost per MoE layer per step (routing, grouped-GEMM launches)
    t_in_token_us: float   # per prompt token before the engine (tokenise, IPC, HTTP)
    interference_lockstep: float  # kappa of a closed loop of fixed-length requests (in step)
    band: dict[str, list[float]]  # [low, high] multipliers from the measured error spread
    measured: bool         # fitted on rows of this class and backend
    source: str            # where the numbers come from
    band_widening: float = 1.0  # exponent on a measured band: 1 measured; >1 borrowed constants
    vendor: str = ""       # the GPU vendor of the class (which leave-one-class-out evidence covers)

    def to_dict(self) -> dict[str, Any]:
        return {"gpu_class": self.gpu_class, "backend": self.backend, "measured": self.measured,
                **{k: getattr(self, k) for k in PARAMS}, "source": self.source}


def gpu_class(gpu: dict[str, Any]) -> str:
    """``<architecture>-<memory technology>``, e.g. ``hopper-hbm``, ``ada-gddr``."""
    return _gpu_class(str(gpu.get("arch", "unknown")), str(gpu.get("memory_type", "")))


@lru_cache(maxsize=256)
def _gpu_class(arch: str, memory_type: str) -> str:
    arch = arch.lower()
    word = re.split(r"[\s(]+", arch.strip())[0] or "unknown"
    if "ascend" in arch or "da vinci" in arch:
        word = "ascend"
    elif "orin" in arch:
        word = "orin"
    elif word == "cdna":
        word = "cdna" + (re.findall(r"\d", arch) or [""])[0]
    mem = memory_type.lower()
    tech = "hbm" if "hbm" in mem else "gddr" if "gddr" in mem else "lpddr" if "lpddr" in mem \
        else "mem"
    return f"{word}-{tech}"


@lru_cache(maxsize=4)
def load_calibration(path: str | None = None) -> dict[str, Any]:
    """The calibration file as a dict (empty when it does not exist yet)."""
    p = Path(path) if path else CALIBRATION_FILE
    if not p.exists():
        return {}
    if p == CALIBRATION_FILE:  # the shipped file: read through the cache (every plan needs it)
        from servewise.engine.common.rulecache import cached_yaml

        return cached_yaml(p) or {}
    return yaml.safe_load(p.read_text(encoding="utf-8")) or {}


# vLLM turns its custom all-reduce off on more than two PCIe-only GPUs and uses NCCL (ring)
# instead ("Custom allreduce is disabled because it's not supported on more than two PCIe-only
# GPUs", vllm/distributed/device_communicators/custom_all_reduce.py); TRT-LLM and SGLang also
# run NCCL there.
PCIE_RING_SOURCE = ("https://github.com/vllm-project/vllm/blob/main/vllm/distributed/"
                    "device_communicators/custom_all_reduce.py")


def link_params(gpu: dict[str, Any], cal: dict[str, Any] | None = None,
                n_gpus: int = 2) -> tuple[str, float, float, float]:
    """(kind, bandwidth GB/s, efficiency, latency µs) of an all-reduce over ``n_gpus`` GPUs.

    Efficiency and latency are fitted from measured all-reduce kernels (``links`` in the
    calibration file, written by ``python -m tools.perf.kernels``): the GPU's own
    values where it was measured (``by_gpu``), else the median of its link kind (NVLink or
    PCIe) at that GPU count, the nearest measured count when it was not.

    A PCIe card whose NVLink is a bridge between ``nvlink_bridge_gpus`` cards (catalog: the
    A100/H100 PCIe, H100 NVL, A30 and RTX A6000 pair up, the H200 NVL bridges 2 or 4)
    all-reduces over PCIe when more GPUs take part: the ring crosses the cards' PCIe links.

    PCIe beyond two GPUs: the engines all-reduce with an NCCL ring (``PCIE_RING_SOURCE``),
    whose bus bandwidth per GPU does not fall with the GPU count (every GPU sends and receives
    ``2 (n-1)/n`` of the message over its own x16 link): the efficiency of the measured
    two-GPU all-reduce, a latency of ``n - 1`` ring hops of it. The measured custom all-reduce
    at 4 and 8 PCIe GPUs (a path the engines do not take; 0.14 and 0.075 of the link on the
    measured L40S box) made TP 4/8 on PCIe 3-7x slower than TRT-LLM's published L40S
    throughput (Mixtral-8x7B/8x22B TP 4/8, benchmarks-extra.csv).
    """
    cal = load_calibration() if cal is None else cal
    kind = str(gpu.get("intra_node") or "pcie").lower()
    bridge = gpu.get("nvlink_bridge_gpus")
    if kind == "nvlink" and isinstance(bridge, int) and n_gpus > bridge:
        kind = "pcie"  # NVLink bridges join only `bridge` cards: a wider ring crosses PCIe
    links = {**FALLBACK_LINKS, **(cal.get("links") or {})}
    lp = links.get(kind, links["pcie"])
    own = ((links.get("by_gpu") or {}).get(str(gpu.get("id"))) or {}).get("by_gpus")
    table = own or lp.get("by_gpus")
    ring = kind == "pcie" and n_gpus > 2
    if table:
        want = 2 if ring else n_gpus
        n = min(table, key=lambda k: (abs(int(k) - want), int(k)))
        lp = table[n]
    bw = gpu.get("link_gbs")
    if not isinstance(bw, (int, float)) or bw <= 0 or kind == "pcie":
        bw = PCIE_GBS.get(int(gpu.get("pcie_gen") or 4), 26.0)
    else:
        bw = float(bw) / 2  # NVLink figures are bidirectional totals
    lat = float(lp["latency_us"]) * ((n_gpus - 1) if ring else 1)
    return kind, float(bw), float(lp["eta"]), lat


@dataclass(frozen=True)
class MoeKernelRates:
    """How a GPU's measured fused-MoE kernels run a precision (``moe_kernels`` section)."""

    read: float                # expert-read efficiency relative to FP8 (INT4: Marlin de-quantises)
    multiply: float | None     # grouped expert GEMM rate relative to BF16 (None: not measured)
    source: str
    route: float = 0.0         # bytes per routed (token x hidden) element no slice shares (0: none)


def moe_kernel_rates(gpu: dict[str, Any], precision: str,
                     cal: dict[str, Any] | None = None) -> MoeKernelRates:
    """The ``moe_kernels`` rates of ``precision`` on ``gpu``.

    ``read`` (memory-bound: it depends on the bandwidth the de-quantisation has to keep up
    with) and ``route`` (the activation traffic of the routing, in bytes at the GPU's
    bandwidth; a precision not measured on that GPU takes the median of its measured ones) are
    the GPU's own where its kernels were measured, else that of the measured GPU of
    its class nearest in memory bandwidth (B300 and GB200 take B200's, H100 PCIe and H20
    H100 SXM's, L4 and L20 L40S's). ``multiply`` (compute-bound: the same tensor cores in a
    class) is the median over the class's measured GPUs, so H200 never multiplies slower than
    H100 from kernel-table noise. A class without a measured GPU keeps the serving model's
    precision rate and eta_lowp (``multiply`` None, ``read`` 1). With the shipped calibration
    the answer is remembered per (GPU, precision)."""
    if cal is not None:
        return _moe_kernel_rates(gpu, precision, cal)
    cal = load_calibration()
    key = (str(gpu.get("id")), gpu_class(gpu), gpu.get("bandwidth_gbs"), str(precision))
    hit = _MOE_RATES.get(key)
    if hit is None or hit[0] is not cal:  # a test may reload the file
        hit = _MOE_RATES[key] = (cal, _moe_kernel_rates(gpu, precision, cal))
    return hit[1]


_MOE_RATES: dict[tuple[Any, ...], tuple[dict[str, Any], MoeKernelRates]] = {}


def _moe_kernel_rates(gpu: dict[str, Any], precision: str,
                      cal: dict[str, Any]) -> MoeKernelRates:
    table = (cal.get("moe_kernels") or {}).get("by_gpu") or {}
    cls, bw = gpu_class(gpu), float(gpu.get("bandwidth_gbs") or 1.0)
    same = sorted((abs(math.log(float(e["bandwidth_gbs"]) / bw)), g)
                  for g, e in table.items() if e.get("class") == cls)
    if not same:
        return MoeKernelRates(1.0, None, f"no fused-MoE kernel data for {cls}")
    p = str(precision).lower()
    name = str(gpu.get("id")) if str(gpu.get("id")) in table else same[0][1]
    read = float((table[name].get("read") or {}).get(p, 1.0))
    routes = table[name].get("route") or {}
    route = float(routes.get(p) or (statistics.median(routes.values()) if routes else 0.0))
    mults = sorted(float(m) for _, g in same
                   if (m := (table[g].get("multiply") or {}).get(p)) is not None)
    mult = statistics.median(mults) if mults else None
    how = "measured on it" if name == str(gpu.get("id")) else f"read: {name}'s, same class"
    return MoeKernelRates(read, mult, f"vLLM fused-MoE kernels ({how}; multiply: median of "
                                      f"{', '.join(g for _, g in sorted(same, key=lambda x: x[1]))})",
                          route)


def _widen(band: dict[str, list[float]], factor: float) -> dict[str, list[float]]:
    return {k: [lo ** factor, hi ** factor] for k, (lo, hi) in band.items()}


_PROFILES: dict[tuple[str, str], tuple[dict[str, Any], Profile]] = {}


def profile(gpu: dict[str, Any], backend: str = "vllm",
            cal: dict[str, Any] | None = None) -> Profile:
    """The calibration profile for ``gpu`` running ``backend``. With the shipped calibration it is
    remembered per GPU class and backend (all it depends on; a Profile is immutable); a
    calibration passed in (a refit) is read every time."""
    overlay = _OVERLAY.get()
    if cal is not None:
        p = _profile(gpu, backend, cal)
        return overlay.apply(p, gpu) if overlay is not None else p
    cal = load_calibration()
    key = (gpu_class(gpu), str(backend))
    hit = _PROFILES.get(key)
    if hit is None or hit[0] is not cal:  # not read yet, or another file read (a test reloads it)
        hit = _PROFILES[key] = (cal, _profile(gpu, backend, cal))
    return overlay.apply(hit[1], gpu) if overlay is not None else hit[1]


class ProfileOverlay(Protocol):
    """A calibration overlay (perf.overlay.Overlay): changes the profiles it is scoped to."""

    def apply(self, p: Profile, gpu: dict[str, Any]) -> Profile: ...


_OVERLAY: ContextVar[ProfileOverlay | None] = ContextVar("servewise_overlay", default=None)


@contextmanager
def using_overlay(overlay: ProfileOverlay | None) -> Iterator[None]:
    """Every profile read inside the block has ``overlay`` applied (``servewise calibrate``'s
    file, perf.overlay); ``None`` leaves the shipped calibration as it is."""
    token = _OVERLAY.set(overlay)
    try:
        yield
    finally:
        _OVERLAY.reset(token)


def active_overlay() -> ProfileOverlay | None:
    """The overlay in force (``using_overlay``), or None."""
    return _OVERLAY.get()


def _profile(gpu: dict[str, Any], backend: str, cal: dict[str, Any]) -> Profile:
    return replace(_class_or_inherited(gpu, backend, cal), vendor=str(gpu.get("vendor") or "").lower())


def _class_or_inherited(gpu: dict[str, Any], backend: str, cal: dict[str, Any]) -> Profile:
    backend = str(backend).lower()
    if backend not in BACKENDS:
        raise ValueError(f"backend '{backend}': expected one of {', '.join(BACKENDS)}")
    cls = gpu_class(gpu)
    classes = cal.get("classes") or {}
    widen = float(cal.get("unmeasured_band_widening", 2.0))
    entry = classes.get(cls)
    if not classes:
        return Profile(cls, backend, **FALLBACK_PROFILE, band=dict(FALLBACK_BAND),
                       measured=False, source="first-order defaults (no calibration file)")
    if entry is None:
        entry = {"inherit": cal.get("default_class", next(iter(classes)))}
    if "inherit" in entry:
        parent = _class_profile(classes, entry["inherit"], backend, cal)
        scale = entry.get("scale") or {}
        p = replace(parent, gpu_class=cls, measured=False,
                    eta_bw=parent.eta_bw * scale.get("eta_bw", 1.0),
                    eta_flops=parent.eta_flops * scale.get("eta_flops", 1.0),
                    eta_lowp=float(entry.get("eta_lowp", parent.eta_lowp)),
                    band=_widen(parent.band, widen), band_widening=widen,
                    source=f"no measured rows for {cls}: efficiencies of {entry['inherit']}"
                           f" ({entry.get('why', 'same memory/compute class')})"
                           + (", eta_lowp the prior (no 8-bit kernel data of its own)"
                              if "eta_lowp" in entry else "") + ", band widened")
        return p
    return _class_profile(classes, cls, backend, cal)


def clip(key: str, value: float) -> float:
    """``value`` kept inside the physical range of ``key`` (a ratio transfer can leave it)."""
    lo, hi = BOUNDS[key]
    return min(max(value, lo), hi)


# A constant added later and the older constant a file without it used in its place
# (a calibration before session 33 applied ``interference`` to every closed loop).
INHERITS = {"interference_lockstep": "interference"}


def entry_key(entry: dict[str, Any], key: str) -> str:
    """The key ``entry`` holds ``key``'s value under: ``key``, or the constant it inherits
    (:data:`INHERITS`) in an older file."""
    old = INHERITS.get(key)
    return old if key not in entry and old in entry else key


def _value(entry: dict[str, Any], key: str) -> float:
    """Constant ``key`` of a calibration entry (an older file may lack newer constants)."""
    return float(entry.get(entry_key(entry, key), FALLBACK_PROFILE[key]))


def _class_profile(classes: dict[str, Any], cls: str, backend: str,
                   cal: dict[str, Any]) -> Profile:
    entry = classes[cls]
    backends = entry.get("backends") or {}
    keys = PARAMS
    if backend in backends:
        b = backends[backend]
        return Profile(cls, backend, *(_value(b, k) for k in keys),
                       band=b["band"],
                       measured=True, source=b.get("fitted_on", "facts/calibration.yaml"))
    # backend not measured on this class: transfer its ratio to a reference backend
    ref_cls = cal.get("default_class", "hopper-hbm")
    ref = (classes.get(ref_cls) or {}).get("backends") or {}
    common = next((k for k in BACKENDS if k in backends and k in ref), None)
    widen = float(cal.get("unmeasured_band_widening", 2.0))
    if common is None or backend not in ref:
        b = next(iter(backends.values()))
        vals = [_value(b, k) for k in keys]
        factor = widen
    else:
        b, r0, r1 = backends[common], ref[common], ref[backend]
        vals = [clip(k, _value(b, k) * _value(r1, k) / _value(r0, k)) for k in keys]
        factor = widen ** 0.5
    band = _widen(b["band"], factor)
    return Profile(cls, backend, *vals, band=band, measured=False, band_widening=factor,
                   source=f"{backend} not measured on {cls}: {common or 'first'} profile of "
                          f"{cls} x ({backend}/{common}) ratio on {ref_cls}, band widened")
