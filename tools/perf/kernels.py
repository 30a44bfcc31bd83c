"""Fit the all-reduce and fused-MoE constants from measured kernel latencies (a maintainer's tool).

    python -m tools.perf.kernels [--ops ../shared/data/ops] [--out facts/calibration.yaml]

Reads ``<gpu>_custom_allreduce_perf.csv.gz`` (vLLM's custom all-reduce under CUDA graphs, from
aiconfigurator's measured tables; ``message_size`` in bf16 elements) and fits, per GPU and GPU
count, ``t = latency + 2 (n-1)/n x bytes / (link_gbs x eta)``: the latency from the smallest
message, ``eta`` from the largest. The result replaces the ``links`` section of the calibration
file: per link kind the median over the GPUs measured on it (the transfer rule for GPUs without
kernel data) and, per measured GPU, its own values (``by_gpu``). The tables are not shipped.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.calibration import CALIBRATION_FILE, PCIE_GBS, gpu_class

OPS_DIR = PACKAGE_ROOT.parent / "shared" / "data" / "ops"  # ../shared
GPUS = {"a100_sxm": "A100 80GB SXM", "h100_sxm": "H100 SXM", "h200_sxm": "H200 SXM",
        "b200_sxm": "B200", "l40s": "L40S", "rtx_pro_6000_server": "RTX PRO 6000 Blackwell Server"}


def link_bw(gpu: dict[str, Any]) -> tuple[str, float]:
    """(link kind, one-direction GB/s) as the performance model uses them."""
    kind = str(gpu.get("intra_node") or "pcie").lower()
    if kind == "pcie" or not gpu.get("link_gbs"):
        return "pcie", PCIE_GBS.get(int(gpu.get("pcie_gen") or 4), 26.0)
    return kind, float(gpu["link_gbs"]) / 2


def fit_allreduce(ops: Path) -> dict[str, Any]:
    cat = load_catalog()
    by_gpu: dict[str, Any] = {}
    per_kind: dict[str, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for prefix, name in GPUS.items():
        gpu = cat.gpu(name)
        kind, bw = link_bw(gpu)
        rows: dict[int, list[tuple[int, float]]] = defaultdict(list)
        with gzip.open(ops / f"{prefix}_custom_allreduce_perf.csv.gz", "rt", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["backend"] == "vllm_graph":
                    rows[int(r["num_gpus"])].append((int(r["message_size"]), float(r["latency"])))
        fitted = {}
        for n, pts in sorted(rows.items()):
            pts.sort()
            lat_us = pts[0][1] * 1e3
            size, t_ms = pts[-1]
            busbw = 2 * (n - 1) / n * size * 2 / ((t_ms - pts[0][1]) * 1e-3) / 1e9
            eta = round(busbw / bw, 3)
            fitted[n] = {"latency_us": round(lat_us, 2), "eta": eta}
            per_kind[kind][n].append((lat_us, eta))
        by_gpu[gpu["id"]] = {"link": kind, "by_gpus": fitted}
    links: dict[str, Any] = {}
    for kind, ns in sorted(per_kind.items()):
        by_n = {n: {"latency_us": round(statistics.median(x[0] for x in v), 2),
                    "eta": round(statistics.median(x[1] for x in v), 3)} for n, v in sorted(ns.items())}
        two = by_n.get(2) or next(iter(by_n.values()))
        links[kind] = {"latency_us": two["latency_us"], "eta": two["eta"], "by_gpus": by_n}
    return {"links": links, "by_gpu": by_gpu}


# Bytes per stored weight of each kernel dtype (with its scales), as precision.py counts them.
MOE_DTYPE_BYTES = {"bfloat16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "int4_wo": 0.5 + 4.0 / 128,
                   "nvfp4": 0.5 + 1.0 / 16}
READ_TOKENS = (1, 2, 4)            # decode: the kernel reads the experts touched
MULTIPLY_TOKENS = (2048, 4096, 8192)  # prefill chunks of the engines' schedulers
ROUTE_MIN_TOKENS = 1024  # all experts busy: the latency is the slices' work plus the routing
# The precisions the serving model runs MoE layers in and the dtypes of the measured kernels:
# FP8 MoE checkpoints (DeepSeek, MiniMax, Qwen3.5 FP8) are 128x128 block-scaled; per-tensor
# FP8 where a GPU has no block-scaled table (L40S, RTX PRO 6000).
MOE_KERNEL_DTYPE = {"bf16": ("bfloat16",), "fp16": ("bfloat16",), "fp8": ("fp8_block", "fp8"),
                    "fp4": ("nvfp4",), "int4": ("int4_wo",)}
MoeTable = dict[tuple[str, tuple[int, ...]], dict[int, float]]


def moe_table(path: Path, dtypes: Iterable[str] | None = None) -> MoeTable:
    """The fastest measured latency (ms) per (dtype, shape) and token count of one
    ``<gpu>_moe_perf.csv.gz`` (balanced routing; every kernel source), for ``dtypes`` (all when
    None); shape = (hidden, intermediate, top-k, experts, MoE TP, EP)."""
    keep = set(dtypes) if dtypes is not None else None
    tab: MoeTable = defaultdict(dict)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["distribution"] != "balanced" or (keep is not None
                                                   and r["moe_dtype"] not in keep):
                continue
            shape = tuple(int(r[k]) for k in ("hidden_size", "inter_size", "topk", "num_experts",
                                              "moe_tp_size", "moe_ep_size"))
            d = tab[(r["moe_dtype"], shape)]
            t = int(r["num_tokens"])
            d[t] = min(d.get(t, math.inf), float(r["latency"]))
    return tab


def _pair(tab: MoeTable, a: str, b: str, tokens: tuple[int, ...], read: bool) -> float | None:
    """Median over common shapes of how much faster dtype ``a`` is than ``b`` (per byte read
    when ``read``, per FLOP otherwise)."""
    out = []
    for (d, shape), ta in tab.items():
        tb = tab.get((b, shape)) if d == a else None
        for t in tokens if tb else ():
            if t in ta and t in tb:
                per = MOE_DTYPE_BYTES[a] / MOE_DTYPE_BYTES[b] if read else 1.0
                out.append(tb[t] / ta[t] * per)
    return statistics.median(out) if out else None


def _relative(tab: MoeTable, a: str, b: str, tokens: tuple[int, ...], read: bool) -> float | None:
    """:func:`_pair`, chained through a third dtype when ``a`` and ``b`` share no shape."""
    direct = _pair(tab, a, b, tokens, read)
    if direct is not None:
        return direct
    for c in sorted(MOE_DTYPE_BYTES):
        ac, cb = _pair(tab, a, c, tokens, read), _pair(tab, c, b, tokens, read)
        if ac is not None and cb is not None:
            return ac * cb
    return None


def route_bytes(tab: MoeTable, dtype: str, bandwidth_gbs: float) -> float | None:
    """Bytes per routed (token x hidden) element that one GPU's fused-MoE kernel moves whatever
    its expert slice, at the GPU's datasheet bandwidth: the permutation, scatter and gather of
    the activations of every (token, expert) pair, which each of ``moe_tp`` ranks does in full.

    Per shape and token count (>= ROUTE_MIN_TOKENS, EP 1, three or more MoE TP sizes) the
    latency is split by a least-squares line in ``1 / moe_tp`` into the part the slices share
    out (the expert GEMMs and weight reads) and the intercept they do not; the intercepts,
    over shapes and token counts, rise with ``tokens x top-k x hidden`` by a robust
    (Theil-Sen) slope, which is returned in bytes; the launch floor is their constant part."""
    by_t: dict[tuple[tuple[int, ...], int], dict[int, float]] = defaultdict(dict)
    for (d, shape), lat in tab.items():
        if d != dtype or shape[5] != 1:
            continue
        for t, ms in lat.items():
            if t >= ROUTE_MIN_TOKENS:
                by_t[(shape[:4], t)][shape[4]] = ms
    pts = []
    for ((h, _, k, _), t), by_tp in sorted(by_t.items()):
        if len(by_tp) < 3:
            continue
        xs = [1.0 / tp for tp in by_tp]
        ys = list(by_tp.values())
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
                 / sum((x - mx) ** 2 for x in xs))
        pts.append((float(t * k * h), my - slope * mx))
    pts.sort()
    slopes = [(b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(pts) for b in pts[i + 1:]
              if b[0] > 1.2 * a[0]]
    if not slopes:
        return None
    return round(statistics.median(slopes) * 1e-3 * bandwidth_gbs * 1e9, 2)


def fit_moe(ops: Path) -> dict[str, Any]:
    """The ``moe_kernels`` section: per measured GPU, ``read`` (INT4 expert reads relative to
    FP8) and ``multiply`` (grouped expert GEMM rate relative to BF16, per precision)."""
    cat = load_catalog()
    by_gpu: dict[str, Any] = {}
    for prefix, name in GPUS.items():
        path = ops / f"{prefix}_moe_perf.csv.gz"
        tab = moe_table(path, MOE_DTYPE_BYTES) if path.exists() else {}
        dtypes = {d for d, _ in tab}
        if "bfloat16" not in dtypes:
            continue
        gpu = cat.gpu(name)
        fp8 = next((d for d in MOE_KERNEL_DTYPE["fp8"] if d in dtypes), None)
        read = {}
        if fp8 and "int4_wo" in dtypes:
            r = _relative(tab, "int4_wo", fp8, READ_TOKENS, read=True)
            if r is not None:
                read["int4"] = round(r, 3)
        multiply = {}
        for prec in ("fp8", "fp4", "int4"):
            d = next((x for x in MOE_KERNEL_DTYPE[prec] if x in dtypes), None)
            r = _relative(tab, d, "bfloat16", MULTIPLY_TOKENS, read=False) if d else None
            if r is not None:
                multiply[prec] = round(r, 3)
        route = {}
        for prec in ("bf16", "fp8", "fp4", "int4"):
            d = next((x for x in MOE_KERNEL_DTYPE[prec] if x in dtypes), None)
            r = route_bytes(tab, d, float(gpu["bandwidth_gbs"])) if d else None
            if r is not None:
                route[prec] = r
        by_gpu[gpu["id"]] = {"class": gpu_class(gpu), "bandwidth_gbs": gpu["bandwidth_gbs"],
                             "read": read, "multiply": multiply, "route": route}
    return {"by_gpu": by_gpu}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=str(OPS_DIR))
    ap.add_argument("--out", default=str(CALIBRATION_FILE))
    a = ap.parse_args(argv)
    missing = [f"{p}_custom_allreduce_perf.csv.gz" for p in GPUS
               if not (Path(a.ops) / f"{p}_custom_allreduce_perf.csv.gz").exists()]
    if missing:
        ap.exit(2, f"error: --ops {a.ops}: the measured kernel tables are missing "
                   f"({', '.join(missing)}); point --ops at ../shared/data/ops\n")
    fitted = fit_allreduce(Path(a.ops))
    out = Path(a.out)
    text = out.read_text(encoding="utf-8")
    head, _, body = text.partition("\nmeta:")
    cal = yaml.safe_load("meta:" + body)
    links = cal.get("links") or {}
    for kind, v in fitted["links"].items():
        links[kind] = v
    links["by_gpu"] = fitted["by_gpu"]
    cal["links"] = links
    cal["moe_kernels"] = fit_moe(Path(a.ops))
    out.write_text(head + "\n" + yaml.safe_dump(cal, sort_keys=False, width=100), encoding="utf-8")
    print(f"wrote links and moe_kernels to {out}")


if __name__ == "__main__":
    main()
