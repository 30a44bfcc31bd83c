"""Completeness verdict per guideline (facts/coverage.yaml): load, validate and cross-check.

Every id of facts/guidelines.yaml has exactly one verdict — ``encoded``, ``partial`` (with what is
``missing``), ``catalog`` (naming the catalog entries), ``explanation`` or ``set-aside`` (each with a
``reason``) — plus the rules that carry it (listed, or by default every rule citing the id) and the
tests under tests/guidelines/ that prove condition → conclusion. ``check`` returns the problems
(unknown or missing ids, unknown rules or catalog entries — also rule ids named in a note — encoded
ids no rule cites, test links that do not resolve) as ``file:line: message`` strings.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.schema_check import jsonschema_validator
from servewise.engine.common.yamlio import YamlError, line_of, load_file
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.lang.rulebase import FACTS_DIR, RuleBase, guidelines

VERDICT_FILE = FACTS_DIR / "coverage.yaml"
SCHEMA_FILE = FACTS_DIR / "schemas" / "coverage.schema.json"
TESTS_DIR = FACTS_DIR.parent / "tests"  # present in a source checkout, absent in an installed wheel
STATUSES = ("encoded", "partial", "catalog", "explanation", "set-aside")


class CoverageError(ValueError):
    """The verdict file cannot be read or does not match its schema (one line: file:line: message)."""


@dataclass(frozen=True)
class Verdict:
    id: str
    status: str
    note: str  # `missing` for partial, `reason` otherwise ("" for a plain encoded)
    rules: tuple[str, ...] | None  # None: every rule citing the id
    catalog: tuple[str, ...]
    tests: tuple[str, ...]
    line: int


@dataclass
class Entry:
    """One guideline in the report (JSON-ready through ``as_dict``)."""

    id: str
    kind: str
    guideline: str
    status: str
    note: str
    rules: list[str]
    cited_by: list[str]
    catalog: list[str]
    tests: list[str]

    def as_dict(self) -> dict[str, Any]:
        key = "missing" if self.status == "partial" else "reason"
        return {"id": self.id, "kind": self.kind, "guideline": self.guideline, "status": self.status,
                key: self.note or None, "rules": self.rules, "cited_by": self.cited_by,
                "catalog": self.catalog, "tests": self.tests}


@dataclass
class CoverageReport:
    entries: list[Entry]
    problems: list[str] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(e.status == s for e in self.entries) for s in STATUSES}

    def by_status(self, status: str) -> list[Entry]:
        return [e for e in self.entries if e.status == status]

    def as_dict(self) -> dict[str, Any]:
        return {"total": len(self.entries), "counts": self.counts, "problems": self.problems,
                "guidelines": [e.as_dict() for e in self.entries]}


def _name(path: Path) -> str:
    try:
        return str(path.relative_to(FACTS_DIR.parent))
    except ValueError:
        return str(path)


@lru_cache(maxsize=4)
def load_verdicts(path: Path = VERDICT_FILE) -> tuple[Verdict, ...]:
    """Read and schema-check the verdict file; raise CoverageError naming file, line and field."""
    name = _name(path)
    try:
        data, lines = load_file(path)
    except YamlError as exc:
        raise CoverageError(f"{name}:{exc.line}: {exc.message}" if exc.line else f"{name}: {exc.message}") from None
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    errors = sorted(jsonschema_validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        path = list(err.absolute_path)
        item = data[path[0]] if path and isinstance(data, list) and isinstance(data[path[0]], dict) else {}
        where = ".".join([str(item.get("id", path[0]))] + [str(p) for p in path[1:]]) if path else "(top level)"
        raise CoverageError(f"{name}:{line_of(lines, tuple(err.absolute_path))}: {where}: {err.message}")
    out = []
    for i, item in enumerate(data):
        rules = item.get("rules")
        out.append(Verdict(item["id"], item["status"], item.get("missing") or item.get("reason") or "",
                           tuple(rules) if rules is not None else None, tuple(item.get("catalog") or ()),
                           tuple(item.get("tests") or ()), line_of(lines, (i,))))
    return tuple(out)


def citing_rules(rulebase: RuleBase) -> dict[str, list[str]]:
    """Guideline id → ids of the rules whose sources cite it (sorted, unique)."""
    citing: dict[str, set[str]] = {}
    for rule in rulebase.rules:
        for src in rule.sources:
            ids = src.get("guideline") or []
            for gid in [ids] if isinstance(ids, str) else ids:
                citing.setdefault(gid, set()).add(rule.id)
    return {gid: sorted(r) for gid, r in citing.items()}


@lru_cache(maxsize=64)
def _test_functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def resolve_test(link: str, tests_dir: Path = TESTS_DIR) -> str | None:
    """Why a ``tests/…py::function`` link does not resolve (None when it does)."""
    file, sep, func = link.partition("::")
    if not sep or not file.startswith("tests/") or not file.endswith(".py") or not func:
        return "expected tests/<file>.py::<function>"
    path = tests_dir.parent / file
    if not path.is_file():
        return f"no file {file}"
    if func not in _test_functions(path):
        return f"no function {func} in {file}"
    return None


def _catalog_entry_exists(ref: str) -> bool:
    table, sep, entry = ref.partition("/")
    tables = load_catalog().tables
    return bool(sep) and table in tables and entry in tables[table]


def check(rulebase: RuleBase, verdicts: tuple[Verdict, ...] | None = None,
          tests_dir: Path = TESTS_DIR) -> CoverageReport:
    """The report for every guideline, and the problems of the verdict file."""
    verdicts = load_verdicts() if verdicts is None else verdicts
    name = _name(VERDICT_FILE)
    known = guidelines()
    rule_ids = {r.id for r in rulebase.rules}
    prefixes = "|".join(sorted({re.escape(r.split(".")[0]) for r in rule_ids}))
    named = re.compile(rf"\b(?:{prefixes})\.[a-z0-9]+(?:-[a-z0-9]+)+\b")  # rule ids named in notes
    citing = citing_rules(rulebase)
    problems: list[str] = []
    seen: dict[str, Verdict] = {}
    for v in verdicts:
        where = f"{name}:{v.line}: {v.id}"
        if v.id not in known:
            problems.append(f"{where}: not a guideline id of facts/guidelines.yaml")
            continue
        if v.id in seen:
            problems.append(f"{where}: second verdict (the first is on line {seen[v.id].line})")
            continue
        seen[v.id] = v
        for rid in v.rules or ():
            if rid not in rule_ids:
                problems.append(f"{where}: rule '{rid}' does not exist")
        for rid in sorted(set(named.findall(v.note)) - rule_ids):
            problems.append(f"{where}: the note names rule '{rid}', which does not exist")
        for ref in v.catalog:
            if not _catalog_entry_exists(ref):
                problems.append(f"{where}: catalog entry '{ref}' does not exist (expected table/id)")
        if v.status in ("encoded", "partial") and not citing.get(v.id):
            problems.append(f"{where}: {v.status}, but no rule cites it")
        if tests_dir.is_dir():
            for link in v.tests:
                why = resolve_test(link, tests_dir)
                if why:
                    problems.append(f"{where}: test '{link}' does not resolve: {why}")
    for gid in sorted(set(known) - set(seen)):
        problems.append(f"{name}: {gid}: no verdict")
    entries = []
    for gid in sorted(seen, key=_order):
        v, g = seen[gid], known[gid]
        cited = citing.get(gid, [])
        entries.append(Entry(gid, g["kind"], g["en"], v.status, v.note,
                             list(v.rules) if v.rules is not None else cited, cited,
                             list(v.catalog), list(v.tests)))
    return CoverageReport(entries, problems)


def _order(gid: str) -> tuple[str, int]:
    area, _, num = gid.removeprefix("G-").rpartition("-")
    return area, int(num) if num.isdigit() else 0
