"""What a firing rule does: one function per action kind, found in a registry.

Every action gets the :class:`ActionContext` of its firing (the rule, the item, the resolver,
the step number, the conclusions and premises recorded so far, the item results pending) and
the :class:`~servewise.engine.lang.rulebase.Action` to run. Actions that compute (derive, choose,
propose, select) run before the rule's ``because`` is rendered, so the explanation may show
their results; those that report it (reject, warn, ask) run after.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.common.messages import both
from servewise.engine.domain.functions import SCALARS, current
from servewise.engine.lang.expr import EvalError, Expr
from servewise.engine.lang.rulebase import REPORTING_ACTIONS, Action, RuleSpec
from servewise.engine.runtime.justify import conclusion, jsonable, render, score_text
from servewise.engine.runtime.memory import Memory, Store, item_fact_name
from servewise.engine.runtime.resolve import NotReady, Resolver, live_resolver, read_known, with_lets

MAX_PROPOSALS = 20_000
COMPUTE = ("derive", "choose", "propose", "select", "least")   # before `because` is rendered
REPORT = REPORTING_ACTIONS                            # after: they carry the rendered text


@dataclass
class ActionContext:
    """The state of one firing, shared by its actions."""

    spec: RuleSpec
    iid: str | None                      # the item under `for_each`, else None
    resolve: Resolver                    # logs what the rule reads (its premises)
    step_no: int
    store: Store
    because: dict[str, str] = field(default_factory=dict)             # rendered after COMPUTE
    conclusions: list[dict[str, Any]] = field(default_factory=list)
    extra_premises: list[dict[str, Any]] = field(default_factory=list)  # e.g. the selected item's
    pending: dict[str, Any] = field(default_factory=dict)  # item attributes this firing derives

    @property
    def mem(self) -> Memory:
        return self.store.mem


ActionFn = Callable[[ActionContext, Action], None]
ACTIONS: dict[str, ActionFn] = {}


def action(kind: str) -> Callable[[ActionFn], ActionFn]:
    """Register the function that runs actions of ``kind``."""
    def register(fn: ActionFn) -> ActionFn:
        ACTIONS[kind] = fn
        return fn
    return register


def evaluate(expr: Expr, resolve: Resolver) -> tuple[Any, list[dict[str, Any]]]:
    """The value of ``expr`` and the details domain functions attached while computing it."""
    ctx = current()
    ctx.details = []
    value = expr.evaluate(resolve)
    return value, list(ctx.details)


@action("derive")
def derive(ctx: ActionContext, act: Action) -> None:
    spec, mem = ctx.spec, ctx.mem
    prefix = f"{spec.for_each}." if spec.for_each else None
    for key, expr in act.exprs.items():
        value, details = evaluate(expr, ctx.resolve)
        read = read_known(expr.names, ctx.resolve)
        if prefix and key.startswith(prefix):
            attr = key[len(prefix):]
            current_attrs = mem.items.get((spec.for_each, ctx.iid), {})
            if attr in current_attrs and current_attrs[attr] == value:
                continue
            ctx.pending[attr] = value
            ctx.conclusions.append(conclusion(item_fact_name(spec.for_each, ctx.iid, attr), value,
                                              expr, read, details))
        elif ctx.store.set_value(key, value, ctx.step_no):
            ctx.conclusions.append(conclusion(key, value, expr, read, details))


@action("choose")
def choose(ctx: ActionContext, act: Action) -> None:
    comp = act.spec["component"]
    for key, value in (act.spec.get("set") or {}).items():
        if ctx.store.set_value(f"components.{comp}.{key}", value, ctx.step_no):
            ctx.conclusions.append(conclusion(f"components.{comp}.{key}", value, None, {}))
    for key, expr in act.exprs.items():
        name = key.split(".", 1)[1]
        value, details = evaluate(expr, ctx.resolve)
        if ctx.store.set_value(f"components.{comp}.{name}", value, ctx.step_no):
            ctx.conclusions.append(conclusion(f"components.{comp}.{name}", value, expr,
                                              read_known(expr.names, ctx.resolve), details))


@action("propose")
def propose(ctx: ActionContext, act: Action) -> None:
    a = act.spec
    over = {k.split(".", 1)[1]: e for k, e in act.exprs.items() if k.startswith("over.")}
    lists = {}
    for name, expr in over.items():
        values = expr.evaluate(ctx.resolve)
        lists[name] = values if isinstance(values, list) else [values]
    names = list(lists)
    count = math.prod(len(lists[n]) for n in names)  # checked before the combinations are made
    if count > MAX_PROPOSALS:
        raise EvalError(f"propose would create {count} items (limit {MAX_PROPOSALS})")
    value_lists = [lists[n] for n in names]
    combos = list(itertools.product(*value_lists))
    unless = [(act.exprs[f"unless.{i}"], u["because"]) for i, u in enumerate(a.get("unless") or [])]
    attr_exprs = [(key.split(".", 1)[1], expr) for key, expr in act.exprs.items() if key.startswith("attrs.")]
    run = current()
    collecting, run.details = run.details, None  # a proposal keeps no details
    try:
        _propose_each(ctx, act, combos, names, value_lists, unless, attr_exprs)
    finally:
        run.details = collecting


class _ByCombination:
    """The ``unless`` and ``attrs`` expressions of one proposal, each evaluated once per values of
    the combination's names it reads (``gpu``, not ``precision``: a GPU's vendor is looked up once,
    not once per precision and size). Sound because nothing else an expression reads changes while
    the proposal runs (it only creates items; no fact is set) and domain functions are pure; only
    scalar results are kept, so no item shares a mutable value with another. Values are told apart
    with their types (``1``, ``1.0`` and ``True`` are equal); where every list of the combination
    holds values of one type, the values alone tell them apart."""

    def __init__(self, spec: RuleSpec, names: list[str], lists: list[list[Any]]):
        self.spec, self.names, self.local = spec, names, frozenset(names)
        self.typed = any(len({type(v) for v in values}) > 1 for values in lists)
        self.keys: dict[int, Callable[[tuple], Any]] = {}  # what -> its key of a combination
        self.memos: dict[int, dict[Any, Any]] = {}

    def _key_of(self, what: Any, names: tuple[str, ...]) -> Callable[[tuple], Any]:
        positions = [self.names.index(n) for n in self.spec.expand(names) if n in self.local]
        if self.typed:
            def key(combo: tuple) -> Any:
                return tuple((type(combo[j]), combo[j]) for j in positions)
        elif not positions:
            def key(combo: tuple) -> Any:
                return ()
        else:
            key = operator.itemgetter(*positions)  # one value, or a tuple of them
        self.keys[id(what)] = key
        self.memos[id(what)] = {}
        return key

    def key_of(self, expr: Expr) -> Callable[[tuple], Any]:
        """The key of ``expr``'s results among the combinations (its memo: ``memos[id(expr)]``)."""
        return self.keys.get(id(expr)) or self._key_of(expr, expr.names)

    def evaluate(self, expr: Expr, res: Resolver, combo: tuple) -> Any:
        key = self.keys.get(id(expr)) or self._key_of(expr, expr.names)
        memo = self.memos[id(expr)]
        k = key(combo)
        try:
            return memo[k]
        except KeyError:
            pass
        except TypeError:  # an unhashable value in the combination
            return expr.evaluate(res)
        value = expr.evaluate(res)
        if type(value) in SCALARS:
            memo[k] = value
        return value

    def rejection(self, expr: Expr, templates: dict[str, Any], res: Resolver,
                  combo: tuple) -> tuple[dict[str, str], dict[str, Any]]:
        """The ``because`` of an ``unless`` that holds for the combination, in each language, and
        the values its expression reads: the same for every combination with the same values of
        the names they read (the proposal's other facts do not change), so made once for those
        (copied, as each rejection gets its own)."""
        key = self.keys.get(id(templates)) or self._key_of(
            templates, tuple(n for t in templates.values() for n in t.names) + expr.names)
        memo = self.memos[id(templates)]
        k = key(combo)
        try:
            hit = memo.get(k)
        except TypeError:  # an unhashable value in the combination
            k, hit = None, None
        if hit is None:
            hit = ({lang: render(t, res, lang) for lang, t in templates.items()},
                   read_known(expr.names, res))
            if k is not None:
                memo[k] = hit
        return dict(hit[0]), hit[1]


def _propose_each(ctx: ActionContext, act: Action, combos: list[tuple], names: list[str],
                  lists: list[list[Any]], unless: list[tuple[Expr, dict[str, str]]],
                  attr_exprs: list[tuple[str, Expr]]) -> None:
    spec, mem, a = ctx.spec, ctx.mem, act.spec
    kind = a["kind"]
    once = _ByCombination(spec, names, lists)
    skip = act.exprs.get("skip")
    make_id = act.exprs["id"]
    templates = [{lang: a["_templates"][(i, lang)] for lang in text} for i, (_, text) in enumerate(unless)]
    clauses = [(expr, templates[i], once.key_of(expr), once.memos[id(expr)]) for i, (expr, _) in enumerate(unless)]
    for combo in combos:
        local = dict(zip(names, combo, strict=False))
        res = live_resolver(mem, spec, ctx.iid, {}, local)
        if skip is not None and once.evaluate(skip, res, combo):
            continue
        item_id = str(make_id.evaluate(res))
        if (kind, item_id) in mem.items:
            continue
        blocked = False
        for expr, texts, key, memo in clauses:
            try:  # once.evaluate(expr, res, combo), written out: the proposal's inner loop
                hit = memo[key(combo)]
            except (KeyError, TypeError):
                hit = once.evaluate(expr, res, combo)
            if hit:
                msg, known = once.rejection(expr, texts, res, combo)
                mem.rejections.append({
                    "option": item_id, "kind": kind, "rule": spec.id, "stage": spec.stage,
                    "because": msg, "values": jsonable({**local, **known}),
                })
                blocked = True
                break
        if blocked:
            continue
        attrs = {name: once.evaluate(expr, res, combo) for name, expr in attr_exprs}
        ctx.store.create_item(kind, item_id, attrs, ctx.step_no)
        ctx.conclusions.append({"fact": f"{kind}[{item_id}]", "value": jsonable(attrs)})


def _figure(expr: Expr, resolve: Resolver) -> Any:
    """A rejection's figure, or None where it cannot be computed (as its ``because`` shows "—"
    for a value that fails: e.g. an estimate of a layout the model's KV heads do not split into)."""
    try:
        return expr.evaluate(resolve)
    except (NotReady, EvalError):
        return None


@action("reject")
def reject(ctx: ActionContext, act: Action) -> None:
    spec, mem = ctx.spec, ctx.mem
    option = act.spec.get("option")
    values = read_known(spec.names, ctx.resolve)
    if option is None:
        if not spec.for_each or ctx.iid is None:
            raise EvalError("reject without `option` needs `for_each`")
        if not ctx.store.reject_item(spec.for_each, ctx.iid):
            return
        option, kind = ctx.iid, spec.for_each
    else:
        kind = "option"
        if any(r["option"] == option and r["rule"] == spec.id for r in mem.rejections):
            return
    record = {"option": option, "kind": kind, "rule": spec.id, "stage": spec.stage, "because": ctx.because,
              "values": jsonable(values), "step": ctx.step_no}
    figures = {key[len("figures."):]: expr for key, expr in act.exprs.items() if key.startswith("figures.")}
    if figures:  # the numbers a view draws of this rejection (e.g. an infeasible plan's nearest misses)
        record["figures"] = jsonable({name: _figure(expr, ctx.resolve) for name, expr in figures.items()})
    mem.rejections.append(record)
    ctx.conclusions.append({"fact": f"rejected[{option}]", "value": True})


@action("warn")
def warn(ctx: ActionContext, act: Action) -> None:
    spec, mem = ctx.spec, ctx.mem
    if any(w["rule"] == spec.id and w["message"] == ctx.because for w in mem.warnings):
        return
    mem.warnings.append({"rule": spec.id, "severity": act.spec.get("severity", "warning"),
                         "message": ctx.because, "step": ctx.step_no})
    ctx.conclusions.append({"fact": f"warning[{spec.id}]", "value": ctx.because.get("en")})


@action("ask")
def ask(ctx: ActionContext, act: Action) -> None:
    key = act.spec["input"]
    if any(a["input"] == key for a in ctx.mem.asks):
        return
    ctx.mem.asks.append({"input": key, "rule": ctx.spec.id, "because": ctx.because, "step": ctx.step_no})
    ctx.conclusions.append({"fact": f"ask[{key}]", "value": True})


@action("least")
def least(ctx: ActionContext, act: Action) -> None:
    """The least value of attribute ``of`` over the other live items of the rule's kind that share
    the ``among`` attributes with this one (e.g. the cheapest candidate sized so far in the same
    market group): this item's ``<as>`` and ``<as>_id``, None when no such item has it yet (ties: the
    first that got it). The other items are named in the conclusion, not taken as premises: an
    explanation of this item does not go on through how they were sized."""
    spec, mem, a = ctx.spec, ctx.mem, act.spec
    kind, of, among, name = spec.for_each, a["of"], tuple(a.get("among") or ()), a["as"]
    mine = mem.items[(kind, ctx.iid)]
    group = tuple(mine.get(k) for k in among)
    best: tuple[Any, str] | None = None
    rejected, items = mem.rejected_items, mem.items
    for iid in mem.having.get((kind, of), ()):
        attrs = items[(kind, iid)]
        value = attrs.get(of)
        if value is None or iid == ctx.iid or (kind, iid) in rejected \
                or tuple(attrs.get(k) for k in among) != group:
            continue
        if best is None or value < best[0]:
            best = (value, iid)
    value, peer = best if best is not None else (None, None)
    for attr, v in ((name, value), (f"{name}_id", peer)):
        if mine.get(attr, mine) != v:  # (an attribute it does not have yet differs from any value)
            ctx.pending[attr] = v
            ctx.conclusions.append({"fact": item_fact_name(kind, ctx.iid, attr), "value": jsonable(v),
                                    "formula": f"min({of}) over the live {kind} items with the same "
                                               f"{'/'.join(among) or 'kind'}"})


@action("select")
def select(ctx: ActionContext, act: Action) -> None:
    spec, mem, store, a = ctx.spec, ctx.mem, ctx.store, act.spec
    kind, alias = a["kind"], a["as"]
    keys = [act.exprs[f"minimize.{i}"] for i in range(len(a["minimize"]))]
    scored = []
    for position, item in enumerate(mem.live_items(kind)):
        res = live_resolver(mem, None, item[1], item_kind=kind)
        try:
            score = tuple(k.evaluate(res) for k in keys)
        except NotReady as exc:
            mem.rejections.append({
                "option": item[1], "kind": kind, "rule": spec.id, "stage": spec.stage,
                "because": both("select.not-evaluated", name=exc.args[0]), "values": {}})
            continue
        scored.append((score, position, item))
    scored.sort(key=lambda s: (s[0], s[1]))
    if not scored:
        store.set_value(f"{alias}.id", None, ctx.step_no)
        ctx.conclusions.append({"fact": f"{alias}.id", "value": None})
        return
    best_score, _, best = scored[0]
    attrs = mem.items[best]
    store.set_value(f"{alias}.id", best[1], ctx.step_no)
    ctx.conclusions.append({"fact": f"{alias}.id", "value": best[1],
                            "formula": f"argmin({', '.join(k.source for k in keys)}) over "
                                       f"{len(scored)} {kind} items"})
    for attr in sorted(attrs):
        store.set_value(f"{alias}.{attr}", attrs[attr], ctx.step_no)
    for attr in sorted(attrs):
        st = mem.step_of(attr, best)
        p = {"fact": item_fact_name(kind, best[1], attr), "value": jsonable(attrs[attr])}
        if st is not None:
            p["step"] = st
        ctx.extra_premises.append(p)
    given = a.get("labels") or []
    labels = [given[i] if i < len(given) else
              (k.source.split(".", 1)[1] if k.names == (k.source,) else f"key {i + 1}")
              for i, k in enumerate(keys)]
    best_text = score_text(best_score, labels)
    if a.get("record") is False:  # a secondary choice (e.g. the closest alternative): no rejections
        return
    templates = a.get("_templates") or {}
    for score, _, item in scored[1:]:
        because = both("select.ranked-below", best=best[1], score=score_text(score, labels),
                       best_score=best_text)
        if templates:  # the rule's own wording: loser as `kind.*`, winner as `alias.*`
            because = _ranked_because(mem, spec, templates, kind, alias, item, best, because)
        mem.rejections.append({
            "option": item[1], "kind": kind, "rule": spec.id, "stage": spec.stage,
            "because": because,
            "values": {"score": jsonable(list(score)), "selected_score": jsonable(list(best_score))},
            "step": ctx.step_no, "ranked": True})


def _ranked_because(mem: Memory, spec: RuleSpec, templates, kind: str, alias: str, item, best,
                    fallback) -> dict[str, str]:
    """The rule's ``ranked_because`` for one item ranked below the best: the item as ``kind.*``, the
    best as ``alias.*``, and the rule's ``let:`` bindings evaluated for this item (so a choice in
    the text reads one value computed in ``let:``, never a ``{=…}`` field)."""
    item_res = live_resolver(mem, None, item[1], item_kind=kind)
    best_attrs = mem.items[best]

    def resolve(name: str) -> Any:
        if name.startswith(alias + "."):
            attr = name[len(alias) + 1:]
            if attr == "id":
                return best[1]
            if attr in best_attrs:
                return best_attrs[attr]
            raise NotReady(name)
        return item_res(name)

    shown = with_lets(spec, resolve)
    out = {}
    for lang in ("en", "zh"):
        tpl = templates.get(("ranked", lang))
        try:
            out[lang] = render(tpl, shown, lang) if tpl else fallback[lang]
        except (NotReady, EvalError, KeyError):
            out[lang] = fallback[lang]
    return out
