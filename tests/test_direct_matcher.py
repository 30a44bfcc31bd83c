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


# Item revisions as engine/runtime/memory.Store declares them: each replaces the item's fact
# (retracted first), says which fact it revises and the attributes that changed
# (``revision_of``) and the attributes it has (``present``); rules whose last TEST declares
# what it reads of an item (``revision_reads``) and what must be there (``requires``) are
# skipped for a revision they cannot decide otherwise (issue #41: many per-candidate filters).
ATTRS = ("a", "b", "c")
ITEM_IDS = ("x", "y", "z")
REVISION_CHANGE = st.one_of(
    st.tuples(st.just("stage"), st.sampled_from(STAGES)),
    st.tuples(st.just("value"), st.sampled_from(KEYS)),
    st.tuples(st.just("item"), st.tuples(st.sampled_from(ITEM_IDS),
                                         st.dictionaries(st.sampled_from(ATTRS), st.integers(0, 2),
                                                         max_size=2))),
    st.tuples(st.just("reject"), st.sampled_from(ITEM_IDS)),
    st.tuples(st.just("fire"), st.integers(1, 3)),
)


def _revision_rules(fired: list, table: dict) -> dict[str, Rule]:
    """Rules reading item attributes (of the revision in the token, from ``table``), each with
    the attributes it reads and requires declared as the compiler declares them."""
    attrs: dict[str, Rule] = {}
    order = 0
    for stage in STAGES:
        for n_keys in (0, 1):
            for reads in (("a",), ("b", "c"), ("a", "c"), ()):
                for required in {(), reads[:1]}:
                    keys = KEYS[order % 3:][:n_keys]
                    name = f"q{order}"
                    patterns: list = [Stage(name=stage)]
                    patterns += [Value(key=k, rev=getattr(MATCH, f"v{i}")) for i, k in enumerate(keys)]
                    patterns.append(Item(kind="c", id=MATCH.iid, rev=MATCH.irev))

                    def final(_reads=reads, _required=required, **bound):
                        have = table[(bound["iid"], bound["irev"])]
                        if any(r not in have for r in _required):
                            return False
                        seen = [have.get(r, -1) for r in _reads]
                        return (sum(seen) + sum(v for k, v in bound.items() if k.startswith("v"))
                                + len(bound["iid"])) % 3 != 0

                    def from_context(bound, _final=final):
                        return _final(**bound)

                    from_context.revision_reads = frozenset(reads)
                    from_context.requires = frozenset(required)
                    final.from_context = from_context
                    params = [f"v{i}" for i in range(len(keys))] + ["iid", "irev"]
                    final.__signature__ = inspect.Signature(
                        [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in params])
                    patterns.append(TEST(final))

                    def rhs(engine, _name=name, **context):
                        fired.append((_name, tuple(sorted(context.items()))))
                    rhs.load_order = order
                    attrs[name] = Rule(*patterns)(rhs)
                    order += 1
    return attrs


def _apply_revisions(engine: KnowledgeEngine, changes: list, table: dict, make) -> None:
    revs: dict = {}
    current: dict = {}  # item id -> (fact, attributes)
    rejected: set = set()
    for kind, arg in changes:
        engine.running = True  # as inside a firing
        if kind == "stage":
            engine.declare(make(Stage, name=arg))
        elif kind == "value":
            revs[arg] = revs.get(arg, 0) + 1
            engine.declare(make(Value, key=arg, rev=revs[arg]))
        elif kind == "item":
            iid, update = arg
            if iid in rejected:
                continue
            old = current.get(iid)
            have = dict(old[1]) if old else {}
            changed = {k for k, v in update.items() if k not in have or have[k] != v}
            if old and not changed:
                continue
            have.update(update)
            revs[iid] = revs.get(iid, 0) + 1
            table[(iid, revs[iid])] = dict(have)
            fact = make(Item, kind="c", id=iid, rev=revs[iid])
            if old:
                engine.retract(old[0])
                fact.revision_of = (old[0].__factid__, frozenset(changed))
            fact.present = frozenset(have)
            current[iid] = (engine.declare(fact), have)
        elif kind == "reject":
            if arg in current and arg not in rejected:
                engine.retract(current[arg][0])
                rejected.add(arg)
        else:
            engine.running = False
            engine.run(arg)
            continue
        engine.running = False  # a revision's retraction and declaration reach the matcher together
        _update(engine)
    engine.running = False
    _update(engine)


@settings(max_examples=150, deadline=None)
@given(st.lists(REVISION_CHANGE, max_size=40))
def test_skipped_revisions_give_the_agenda_and_firings_of_walking_every_one(changes):
    """With item revisions marked as the store marks them, the direct matcher (skipping what it
    may) gives experta's Rete network's agenda and firings, and its own when it walks every
    revision."""
    _same_with_and_without_skipping(changes)


def test_a_revision_after_a_pass_is_walked_again():
    """An item that failed a rule, then passed it (a read field changed), then changed a field the
    rule does not read: its new revision is walked (the pass is not forgotten), so the activation
    moves to the new fact instead of being lost."""
    _same_with_and_without_skipping([("stage", "a"), ("item", ("x", {"a": 2})), ("item", ("x", {"a": 0})),
                                     ("item", ("x", {"b": 1})), ("item", ("x", {"c": 1}))])


def _same_with_and_without_skipping(changes: list) -> None:
    results = []
    for matcher, skip in ((experta.matchers.ReteMatcher, None), (DirectMatcher, False), (DirectMatcher, True)):
        fired: list = []
        table: dict = {}
        attrs = {"__strategy__": StableStrategy, "__matcher__": matcher, **_revision_rules(fired, table)}
        engine = type("E", (PlainFactEngine,), attrs)()
        engine.reset()
        if skip is not None:
            assert type(engine.matcher) is DirectMatcher
            engine.matcher.skip_revisions = skip
        _apply_revisions(engine, changes, table, plain_fact)
        engine.run()
        results.append((_agenda(engine), fired))
    assert results[0] == results[1] == results[2]


FILTERS = "".join(f"""\
- id: test.filter-{i}
  title: {{en: filter {i}, zh: filter {i}}}
  source: {{guideline: G-SLA-001}}
  stage: filters
  for_each: candidate
  when: ["candidate.tpot_ms_hi != None", "candidate.tpot_ms_hi > {8 + 4 * i}", "candidate.gpus_per_replica > {i % 3}"]
  then: [{{reject: {{}}}}]
  because: {{en: "filter {i}", zh: "filter {i}"}}
""" for i in range(12))


def test_quick_item_checks_give_the_same_plan_with_fewer_tests(tmp_path, monkeypatch):
    """A for-each rule that begins with conditions on the item alone is refuted on an item
    revision once, not once per token of its other facts (compiler.leading_item_check): per-
    candidate threshold filters reject the same candidates, the plan is the same, the
    condition tests fewer."""
    import json

    from conftest import EXAMPLES

    from servewise.engine.app.inputs import load_workload
    from servewise.engine.app.plan import plan_workload
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.runtime import compiler

    (tmp_path / "filters.yaml").write_text(FILTERS, encoding="utf-8")
    workload, defaults = load_workload(EXAMPLES / "chat-8b-small.yaml")

    def plan() -> tuple[str, int]:
        rb = load_rules([tmp_path])
        rb.engines.clear()  # compiled now, with leading_item_check as it stands
        before = compiler.WORK["condition_tests"]
        result = plan_workload(workload, defaults, rb)
        return json.dumps(result.plan, sort_keys=True), compiler.WORK["condition_tests"] - before

    quick, quick_tests = plan()
    monkeypatch.setattr(compiler, "leading_item_check", lambda spec, binding: None)
    full, full_tests = plan()
    assert quick == full
    assert any(r["rule"].startswith("test.filter-") for r in json.loads(quick)["rejected"])
    assert quick_tests < full_tests, (quick_tests, full_tests)
