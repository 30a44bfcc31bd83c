"""Load the sourced hardware and model catalog (facts/catalog/*.yaml) and look entries up by name.

Names match case-insensitively, ignoring spaces, dashes and underscores, and through each
entry's ``aliases`` (e.g. ``h200_sxm`` and ``H200`` → ``H200 SXM``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .yamlio import safe_load

CATALOG_DIR = Path(__file__).resolve().parent.parent / "facts" / "catalog"


def normalise_name(name: str) -> str:
    """Key used for name matching: lower case, without spaces, dashes, underscores or dots."""
    return re.sub(r"[\s\-_./]+", "", str(name)).lower()


class UnknownEntry(KeyError):
    """Raised when a catalog name does not resolve; carries close matches."""

    def __init__(self, kind: str, name: str, suggestions: list[str]):
        self.kind, self.name, self.suggestions = kind, name, suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} '{name}'{hint}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


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
        import difflib

        close = difflib.get_close_matches(key, list(self.index), n=3, cutoff=0.6)
        raise UnknownEntry(self.kind, name, sorted({self.index[c] for c in close}))

    def __contains__(self, name: str) -> bool:
        return normalise_name(name) in self.index

    def __iter__(self):
        return iter(self.entries.values())


class Catalog:
    """All catalog tables, keyed by file stem (``gpus``, ``models``, ``cpus``, ...)."""

    def __init__(self, tables: dict[str, Table]):
        self.tables = tables

    def table(self, kind: str) -> Table:
        return self.tables.setdefault(kind, Table(kind))

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
    """The built-in catalog (cached: it is read-only data)."""
    return build_catalog(CATALOG_DIR.glob("*.yaml"))
