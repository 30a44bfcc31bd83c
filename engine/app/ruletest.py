"""Run the test cases written next to each rule (``tests:`` in the rule file).

A case gives either a ``workload`` (planned with the whole rule base) or ``facts`` (the rule runs
alone over exactly these facts), and what to expect: that the rule ``fires``, the ``values`` it
sets, the options it ``rejected``, the inputs it ``asks`` for, that it ``warns``, the text its
explanation ``says``, or the plan's feasibility.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
from dataclasses import dataclass
from typing import Any

from servewise.engine.app.inputs import WorkloadError, fill_defaults, validate_workload
from servewise.engine.app.plan import plan_workload, run_rules
from servewise.engine.app.ruledocs import writes_of
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.lang.rulebase import STAGES, RuleBase, RuleSpec
from servewise.engine.lang.rulelint import coverage_gaps
from servewise.engine.runtime.justify import settle
from servewise.engine.runtime.runner import Memory, Origin, Runner, _fmt, with_lets

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
        said = [settle(s)["because"].get("en", "") for s in mem.steps if s["rule"] == spec.id][:1]
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
        texts = [settle(s)["because"].get("en", "") for s in mem.steps if s["rule"] == spec.id]
        texts += [w["message"].get("en", "") for w in mem.warnings if w["rule"] == spec.id]
        texts += [a["because"].get("en", "") for a in mem.asks if a["rule"] == spec.id]
        for want in expect["says"]:
            if not any(want in t for t in texts):
                shown = texts[0] if texts else "no explanation (the rule did not fire)"
                problems.append(f"expected the explanation to say {want!r}; it says: {shown}")
    if "feasible" in expect and feasible is not None and expect["feasible"] != feasible:
        problems.append(f"expected feasible={expect['feasible']}, got {feasible}")
    return problems


FULL = len(STAGES)  # "run the whole plan": the case checks feasibility, or plans several models

_RUNS: dict[tuple[int, str], tuple[int, Memory, bool | None, RuleBase]] = {}
_UPTO: dict[tuple[int, int], RuleBase] = {}
_WRITERS: dict[int, tuple[list[tuple[str, int]], RuleBase]] = {}


def _writers(rulebase: RuleBase) -> list[tuple[str, int]]:
    """(fact name or ``kind.`` prefix, stage index) of every output of every rule."""
    hit = _WRITERS.get(id(rulebase))
    if hit is None or hit[1] is not rulebase:
        out = [(w[:-1] if w.endswith(".*") else w, STAGES.index(r.stage))
               for r in rulebase.rules for w in writes_of(r)]
        hit = _WRITERS[id(rulebase)] = (out, rulebase)
    return hit[0]


def needed_stage(rulebase: RuleBase, spec: RuleSpec, case: dict[str, Any]) -> int:
    """Index of the last stage a workload case must run for its verdict to be the one of a whole
    plan: the rule's own stage (a rule fires, rejects, asks, warns and explains only in its stage)
    or the last stage of a rule that may write a value the case checks; ``FULL`` when the case
    checks feasibility or the workload plans several models."""
    workload = case["workload"]
    if "feasible" in case["expect"] or (workload.get("model") is None and workload.get("models")):
        return FULL
    stage = STAGES.index(spec.stage)
    for key in case["expect"].get("values") or {}:
        for name, at in _writers(rulebase):
            if at > stage and (key == name or (name.endswith(".") and key.startswith(name))):
                stage = at
    return stage


def _upto(rulebase: RuleBase, upto: int) -> RuleBase:
    """The rules of the first ``upto + 1`` stages (rules of later stages cannot fire before)."""
    hit = _UPTO.get((id(rulebase), upto))
    if hit is None or hit.files is not rulebase.files:
        hit = _UPTO[(id(rulebase), upto)] = RuleBase(
            [r for r in rulebase.rules if STAGES.index(r.stage) <= upto], rulebase.files,
            f"{rulebase.knowledge_hash}#stages-to-{STAGES[upto]}")
    return hit


def run_workload(rulebase: RuleBase, workload: dict[str, Any], upto: int = FULL) -> tuple[Memory, bool | None]:
    """The memory of planning ``workload`` up to and including stage ``upto`` (the feasibility
    only for a whole plan). Runs are pure functions of workload and rule base: cases sharing a
    workload share a run, and a run to a later stage serves a case needing an earlier one."""
    key = (id(rulebase), json.dumps(workload, sort_keys=True))
    hit = _RUNS.get(key)
    if hit is not None and hit[3] is rulebase and hit[0] >= upto:
        return hit[1], hit[2]
    filled, defaults = fill_defaults(workload)
    if upto >= FULL:
        result = plan_workload(filled, defaults, rulebase)
        mem, feasible = result.memory, result.feasible
    else:  # plan_workload's single-model run, stopped after stage ``upto``
        mem, feasible = run_rules(filled, defaults, _upto(rulebase, upto), stop_after=STAGES[upto]), None
    _RUNS[key] = (upto, mem, feasible, rulebase)
    return mem, feasible


def run_case(rulebase: RuleBase, spec: RuleSpec, case: dict[str, Any]) -> CaseResult:
    name = case["name"]
    try:
        if "workload" in case:
            validate_workload(case["workload"], f"{spec.file}:{spec.id}:{name}")
            mem, feasible = run_workload(rulebase, case["workload"], needed_stage(rulebase, spec, case))
        else:
            alone = RuleBase([spec], rulebase.files, f"{rulebase.knowledge_hash}#rule-{spec.id}")
            runner = Runner(alone)
            facts = {k: (v, Origin("input", f"test:{k}")) for k, v in case["facts"].items()}
            for kind, items in (case.get("items") or {}).items():  # e.g. candidates for a for_each rule
                for iid, attrs in items.items():
                    runner.store.create_item(kind, str(iid), attrs, 0)
            mem = runner.run(facts, RunContext(load_catalog()), stop_after=spec.stage)
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


Pair = tuple[RuleSpec, dict[str, Any]]
PARALLEL_MIN_RUNS = 8  # fewer workload runs than this: one process (forking costs more than it saves)


def _workload_needs(rulebase: RuleBase, pairs: list[Pair]) -> dict[str, tuple[int, dict[str, Any]]]:
    """Each workload of these cases (by its JSON) with the last stage any of them needs."""
    need: dict[str, tuple[int, dict[str, Any]]] = {}
    for spec, case in pairs:
        if isinstance(case.get("workload"), dict):
            key = json.dumps(case["workload"], sort_keys=True)
            stage = needed_stage(rulebase, spec, case)
            if stage > need.get(key, (-1, {}))[0]:
                need[key] = (stage, case["workload"])
    return need


def _prepare(rulebase: RuleBase, need: dict[str, tuple[int, dict[str, Any]]]) -> None:
    for stage, workload in need.values():
        try:
            validate_workload(workload, "<rule test workload>")
            run_workload(rulebase, workload, stage)
        except Exception:  # noqa: BLE001 - the case itself reports it
            pass


def prepare_workloads(rulebase: RuleBase, specs: list[RuleSpec]) -> None:
    """Run each workload of the cases of ``specs`` once, to the last stage any of them needs, so
    that ``run_case`` finds every run it needs cached (a bad workload is left to its case)."""
    _prepare(rulebase, _workload_needs(rulebase, [(spec, case) for spec in specs for case in spec.tests]))


_FORKED: tuple[RuleBase, list[Pair]] = (RuleBase([], [], ""), [])  # what forked workers read


def _run_share(keys: frozenset[str]) -> list[tuple[int, CaseResult]]:
    """In a forked worker: the cases (by index) whose workloads are ``keys``."""
    rulebase, pairs = _FORKED
    mine = [(i, spec, case) for i, (spec, case) in enumerate(pairs) if isinstance(case.get("workload"), dict)
            and json.dumps(case["workload"], sort_keys=True) in keys]
    _prepare(rulebase, _workload_needs(rulebase, [(spec, case) for _, spec, case in mine]))
    return [(i, run_case(rulebase, spec, case)) for i, spec, case in mine]


def _run_parallel(rulebase: RuleBase, pairs: list[Pair], jobs: int) -> dict[int, CaseResult] | None:
    """The workload cases run by ``jobs`` forked processes, the workloads shared out by their
    estimated cost (a whole plan costs most); None where forking is not possible or not worth it."""
    global _FORKED
    need = _workload_needs(rulebase, pairs)
    if jobs < 2 or len(need) < PARALLEL_MIN_RUNS or "fork" not in mp.get_all_start_methods():
        return None
    shares: list[set[str]] = [set() for _ in range(jobs)]
    loads = [0] * jobs
    for key, (stage, _) in sorted(need.items(), key=lambda kv: (-kv[1][0], kv[0])):
        j = loads.index(min(loads))
        shares[j].add(key)
        loads[j] += 4 * (stage + 1) if stage >= FULL else stage + 1  # a whole plan: ~4 × a partial one
    _FORKED = (rulebase, pairs)
    try:
        with mp.get_context("fork").Pool(jobs) as pool:
            parts = pool.map(_run_share, [frozenset(s) for s in shares])
    finally:
        _FORKED = (RuleBase([], [], ""), [])
    return {i: r for part in parts for i, r in part}


def run_all(rulebase: RuleBase, only: str | None = None,
            files: set[str] | None = None, jobs: int | None = None) -> list[CaseResult]:
    """Run the cases of every rule (or those whose id contains ``only``, in ``files``). Workload
    cases run in ``jobs`` processes (default: up to 2 CPUs) when there are enough workloads to
    plan; the results and their order are the same either way."""
    selected = [spec for spec in rulebase.rules
                if not (only and only not in spec.id) and (files is None or spec.file in files)]
    pairs = [(spec, case) for spec in selected for case in spec.tests]
    done = _run_parallel(rulebase, pairs, min(2, os.cpu_count() or 1) if jobs is None else jobs)
    if done is None:
        prepare_workloads(rulebase, selected)
        done = {}
    results: list[CaseResult] = []
    i = 0
    for spec in selected:
        if not spec.tests:
            results.append(CaseResult(spec.id, "-", False, "the rule has no test case", spec.file, spec.line))
        for case in spec.tests:
            results.append(done[i] if i in done else run_case(rulebase, spec, case))
            i += 1
    return results


def case_coverage(specs: list[RuleSpec]) -> list[tuple[RuleSpec, list[str]]]:
    """Rules lacking a case where they fire with a concrete result checked or a case where they
    must not fire, with what is missing (see ``rulelint.coverage_gaps``)."""
    return [(spec, gaps) for spec in specs if (gaps := coverage_gaps(spec))]
