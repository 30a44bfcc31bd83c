"""Fixtures for the guideline tests: run named rules over given facts, or plan a small workload.

Each test module here is named after an area and each test after a guideline id (``test_g_cool_001``
proves G-COOL-001); facts/coverage.yaml links the verdict of every id to its tests and
tests/test_kb_coverage.py checks the links both ways. Everything runs in-process: ``run`` fires only
the named rules (milliseconds), ``plan`` runs the whole rule base once per distinct workload.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from servewise.engine.app.inputs import fill_defaults
from servewise.engine.app.plan import plan_workload
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.lang.rulebase import RuleBase
from servewise.engine.runtime.runner import Memory, Origin, Runner


@dataclass
class Outcome:
    """What a run concluded: values set, rules fired, options rejected, warnings, questions asked."""

    mem: Memory
    feasible: bool | None = None

    @property
    def values(self) -> dict[str, Any]:
        return self.mem.values

    def fired(self, rule: str) -> bool:
        return self.mem.fired.get(rule, 0) > 0

    def warned(self, rule: str) -> bool:
        return any(w["rule"] == rule for w in self.mem.warnings)

    def rejected(self, option: str, rule: str | None = None) -> bool:
        return any(r["option"] == option and (rule is None or r["rule"] == rule) for r in self.mem.rejections)

    def rejected_by(self, rule: str) -> list[str]:
        return [r["option"] for r in self.mem.rejections if r["rule"] == rule]

    def asked(self, key: str) -> bool:
        return any(a["input"] == key for a in self.mem.asks)


@pytest.fixture(scope="session")
def run(rulebase) -> Callable[..., Outcome]:
    """run(rule_ids, facts): fire only these rules over exactly these facts."""
    specs = {s.id: s for s in rulebase.rules}

    def _run(rule_ids: str | list[str], facts: dict[str, Any]) -> Outcome:
        ids = [rule_ids] if isinstance(rule_ids, str) else rule_ids
        alone = RuleBase([specs[r] for r in ids], rulebase.files, rulebase.knowledge_hash)
        given = {k: (v, Origin("input", f"test:{k}")) for k, v in facts.items()}
        return Outcome(Runner(alone).run(given, RunContext(load_catalog())))

    return _run


@pytest.fixture(scope="session")
def plan(rulebase) -> Callable[[dict[str, Any]], Outcome]:
    """plan(workload): the whole rule base over a workload (cached per workload for the session)."""
    cache: dict[str, Outcome] = {}

    def _plan(workload: dict[str, Any]) -> Outcome:
        key = json.dumps(workload, sort_keys=True)
        if key not in cache:
            filled, defaults = fill_defaults(workload)
            result = plan_workload(filled, defaults, rulebase)
            cache[key] = Outcome(result.memory, result.feasible)
        return cache[key]

    return _plan
