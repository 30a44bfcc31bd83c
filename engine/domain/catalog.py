"""Load the sourced hardware and model catalog (facts/catalog/*.yaml) and look entries up by name.

Names match case-insensitively, ignoring spaces, dashes and underscores, and through each
entry's ``aliases`` (e.g. ``h200_sxm`` and ``H200`` → ``H200 SXM``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.common.yamlio import safe_load

CATALOG_DIR = PACKAGE_ROOT / "facts" / "catalog"


_SEPARATORS = re.compile(r"[\s\-_./]+")


@lru_cache(maxsize=4096)
def _normalise(name: str) -> str:
    return _SEPARATORS.sub("", name).lower()


def normalise_name(name: str) -> str:
    """Key used for name matching: lower case, without spaces, dashes, underscores or dots."""
    return _normalise(str(name))


class UnknownEntry(KeyError):
    """Raised when a catalog name does not resolve; carries close matches.

    Lookups that miss on purpose (a domain function probing which names match) are on the hot
    path, so the close matches (difflib) are computed only when the message or ``suggestions``
    is read, i.e. on the error path."""

    def __init__(self, kind: str, name: str, suggestions: list[str] | Callable[[], list[str]]):
        self.kind, self.name = kind, name
        self._suggest = suggestions
        super().__init__(kind, name)

    @cached_property
    def suggestions(self) -> list[str]:
        return list(self._suggest() if callable(self._suggest) else self._suggest)

    @property
    def message(self) -> str:
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        return f"unknown {self.kind} '{self.name}'{hint}"

    @property  # type: ignore[override]
    def args(self) -> tuple[str]:  # the message, as when it was passed to KeyError
        return (self.message,)

    @args.setter
    def args(self, value: tuple) -> None:  # BaseException.__init__ assigns it; the message is derived
        pass

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.message


@dataclass
class Table:
    """One catalog file: entries by id, with a name index that includes aliases."""

    kind: str
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    index: dict[str, str] = field(default_factory=dict)

    def add(self, entry: dict[str, Any]) -> None:
        self.entries[entry["id"]] = entry
        for name in [entry["id"], *entry.get("aliases", [])]:
            self.index.setdefault(normalise_name(name), entry["id"])

    def get(self, name: str) -> dict[str, Any]:
        key = normalise_name(name)
        if key in self.index:
            return self.entries[self.index[key]]
        raise UnknownEntry(self.kind, name, lambda: self.suggest(key))

    def suggest(self, key: str) -> list[str]:
        """Entry ids whose names are close to the normalised ``key`` (for error messages only)."""
        import difflib

        close = difflib.get_close_matches(key, list(self.index), n=3, cutoff=0.6)
        return sorted({self.index[c] for c in close})

    def __contains__(self, name: str) -> bool:
        return normalise_name(name) in self.index

    def __iter__(self):
        return iter(self.entries.values())


class Catalog:
    """All catalog tables, keyed by file stem (``gpus``, ``models``, ``cpus``, ...)."""

    def __init__(self, tables: dict[str, Table]):
        self.tables = tables

    def table(self, kind: str) -> Table:
        table = self.tables.get(kind)  # on the hot path: no throw-away Table per lookup
        if table is None:
            table = self.tables[kind] = Table(kind)
        return table

    def gpu(self, name: str) -> dict[str, Any]:
        return self.table("gpus").get(name)

    def model(self, name: str) -> dict[str, Any]:
        return self.table("models").get(name)

    def files(self) -> list[Path]:
        return sorted(CATALOG_DIR.glob("*.yaml"))


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Read one catalog file: a YAML list of mappings, each with an ``id``."""
    data = safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(data, list):
        raise ValueError(f"{path}: a catalog file must be a YAML list of entries")
    return data


def build_catalog(paths: Iterable[Path]) -> Catalog:
    tables: dict[str, Table] = {}
    for path in sorted(paths):
        table = tables.setdefault(path.stem, Table(path.stem))
        for entry in read_entries(path):
            table.add(entry)
    return Catalog(tables)


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The built-in catalog (cached: it is read-only data), from the cache shared between processes
    (engine/common/rulecache.py) when it holds these exact catalog files."""
    from servewise.engine.common import rulecache

    paths = sorted(CATALOG_DIR.glob("*.yaml"))
    key = None
    if rulecache.cache_dir() is not None:
        try:
            key = rulecache.content_key("catalog", rulecache.engine_sources()
                                        + [p.name.encode() + b"\0" + p.read_bytes() for p in paths])
        except OSError:
            key = None
    if key is not None:
        cached = rulecache.read(key, "catalog")
        if isinstance(cached, Catalog):
            return cached
    catalog = build_catalog(paths)
    if key is not None:
        rulecache.write(key, catalog, "catalog")
    return catalog
