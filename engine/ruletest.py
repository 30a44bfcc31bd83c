"""Run the test cases written next to each rule (``tests:`` in the rule file).

A case gives either a ``workload`` (planned with the whole rule base) or ``facts`` (the rule runs
alone over exactly these facts), and what to expect: that the rule ``fires``, the ``values`` it
sets, the options it ``rejected``, the inputs it ``asks`` for, that it ``warns``, the text its
explanation ``says``, or the plan's feasibility.
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
from .rulelint import coverage_gaps
from .runner import Memory, Origin, Runner, _fmt, with_lets

MAX_ITEMS_SHOWN = 3


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
        said = [s["because"].get("en", "") for s in mem.steps if s["rule"] == spec.id][:1]
        problems.append(f"expected the rule {'to fire' if expect['fires'] else 'not to fire'}, "
                        f"it {'fired' if fired else 'did not fire'}" + (f" (it said: {said[0]})" if said else ""))
    for key, value in (expect.get("values") or {}).items():
        if key not in mem.values:
            problems.append(f"{key}: expected {value!r}, not set")
        elif not _same(value, mem.values[key]):
            problems.append(f"{key}: expected {value!r}, got {mem.values[key]!r}")
    for option in expect.get("rejected") or []:
        if not any(r["option"] == option and r["rule"] == spec.id for r in mem.rejections):
            problems.append(f"expected '{option}' to be rejected by this rule")
    for key in expect.get("asks") or []:
        if not any(a["input"] == key and a["rule"] == spec.id for a in mem.asks):
            asked = [a["input"] for a in mem.asks if a["rule"] == spec.id]
            problems.append(f"expected the rule to ask for '{key}'; it asked for {asked or 'nothing'}")
    if "warns" in expect:
        warned = any(w["rule"] == spec.id for w in mem.warnings)
        if warned != expect["warns"]:
            problems.append(f"expected warns={expect['warns']}, got {warned}")
    if expect.get("says"):
        texts = [s["because"].get("en", "") for s in mem.steps if s["rule"] == spec.id]
        texts += [w["message"].get("en", "") for w in mem.warnings if w["rule"] == spec.id]
        texts += [a["because"].get("en", "") for a in mem.asks if a["rule"] == spec.id]
        for want in expect["says"]:
            if not any(want in t for t in texts):
                shown = texts[0] if texts else "no explanation (the rule did not fire)"
                problems.append(f"expected the explanation to say {want!r}; it says: {shown}")
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
            for kind, items in (case.get("items") or {}).items():  # e.g. candidates for a for_each rule
                for iid, attrs in items.items():
                    runner.store.create_item(kind, str(iid), attrs, 0)
            mem = runner.run(facts, RunContext(load_catalog()))
            feasible = None
    except WorkloadError as exc:
        return CaseResult(spec.id, name, False, f"bad test workload: {exc}", spec.file, spec.line)
    except Exception as exc:  # a failing case must report, not crash the runner
        return CaseResult(spec.id, name, False, f"{type(exc).__name__}: {exc}", spec.file, spec.line)
    problems = _check(spec, case["expect"], mem, feasible)
    if problems and mem.fired.get(spec.id, 0) == 0 and case["expect"].get("fires", True) is not False:
        problems.append("why it did not fire:\n" + "\n".join(
            "      " + line for line in why_not_fired(spec, mem)))
    return CaseResult(spec.id, name, not problems, "; ".join(problems) or "ok", spec.file, spec.line)


def why_not_fired(spec: RuleSpec, mem: Memory) -> list[str]:
    """Each condition of ``spec`` evaluated over the facts at the end of the run, with its values;
    the first false one is marked. A fact the rule needs that is not known is named first."""
    items = [None]
    if spec.for_each:
        items = [iid for kind, iid in mem.item_order if kind == spec.for_each][:MAX_ITEMS_SHOWN] or [None]
    lines: list[str] = []
    for iid in items:
        attrs = mem.items.get((spec.for_each, iid), {}) if iid is not None else {}
        values = dict(mem.values)
        if spec.for_each:
            values.update({f"{spec.for_each}.{k}": v for k, v in attrs.items()})
            if iid is not None:
                values[f"{spec.for_each}.id"] = iid

        def base(name: str, values: dict = values):
            if name not in values:
                raise KeyError(name)
            return values[name]

        resolve = with_lets(spec, base)
        prefix = f"  {spec.for_each}[{iid}]: " if iid is not None else "  "
        if iid is None and spec.for_each:
            lines.append(f"  no live {spec.for_each} item to fire for")
        missing = [n for n in spec.names if n not in values and n.split(".")[0] != spec.for_each]
        if spec.for_each and iid is not None:
            missing += [n for n in spec.names if n.startswith(spec.for_each + ".") and n not in values]
        for n in missing:
            lines.append(f"{prefix}needs '{n}', which is not known")
        marked = False
        for j, cond in enumerate(spec.when):
            try:
                ok: object = bool(cond.evaluate(resolve))
            except KeyError as exc:
                ok = f"unknown ({exc.args[0]} not known)"
            except Exception as exc:  # noqa: BLE001 - report, never crash the test runner
                ok = f"error: {exc}"
            shown = {n: values[n] for n in cond.names if n in values}
            for n in cond.names:
                if n.split(".")[0] in spec.let_map:
                    try:
                        shown[n] = resolve(n)
                    except Exception:  # noqa: BLE001
                        pass
            rendered = cond.render(shown)
            mark = ""
            if ok is not True and not marked:
                mark, marked = "  ← first false", True
            lines.append(f"{prefix}when[{j}] {cond.source}  →  {rendered}  =  "
                         f"{_fmt(ok, None) if isinstance(ok, bool) else ok}{mark}")
        if not spec.when and not missing:
            lines.append(f"{prefix}no conditions; every needed fact is known")
    return lines


def run_all(rulebase: RuleBase, only: str | None = None,
            files: set[str] | None = None) -> list[CaseResult]:
    """Run the cases of every rule (or those whose id contains ``only``, in ``files``)."""
    results = []
    for spec in rulebase.rules:
        if only and only not in spec.id:
            continue
        if files is not None and spec.file not in files:
            continue
        if not spec.tests:
            results.append(CaseResult(spec.id, "-", False, "the rule has no test case", spec.file, spec.line))
            continue
        for case in spec.tests:
            results.append(run_case(rulebase, spec, case))
    return results


def case_coverage(specs: list[RuleSpec]) -> list[tuple[RuleSpec, list[str]]]:
    """Rules lacking a case where they fire with a concrete result checked or a case where they
    must not fire, with what is missing (see ``rulelint.coverage_gaps``)."""
    return [(spec, gaps) for spec in specs if (gaps := coverage_gaps(spec))]
