"""Render a plan as one self-contained, offline HTML report: inline CSS, no scripts, no fonts or
images from elsewhere, and the explanation chain as an inline SVG graph laid out here (one band per
stage, wide fan-outs collapsed). Pure formatting: no reasoning happens here."""

from __future__ import annotations

from html import escape
from typing import Any

from servewise.engine.app.explain import rejections_by_gpu

from .i18n import COMPONENT_NAMES, msg, pick, t, value_text
from .render import (
    GRAPH_COMPONENT,
    _catalog,
    _reason_for,
    bom_rows,
    by_severity,
    chain_value,
    component_line,
    component_trace,
    field_label,
    field_value,
    input_rows,
    latency_lines,
    load_rows,
    load_title,
    performance_rows,
    rejection_text,
    severity,
    shown_conclusions,
    warning_text,
)

STAGE_COLOURS = {
    "inputs": "#e8eaf6", "derivations": "#e3f2fd", "candidates": "#e0f7fa", "filters": "#e8f5e9",
    "selection": "#fff8e1", "bom": "#fbe9e7", "facilities": "#f3e5f5", "cost": "#fce4ec", "checks": "#eceff1",
}
NODE_H, ROW_GAP, COL_GAP, MARGIN, CHAR_W, MAX_PER_ROW = 38, 40, 18, 16, 6.6, 5
LABEL_W, BAND_PAD, BAND_GAP, FAN_MAX = 96, 10, 28, 5

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans CJK SC","Microsoft YaHei",sans-serif;
 margin:2rem auto;max-width:1200px;padding:0 1rem;color:#1b1f23;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0;font-size:.92rem}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
.default{color:#8250df}.given{color:#1a7f37}.meta{color:#57606a}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:1rem;font-weight:600}
.ok{background:#dafbe1;color:#116329}.bad{background:#ffebe9;color:#a40e26}
.warn-critical{color:#a40e26}.warn-warning{color:#9a6700}.warn-info{color:#0969da}
.graph{overflow:auto;border:1px solid #d0d7de;border-radius:6px;background:#fff}
.step{border-left:4px solid #d0d7de;padding:.2rem .8rem;margin:1rem 0}
.step:target{border-left-color:#0969da;background:#f6f8fa}
blockquote{margin:.3rem 0;padding:.2rem .8rem;border-left:3px solid #d0d7de;color:#57606a}
details{margin:.3rem 0}summary{cursor:pointer}
.graph svg text{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
svg a:hover rect{stroke:#0969da;stroke-width:2}
@media print{.graph{overflow:visible}details{display:block}}
"""


def layers(trace: list[dict[str, Any]]) -> dict[int, int]:
    """Layer of every step: 0 without premises from other steps, else one below its deepest premise."""
    known = {s["step"] for s in trace}
    layer: dict[int, int] = {}
    for s in sorted(trace, key=lambda s: s["step"]):  # premises always have lower step numbers
        deps = [p["step"] for p in s["premises"] if p.get("step") in known and p["step"] in layer]
        layer[s["step"]] = 1 + max(layer[d] for d in deps) if deps else 0
    return layer


def _premise_steps(s: dict[str, Any], known: set[int] | dict[int, Any]) -> list[int]:
    return list(dict.fromkeys(p["step"] for p in s["premises"] if p.get("step") in known))


def consumers(trace: list[dict[str, Any]]) -> dict[int, list[int]]:
    """For each step, the steps that use one of its conclusions as a premise."""
    known = {s["step"] for s in trace}
    out: dict[int, list[int]] = {n: [] for n in known}
    for s in trace:
        for p in _premise_steps(s, known):
            out[p].append(s["step"])
    return out


def stage_bands(trace: list[dict[str, Any]]) -> list[tuple[str, list[int]]]:
    """Steps grouped by the stage that produced them, in the engine's stage order."""
    order = list(STAGE_COLOURS)
    groups: dict[str, list[int]] = {}
    for s in sorted(trace, key=lambda s: s["step"]):
        stage = s.get("stage") or "?"
        groups.setdefault(stage, []).append(s["step"])
        if stage not in order:
            order.append(stage)
    return [(st, groups[st]) for st in order if st in groups]


def layout(trace: list[dict[str, Any]]) -> tuple[dict[int, tuple[float, float]], float, float, float,
                                                  list[tuple[str, float, float]]]:
    """Node positions (top-left), node width, the drawing's width and height, and the stage bands.

    One horizontal band per stage, in stage order (premises always come from the same or an earlier
    stage, so edges point down). Within a band, nodes are ordered by the mean position of their
    premises (one barycentre sweep) to keep edges short, ties by step number, and a wide band wraps
    onto several lines; steps that use steps of their own stage go on a later line.
    """
    width = max([len(f"{s['step']}. {s['rule']}") for s in trace] + [12]) * CHAR_W + 16
    by_step = {s["step"]: s for s in trace}
    order: dict[int, float] = {}
    bands = stage_bands(trace)
    lines_per_band: list[tuple[str, list[list[int]]]] = []
    for stage, nodes in bands:
        def centre(n: int) -> tuple[float, int]:
            deps = [order[d] for d in _premise_steps(by_step[n], order)]
            return (sum(deps) / len(deps) if deps else -1.0, n)
        depth: dict[int, int] = {}  # steps of a stage that use each other go on successive lines
        for n in nodes:
            inner = [depth[d] for d in _premise_steps(by_step[n], depth)]
            depth[n] = 1 + max(inner) if inner else 0
        lines: list[list[int]] = []
        for level in sorted(set(depth.values())):
            group = sorted((n for n in nodes if depth[n] == level), key=centre)
            for i, n in enumerate(group):
                order[n] = i * MAX_PER_ROW / max(len(group), 1)
            lines += [group[i:i + MAX_PER_ROW] for i in range(0, len(group), MAX_PER_ROW)]
        lines_per_band.append((stage, lines))
    widest = max((len(line) for _, lines in lines_per_band for line in lines), default=1)
    total_w = LABEL_W + 2 * MARGIN + widest * width + (widest - 1) * COL_GAP
    pos: dict[int, tuple[float, float]] = {}
    band_boxes: list[tuple[str, float, float]] = []
    y = MARGIN
    for stage, lines in lines_per_band:
        top = y - BAND_PAD
        for nodes in lines:
            row_w = len(nodes) * width + (len(nodes) - 1) * COL_GAP
            x0 = LABEL_W + MARGIN + (total_w - LABEL_W - 2 * MARGIN - row_w) / 2
            for i, n in enumerate(nodes):
                pos[n] = (x0 + i * (width + COL_GAP), y)
            y += NODE_H + ROW_GAP
        band_boxes.append((stage, top, y - ROW_GAP + BAND_PAD))
        y += BAND_GAP
    total_h = y - ROW_GAP - BAND_GAP + MARGIN
    return pos, width, total_w, total_h, band_boxes


def svg_graph(plan: dict[str, Any], lang: str = "en", trace: list[dict[str, Any]] | None = None) -> str:
    """The explanation chain as inline SVG: one band per stage, one box per step (colour = stage),
    arrows from each premise's step to the step that used it; a step used by more than
    ``FAN_MAX`` others gets one collapsed marker ("used by N steps") instead of N arrows.
    Boxes link to the step's details below. ``trace``: the steps to draw (all by default)."""
    trace = plan["trace"] if trace is None else trace
    if not trace:
        return "<p>—</p>"
    pos, w, total_w, total_h, bands = layout(trace)
    users = consumers(trace)
    out = [f'<svg role="img" aria-label="explanation chain" width="{total_w:.0f}" height="{total_h:.0f}" '
           f'viewBox="0 0 {total_w:.0f} {total_h:.0f}">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#8c959f"/></marker></defs>']
    for stage, top, bottom in bands:
        fill = STAGE_COLOURS.get(stage, "#ffffff")
        out.append(f'<rect x="4" y="{top:.1f}" width="{total_w - 8:.1f}" height="{bottom - top:.1f}" rx="8" '
                   f'fill="{fill}" fill-opacity="0.35" stroke="none"/>'
                   f'<text x="12" y="{top + 18:.1f}" font-size="12" font-weight="bold" fill="#57606a">'
                   f'{escape(stage)}</text>')
    for s in trace:
        x2, y2 = pos[s["step"]]
        for p in _premise_steps(s, pos):
            if len(users[p]) > FAN_MAX:
                continue  # drawn once as a collapsed fan-out below
            x1, y1 = pos[p]
            ax, ay, bx, by = x1 + w / 2, y1 + NODE_H, x2 + w / 2, y2
            mid = (ay + by) / 2
            out.append(f'<path d="M{ax:.1f},{ay:.1f} C{ax:.1f},{mid:.1f} {bx:.1f},{mid:.1f} {bx:.1f},{by - 1:.1f}" '
                       f'fill="none" stroke="#8c959f" stroke-width="1.2" marker-end="url(#arrow)"/>')
    for n, used in sorted(users.items()):
        if len(used) > FAN_MAX:
            x, y = pos[n]
            label = (f"被 {len(used)} 个步骤使用" if lang == "zh" else f"used by {len(used)} steps")
            listed = escape(", ".join(map(str, used)))
            out.append(f'<g><title>{listed}</title>'
                       f'<path d="M{x + w / 2:.1f},{y + NODE_H:.1f} v10" stroke="#8c959f" stroke-width="1.2" '
                       f'stroke-dasharray="3,2" marker-end="url(#arrow)"/>'
                       f'<text x="{x + w / 2 + 6:.1f}" y="{y + NODE_H + 14:.1f}" font-size="10" fill="#57606a">'
                       f'{escape(label)}</text></g>')
    for s in trace:
        x, y = pos[s["step"]]
        fill = STAGE_COLOURS.get(s.get("stage", ""), "#ffffff")
        tip = escape(pick(s.get("because_i18n") or s["because"], lang))
        out.append(f'<a href="#step-{s["step"]}"><g><title>{tip}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{NODE_H}" rx="6" fill="{fill}" '
                   f'stroke="#57606a"/>'
                   f'<text x="{x + 8:.1f}" y="{y + 16:.1f}" font-size="11" fill="#1b1f23">'
                   f'{escape(str(s["step"]))}. {escape(s["rule"])}</text>'
                   f'<text x="{x + 8:.1f}" y="{y + 31:.1f}" font-size="10" fill="#57606a">'
                   f'{escape(s.get("stage", ""))}</text></g></a>')
    out.append("</svg>")
    return "\n".join(out)


def _legend() -> str:
    items = "".join(f'<span style="display:inline-block;margin-right:.8rem"><span style="display:inline-block;'
                    f'width:.9rem;height:.9rem;background:{c};border:1px solid #57606a;vertical-align:middle">'
                    f'</span> {escape(stage)}</span>' for stage, c in STAGE_COLOURS.items())
    return f'<p class="meta">{items}</p>'


def _cols(lang: str, *names: str) -> list[str]:
    """Table headings of the report in ``lang`` (facts/messages/render.yaml render.md.col.*)."""
    return [msg(f"render.md.col.{n}", lang) for n in names]


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _sources(source: Any) -> str:
    parts = []
    for s in source if isinstance(source, list) else [source]:
        gid = s.get("guideline")
        ids = ", ".join(gid) if isinstance(gid, list) else (gid or s.get("url") or "?")
        where = " § ".join(x for x in (s.get("doc"), s.get("section")) if x)
        parts.append(f"<div>source: <code>{escape(ids)}</code> <span class='meta'>{escape(where)}</span></div>")
        if s.get("quote"):
            parts.append(f"<blockquote>{escape(s['quote'])}</blockquote>")
    return "".join(parts)


def _rejected(plan: dict[str, Any], lang: str) -> str:
    groups = rejections_by_gpu(plan)
    rows = []
    for option, items in groups.items():
        best = items[0]
        rows.append([escape(option), str(len(items)), f"<code>{escape(best['rule'])}</code>",
                     escape(rejection_text(best, lang))])
    out = [f"<p class='meta'>{msg('render.html.rejected_intro', lang, n=len(plan['rejected']))}</p>",
           _table([msg("render.md.col.option", lang), msg("render.html.count", lang), msg("render.md.col.rule", lang),
                   msg("render.md.col.closest", lang)], rows)]
    for option, items in groups.items():
        detail = _table([msg("render.html.configuration", lang), msg("render.md.col.rule", lang),
                         msg("render.md.col.because", lang)],
                        [[escape(r["option"]), f"<code>{escape(r['rule'])}</code>",
                          escape(rejection_text(r, lang))] for r in items])
        out.append(f"<details><summary>{escape(option)} ({len(items)})</summary>{detail}</details>")
    return "".join(out)


def _step(s: dict[str, Any], lang: str, plan: dict[str, Any]) -> str:
    out = [f'<div class="step" id="step-{s["step"]}"><h3>{s["step"]}. <code>{escape(s["rule"])}</code> '
           f'<span class="meta">({escape(s.get("stage", ""))})</span></h3>',
           f"<p>{escape(value_text(pick(s.get('because_i18n') or s['because'], lang), lang, True))}</p>",
           _sources(s["source"])]
    if s.get("corrects"):
        corrects = pick(s.get("corrects_i18n") or s["corrects"], lang)
        out.append(f"<p><b>{msg('render.md.corrects', lang)}</b> {escape(corrects)}</p>")
    conc = shown_conclusions(s, lang)
    rows = [[f"<code>{escape(c['fact'])}</code>", escape(chain_value(c["fact"], c.get("value"), plan, lang)),
             f"<code>{escape(c.get('formula') or '')}</code>"] for c in conc[:12]]
    out.append(_table(_cols(lang, "conclusion", "value", "formula"), rows))
    if len(conc) > 12:
        out.append(f"<p class='meta'>{escape(msg('render.html.more_conclusions', lang, n=len(conc) - 12))}</p>")
    prem = []
    for p in s["premises"]:
        if "step" in p:
            where = f'<a href="#step-{p["step"]}">{escape(msg("render.html.step", lang, n=p["step"]))}</a>'
        else:
            o = p.get("origin") or {}
            kind = {"input": "given"}.get(o.get("kind"), o.get("kind", ""))
            shown = msg(f"render.html.origin.{kind}", lang) if f"render.html.origin.{kind}" in _catalog() else kind
            where = f"<span class='{escape(kind)}'>{escape(shown)}</span> <code>{escape(o.get('ref', ''))}</code>"
        prem.append([f"<code>{escape(p['fact'])}</code>", escape(chain_value(p["fact"], p.get("value"), plan, lang)),
                     where])
    if prem:
        out.append(f"<details><summary>{escape(msg('render.html.premises', lang, n=len(prem)))}</summary>"
                   f"{_table(_cols(lang, 'fact', 'value', 'from'), prem)}</details>")
    out.append("</div>")
    return "".join(out)


def to_html(plan: dict[str, Any], lang: str = "en") -> str:
    """The whole report as one HTML document (UTF-8, no external resources)."""
    w = plan["workload"]
    model = w["model"] if isinstance(w.get("model"), str) else (w.get("model") or {}).get("name")
    feasible = plan["feasible"]
    o = ["<!DOCTYPE html>", f'<html lang="{"zh" if lang == "zh" else "en"}"><head><meta charset="utf-8">',
         '<meta name="viewport" content="width=device-width, initial-scale=1">',
         f"<title>servewise plan: {escape(str(model))}</title><style>{CSS}</style></head><body>",
         f"<h1>servewise plan: {escape(str(model))}</h1>",
         f"<p class='meta'>servewise {escape(plan['servewise_version'])} · knowledge "
         f"<code>{escape(plan['knowledge_hash'])}</code> · "
         f"<span class='badge {'ok' if feasible else 'bad'}'>"
         f"{msg('render.md.feasible', lang) if feasible else t('infeasible', lang)}"
         f"</span></p>"]
    from .brief import decision

    d = decision(plan, lang)
    o.append(f"<h2>{escape(msg('render.decision', lang))}</h2>")
    o.append("<table>" + "".join(f"<tr><th>{escape(label)}</th><td>{escape(text)}</td></tr>"
                                 for label, text in d["rows"]) + "</table>")
    if d["warnings"]:
        o.append(f"<h3>{escape(msg('render.decision.warnings', lang))}</h3><ul>" + "".join(
            f"<li class='warn-{escape(x['severity'])}'><b>{escape(severity(x['severity'], lang))}</b> "
            f"{escape(warning_text(x, lang))} <code>{escape(x['rule'])}</code></li>" for x in d["warnings"]) + "</ul>")
    if d["alternatives"]:
        o.append(f"<h3>{escape(msg('render.decision.alternatives', lang, total=len(plan['rejected'])))}</h3><ul>"
                 + "".join(f"<li><b>{escape(option)}</b>: {escape(text)}</li>" for option, text in d["alternatives"])
                 + "</ul>")
    from .charts import charts

    drawn = charts(plan, lang)
    if drawn and not feasible:  # nothing configured: how near the candidates came is the content
        o.append(f"<h2>{t('charts', lang)}</h2>")
        o += [f"<figure>{svg}</figure>" for svg in drawn.values()]
    o.append(f"<h2>{t('configuration', lang)}</h2>")
    rows = [[escape(pick(COMPONENT_NAMES.get(n, {"en": n}), lang)), escape(component_line(n, c, lang)),
             escape(_reason_for(plan, n, lang) or "")] for n, c in plan["components"].items()]
    o.append(_table(_cols(lang, "component", "choice", "why"), rows))
    o.append(f"<h2>{t('performance', lang)}</h2>")
    o.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in latency_lines(plan, lang)) + "</ul>")
    o.append(_table(_cols(lang, "metric", "value"), [[escape(field_label(k, lang)), escape(field_value(v, lang))]
                                                     for k, v in performance_rows(plan)]))
    head, load = load_rows(plan, lang)
    if load:
        o.append(f"<h3>{escape(load_title(plan, lang))}</h3>")
        o.append(_table([escape(h) for h in head], [[escape(c) for c in r] for r in load]))
    o.append(f"<h2>{t('cost', lang)}</h2>")
    o.append(_table(_cols(lang, "item", "value"), [[escape(field_label(k, lang)), escape(field_value(v, lang))]
                                                   for k, v in plan["cost"].items()]))
    if drawn and feasible:
        o.append(f"<h2>{t('charts', lang)}</h2>")
        o += [f"<figure>{svg}</figure>" for svg in drawn.values()]
    if plan.get("bom"):
        o.append(f"<h2>{t('bom', lang)}</h2>")
        o.append(_table(_cols(lang, "part", "category", "qty", "unit_price", "line", "source"),
                        [[escape(c) for c in row] for row in bom_rows(plan, lang)]))
    o.append(f"<h2>{t('warnings', lang)}</h2>")
    if plan["warnings"]:
        o.append("<ul>" + "".join(
            f"<li class='warn-{escape(x.get('severity', 'info'))}'>"
            f"<b>{escape(severity(x.get('severity', ''), lang))}</b> "
            f"{escape(warning_text(x, lang))} <code>{escape(x['rule'])}</code></li>"
            for x in by_severity(plan["warnings"])) + "</ul>")
    else:
        o.append("<p>—</p>")
    o.append(f"<h2>{t('inputs', lang)}</h2>")
    o.append(_table(_cols(lang, "field", "value") + [""],
                    [[f"<code>{escape(k)}</code>", escape(v),
                      f"<span class='{m}'>{msg(f'render.html.input.{m}', lang)}</span>"]
                     for k, v, m in input_rows(plan)]))
    o.append(f"<h2>{t('rejected', lang)}</h2>")
    o.append(_rejected(plan, lang))
    o.append(f"<h2>{t('chain', lang)}</h2>")
    o.append(f"<p class='meta'>{msg('render.html.graph_note', lang)}</p>")
    o.append(_legend())
    chain = component_trace(plan)
    if len(chain) < len(plan["trace"]):
        name = COMPONENT_NAMES[GRAPH_COMPONENT].get(lang, GRAPH_COMPONENT)
        note = msg("render.md.graph_component", lang, n=len(chain), total=len(plan["trace"]), component=name)
        o.append(f"<p>{escape(note)}</p>")
        o.append(f'<div class="graph">{svg_graph(plan, lang, chain)}</div>')
        o.append(f"<details><summary>{escape(msg('render.md.graph_all', lang, total=len(plan['trace'])))}</summary>"
                 f'<div class="graph">{svg_graph(plan, lang)}</div></details>')
    else:
        o.append(f'<div class="graph">{svg_graph(plan, lang)}</div>')
    o += [_step(s, lang, plan) for s in plan["trace"]]
    o.append(f"<p class='meta'>servewise {escape(plan['servewise_version'])} · knowledge "
             f"<code>{escape(plan['knowledge_hash'])}</code></p></body></html>")
    return "\n".join(o) + "\n"
