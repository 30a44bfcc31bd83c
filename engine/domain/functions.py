"""Named domain functions of the expression language.

Rule formulas call these by name (e.g. ``weights_gib(model.id, candidate.precision)``). They are
pure functions of their arguments and of the run context (catalog, custom models, inputs the user
gave). A function may attach *details* (e.g. the performance model's formula steps) to the
conclusion being computed; the engine records them in the explanation.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.domain.catalog import Catalog, UnknownEntry, load_catalog


@dataclass
class RunContext:
    catalog: Catalog
    custom_models: dict[str, dict[str, Any]] = field(default_factory=dict)
    provided: frozenset[str] = frozenset()
    # the explanation details of the conclusion being computed; None while nobody collects them
    # (a proposal's expressions): domain functions then skip recording
    details: list[dict[str, Any]] | None = field(default_factory=list)
    cache: dict[tuple, Any] = field(default_factory=dict)

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
    details = current().details
    if details is not None:  # None: nobody is collecting (see RunContext.details)
        details.append(detail)


FUNCTIONS: dict[str, Callable[..., Any]] = {}
_WRAPPED = False  # set once the registry's size checks, memos and catalog-read records are applied


Reads = tuple[tuple[str | None, int], ...]


@dataclass(frozen=True)
class FunctionMeta:
    """What the engine needs to know of a domain function beyond its code (one home: its decorator):
    ``memoise`` — remembered per run (False where running it is cheaper than looking it up);
    ``reads`` — the catalog entries it reads, as (table, argument position) pairs (table None: the
    table named by argument 0), recorded with each conclusion (engine/domain/provenance.py);
    ``size_check`` — run on the arguments before the call, for a function whose result may be much
    larger than its arguments (engine/common/limits.py)."""

    memoise: bool = True
    reads: Reads = ()
    size_check: Callable[..., None] | None = None


META: dict[str, FunctionMeta] = {}


def domain_function(fn: Callable[..., Any] | None = None, *, memoise: bool = True, reads: Reads = (),
                    size_check: Callable[..., None] | None = None) -> Any:
    """Register a function rule expressions may call: ``@domain_function`` or, with what the engine
    needs to know of it, ``@domain_function(memoise=False, reads=(("gpus", 0),))``."""
    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        FUNCTIONS[f.__name__] = f
        META[f.__name__] = FunctionMeta(memoise, tuple(reads), size_check)
        if _WRAPPED:  # a fn_* module imported before this one finished (it imports us): wrap it as the rest
            _wrap_functions()
        return f

    return register(fn) if fn is not None else register


@domain_function(memoise=False, reads=((None, 1),))
def catalog(kind: str, entry: str, field_name: str) -> Any:
    """A field of a catalog entry, e.g. ``catalog('gpus', candidate.gpu, 'tdp_w')``."""
    try:
        return _table(kind).get(entry).get(field_name)
    except UnknownEntry:
        return None


def _table(kind: str):
    """A catalog table by name; a path or an unknown name is an error (never a file lookup)."""
    tables = current().catalog.tables
    if not isinstance(kind, str) or kind not in tables:
        raise ValueError(f"unknown catalog table {kind!r} (known: {', '.join(sorted(tables))})")
    return tables[kind]


@domain_function(reads=(("policies", 0),))
def policy(name: str) -> Any:
    """A servewise assumption by name, e.g. ``policy('hours_per_month')``: the ``value`` of its
    entry in facts/catalog/policies.yaml (each with its unit, reason and source); one home for a
    number rules and Python would otherwise each write."""
    try:
        return _table("policies").get(name)["value"]
    except UnknownEntry:
        raise ValueError(f"unknown policy {name!r} (facts/catalog/policies.yaml)") from None


@domain_function
def catalog_ids(kind: str) -> list[str]:
    """All entry ids of a catalog table, in file order."""
    return [e["id"] for e in _table(kind)]


@domain_function(memoise=False)
def provided(key: str) -> bool:
    """True when the user gave this input (it was not defaulted)."""
    return key in current().provided


@domain_function(memoise=False)
def contains(items: Any, value: Any) -> bool:
    return items is not None and value in items


@domain_function(memoise=False)
def lower(value: Any) -> str:
    return str(value).lower()


@domain_function(memoise=False)
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
    from servewise.engine.domain import perf  # imported lazily: the perf model is optional at rule-load time

    return perf


def _estimate(model: str, gpu: str, tp: int, precision: str, isl: int, osl: int, concurrency: int):
    """The performance model's estimate, memoised per run (pure function of its arguments)."""
    ctx = current()
    key = ("estimate", model, gpu, int(tp), str(precision), int(isl), int(osl), max(1, int(concurrency)))
    if key not in ctx.cache:
        ctx.cache[key] = _perf().estimate_record(  # steps made only where a plan shows them
            ctx.model(model), ctx.catalog.gpu(gpu), tp=int(tp), precision=str(precision),
            isl=int(isl), osl=int(osl), concurrency=max(1, int(concurrency)))
    return ctx.cache[key]


@domain_function(reads=(("models", 0),))
def weights_gib(model: str, precision: str) -> float:
    """Weight memory of a model at a precision (GiB), from the performance model."""
    return float(_perf().weights_gib(current().model(model), str(precision)))


@domain_function(reads=(("models", 0),))
def kv_kib_per_token(model: str, kv_precision: str) -> float:
    """KV-cache bytes per token (KiB) from the model architecture."""
    return float(_perf().kv_bytes_per_token(current().model(model), str(kv_precision))) / 1024


@domain_function(reads=(("models", 0), ("gpus", 1)))
def estimate(model: str, gpu: str, tp: int, precision: str, isl: int, osl: int,
             concurrency: int, metric: str) -> Any:
    """One metric of the performance estimate (``ttft_ms``, ``tpot_ms``, ``output_tokens_per_s``,
    ``fits``, ``per_gpu_gib``, ``ttft_ms_hi``, ``tpot_ms_hi``...); records the formula steps."""
    data = _estimate(model, gpu, tp, precision, isl, osl, concurrency)
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


@domain_function(reads=(("models", 0), ("gpus", 1)))
def max_concurrency(model: str, gpu: str, tp: int, precision: str, isl: int, osl: int,
                    ttft_ms: float | None, tpot_ms: float | None) -> int:
    """Largest number of requests in flight per replica that meets the SLA and fits in memory."""
    ctx = current()
    key = ("max_concurrency", model, gpu, int(tp), str(precision), int(isl), int(osl), ttft_ms, tpot_ms)
    if key not in ctx.cache:
        ctx.cache[key] = _perf().max_concurrency(
            ctx.model(model), ctx.catalog.gpu(gpu), tp=int(tp), precision=str(precision),
            isl=int(isl), osl=int(osl), ttft_ms=ttft_ms, tpot_ms=tpot_ms,
        )
    n = ctx.cache[key]
    note_detail({"function": "max_concurrency", "result": n,
                 "formula": "largest C with TTFT_hi(C) ≤ SLA, TPOT_hi(C) ≤ SLA and KV(C) fitting"})
    return int(n)


def midpoint(entry: dict[str, Any]) -> float | None:
    """Midpoint (CNY) of a price entry's min/max range; one bound alone when the other is missing."""
    lo, hi = entry.get("min_cny"), entry.get("max_cny")
    if lo is None and hi is None:
        return None
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    return (float(lo) + float(hi)) / 2


def _price_gpu(entry: dict[str, Any]) -> str | None:
    """The catalog GPU id a price entry is about, if any."""
    name = entry.get("gpu") or entry.get("refers_to")
    if not name:
        return None
    try:
        return current().catalog.gpu(name)["id"]
    except UnknownEntry:
        return None


def _gpu_count(entry: dict[str, Any]) -> float | None:
    count = entry.get("gpu_count")
    if isinstance(count, list) and count:
        return sum(count) / len(count)
    return float(count) if count else None


@domain_function(reads=(("gpus", 0),))
def gpu_installed_cny(gpu: str) -> float | None:
    """Purchase cost per installed GPU (CNY): the mean per-GPU share of the whole-server prices
    the sources give for this GPU; without one, the card price ÷ 0.75 (GPUs are 70-80% of server
    cost, G-COST-021). None when no price is sourced. Used prices are recorded as details."""
    key = ("gpu_installed_cny", gpu)
    ctx = current()
    if key in ctx.cache:
        value, used = ctx.cache[key]
    else:
        servers, cards = [], []
        for entry in ctx.catalog.table("prices"):
            if _price_gpu(entry) != gpu or midpoint(entry) is None:
                continue
            kind, unit = entry.get("kind"), str(entry.get("unit", ""))
            if kind == "server" and _gpu_count(entry) and "used" not in unit:
                servers.append((entry["id"], midpoint(entry) / _gpu_count(entry)))
            elif kind == "gpu-card":
                cards.append((entry["id"], midpoint(entry) / 0.75))
        used = servers or cards
        value = sum(v for _, v in used) / len(used) if used else None
        ctx.cache[key] = (value, used)
    if value is not None:
        note_detail({"function": "gpu_installed_cny", "gpu": gpu, "result": round(value),
                     "from": [{"price": pid, "cny_per_gpu": round(v)} for pid, v in used],
                     "formula": "mean(server price ÷ GPUs per server), else card price ÷ 0.75"})
    return value


@domain_function(reads=(("gpus", 0),))
def rent_cny_per_gpu_hour(gpu: str) -> float | None:
    """Cloud rental rate of one GPU (CNY per hour, midpoint of the sourced range), or None."""
    for entry in current().catalog.table("prices"):
        if entry.get("kind") == "rental" and _price_gpu(entry) == gpu:
            return midpoint(entry)
    return None


@domain_function(reads=(("gpus", 0),))
def devices_per_card(gpu: str) -> int:
    """Accelerator devices on one card as bought (gpus.yaml ``devices_per_card``: the Atlas 300I Duo
    carries two 310P3 NPUs); 1 for every other GPU and for names the catalog does not know."""
    try:
        return int(_table("gpus").get(gpu).get("devices_per_card") or 1)
    except UnknownEntry:
        return 1


@domain_function(reads=(("gpus", 0),))
def cards_for(gpu: str, devices: int) -> int:
    """Cards to buy for ``devices`` accelerator devices of this GPU (whole cards)."""
    per = devices_per_card(gpu)
    return -(-int(devices) // per)


DDR5_RDIMM_SIZES_GB = (16, 24, 32, 48, 64, 96, 128, 256)  # JEDEC DDR5 RDIMM capacities on sale


@domain_function(memoise=False)
def balanced_dimm_gb(need_gb: float, channels: int) -> int:
    """Smallest standard DDR5 RDIMM size that, with one DIMM per channel, reaches ``need_gb``."""
    for size in DDR5_RDIMM_SIZES_GB:
        if size * channels >= need_gb:
            return size
    return DDR5_RDIMM_SIZES_GB[-1]


@domain_function(memoise=False)
def memory_channels_populated(need_gb: float, channels: int, link_gbs: float | None,
                              channel_gbs: float | None) -> int:
    """Memory channels to fill with one equal DIMM each: half of them (a balanced population on every
    platform) when half carry the GPUs' host-link traffic with the policy's headroom
    (``host_memory_link_headroom`` × ``link_gbs`` ≤ half × ``channel_gbs``) and hold ``need_gb`` in
    the largest DIMM size, else all of them (G-RAM-007, corrected: bandwidth scales with the channels
    filled, and a GPU server's host traffic is what must flow through them)."""
    channels = int(channels)
    half = channels // 2
    if channels < 8 or half * DDR5_RDIMM_SIZES_GB[-1] < need_gb or not link_gbs or not channel_gbs:
        return channels
    need = policy("host_memory_link_headroom") * float(link_gbs)
    return half if need <= half * float(channel_gbs) else channels


NVME_DRIVE_TB = (1.92, 3.84, 7.68, 15.36, 30.72)  # common enterprise NVMe capacities


@domain_function(memoise=False)
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
            "max_num_seqs": int(max_seqs), "gpu_memory_utilization": policy("vram_usable_fraction"),
            "max_model_len": int(max_len), "quantization": _QUANT.get(str(precision)),
            "dtype": "bfloat16"}


@domain_function
def settings_trtllm(tp: int, max_batch: int, precision: str, max_len: int) -> dict[str, Any]:
    """TensorRT-LLM serving settings (trtllm-serve / engine build)."""
    return {"inflight_batching": True, "tp_size": int(tp), "max_batch_size": int(max_batch),
            "kv_cache_free_gpu_memory_fraction": policy("vram_usable_fraction"), "max_seq_len": int(max_len),
            "quantization": _QUANT.get(str(precision))}


@domain_function(memoise=False)
def cooling_rank(kind: str) -> int:
    """Order of cooling capability: air < hybrid < liquid."""
    return {"air": 0, "hybrid": 1, "liquid": 2}.get(str(kind), 0)


def _load_function_modules() -> None:
    """Import every ``engine/fn_*.py`` module: each adds domain functions with @domain_function."""
    import importlib
    import pkgutil
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if info.name.startswith("fn_"):
            importlib.import_module(f"{__package__}.{info.name}")


_load_function_modules()


def _size_checked(fn: Callable[..., Any], check: Callable[..., None]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        check(*args)
        return fn(*args)

    return wrapper


def _check_sizes() -> None:
    for name, meta in META.items():
        check = meta.size_check
        if check is not None and not getattr(FUNCTIONS[name], "size_checked", False):
            FUNCTIONS[name] = _size_checked(FUNCTIONS[name], check)
            FUNCTIONS[name].size_checked = True  # type: ignore[attr-defined]




# Cheaper to run than to look up: never remembered (``memoise=False`` in their decorators).
NOT_MEMOISED = frozenset(name for name, meta in META.items() if not meta.memoise)
SCALARS = (type(None), bool, int, float, str)  # results safe to remember and share (immutable)


def memoised(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` remembered per run (in ``RunContext.cache``): domain functions are pure functions of
    their arguments and the run context, so the same arguments (with the same types) give the
    same result. The details a call attaches are replayed on every later call, so each conclusion
    records what it would have recorded. Only scalar results are kept (a list or record is
    computed again, so no caller can change a remembered value); calls with an unhashable
    argument, and calls that raise, are not remembered."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        ctx = current()
        key = ("memo", name, args, tuple(map(type, args)))
        try:
            hit = ctx.cache.get(key)
        except TypeError:  # an unhashable argument (a list)
            return fn(*args)
        if hit is not None:
            value, details = hit
            if details and ctx.details is not None:
                ctx.details.extend(details)  # details are read-only records (copied when kept)
            return value
        details_now = ctx.details
        if details_now is None:  # nobody collects now, but a later call may replay them
            ctx.details = details_now = []
            try:
                value = fn(*args)
            finally:
                ctx.details = None
            if type(value) in SCALARS:
                ctx.cache[key] = (value, details_now)
            return value
        mark = len(details_now)
        value = fn(*args)
        if type(value) in SCALARS:
            ctx.cache[key] = (value, details_now[mark:] if ctx.details is details_now else [])
        return value

    wrapper.memoised = True  # type: ignore[attr-defined]
    return wrapper


def _memoise_functions() -> None:
    for name, fn in list(FUNCTIONS.items()):
        if META[name].memoise and not getattr(fn, "memoised", False):
            FUNCTIONS[name] = memoised(name, fn)




def _declare_catalog_reads() -> None:
    from servewise.engine.domain.provenance import declare_catalog_reads

    declare_catalog_reads(FUNCTIONS, {name: meta.reads for name, meta in META.items() if meta.reads})


def _wrap_functions() -> None:
    """Size checks, then memos, then catalog-read records, on every registered function that lacks
    them (each pass skips what it wrapped before). Run once the fn_* modules are loaded, and again
    for a function registered later: when a fn_* module is the first one imported, this module
    loads the others while that one is still half-imported, and its functions register after."""
    global _WRAPPED
    _check_sizes()
    _memoise_functions()
    _declare_catalog_reads()
    _WRAPPED = True


_wrap_functions()
