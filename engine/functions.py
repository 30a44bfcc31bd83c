"""Named domain functions of the expression language.

Rule formulas call these by name (e.g. ``weights_gib(model.id, candidate.precision)``). They are
pure functions of their arguments and of the run context (catalog, custom models, inputs the user
gave). A function may attach *details* (e.g. the performance model's formula steps) to the
conclusion being computed; the engine records them in the explanation.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog, UnknownEntry, load_catalog


@dataclass
class RunContext:
    catalog: Catalog
    custom_models: dict[str, dict[str, Any]] = field(default_factory=dict)
    provided: frozenset[str] = frozenset()
    details: list[dict[str, Any]] = field(default_factory=list)

    def model(self, name: str) -> dict[str, Any]:
        if name in self.custom_models:
            return self.custom_models[name]
        return self.catalog.model(name)


_CTX: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("servewise_ctx", default=None)


def current() -> RunContext:
    ctx = _CTX.get()
    if ctx is None:
        ctx = RunContext(load_catalog())
        _CTX.set(ctx)
    return ctx


def use_context(ctx: RunContext) -> contextvars.Token:
    return _CTX.set(ctx)


def reset_context(token: contextvars.Token) -> None:
    _CTX.reset(token)


def note_detail(detail: dict[str, Any]) -> None:
    """Attach an explanation detail (formula, values, result) to the conclusion in progress."""
    current().details.append(detail)


FUNCTIONS: dict[str, Callable[..., Any]] = {}


def domain_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    FUNCTIONS[fn.__name__] = fn
    return fn


@domain_function
def catalog(kind: str, entry: str, field_name: str) -> Any:
    """A field of a catalog entry, e.g. ``catalog('gpus', candidate.gpu, 'tdp_w')``."""
    try:
        return current().catalog.table(kind).get(entry).get(field_name)
    except UnknownEntry:
        return None


@domain_function
def catalog_ids(kind: str) -> list[str]:
    """All entry ids of a catalog table, in file order."""
    return [e["id"] for e in current().catalog.table(kind)]


@domain_function
def provided(key: str) -> bool:
    """True when the user gave this input (it was not defaulted)."""
    return key in current().provided


@domain_function
def contains(items: Any, value: Any) -> bool:
    return items is not None and value in items


@domain_function
def lower(value: Any) -> str:
    return str(value).lower()


@domain_function
def text(value: Any) -> str:
    """A value as text; whole numbers without a decimal point."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


@domain_function
def matches_any(gpu: str, names: Any) -> bool:
    """True when a catalog GPU id is one of ``names`` (catalog names or aliases)."""
    table = current().catalog.table("gpus")
    for name in names or []:
        try:
            if table.get(name)["id"] == gpu:
                return True
        except UnknownEntry:
            continue
    return False


def _perf():
    from . import perf  # imported lazily: the perf model is optional at rule-load time

    return perf


def _estimate(model: str, gpu: str, tp: int, precision: str, isl: int, osl: int, concurrency: int):
    ctx = current()
    return _perf().estimate(
        ctx.model(model), ctx.catalog.gpu(gpu), tp=int(tp), precision=str(precision),
        isl=int(isl), osl=int(osl), concurrency=max(1, int(concurrency)),
    )


@domain_function
def weights_gib(model: str, precision: str) -> float:
    """Weight memory of a model at a precision (GiB), from the performance model."""
    return float(_perf().weights_gib(current().model(model), str(precision)))


@domain_function
def kv_kib_per_token(model: str, kv_precision: str) -> float:
    """KV-cache bytes per token (KiB) from the model architecture."""
    return float(_perf().kv_bytes_per_token(current().model(model), str(kv_precision))) / 1024


@domain_function
def estimate(model: str, gpu: str, tp: int, precision: str, isl: int, osl: int,
             concurrency: int, metric: str) -> Any:
    """One metric of the performance estimate (``ttft_ms``, ``tpot_ms``, ``output_tokens_per_s``,
    ``fits``, ``per_gpu_gib``, ``ttft_ms_hi``, ``tpot_ms_hi``...); records the formula steps."""
    est = _estimate(model, gpu, tp, precision, isl, osl, concurrency)
    data = est.to_dict()
    if metric in data:
        value = data[metric]
    elif metric in data.get("memory", {}):
        value = data["memory"][metric]
    elif metric.endswith("_hi") or metric.endswith("_lo"):
        band = data.get("band", {}).get(metric[:-3])
        value = None if not band else band[1 if metric.endswith("_hi") else 0]
    else:
        raise ValueError(f"unknown estimate metric '{metric}'")
    note_detail({"function": "estimate", "metric": metric, "steps": data.get("steps", []),
                 "calibration": data.get("calibration")})
    return value


@domain_function
def max_concurrency(model: str, gpu: str, tp: int, precision: str, isl: int, osl: int,
                    ttft_ms: float | None, tpot_ms: float | None) -> int:
    """Largest number of requests in flight per replica that meets the SLA and fits in memory."""
    ctx = current()
    n = _perf().max_concurrency(
        ctx.model(model), ctx.catalog.gpu(gpu), tp=int(tp), precision=str(precision),
        isl=int(isl), osl=int(osl), ttft_ms=ttft_ms, tpot_ms=tpot_ms,
    )
    note_detail({"function": "max_concurrency", "result": n,
                 "formula": "largest C with TTFT_hi(C) ≤ SLA, TPOT_hi(C) ≤ SLA and KV(C) fitting"})
    return int(n)


def _price_entries(item: str, units: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for entry in current().catalog.table("prices"):
        target = entry.get("item") or entry.get("gpu") or entry.get("server")
        if target != item:
            continue
        unit = str(entry.get("unit", "")).lower().replace(" ", "_")
        if any(u in unit for u in units):
            out.append(entry)
    out.sort(key=lambda e: (not e.get("use_for_cost", False), str(e.get("id"))))
    return out


def _midpoint(entry: dict[str, Any]) -> float | None:
    lo = entry.get("min_cny", entry.get("low_cny"))
    hi = entry.get("max_cny", entry.get("high_cny"))
    if lo is None and hi is None:
        return None
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    return (float(lo) + float(hi)) / 2


@domain_function
def gpu_price_cny(gpu: str) -> float | None:
    """Purchase price of one GPU card (CNY, midpoint of the sourced range), or None if unsourced."""
    for entry in _price_entries(gpu, ("card", "gpu")):
        value = _midpoint(entry)
        if value is not None:
            note_detail({"function": "gpu_price_cny", "price": entry.get("id"),
                         "source": entry.get("sources", [{}])[0].get("ref")})
            return value
    return None


@domain_function
def rent_cny_per_gpu_hour(gpu: str) -> float | None:
    """Cloud rental rate of one GPU (CNY per hour, midpoint), or None if unsourced."""
    for entry in _price_entries(gpu, ("hour",)):
        value = _midpoint(entry)
        if value is not None:
            return value
    return None


DDR5_RDIMM_SIZES_GB = (16, 24, 32, 48, 64, 96, 128, 256)  # JEDEC DDR5 RDIMM capacities on sale


@domain_function
def balanced_dimm_gb(need_gb: float, channels: int) -> int:
    """Smallest standard DDR5 RDIMM size that, with one DIMM per channel, reaches ``need_gb``."""
    for size in DDR5_RDIMM_SIZES_GB:
        if size * channels >= need_gb:
            return size
    return DDR5_RDIMM_SIZES_GB[-1]


NVME_DRIVE_TB = (1.92, 3.84, 7.68, 15.36, 30.72)  # common enterprise NVMe capacities


@domain_function
def nvme_drive_tb(usable_tb: float, drives: int = 4) -> float:
    """Smallest common NVMe drive size whose RAID 10 of ``drives`` reaches ``usable_tb``."""
    for size in NVME_DRIVE_TB:
        if size * drives / 2 >= usable_tb:
            return size
    return NVME_DRIVE_TB[-1]


_QUANT = {"bf16": None, "fp16": None, "fp8": "fp8", "int8": "w8a8 (smoothquant)", "int4": "awq",
          "fp4": "nvfp4"}


@domain_function
def settings_vllm(tp: int, max_seqs: int, precision: str, max_len: int) -> dict[str, Any]:
    """vLLM serving settings (flags of `vllm serve`)."""
    return {"continuous_batching": True, "tensor_parallel_size": int(tp),
            "max_num_seqs": int(max_seqs), "gpu_memory_utilization": 0.9,
            "max_model_len": int(max_len), "quantization": _QUANT.get(str(precision)),
            "dtype": "bfloat16"}


@domain_function
def settings_trtllm(tp: int, max_batch: int, precision: str, max_len: int) -> dict[str, Any]:
    """TensorRT-LLM serving settings (trtllm-serve / engine build)."""
    return {"inflight_batching": True, "tp_size": int(tp), "max_batch_size": int(max_batch),
            "kv_cache_free_gpu_memory_fraction": 0.9, "max_seq_len": int(max_len),
            "quantization": _QUANT.get(str(precision))}


@domain_function
def cooling_rank(kind: str) -> int:
    """Order of cooling capability: air < hybrid < liquid."""
    return {"air": 0, "hybrid": 1, "liquid": 2}.get(str(kind), 0)
