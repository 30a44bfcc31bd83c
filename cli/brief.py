"""The plan on one screen (``servewise plan`` without ``--full``): the decision, its cost and SLA
verdict, the warnings that need a decision, the defaults the choices rest on and the nearest
alternatives, each clipped to the terminal width. Pure formatting of the plan; the full text
(render.to_text) has everything else."""

from __future__ import annotations

from typing import Any

from .i18n import COMPONENT_NAMES, display_width, msg, pad, pick, t, value_text
from .render import (
    CONTRACT_COMPONENTS,
    _v,
    capex_line,
    component_line,
    input_rows,
    layout_options,
    plan_head,
    rejection_text,
    warning_text,
    without_option,
)
from .wrap import wrap_line

MAX_LINES = 40
MAX_WARNINGS = 3
MAX_ALTERNATIVES = 3
MAX_DEFAULTS = 8
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
CRITICAL_LINES = 10
WIDE_ROWS = ("gpu", "servers")  # the rows that may take two lines
# lines per warning, per alternative, for the defaults, alternatives shown: the first that fits
BUDGETS = ((2, 2, 2, 3), (2, 1, 2, 3), (1, 1, 2, 3), (1, 1, 1, 3), (1, 1, 1, 2), (1, 1, 1, 1))


def clip(line: str, width: int, max_lines: int = 1) -> list[str]:
    """``line`` wrapped to ``width`` columns and cut to ``max_lines`` lines, the last ending in
    "…" when something was left out."""
    lines = wrap_line(line, width)
    if len(lines) <= max_lines:
        return lines
    kept = lines[:max_lines]
    last = kept[-1]
    while last and display_width(last) + 1 > width:
        last = last[:-1]
    kept[-1] = last.rstrip() + "…"
    return kept


def _row(label: str, text: str, width: int, max_lines: int = 1) -> list[str]:
    return clip(f"  {pad(label, 13)} {text}", width, max_lines)


def _sla_text(plan: dict[str, Any], lang: str) -> str:
    perf = plan["performance"]
    sla = plan["workload"].get("sla") or {}
    meets = t("yes" if perf.get("meets_sla") else "no", lang)
    if perf.get("ttft_ms") is None:
        return t("brief_sla_other", lang).format(meets=meets)
    offline = plan["workload"].get("mode") == "offline"
    p99 = perf.get("ttft_p99_ms")
    ttft = (t("p99_stat", lang).format(value=p99, band="") if p99 is not None
            else t("mean_stat", lang).format(value=perf["ttft_ms"], band=""))
    tpot = t("mean_stat", lang).format(value=perf["tpot_ms"], band="")
    targets = "" if offline else t("brief_targets", lang).format(
        ttft=_v(sla.get("ttft_ms")), tpot=_v(sla.get("tpot_ms")))
    return t("brief_sla", lang).format(ttft=ttft, tpot=tpot, targets=targets, meets=meets)


def _configuration(plan: dict[str, Any], lang: str, width: int) -> list[str]:
    out = clip(t("configuration", lang), width)
    pools = plan.get("pools") or []
    for pool in pools[:4]:
        gpu = component_line("gpu", pool["components"].get("gpu", {}), lang)
        out += clip(f"  [{pool['model']}] {gpu}", width)
    if len(pools) > 4:
        out.append(f"  … +{len(pools) - 4}")
    for name in CONTRACT_COMPONENTS:
        if pools and name == "gpu":
            continue
        comp = plan["components"].get(name, {})
        label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
        out += _row(label, component_line(name, comp, lang), width, 2 if name in WIDE_ROWS else 1)
    cost = plan["cost"]
    if cost.get("capex_cny") is not None:
        text = msg("render.cost.brief", lang, capex=capex_line(cost, lang), opex=_v(cost.get("monthly_opex_cny")),
                   buy=value_text(cost.get("buy_or_rent"), lang))
        out += _row(t("cost", lang).split(" ")[0], text, width, 2)
    out += _row("SLA", _sla_text(plan, lang), width, 2)
    note = next((w for w in plan["warnings"] if w["rule"] == "engine.calibration-overlay"), None)
    if note is not None:  # the estimates were pinned to the buyer's benchmark: say so, and its effect
        out += _row(msg("render.calibration", lang), warning_text(note, lang), width, 3)
    return out


def _warnings(plan: dict[str, Any], lang: str, width: int, lines: int) -> list[str]:
    serious = sorted((w for w in plan["warnings"] if w["severity"] != "info"),
                     key=lambda w: SEVERITY_ORDER.get(w["severity"], 3))
    if not serious:
        return []
    shown = serious[:MAX_WARNINGS]
    out = [""] + clip(t("brief_warnings", lang).format(shown=len(shown), total=len(serious)), width)
    for warn in shown:  # a critical warning (why nothing fits, what the budget buys) in full if it can
        out += clip(f"  ! {_warning(warn, lang)}", width,
                    max(lines, CRITICAL_LINES) if warn["severity"] == "critical" else lines)
    return out


def _warning(warn: dict[str, Any], lang: str) -> str:
    """A warning, its pool label shortened to a count when it concerns several models."""
    pool = warn.get("pool") or ""
    if "," not in pool or not warn.get("message_i18n"):
        return warning_text(warn, lang)
    label = t("brief_models", lang).format(n=pool.count(",") + 1)
    return f"[{label}] {pick(warn['message_i18n'], lang)}"


def _defaults(plan: dict[str, Any], lang: str, width: int, lines: int) -> list[str]:
    """The defaulted inputs that premises of the steps setting a component or the cost read."""
    decided: list[str] = []
    for step in plan["trace"]:
        if not any(c["fact"].startswith(("components.", "cost.")) for c in step["conclusions"]):
            continue
        for premise in step["premises"]:
            if (premise.get("origin") or {}).get("kind") == "default" and premise["fact"] not in decided:
                decided.append(premise["fact"])
    if not decided:
        return []
    values = {field: value for field, value, mark in input_rows(plan) if mark == "default"}
    items = [f"{f} = {values.get(f, '—')}" for f in decided[:MAX_DEFAULTS]]
    more = f" … +{len(decided) - MAX_DEFAULTS}" if len(decided) > MAX_DEFAULTS else ""
    return [""] + clip(t("brief_defaults", lang), width) + clip("  " + "; ".join(items) + more, width, lines)


def _alternatives(plan: dict[str, Any], lang: str, width: int, lines: int, count: int) -> list[str]:
    if not plan["rejected"]:
        return []

    out = [""] + clip(t("brief_alternatives", lang).format(total=len(plan["rejected"])), width)
    for option, text in alternatives(plan, lang)[:count]:
        out += clip(f"  - {option}: {text}", width, lines)
    return out


def alternatives(plan: dict[str, Any], lang: str) -> list[tuple[str, str]]:
    """What the plan could have been instead, nearest first, as (option, why not): a several-model
    plan's other layouts (another host GPU, separate servers), then the GPU models not chosen
    (each its configuration that came closest), then the rejected options that are not GPUs."""
    from servewise.engine.app.explain import rejections_by_gpu

    out = [(name, text) for name, text, chosen in layout_options(plan.get("packing") or {}, lang) if not chosen]
    groups = rejections_by_gpu(plan)
    chosen_gpu = (plan["components"].get("gpu") or {}).get("model")
    order = [o for o, v in groups.items() if v[0].get("kind") == "candidate" and o != chosen_gpu]
    order += [o for o, v in groups.items() if v[0].get("kind") != "candidate"]
    return out + [(o, without_option(rejection_text(groups[o][0], lang), o)) for o in order]


def to_brief(plan: dict[str, Any], lang: str = "en", width: int = 80) -> str:
    """The decision on one screen: at most ``MAX_LINES`` lines of at most ``width`` columns (the
    warnings, defaults and alternatives get fewer lines each until it fits)."""
    w = plan["workload"]
    head = clip(plan_head(w, lang), width)
    if not plan["feasible"]:
        head += clip(t("infeasible", lang), width)
    if plan["feasible"]:
        head += [""] + _configuration(plan, lang, width)
    foot = [""] + clip(t("brief_more", lang), width, 2)
    # an infeasible plan has no configuration to show: its nearest misses get a line more each
    more_alt = 0 if plan["feasible"] else 1
    for warn_lines, alt_lines, default_lines, alternatives in BUDGETS:
        out = (head + _warnings(plan, lang, width, warn_lines)
               + _defaults(plan, lang, width, default_lines)
               + _alternatives(plan, lang, width, alt_lines + more_alt, alternatives) + foot)
        if len(out) <= MAX_LINES:
            break
    return "\n".join(out) + "\n"


def decision(plan: dict[str, Any], lang: str = "en") -> dict[str, Any]:
    """The decision as the md and html reports open with it, unclipped: ``rows`` (label, text) of
    the GPUs, servers, cost and SLA verdict (or why nothing fits), ``warnings`` the ones to decide
    on (critical, then warning) in full, ``alternatives`` (option, why not) the nearest ones."""
    rows: list[tuple[str, str]] = []
    if plan["feasible"]:
        pools = plan.get("pools") or []
        for pool in pools:
            rows.append((f"GPU [{pool['model']}]", component_line("gpu", pool["components"].get("gpu", {}), lang)))
        for name in ("gpu", "servers"):
            if name in plan["components"] and not (pools and name == "gpu"):
                rows.append((pick(COMPONENT_NAMES[name], lang), component_line(name, plan["components"][name], lang)))
        cost = plan["cost"]
        if cost.get("capex_cny") is not None:
            rows.append((t("cost", lang), msg("render.cost.brief", lang, capex=capex_line(cost, lang),
                                              opex=_v(cost.get("monthly_opex_cny")),
                                              buy=value_text(cost.get("buy_or_rent"), lang))))
        rows.append(("SLA", _sla_text(plan, lang)))
    else:
        rows.append((msg("render.decision.verdict", lang), t("infeasible", lang)))
    serious = sorted((w for w in plan["warnings"] if w["severity"] != "info"),
                     key=lambda w: SEVERITY_ORDER.get(w["severity"], 3))
    nearest = alternatives(plan, lang)[:MAX_ALTERNATIVES] if plan["rejected"] else []
    return {"rows": rows, "warnings": serious, "alternatives": nearest}
