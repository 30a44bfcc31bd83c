"""GEMM kernel model: time of one m x k by k x n GEMM per GPU and dtype (tools/perf/gemm.yaml).

The constants are fitted from vLLM's measured linear-kernel latencies (``python -m
tools.perf.fit_gemm``; source and table errors in the file)::

    t = max(2 m n k / (peak x eta_max x s(m) s(n) s(k)), bytes / (bw x eta_mem)) + t0
    s(x) = x / (x + x_half)

``shape_factor`` gives the kernel efficiency at a shape relative to a 8192^3 GEMM. A GPU without
kernel data borrows the curve of the measured GPU of its architecture (``transfer``), with the
half-saturation sizes scaled by the ratio of datasheet peak rates and its own peak and
bandwidth; a dtype not measured on a GPU uses its bfloat16 curve the same way.

Not used by the serving model yet, so it lives with the fitting tools, outside the shipped engine
and the knowledge hash: a shape factor on the dense prefill GEMMs was tried and not kept
(docs/accuracy-attempts.md, session 22: fitted errors fell, leave-one-model-out errors of
MiniMax-M2.5 rose). A model change that uses it moves the file to facts/ and this module to
engine/domain/perf/.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

GEMM_FILE = Path(__file__).resolve().with_name("gemm.yaml")
# catalog dense_tflops key of each kernel dtype (nvfp4: 2 x fp8 on Blackwell, precision.py)
PEAK_KEY = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "fp4"}
# bytes per (activation, weight) element: NVFP4 adds one FP8 scale per 16 elements
DTYPE_BYTES = {"bfloat16": (2.0, 2.0), "fp8": (1.0, 1.0), "fp8_block": (1.0, 1.0),
               "nvfp4": (0.5625, 0.5625)}
# kernel dtype a model precision runs its GEMMs in (weight-only formats at the 16-bit rate)
PRECISION_DTYPE = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "int8": "bfloat16",
                   "int4": "bfloat16", "fp4": "nvfp4"}


def peak_tflops(gpu: dict[str, Any], dtype: str) -> float | None:
    """Datasheet dense rate of ``dtype`` on ``gpu`` (catalog), the one the fit divides by."""
    tf = gpu.get("dense_tflops") or {}
    key = PEAK_KEY[dtype]
    v = tf.get(key)
    if key == "fp4" and not v and tf.get("fp8"):
        v = 2 * tf["fp8"]
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


@lru_cache(maxsize=2)
def load_gemm(path: str | None = None) -> dict[str, Any]:
    """tools/perf/gemm.yaml as a dict (empty when it does not exist)."""
    p = Path(path) if path else GEMM_FILE
    if not p.exists():
        return {}
    return yaml.safe_load(p.read_text(encoding="utf-8")) or {}


def _family(gpu: dict[str, Any]) -> str:
    arch = str(gpu.get("arch", "")).lower()
    mem = str(gpu.get("memory_type", "")).lower()
    if "blackwell" in arch:
        return "blackwell-hbm" if "hbm" in mem else "blackwell-gddr"
    for word in ("hopper", "ada", "ampere"):
        if word in arch:
            return word
    return "default"


@lru_cache(maxsize=256)
def _curve_cached(gpu_id: str, family: str, peak: float, bw: float,
                  dtype: str) -> tuple[tuple[float, ...], str, str] | None:
    g = load_gemm()
    by_gpu = g.get("by_gpu") or {}
    own = by_gpu.get(gpu_id) or {}
    keys = ("eta_max", "m_half", "n_half", "k_half", "eta_mem", "t0_us")
    if dtype in own:
        c = own[dtype]
        return (*(float(c[k]) for k in keys), float(c["peak_tflops"]),
                float(c["bandwidth_gbs"])), f"measured {gpu_id} {dtype}", dtype
    transfer = g.get("transfer") or {}
    ref_id = gpu_id if own else transfer.get(family) or transfer.get("default")
    ref = by_gpu.get(ref_id) or {}
    used = dtype if dtype in ref else "bfloat16"
    c = ref.get(used)
    if not c:
        return None
    scale = peak / float(c["peak_tflops"])
    vals = [float(c[k]) for k in keys]
    vals[1:4] = [v * scale for v in vals[1:4]]
    return (*vals, peak, bw), f"{ref_id} {used} curve, sizes x {scale:.3g} (peak ratio)", used


def curve(gpu: dict[str, Any], precision: str) -> tuple[tuple[float, ...], str, str] | None:
    """((eta_max, m_half, n_half, k_half, eta_mem, t0_us, peak, bw), where it comes from, kernel
    dtype) for ``gpu`` at ``precision``; None without a kernel file or a peak rate."""
    dtype = PRECISION_DTYPE.get(precision, "bfloat16")
    peak = peak_tflops(gpu, dtype) if dtype != "bfloat16" else None
    if dtype != "bfloat16" and (not peak or (dtype == "fp8" and not gpu.get("native_fp8"))):
        dtype, peak = "bfloat16", None  # weight-only: 16-bit kernels
    peak = peak or peak_tflops(gpu, "bfloat16")
    bw = gpu.get("bandwidth_gbs")
    if not peak or not isinstance(bw, (int, float)):
        return None
    return _curve_cached(str(gpu.get("id")), _family(gpu), peak, float(bw), dtype)


def kernel_ms(c: tuple[float, ...], m: float, n: float, k: float,
              dtype_bytes: tuple[float, float], weights: float = 1.0) -> float:
    """Time (ms) of one GEMM of the fitted form; ``weights``: distinct k x n weight matrices
    read (a grouped GEMM of ``weights`` experts stacked along m)."""
    eta, mh, nh, kh, em, t0, peak, bw = c
    a, w = dtype_bytes
    s = m / (m + mh) * n / (n + nh) * k / (k + kh)
    t_c = 2 * m * n * k / (peak * 1e12 * eta * s) * 1e3
    t_m = (m * k * a + weights * k * n * w + m * n * 2.0) / (bw * 1e9 * em) * 1e3
    return max(t_c, t_m) + t0 / 1e3


REF = 8192.0  # m = n = k of the reference GEMM the shape factor is relative to


def shape_factor(c: tuple[float, ...], m: float, n: float, k: float,
                 dtype_bytes: tuple[float, float], weights: float = 1.0) -> float:
    """Kernel efficiency (FLOPs per second) at (m, n, k) over that of a REF^3 GEMM."""
    if m <= 0 or n <= 0 or k <= 0:
        return 1.0
    t_ref = kernel_ms(c, REF, REF, REF, dtype_bytes) / REF ** 3
    return t_ref * m * n * k / kernel_ms(c, m, n, k, dtype_bytes, weights)
