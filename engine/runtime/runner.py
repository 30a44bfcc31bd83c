"""Run a rule base over workload facts with experta, stage by stage, recording why every fact holds.

Working memory keeps the values; experta facts carry only keys and revisions, so the Rete network
re-evaluates a rule whenever a value it reads changes. A rule fires at most once for the same
values read (content-based refraction), which keeps chains finite and explanations free of
repeats; a loop guard stops rule sets that still re-fire without end.

The parts: engine/runtime/compiler.py (rule → experta Rule), engine/runtime/memory.py (values, item revisions
and their facts), engine/runtime/resolve.py (reading facts), engine/runtime/actions.py (what a firing does, by
action kind), engine/runtime/justify.py (the trace step of a firing).
"""

from __future__ import annotations

import json
import time
import weakref
from collections import Counter
from typing import Any

from servewise.engine.common.gctune import fewer_collections
from servewise.engine.common.text import format_value
from servewise.engine.domain.functions import RunContext, current, reset_context, use_context
from servewise.engine.lang.expr import EvalError
from servewise.engine.lang.rulebase import STAGES, RuleBase, RuleSpec
from servewise.engine.runtime.actions import ACTIONS, COMPUTE, REPORT, ActionContext
from servewise.engine.runtime.compiler import WORK, acquire_engine, release_engine
from servewise.engine.runtime.experta_compat import DirectMatcher
from servewise.engine.runtime.justify import DeferredText, make_step, render, shown_values
from servewise.engine.runtime.memory import Item, Memory, Origin, Stage, Store, Value, item_fact_name
from servewise.engine.runtime.resolve import NotReady, live_resolver, with_lets
from servewise.engine.runtime.runtime_errors import MAX_FIRINGS_PER_STAGE, LoopError, PlanTimeout, RuleRuntimeError

# per plan (one model), in CPU seconds of this process: a busy machine slows a plan down but does
# not make it fail; the built-in rules need a few seconds at most
TIME_BUDGET_S = 60.0
CLOCK_EVERY_S = 0.05
MATCHER = DirectMatcher  # experta's ReteMatcher and IndexedReteMatcher give the same plans, slower (tested)

_fmt = format_value  # the names other modules imported from here before the split
_NotReady = NotReady

__all__ = [
    "MATCHER", "MAX_FIRINGS_PER_STAGE", "TIME_BUDGET_S", "WORK", "Item", "LoopError", "Memory",
    "Origin", "PlanTimeout", "RuleRuntimeError", "Runner", "Stage", "Value", "item_fact_name",
    "render", "with_lets",
]


_EXACT = (str, int, bool, type(None))


def content_key(read: dict[str, Any]) -> tuple | str:
    """A key that is equal for two firings of one rule exactly when they read the same values:
    the values with their types, in the order read (the same values are read in the same order,
    as the same expressions take the same branches), or, when a value is not a plain scalar or is
    a float that equality does not tell from another (NaN, ±0.0), the values as canonical JSON."""
    out = []
    for name, value in read.items():
        kind = type(value)
        if kind in _EXACT or (kind is float and value == value and value != 0.0):
            out.append((name, kind, value))
        else:
            return json.dumps(read, sort_keys=True, default=str)
    return tuple(out)


class Runner:
    """Compile a rule base to an experta engine and run it over input facts."""

    def __init__(self, rulebase: RuleBase, max_firings: int = MAX_FIRINGS_PER_STAGE,
                 time_budget_s: float | None = None):
        self.rulebase = rulebase
        self.max_firings = max_firings
        self.time_budget_s = TIME_BUDGET_S if time_budget_s is None else time_budget_s
        self.deadline = time.process_time() + self.time_budget_s
        self._next_clock_read = 0.0
        self.mem = Memory()
        self._seen: set[tuple] = set()
        self._reports = rulebase.reporting
        with fewer_collections():
            # the engine calls back through a weak reference, so a runner nobody holds any more is
            # collected at once and its engine goes back to the pool (_release)
            self.engine = acquire_engine(rulebase.rules, rulebase.engines, MATCHER, self._check_time,
                                         self.mem, weakref.WeakMethod(self._fire))
        self.store = Store(self.mem, self.engine)
        self._release = weakref.finalize(self, release_engine, self.engine, rulebase.engines)

    def _check_time(self, phase: str) -> None:
        # the process's CPU clock is a system call (slow on some virtual machines): read it at most
        # every CLOCK_EVERY_S of wall time (a cheap clock)
        now = time.monotonic()
        if now < self._next_clock_read:
            return
        self._next_clock_read = now + CLOCK_EVERY_S
        if time.process_time() > self.deadline:
            raise PlanTimeout(self.time_budget_s, phase)

    def _fire(self, spec: RuleSpec, iid: str | None) -> bool:
        """One activation: skip it if a fact is missing or the values read were seen before;
        else run the actions and record the step. False when a fact was missing."""
        self._check_time(f"stage {spec.stage}")
        mem = self.mem
        read: dict[str, Any] = {}
        pending: dict[str, Any] = {}
        resolve = live_resolver(mem, spec, iid, read, pending=pending)
        try:
            for name in spec.names:
                resolve(name)
        except NotReady:
            return False
        signature = (spec.id, iid, content_key(read))
        if signature in self._seen:
            return True
        self._seen.add(signature)
        mem.fired[spec.id] += 1
        WORK["firings"] += 1
        ctx = ActionContext(spec, iid, resolve, len(mem.steps) + 1, self.store, pending=pending)
        self._run_actions(ctx, COMPUTE)
        # the explanation may show this rule's own results: render it after they are computed
        # (now, for the actions that report it; else when the step is shown, from the values it
        # shows as they are now: most steps never are)
        if spec.id in self._reports:
            shown = live_resolver(mem, spec, iid, None, pending=pending)
            ctx.because.update({lang: render(t, shown, lang) for lang, t in spec.because.items()})
            self._run_actions(ctx, REPORT)
            because: dict[str, str] | DeferredText = ctx.because
            if not ctx.conclusions:
                return True
        elif not ctx.conclusions:
            return True
        else:
            because = DeferredText(spec, shown_values(mem, spec, iid, pending), current())
        mem.steps.append(make_step(mem, spec, iid, ctx.step_no, read, ctx.extra_premises,
                                   ctx.conclusions, because))
        if pending:
            self.store.update_item(spec.for_each, iid, pending, ctx.step_no)
        return True

    @staticmethod
    def _run_actions(ctx: ActionContext, kinds: tuple[str, ...]) -> None:
        for act in ctx.spec.actions:
            if act.kind not in kinds:
                continue
            try:
                ACTIONS[act.kind](ctx, act)
            except EvalError as exc:
                raise RuleRuntimeError(ctx.spec, f"{act.kind} failed: {exc}", exc) from None

    def run(self, facts: dict[str, tuple[Any, Origin]], ctx: RunContext,
            stop_after: str | None = None) -> Memory:
        """Declare the input facts and run every stage in order; the engine then goes back to the
        rule base's pool (a runner runs once)."""
        token = use_context(ctx)
        with fewer_collections():
            try:
                for key in facts:
                    value, origin = facts[key]
                    self.store.set_value(key, value, None, origin)
                for stage in STAGES:
                    stage_fact = self.engine.declare(Stage(name=stage))
                    before = Counter(self.mem.fired)
                    self.engine.run(self.max_firings)
                    fired = self.mem.fired - before
                    if sum(fired.values()) >= self.max_firings or self.engine.agenda.activations:
                        raise LoopError(stage, fired, self.max_firings)
                    self.engine.retract(stage_fact)
                    if stop_after == stage:
                        break
            finally:
                reset_context(token)
                self._release()  # the next run of these rules reuses the engine
        return self.mem
