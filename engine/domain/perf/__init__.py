"""Calibrated performance and memory model of LLM serving (pure Python, deterministic).

Public API::

    estimate(model, gpu, *, tp, pp, ep, precision, isl, osl, concurrency, backend, ...) -> Estimate
    max_concurrency(model, gpu, *, tp, precision, isl, osl, ttft_ms, tpot_ms, ...) -> int
    memory(model, gpu, *, tp, precision, tokens_in_flight, ...) -> MemoryEstimate
    weights_gib(model, precision) -> float
    kv_bytes_per_token(model, kv_precision) -> float

``model`` and ``gpu`` are catalog entries (dicts). Calibration constants are read from
``facts/calibration.yaml`` (refit with ``python -m tools.perf.fit``).
"""

from servewise.engine.domain.perf.calibration import gpu_class, profile
from servewise.engine.domain.perf.memory import Layout, kv_bytes_per_token, memory, weights_gib
from servewise.engine.domain.perf.precision import PRECISIONS, compute_rate, default_kv_precision
from servewise.engine.domain.perf.serving import (
    decode_floor_ms,
    estimate,
    estimate_embedding,
    estimate_record,
    max_concurrency,
    prefill_floor_ms,
    replica_setup,
)
from servewise.engine.domain.perf.types import Estimate, MemoryEstimate, Step

__all__ = [
    "PRECISIONS", "Estimate", "Layout", "MemoryEstimate", "Step", "compute_rate",
    "default_kv_precision", "estimate", "estimate_embedding", "estimate_record", "gpu_class",
    "kv_bytes_per_token", "decode_floor_ms", "max_concurrency", "prefill_floor_ms", "replica_setup",
    "memory", "profile", "weights_gib",
]
