"""DirectMatcher finds the activations experta's Rete network finds, for the rule shape the
compiler gives every rule (facts of constants and once-bound variables, and TESTs)."""

from __future__ import annotations

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from servewise.engine.runtime.experta_compat import (
    MATCH,
    NOT,
    TEST,
    DirectMatcher,
    Fact,
    IndexedReteMatcher,
    KnowledgeEngine,
    PlainFactEngine,
    Rule,
    StableStrategy,
    experta,
    plain_fact,
)


class Stage(Fact):
    pass


class Value(Fact):
    pass


class Item(Fact):
    pass


STAGES = ("a", "b")
KEYS = ("k0", "k1", "k2")


def _rules(fired: list[tuple[str, tuple]]) -> dict[str, Rule]:
    """Rules of the compiled shape: a stage, values bound by revision, an optional gate TEST on
    the values, an optional item, and a final TEST that reads items and values."""
    attrs: dict[str, Rule] = {}

    def make(name: str, stage: str, keys: tuple[str, ...], item: bool, gate: bool, order: int) -> None:
        patterns: list = [Stage(name=stage)]
        for i, key in enumerate(keys):
            patterns.append(Value(key=key, rev=getattr(MATCH, f"v{i}")))
        if gate:
            def gate_test(**bound):
                return sum(bound.values()) % 3 != 0
            gate_test.__signature__ = inspect.Signature(
                [inspect.Parameter(f"v{i}", inspect.Parameter.KEYWORD_ONLY)
                 for i in range(len(keys))])
            patterns.append(TEST(gate_test))
        if item:
            patterns.append(Item(kind="c", id=MATCH.iid, rev=MATCH.irev))

        def final(**bound):
            return (sum(v for v in bound.values() if isinstance(v, int)) + len(str(bound.get("iid", "")))) % 2 == 0

        params = [f"v{i}" for i in range(len(keys))] + (["iid", "irev"] if item else [])
        final.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in params])
        patterns.append(TEST(final))

        def rhs(engine, **context):
            fired.append((name, tuple(sorted(context.items()))))
        rhs.load_order = order
        attrs[name] = Rule(*patterns)(rhs)

    order = 0
    for stage in STAGES:
        for n_keys in (0, 1, 2):
            for item in (False, True):
                for gate in ((False, True) if n_keys else (False,)):
                    keys = KEYS[order % 3:][:n_keys] or KEYS[:n_keys]
                    make(f"r{order}", stage, tuple(keys), item, gate, order)
                    order += 1
    return attrs


def _engine(matcher: type, fired: list, base: type = KnowledgeEngine) -> KnowledgeEngine:
    attrs = {"__strategy__": StableStrategy, "__matcher__": matcher, **_rules(fired)}
    engine = type("E", (base,), attrs)()
    engine.reset()
    return engine


def _agenda(engine: KnowledgeEngine) -> list[tuple[str, frozenset]]:
    return [(a.rule.__name__, frozenset(f.__factid__ for f in a.facts)) for a in engine.agenda.activations]


# a change: declare a stage / value revision / item revision, retract one of them, run n firings,
# or a batch (several changes before the agenda is updated, as a firing rule makes them)
CHANGE = st.one_of(
    st.tuples(st.just("stage"), st.sampled_from(STAGES)),
    st.tuples(st.just("value"), st.sampled_from(KEYS)),
    st.tuples(st.just("item"), st.sampled_from(("x", "y", "z"))),
    st.tuples(st.just("retract"), st.integers(0, 30)),
    st.tuples(st.just("fire"), st.integers(1, 3)),
)


def _apply(engine: KnowledgeEngine, changes: list, batch: bool, make=lambda cls, **kw: cls(**kw)) -> None:
    revs: dict = {}
    live: list = []  # facts the matcher has seen (a batch retracts only those: experta's Rete
    fresh: list = []  # fails on a fact declared and retracted before it saw the declaration)
    for kind, arg in changes:
        if batch:
            engine.running = True  # as inside a firing: the agenda waits for the next run step
        if kind == "stage":
            fact = engine.declare(make(Stage, name=arg))
        elif kind == "value":
            revs[arg] = revs.get(arg, 0) + 1
            fact = engine.declare(make(Value, key=arg, rev=revs[arg]))
        elif kind == "item":
            revs[arg] = revs.get(arg, 0) + 1
            fact = engine.declare(make(Item, kind="c", id=arg, rev=revs[arg]))
        elif kind == "retract":
            if live:
                engine.retract(live.pop(arg % len(live)))
            continue
        else:
            engine.running = False
            engine.run(arg)
            live += fresh
            fresh.clear()
            continue
        if fact is not None:
            (fresh if batch else live).append(fact)
    engine.running = False
    _update(engine)


def _update(engine: KnowledgeEngine) -> None:
    """Apply what is pending to the agenda without firing (as the next run step does)."""
    added, removed = engine.get_activations()
    engine.strategy.update_agenda(engine.agenda, added, removed)


@settings(max_examples=150, deadline=None)
@given(st.lists(CHANGE, max_size=40), st.booleans())
def test_same_agenda_and_firings_as_experta_rete(changes, batch):
    results = []
    for matcher, base, make in ((experta.matchers.ReteMatcher, KnowledgeEngine, lambda cls, **kw: cls(**kw)),
                                (DirectMatcher, KnowledgeEngine, lambda cls, **kw: cls(**kw)),
                                (DirectMatcher, PlainFactEngine, plain_fact)):  # as the runner runs
        fired: list = []
        engine = _engine(matcher, fired, base)
        _apply(engine, changes, batch, make)
        engine.run()
        results.append((_agenda(engine), fired))
    assert results[0] == results[1] == results[2]


def test_plain_facts_are_the_facts_experta_builds():
    for cls, fields in ((Stage, {"name": "a"}), (Value, {"key": "k", "rev": 3}), (Item, {"kind": "c", "id": "x", "rev": 1})):
        fact, plain = cls(**fields), plain_fact(cls, **fields)
        assert type(plain) is cls and plain == fact and dict(plain.items()) == dict(fact.items())
        assert plain.copy() == fact.copy() and plain.__factid__ is None


def test_the_compiled_rule_base_is_matched_directly():
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.runtime.compiler import Binding, build_engine

    engine = build_engine(load_rules().rules, Binding(), DirectMatcher, lambda phase: None)
    assert type(engine.matcher) is DirectMatcher


def test_other_rule_shapes_fall_back_to_the_rete_network():
    """A variable bound in two patterns is a join condition, NOT a negation: Rete's job."""
    def rhs(engine, **context):
        pass

    for rule in (Rule(Value(key="a", rev=MATCH.r), Value(key="b", rev=MATCH.r))(rhs),
                 Rule(Value(key="a"), NOT(Value(key="b")))(rhs)):
        engine = type("E", (KnowledgeEngine,), {"__matcher__": DirectMatcher, "r": rule})()
        assert type(engine.matcher) is IndexedReteMatcher
