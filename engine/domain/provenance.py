"""Which catalog entries a domain function reads, recorded structurally with each conclusion.

Each declared function, when an expression calls it, adds the catalog entries named by its
arguments to the conclusion's details as ``{"catalog": ["gpus/H100 SXM", "models/…", …]}``,
so `explain` names the entries a performance or price step used without parsing formula text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from servewise.engine.domain.catalog import UnknownEntry

_CURRENT: Callable[[], Any] | None = None


def _context() -> Any:
    """The run context (engine/domain/functions.py imports this module, so it is looked up once, late)."""
    global _CURRENT
    if _CURRENT is None:
        from servewise.engine.domain.functions import current

        _CURRENT = current
    return _CURRENT()


def _refs(reads: tuple[tuple[str | None, int], ...], args: tuple) -> list[str] | tuple[str, ...]:
    """The catalog entries ``args`` name, remembered per run (a pure function of the arguments)."""
    ctx = _context()
    key = ("refs", reads, args, tuple(map(type, args)))
    try:
        hit = ctx.cache.get(key)
    except TypeError:  # an unhashable argument
        return _find_refs(reads, args, ctx)
    if hit is None:
        hit = ctx.cache[key] = tuple(_find_refs(reads, args, ctx))
    return hit


def _find_refs(reads: tuple[tuple[str | None, int], ...], args: tuple, ctx: Any) -> list[str]:
    out = []
    for table, pos in reads:
        if pos >= len(args) or not isinstance(args[pos], str):
            continue
        kind = args[0] if table is None else table
        tables = ctx.catalog.tables
        if not isinstance(kind, str) or kind not in tables:
            continue
        if kind == "models" and args[pos] in ctx.custom_models:
            continue  # a custom model comes from the workload, not the catalog
        try:
            out.append(f"{kind}/{tables[kind].get(args[pos])['id']}")
        except UnknownEntry:
            continue
    return out


def note_reads(refs: list[str] | tuple[str, ...]) -> None:
    """Add catalog entry refs to the conclusion in progress (one ``catalog`` detail per conclusion)."""
    if not refs:
        return
    details = _context().details
    if details is None:  # nobody is collecting (see RunContext.details)
        return
    for i, d in enumerate(details):
        if "catalog" in d and len(d) == 1:
            new = [ref for ref in dict.fromkeys(refs) if ref not in d["catalog"]]
            if new:  # a new record: details are never changed once noted (conclusions keep them)
                details[i] = {"catalog": d["catalog"] + new}
            return
    details.append({"catalog": list(dict.fromkeys(refs))})


def _recording(fn: Callable[..., Any], reads: tuple[tuple[str | None, int], ...]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        value = fn(*args)
        note_reads(_refs(reads, args))
        return value

    wrapper.records_reads = True  # type: ignore[attr-defined]
    return wrapper


def declare_catalog_reads(functions: dict[str, Callable[..., Any]],
                          reads_by_name: Mapping[str, tuple[tuple[str | None, int], ...]]) -> None:
    """Wrap the registered domain functions that read catalog entries named by their arguments
    (``reads`` of their ``@domain_function`` decorators: (table, argument position) pairs, a table
    of None meaning the table named by argument 0, as ``catalog(kind, entry, field)``)."""
    for name, reads in reads_by_name.items():
        if name in functions and not getattr(functions[name], "records_reads", False):
            functions[name] = _recording(functions[name], reads)
