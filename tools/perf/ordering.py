"""Physical ordering of GPUs the estimates must respect (a check, not a fit).

A GPU with more memory bandwidth and more FLOPS than another, in the same or a newer class,
must not come out slower on the same model and layout. The calibration can break this when a
class's constants are fitted on rows of other models or benchmark campaigns (see
docs/accuracy.md); ``violations`` counts where it does over a grid of dense-model layouts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.serving import estimate

# (faster, slower): the first has more bandwidth and FLOPS than the second.
PAIRS = (("B200", "H200 SXM"), ("H200 SXM", "H100 SXM"))
BACKENDS = ("vllm", "sglang", "trtllm")
DENSE_GRID = tuple((m, tp, c) for m in ("Llama-3.1-8B", "Qwen3-32B", "Llama-3.1-70B")
                   for tp in (1, 4) for c in (1, 16, 64))  # timings only: memory not checked
ISL, OSL, PRECISION = 1024, 256, "fp8"
# Inversions up to this share are within the model's noise, not calibration artefacts.
TOLERANCE = 0.03


def violations(pair: tuple[str, str], backends: Iterable[str] = BACKENDS,
               grid: Iterable[tuple[str, int, int]] = DENSE_GRID,
               calibration: dict[str, Any] | None = None,
               tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Configurations where ``pair[0]`` predicts a TPOT or TTFT more than ``tolerance`` above
    ``pair[1]``'s, beyond what its slower measured all-reduce explains.

    The tensor-parallel all-reduces are timed with each GPU's measured kernel latency
    (ops/*_custom_allreduce): B200's takes 6.9 us against H200's 4.4 us at 4 GPUs, which alone
    adds 0.15 ms (5 %) to Llama-3.1-8B's token at tp 4 and one request. That difference is
    measured hardware, so it is allowed; anything more is an artefact of the calibration.
    """
    cat = load_catalog()
    fast, slow = cat.gpu(pair[0]), cat.gpu(pair[1])
    out: dict[str, Any] = {"n": 0, "tpot_ms": [], "ttft_ms": []}
    for be in backends:
        for model, tp, c in grid:
            m = cat.model(model)
            a, b = (estimate(m, g, tp=tp, precision=PRECISION, isl=ISL, osl=OSL, concurrency=c,
                             backend=be, check_memory=False, calibration=calibration)
                    for g in (fast, slow))
            out["n"] += 1
            link = {"tpot_ms": max(0.0, _comm_ms(a, "decode") - _comm_ms(b, "decode")),
                    "ttft_ms": max(0.0, _comm_ms(a, "prefill") - _comm_ms(b, "prefill"))}
            for metric in ("tpot_ms", "ttft_ms"):
                if getattr(a, metric) > getattr(b, metric) * (1 + tolerance) + link[metric]:
                    out[metric].append((be, model, tp, c))
    return out


def _comm_ms(est: Any, phase: str) -> float:
    """The communication time (ms) of a decode step or of a prefill in ``est``'s steps."""
    for st in est.steps:
        if phase == "decode" and st.name == "decode_comm":
            return float(st.result)
        if phase == "prefill" and st.name == "prefill":
            return float(st.values.get("t_comm_ms", 0.0))
    raise ValueError(f"estimate has no {phase} communication step")
