"""Fit the per-GPU GEMM kernel model from measured GEMM latencies (a maintainer's tool; needs numpy
and scipy: ``fit`` extra).

    python -m tools.perf.fit_gemm [--ops ../shared/data/ops] [--out tools/perf/gemm.yaml]

Reads ``<gpu>_gemm_perf.csv.gz`` (vLLM's linear kernels timed by aiconfigurator, one m x k by
k x n product per row, m = tokens; the fastest kernel per shape and dtype is kept, as vLLM
picks one) and fits, per GPU and GEMM dtype, in log space (robust, Cauchy loss)::

    t = max(2 m n k / (peak x eta_max x s(m) x s(n) x s(k)),
            (m k x a + k n x w + m n x 2) / (bw x eta_mem)) + t0
    s(x) = x / (x + x_half)

``peak`` and ``bw`` are the catalog's datasheet dense rate of the dtype and HBM/GDDR bandwidth,
``a``/``w`` the bytes per activation/weight element of the dtype. The compute branch saturates in
each dimension (tile padding and too few tiles for one wave at small m, n or k); the memory branch
is the weight and activation traffic; ``t0`` the launch floor. Only the constants are shipped
(tools/perf/gemm.yaml), with the table's median error; the tables are not.
"""

from __future__ import annotations

import argparse
import csv
import gzip
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.domain.catalog import load_catalog
from tools.perf.gemm import DTYPE_BYTES, GEMM_FILE, peak_tflops

OPS_DIR = PACKAGE_ROOT.parent / "shared" / "data" / "ops"  # ../shared
GPUS = {"a100_sxm": "A100 80GB SXM", "h100_sxm": "H100 SXM", "h200_sxm": "H200 SXM",
        "b200_sxm": "B200", "l40s": "L40S", "rtx_pro_6000_server": "RTX PRO 6000 Blackwell Server"}
SOURCE = ("ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/systems/data/<gpu>/gemm/vllm/"
          "<version>, commit 095f58a51c4ca8e61b66ec108d86f223f8d559ce (Apache-2.0), as "
          "../shared/data/ops/<gpu>_gemm_perf.csv.gz")
NAMES = ("eta_max", "m_half", "n_half", "k_half", "eta_mem", "t0_us")
X0 = (0.75, 64.0, 256.0, 256.0, 0.7, 5.0)
LO = (0.05, 1.0, 1.0, 1.0, 0.05, 0.01)
HI = (2.0, 1e5, 1e5, 1e5, 1.0, 200.0)
REF = 8192.0  # reference GEMM m = n = k of the shape factor
# kernel dtypes the performance model runs (fp8_block, 128x128 block-scaled FP8, is measured
# with fewer shapes and several kernels; not used by the model, not shipped)
USED = ("bfloat16", "fp8", "nvfp4")


def read_table(path: Path) -> dict[str, dict[tuple[int, int, int], float]]:
    """Fastest measured latency (ms) per dtype and (m, n, k)."""
    out: dict[str, dict[tuple[int, int, int], float]] = defaultdict(dict)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            key = (int(r["m"]), int(r["n"]), int(r["k"]))
            t = float(r["latency"])
            d = out[r["gemm_dtype"]]
            if t > 0 and (key not in d or t < d[key]):
                d[key] = t
    return out


def model_ms(x: Any, m: Any, n: Any, k: Any, peak: float, bw: float, dtype: str) -> Any:
    """The fitted form (numpy arrays); ``x`` in the order of NAMES."""
    import numpy as np

    eta, mh, nh, kh, em, t0 = x
    a, w = DTYPE_BYTES[dtype]
    s = m / (m + mh) * n / (n + nh) * k / (k + kh)
    t_c = 2 * m * n * k / (peak * 1e12 * eta * s) * 1e3
    t_m = (m * k * a + k * n * w + m * n * 2.0) / (bw * 1e9 * em) * 1e3
    return np.maximum(t_c, t_m) + t0 / 1e3


def fit_one(shapes: dict[tuple[int, int, int], float], peak: float, bw: float,
            dtype: str) -> tuple[dict[str, float], dict[str, Any]]:
    import numpy as np
    from scipy.optimize import least_squares

    keys = sorted(shapes)
    m, n, k = (np.array([s[i] for s in keys], dtype=float) for i in range(3))
    t = np.array([shapes[s] for s in keys])

    def res(lx: Any) -> Any:
        return np.log(model_ms(np.exp(lx), m, n, k, peak, bw, dtype) / t)

    sol = least_squares(res, np.log(X0), bounds=(np.log(LO), np.log(HI)), loss="cauchy",
                        f_scale=0.1, max_nfev=400)
    x = np.exp(sol.x)
    ape = np.abs(model_ms(x, m, n, k, peak, bw, dtype) / t - 1)
    big = m * n * k >= 2 ** 33
    err = {"rows": int(len(t)), "median_ape": round(float(np.median(ape)), 4),
           "p90_ape": round(float(np.quantile(ape, 0.9)), 4),
           "median_ape_m_ge_256": round(float(np.median(ape[m >= 256])), 4),
           "median_ape_large": round(float(np.median(ape[big])), 4) if big.any() else None}
    params = {nm: float(f"{v:.4g}") for nm, v in zip(NAMES, x, strict=True)}
    r = np.array([REF])
    t_ref = float(model_ms(x, r, r, r, peak, bw, dtype)[0])
    params["eta_ref"] = float(f"{2 * REF ** 3 / (peak * 1e12 * t_ref / 1e3):.4g}")
    at = [b for nm, v, lo, hi in zip(NAMES, x, LO, HI, strict=True) for b in [nm]
          if v <= lo * 1.01 or v >= hi / 1.01]
    if at:
        err["at_bound"] = at
    return params, err


def fit_gemm(ops: Path) -> dict[str, Any]:
    cat = load_catalog()
    by_gpu: dict[str, Any] = {}
    for prefix, name in GPUS.items():
        gpu = cat.gpu(name)
        bw = float(gpu["bandwidth_gbs"])
        table = read_table(ops / f"{prefix}_gemm_perf.csv.gz")
        entry: dict[str, Any] = {}
        for dtype in sorted(table):
            if dtype not in USED:
                continue
            peak = peak_tflops(gpu, dtype)
            if not peak:
                continue
            params, err = fit_one(table[dtype], peak, bw, dtype)
            entry[dtype] = {**params, "peak_tflops": peak, "bandwidth_gbs": bw,
                            "table_error": err}
            print(f"{gpu['id']:32s} {dtype:10s} {params} median APE {err['median_ape']:.3f}")
        by_gpu[gpu["id"]] = entry
    return by_gpu


HEADER = """\
# GEMM kernel model of the performance model (tools.perf.gemm).
# Written by `python -m tools.perf.fit_gemm`; do not edit by hand, refit instead.
#
# Per measured GPU and GEMM dtype (bfloat16; fp8 = per-tensor W8A8 CUTLASS; fp8_block = 128x128
# block-scaled FP8; nvfp4 = NVFP4 W4A4), the constants of
#   t = max(2 m n k / (peak x eta_max x s(m) s(n) s(k)), bytes / (bw x eta_mem)) + t0,
#   s(x) = x / (x + x_half), bytes = m k a + k n w + 2 m n (a, w bytes per activation, weight)
# fitted (robust least squares on log latency, Cauchy loss, f_scale 0.1) on the fastest measured
# latency per (m, n, k) of vLLM's linear kernels (source below; m = tokens 1-32768, n and k
# 32-65536). peak_tflops / bandwidth_gbs: the catalog's datasheet values the fit divided by.
# table_error: the form's error on the table it was fitted on (median / p90 APE, all rows; for
# m >= 256; for m n k >= 2^33).
# eta_ref: the form's efficiency of a 8192^3 GEMM (shape factors are relative to it); the ratio
#   fp8 / bfloat16 of eta_ref is the kernel-level counterpart of the fitted eta_lowp.
# Transfer rule for GPUs without kernel data (tools/perf/gemm.py): the same-architecture
#   measured GPU (transfer below), with m_half, n_half, k_half scaled by the ratio of datasheet
#   peak rates (a faster GPU needs more work to fill it), and the GPU's own peak and bandwidth; a
#   dtype not measured on a GPU uses its bfloat16 curve scaled the same way; wider uncertainty
#   than a measured GPU (no kernel or serving rows of its own).
# Not used by the serving model yet: a shape factor of the dense prefill GEMMs was tried and not
#   kept (docs/accuracy-attempts.md, session 22).
# Not shipped: fp8_block (128x128 block-scaled FP8: fewer shapes, a 80-180 us floor in the
#   table that the form fits only with constants at their bounds).
"""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=str(OPS_DIR))
    ap.add_argument("--out", default=str(GEMM_FILE))
    a = ap.parse_args(argv)
    by_gpu = fit_gemm(Path(a.ops))
    doc = {"meta": {"source": SOURCE, "method": "robust least squares on log latency per "
                    "(gpu, dtype)", "form": "max(compute, memory) + t0"},
           "transfer": {"hopper": "H100 SXM", "blackwell-hbm": "B200",
                        "blackwell-gddr": "RTX PRO 6000 Blackwell Server", "ada": "L40S",
                        "ampere": "A100 80GB SXM", "default": "H100 SXM"},
           "by_gpu": by_gpu}
    out = Path(a.out)
    out.write_text(HEADER + yaml.safe_dump(doc, sort_keys=False, width=100), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
