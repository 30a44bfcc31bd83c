"""What the interview needs from the rules, computed with the least work (issue #14).

The interview (engine/app/interview.py) reads one part of a plan: its ``asks``, which rule asks for
which input and why. An ``ask`` action records an input only the first time a rule asks for it,
and the stages run in order, so the asks for an input all of whose asking rules sit in stages up
to S are final once stage S has run: later stages neither add to them nor change them.

* :func:`ask_map`, built once per rule base (keyed by its knowledge hash and rule ids): the rules
  that ask for each input with the latest stage among them, and the rules that read each input
  (the WHY of a question).
* :class:`AskRun`, one per set of answers: runs only the rules of the stages up to the one a
  question needs (``inputs`` for the built-in rules' questions), once, and the whole plan only
  when it is shown, or when a question depends on a rule of the last stage.

The next question is therefore decided from exactly the asks the full plan would hold, and the
plan shown at the end is the same plan (:func:`plan_of`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.app.inputs import fill_defaults, input_defs
from servewise.engine.app.plan import PlanResult, plan_workload, run_rules
from servewise.engine.lang.rulebase import STAGES, RuleBase

MAX_MAPS = 8


@dataclass(frozen=True)
class AskMap:
    """Static facts about a rule base's questions."""

    askers: dict[str, tuple[str, ...]]           # input → ids of the rules with an `ask` for it
    last_stage: dict[str, int]                   # input → index in STAGES of the latest such rule
    readers: dict[str, tuple[tuple[str, dict[str, str]], ...]]  # input → (rule id, title) reading it
    rulebase: RuleBase = field(repr=False, compare=False)
    _through: dict[int, RuleBase] = field(default_factory=dict, repr=False, compare=False)

    def through(self, stage: int) -> RuleBase:
        """The rules of the stages up to ``stage`` (same objects, same order)."""
        sub = self._through.get(stage)
        if sub is None:
            rb = self.rulebase
            sub = RuleBase([r for r in rb.rules if STAGES.index(r.stage) <= stage], rb.files,
                           f"{rb.knowledge_hash}+through:{STAGES[stage]}")
            self._through[stage] = sub
        return sub


_MAPS: dict[tuple[str, tuple[str, ...]], AskMap] = {}


def ask_map(rulebase: RuleBase) -> AskMap:
    """The :class:`AskMap` of ``rulebase``, built once per knowledge hash and rule list."""
    key = (rulebase.knowledge_hash, tuple(r.id for r in rulebase.rules))
    found = _MAPS.get(key)
    if found is not None and found.rulebase is rulebase:
        return found
    keys = [d.key for d in input_defs()]
    askers: dict[str, list[str]] = {}
    last: dict[str, int] = {}
    readers: dict[str, list[tuple[str, dict[str, str]]]] = {k: [] for k in keys}
    for r in rulebase.rules:
        for a in r.actions:
            if a.kind == "ask":
                k = a.spec["input"]
                askers.setdefault(k, []).append(r.id)
                last[k] = max(last.get(k, -1), STAGES.index(r.stage))
        names = set(r.names)
        for k in keys:
            if k in names or (k == "model" and any(n == "model" or n.startswith("model.") for n in names)):
                readers[k].append((r.id, r.title))
    found = AskMap({k: tuple(v) for k, v in askers.items()}, last,
                   {k: tuple(v) for k, v in readers.items()}, rulebase)
    if len(_MAPS) >= MAX_MAPS:
        _MAPS.clear()
    _MAPS[key] = found
    return found


def plan_of(answers: dict[str, Any], rulebase: RuleBase) -> PlanResult:
    """The plan of the answers so far, every other input at its default (needs the model)."""
    workload, defaults = fill_defaults(answers)
    return plan_workload(workload, defaults, rulebase, "<answers>")


class AskRun:
    """The rules' asks for one set of answers, run stage by stage only as far as asked."""

    def __init__(self, rulebase: RuleBase, answers: dict[str, Any],
                 on_plan: Callable[[], None] | None = None):
        self.rulebase = rulebase
        self.answers = copy.deepcopy(answers)
        self.map = ask_map(rulebase)
        self.on_plan = on_plan          # told before the whole plan is computed (a progress line)
        self._through = -1              # the last stage run so far
        self._asks: list[dict[str, Any]] = []
        self._plan: PlanResult | None = None

    def plan(self) -> PlanResult:
        """The whole plan (computed once)."""
        if self._plan is None:
            if self.on_plan is not None:
                self.on_plan()
            self._plan = plan_of(self.answers, self.rulebase)
            self._asks = self._plan.plan["asks"]
            self._through = len(STAGES) - 1
        return self._plan

    def known(self, key: str) -> bool:
        """Whether :meth:`asks` for ``key`` needs no further rule run."""
        return self.map.last_stage.get(key, -1) <= self._through

    def asks(self, key: str) -> list[dict[str, Any]]:
        """The entries of the plan's ``asks`` for input ``key``, running what they need."""
        stage = self.map.last_stage.get(key)
        if stage is None:
            return []
        if stage > self._through:
            self._run_through(stage)
        return [a for a in self._asks if a["input"] == key]

    def _run_through(self, stage: int) -> None:
        workload, defaults = fill_defaults(self.answers)
        if stage == len(STAGES) - 1 or workload.get("model") is None:  # nothing to save: plan
            self.plan()
            return
        mem = run_rules(workload, defaults, self.map.through(stage), "<answers>", stop_after=STAGES[stage])
        self._asks = [{"input": a["input"], "rule": a["rule"], "because": a["because"]} for a in mem.asks]
        self._through = stage
