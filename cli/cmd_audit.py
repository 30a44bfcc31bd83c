"""The auditor's commands: `explain` (HOW), `why-not` and `audit` over a saved plan.json.

Exit codes: 0 ok; 2 a missing or invalid plan file, or an unknown component/option (one line with
suggestions); `audit` exits 1 when the re-run plan differs from the saved one (like diff(1)).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from servewise.engine.app import explain as ex
from servewise.engine.common.messages import message
from servewise.engine.common.text import format_display as fmt
from servewise.engine.common.text import terminal_safe

from .brief import clip
from .errors import InputError
from .i18n import colon, pick, value_text
from .render import chain_value, component_line, layout_options, severity, shown_conclusions, to_json, warning_text
from .wrap import output_width, wrap, wrap_line


def tr(key: str, lang: str, **kw: Any) -> str:
    """The auditor's view text ``key`` (facts/messages/cli.yaml ``auditor.*``) in ``lang``."""
    return message(f"auditor.{key}", lang, **kw)


def load_plan(path: str) -> dict[str, Any]:
    """Read and validate a plan.json written by `servewise plan --format json` (``-``: stdin);
    InputError (one line naming the file and JSON path) when unusable."""
    from servewise.engine.app.planfile import PlanFileError, load_plan_file

    try:
        return load_plan_file(path)
    except PlanFileError as exc:
        from .errors import current_lang

        if exc.message == "file not found":
            raise InputError(f"{path}: no such plan file (make one: servewise plan W.yaml --format json -o "
                             f"{path})") from None
        raise InputError(value_text(str(exc), current_lang())) from None


def rule_titles(settings) -> dict[str, dict[str, Any]] | None:
    """Titles and sources of the rules, for display only: explain and why-not work from the plan
    alone, so a rule base that does not load (being edited) only loses the titles."""
    from servewise.engine.lang.rulebase import RuleLoadError, check_rule_folder, load_rules

    for d in settings.rules_dirs:  # not a rule folder at all (a FIFO, /dev/null, /etc): a usage error
        problem = check_rule_folder(d)
        if problem is not None:
            raise InputError(problem.text(settings.lang))
    try:
        return ex.rule_index(load_rules(settings.rules_dirs))
    except RuleLoadError:
        return None


def dump(data: Any) -> str:
    return to_json(data)


def source_lines(source: Any, lang: str, indent: str) -> list[str]:
    """Guideline id(s) or URL, seed document and section, then the verbatim quote."""
    out: list[str] = []
    for s in source if isinstance(source, list) else [source]:
        if not s:
            continue
        gid = s.get("guideline")
        ids = ", ".join(gid) if isinstance(gid, list) else (gid or s.get("url") or "?")
        where = " § ".join(x for x in (s.get("doc"), s.get("section")) if x)
        out.append(f"{indent}{tr('source', lang)}: {ids}" + (f" — {where}" if where else ""))
        if s.get("quote"):
            out.append(f"{indent}  “{s['quote']}”")
    return out


def premise_line(p: dict[str, Any], lang: str, plan: dict[str, Any] | None = None) -> str:
    if "step" in p:
        where = tr("step", lang, n=p["step"])
    else:
        origin = p.get("origin") or {}
        kind = {"input": "given", "default": "default"}.get(origin.get("kind", "?"))
        where = f"{tr(kind, lang) if kind else origin.get('kind', '?')}: {origin.get('ref', '?')}"
    return f"⇐ {p['fact']} = {shown_value(p['fact'], p.get('value'), plan, lang)}   ({where})"


def shown_value(fact: str, value: Any, plan: dict[str, Any] | None, lang: str) -> str:
    """A fact's value as the auditor's views show it: English as the tables format it; Chinese
    as the report's explanation chain shows it (cli/render.py chain_value)."""
    if lang == "en" or plan is None:
        return fmt(value)
    return chain_value(fact, value, plan, lang)


def detail_lines(detail: dict[str, Any], lang: str, indent: str) -> list[str]:
    head = detail.get("function", "?") + (f" {value_text(detail['metric'], lang)}" if detail.get("metric") else "")
    cal = detail.get("calibration") or {}
    if cal:
        source = value_text(str(cal.get("source")), lang, True)
        head += f"; {tr('calibration', lang)} {cal.get('gpu_class')}/{cal.get('backend')}: {source}"
    out = [f"{indent}{tr('model', lang)} ({head})"]
    if detail.get("formula"):
        out.append(f"{indent}  {value_text(detail['formula'], lang)} = {fmt(detail.get('result'))}")
    for x in detail.get("from") or []:
        out.append(f"{indent}  {fmt(x)}")
    for st in detail.get("steps") or []:
        vals = ", ".join(f"{k}={fmt(v)}" for k, v in (st.get("values") or {}).items())
        result = fmt(st.get("result"))
        out.append(f"{indent}  {value_text(str(st.get('name')), lang)}: {value_text(str(st.get('formula')), lang)} = "
                   f"{value_text(result, lang)} {st.get('unit', '')}".rstrip())
        if vals:
            out.append(f"{indent}      [{vals}]")
    return out


BRIEF_LINES = 25


def is_tautology(formula: str | None, value: Any) -> bool:
    """A formula that only restates its value (``'fp8'`` for fp8, ``3`` for 3): not worth a line."""
    if not formula:
        return True
    text = formula.strip().strip("'\"")
    if " = " in text:  # "'fp8' = fp8": the expression with its result substituted
        lhs, rhs = (part.strip().strip("'\"") for part in text.rsplit(" = ", 1))
        if lhs == rhs:
            return True
    return text in (str(value), fmt(value)) or (isinstance(value, bool) and text.lower() == str(value).lower())


def _brief_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + f"{len(value)} fields" + "}"
    text = fmt(value)
    return text if len(text) <= 60 else f"[{len(value)} items]" if isinstance(value, list) else text


def render_explain_brief(result: dict[str, Any], plan: dict[str, Any], lang: str, width: int = 80) -> str:
    """The decision path in at most BRIEF_LINES lines (after wrapping to ``width``): what was decided,
    by which rules (latest first), from which inputs and catalog entries; --full shows sources,
    formulas and premises."""
    target = result["target"]
    comp = target.split(".")[0]
    head = f"explain {target}"
    if "." not in target and comp in plan["components"]:
        head += f" — {component_line(comp, plan['components'][comp], lang)}"
    top = [head] + ([f"  ! {tr('undecided', lang)}"] if result["undecided"] else [])
    given = [i for i in result["inputs"] if i["given"]]
    inputs = ", ".join(f"{i['fact']}={fmt(i['value'])}" for i in given) or "—"
    tail = [f"{tr('inputs', lang)} ({tr('given', lang)}): {inputs}",
            f"{tr('catalog', lang)}: {value_text(', '.join(result['catalog']), lang, True) or '—'}",
            tr("full_hint", lang, target=target)]
    steps = result["steps"]
    lines: list[str] = []
    for k, s in enumerate(steps):
        # the reason, not the title: the step's because, clipped (two lines for the three latest)
        reason = pick(s.get("because_i18n") or s.get("because"), lang) or pick(s.get("title"), lang)
        reason = value_text(reason, lang, True)
        if not reason:
            facts = [c for c in s["conclusions"] if c["fact"] in result["facts"] or len(s["conclusions"]) == 1]
            reason = ", ".join(f"{c['fact'].removeprefix('components.')} = {_brief_value(c.get('value'))}"
                               for c in facts[:2])
        line = terminal_safe(f"  [{s['step']}] {s['rule']}: {' '.join(reason.split())}")
        lines.append("\n".join(clip(line, width or 80, 2 if k < 3 else 1)))
    top = [terminal_safe(x) for x in top + [tr("path", lang, n=len(steps))]]
    tail = [terminal_safe(x) for x in tail]
    # as many steps as fit (the latest first), counted by the lines each takes once wrapped
    fixed = sum(_rows(x, width) for x in top + tail)
    upto = [0]  # upto[k]: the lines the first k steps take
    for line in lines:
        upto.append(upto[-1] + _rows(line, width))

    def more(room: int) -> list[str]:
        return ["  " + tr("earlier", lang, n=len(steps) - room)] if room < len(steps) else []

    room = len(steps)
    while room and fixed + upto[room] + sum(_rows(x, width) for x in more(room)) > BRIEF_LINES:
        room -= 1
    return wrap("\n".join(top + lines[:room] + more(room) + tail) + "\n", width)


def _rows(text: str, width: int | None) -> int:
    """Lines ``text`` takes in the output once wrapped to ``width`` (as :func:`wrap` wraps it)."""
    parts = text.split("\n")
    return sum(len(wrap_line(part, width)) for part in parts) if width else len(parts)


def render_explain(result: dict[str, Any], plan: dict[str, Any], lang: str) -> str:
    target = result["target"]
    comp = target.split(".")[0]
    head = f"explain {target}"
    if "." not in target and comp in plan["components"]:
        head += f" — {component_line(comp, plan['components'][comp], lang)}"
    out = [f"{head}   ({tr('knowledge', lang)} {result['knowledge_hash']})"]
    out += [f"  {k} = {_fact_value(k, v, result, plan, lang)}" for k, v in result["facts"].items()]
    if result["undecided"]:
        out += ["", f"  ! {tr('undecided', lang)}"]
    out += ["", tr("chain", lang, n=len(result["steps"]))]
    shown_details: set[str] = set()
    for s in result["steps"]:
        title = pick(s.get("title"), lang)
        out.append("")
        out.append(f"[{s['step']}] {s['rule']}" + (f" — {title}" if title else "") + f"   ({s.get('stage')})")
        out += source_lines(s["source"], lang, "    ")
        if s.get("corrects"):
            out.append(f"    {tr('corrects', lang)}: {pick(s.get('corrects_i18n') or s['corrects'], lang)}")
        out.append(f"    {tr('why', lang)}: {value_text(pick(s['because_i18n'], lang), lang, True)}")
        for c in shown_conclusions(s, lang):
            out.append(f"    ⇒ {c['fact']} = {shown_value(c['fact'], c.get('value'), plan, lang)}")
            if not is_tautology(c.get("formula"), c.get("value")):
                out.append(f"        {tr('formula', lang)}: {c['formula']}")
            for d in c.get("details") or []:
                key = json.dumps(d.get("steps") or d, sort_keys=True)
                if key in shown_details:
                    continue
                shown_details.add(key)
                out += detail_lines(d, lang, "        ")
        hidden = s["conclusions_total"] - len(s["conclusions"])
        if hidden > 0:
            out.append(f"    {tr('other_conclusions', lang, n=hidden)}")
        out += [f"    {premise_line(p, lang, plan)}" for p in s["premises"]]
    out += ["", tr("inputs", lang)]
    for i in result["inputs"]:
        mark = tr("given", lang) if i["given"] else tr("default", lang)
        out.append(f"  {i['fact']} = {shown_value(i['fact'], i['value'], plan, lang)}   [{mark}]")
    out += ["", tr("catalog", lang)]
    out += [f"  {value_text(c, lang, True)}" for c in result["catalog"]] or ["  —"]
    return terminal_safe("\n".join(out) + "\n")


def _fact_value(key: str, value: Any, result: dict[str, Any], plan: dict[str, Any], lang: str) -> str:
    """The explained result's headline value: a warning in the reader's language."""
    if key == "warning" and lang != "en":
        rule = result["target"].removeprefix("warning:").removeprefix("warning ")
        return chain_value(f"warning[{rule}]", value, plan, lang)
    return shown_value(key, value, plan, lang)


def render_why_not(result: dict[str, Any], lang: str) -> str:
    status = result["status"]
    label = {"rejected": "rejected", "chosen": "chosen", "never-candidate": "never",
             "not-chosen": "not-chosen"}[status]
    layouts = layout_options(result.get("layouts") or {}, lang)
    chosen = next((name for name, _, mark in layouts if mark), result.get("chosen"))
    uses = f"{tr('uses', lang)} {chosen}" if chosen is not None else tr("uses_nothing", lang)
    out = [f"why-not {result['resolved']}: {tr(label, lang)}   ({uses}; "
           f"{tr('knowledge', lang)} {result['knowledge_hash']})"]
    if result.get("reason") == "not-in-plan":
        out.append(f"  {result['resolved']} {tr('not_in_plan', lang)}")
    if result.get("reason") == "not-searched":
        out.append(f"  {result['resolved']}: {tr('not_searched', lang)}")
    if result.get("field"):
        out.append(f"  {result['field']} = {fmt(result.get('value'))}")
    out += [f"  - {name}{colon(lang)}{text}" for name, text, _ in layouts]
    if result["groups"] and status != "chosen":
        best = result.get("closest") or result["groups"][0]["entries"][0]
        because = value_text(pick(best.get("because_i18n") or best["because"], lang), lang, True)
        out.append(f"  {tr('closest', lang)}: {best['option']} — {because}")
    for g in result["groups"]:
        title = pick(g.get("title"), lang)
        note = tr("at_proposal", lang) if g["at_proposal"] else (tr("ranked", lang) if g["ranked"] else "")
        out.append("")
        out.append(f"  {g['rule']}" + (f" — {title}" if title else "") + f"   ({g.get('stage')}; "
                   f"{len(g['entries'])}×)" + (f": {note}" if note else ""))
        if g.get("source"):
            out += source_lines(g["source"], lang, "    ")
        same: dict[str, list[dict[str, Any]]] = {}
        for r in g["entries"]:  # identical reasons collapse to one line
            same.setdefault(value_text(pick(r.get("because_i18n") or r["because"], lang), lang, True), []).append(r)
        for because, rs in same.items():
            prefix = result["resolved"] + " | "
            names = [r["option"].removeprefix(prefix) if len(rs) > 1 else r["option"] for r in rs]
            out.append(f"    - {', '.join(names)}: {because}")
            vals = ", ".join(f"{k}={shown_value(k, v, {}, lang)}" for k, v in (rs[0].get("values") or {}).items())
            if vals and len(rs) == 1:
                out.append(f"        [{vals}]")
    d = result.get("decided_by")
    if d:
        out.append("")
        out.append(f"  {tr('decided', lang)} {d['step']}: {d['rule']} ({d.get('stage')})")
        out.append(f"    {tr('why', lang)}: {value_text(pick(d['because_i18n'], lang), lang, True)}")
        for c in d["conclusions"][:8]:
            formula = f"   ← {c['formula']}" if c.get("formula") else ""
            out.append(f"    ⇒ {c['fact']} = {shown_value(c['fact'], c.get('value'), {}, lang)}{formula}")
        out += source_lines(d["source"], lang, "    ")
    if result.get("field"):
        out += ["", f"  {tr('more_how', lang)}: servewise explain PLAN.json "
                    f"{result['field'].removeprefix('components.')}"]
    return terminal_safe("\n".join(out) + "\n")


def render_why_not_warning(result: dict[str, Any], plan: dict[str, Any], lang: str) -> str:
    """Why a warning was given (its conditions with the values read, the inputs to change to avoid
    it) or not given (the first condition that does not hold, on the plan made again)."""
    def m(code: str, **args: Any) -> str:
        return message(f"why.{code}", lang, **args)

    title = pick(result["title"], lang)
    out = [f"why-not {result['rule']}: {m(result['status'])}   ({tr('knowledge', lang)} {result['knowledge_hash']})",
           f"  {title}"]
    if result["status"] == "given":
        given = {"rule": result["rule"], "message": "", "message_i18n": result["message_i18n"]}
        out += ["", m("message"), f"  {warning_text(given, lang)}", "", m("conditions_held", step=result["step"])]
        out += [f"  ✓ {c['expression']}   ({c['values']})" for c in result["conditions"]]
        if result["inputs"]:
            out += ["", m("inputs")]
            for i in result["inputs"]:
                mark = tr("given", lang) if i["given"] else tr("default", lang)
                out.append(f"  {i['fact']} = {shown_value(i['fact'], i['value'], plan, lang)}   [{mark}]")
        out += ["", m("more", rule=result["rule"])]
    else:
        out += ["", m("rerun")]
        for c in result["conditions"]:
            sign = "✓" if c["holds"] else "✗" if c["holds"] is False else "?"
            out.append(f"  {sign} {c['expression']}   ({c['values']})")
        last = result["conditions"][-1] if result["conditions"] else None
        if last is None:
            out.append(m("no_conditions"))
        elif last["holds"] is False:
            out += ["", m("because_false", expression=last["expression"])]
        elif last["holds"] is None:
            out += ["", m("because_unset", expression=last["expression"], facts=", ".join(last["unset"]) or "—")]
        if result.get("several_models"):
            out.append(m("several_models"))
        if result.get("rerun_knowledge_hash") != result["knowledge_hash"]:
            out.append(m("knowledge_changed", old=result["knowledge_hash"], new=result.get("rerun_knowledge_hash")))
    return terminal_safe("\n".join(out) + "\n")


def _warning_rule(settings, option: str):
    """The warning rule ``option`` names (``warning:<id>`` too), or None; the rules loaded as
    `why-not` loads them for titles (a rule base being edited: None)."""
    from servewise.engine.lang.rulebase import RuleLoadError, load_rules

    if "." not in option:  # rule ids are dotted (area.name); GPUs, layouts and values need no rules
        return None
    try:
        rb = load_rules(settings.rules_dirs)
    except RuleLoadError:
        return None
    spec = ex.warning_rule(rb, option)
    return None if spec is None else (spec, rb)


def _recorded_overlay(plan: dict[str, Any], plan_file: str):
    """The calibration overlay a plan records, read again from its file (None without one)."""
    recorded = plan.get("calibration_overlay")
    if not isinstance(recorded, dict):
        return None
    from .perf_commands import read_overlay

    path = str(recorded.get("path") or "")
    if not path or not Path(path).is_file():
        raise InputError(f"{plan_file}: calibration_overlay.path: the overlay file the plan was "
                         f"calibrated with ('{path}'), not found")
    return read_overlay(path)


def render_audit(report: dict[str, Any], lang: str) -> str:
    if report["identical"]:
        return terminal_safe(f"audit: {tr('identical', lang)} ({tr('knowledge', lang)} "
                             f"{report['new_knowledge_hash']})\n")
    key = "edited" if report.get("status") == "edited" else "changed"
    out = [f"audit: {tr(key, lang, old=report['old_knowledge_hash'], new=report['new_knowledge_hash'])}"]
    old_dirs, new_dirs = report.get("old_rules_dirs") or [], report.get("new_rules_dirs") or []
    if old_dirs != new_dirs:
        show = ", ".join(f"{d['path']} ({d['hash']})" for d in old_dirs) or "—"
        now = ", ".join(f"{d['path']} ({d['hash']})" for d in new_dirs) or "—"
        out.append(f"  {tr('rules_dirs', lang)}: {show} → {now}")
    for c in report["changes"]:
        if c["path"] != "knowledge_hash":
            old, new = (fmt(c[k]) if lang == "en" else chain_value(c["path"], c[k], {}, lang) for k in ("old", "new"))
            out.append(f"  {c['path']}: {old} → {new}")
    for key, sign in (("warnings_added", "+"), ("warnings_removed", "-")):
        for w in report[key]:
            level = w.get("severity") if lang == "en" else severity(str(w.get("severity")), lang)
            out.append(f"  {sign} {tr('warning', lang)} [{level}] {warning_text(w, lang)} ({w['rule']})")
    if report["rules_added"]:
        out.append(f"  {tr('rules_added', lang, ids=', '.join(report['rules_added']))}")
    if report["rules_removed"]:
        out.append(f"  {tr('rules_removed', lang, ids=', '.join(report['rules_removed']))}")
    if report["rejected_added"] or report["rejected_removed"]:
        added, removed = len(report["rejected_added"]), len(report["rejected_removed"])
        out.append(f"  {tr('rejected_count', lang, a=added, r=removed)}")
        for r in report["rejected_added"][:10]:
            out.append(f"    + {r['option']} ({r['rule']})")
        for r in report["rejected_removed"][:10]:
            out.append(f"    - {r['option']} ({r['rule']})")
    others = [c for c in report["changes"] if c["path"] not in ("knowledge_hash", "servewise_version")]
    diffs = (others or report["rules_added"] or report["rules_removed"] or report["warnings_added"]
             or report["warnings_removed"] or report["rejected_added"] or report["rejected_removed"])
    if not diffs:
        out.append("  " + tr("same_results" if not report["trace_changed"] else "trace_only", lang))
    return terminal_safe("\n".join(out) + "\n")


FORMAT = click.option("--format", "fmt_", type=click.Choice(["text", "json"]), default="text",
                      help="text for people, json for tools.")


@click.command("explain")
@click.argument("plan_file", metavar="PLAN.json", type=click.Path(dir_okay=False))
@click.argument("component")
@FORMAT
@click.option("--brief/--full", "brief", default=None,
              help=f"brief: the decision path in at most {BRIEF_LINES} lines (default in a terminal); "
                   "full: every step with sources, formulas and premises (default otherwise).")
@click.pass_obj
def explain(settings, plan_file: str, component: str, fmt_: str, brief: bool | None) -> None:
    """How COMPONENT (e.g. gpu, cooling, network.inter_node, cost) was chosen, or why a warning was
    given (its rule id, e.g. market.restricted-option): the chain of rules back to the inputs and
    catalog entries, with sources and formulas."""
    plan = load_plan(plan_file)
    try:
        result = ex.explain(plan, component, rule_titles(settings))
    except ex.ExplainError as exc:
        raise InputError(value_text(f"{plan_file}: {exc}", settings.lang)) from None
    if brief is None:
        brief = sys.stdout.isatty()
    if fmt_ == "json":
        text = dump(result)
    elif brief:
        text = render_explain_brief(result, plan, settings.lang, output_width())
    else:
        text = wrap(render_explain(result, plan, settings.lang), output_width())
    click.echo(text, nl=False)


@click.command("why-not")
@click.argument("plan_file", metavar="PLAN.json", type=click.Path(dir_okay=False))
@click.argument("option")
@FORMAT
@click.pass_obj
def why_not(settings, plan_file: str, option: str, fmt_: str) -> None:
    """Why OPTION (a GPU model, a candidate 'L40S | bf16 | tp2', infiniband-ndr, air, rent, ...) is
    not in the plan: the rules and numbers that rejected it, or why it was never a candidate."""
    from servewise.engine.domain.catalog import load_catalog

    plan = load_plan(plan_file)
    found = _warning_rule(settings, option)
    if found is not None:  # a warning's rule: why it was given, or why not
        from .progress import Progress

        warning, rb = found
        overlay = _recorded_overlay(plan, plan_file)
        with Progress(message("why.progress", settings.lang), 0) as progress:
            if not any(w["rule"] == warning.id for w in plan.get("warnings") or []):
                progress.step()  # planned again: a second or more
            result = ex.why_not_warning(plan, warning, rb, overlay)
        click.echo(dump(result) if fmt_ == "json"
                   else wrap(render_why_not_warning(result, plan, settings.lang), output_width()), nl=False)
        return
    gpus = dict(load_catalog().table("gpus").index)
    try:
        result = ex.why_not(plan, option, rule_titles(settings), gpus)
    except ex.ExplainError as exc:
        raise InputError(value_text(f"{plan_file}: {exc}", settings.lang)) from None
    click.echo(dump(result) if fmt_ == "json" else wrap(render_why_not(result, settings.lang), output_width()),
               nl=False)


@click.command("audit")
@click.argument("plan_file", metavar="PLAN.json", type=click.Path(dir_okay=False))
@FORMAT
@click.pass_obj
def audit(settings, plan_file: str, fmt_: str) -> None:
    """Re-run PLAN.json's recorded workload under the current knowledge and report whether the result
    is identical, and what changed if not (exit 1 when it changed)."""
    from servewise.engine.app.inputs import WorkloadError
    from servewise.engine.app.planfile import in_plan_file, recorded_workload
    from servewise.engine.domain.catalog import UnknownEntry
    from servewise.engine.runtime.runner import LoopError, RuleRuntimeError

    from .errors import InternalError, workload_error
    from .main import is_builtin_rule

    plan = load_plan(plan_file)
    try:  # the recorded workload is validated as `plan` validates a workload file
        recorded_workload(plan, plan_file)
    except WorkloadError as exc:
        raise workload_error(exc, settings.lang) from None
    dirs = settings.rules_dirs
    if dirs or not plan.get("rules_dirs"):
        rulebase = settings.rulebase()  # --rules-dir is checked there (engine/lang/rulebase.py)
    else:  # re-run with the rule folders the plan was made with, checked as --rules-dir is
        rulebase = recorded_rulebase(plan_file, [d["path"] for d in plan["rules_dirs"]], settings.lang)
        dirs = settings.rules_dirs = [Path(d["path"]) for d in plan["rules_dirs"]]
    overlay = _recorded_overlay(plan, plan_file)  # re-run with the overlay the plan was calibrated with
    from .progress import slow

    try:
        with slow("progress.audit", settings.lang):
            report = ex.audit(plan, rulebase, dirs, overlay)
    except WorkloadError as exc:
        raise workload_error(in_plan_file(exc, plan_file), settings.lang) from None
    except UnknownEntry as exc:
        raise InputError(f"{plan_file}: workload: {exc}") from None
    except RuleRuntimeError as exc:
        if is_builtin_rule(exc.rule.file):  # a validated workload, built-in rule: a knowledge bug (as `plan`)
            raise InternalError(str(exc), settings.lang) from None
        raise InputError(f"rule base: {exc}") from None
    except LoopError as exc:
        raise InputError(f"rule base: {exc}") from None
    click.echo(dump(report) if fmt_ == "json" else wrap(render_audit(report, settings.lang), output_width()),
               nl=False)
    if not report["identical"]:
        sys.exit(1)


def recorded_rulebase(plan_file: str, dirs: list[str], lang: str):
    """The rules with the extra folders a plan file records (``rules_dirs``). The file may have
    been edited: every folder must pass the check `--rules-dir` gets (no device, FIFO, system
    folder or folder without rule files), and a rule file that does not load is named, never
    quoted (its content might be anything, /etc/passwd's for one)."""
    from servewise.engine.common.messages import message
    from servewise.engine.lang.rulebase import RuleLoadError, check_rule_folder, load_rules

    for i, d in enumerate(dirs):
        problem = check_rule_folder(d)  # "" is not found (as a Path it would be the working folder)
        if problem is None:
            continue
        if problem.code == "rules_dir.not_found":
            raise InputError(shown(message("audit.rules_dir_missing", lang, file=plan_file, index=i, path=str(d))))
        raise InputError(shown(message("audit.rules_dir", lang, file=plan_file, index=i, text=problem.text(lang))))
    try:
        return load_rules([Path(d) for d in dirs])
    except RuleLoadError as exc:
        files = list(dict.fromkeys(p.file for p in exc.problems))
        named = ", ".join(files[:5]) + (f" (+{len(files) - 5})" if len(files) > 5 else "")
        raise InputError(shown(message("audit.rule_files_invalid", lang, file=plan_file, count=len(files),
                                       files=named))) from None


def shown(text: str, limit: int = 600) -> str:
    """One printable line (a path from an edited plan file may hold control characters)."""
    from servewise.engine.app.inputs import shown as one_line

    return one_line(text, limit)


COMMANDS = [explain, why_not, audit]
