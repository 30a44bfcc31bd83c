"""The decode step's per-layer rest after vLLM's measured fused-MoE kernels (gpt-oss against the
fitted models; docs/accuracy-attempts.md, the helper session after session 40).

    python -m tools.perf.gptoss_kernels [--max-batch 8] [--ops ../shared/data/ops] [--bandwidth]

For every closed-loop TPOT row (the shipped data and facts/data/measured-gptoss.csv) on a GPU with
kernel tables, at most ``--max-batch`` requests per rank, whose MoE shape and kernel dtype the
table holds (gpt-oss: ``w4a16_mxfp4``, the kernels vLLM runs for MXFP4 experts; others: the
precision's dtype as tools.perf.kernels.MOE_KERNEL_DTYPE): measured TPOT minus the measured MoE
kernel at the step's tokens (balanced routing, log-log interpolation, x MoE layers), minus the
dense weights and KV read at the GPU's measured memory-bound BF16 GEMM efficiency
(tools/perf/gemm.yaml ``eta_mem``) and the model's all-reduces; printed per layer, median per (class,
backend, model, precision, TP, EP). ``--bandwidth``: the MoE kernels' achieved share of peak
bandwidth over the experts they touch (MoE TP 1, EP 1) instead. Analysis only: it changes nothing.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.calibration import gpu_class
from servewise.engine.domain.perf.data import DATA_DIR, DEFAULT_FILES, read_rows
from servewise.engine.domain.perf.serving import _step_model
from tools.perf.kernels import GPUS, MOE_KERNEL_DTYPE, OPS_DIR, moe_table
from tools.perf.moe_kernels import interp

GEMM_FILE = Path(__file__).with_name("gemm.yaml")
# bytes per stored weight of each kernel dtype, with its scales (MXFP4: one E8M0 per 32 weights)
BYTES = {"w4a16_mxfp4": 0.5 + 1 / 32, "w4a8_mxfp4_mxfp8": 0.5 + 1 / 32, "nvfp4": 0.5 + 1 / 16,
         "fp8_block": 1.0, "fp8": 1.0, "bfloat16": 2.0, "int4_wo": 0.5 + 4 / 128}


def memory_bound_eta() -> dict[str, float]:
    """Per GPU, the measured memory-bound efficiency of its BF16 GEMMs (tools/perf/gemm.yaml
    ``by_gpu.<gpu>.bfloat16.eta_mem``)."""
    doc = yaml.safe_load(GEMM_FILE.read_text(encoding="utf-8")) or {}
    return {g: float(v["bfloat16"]["eta_mem"]) for g, v in (doc.get("by_gpu") or {}).items()
            if "bfloat16" in (v or {})}


def kernel_dtypes(model_name: str, precision: str) -> tuple[str, ...]:
    return ("w4a16_mxfp4",) if model_name.startswith("gpt-oss") else MOE_KERNEL_DTYPE.get(precision, ())


def rest_per_layer(ops: Path, max_batch: float) -> dict[tuple[Any, ...], list[float]]:
    prefix = {v: k for k, v in GPUS.items()}
    tables: dict[str, Any] = {}
    eta = memory_bound_eta()
    out: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for f in [*DEFAULT_FILES, DATA_DIR / "measured-gptoss.csv"]:
        for r in read_rows(f)[1]:
            if (r.skipped or r.offline or r.prefill_only or r.request_rate or not r.tpot_ms
                    or r.disagg is not None or r.speculative_tokens):
                continue
            assert r.model is not None and r.gpu is not None
            g, lay = r.gpu["id"], r.layout
            b = (r.concurrency or 1) / lay.dp
            cls = gpu_class(r.gpu)
            if g not in prefix or b > max_batch or g not in eta:
                continue
            if g not in tables:
                tables[g] = moe_table(ops / f"{prefix[g]}_moe_perf.csv.gz")
            sm = _step_model(r.model, r.gpu, lay, r.precision, r.backend, r.kv_precision, None)
            m, moe_ms, nbytes = r.model, 0.0, sm.dense_bytes + sm.kv_read_bytes(b, r.isl + r.osl / 2)
            if sm.p.is_moe:
                shape = (m["hidden_size"], m.get("moe_intermediate_size") or m["intermediate_size"],
                         m["experts_per_token"], m["num_experts"], sm.moe_tp, lay.ep)
                key = next(((d, shape) for d in kernel_dtypes(r.model_name, r.precision)
                            if (d, shape) in tables[g]), None)
                if key is None:
                    continue
                moe_ms = interp(tables[g][key], b * lay.dp) * sm.moe_layers
            else:
                nbytes += sm.expert_bytes
            rest = (r.tpot_ms - moe_ms - nbytes / (sm.bw_gbs * 1e9 * eta[g]) * 1e3
                    - sm.comm_ms(b, b * lay.dp))
            out[(cls, r.backend, r.model_name, r.precision, lay.tp, lay.ep)].append(
                rest / sm.layers * 1e3)
    return out


def bandwidth_shares(ops: Path) -> list[str]:
    cat = load_catalog()
    lines = []
    for prefix, name in GPUS.items():
        path = ops / f"{prefix}_moe_perf.csv.gz"
        if not path.exists():
            continue
        bw = float(cat.gpu(name)["bandwidth_gbs"])
        for (d, shape), v in sorted(moe_table(path).items()):
            h, i, k, e, tp, ep = shape
            if tp != 1 or ep != 1 or d not in BYTES:
                continue
            cells = [f"{t}: {min(t * k, e) * 3 * h * i * BYTES[d] / (v[t] * 1e-3) / 1e9 / bw:.2f}"
                     for t in (1, 4, 16, 64) if t in v]
            lines.append(f"{name:<30} {d:<18} {shape[:4]}  " + "  ".join(cells))
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-batch", type=float, default=8.0, help="requests per rank, at most")
    ap.add_argument("--ops", default=str(OPS_DIR))
    ap.add_argument("--bandwidth", action="store_true")
    a = ap.parse_args(argv)
    if a.bandwidth:
        print("\n".join(bandwidth_shares(Path(a.ops))))
        return
    print("class backend model precision tp ep | rows | rest per layer (us, median)")
    for key, v in sorted(rest_per_layer(Path(a.ops), a.max_batch).items()):
        print(" ".join(str(x) for x in key), f"| {len(v)} | {statistics.median(v):.1f}")


if __name__ == "__main__":
    main()
