"""Fit the GPU-to-GPU all-reduce constants from measured kernel latencies (a maintainer's tool).

    python -m servewise.engine.domain.perf.kernels [--ops ../shared/data/ops] [--out facts/calibration.yaml]

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
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.calibration import CALIBRATION_FILE, PCIE_GBS

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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=str(OPS_DIR))
    ap.add_argument("--out", default=str(CALIBRATION_FILE))
    a = ap.parse_args(argv)
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
    out.write_text(head + "\n" + yaml.safe_dump(cal, sort_keys=False, width=100), encoding="utf-8")
    print(f"wrote links to {out}")


if __name__ == "__main__":
    main()
