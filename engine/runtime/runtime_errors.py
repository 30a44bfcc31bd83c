"""The errors a rule run raises: rules that keep re-firing, a plan over its time budget, and a
rule whose condition or action failed to evaluate (with the rule's file and line)."""

from __future__ import annotations

from collections import Counter

from servewise.engine.lang.rulebase import RuleSpec

MAX_FIRINGS_PER_STAGE = 50_000


class LoopError(RuntimeError):
    def __init__(self, stage: str, counts: Counter, limit: int = MAX_FIRINGS_PER_STAGE):
        self.stage, self.counts = stage, counts
        top = ", ".join(f"{r} ({n}×)" for r, n in counts.most_common(5))
        super().__init__(f"rules keep re-firing in stage '{stage}' (more than "
                         f"{limit} firings): {top}")


class PlanTimeout(LoopError):
    """Building or running the rule engine for one plan took longer than the time budget."""

    def __init__(self, budget_s: float, phase: str):  # noqa: B042 - no super().__init__ of LoopError
        self.budget_s, self.stage, self.counts = budget_s, phase, Counter()
        RuntimeError.__init__(self, f"the plan took longer than its time budget of {budget_s:g} s ({phase}); "
                         f"a rule folder with too many or too costly rules?")


class RuleRuntimeError(RuntimeError):
    """A rule's condition or action failed; ``out_of_range``: because a number it computed is beyond
    the rule language's bound (engine/lang/expr.py NumberRangeError), i.e. from inputs too large."""

    def __init__(self, rule: RuleSpec, message: str, cause: Exception | None = None):
        from servewise.engine.lang.expr import NumberRangeError

        self.rule = rule
        self.out_of_range = isinstance(cause, NumberRangeError)
        super().__init__(f"{rule.file}:{rule.line}: {rule.id}: {message}")
