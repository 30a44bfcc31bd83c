"""The serving model's routed-expert prefill time against vLLM's measured fused-MoE kernels.

    python -m tools.perf.moe_kernels [--gpu B200] [--backend vllm] [--ops ../shared/data/ops]

For the MoE models and layouts of the shipped vLLM rows on a GPU with kernel data, per MoE
layer and prefill chunk of 2,048 / 8,192 tokens: the fastest measured kernel of
``../shared/data/ops/<gpu>_moe_perf.csv.gz`` (balanced routing; log-log interpolation in the
token count; the dtype the precision runs: fp8 → ``fp8_block``, fp4 → ``nvfp4``, int4 →
``int4_wo``), the model's ``moe_flops / (peak x eta_flops x eta_lowp x eta_moe)`` with the
shipped calibration, their ratio and the kernel's achieved share of the precision's peak.
Analysis only (docs/accuracy-attempts.md, session 23).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.precision import compute_rate
from tools.perf.kernels import GPUS, OPS_DIR, moe_table

KERNEL_DTYPES = {"fp8": ("fp8_block", "fp8"), "fp4": ("nvfp4",), "int4": ("int4_wo",),
                 "bf16": ("bfloat16",)}
CASES = (("MiniMax-M2.5", "fp8", 2, 1), ("MiniMax-M2.5", "fp8", 4, 1),
         ("MiniMax-M2.5", "fp4", 1, 1), ("MiniMax-M2.5", "fp4", 2, 1),
         ("MiniMax-M2.5", "fp4", 4, 1), ("MiniMax-M2.5", "fp4", 8, 1),
         ("Kimi-K2.5", "int4", 8, 1), ("Kimi-K2.5", "fp4", 4, 1), ("Kimi-K2.5", "fp4", 8, 1),
         ("Kimi-K2.5", "fp4", 4, 4))


def load_table(ops: Path, prefix: str) -> dict[tuple[Any, ...], dict[int, float]]:
    """kernels.moe_table of one GPU keyed flat: (dtype, hidden, inter, top-k, E, MoE TP, EP)."""
    return {(d, *shape): v for (d, shape), v in moe_table(ops / f"{prefix}_moe_perf.csv.gz").items()}


def interp(d: dict[int, float], x: float) -> float:
    """Latency at ``x`` tokens: log-log between measured counts, linear beyond the last."""
    xs = sorted(d)
    if x <= xs[0]:
        return d[xs[0]]
    for a, b in zip(xs, xs[1:], strict=False):
        if a <= x <= b:
            f = (math.log(x) - math.log(a)) / (math.log(b) - math.log(a))
            return math.exp(math.log(d[a]) * (1 - f) + math.log(d[b]) * f)
    return d[xs[-1]] * x / xs[-1]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="B200")
    ap.add_argument("--backend", default="vllm")
    ap.add_argument("--ops", default=str(OPS_DIR))
    a = ap.parse_args(argv)
    cat = load_catalog()
    gpu = cat.gpu(a.gpu)
    prefix = next(p for p, n in GPUS.items() if n == gpu["id"])
    prof = profile(gpu, a.backend)
    tab = load_table(Path(a.ops), prefix)
    print("model precision tp ep tokens | kernel ms/layer (dtype) | model ms/layer | "
          "model/kernel | kernel TFLOPS (share of peak)")
    for name, prec, tp, ep in CASES:
        m = cat.model(name)
        tflops, _ = compute_rate(gpu, prec)
        t16, _ = compute_rate(gpu, "bf16")
        lowp = prof.eta_lowp if tflops > t16 else 1.0
        moe_tp = max(1, tp // ep)
        for tokens in (2048, 8192):
            key = next((k for dt in KERNEL_DTYPES[prec]
                        if (k := (dt, m["hidden_size"], m["intermediate_size"],
                                  m["experts_per_token"], m["num_experts"], moe_tp, ep)) in tab),
                       None)
            if key is None:
                print(name, prec, tp, ep, tokens, "| no kernel table")
                continue
            kern = interp(tab[key], tokens)
            flops = (tokens * m["experts_per_token"] * 3 * m["hidden_size"]
                     * m["intermediate_size"] * 2 / (moe_tp * ep))
            model = flops / (tflops * 1e12 * prof.eta_flops * lowp * prof.eta_moe) * 1e3
            print(name, prec, tp, ep, tokens, "|", f"{kern:.3f} ({key[0]})", "|",
                  f"{model:.3f}", "|", f"{model / kern:.2f}", "|",
                  f"{flops / kern / 1e9:.0f} ({flops / kern / 1e9 / tflops:.2f})")


if __name__ == "__main__":
    main()
