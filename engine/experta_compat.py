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
from experta.abstract import Strategy  # noqa: E402
from experta.fieldconstraint import L  # noqa: E402
from experta.matchers import ReteMatcher  # noqa: E402
from experta.matchers.rete.abstract import Node  # noqa: E402
from experta.matchers.rete.check import FeatureCheck  # noqa: E402
from experta.matchers.rete.mixins import AnyChild, ChildNode, NoMemory  # noqa: E402
from experta.matchers.rete.nodes import BusNode, ConflictSetNode, FeatureTesterNode, WhereNode  # noqa: E402
from experta.strategies import DepthStrategy as StockStrategy  # noqa: E402  (for the bug tests)


class StableStrategy(Strategy):
    """Total, stable agenda order with exact removal.

    Key: higher salience first, then lower rule load order (``load_order`` set on the rule's
    function: experta rebuilds Rule objects from it), then older facts (smaller fact ids,
    compared as sorted tuples). Every activation has a distinct key because an activation is one
    rule on one tuple of facts, so the order never depends on hash iteration order. Removal
    deletes every activation equal to the removed one, scanning the whole agenda (the stock
    strategy inspected only neighbours of a bisect position and left stale activations behind).
    """

    @staticmethod
    def key(activation) -> tuple:
        rule = activation.rule
        facts = tuple(sorted(f["__factid__"] for f in activation.facts))
        # the agenda pops from the end: the activation to run next must sort last
        return (rule.salience, -getattr(rule, "load_order", 0), tuple(-i for i in facts))

    @staticmethod
    def identity(activation) -> tuple:
        """One rule on one set of facts: what removal must match exactly."""
        return (id(activation.rule), frozenset(f["__factid__"] for f in activation.facts))

    def _update_agenda(self, agenda, added, removed):
        if removed:
            gone = {self.identity(act) for act in removed}
            agenda.activations = [a for a in agenda.activations if a.identity not in gone]
        if added:
            for act in added:
                act.key = self.key(act)
                act.identity = self.identity(act)
            agenda.activations.extend(added)
            agenda.activations.sort(key=lambda a: a.key)


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


_READ_ONLY_NODES = (WhereNode, ConflictSetNode)  # they never change the token they receive


def skip_token_copies(root: Any) -> int:
    """Call read-only one-input nodes (``TEST`` and conflict-set nodes) without copying the token.

    experta copies every token before every one-input node (``OneInputNode.activate``), which
    only a node that changes the token's context needs (``FeatureTesterNode`` binding variables).
    A ``WhereNode`` only reads the context and passes the token on; a ``ConflictSetNode`` only
    reads it to make an activation. Returns how many callbacks were rebound."""
    done, seen, todo = 0, set(), [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children = getattr(node, "children", None) or []
        for i, child in enumerate(children):
            target = child.node
            todo.append(target)
            if isinstance(target, _READ_ONLY_NODES) and child.callback == target.activate:
                children[i] = ChildNode(target, target._activate)
                done += 1
    return done


class IndexedReteMatcher(ReteMatcher):
    """experta's Rete matcher with hashed constant tests in the alpha network (see
    :class:`IndexedTesterNode`) and no token copies for read-only nodes (see
    :func:`skip_token_copies`); the beta network, tokens and activations are experta's own."""

    def build_network(self) -> None:
        super().build_network()
        self.indexed_groups = index_alpha_network(self.root_node)
        self.uncopied_callbacks = skip_token_copies(self.root_node)

    def changes(self, adding=None, deleting=None):
        """As experta's, but asks only the conflict-set nodes that saw a token since the last call
        (experta asks all of them, one call per rule, on every working-memory change)."""
        for fact in deleting or ():
            self.root_node.remove(fact)
        for fact in adding or ():
            self.root_node.add(fact)
        added: list[Any] = []
        removed: list[Any] = []
        for csn in self._get_conflict_set_nodes():
            if csn.added or csn.removed:
                c_added, c_removed = csn.get_activations()
                added.extend(c_added)
                removed.extend(c_removed)
        return added, removed


__all__ = [
    "AS",
    "MATCH",
    "NOT",
    "TEST",
    "Fact",
    "IndexedReteMatcher",
    "KnowledgeEngine",
    "Rule",
    "StableStrategy",
    "StockStrategy",
    "experta",
]
