"""Render a plan as text, JSON or Markdown. Pure formatting: no reasoning happens here."""

from __future__ import annotations

import json
from typing import Any

from .i18n import COMPONENT_NAMES, pick, t


def to_json(plan: dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, fixed separators, UTF-8 text (byte-identical across runs)."""
    return json.dumps(plan, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def _v(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_v(x)}" for k, x in value.items() if x is not None)
    return str(value)


def component_line(name: str, comp: dict[str, Any]) -> str:
    """One readable line per component."""
    c = comp
    if name == "gpu" and c.get("model"):
        return (f"{c['count']} × {c['model']} ({c['precision']}), tensor parallel "
                f"{c['tensor_parallel']}, {c['replicas']} replica(s), {c['per_server']} per server")
    if name == "servers" and c.get("count"):
        return f"{c['count']} × {c['form']}"
    if name == "cpu" and c.get("model"):
        return f"{c['sockets']} × {c['model']} ({c['cores_total']} cores)"
    if name == "memory" and c.get("capacity_gb"):
        dimm = f" ({c['channels_populated']} × {c['dimm_gb']} GB)" if c.get("dimm_gb") else ""
        return f"{c['capacity_gb']} GB {c['type']}, {c['channels_populated']} channels{dimm}"
    if name == "power" and c.get("server_draw_w"):
        return f"{c['server_draw_w']} W per server; PSU {c['psu_total_w']} W, {c['redundancy']}"
    if name == "rack" and c.get("servers_per_rack"):
        return f"{c['servers_per_rack']} server(s) per rack, {c['power_kw_per_rack']} kW per rack"
    if name == "software" and c.get("framework"):
        s = c.get("settings") or {}
        keys = ("tensor_parallel_size", "tp_size", "max_num_seqs", "max_batch_size",
                "gpu_memory_utilization", "quantization")
        return c["framework"] + " (" + ", ".join(f"{k}={s[k]}" for k in keys if s.get(k) is not None) + ")"
    return _v({k: v for k, v in c.items()}) or "—"


def _reason_for(plan: dict[str, Any], comp: str, lang: str) -> str | None:
    prefix = f"components.{comp}."
    for step in reversed(plan["trace"]):
        if any(c["fact"].startswith(prefix) for c in step["conclusions"]):
            return pick(step.get("because_i18n") or step["because"], lang)
    return None


def _rejected_by_option(plan: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in plan["rejected"]:
        key = r["option"].split(" | ")[0]
        groups.setdefault(key, []).append(r)
    return groups


def to_text(plan: dict[str, Any], lang: str = "en") -> str:
    out: list[str] = []
    w = plan["workload"]
    model = w["model"] if isinstance(w.get("model"), str) else (w.get("model") or {}).get("name")
    out.append(f"servewise plan — {model}, {w['mode']}, {w['traffic']['peak_qps']} QPS "
               f"(knowledge {plan['knowledge_hash']})")
    if not plan["feasible"]:
        out.append("")
        out.append(t("infeasible", lang))
    out.append("")
    out.append(t("configuration", lang))
    for name, comp in plan["components"].items():
        label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
        out.append(f"  {label:<13} {component_line(name, comp)}")
    perf = plan["performance"]
    if perf.get("ttft_ms") is not None:
        out.append("")
        out.append(t("performance", lang))
        out.append(f"  TTFT {perf['ttft_ms']} ms (≤ {perf.get('ttft_ms_band_hi')}), TPOT "
                   f"{perf['tpot_ms']} ms (≤ {perf.get('tpot_ms_band_hi')}), "
                   f"{_v(perf['output_tokens_per_s'])} output tokens/s, "
                   f"{perf['max_concurrency']} requests in flight; meets SLA: {_v(perf['meets_sla'])}")
    cost = plan["cost"]
    if cost.get("capex_cny") is not None:
        out.append("")
        out.append(t("cost", lang))
        out.append(f"  capex {_v(cost['capex_cny'])} CNY, opex {_v(cost['monthly_opex_cny'])} CNY/month, "
                   f"{_v(cost.get('cny_per_million_tokens'))} CNY per million tokens, "
                   f"{cost.get('buy_or_rent')}")
    out.append("")
    out.append(t("reasons", lang))
    for name in plan["components"]:
        reason = _reason_for(plan, name, lang)
        if reason:
            label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
            out.append(f"  - {label}: {reason}")
    if plan["warnings"]:
        out.append("")
        out.append(t("warnings", lang))
        for warn in plan["warnings"]:
            message = pick(warn.get("message_i18n") or warn["message"], lang)
            out.append(f"  ! [{warn['severity']}] {message} ({warn['rule']})")
    if plan["rejected"]:
        groups = _rejected_by_option(plan)
        out.append("")
        out.append(f"{t('rejected', lang)} ({len(plan['rejected'])}; servewise why-not PLAN.json OPTION)")
        shown = 0
        for option, items in groups.items():
            if shown >= 8:
                break
            first = items[-1]
            out.append(f"  - {option}: {pick(first.get('because_i18n') or first['because'], lang)}")
            shown += 1
    if plan.get("asks"):
        out.append("")
        out.append(t("questions", lang))
        for ask in plan["asks"]:
            out.append(f"  ? {ask['input']}: {pick(ask['because'], lang)}")
    out.append("")
    out.append(t("more", lang))
    return "\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def mermaid(plan: dict[str, Any]) -> str:
    """The explanation chain as a mermaid graph: steps and the steps they depend on."""
    lines = ["flowchart LR"]
    for step in plan["trace"]:
        label = step["rule"].replace('"', "'")
        lines.append(f'  s{step["step"]}["{step["step"]}. {label}"]')
        for p in step["premises"]:
            if "step" in p:
                lines.append(f'  s{p["step"]} --> s{step["step"]}')
    return "\n".join(dict.fromkeys(lines))


def to_markdown(plan: dict[str, Any], lang: str = "en") -> str:
    w = plan["workload"]
    o: list[str] = []
    o.append(f"# servewise plan: {w.get('model') if isinstance(w.get('model'), str) else w['model']['name']}")
    o.append("")
    o.append(f"- servewise {plan['servewise_version']}, knowledge `{plan['knowledge_hash']}`")
    o.append(f"- feasible: **{_v(plan['feasible'])}**")
    o.append("")
    o.append("## Inputs")
    o.append("")
    o.append("| field | value | |")
    o.append("|---|---|---|")

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and prefix not in ("model",):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            mark = "default" if prefix in plan["defaults_used"] else "given"
            o.append(f"| `{prefix}` | {_md_escape(_v(node))} | {mark} |")
    walk("", w)
    o.append("")
    o.append(f"## {t('configuration', lang)}")
    o.append("")
    o.append("| component | choice | why |")
    o.append("|---|---|---|")
    for name, comp in plan["components"].items():
        reason = _reason_for(plan, name, lang) or ""
        o.append(f"| {name} | {_md_escape(component_line(name, comp))} | {_md_escape(reason)} |")
    o.append("")
    o.append(f"## {t('performance', lang)}")
    o.append("")
    for k, v in plan["performance"].items():
        o.append(f"- {k}: {_v(v)}")
    o.append("")
    o.append(f"## {t('cost', lang)}")
    o.append("")
    for k, v in plan["cost"].items():
        o.append(f"- {k}: {_v(v)}")
    if plan["warnings"]:
        o.append("")
        o.append(f"## {t('warnings', lang)}")
        o.append("")
        for warn in plan["warnings"]:
            message = _md_escape(pick(warn.get("message_i18n") or warn["message"], lang))
            o.append(f"- **{warn['severity']}** {message} (`{warn['rule']}`)")
    o.append("")
    o.append(f"## {t('rejected', lang)}")
    o.append("")
    o.append("| option | rule | because |")
    o.append("|---|---|---|")
    for r in plan["rejected"]:
        because = _md_escape(pick(r.get("because_i18n") or r["because"], lang))
        o.append(f"| {_md_escape(r['option'])} | `{r['rule']}` | {because} |")
    o.append("")
    o.append("## Explanation chain")
    o.append("")
    o.append("```mermaid")
    o.append(mermaid(plan))
    o.append("```")
    o.append("")
    for step in plan["trace"]:
        src = step["source"] if isinstance(step["source"], list) else [step["source"]]
        cites = "; ".join(f"{s.get('guideline') or s.get('url')} ({s.get('doc', '')} {s.get('section', '')})"
                          for s in src)
        o.append(f"### {step['step']}. `{step['rule']}` ({step['stage']})")
        o.append("")
        o.append(pick(step.get("because_i18n") or step["because"], lang))
        o.append("")
        for c in step["conclusions"]:
            formula = f" — `{c['formula']}`" if c.get("formula") else ""
            o.append(f"- {c['fact']} = {_md_escape(_v(c['value']))}{formula}")
        if step.get("corrects"):
            o.append(f"- correction: {step['corrects']}")
        o.append(f"- source: {cites}")
        quotes = [s.get("quote") for s in src if s.get("quote")]
        if quotes:
            o.append(f"  > {quotes[0]}")
        o.append("")
    return "\n".join(o)
