"""Run a rule base over workload facts with experta, stage by stage, recording why every fact holds.

Working memory keeps the values; experta facts carry only keys and revisions, so the Rete network
re-evaluates a rule whenever a value it reads changes. A rule fires at most once for the same
values read (content-based refraction), which keeps chains finite and explanations free of
repeats; a loop guard stops rule sets that still re-fire without end.
"""

from __future__ import annotations

import inspect
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .experta_compat import MATCH, TEST, Fact, IndexedReteMatcher, KnowledgeEngine, Rule, StableStrategy
from .expr import EvalError, Expr
from .functions import RunContext, current, reset_context, use_context
from .messages import both, message
from .rulebase import STAGES, RuleBase, RuleSpec, Template

MAX_FIRINGS_PER_STAGE = 50_000
TIME_BUDGET_S = 60.0  # per plan (one model); the built-in rules need well under a second
MAX_PROPOSALS = 20_000

# Process-wide work counters (condition tests run by the Rete network, activations the agenda
# fired, rule firings recorded): read by the benchmark and by the CI guard on planning work
# (tests/test_plan_work.py). Compare before/after values; never reset by the engine.
WORK: Counter = Counter()
MATCHER = IndexedReteMatcher  # experta's ReteMatcher gives the same plans, slower (tested)


class Stage(Fact):
    """The stage now running; every compiled rule requires its own stage."""


class Value(Fact):
    """A global fact ``key`` at revision ``rev`` (the value lives in working memory)."""


class Item(Fact):
    """An item (e.g. a candidate) ``kind``/``id`` at revision ``rev``."""


class LoopError(RuntimeError):
    def __init__(self, stage: str, counts: Counter, limit: int = MAX_FIRINGS_PER_STAGE):
        self.stage, self.counts = stage, counts
        top = ", ".join(f"{r} ({n}×)" for r, n in counts.most_common(5))
        super().__init__(f"rules keep re-firing in stage '{stage}' (more than "
                         f"{limit} firings): {top}")


class PlanTimeout(LoopError):
    """Building or running the rule engine for one plan took longer than the time budget."""

    def __init__(self, budget_s: float, phase: str):  # noqa: B042 - no super().__init__ of LoopError
        self.budget_s, self.stage, self.counts = budget_s, phase, Counter()
        RuntimeError.__init__(self, f"the plan took longer than its time budget of {budget_s:g} s ({phase}); "
                         f"a rule folder with too many or too costly rules?")


class RuleRuntimeError(RuntimeError):
    def __init__(self, rule: RuleSpec, message: str):
        self.rule = rule
        super().__init__(f"{rule.file}:{rule.line}: {rule.id}: {message}")


_MISSING = object()  # an item attribute not derived yet (in condition-test memo keys)
_EMPTY: dict[str, Any] = {}


class _NotReady(Exception):
    """An item attribute a rule reads is not derived yet."""


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _fmt(value: Any, spec: str | None, lang: str = "en") -> str:
    if value is None:
        return "—"
    if spec:
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            pass
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, bool):
        return message("yes" if value else "no", lang)
    return str(value)


def _score(values: tuple, labels: list[str]) -> str:
    return ", ".join(
        f"{label} " + (f"{v:,.0f}" if isinstance(v, (int, float)) and abs(v) >= 100 else _fmt(v, None))
        for label, v in zip(labels, values, strict=False))


def render(template: Template, resolve, lang: str = "en") -> str:
    from .rulebase import TEMPLATE_FIELD

    def sub(m):
        field = m.group(1)
        try:
            if field.startswith("="):
                expr = template.expr(field)
                value = expr.evaluate(resolve) if expr is not None else None
            else:
                value = resolve(field)
            return _fmt(value, m.group(2), lang)
        except (_NotReady, EvalError, KeyError):
            return "?"

    return TEMPLATE_FIELD.sub(sub, template.text)


def with_lets(spec: RuleSpec, resolve):
    """A resolver that also knows the rule's ``let:`` bindings, each evaluated once at first use.

    ``name.field`` reads a field of a binding whose value is a record (a mapping)."""
    if not spec.lets:
        return resolve
    lets = spec.let_map
    memo: dict[str, Any] = {}

    def resolve_let(name: str) -> Any:
        root, _, rest = name.partition(".")
        if root not in lets:
            return resolve(name)
        if root not in memo:
            memo[root] = lets[root].evaluate(resolve_let)
        value = memo[root]
        for part in rest.split(".") if rest else ():
            if not isinstance(value, dict) or part not in value:
                raise EvalError(f"'{name}': the value of '{root}' has no field '{part}'")
            value = value[part]
        return value

    return resolve_let


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

    def step_of(self, name: str, item: tuple[str, str] | None = None) -> int | None:
        if item is not None:
            return self.item_steps.get((item[0], item[1], name))
        return self.value_step.get(name)

    def live_items(self, kind: str) -> list[tuple[str, str]]:
        return [k for k in self.item_order if k[0] == kind and k not in self.rejected_items]


def item_fact_name(kind: str, item_id: str, attr: str) -> str:
    return f"{kind}[{item_id}].{attr}"


class Runner:
    """Compile a rule base to an experta engine and run it over input facts."""

    def __init__(self, rulebase: RuleBase, max_firings: int = MAX_FIRINGS_PER_STAGE,
                 time_budget_s: float | None = None):
        self.rulebase = rulebase
        self.max_firings = max_firings
        self.time_budget_s = TIME_BUDGET_S if time_budget_s is None else time_budget_s
        self.deadline = time.monotonic() + self.time_budget_s
        self.mem = Memory()
        self._seen: set[tuple] = set()
        self.engine = self._build_engine()

    # ---------------------------------------------------------------- compile
    def _build_engine(self) -> KnowledgeEngine:
        attrs: dict[str, Any] = {"__strategy__": StableStrategy, "__matcher__": MATCHER}
        for spec in self.rulebase.rules:
            self._check_time("compiling the rules")
            attrs[f"r{spec.load_order:05d}"] = self._compile_rule(spec)
        cls = type("ServewiseEngine", (KnowledgeEngine,), attrs)
        engine = cls()
        engine.reset()
        return engine

    def _compile_rule(self, spec: RuleSpec) -> Rule:
        patterns: list[Any] = [Stage(name=spec.stage)]
        params: list[str] = []
        revs: dict[str, str] = {}
        for i, name in enumerate(spec.global_names):
            var = f"v{i}"
            revs[name] = var
            patterns.append(Value(key=name, rev=getattr(MATCH, var)))
            params.append(var)
        if spec.for_each:
            # last, so an item change passes one join; a rejected item's fact is retracted,
            # so for-each rules simply stop seeing it
            patterns.append(Item(kind=spec.for_each, id=MATCH.iid, rev=MATCH.irev))
            params += ["iid", "irev"]
        runner = self
        rev_vars = tuple(revs.values())
        prefix = f"{spec.for_each}."
        item_attrs = tuple(dict.fromkeys(spec.item_names + tuple(
            n[len(prefix):] for e in spec.when for n in spec.expand(e.names) if n.startswith(prefix))))
        kind = spec.for_each
        item_revs = self.mem.item_revs
        memo: dict[tuple, bool] = {}

        def test(**bound):
            # a pure function of the matched fact revisions, as the Rete network requires; so the
            # result is remembered per value read: global values by revision, item attributes by
            # identity (a new item revision copies the unchanged values, and every revision stays
            # in memory, so an identity is never reused). The retraction of a token, and a new
            # item revision that changed only attributes this rule does not read, cost a lookup.
            key: tuple = tuple(bound[v] for v in rev_vars)
            if kind:
                attrs = item_revs.get((kind, bound["iid"], bound["irev"]), _EMPTY)
                key += (bound["iid"],) + tuple(id(attrs.get(a, _MISSING)) for a in item_attrs)
            hit = memo.get(key)
            if hit is None:
                WORK["condition_tests"] += 1
                hit = memo[key] = runner._conditions_hold(spec, bound, revs)
            return hit

        test.__signature__ = inspect.Signature(
            [inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY) for p in params])

        def rhs(engine, **context):
            WORK["activations"] += 1
            runner._fire(spec, context.get("iid"))

        # experta rebuilds Rule objects from the wrapped function (update_wrapper copies its
        # __dict__), so the tie-break key must live on the function
        rhs.__name__ = spec.id
        rhs.load_order = spec.load_order
        return Rule(*patterns, TEST(test), salience=spec.salience)(rhs)

    def _snapshot_resolver(self, spec: RuleSpec, bound: dict[str, Any], revs: dict[str, str]):
        mem = self.mem
        kind = spec.for_each
        prefix = f"{kind}." if kind else None
        attrs = mem.item_revs.get((kind, bound.get("iid"), bound.get("irev")), {}) if kind else {}

        def resolve(name: str) -> Any:
            if prefix and name.startswith(prefix):
                attr = name[len(prefix):]
                if attr == "id":
                    return bound["iid"]
                if attr not in attrs:
                    raise _NotReady(name)
                return attrs[attr]
            if name in revs:
                return mem.value_revs[(name, bound[revs[name]])]
            raise _NotReady(name)

        return with_lets(spec, resolve)

    # ---------------------------------------------------------------- reading
    def _resolver(self, spec: RuleSpec | None, iid: str | None, log: dict[str, Any] | None = None,
                  local: dict[str, Any] | None = None, item_kind: str | None = None,
                  pending: dict[str, Any] | None = None):
        mem = self.mem
        kind = item_kind or (spec.for_each if spec else None)
        prefix = f"{kind}." if kind else None

        def resolve(name: str) -> Any:
            if local is not None and name in local:
                return local[name]
            if pending and prefix and name.startswith(prefix) and name[len(prefix):] in pending:
                return pending[name[len(prefix):]]
            if prefix and name.startswith(prefix) and iid is not None:
                attrs = mem.items.get((kind, iid), {})
                attr = name[len(prefix):]
                if attr == "id":
                    value = iid
                elif attr in attrs:
                    value = attrs[attr]
                else:
                    raise _NotReady(name)
            elif name in mem.values:
                value = mem.values[name]
            else:
                raise _NotReady(name)
            if log is not None and name not in log:
                log[name] = value
            return value

        return with_lets(spec, resolve) if spec is not None else resolve

    def _conditions_hold(self, spec: RuleSpec, bound: dict[str, Any], revs: dict[str, str]) -> bool:
        resolve = self._snapshot_resolver(spec, bound, revs)
        try:
            for name in spec.names:  # every fact the rule reads must be known
                if not (spec.for_each and name.startswith(spec.for_each + ".")):
                    continue
                resolve(name)
            return all(bool(cond.evaluate(resolve)) for cond in spec.when)
        except _NotReady:
            return False
        except EvalError as exc:
            raise RuleRuntimeError(spec, f"condition failed to evaluate: {exc}") from None

    # ---------------------------------------------------------------- firing
    def _premises(self, log: dict[str, Any], spec: RuleSpec, iid: str | None) -> list[dict[str, Any]]:
        out = []
        for name, value in log.items():
            if name in spec.produces:
                continue
            entry: dict[str, Any] = {"fact": name, "value": _jsonable(value)}
            if spec.for_each and iid is not None and name.startswith(spec.for_each + "."):
                attr = name[len(spec.for_each) + 1:]
                entry["fact"] = item_fact_name(spec.for_each, iid, attr)
                step = self.mem.step_of(attr, (spec.for_each, iid))
            else:
                step = self.mem.step_of(name)
                origin = self.mem.origins.get(name)
                if origin is not None and step is None:
                    entry["origin"] = {"kind": origin.kind, "ref": origin.ref}
            if step is not None:
                entry["step"] = step
            out.append(entry)
        return out

    def _check_time(self, phase: str) -> None:
        if time.monotonic() > self.deadline:
            raise PlanTimeout(self.time_budget_s, phase)

    def _fire(self, spec: RuleSpec, iid: str | None) -> None:
        self._check_time(f"stage {spec.stage}")
        mem = self.mem
        read: dict[str, Any] = {}
        pending_item: dict[str, Any] = {}
        resolve = self._resolver(spec, iid, read, pending=pending_item)
        try:
            for name in spec.names:
                resolve(name)
        except _NotReady:
            return
        signature = (spec.id, iid, json.dumps(read, sort_keys=True, default=str))
        if signature in self._seen:
            return
        self._seen.add(signature)
        mem.fired[spec.id] += 1
        WORK["firings"] += 1
        step_no = len(mem.steps) + 1
        self._extra_premises: list[dict[str, Any]] = []
        conclusions: list[dict[str, Any]] = []
        because: dict[str, str] = {}

        def run(kinds: tuple[str, ...]) -> None:
            for action in spec.actions:
                if action.kind not in kinds:
                    continue
                try:
                    getattr(self, f"_do_{action.kind}")(spec, action, iid, resolve, step_no,
                                                        because, conclusions, pending_item)
                except EvalError as exc:
                    raise RuleRuntimeError(spec, f"{action.kind} failed: {exc}") from None

        run(("derive", "choose", "propose", "select"))
        # the explanation may show this rule's own results: render it after they are computed
        shown = self._resolver(spec, iid, None, pending=pending_item)
        because.update({lang: render(t, shown, lang) for lang, t in spec.because.items()})
        run(("reject", "warn", "ask"))
        if not conclusions:
            return
        step = {
            "step": step_no, "rule": spec.id, "stage": spec.stage,
            "source": spec.sources[0] if len(spec.sources) == 1 else spec.sources,
            "item": f"{spec.for_each}[{iid}]" if spec.for_each else None,
            "premises": self._premises(read, spec, iid) + self._extra_premises,
            "conclusions": conclusions, "because": because,
        }
        if spec.corrects:
            step["corrects"] = spec.corrects
        mem.steps.append(step)
        if pending_item:
            self._update_item(spec.for_each, iid, pending_item, step_no)

    def _eval(self, expr: Expr, resolve) -> tuple[Any, list[dict[str, Any]]]:
        ctx = current()
        ctx.details = []
        value = expr.evaluate(resolve)
        return value, list(ctx.details)

    def _conclusion(self, fact: str, value: Any, expr: Expr | None, read: dict[str, Any],
                    details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"fact": fact, "value": _jsonable(value)}
        if expr is not None and expr.names:
            out["expression"] = expr.source
            out["formula"] = f"{expr.render(read)} = {_fmt(value, None)}"
        if details:
            out["details"] = _jsonable(details)
        return out

    def _expr_read(self, expr: Expr, resolve) -> dict[str, Any]:
        values = {}
        for n in expr.names:
            try:
                values[n] = resolve(n)
            except _NotReady:
                pass
        return values

    def _do_derive(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        for key, expr in action.exprs.items():
            value, details = self._eval(expr, resolve)
            read = self._expr_read(expr, resolve)
            if spec.for_each and key.startswith(spec.for_each + "."):
                attr = key[len(spec.for_each) + 1:]
                current_attrs = self.mem.items.get((spec.for_each, iid), {})
                if attr in current_attrs and current_attrs[attr] == value:
                    continue
                pending[attr] = value
                conclusions.append(self._conclusion(item_fact_name(spec.for_each, iid, attr), value,
                                                    expr, read, details))
            else:
                if self._set_value(key, value, step_no):
                    conclusions.append(self._conclusion(key, value, expr, read, details))

    def _do_choose(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        comp = action.spec["component"]
        for key, value in (action.spec.get("set") or {}).items():
            if self._set_value(f"components.{comp}.{key}", value, step_no):
                conclusions.append(self._conclusion(f"components.{comp}.{key}", value, None, {}))
        for key, expr in action.exprs.items():
            name = key.split(".", 1)[1]
            value, details = self._eval(expr, resolve)
            if self._set_value(f"components.{comp}.{name}", value, step_no):
                conclusions.append(self._conclusion(f"components.{comp}.{name}", value, expr,
                                                    self._expr_read(expr, resolve), details))

    def _do_propose(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        a = action.spec
        kind = a["kind"]
        over = {k.split(".", 1)[1]: e for k, e in action.exprs.items() if k.startswith("over.")}
        lists = {}
        for name, expr in over.items():
            values = expr.evaluate(resolve)
            if not isinstance(values, list):
                values = [values]
            lists[name] = values
        names = list(lists)
        combos = list(itertools.product(*(lists[n] for n in names)))
        if len(combos) > MAX_PROPOSALS:
            raise EvalError(f"propose would create {len(combos)} items (limit {MAX_PROPOSALS})")
        unless = [(action.exprs[f"unless.{i}"], u["because"]) for i, u in enumerate(a.get("unless") or [])]
        created = 0
        for combo in combos:
            local = dict(zip(names, combo, strict=False))
            log: dict[str, Any] = {}
            res = self._resolver(spec, iid, log, local)
            item_id = str(action.exprs["id"].evaluate(res))
            if (kind, item_id) in self.mem.items:
                continue
            blocked = False
            for i, (expr, text) in enumerate(unless):
                if expr.evaluate(res):
                    rlog: dict[str, Any] = {}
                    rres = self._resolver(spec, iid, rlog, local)
                    msg = {lang: render(a["_templates"][(i, lang)], rres, lang) for lang in text}
                    self.mem.rejections.append({
                        "option": item_id, "kind": kind, "rule": spec.id, "stage": spec.stage,
                        "because": msg, "values": _jsonable({**local, **self._expr_read(expr, rres)}),
                    })
                    blocked = True
                    break
            if blocked:
                continue
            attrs = {}
            for key, expr in action.exprs.items():
                if key.startswith("attrs."):
                    attrs[key.split(".", 1)[1]] = expr.evaluate(res)
            self._create_item(kind, item_id, attrs, step_no)
            created += 1
            conclusions.append({"fact": f"{kind}[{item_id}]", "value": _jsonable(attrs)})

    def _do_reject(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        option = action.spec.get("option")
        values = {}
        for n in spec.names:
            try:
                values[n] = resolve(n)
            except _NotReady:
                pass
        if option is None:
            if not spec.for_each or iid is None:
                raise EvalError("reject without `option` needs `for_each`")
            key = (spec.for_each, iid)
            if key in self.mem.rejected_items:
                return
            self.mem.rejected_items.add(key)
            self.engine.retract(self._item_facts.pop(key))
            option = iid
            kind = spec.for_each
        else:
            kind = "option"
            if any(r["option"] == option and r["rule"] == spec.id for r in self.mem.rejections):
                return
        self.mem.rejections.append({"option": option, "kind": kind, "rule": spec.id,
                                    "stage": spec.stage, "because": because,
                                    "values": _jsonable(values), "step": step_no})
        conclusions.append({"fact": f"rejected[{option}]", "value": True})

    def _do_warn(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        entry = {"rule": spec.id, "severity": action.spec.get("severity", "warning"),
                 "message": because, "step": step_no}
        if any(w["rule"] == spec.id and w["message"] == because for w in self.mem.warnings):
            return
        self.mem.warnings.append(entry)
        conclusions.append({"fact": f"warning[{spec.id}]", "value": because.get("en")})

    def _do_ask(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        key = action.spec["input"]
        if any(a["input"] == key for a in self.mem.asks):
            return
        self.mem.asks.append({"input": key, "rule": spec.id, "because": because, "step": step_no})
        conclusions.append({"fact": f"ask[{key}]", "value": True})

    def _do_select(self, spec, action, iid, resolve, step_no, because, conclusions, pending):
        a = action.spec
        kind, alias = a["kind"], a["as"]
        keys = [action.exprs[f"minimize.{i}"] for i in range(len(a["minimize"]))]
        scored = []
        for item in self.mem.live_items(kind):
            res = self._resolver(None, item[1], None, None, item_kind=kind)
            try:
                score = tuple(k.evaluate(res) for k in keys)
            except _NotReady as exc:
                self.mem.rejections.append({
                    "option": item[1], "kind": kind, "rule": spec.id, "stage": spec.stage,
                    "because": both("select.not-evaluated", name=exc.args[0]), "values": {}})
                continue
            scored.append((score, self.mem.item_order.index(item), item))
        scored.sort(key=lambda s: (s[0], s[1]))
        if not scored:
            self._set_value(f"{alias}.id", None, step_no)
            conclusions.append({"fact": f"{alias}.id", "value": None})
            return
        best_score, _, best = scored[0]
        attrs = self.mem.items[best]
        self._set_value(f"{alias}.id", best[1], step_no)
        conclusions.append({"fact": f"{alias}.id", "value": best[1],
                            "formula": f"argmin({', '.join(k.source for k in keys)}) over "
                                       f"{len(scored)} {kind} items"})
        for attr in sorted(attrs):
            self._set_value(f"{alias}.{attr}", attrs[attr], step_no)
        step_premises = []
        for attr in sorted(attrs):
            st = self.mem.step_of(attr, best)
            p = {"fact": item_fact_name(kind, best[1], attr), "value": _jsonable(attrs[attr])}
            if st is not None:
                p["step"] = st
            step_premises.append(p)
        self._extra_premises.extend(step_premises)
        given = a.get("labels") or []
        labels = [given[i] if i < len(given) else
                  (k.source.split(".", 1)[1] if k.names == (k.source,) else f"key {i + 1}")
                  for i, k in enumerate(keys)]
        best_text = _score(best_score, labels)
        if a.get("record") is False:  # a secondary choice (e.g. the closest alternative): no rejections
            return
        templates = a.get("_templates") or {}
        for score, _, item in scored[1:]:
            because = both("select.ranked-below", best=best[1], score=_score(score, labels),
                           best_score=best_text)
            if templates:  # the rule's own wording: loser as `kind.*`, winner as `alias.*`
                because = self._ranked_because(templates, kind, alias, item, best, because)
            self.mem.rejections.append({
                "option": item[1], "kind": kind, "rule": spec.id, "stage": spec.stage,
                "because": because,
                "values": {"score": _jsonable(list(score)), "selected_score": _jsonable(list(best_score))},
                "step": step_no, "ranked": True})

    def _ranked_because(self, templates, kind, alias, item, best, fallback):
        item_res = self._resolver(None, item[1], None, None, item_kind=kind)
        best_attrs = self.mem.items[best]

        def resolve(name: str) -> Any:
            if name.startswith(alias + "."):
                attr = name[len(alias) + 1:]
                if attr == "id":
                    return best[1]
                if attr in best_attrs:
                    return best_attrs[attr]
                raise _NotReady(name)
            return item_res(name)

        out = {}
        for lang in ("en", "zh"):
            tpl = templates.get(("ranked", lang))
            try:
                out[lang] = render(tpl, resolve, lang) if tpl else fallback[lang]
            except (_NotReady, EvalError, KeyError):
                out[lang] = fallback[lang]
        return out

    # ---------------------------------------------------------------- memory
    def _set_value(self, key: str, value: Any, step: int | None, origin: Origin | None = None) -> bool:
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
            self.engine.retract(self._value_facts.pop(key))
        mem.item_rev[("value", key)] = rev
        mem.value_revs[(key, rev)] = value
        self._value_facts[key] = self.engine.declare(Value(key=key, rev=rev))
        return True

    def _create_item(self, kind: str, item_id: str, attrs: dict[str, Any], step: int) -> None:
        key = (kind, item_id)
        self.mem.items[key] = dict(attrs)
        self.mem.item_order.append(key)
        for attr in attrs:
            self.mem.item_steps[(kind, item_id, attr)] = step
        self.mem.item_rev[key] = 1
        self.mem.item_revs[(kind, item_id, 1)] = dict(attrs)
        self._item_facts[key] = self.engine.declare(Item(kind=kind, id=item_id, rev=1))

    def _update_item(self, kind: str, item_id: str, changes: dict[str, Any], step: int) -> None:
        key = (kind, item_id)
        self.mem.items[key].update(changes)
        for attr in changes:
            self.mem.item_steps[(kind, item_id, attr)] = step
        if key in self.mem.rejected_items:
            return
        self.engine.retract(self._item_facts.pop(key))
        self.mem.item_rev[key] += 1
        self.mem.item_revs[(kind, item_id, self.mem.item_rev[key])] = dict(self.mem.items[key])
        self._item_facts[key] = self.engine.declare(Item(kind=kind, id=item_id, rev=self.mem.item_rev[key]))

    # ---------------------------------------------------------------- run
    def run(self, facts: dict[str, tuple[Any, Origin]], ctx: RunContext,
            stop_after: str | None = None) -> Memory:
        """Declare the input facts and run every stage in order."""
        self._value_facts: dict[str, Any] = {}
        self._item_facts: dict[tuple[str, str], Any] = {}
        token = use_context(ctx)
        try:
            for key in facts:
                value, origin = facts[key]
                self._set_value(key, value, None, origin)
            for stage in STAGES:
                stage_fact = self.engine.declare(Stage(name=stage))
                before = Counter(self.mem.fired)
                self.engine.run(self.max_firings)
                fired = self.mem.fired - before
                if sum(fired.values()) >= self.max_firings or self.engine.agenda.activations:
                    raise LoopError(stage, fired, self.max_firings)
                self.engine.retract(stage_fact)
                if stop_after == stage:
                    break
        finally:
            reset_context(token)
        return self.mem
