"""Rules → experta: each rule spec becomes an experta ``Rule`` over identity-and-revision facts.

The LHS is ``Stage``, one ``Value`` pattern per global name read (binding its revision), the
``Item`` pattern last (so an item change passes a single join) and a ``TEST`` that evaluates the
rule's conditions against the revisions in the token: a pure function of the matched facts, as
a Rete network requires. Being pure, its result is remembered per values read (see
:func:`compile_rule`).
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable
from typing import Any

from .experta_compat import MATCH, TEST, KnowledgeEngine, Rule, StableStrategy
from .expr import EvalError
from .memory import Item, Memory, Stage, Value
from .resolve import NotReady, snapshot_resolver
from .rulebase import RuleSpec
from .runtime_errors import RuleRuntimeError

# Process-wide work counters (condition tests run by the Rete network, activations the agenda
# fired, rule firings recorded): read by the benchmark and by the CI guard on planning work
# (tests/test_plan_work.py). Compare before/after values; never reset by the engine.
WORK: Counter = Counter()

_MISSING = object()  # an item attribute not derived yet (in condition-test memo keys)
_EMPTY: dict[str, Any] = {}

Fire = Callable[[RuleSpec, "str | None"], bool]  # True: fired, or a repeat of values seen


def build_engine(rules: list[RuleSpec], mem: Memory, fire: Fire, matcher: type,
                 check_time: Callable[[str], None]) -> KnowledgeEngine:
    """A reset experta engine whose rules read ``mem`` and call ``fire(spec, item_id)``."""
    attrs: dict[str, Any] = {"__strategy__": StableStrategy, "__matcher__": matcher}
    for spec in rules:
        check_time("compiling the rules")
        attrs[f"r{spec.load_order:05d}"] = compile_rule(spec, mem, fire)
    engine = type("ServewiseEngine", (KnowledgeEngine,), attrs)()
    engine.reset()
    return engine


def condition_attrs(spec: RuleSpec) -> tuple[str, ...]:
    """The item attributes a for-each rule's condition test reads (its names and conditions)."""
    prefix = f"{spec.for_each}."
    return tuple(dict.fromkeys(spec.item_names + tuple(
        n[len(prefix):] for e in spec.when for n in spec.expand(e.names) if n.startswith(prefix))))


def compile_rule(spec: RuleSpec, mem: Memory, fire: Fire) -> Rule:
    patterns: list[Any] = [Stage(name=spec.stage)]
    params: list[str] = []
    revs: dict[str, str] = {}
    for i, name in enumerate(spec.global_names):
        var = f"v{i}"
        revs[name] = var
        patterns.append(Value(key=name, rev=getattr(MATCH, var)))
        params.append(var)
    kind = spec.for_each
    if kind:
        gate = global_gate(spec, mem, revs)
        if gate is not None:  # conditions on global values first: items never join a rule that is off
            patterns.append(TEST(gate))
        # last, so an item change passes one join; a rejected item's fact is retracted,
        # so for-each rules simply stop seeing it
        patterns.append(Item(kind=kind, id=MATCH.iid, rev=MATCH.irev))
        params += ["iid", "irev"]
    rev_vars = tuple(revs.values())
    item_attrs = condition_attrs(spec) if kind else ()
    item_revs = mem.item_revs
    memo: dict[tuple, bool] = {}
    done: set[tuple] = set()  # keys of tokens whose activation fired (or was found a repeat)

    def key_of(bound: dict[str, Any]) -> tuple:
        # the values the rule reads, identified: global values by revision, item attributes by
        # identity (a new item revision copies the unchanged values, and every revision stays in
        # memory, so an identity is never reused)
        key: tuple = tuple(bound[v] for v in rev_vars)
        if kind:
            attrs = item_revs.get((kind, bound["iid"], bound["irev"]), _EMPTY)
            key += (bound["iid"],) + tuple(id(attrs.get(a, _MISSING)) for a in item_attrs)
        return key

    def test(**bound):
        # A pure function of the matched fact revisions, so its result is remembered per values
        # read: retracting a token, and an item revision that changed only attributes this rule
        # does not read, cost a lookup. Once an activation for these values has run, the same
        # values cannot fire the rule again (content-based refraction, see Runner._fire): no new
        # activation is made for them, which would only be skipped.
        key = key_of(bound)
        if key in done:
            return False
        hit = memo.get(key)
        if hit is None:
            WORK["condition_tests"] += 1
            hit = memo[key] = conditions_hold(mem, spec, bound, revs)
        return hit

    test.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in params])

    def rhs(engine, **context):
        WORK["activations"] += 1
        if fire(spec, context.get("iid")):
            done.add(key_of(context))

    # experta rebuilds Rule objects from the wrapped function (update_wrapper copies its
    # __dict__), so the tie-break key must live on the function
    rhs.__name__ = spec.id
    rhs.load_order = spec.load_order
    return Rule(*patterns, TEST(test), salience=spec.salience)(rhs)


def global_gate(spec: RuleSpec, mem: Memory, revs: dict[str, str]) -> Callable[..., bool] | None:
    """A ``TEST`` over the global values alone for a for-each rule whose first conditions read
    no item attribute, so the Rete network joins items only while those conditions hold; None
    when there are none.

    It returns False only where the rule's full test (:func:`conditions_hold`) returns False
    too: that test evaluates the conditions in order, and these come first. A condition that
    fails to evaluate lets the token pass, so the full test reports it as before."""
    prefix = f"{spec.for_each}."
    first: list[Any] = []
    for cond in spec.when:
        if any(n.startswith(prefix) for n in spec.expand(cond.names)):
            break
        first.append(cond)
    if not first or not revs:
        return None
    rev_vars = tuple(revs.values())
    memo: dict[tuple, bool] = {}

    def gate(**bound):
        key = tuple(bound[v] for v in rev_vars)
        hit = memo.get(key)
        if hit is None:
            WORK["condition_tests"] += 1
            resolve = snapshot_resolver(mem, spec, bound, revs)
            try:
                hit = all(bool(cond.evaluate(resolve)) for cond in first)
            except NotReady:
                hit = False
            except EvalError:
                hit = True  # the full test raises the error, in the order the rule gives
            memo[key] = hit
        return hit

    gate.__signature__ = inspect.Signature(
        [inspect.Parameter(v, inspect.Parameter.KEYWORD_ONLY) for v in rev_vars])
    return gate


def conditions_hold(mem: Memory, spec: RuleSpec, bound: dict[str, Any], revs: dict[str, str]) -> bool:
    """Every item attribute the rule reads is known and every condition is true, at the
    revisions in the token."""
    resolve = snapshot_resolver(mem, spec, bound, revs)
    try:
        if spec.for_each:
            prefix = spec.for_each + "."
            for name in spec.names:  # every item attribute the rule reads must be known
                if name.startswith(prefix):
                    resolve(name)
        return all(bool(cond.evaluate(resolve)) for cond in spec.when)
    except NotReady:
        return False
    except EvalError as exc:
        raise RuleRuntimeError(spec, f"condition failed to evaluate: {exc}") from None
