"""Justifications: what a firing records so that every conclusion can be explained.

A step holds the rule, its source, the premises (each fact read with its value and the step or
origin it came from), the conclusions (value, expression, the formula with the numbers
substituted, details such as the performance model's formula steps) and the rendered
``because``. Values are put into sentences by engine/common/text.py.
"""

from __future__ import annotations

import json
from typing import Any

from servewise.engine.common.deferred import Deferred
from servewise.engine.common.text import format_value
from servewise.engine.domain.functions import reset_context, use_context
from servewise.engine.lang.expr import EvalError, Expr
from servewise.engine.lang.rulebase import RuleSpec
from servewise.engine.lang.template import Choice, Part, Template
from servewise.engine.runtime.memory import Memory, item_fact_name
from servewise.engine.runtime.resolve import NotReady, Resolver, with_lets

_PLAIN = (str, int, float, bool, type(None))


def jsonable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists, unknown objects strings)."""
    kind = type(value)
    if kind in _PLAIN:  # exact types: what json.dumps/loads gives back unchanged
        return value
    if kind is list or kind is tuple:
        return [jsonable(v) for v in value]
    if kind is Deferred:  # computed now that it is shown
        return jsonable(value.get())
    if kind is dict and all(type(k) is str for k in value):
        return {k: jsonable(v) for k, v in value.items()}
    return json.loads(json.dumps(value, default=str))  # other keys and objects: as JSON writes them


def score_text(values: tuple, labels: list[str]) -> str:
    """A ranking score as ``label value, ...`` (large numbers grouped)."""
    return ", ".join(
        f"{label} " + (f"{v:,.0f}" if isinstance(v, (int, float)) and abs(v) >= 100 else format_value(v, None))
        for label, v in zip(labels, values, strict=False))


def render(template: Template, resolve: Resolver, lang: str = "en") -> str:
    """A ``because`` template with its fields filled in and each choice's case for ``lang`` taken
    (engine/lang/template.py); an unknown field or choice value shows as ``?``."""
    out: list[str] = []
    _render_parts(template.parts, template, resolve, lang, out)
    return "".join(out)


def _render_parts(parts: tuple[Part, ...], template: Template, resolve: Resolver, lang: str,
                  out: list[str]) -> None:
    for literal, node in parts:
        out.append(literal)
        if node is None:
            continue
        try:
            if type(node) is Choice:
                case = node.case(resolve(node.name), lang)
            elif node.name.startswith("="):
                expr = template.expr(node.name)
                out.append(format_value(expr.evaluate(resolve) if expr is not None else None, node.spec, lang))
                continue
            else:
                out.append(format_value(resolve(node.name), node.spec, lang))
                continue
        except (NotReady, EvalError, KeyError):
            out.append("?")
            continue
        _render_parts(case, template, resolve, lang, out)


_RAW = "_unsettled"  # a conclusion's materials until settle() writes its value, formula, details


def conclusion(fact: str, value: Any, expr: Expr | None, read: dict[str, Any],
               details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One concluded fact. Its value as JSON, the expression, the formula with its numbers and the
    details are written by :func:`settle` when the step is shown (most steps never are: a plan
    shows the steps behind its choices), from the objects given here, which are never changed."""
    # details are records nobody changes once noted (engine/domain/provenance.py replaces a
    # catalog record instead of appending to it), so they are kept as they are until shown
    return {"fact": fact, _RAW: (value, expr, read, details or None)}


def settle(step: dict[str, Any]) -> dict[str, Any]:
    """``step`` with every conclusion and its ``because`` written out in full (in place; again
    is a no-op)."""
    for c in step["conclusions"]:
        raw = c.pop(_RAW, None)
        if raw is not None:
            c.update(_written(*raw))
    if type(step["because"]) is DeferredText:
        step["because"] = step["because"].render()
    return step


def shown_values(mem: Memory, spec: RuleSpec, iid: str | None, pending: dict[str, Any]) -> dict[str, Any]:
    """The values a rule's ``because`` shows (its template fields and what its ``let:`` bindings
    there read), as they are when it fires: its own item results (``pending``) first."""
    kind = spec.for_each
    prefix = f"{kind}." if kind else None
    attrs = mem.items.get((kind, iid), {}) if kind and iid is not None else {}
    values = mem.values
    out: dict[str, Any] = {}
    for name in spec.template_names:
        if prefix and name.startswith(prefix) and iid is not None:
            attr = name[len(prefix):]
            if attr == "id":
                out[name] = iid
            elif attr in pending:
                out[name] = pending[attr]
            elif attr in attrs:
                out[name] = attrs[attr]
        elif name in values:
            out[name] = values[name]
    return out


class DeferredText:
    """A step's ``because`` not rendered yet: the rule, the values it shows (taken when it fired)
    and the run's context (catalog, custom models, the inputs given), which the ``let:``
    bindings of the template may read through domain functions."""

    __slots__ = ("spec", "values", "context")

    def __init__(self, spec: RuleSpec, values: dict[str, Any], context: Any):
        self.spec, self.values, self.context = spec, values, context

    def render(self) -> dict[str, str]:
        values = self.values

        def resolve(name: str) -> Any:
            if name in values:
                return values[name]
            raise NotReady(name)

        shown = with_lets(self.spec, resolve)
        token = use_context(self.context)
        try:
            return {lang: render(t, shown, lang) for lang, t in self.spec.because.items()}
        finally:
            reset_context(token)


def _written(value: Any, expr: Expr | None, read: dict[str, Any],
             details: list[dict[str, Any]] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"value": jsonable(value)}
    if expr is not None and expr.names:
        out["expression"] = expr.source
        if not expr.is_path:  # a copied fact needs no formula (no "'fp8' = fp8" tautologies)
            out["formula"] = f"{expr.render(read)} = {format_value(value, None)}"
    if details:
        out["details"] = jsonable(details)
    return out


def premises(mem: Memory, read: dict[str, Any], spec: RuleSpec, iid: str | None) -> list[dict[str, Any]]:
    """The facts a firing read (not those it produced), each with the step or origin behind it."""
    out = []
    prefix = f"{spec.for_each}." if spec.for_each else None
    for name, value in read.items():
        if name in spec.produces:
            continue
        entry: dict[str, Any] = {"fact": name, "value": jsonable(value)}
        if prefix and iid is not None and name.startswith(prefix):
            attr = name[len(prefix):]
            entry["fact"] = item_fact_name(spec.for_each, iid, attr)
            step = mem.step_of(attr, (spec.for_each, iid))
        else:
            step = mem.step_of(name)
            origin = mem.origins.get(name)
            if origin is not None and step is None:
                entry["origin"] = {"kind": origin.kind, "ref": origin.ref}
        if step is not None:
            entry["step"] = step
        out.append(entry)
    return out


def make_step(mem: Memory, spec: RuleSpec, iid: str | None, step_no: int, read: dict[str, Any],
              extra_premises: list[dict[str, Any]], conclusions: list[dict[str, Any]],
              because: dict[str, str]) -> dict[str, Any]:
    """The trace step of one firing that concluded something."""
    step = {
        "step": step_no, "rule": spec.id, "stage": spec.stage,
        "source": spec.sources[0] if len(spec.sources) == 1 else spec.sources,
        "item": f"{spec.for_each}[{iid}]" if spec.for_each else None,
        "premises": premises(mem, read, spec, iid) + extra_premises,
        "conclusions": conclusions, "because": because,
    }
    if spec.corrects:
        step["corrects"] = spec.corrects["en"]
        if len(spec.corrects) > 1:
            step["corrects_i18n"] = spec.corrects
    return step


def settled_steps(mem: Memory) -> list[dict[str, Any]]:
    """Every trace step of ``mem`` written out in full (for tools that read all of them)."""
    return [settle(s) for s in mem.steps]
