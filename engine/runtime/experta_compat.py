"""The only module that imports experta.

experta 1.9.4 pins ``frozendict==1.2``, whose class body reads ``collections.Mapping``; that alias
was removed in Python 3.10. We provide the missing ABC aliases only while experta is first imported
and remove them afterwards (frozendict reads them only when its class is created), so a plain
``pip install`` works on Python 3.10-3.13 with ``pip check`` clean.

It also replaces experta's conflict-resolution strategy (see :class:`StableStrategy`), fixing two
bugs documented in ``EXPERTA-NOTES.md``: non-deterministic order among ties and stale activations.
"""

from __future__ import annotations

import collections
import collections.abc
import logging
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Mapping
from typing import Any

_ABC_ALIASES = ("Mapping", "MutableMapping", "Sequence", "Iterable", "Hashable", "Callable")


def _import_experta():
    added = [n for n in _ABC_ALIASES if not hasattr(collections, n)]
    for name in added:
        setattr(collections, name, getattr(collections.abc, name))
    # `import experta` calls logging.basicConfig(); give the root logger a handler first so
    # that call is a no-op and nothing of ours is printed to stderr.
    root = logging.getLogger()
    had_handlers = bool(root.handlers)
    if not had_handlers:
        root.addHandler(logging.NullHandler())
    try:
        import experta
        import experta.abstract
        import experta.agenda
    finally:
        for name in added:
            delattr(collections, name)
    for name in ("experta", "experta.watchers"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return experta


experta = _import_experta()

from experta import (  # noqa: E402
    AS,
    MATCH,
    NOT,
    TEST,
    Fact,
    KnowledgeEngine,
    Rule,
)
from experta import watchers as _watchers  # noqa: E402
from experta.abstract import Matcher, Strategy  # noqa: E402
from experta.activation import Activation  # noqa: E402
from experta.conditionalelement import TEST as _TEST  # noqa: E402
from experta.fact import InitialFact  # noqa: E402
from experta.factlist import FactList  # noqa: E402
from experta.fieldconstraint import ANDFC, NOTFC, ORFC, FieldConstraint, L, W  # noqa: E402
from experta.matchers import ReteMatcher  # noqa: E402
from experta.matchers.rete.abstract import Node  # noqa: E402
from experta.matchers.rete.check import (  # noqa: E402
    FactCapture,
    FeatureCheck,
    SameContextCheck,
    TypeCheck,
    WhereCheck,
)
from experta.matchers.rete.mixins import AnyChild, ChildNode, NoMemory  # noqa: E402
from experta.matchers.rete.nodes import (  # noqa: E402
    BusNode,
    ConflictSetNode,
    FeatureTesterNode,
    OrdinaryMatchNode,
    WhereNode,
)
from experta.matchers.rete.token import Token, TokenInfo  # noqa: E402
from experta.matchers.rete.utils import extract_facts, generate_checks, prepare_rule  # noqa: E402
from experta.strategies import DepthStrategy as StockStrategy  # noqa: E402  (for the bug tests)


class StableStrategy(Strategy):
    """Total, stable agenda order with exact removal.

    Key: higher salience first, then lower rule load order (``load_order`` set on the rule's
    function: experta rebuilds Rule objects from it), then, for a rule with ``order_by``, the
    smaller value of its ``order_key`` (engine/runtime/compiler.py), then older facts (smaller fact
    ids, compared as sorted tuples). Every activation has a distinct key because an activation is one
    rule on one tuple of facts, so the order never depends on hash iteration order. Removal
    deletes every activation equal to the removed one among all activations with its key (found
    by bisection in the sorted agenda; the stock strategy inspected only neighbours of a bisect
    position and left stale activations behind).
    """

    @staticmethod
    def key(activation) -> tuple:
        rule = activation.rule
        facts = tuple(sorted(f["__factid__"] for f in activation.facts))
        # the agenda pops from the end: the activation to run next must sort last
        order = getattr(rule, "order_key", None)
        return (rule.salience, -getattr(rule, "load_order", 0),
                -order(activation.context) if order is not None else 0.0, tuple(-i for i in facts))

    @staticmethod
    def identity(activation) -> tuple:
        """One rule on one set of facts: what removal must match exactly."""
        return (id(activation.rule), frozenset(f["__factid__"] for f in activation.facts))

    def _update_agenda(self, agenda, added, removed):
        # the agenda stays sorted by key, so an activation is found by bisection: equal identities
        # have equal keys, and every activation with the removed one's key is inspected
        acts = agenda.activations
        for act in removed:
            key, gone = self.key(act), self.identity(act)
            lo = bisect_left(acts, key, key=_agenda_key)
            hi = bisect_right(acts, key, lo=lo, key=_agenda_key)
            if hi > lo:
                acts[lo:hi] = [a for a in acts[lo:hi] if a.identity != gone]
        for act in added:
            act.key = self.key(act)
            act.identity = self.identity(act)
            insort(acts, act, key=_agenda_key)


def _agenda_key(activation) -> tuple:
    return activation.key


INDEX_MIN_CHILDREN = 4  # below this a linear scan of the sibling tests is as fast as a dict


def _literal_field(node: Any) -> str | None:
    """The field a one-input test node compares with a constant (``key == 'x'``), if that is all it does."""
    if not isinstance(node, FeatureTesterNode):
        return None
    check = node.matcher
    if not isinstance(check, FeatureCheck) or not isinstance(check.how, L) or check.how.__bind__ is not None:
        return None
    if not isinstance(check.what, str) or "__" in check.what:
        return None  # nested paths (``a__b``) and dunder fields keep experta's own lookup
    try:
        hash(check.how.value)
    except TypeError:
        return None
    return check.what


class IndexedTesterNode(AnyChild, NoMemory, Node):
    """Sibling alpha tests ``field == constant`` replaced by one dict lookup on the fact's field.

    experta's alpha network tries every sibling test in turn, so a ``Value`` fact visits one node
    per key any rule reads (hundreds); this node sends the token only to the children whose
    constant equals the fact's value. ``children`` still lists them all, so reset and the search
    for conflict-set nodes walk the same network. Dict lookup and ``==`` agree for the hashable
    constants indexed here; an unhashable fact value falls back to trying every test.
    """

    def __init__(self, what: str, children: list[Any]):
        super().__init__()
        self.what = what
        self.children = list(children)
        self.index: dict[Any, list[Any]] = {}
        for child in self.children:
            self.index.setdefault(child.node.matcher.how.value, []).append(child)

    def activate(self, token) -> None:
        fact = next(iter(token.data))
        try:
            value = fact[self.what]
        except (KeyError, TypeError, IndexError):
            return
        try:
            targets = self.index.get(value, ())
        except TypeError:
            targets = self.children
        for child in targets:
            child.callback(token)

    def _activate(self, token) -> None:  # pragma: no cover - activate() is the entry point
        self.activate(token)

    def __str__(self) -> str:  # pragma: no cover
        return f"IndexedTesterNode: {self.what} ({len(self.index)} values)"


def index_alpha_network(node: Any) -> int:
    """Replace groups of sibling constant tests under ``node`` by :class:`IndexedTesterNode`;
    returns how many groups were indexed. Only the alpha part (one-input test nodes) is touched."""
    groups: dict[str, list[Any]] = {}
    for child in node.children:
        what = _literal_field(child.node)
        if what is not None:
            groups.setdefault(what, []).append(child)
    indexed = {what: kids for what, kids in groups.items() if len(kids) >= INDEX_MIN_CHILDREN}
    done = 0
    if indexed:
        new_children, placed = [], set()
        for child in node.children:
            what = _literal_field(child.node)
            if what in indexed:
                if what not in placed:
                    placed.add(what)
                    dispatcher = IndexedTesterNode(what, indexed[what])
                    new_children.append(ChildNode(dispatcher, dispatcher.activate))
                continue
            new_children.append(child)
        node.children = new_children
        done += len(indexed)
    for child in node.children:
        grand = child.node
        if isinstance(grand, IndexedTesterNode):
            for sub in grand.children:
                done += index_alpha_network(sub.node)
        elif isinstance(grand, (FeatureTesterNode, BusNode)):
            done += index_alpha_network(grand)
    return done


_VALID = Token.TagType.VALID


def _token(tag, data, context) -> Token:
    """An experta ``Token`` without the type assertions of ``Token.__new__`` (the nodes below only
    ever build tokens from the facts and contexts of other tokens)."""
    return tuple.__new__(Token, (tag, data, context))


def _remember(memory: dict, tag, data, context) -> Any:
    """Add (valid token) or remove (invalid token) one entry of a join's memory; the key is the
    token's facts (the context is a function of them at a given node)."""
    key = data if type(data) is frozenset else frozenset(data)
    entry = memory.get(key)
    if tag is _VALID:
        if entry is None:
            memory[key] = [key, context, 1]
        else:
            entry[2] += 1
    elif entry is not None:
        entry[2] -= 1
        if not entry[2]:
            del memory[key]
    return key


class FastJoinNode(OrdinaryMatchNode):
    """experta's two-input join node, with the same matches: memories hashed by the token's facts
    (experta keeps lists and removes by a linear search), the incoming token not copied (a join
    never changes it) and no logging call per pair. Entries keep experta's order (insertion order)
    and multiplicity (a count), so the same tokens reach the children.

    A join whose right input is an :class:`AlphaMemory` reads that shared memory instead of a
    copy of its own, and is skipped while its left memory is empty ("left unlinking")."""

    shared: AlphaMemory | None = None

    def _reset(self) -> None:
        self.left_memory: dict[Any, list[Any]] = {}
        self.right_memory: dict[Any, list[Any]] = {}

    def activate_left(self, token) -> None:
        tag, data, context = token
        _remember(self.left_memory, tag, data, context)
        right = self.shared.memory if self.shared is not None else self.right_memory
        if right:
            self._emit(tag, data, context, right, True)

    def activate_right(self, token) -> None:
        tag, data, context = token
        _remember(self.right_memory, tag, data, context)
        if self.left_memory:
            self._emit(tag, data, context, self.left_memory, False)

    def activate_right_shared(self, token) -> None:
        """A right activation whose token the shared alpha memory has already stored."""
        self._emit(token.tag, token.data, token.context, self.left_memory, False)

    _activate_left = activate_left
    _activate_right = activate_right

    def _emit(self, tag, data, context, other: dict, is_left: bool) -> None:
        match, children = self.matcher, self.children
        own = {k: v for k, v in context.items() if isinstance(k, str)}
        for other_data, other_context, count in list(other.values()):
            if not (match(context, other_context) if is_left else match(other_context, context)):
                continue
            newcontext = dict(own)
            for k, v in other_context.items():
                if not isinstance(k, tuple):  # negated values are not needed any further
                    newcontext[k] = v
            newtoken = _token(tag, data | other_data, newcontext)
            for _ in range(count):
                for child in children:
                    child.callback(newtoken)


class AlphaMemory(AnyChild, Node):
    """The tokens of one alpha terminal (one fact pattern), kept once for every join that reads
    the pattern as its right input (experta keeps a copy per join). A join is activated only
    while its left memory holds a token: with an empty left memory a right activation joins
    nothing, and the join reads this memory when a left token arrives ("left unlinking",
    Doorenbos 1995)."""

    def _reset(self) -> None:
        self.memory: dict[Any, list[Any]] = {}

    def activate(self, token) -> None:
        _remember(self.memory, token.tag, token.data, token.context)
        for child in self.children:
            if child.node.left_memory:
                child.callback(token)

    def __str__(self) -> str:  # pragma: no cover
        return f"AlphaMemory ({len(self.children)} joins)"


def _fast_test(check: Any) -> tuple[str, bool, Any, Any] | bool:
    """``(field, is_literal, value, bind)`` for a test of one plain field against a literal
    (``key == 'x'``) or a wildcard that binds it (``rev=MATCH.v``), which :class:`FastFeatureTesterNode`
    runs inline with experta's result (``True`` or ``{bind: value}``); False for any other test."""
    if not isinstance(check, FeatureCheck) or not isinstance(check.what, str):
        return False
    what = check.what
    if "__" in what or what.startswith("_") or what.endswith("_") or what.isnumeric():
        return False
    how = check.how
    if type(how) is L:
        return (what, True, how.value, how.__bind__)
    if type(how) is W:
        return (what, False, None, how.__bind__)
    return False


class FastFeatureTesterNode(FeatureTesterNode):
    """experta's one-input test node without copying every token: a test that binds variables
    sends a new token with the extended context, one that only passes sends the token it got
    (no node downstream changes a token in place)."""

    _fast: Any = None  # how to run the test without experta's general check (see _fast_test)

    def activate(self, token) -> None:
        data = token.data
        if len(data) != 1:
            raise ValueError("a feature test needs a token of one fact")
        fact = next(iter(data))
        fast = self._fast
        if fast is None:
            fast = self._fast = _fast_test(self.matcher)
        if fast is False:
            match = self.matcher(fact)
        else:
            what, literal, value, bind = fast
            try:
                actual = fact[what]
            except (KeyError, IndexError, TypeError):
                return
            if literal and not actual == value:
                return
            match = {bind: actual} if bind is not None else True
        if not match:
            return
        if isinstance(match, Mapping):
            context = token.context
            for key, value in match.items():
                if isinstance(key, tuple):  # negated condition
                    if key[1] in context and context[key[1]] == value:
                        return
                else:
                    if context.get(key, value) != value:
                        return
                    if (False, key) in context and context[(False, key)] == value:
                        return
            context = dict(context)
            context.update(match)
            token = _token(token.tag, set(data), context)
        for child in self.children:
            child.callback(token)

    _activate = activate


class FastWhereNode(WhereNode):
    """experta's ``TEST`` node without the token copy (it only reads the token) and the logging
    call: the test gets the same keyword arguments, or, if it has a ``from_context`` function,
    that function gets the token's context (it reads the same bound variables)."""

    def _activate(self, token) -> None:
        check = self.matcher
        context = token.context
        direct = getattr(check.test, "from_context", None)  # a test that reads the context itself
        if direct(context) if direct is not None else check.test(
                **{k: context.get(k) for k in check.parameters}):
            for child in self.children:
                child.callback(token)

    activate = _activate


class FastConflictSetNode(ConflictSetNode):
    """experta's conflict-set node without the token copy (it only reads the token); it records
    itself in its matcher's dirty list, so a change asks only the nodes that saw a token."""

    dirty: list[Any] | None = None  # the matcher's list, set when the network is tuned
    is_dirty = False

    def _reset(self) -> None:
        self.memory = set()
        self.added, self.removed = set(), set()
        self.is_dirty = False

    def _activate(self, token) -> None:
        info = TokenInfo(token.data, token.context)
        activation = Activation(self.rule, info.data,
                                {k: v for k, v in token.context.items() if isinstance(k, str)})
        if token.tag is _VALID:
            if info in self.memory:
                return
            self.memory.add(info)
            if activation in self.removed:
                self.removed.remove(activation)
            else:
                self.added.add(activation)
        else:
            try:
                self.memory.remove(info)
            except ValueError:  # as experta (a set raises KeyError: an unknown token is a bug)
                return
            if activation in self.added:
                self.added.remove(activation)
            else:
                self.removed.add(activation)
        if not self.is_dirty and self.dirty is not None:
            self.is_dirty = True
            self.dirty.append(self)

    activate = _activate


_FAST_CLASSES = {OrdinaryMatchNode: FastJoinNode, WhereNode: FastWhereNode,
                 ConflictSetNode: FastConflictSetNode, FeatureTesterNode: FastFeatureTesterNode}


def tune_network(root: Any, dirty: list[Any]) -> int:
    """Swap experta's join, ``TEST`` and conflict-set nodes for the tuned subclasses above (same
    network, same matches) and rebind their parents' callbacks; returns how many nodes were
    swapped. Conflict-set nodes report to ``dirty``."""
    nodes, seen, todo = [], set(), [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        todo.extend(child.node for child in getattr(node, "children", None) or [])
    swapped = 0
    for node in nodes:
        fast = _FAST_CLASSES.get(type(node))
        if fast is not None:
            node.__class__ = fast
            node._reset()
            swapped += 1
        if isinstance(node, FastConflictSetNode):
            node.dirty = dirty
    for node in nodes:
        children = getattr(node, "children", None) or []
        for i, child in enumerate(children):
            target = child.node
            if type(target) in _FAST_CLASSES.values():
                name = getattr(child.callback, "__name__", "")
                children[i] = ChildNode(target, getattr(target, name.lstrip("_") or "activate"))
    return swapped


def plain_rule(rule: Any) -> bool:
    """A rule that is only facts with plain field values (no ``|``, ``~`` or ``&`` field
    constraints) and ``TEST`` conditions, a fact first: its disjunctive normal form is itself."""
    if not isinstance(rule, Rule) or not rule or not isinstance(rule[0], Fact):
        return False
    for ce in rule:
        if type(ce) is _TEST:
            continue
        if not isinstance(ce, Fact) or any(isinstance(v, (ORFC, NOTFC, ANDFC)) for v in ce.values()):
            return False
    return True


def wire_plain_rule(rule: Any, alpha_terminals: dict[Any, Any], memories: dict[int, AlphaMemory]) -> None:
    """The beta network of a plain rule, node for node as experta's ``wire_rule`` builds it: a
    join per further fact (left: the chain so far, right: the fact's alpha terminal), a ``TEST``
    node where the rule has one, and the conflict-set node last. A join's right input is the
    terminal's shared :class:`AlphaMemory` (one per terminal, in ``memories``) unless the rule
    uses the same pattern twice."""
    facts = [ce for ce in rule if isinstance(ce, Fact)]
    share = len(set(facts)) == len(facts)
    current = None
    for first, ce in zip(rule, rule[1:], strict=False):
        if type(ce) is _TEST:
            if current is None:
                current = alpha_terminals[first]
            node = FastWhereNode(WhereCheck(ce[0]))
            current.children.append(ChildNode(node, node.activate))  # a new node: no duplicate to check
        else:
            left = alpha_terminals[first] if current is None else current
            node = FastJoinNode(SameContextCheck())
            left.children.append(ChildNode(node, node.activate_left))
            terminal = alpha_terminals[ce]
            if share:
                memory = memories.get(id(terminal))
                if memory is None:
                    memory = memories[id(terminal)] = AlphaMemory()
                    terminal.add_child(memory, memory.activate)
                memory.children.append(ChildNode(node, node.activate_right_shared))
                node.shared = memory
            else:
                terminal.children.append(ChildNode(node, node.activate_right))
        current = node
    if current is None:
        current = alpha_terminals[rule[0]]
    csn = FastConflictSetNode(rule)
    current.children.append(ChildNode(csn, csn.activate))


class IndexedReteMatcher(ReteMatcher):
    """experta's Rete matcher, tuned: hashed constant tests in the alpha network (see
    :class:`IndexedTesterNode`), join, ``TEST`` and conflict-set nodes that do the same work
    faster (see :func:`tune_network`), and only the conflict-set nodes that saw a token asked
    for activations. The network (nodes and their wiring) is experta's own."""

    @staticmethod
    def prepare_ruleset(engine):
        """As experta's, but a rule that is already what ``prepare_rule`` makes of it (facts with
        plain field values and ``TEST``s, a fact first) is used as it is: rewriting it to
        disjunctive normal form rebuilds equal facts, most of the time spent building."""
        # new_conditions: a fresh rule, unbound from the engine instance, as prepare_rule returns
        return {rule.new_conditions(*rule) if plain_rule(rule) else prepare_rule(rule)
                for rule in engine.get_rules()}

    @staticmethod
    def build_alpha_part(ruleset, root_node):
        """experta's alpha network builder (same ranking of rules and checks, same sharing of
        test nodes), without its quadratic parts: the checks of each distinct pattern generated
        once, and a node's child for a check found in a dict instead of a scan of its children."""
        ruleset = set(ruleset)
        ruleset.add(Rule(InitialFact()))
        rule_facts = {rule: extract_facts(rule) for rule in ruleset}
        # one entry per distinct pattern (equal patterns share it): its checks, their rank sum,
        # the checks in tree order and its terminal; found by the pattern's identity after the
        # first lookup (comparing patterns for equality is most of the cost)
        entries: dict[Any, list[Any]] = {}
        by_id: dict[int, list[Any]] = {}
        for facts in rule_facts.values():
            for fact in facts:
                entry = entries.get(fact)
                if entry is None:
                    entry = entries[fact] = [set(generate_checks(fact)), 0, None, None, fact]
                by_id[id(fact)] = entry
        # experta ranks by every occurrence of a pattern: a pattern in n rules counts n times
        check_rank: collections.Counter = collections.Counter()
        for facts in rule_facts.values():
            for fact in facts:
                check_rank.update(by_id[id(fact)][0])
        for entry in entries.values():
            entry[1] = sum(check_rank[c] for c in entry[0])

        def weighted_check_sort(check):
            if isinstance(check, TypeCheck):
                return (float("inf"), hash(check))
            if isinstance(check, FactCapture):
                return (float("-inf"), hash(check))
            if isinstance(check, FeatureCheck):
                return (check_rank[check], hash(check))
            raise TypeError("Unknown check type.")  # pragma: no cover

        def weighted_rule_sort(rule):
            facts = rule_facts[rule]
            return sum(by_id[id(f)][1] for f in facts) / len(facts)

        children_by_check: dict[tuple[int, int], Any] = {}
        terminals: dict[Any, Any] = {}
        for rule in sorted(ruleset, key=weighted_rule_sort, reverse=True):
            for fact in rule_facts[rule]:
                entry = by_id[id(fact)]
                if entry[3] is not None:  # an equal pattern walked the same checks already
                    continue
                if entry[2] is None:
                    entry[2] = sorted(entry[0], key=weighted_check_sort, reverse=True)
                current = root_node
                for check in entry[2]:
                    child = children_by_check.get((id(current), id(check)))
                    if child is None:
                        child = FeatureTesterNode(check)
                        current.add_child(child, child.activate)
                        children_by_check[(id(current), id(check))] = child
                    current = child
                entry[3] = current
                terminals[entry[4]] = current
        return terminals

    @staticmethod
    def build_beta_part(ruleset, alpha_terminals):
        """As experta's ``wire_rule``, for plain rules (see :func:`plain_rule`) without building
        a dispatcher per rule, and with the tuned nodes: the same joins, tests and conflict-set
        node, wired in the same order. Other rules are wired by experta."""
        memories: dict[int, AlphaMemory] = {}
        for rule in ruleset:
            if plain_rule(rule):
                wire_plain_rule(rule, alpha_terminals, memories)
            else:
                ReteMatcher.build_beta_part({rule}, alpha_terminals)

    def build_network(self) -> None:
        super().build_network()
        self._dirty: list[Any] = []
        self.tuned_nodes = tune_network(self.root_node, self._dirty)
        self.indexed_groups = index_alpha_network(self.root_node)

    def reset(self) -> None:
        self._dirty.clear()
        super().reset()

    def changes(self, adding=None, deleting=None):
        """As experta's, but asks only the conflict-set nodes that saw a token since the last call
        (experta asks all of them, one call per rule, on every working-memory change)."""
        for fact in deleting or ():
            self.root_node.remove(fact)
        for fact in adding or ():
            self.root_node.add(fact)
        added: list[Any] = []
        removed: list[Any] = []
        dirty = self._dirty
        for csn in dirty:
            csn.is_dirty = False
            c_added, c_removed = csn.get_activations()
            added.extend(c_added)
            removed.extend(c_removed)
        dirty.clear()
        return added, removed


class _Pattern:
    """One fact pattern of a rule for :class:`DirectMatcher`: the fact class, the fields compared
    with a constant and the fields bound to a variable; its alpha memory holds the matching facts
    (fact id → (fact, bound variables)) in the order they were added."""

    __slots__ = ("cls", "literals", "binds", "memory", "users", "prefix_of")

    def __init__(self, cls: type, literals: tuple, binds: tuple):
        self.cls, self.literals, self.binds = cls, literals, binds
        self.memory: dict[int, tuple[Any, dict[str, Any]]] = {}
        # (first pattern of a rule, [(rule plan, position of this pattern in it)]): a rule whose
        # first pattern holds no fact has no token, so its group is skipped at once
        self.users: list[tuple[Any, list[tuple[Any, int]]]] = []
        # the rules with this pattern before their last: their prefix tokens are stale once
        # ``memory`` changes
        self.prefix_of: list[Any] = []

    def changed(self) -> None:
        """``memory`` changed: the prefix tokens of the rules holding this pattern are stale, and
        so is what was learnt of the last pattern's facts with them (``failed``)."""
        for plan in self.prefix_of:
            plan.prefix_seen = None
            if plan.failed:
                plan.forget_failures()


class _RulePlan:
    """A rule as :class:`DirectMatcher` walks it: its patterns in order, the ``TEST`` to run once
    the first ``i`` patterns are bound (``tests[i]``), and its activations by token (fact ids in
    pattern order)."""

    __slots__ = ("rule", "patterns", "tests", "passing", "prefix", "prefix_seen", "last", "reads", "failed",
                 "failed_by", "requires", "quick")

    def __init__(self, rule: Any, patterns: list[_Pattern], tests: list[list[Any]]):
        self.rule, self.patterns, self.tests = rule, patterns, tests
        self.passing: dict[tuple[int, ...], Any] = {}
        # the tokens of every pattern but the last that pass the tests run on them (Rete's left
        # memory of the last join): facts, fact ids, context; ``prefix_seen`` is None once the
        # memory of one of those patterns changed (_Pattern.changed), else True
        self.prefix: list[tuple[list[Any], list[int], dict[str, Any]]] = []
        self.prefix_seen: bool | None = None
        self.last = len(patterns) - 1
        # the fields of a revised fact the last tests read (``revision_reads`` of the last TEST;
        # None: unknown), and the last pattern's facts with which every prefix token failed them
        final = tests[-1]
        reads = [getattr(t, "revision_reads", None) for t in final]
        self.reads: frozenset[str] | None = (frozenset().union(*reads) if final and None not in reads
                                             else None)
        # the fields a fact of the last pattern must have (``present``, as engine/runtime/memory.py
        # marks an item's revision) for the last tests to hold (``requires`` of a TEST)
        self.requires: frozenset[str] = frozenset().union(*(getattr(t, "requires", ()) for t in final))
        # a check of the last pattern's fact alone that is False only where every token fails the
        # last tests (``quick`` of a TEST: engine/runtime/compiler.py leading_item_check), or None
        self.quick: Callable[[dict[str, Any]], bool] | None = next(
            (q for q in (getattr(t, "quick", None) for t in final) if q is not None), None)
        # the lineages (a fact and the revisions that replaced it, named by the first one's id) whose
        # latest fact failed the last tests with every prefix token; ``failed_by`` is the matcher's
        # index of the same, lineage -> the rules it failed (DirectMatcher._add skips them at once)
        self.failed: set[int] = set()
        self.failed_by: dict[int, set[_RulePlan]] = {}

    def fail(self, lineage: int) -> None:
        self.failed.add(lineage)
        by = self.failed_by.get(lineage)
        if by is None:
            self.failed_by[lineage] = {self}
        else:
            by.add(self)

    def passed(self, lineage: int) -> None:
        if lineage in self.failed:
            self.failed.discard(lineage)
            self.failed_by[lineage].discard(self)

    def forget_failures(self) -> None:
        by = self.failed_by
        for lineage in self.failed:
            by[lineage].discard(self)
        self.failed.clear()


class _Users:
    """The rules that have one pattern, grouped by their first pattern (a group whose first pattern
    holds no fact has no token), with an index of the rules that may skip a revision: those that
    have the pattern last and whose last tests declare what they read (``reads``), by the fields
    they read."""

    __slots__ = ("first", "users", "skippable", "readers", "order", "requirers", "required")

    def __init__(self, first: _Pattern, users: list[tuple[_RulePlan, int]]):
        self.first, self.users = first, users
        able = [plan for plan, position in users if position == plan.last and plan.reads is not None]
        self.skippable = frozenset(able)
        readers: dict[str, set[_RulePlan]] = {}
        for plan in able:
            for name in plan.reads:  # type: ignore[union-attr]
                readers.setdefault(name, set()).add(plan)
        self.readers = {name: frozenset(plans) for name, plans in readers.items()}
        self.order = {plan: i for i, (plan, _) in enumerate(users)}
        requirers: dict[str, set[_RulePlan]] = {}
        for plan, position in users:
            if position == plan.last:
                for name in plan.requires:
                    requirers.setdefault(name, set()).add(plan)
        self.requirers = {name: frozenset(plans) for name, plans in requirers.items()}
        self.required = frozenset(requirers)

    def not_skipped(self, failed: set[_RulePlan] | None, changed: frozenset[str] | None,
                    present: frozenset[str] | None) -> list[tuple[_RulePlan, int]] | None:
        """The users to walk for a fact of the last pattern: every one but the rules whose last
        tests it cannot pass — a field they require is not ``present`` in it — and, for a revision
        changing ``changed`` of a fact whose lineage failed the rules ``failed``, those of them that
        read none of the changed fields (in their order); None when none is skipped (walk all)."""
        skip: frozenset[_RulePlan] | set[_RulePlan] = frozenset()
        if failed and changed is not None:
            skip = failed & self.skippable
            if skip:
                readers = self.readers
                for name in changed:
                    plans = readers.get(name)
                    if plans:
                        skip = skip - plans
                        if not skip:
                            break
        if present is not None and self.required:
            missing = self.required - present
            if missing:
                requirers = self.requirers
                skip = skip.union(*(requirers[name] for name in missing))
        if not skip:
            return None
        users, order = self.users, self.order
        if len(skip) == len(users):
            return []
        return [users[i] for i in sorted(order[plan] for plan in order.keys() - skip)]


def _plan_of(rule: Any, patterns: dict[tuple, _Pattern]) -> _RulePlan | None:
    """The walk of a rule made only of fact patterns (constants and variables each bound once, no
    field constraints) and ``TEST``s, a fact first; None for any other rule."""
    if not isinstance(rule, Rule) or not rule or not isinstance(rule[0], Fact):
        return None
    plan_patterns: list[_Pattern] = []
    tests: list[list[Any]] = [[]]
    seen_vars: set[str] = set()
    for ce in rule:
        if type(ce) is _TEST:
            direct = getattr(ce[0], "from_context", None)  # no WhereCheck (and its signature) needed
            tests[-1].append(direct if direct is not None else WhereCheck(ce[0]))
            continue
        if not isinstance(ce, Fact) or type(ce) is InitialFact:
            return None
        literals, binds = [], []
        for field, value in ce.items():
            if not isinstance(field, str) or field.startswith("_") or "__" in field:
                return None
            if type(value) is W and value.__bind__ is not None:
                if value.__bind__ in seen_vars or value.__bind__.startswith("_"):
                    return None  # a variable bound twice is a join condition: Rete's job
                seen_vars.add(value.__bind__)
                binds.append((field, value.__bind__))
            elif isinstance(value, (str, int, float, bool)) and not isinstance(value, FieldConstraint):
                literals.append((field, value))
            else:
                return None
        key = (type(ce), tuple(sorted(literals)), tuple(binds))
        pattern = patterns.get(key)
        if pattern is None:
            pattern = patterns[key] = _Pattern(type(ce), tuple(sorted(literals)), tuple(binds))
        if pattern in plan_patterns:
            return None  # the same pattern twice: Rete's job
        plan_patterns.append(pattern)
        tests.append([])
    return _RulePlan(rule, plan_patterns, tests)


class DirectMatcher(Matcher):
    """The activations experta's Rete network computes, found directly, for rule bases whose rules
    are conjunctions of fact patterns (fields equal to a constant or bound to a variable that no
    other pattern uses, so no join conditions) and ``TEST``s — the shape
    engine/runtime/compiler.py gives every rule.

    An activation is a rule with one fact per pattern whose every ``TEST`` holds on the variables
    bound so far. When a fact is added, each rule with a pattern it matches is walked with that
    fact fixed and the other patterns over their alpha memories, each ``TEST`` run as soon as the
    patterns before it are bound (as the Rete network runs it, on the same token contexts); when
    a fact is removed, the activations holding it go. Changes are applied as experta's
    ``ReteMatcher.changes`` applies them (removals first, then additions, in order) and an
    activation added and removed between two calls is reported by neither, so the agenda sees the
    same activations (tests/test_direct_matcher.py). A rule base with another rule shape is
    matched by :class:`IndexedReteMatcher` (``DirectMatcher(engine)`` builds that instead).

    A fact that revises another (``fact.revision_of = (its fact id, the fields that changed)``, as
    engine/runtime/memory.py marks an item's new revision) is not walked through a rule whose last
    ``TEST`` declares the fields it reads (``revision_reads``), read none of the changed ones, and
    failed on the earlier revision with the same prefix tokens: it would fail again, so no
    activation is lost (tests/test_plan_work.py compares with walking every revision). What
    failed is kept per lineage (a fact and the revisions that replaced it) with an index from
    lineage to rules and from field to the rules reading it, so a revision passes over the
    rules it cannot change in a few set operations, not a step per rule (a rule base with a
    thousand per-candidate filters). Nor is a fact of the last pattern walked through a rule
    whose last ``TEST`` ``requires`` a field the fact does not have (``fact.present``: the
    fields an item revision has): that test is False. When a stage begins, the walk of each
    rule with the new stage fact is that of its prefix token with every item, as a revision's
    walk, so what fails is learnt at once.
    """

    skip_revisions = True  # see _RulePlan.reads (False: walk every revision, for the tests)
    walks = 0  # rule walks so far in this process (for the tests)

    def __new__(cls, engine):
        patterns: dict[tuple, _Pattern] = {}
        plans = []
        for rule in engine.get_rules():
            plan = _plan_of(rule.new_conditions(*rule), patterns)
            if plan is None:
                return IndexedReteMatcher(engine)
            plans.append(plan)
        self = super().__new__(cls)
        self._patterns, self._plans = patterns, plans
        return self

    def __init__(self, engine):
        super().__init__(engine)
        by_type: dict[type, dict[tuple, list[_Pattern]]] = {}
        for pattern in self._patterns.values():
            fields = tuple(f for f, _ in pattern.literals)
            values = tuple(v for _, v in pattern.literals)
            by_type.setdefault(pattern.cls, {}).setdefault(fields, {}).setdefault(values, []).append(pattern)
        self._by_type = by_type
        groups: dict[int, dict[int, tuple[_Pattern, list[tuple[_RulePlan, int]]]]] = {}
        for plan in self._plans:
            for position, pattern in enumerate(plan.patterns):
                first = plan.patterns[0]
                groups.setdefault(id(pattern), {}).setdefault(id(first), (first, []))[1].append((plan, position))
        for pattern in self._patterns.values():
            pattern.users = [_Users(first, users) for first, users in groups.get(id(pattern), {}).values()]
        # lineage -> the rules its latest fact failed (see _RulePlan.failed); fact id -> its lineage
        self._failed_by: dict[int, set[_RulePlan]] = {}
        self._lineage: dict[int, int] = {}
        for plan in self._plans:
            plan.failed_by = self._failed_by
            for pattern in plan.patterns[:-1]:
                pattern.prefix_of.append(plan)
        self._holding: dict[int, list[tuple[_RulePlan, tuple[int, ...]]]] = {}
        self._added: dict[tuple[int, tuple[int, ...]], Any] = {}
        self._removed: list[Any] = []

    def reset(self) -> None:
        for pattern in self._patterns.values():
            pattern.memory.clear()
        for plan in self._plans:
            plan.passing.clear()
            plan.prefix, plan.prefix_seen = [], None
            plan.failed.clear()
        self._failed_by.clear()
        self._lineage.clear()
        self._holding.clear()
        self._added.clear()
        self._removed.clear()

    def _matching(self, fact: Any) -> list[_Pattern]:
        out: list[_Pattern] = []
        for fields, by_values in self._by_type.get(type(fact), {}).items():
            try:
                values = tuple(fact[f] for f in fields)
            except KeyError:
                continue
            try:
                found = by_values.get(values)
            except TypeError:  # an unhashable field value: compare with every constant
                found = [p for vs, ps in by_values.items() if vs == values for p in ps]
            if found:
                out.extend(found)
        return out

    def changes(self, adding=None, deleting=None):
        for fact in deleting or ():
            self._remove(fact)
        for fact in adding or ():
            self._add(fact)
        added, self._added = list(self._added.values()), {}
        removed, self._removed = self._removed, []
        return added, removed

    def _remove(self, fact: Any) -> None:
        fid = fact.__factid__
        for pattern in self._matching(fact):
            if pattern.memory.pop(fid, None) is not None:
                pattern.changed()
        for plan, token in self._holding.pop(fid, ()):
            activation = plan.passing.pop(token, None)
            if activation is None:
                continue
            if self._added.pop((id(plan), token), None) is None:
                self._removed.append(activation)

    def _add(self, fact: Any) -> None:
        fid = fact.__factid__
        # (earlier fact id, fields changed) of a revised fact; it continues that fact's lineage
        revision = getattr(fact, "revision_of", None)
        lineage = fid
        if revision is not None:
            lineage = self._lineage[fid] = self._lineage.get(revision[0], revision[0])
            if not self.skip_revisions:
                revision = None
        for pattern in self._matching(fact):
            binds = {}
            for field, var in pattern.binds:
                if field not in fact:
                    break
                binds[var] = fact[field]
            else:
                if fid in pattern.memory:
                    continue
                pattern.memory[fid] = (fact, binds)
                pattern.changed()
                failed = self._failed_by.get(lineage) if revision is not None else None
                changed = revision[1] if revision is not None else None
                present = getattr(fact, "present", None)
                for group in pattern.users:
                    if not group.first.memory:  # no rule of this group has a token (e.g. another stage's)
                        continue
                    users = group.users
                    if failed or present is not None:
                        # not the rules the fact's lineage failed, unless they read a changed field,
                        # nor those requiring a field the fact does not have
                        users = group.not_skipped(failed, changed, present)
                        if users is None:
                            users = group.users
                    for plan, position in users:
                        if position == plan.last and plan.prefix_seen:
                            if not plan.prefix:
                                continue  # known: no token before this fact (e.g. a gate is off)
                            if (revision is not None and plan.reads is not None
                                    and lineage in plan.failed and plan.reads.isdisjoint(revision[1])):
                                # a revision of a fact that failed the last tests with these
                                # same prefix tokens, changed only in fields they do not read:
                                # they fail again (see _RulePlan.reads; the lineage stays failed)
                                continue
                            DirectMatcher.walks += 1  # _walk's first case, the usual one
                            self._walk_last(plan, fid, fact, binds, lineage)
                            continue
                        self._walk(plan, position, fid, fact, binds)

    def _walk(self, plan: _RulePlan, fixed: int, fid: int, fact: Any, binds: dict[str, Any]) -> None:
        """Every token of ``plan`` with ``fact`` at pattern ``fixed`` that passes the tests."""
        DirectMatcher.walks += 1
        patterns, tests = plan.patterns, plan.tests
        last = len(patterns)
        if fixed == last - 1:  # the usual change (an item revision): the prefix tokens are known
            if plan.prefix_seen is None:
                plan.prefix, plan.prefix_seen = self._prefix(plan), True
            self._walk_last(plan, fid, fact, binds)
            return
        if (plan.reads is not None and len(patterns[fixed].memory) == 1
                and all(p.memory for p in patterns)):
            # the only fact of its pattern (a stage begins): every token holds it, so the walk is
            # the prefix tokens with each fact of the last pattern, as an item revision walks them,
            # and what fails is learnt; the same tokens in the same order when there is at most
            # one prefix token (the usual case: one stage, one revision of each value)
            if plan.prefix_seen is None:
                plan.prefix, plan.prefix_seen = self._prefix(plan), True
            if len(plan.prefix) <= 1:
                requires = plan.requires
                for other_id, (other, other_binds) in list(patterns[-1].memory.items()):
                    if requires:
                        present = getattr(other, "present", None)
                        if present is not None and not requires <= present:
                            continue  # its last tests fail: a field they require is missing
                    self._walk_last(plan, other_id, other, other_binds)
                return
        choices: list[Any] = []
        for position, pattern in enumerate(patterns):  # a pattern with no fact: no token
            if position == fixed:
                choices.append({fid: (fact, binds)})
            elif not pattern.memory:
                return
            else:
                choices.append(pattern.memory)
        facts: list[Any] = [None] * last
        ids: list[int] = [0] * last
        self._step(plan, tests, choices, facts, ids, 0, {})

    def _walk_last(self, plan: _RulePlan, fid: int, fact: Any, binds: dict[str, Any],
                   lineage: int | None = None) -> None:
        """Every prefix token with ``fact`` of the last pattern that passes the last tests; a fact
        with which every one fails is learnt (``plan.failed``, by its ``lineage``)."""
        final = plan.tests[-1]
        failed = True
        tokens, quick = plan.prefix, plan.quick
        if tokens and quick is not None and not quick(binds):
            tokens = ()  # the fact alone fails the conditions the rule begins with: every token fails
        for facts, ids, context in tokens:
            ctx = {**context, **binds} if binds else context
            for test in final:  # most fail (values seen before): no token is built for them
                if not test(ctx):
                    break
            else:
                failed = False
                self._activate(plan, facts + [fact], ids + [fid], ctx)
        if plan.reads is not None:
            if lineage is None:
                lineage = self._lineage.get(fid, fid)
            if failed:
                if lineage not in plan.failed:
                    plan.fail(lineage)
            elif plan.failed:
                plan.passed(lineage)

    def _complete(self, plan: _RulePlan, facts: list[Any], ids: list[int], context: dict[str, Any]) -> None:
        """A token of every pattern (its earlier tests passed): an activation if the last hold."""
        for test in plan.tests[-1]:
            if not test(context):
                return
        self._activate(plan, facts, ids, context)

    def _activate(self, plan: _RulePlan, facts: list[Any], ids: list[int], context: dict[str, Any]) -> None:
        """A token whose every test holds: an activation, unless it already is one."""
        token = tuple(ids)
        if token in plan.passing:
            return
        activation = Activation(plan.rule, facts, dict(context))
        plan.passing[token] = activation
        self._added[(id(plan), token)] = activation
        holding = self._holding
        for held in token:
            if held in holding:
                holding[held].append((plan, token))
            else:
                holding[held] = [(plan, token)]

    def _prefix(self, plan: _RulePlan) -> list[tuple[list[Any], list[int], dict[str, Any]]]:
        """The tokens of every pattern but the last that pass the tests run after each."""
        out: list[tuple[list[Any], list[int], dict[str, Any]]] = [([], [], {})]
        for i, pattern in enumerate(plan.patterns[:-1]):
            out = [(facts, ids, ctx) for facts, ids, ctx in out if all(t(ctx) for t in plan.tests[i])]
            out = [(facts + [f], ids + [fid], {**ctx, **binds} if binds else ctx)
                   for facts, ids, ctx in out for fid, (f, binds) in pattern.memory.items()]
        last = len(plan.patterns) - 1
        return [(facts, ids, ctx) for facts, ids, ctx in out if all(t(ctx) for t in plan.tests[last])]

    def _step(self, plan: _RulePlan, tests: list[list[Any]], choices: list[Any], facts: list[Any],
              ids: list[int], i: int, context: dict[str, Any]) -> None:
        last = len(choices)
        while True:
            if i == last:
                self._complete(plan, facts, ids, context)  # runs the last tests
                return
            for test in tests[i]:
                if not test(context):
                    return
            options = choices[i]
            if len(options) == 1:  # the usual case (one stage, one revision of a value): no branch
                ((other_id, (other, other_binds)),) = options.items()
                facts[i], ids[i] = other, other_id
                if other_binds:
                    context = {**context, **other_binds}
                i += 1
                continue
            for other_id, (other, other_binds) in list(options.items()):
                facts[i], ids[i] = other, other_id
                self._step(plan, tests, choices, facts, ids, i + 1,
                           {**context, **other_binds} if other_binds else context)
            return


def plain_fact(cls: type, **fields: Any) -> Any:
    """``cls(**fields)`` for a fact class without field definitions and values that are already
    frozen (str, int, float, bool, None): the same fact, without experta's per-field ``freeze``
    and declared-fact checks of ``Fact.__init__``."""
    fact = cls.__new__(cls)
    dict.update(fact, fields)
    fact._Fact__defaults = {}
    return fact


class PlainFactList(FactList):
    """experta's fact list that remembers each held fact's content key (class and fields) from its
    declaration, so a retraction does not build it again; otherwise the same bookkeeping."""

    def __init__(self):
        super().__init__()
        self._keys: dict[int, frozenset] = {}

    def declare(self, fact):
        if not isinstance(fact, Fact):
            raise ValueError('The fact must descend the Fact class.')
        fact.validate()
        fact_id = self._get_fact_id(fact)
        if self.duplication or fact_id not in self.reference_counter:
            idx = self.last_index
            fact.__factid__ = idx
            self[idx] = fact
            self._keys[idx] = fact_id
            self.last_index += 1
            self.added.append(fact)
            self.reference_counter[fact_id] += 1
            _watchers.FACTS.info(" ==> %s: %r", fact, fact)
            return fact
        return None

    def retract(self, idx_or_fact):
        idx = idx_or_fact if isinstance(idx_or_fact, int) else idx_or_fact.__factid__
        if idx not in self:
            raise IndexError('Fact not found.')
        fact = self[idx]
        fact_id = self._keys.pop(idx)
        counter = self.reference_counter
        counter[fact_id] -= 1
        if counter[fact_id] == 0:
            counter.pop(fact_id)
        _watchers.FACTS.info(" <== %s: %r", fact, fact)
        self.removed.append(fact)
        del self[idx]
        return idx


class PlainFactEngine(KnowledgeEngine):
    """experta's engine whose ``declare`` skips the checks for conditional elements and nested
    accessors in the declared facts: the runner declares only its own ``Stage``/``Value``/``Item``
    facts of plain values (engine/runtime/memory.py). Otherwise experta's ``declare``: the fact
    list's declaration, then the agenda updated unless the engine is running. Its fact list is a
    :class:`PlainFactList`, and ``run`` formats the firing log line only when that log is on."""

    def reset(self, **kwargs):
        super().reset(**kwargs)
        plain = PlainFactList()  # the facts reset declared (InitialFact, deffacts), moved over
        plain.update(self.facts)
        plain._keys = {idx: plain._get_fact_id(f) for idx, f in self.facts.items()}
        plain.last_index, plain.reference_counter = self.facts.last_index, self.facts.reference_counter
        plain.added, plain.removed, plain.duplication = self.facts.added, self.facts.removed, self.facts.duplication
        self.facts = plain

    def declare(self, *facts):
        if not self.facts:
            _watchers.ENGINE.warning("Declaring fact before reset()")
        last = None
        for fact in facts:
            last = self.facts.declare(fact)
        if not self.running:
            added, removed = self.get_activations()
            self.strategy.update_agenda(self.agenda, added, removed)
        return last

    def run(self, steps=float('inf')):
        """experta's ``KnowledgeEngine.run``, its debug listings and firing log line built only
        when those logs are enabled (experta formats the line of every firing even when not)."""
        self.running = True
        execution = 0
        rules_log = _watchers.RULES
        while steps > 0 and self.running:
            added, removed = self.get_activations()
            self.strategy.update_agenda(self.agenda, added, removed)
            if _watchers.worth('AGENDA', 'DEBUG'):  # pragma: no cover
                for idx, act in enumerate(self.agenda.activations):
                    _watchers.AGENDA.debug("%d: %r %r", idx, act.rule.__name__,
                                           ", ".join(str(f) for f in act.facts))
            activation = self.agenda.get_next()
            if activation is None:
                break
            steps -= 1
            execution += 1
            if rules_log.isEnabledFor(logging.INFO):
                rules_log.info("FIRE %s %s: %s", execution, activation.rule.__name__,
                               ", ".join(str(f) for f in activation.facts))
            activation.rule(self, **{k: v for k, v in activation.context.items() if not k.startswith('__')})
        self.running = False


__all__ = [
    "AS",
    "DirectMatcher",
    "experta",
    "Fact",
    "IndexedReteMatcher",
    "KnowledgeEngine",
    "MATCH",
    "NOT",
    "plain_fact",
    "PlainFactEngine",
    "PlainFactList",
    "Rule",
    "StableStrategy",
    "StockStrategy",
    "TEST",
]
