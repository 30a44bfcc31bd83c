"""Working memory of a rule run: values and items with their revisions, and the experta facts
that stand for them.

Values live here, not in experta: an experta fact carries only a key and a revision, so a
changed value is a new revision (the old fact retracted, a new one declared) and the Rete
network re-tests exactly the rules that read it. Every revision stays in memory, so a condition
test can read the values of the revisions in its token (see engine/runtime/compiler.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.runtime.experta_compat import Fact, KnowledgeEngine, plain_fact


class Stage(Fact):
    """The stage now running; every compiled rule requires its own stage."""


class Value(Fact):
    """A global fact ``key`` at revision ``rev`` (the value lives in working memory)."""


class Item(Fact):
    """An item (e.g. a candidate) ``kind``/``id`` at revision ``rev``."""


@dataclass
class Origin:
    """Where a fact came from when no rule derived it."""

    kind: str            # input | default | catalog | engine
    ref: str


@dataclass
class Memory:
    values: dict[str, Any] = field(default_factory=dict)
    value_step: dict[str, int] = field(default_factory=dict)
    origins: dict[str, Origin] = field(default_factory=dict)
    items: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    item_steps: dict[tuple[str, str, str], int] = field(default_factory=dict)
    item_rev: dict[tuple[str, str], int] = field(default_factory=dict)
    item_order: list[tuple[str, str]] = field(default_factory=list)
    value_revs: dict[tuple[str, int], Any] = field(default_factory=dict)
    item_revs: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)
    rejected_items: set[tuple[str, str]] = field(default_factory=set)
    rejections: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    asks: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    fired: Counter = field(default_factory=Counter)
    # (kind, attribute) -> the items that have it, in the order they got it (actions/least)
    having: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)

    def step_of(self, name: str, item: tuple[str, str] | None = None) -> int | None:
        if item is not None:
            return self.item_steps.get((item[0], item[1], name))
        return self.value_step.get(name)

    def live_items(self, kind: str) -> list[tuple[str, str]]:
        return [k for k in self.item_order if k[0] == kind and k not in self.rejected_items]


def item_fact_name(kind: str, item_id: str, attr: str) -> str:
    return f"{kind}[{item_id}].{attr}"


class Store:
    """Every write to working memory, each declaring the new experta fact revision."""

    def __init__(self, mem: Memory, engine: KnowledgeEngine):
        self.mem, self.engine = mem, engine
        self.value_facts: dict[str, Any] = {}
        self.item_facts: dict[tuple[str, str], Any] = {}

    def set_value(self, key: str, value: Any, step: int | None, origin: Origin | None = None) -> bool:
        """Set a global value; False (and no new revision) when it is unchanged, type included."""
        mem = self.mem
        if key in mem.values and mem.values[key] == value and type(mem.values[key]) is type(value):
            return False
        old_rev = mem.item_rev.get(("value", key))
        rev = (old_rev or 0) + 1
        mem.values[key] = value
        if step is not None:
            mem.value_step[key] = step
        else:
            mem.value_step.pop(key, None)
        if origin is not None:
            mem.origins[key] = origin
        if old_rev is not None:
            self.engine.retract(self.value_facts.pop(key))
        mem.item_rev[("value", key)] = rev
        mem.value_revs[(key, rev)] = value
        self.value_facts[key] = self.engine.declare(plain_fact(Value, key=key, rev=rev))
        return True

    def create_item(self, kind: str, item_id: str, attrs: dict[str, Any], step: int) -> None:
        mem, key = self.mem, (kind, item_id)
        mem.items[key] = dict(attrs)
        mem.item_order.append(key)
        for attr in attrs:
            mem.item_steps[(kind, item_id, attr)] = step
            mem.having.setdefault((kind, attr), {})[item_id] = None
        mem.item_rev[key] = 1
        mem.item_revs[(kind, item_id, 1)] = dict(attrs)
        fact = plain_fact(Item, kind=kind, id=item_id, rev=1)
        fact.present = frozenset(attrs)  # for the matcher: the attributes this revision has
        self.item_facts[key] = self.engine.declare(fact)

    def update_item(self, kind: str, item_id: str, changes: dict[str, Any], step: int) -> None:
        mem, key = self.mem, (kind, item_id)
        mem.items[key].update(changes)
        for attr in changes:
            mem.item_steps[(kind, item_id, attr)] = step
            mem.having.setdefault((kind, attr), {})[item_id] = None
        if key in mem.rejected_items:
            return
        old = self.item_facts.pop(key)
        self.engine.retract(old)
        mem.item_rev[key] += 1
        attrs = mem.item_revs[(kind, item_id, mem.item_rev[key])] = dict(mem.items[key])
        fact = plain_fact(Item, kind=kind, id=item_id, rev=mem.item_rev[key])
        # for the matcher: the revision it replaces and the attributes that changed (a rule whose
        # test reads none of them decides as it did on the old one: experta_compat._RulePlan.reads),
        # and the attributes it has (a rule requiring another fails on it: _RulePlan.requires)
        fact.revision_of = (old.__factid__, frozenset(changes))
        fact.present = frozenset(attrs)
        self.item_facts[key] = self.engine.declare(fact)

    def reject_item(self, kind: str, item_id: str) -> bool:
        """Mark an item rejected and retract its fact (for-each rules stop seeing it); False if it
        already was."""
        key = (kind, item_id)
        if key in self.mem.rejected_items:
            return False
        self.mem.rejected_items.add(key)
        self.engine.retract(self.item_facts.pop(key))
        return True
