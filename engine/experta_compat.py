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


__all__ = [
    "AS",
    "MATCH",
    "NOT",
    "TEST",
    "Fact",
    "KnowledgeEngine",
    "Rule",
    "StableStrategy",
    "StockStrategy",
    "experta",
]
