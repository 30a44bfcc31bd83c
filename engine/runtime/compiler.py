"""Rules → experta: each rule spec becomes an experta ``Rule`` over identity-and-revision facts.

The LHS is ``Stage``, one ``Value`` pattern per global name read (binding its revision), for a
for-each rule a ``TEST`` of its leading conditions on global values (:func:`global_gate`), the
``Item`` pattern last (so an item change passes a single join) and a ``TEST`` that evaluates the
rule's conditions against the revisions in the token: a pure function of the matched facts, as
a Rete network requires. Being pure, its result is remembered per values read (see
:func:`compile_rule`). Compiled rules read the run through a :class:`Binding`, so a built engine
is reused by the next run of the same rules (:func:`acquire_engine`).
"""

from __future__ import annotations

import inspect
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from servewise.engine.lang.expr import EvalError
from servewise.engine.lang.rulebase import RuleSpec
from servewise.engine.runtime.experta_compat import (
    MATCH,
    TEST,
    KnowledgeEngine,
    PlainFactEngine,
    Rule,
    StableStrategy,
    plain_fact,
)
from servewise.engine.runtime.memory import Item, Memory, Stage, Value
from servewise.engine.runtime.resolve import NotReady, snapshot_resolver, with_lets
from servewise.engine.runtime.runtime_errors import RuleRuntimeError

# Process-wide work counters (condition tests run by the Rete network, activations the agenda
# fired, rule firings recorded): read by the benchmark and by the CI guard on planning work
# (tests/test_plan_work.py). Compare before/after values; never reset by the engine.
WORK: Counter = Counter()

_MISSING = object()  # an item attribute not derived yet (in condition-test memo keys)
_EMPTY: dict[str, Any] = {}

Fire = Callable[[RuleSpec, "str | None"], bool]  # True: fired, or a repeat of values seen


class Binding:
    """What the compiled rules of an engine read while they run: the working memory and the
    firing callback of the run that uses the engine now, and the per-run memos of their tests.
    An engine is reused by later runs of the same rules (see :func:`acquire_engine`); ``bind``
    points it at a new run and forgets everything remembered for the previous one."""

    def __init__(self) -> None:
        self.mem: Memory = Memory()
        self.fire: Callable[[], Fire] = _no_run
        self.memos: list[dict | set] = []

    def bind(self, mem: Memory, fire: Callable[[], Fire]) -> None:
        """``fire()`` gives the firing callback (a weak method: the run's runner owns the engine)."""
        self.mem, self.fire = mem, fire
        for memo in self.memos:
            memo.clear()

    def memo(self, kind: type) -> Any:
        """A dict or set that is emptied whenever the engine is bound to a new run."""
        out = kind()
        self.memos.append(out)
        return out


def _rhs_shape(engine: Any, **context: Any) -> None:  # pragma: no cover - only its signature is used
    """The signature of every compiled rule's right-hand side."""


_RHS_SIGNATURE = inspect.signature(_rhs_shape)


def _unbound(spec: RuleSpec, iid: str | None) -> bool:  # pragma: no cover - never reached
    raise RuntimeError("an engine fired without a run")


def _no_run() -> Fire:
    return _unbound


def build_engine(rules: list[RuleSpec], binding: Binding, matcher: type,
                 check_time: Callable[[str], None]) -> KnowledgeEngine:
    """A reset experta engine whose rules read ``binding.mem`` and call ``binding.fire()(spec,
    item_id)``."""
    attrs: dict[str, Any] = {"__strategy__": StableStrategy, "__matcher__": matcher}
    for spec in rules:
        check_time("compiling the rules")
        attrs[f"r{spec.load_order:05d}"] = compile_rule(spec, binding)
    engine = type("ServewiseEngine", (PlainFactEngine,), attrs)()
    engine.binding = binding
    engine.reset()
    return engine


def acquire_engine(rules: list[RuleSpec], pool: dict[tuple, list[KnowledgeEngine]], matcher: type,
                   check_time: Callable[[str], None], mem: Memory, fire: Callable[[], Fire]) -> KnowledgeEngine:
    """An engine for ``rules`` bound to this run: a reset one from ``pool`` (built by an earlier run
    of the same rule objects with the same matcher, e.g. another pool of a several-model plan), else
    a new one. Give it back with :func:`release_engine` when the run is over."""
    key = (matcher, tuple(map(id, rules)))
    free = pool.get(key)
    if free:
        engine = free.pop()
        engine.reset()
    else:
        engine = build_engine(rules, Binding(), matcher, check_time)
        engine.pool_key = key
    engine.binding.bind(mem, fire)
    return engine


def release_engine(engine: KnowledgeEngine, pool: dict[tuple, list[KnowledgeEngine]]) -> None:
    """Return an engine whose run is over to ``pool`` (its memory is emptied when it is reused)."""
    engine.binding.bind(Memory(), _no_run)
    pool.setdefault(engine.pool_key, []).append(engine)


def condition_attrs(spec: RuleSpec) -> tuple[str, ...]:
    """The item attributes a for-each rule's condition test reads (its names and conditions)."""
    prefix = f"{spec.for_each}."
    return tuple(dict.fromkeys(spec.item_names + tuple(
        n[len(prefix):] for e in spec.when for n in spec.expand(e.names) if n.startswith(prefix))))


def compile_rule(spec: RuleSpec, binding: Binding) -> Rule:
    # patterns built as plain facts: their values are text or experta's (hashable) variables, which
    # experta's per-field freeze would return unchanged
    patterns: list[Any] = [plain_fact(Stage, name=spec.stage)]
    params: list[str] = []
    revs: dict[str, str] = {}
    for i, name in enumerate(spec.global_names):
        var = f"v{i}"
        revs[name] = var
        patterns.append(plain_fact(Value, key=name, rev=getattr(MATCH, var)))
        params.append(var)
    kind = spec.for_each
    if kind:
        gate = global_gate(spec, binding, revs)
        if gate is not None:  # conditions on global values first: items never join a rule that is off
            patterns.append(TEST(gate))
        # last, so an item change passes one join; a rejected item's fact is retracted,
        # so for-each rules simply stop seeing it
        patterns.append(plain_fact(Item, kind=kind, id=MATCH.iid, rev=MATCH.irev))
        params += ["iid", "irev"]
    rev_vars = tuple(revs.values())
    item_attrs = condition_attrs(spec) if kind else ()
    memo: dict[tuple, bool] = binding.memo(dict)
    done: set[tuple] = binding.memo(set)  # keys of tokens whose activation fired (or was a repeat)

    revs_of = operator.itemgetter(*rev_vars) if rev_vars else None
    one_rev = len(rev_vars) == 1
    # where in a key the identities of the item attributes the rule reads sit: one missing and
    # the test is False (conditions_hold checks them first), without evaluating anything
    needed = set(spec.item_names) - {"id"}
    required = tuple(len(rev_vars) + 1 + i for i, a in enumerate(item_attrs) if a in needed)
    missing = id(_MISSING)

    missings = (_MISSING,) * len(item_attrs)

    def key_of(bound: dict[str, Any]) -> tuple:
        # the values the rule reads, identified: global values by revision, item attributes by
        # identity (a new item revision copies the unchanged values, and every revision stays in
        # memory, so an identity is never reused)
        key: tuple = (revs_of(bound),) if one_rev else (revs_of(bound) if revs_of else ())
        if kind:
            iid = bound["iid"]
            attrs = binding.mem.item_revs.get((kind, iid, bound["irev"]), _EMPTY)
            key += (iid, *map(id, map(attrs.get, item_attrs, missings)))
        return key

    def test_context(bound: dict[str, Any]) -> bool:
        # A pure function of the matched fact revisions, so its result is remembered per values
        # read: retracting a token, and an item revision that changed only attributes this rule
        # does not read, cost a lookup. Once an activation for these values has run, the same
        # values cannot fire the rule again (content-based refraction, see Runner._fire): no new
        # activation is made for them, which would only be skipped.
        if kind:  # key_of written out, the item's attributes kept for the conditions
            iid = bound["iid"]
            attrs = binding.mem.item_revs.get((kind, iid, bound["irev"]), _EMPTY)
            key = ((revs_of(bound),) if one_rev else (revs_of(bound) if revs_of else ())) + (
                iid, *map(id, map(attrs.get, item_attrs, missings)))
        else:
            key, attrs = key_of(bound), _EMPTY
        if key in done:
            return False
        hit = memo.get(key)
        if hit is None:
            WORK["condition_tests"] += 1
            for i in required:
                if key[i] == missing:
                    hit = memo[key] = False
                    return hit
            # every item attribute it reads is known (the key says so): the conditions
            hit = memo[key] = hold(bound, attrs)
        return hit

    hold = _fast_conditions(spec, binding, revs)
    quick = leading_item_check(spec, binding) if kind else None
    if quick is not None:
        test_context.quick = quick  # DirectMatcher runs it once per item revision (see there)

    def test(**bound):
        return test_context(bound)

    test.from_context = test_context  # the tuned TEST node passes the token's context as it is
    if kind:
        # what it reads of an item revision: the attributes in its key (a revision that changed
        # none of them gives the same key, so the same answer: DirectMatcher skips it)
        test_context.revision_reads = frozenset(item_attrs)
        # the attributes an item revision must have for the test to hold (False at once without
        # one: DirectMatcher does not walk such a revision, as memory.Store marks what it has)
        test_context.requires = frozenset(needed)
    test.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in params])

    def rhs(engine, **context):
        WORK["activations"] += 1
        if binding.fire()(spec, context.get("iid")):
            done.add(key_of(context))

    # experta rebuilds Rule objects from the wrapped function (update_wrapper copies its
    # __dict__), so the tie-break key must live on the function
    rhs.__name__ = spec.id
    rhs.load_order = spec.load_order
    rhs.__signature__ = _RHS_SIGNATURE  # experta reads it once per Rule built (inspect is slow)
    if spec.order_by is not None:
        rhs.order_key = _order_key(spec, binding)
    return Rule(*patterns, TEST(test), salience=spec.salience)(rhs)


def _order_key(spec: RuleSpec, binding: Binding) -> Callable[[dict[str, Any]], float]:
    """The agenda position of an activation of a rule with ``order_by`` (StableStrategy): the
    expression's value on the item revision in the activation's token (it reads the item only);
    unknown or not a number sorts last."""
    expr = spec.order_by

    def order_key(context: dict[str, Any]) -> float:
        try:
            value = expr.evaluate(snapshot_resolver(binding.mem, spec, context, {}))
        except (NotReady, EvalError):
            return float("inf")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("inf")

    return order_key


def all_true(conds: Sequence[Any], resolve: Callable[[str], Any]) -> bool:
    """Every condition true, in order (the first false one ends it), each through its compiled
    function directly (what ``Expr.evaluate`` wraps in error translation): an error propagates."""
    for cond in conds:
        fn = cond._fn
        if fn is None:
            fn = cond._link()
        if not fn(resolve):
            return False
    return True


def leading_item_check(spec: RuleSpec, binding: Binding) -> Callable[[dict[str, Any]], bool] | None:
    """A quick refutation of a for-each rule's test on one item revision: the conditions it
    begins with that read only the item's attributes (no function, no let, no global value),
    evaluated in order on the revision alone. It returns False only where the rule's test is False
    too, whatever the other facts of the token: that test evaluates the same conditions first, in
    the same order (:func:`conditions_hold`), and an attribute not known makes it False as well.
    Any error returns True: the full test runs and reports it as before. None when the rule does
    not begin with such a condition.

    DirectMatcher runs it before it tests the revision with each token of the rule's other facts,
    so a revision that fails costs one evaluation of those conditions instead of a test (a key
    built, a memo looked up) per token: what a knowledge base of many per-candidate threshold
    filters spends its time on."""
    kind = spec.for_each
    prefix = f"{kind}."
    cut = len(prefix)
    lead = []
    for cond in spec.when:
        if cond.functions or not cond.names or not all(n.startswith(prefix) for n in cond.names):
            break
        lead.append(cond)
    if not lead:
        return None

    def quick(binds: dict[str, Any]) -> bool:
        iid = binds.get("iid")
        attrs = binding.mem.item_revs.get((kind, iid, binds.get("irev")))
        if attrs is None:
            return True

        def resolve(name: str) -> Any:
            attr = name[cut:]
            if attr == "id":
                return iid
            if attr not in attrs:
                raise NotReady(name)
            return attrs[attr]

        try:  # (not counted in WORK: a refutation, not the rule's test)
            return all_true(lead, resolve)
        except NotReady:
            return False
        except Exception:  # noqa: BLE001 - the full test reports it
            return True

    return quick


def global_gate(spec: RuleSpec, binding: Binding, revs: dict[str, str]) -> Callable[..., bool] | None:
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
    memo: dict[tuple, bool] = binding.memo(dict)

    revs_of = operator.itemgetter(*rev_vars)

    def gate_context(bound: dict[str, Any]) -> bool:
        key = revs_of(bound)
        hit = memo.get(key)
        if hit is None:
            WORK["condition_tests"] += 1
            resolve = snapshot_resolver(binding.mem, spec, bound, revs)
            try:
                hit = all(bool(cond.evaluate(resolve)) for cond in first)
            except NotReady:
                hit = False
            except EvalError:
                hit = True  # the full test raises the error, in the order the rule gives
            memo[key] = hit
        return hit

    def gate(**bound):
        return gate_context(bound)

    gate.from_context = gate_context
    gate.__signature__ = inspect.Signature(
        [inspect.Parameter(v, inspect.Parameter.KEYWORD_ONLY) for v in rev_vars])
    return gate


def _fast_conditions(spec: RuleSpec, binding: Binding,
                     revs: dict[str, str]) -> Callable[[dict[str, Any], dict[str, Any]], bool]:
    """:func:`conditions_hold` of a token whose item attributes the rule reads are all known: the
    same answer, with less around each condition (a resolver of this rule's names made once, the
    conditions' compiled functions called directly). Any error, and a condition that cannot be
    read, goes the full way (the conditions are pure: the same error, or the same False)."""
    kind = spec.for_each
    prefix = f"{kind}." if kind else ""
    cut = len(prefix)
    when = spec.when
    lets = bool(spec.lets)
    routes: dict[str, str | None] = {}  # name -> item attribute, or None for a global value
    get_var = revs.get

    def hold(bound: dict[str, Any], attrs: dict[str, Any]) -> bool:
        """``attrs``: the item revision's attributes (of the token's ``iid`` and ``irev``)."""
        mem = binding.mem
        value_revs = mem.value_revs

        def resolve(name: str) -> Any:
            try:
                attr = routes[name]
            except KeyError:
                attr = routes[name] = name[cut:] if prefix and name.startswith(prefix) else None
            if attr is not None:
                if attr == "id":
                    return bound["iid"]
                if attr not in attrs:
                    raise NotReady(name)
                return attrs[attr]
            var = get_var(name)
            if var is None:
                raise NotReady(name)
            return value_revs[(name, bound[var])]

        r = with_lets(spec, resolve) if lets else resolve
        try:
            return all_true(when, r)
        except NotReady:
            return False
        except Exception:  # noqa: BLE001 - the full path raises it as conditions_hold does
            return conditions_hold(mem, spec, bound, revs, known=True)

    return hold


def conditions_hold(mem: Memory, spec: RuleSpec, bound: dict[str, Any], revs: dict[str, str],
                    known: bool = False) -> bool:
    """Every item attribute the rule reads is known and every condition is true, at the
    revisions in the token (``known``: the caller found every item attribute the rule reads in
    the revision already)."""
    resolve = snapshot_resolver(mem, spec, bound, revs)
    try:
        if spec.for_each and not known:
            prefix = spec.for_each + "."
            for name in spec.names:  # every item attribute the rule reads must be known
                if name.startswith(prefix):
                    resolve(name)
        for cond in spec.when:
            if not cond.evaluate(resolve):
                return False
        return True
    except NotReady:
        return False
    except EvalError as exc:
        raise RuleRuntimeError(spec, f"condition failed to evaluate: {exc}", exc) from None
