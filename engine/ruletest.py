"""Run the test cases written next to each rule (``tests:`` in the rule file).

A case gives either a ``workload`` (planned with the whole rule base) or ``facts`` (the rule runs
alone over exactly these facts), and what to expect: that the rule ``fires``, the ``values`` it
sets, the options it ``rejected``, that it ``warns``, or the plan's feasibility.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .catalog import load_catalog
from .functions import RunContext
from .inputs import WorkloadError, fill_defaults, validate_workload
from .plan import plan_workload
from .rulebase import RuleBase, RuleSpec
from .runner import Memory, Origin, Runner


@dataclass
class CaseResult:
    rule: str
    name: str
    ok: bool
    message: str
    file: str
    line: int


def _same(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual or expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(expected, actual, rel_tol=1e-3, abs_tol=1e-6)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(_same(e, a) for e, a in zip(expected, actual, strict=False))
    return expected == actual


def _check(spec: RuleSpec, expect: dict[str, Any], mem: Memory, feasible: bool | None) -> list[str]:
    problems = []
    fired = mem.fired.get(spec.id, 0) > 0
    if "fires" in expect and expect["fires"] != fired:
        problems.append(f"expected the rule {'to fire' if expect['fires'] else 'not to fire'}, "
                        f"it {'fired' if fired else 'did not fire'}")
    for key, value in (expect.get("values") or {}).items():
        if key not in mem.values:
            problems.append(f"{key}: expected {value!r}, not set")
        elif not _same(value, mem.values[key]):
            problems.append(f"{key}: expected {value!r}, got {mem.values[key]!r}")
    for option in expect.get("rejected") or []:
        if not any(r["option"] == option and r["rule"] == spec.id for r in mem.rejections):
            problems.append(f"expected '{option}' to be rejected by this rule")
    if "warns" in expect:
        warned = any(w["rule"] == spec.id for w in mem.warnings)
        if warned != expect["warns"]:
            problems.append(f"expected warns={expect['warns']}, got {warned}")
    if "feasible" in expect and feasible is not None and expect["feasible"] != feasible:
        problems.append(f"expected feasible={expect['feasible']}, got {feasible}")
    return problems


_PLANS: dict[tuple[int, str], Any] = {}


def _plan_cached(rulebase: RuleBase, workload: dict[str, Any]):
    """Plans are pure functions of workload and rule base: cases sharing a workload share a run."""
    key = (id(rulebase), json.dumps(workload, sort_keys=True))
    if key not in _PLANS:
        defaults_filled, defaults = fill_defaults(workload)
        _PLANS[key] = plan_workload(defaults_filled, defaults, rulebase)
    return _PLANS[key]


def run_case(rulebase: RuleBase, spec: RuleSpec, case: dict[str, Any]) -> CaseResult:
    name = case["name"]
    try:
        if "workload" in case:
            validate_workload(case["workload"], f"{spec.file}:{spec.id}:{name}")
            result = _plan_cached(rulebase, case["workload"])
            mem, feasible = result.memory, result.feasible
        else:
            alone = RuleBase([spec], rulebase.files, rulebase.knowledge_hash)
            runner = Runner(alone)
            facts = {k: (v, Origin("input", f"test:{k}")) for k, v in case["facts"].items()}
            mem = runner.run(facts, RunContext(load_catalog()))
            feasible = None
    except WorkloadError as exc:
        return CaseResult(spec.id, name, False, f"bad test workload: {exc}", spec.file, spec.line)
    except Exception as exc:  # a failing case must report, not crash the runner
        return CaseResult(spec.id, name, False, f"{type(exc).__name__}: {exc}", spec.file, spec.line)
    problems = _check(spec, case["expect"], mem, feasible)
    return CaseResult(spec.id, name, not problems, "; ".join(problems) or "ok", spec.file, spec.line)


def run_all(rulebase: RuleBase, only: str | None = None) -> list[CaseResult]:
    results = []
    for spec in rulebase.rules:
        if only and only not in spec.id:
            continue
        if not spec.tests:
            results.append(CaseResult(spec.id, "-", False, "the rule has no test case", spec.file, spec.line))
            continue
        for case in spec.tests:
            results.append(run_case(rulebase, spec, case))
    return results
