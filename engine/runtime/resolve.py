"""How a rule reads facts: name → value resolvers over working memory.

Two views: :func:`snapshot_resolver` reads the revisions matched in a Rete token (condition
tests must be pure functions of the matched facts), :func:`live_resolver` reads the current
values while a rule fires, optionally logging what it read (the premises of the step), with
names bound by an action (``local``) and this firing's own item results (``pending``) first.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from servewise.engine.lang.expr import EvalError
from servewise.engine.lang.rulebase import RuleSpec
from servewise.engine.runtime.memory import Memory

Resolver = Callable[[str], Any]
_NO_ATTRS: dict[str, Any] = {}
_UNSET = object()


class NotReady(Exception):
    """A fact a rule reads is not known (yet)."""


def with_lets(spec: RuleSpec, resolve: Resolver) -> Resolver:
    """A resolver that also knows the rule's ``let:`` bindings, each evaluated once at first use.

    ``name.field`` reads a field of a binding whose value is a record (a mapping)."""
    if not spec.lets:
        return resolve
    lets = spec.let_map
    paths = spec.let_paths  # name -> None (not a binding) or (binding, fields), filled as names come
    memo: dict[str, Any] = {}
    this: Callable[[], Resolver]  # the resolver itself, weakly: a binding may read other bindings

    def resolve_let(name: str) -> Any:
        try:
            path = paths[name]
        except KeyError:
            root, _, rest = name.partition(".")
            path = paths[name] = (root, tuple(rest.split(".")) if rest else ()) if root in lets else None
        if path is None:
            return resolve(name)
        root, fields = path
        if root not in memo:
            memo[root] = lets[root].evaluate(this())
        value = memo[root]
        for part in fields:
            if not isinstance(value, dict) or part not in value:
                raise EvalError(f"'{name}': the value of '{root}' has no field '{part}'")
            value = value[part]
        return value

    # no reference cycle (the function holding itself in its closure): a plan makes thousands of
    # resolvers, which then go with their last reference instead of waiting for the collector
    this = weakref.ref(resolve_let)
    return resolve_let


def snapshot_resolver(mem: Memory, spec: RuleSpec, bound: dict[str, Any], revs: dict[str, str]) -> Resolver:
    """Values at the revisions bound in a token: ``revs`` maps a global name to its variable."""
    kind = spec.for_each
    prefix = f"{kind}." if kind else None
    attrs = mem.item_revs.get((kind, bound.get("iid"), bound.get("irev")), {}) if kind else {}

    def resolve(name: str) -> Any:
        if prefix and name.startswith(prefix):
            attr = name[len(prefix):]
            if attr == "id":
                return bound["iid"]
            if attr not in attrs:
                raise NotReady(name)
            return attrs[attr]
        if name in revs:
            return mem.value_revs[(name, bound[revs[name]])]
        raise NotReady(name)

    return with_lets(spec, resolve)


def live_resolver(mem: Memory, spec: RuleSpec | None, iid: str | None, log: dict[str, Any] | None = None,
                  local: dict[str, Any] | None = None, item_kind: str | None = None,
                  pending: dict[str, Any] | None = None) -> Resolver:
    """Current values; item attributes of ``iid`` under the rule's ``for_each`` (or ``item_kind``)."""
    kind = item_kind or (spec.for_each if spec else None)
    prefix = f"{kind}." if kind else None
    cut = len(prefix) if prefix else 0
    values, items = mem.values, mem.items
    # an item's attributes are one dict, updated in place (engine/runtime/memory.py): found once
    item = items.get((kind, iid)) if prefix is not None and iid is not None else None

    def resolve(name: str) -> Any:
        if local is not None and name in local:
            return local[name]
        value = _UNSET
        if prefix is not None and name.startswith(prefix):
            attr = name[cut:]
            if pending and attr in pending:
                return pending[attr]
            if iid is not None:
                if attr == "id":
                    value = iid
                else:
                    table = item if item is not None else items.get((kind, iid), _NO_ATTRS)
                    if attr not in table:
                        raise NotReady(name)
                    value = table[attr]
        if value is _UNSET:  # a global value
            if name not in values:
                raise NotReady(name)
            value = values[name]
        if log is not None and name not in log:
            log[name] = value
        return value

    return with_lets(spec, resolve) if spec is not None else resolve


def read_known(names, resolve: Resolver) -> dict[str, Any]:
    """The values of ``names`` that are known (the numbers a conclusion or rejection shows)."""
    values = {}
    for n in names:
        try:
            values[n] = resolve(n)
        except NotReady:
            pass
    return values
