"""Charts of a plan as SVG text (no plotting library: a few shapes, deterministic output): the
candidates' cost against latency with the chosen one marked and the SLA line, one replica's latency
against load with the operating point, and the capex by bill-of-materials category. Pure
formatting of the plan's own numbers (``candidates``, ``performance.load_curve``, ``bom``); the
html report embeds them, ``plan --plot DIR`` writes them as files."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape
from typing import Any

from servewise.engine.common.messages import message

FONT = "font-family=\"'Noto Sans CJK SC', 'Source Han Sans SC', 'Microsoft YaHei', 'PingFang SC', sans-serif\""
W, H = 640, 400
LEFT, RIGHT, TOP, BOTTOM = 90, 20, 40, 60
LIMITED_RING = 'stroke="#f9a825" stroke-width="2"'  # orderable only under conditions: an amber ring


def _t(key: str, lang: str, **args: Any) -> str:
    """A chart's label in ``lang`` (facts/messages/render.yaml ``chart.*``)."""
    return message(f"chart.{key}", lang, **args)


def _text_width(text: str) -> float:
    """About how many pixels ``text`` takes at the charts' 12 px font (a CJK character twice a
    Latin one): to lay labels out so that none is cut."""
    from .i18n import display_width

    return 7.0 * display_width(text)


def _n(x: float) -> str:
    """A coordinate with one decimal (byte-identical output for the same plan)."""
    return f"{x:.1f}"


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values from ``lo`` (a multiple of the step at or below it) to the
    first multiple at or above ``hi``: the axis runs to the last tick."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    count = math.ceil((hi - first) / step - 1e-9)
    return [round(first + i * step, 10) for i in range(count + 1)]


def _fitting_size(text: str, size: float, room: float) -> float:
    """``size`` px, or the smaller size (to 0.1 px) at which ``text`` takes at most ``room`` px."""
    width = _text_width(text) * size / 12
    return size if width <= room else math.floor(size * room / width * 10) / 10


def _svg(body: list[str], title: str, height: int = H) -> str:
    # the title at 14 px, smaller where it would not fit the width (a long translation, a count)
    size = _fitting_size(title, 14, W - 16)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" '
            f'role="img" aria-label="{escape(title)}" {FONT} font-size="12">\n'
            f'<rect width="{W}" height="{height}" fill="white"/>\n'
            f'<text x="{W // 2}" y="22" text-anchor="middle" font-size="{size:g}">{escape(title)}</text>\n'
            + "\n".join(body) + "\n</svg>\n")


def _axes(x_ticks: list[float], y_ticks: list[float], grid: bool = False
          ) -> tuple[Callable[[float], float], Callable[[float], float], list[str]]:
    """The two axes with their tick labels (and light grid lines): the data-to-pixel maps and the
    SVG elements drawn so far."""
    x_hi, y_hi = x_ticks[-1], y_ticks[-1]

    def px(x: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * x / x_hi

    def py(y: float) -> float:
        return H - BOTTOM - (H - TOP - BOTTOM) * y / y_hi

    body = [f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>']
    body += [f'<text x="{_n(px(t))}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>' for t in x_ticks]
    for t in y_ticks:
        body.append(f'<text x="{LEFT - 6}" y="{_n(py(t) + 4)}" text-anchor="end">{t:g}</text>')
        if grid:
            body.append(f'<line x1="{LEFT}" y1="{_n(py(t))}" x2="{W - RIGHT}" y2="{_n(py(t))}" stroke="#eee"/>')
    return px, py, body


# the latency the cost-vs-latency chart puts on its x axis, by what the candidates have (a decoder
# LLM's TPOT, an encoder's P99 request latency, a streaming ASR's partial-result latency), with the
# workload field holding its target and the labels' key
LATENCY_AXES = (("tpot_ms_hi", ("sla", "tpot_ms"), "tpot"), ("latency_p99_ms", ("sla", "ttft_ms"), "encoder"),
                ("asr_partial_latency_ms", ("asr", "partial_latency_ms"), "asr"))


def _axis_titles(x_label: str, y_label: str) -> list[str]:
    """The x axis title under the plot and the y axis title turned up along its left side."""
    mid_x, mid_y = (LEFT + W - RIGHT) // 2, (TOP + H - BOTTOM) // 2
    # the y title turned up along the side, centred on the plot: smaller where it would run off
    size = _fitting_size(y_label, 12, 2 * min(mid_y, H - mid_y) - 8)
    font = f' font-size="{size:g}"' if size < 12 else ""
    return [f'<text x="{mid_x}" y="{H - 20}" text-anchor="middle">{escape(x_label)}</text>',
            f'<text x="18" y="{mid_y}" text-anchor="middle" transform="rotate(-90 18 {mid_y})"{font}>'
            f'{escape(y_label)}</text>']


def latency_axis(plan: dict[str, Any]) -> tuple[str, float | None, str] | None:
    """(candidate field, target, label key) of the plan's cost-vs-latency chart, or None."""
    candidates = plan.get("candidates") or []
    for field, (section, key), label in LATENCY_AXES:
        if any(c.get(field) for c in candidates):
            return field, ((plan.get("workload") or {}).get(section) or {}).get(key), label
    return None


def cost_vs_latency(plan: dict[str, Any], lang: str = "en") -> str | None:
    """Scatter of the ranked candidates (TCO against the latency that sizes them: a decoder's TPOT
    upper end, an encoder's P99 latency, a streaming ASR's partial-result latency), the chosen one
    marked, the target as a vertical line; None when the plan ranked no candidates."""
    axis = latency_axis(plan)
    if axis is None:
        return None
    field, target, key = axis
    rows = [c for c in plan.get("candidates") or [] if c.get("tco_cny") and c.get(field)]
    xs = [c[field] for c in rows] + ([target] if target else [])
    ys = [c["tco_cny"] / 1e6 for c in rows]
    px, py, body = _axes(_ticks(0, max(xs) * 1.05), _ticks(0, max(ys) * 1.05), grid=True)
    suffix = "" if key == "tpot" else f"_{key}"
    body += _axis_titles(_t("cost_x" + suffix, lang), _t("cost_y", lang))
    if target:
        body.append(f'<line x1="{_n(px(target))}" y1="{TOP}" x2="{_n(px(target))}" y2="{H - BOTTOM}" '
                    f'stroke="#c62828" stroke-dasharray="5,4"/>')
        body.append(f'<text x="{_n(px(target) - 4)}" y="{TOP + 12}" text-anchor="end" fill="#c62828">'
                    f'{escape(_t("sla" + suffix, lang))} {target:g} ms</text>')
    for c in sorted(rows, key=lambda c: c["chosen"]):  # the chosen one drawn last, on top
        x, y = _n(px(c[field])), _n(py(c["tco_cny"] / 1e6))
        tip = f"<title>{escape(c['id'])}: {c['tco_cny']:,.0f} CNY, {field} {c[field]:.1f} ms</title>"
        if c["chosen"]:
            body.append(f'<circle cx="{x}" cy="{y}" r="7" fill="#2e7d32" stroke="black">{tip}</circle>')
            label = _t("chosen_label", lang, gpus=c.get("gpus") or "", gpu=c.get("gpu") or c["id"],
                       precision=c.get("precision") or "", tp=c.get("tp") or 1, tco=f"{c['tco_cny'] / 1e6:,.2f}") \
                + (_t("limited_tag", lang) if c.get("availability") == "limited" else "")
            right = px(c[field]) > (LEFT + W - RIGHT) / 2  # the label on the side with room
            body.append(f'<text x="{_n(px(c[field]) + (-10 if right else 10))}" '
                        f'y="{_n(py(c["tco_cny"] / 1e6) - 10)}" text-anchor="{"end" if right else "start"}" '
                        f'font-weight="bold" stroke="white" stroke-width="3" paint-order="stroke">'
                        f'{escape(label)}</text>')
        elif c.get("availability") == "restricted":  # not orderable in the market: a hollow red ring
            body.append(f'<circle cx="{x}" cy="{y}" r="3.5" fill="none" stroke="#c62828">{tip}</circle>')
        else:  # an amber ring where it is orderable only under conditions (licence, fee, allocation)
            ring = f" {LIMITED_RING}" if c.get("availability") == "limited" else ""
            body.append(f'<circle cx="{x}" cy="{y}" r="3.5" fill="#90a4ae" fill-opacity="0.7"{ring}>{tip}</circle>')
    body += _legends(lang, any(c.get("availability") == "restricted" for c in rows),
                     any(c.get("availability") == "limited" for c in rows))
    return _svg(body, _t("cost_title" + suffix, lang))


def latency_vs_load(plan: dict[str, Any], lang: str = "en") -> str | None:
    """P99 TTFT and the upper end of TPOT as % of their targets against the requests/s one
    replica serves (``performance.load_curve``), the operating point and the 100 % line; None
    without a curve or targets."""
    curve = [r for r in (plan.get("performance") or {}).get("load_curve") or [] if r.get("requests_per_s")]
    sla = (plan.get("workload") or {}).get("sla") or {}
    if len(curve) < 2 or not sla.get("ttft_ms") or not sla.get("tpot_ms"):
        return None
    series = {"ttft_p99": [(r["requests_per_s"], 100 * (r.get("ttft_p99_ms") or r["ttft_ms"]) / sla["ttft_ms"])
                           for r in curve],
              "tpot_hi": [(r["requests_per_s"], 100 * r["tpot_ms_hi"] / sla["tpot_ms"]) for r in curve]}
    px, py, body = _axes(_ticks(0, max(x for x, _ in series["ttft_p99"]) * 1.05),
                         _ticks(0, max(110.0, *(y for pts in series.values() for _, y in pts))))
    body.append(f'<line x1="{LEFT}" y1="{_n(py(100))}" x2="{W - RIGHT}" y2="{_n(py(100))}" stroke="#c62828" '
                f'stroke-dasharray="5,4"/>')
    body.append(f'<text x="{W - RIGHT - 4}" y="{_n(py(100) - 6)}" text-anchor="end" fill="#c62828">SLA 100 %</text>')
    planned = next((r for r in curve if r.get("share") == 1.0), None)
    if planned:
        x = _n(px(planned["requests_per_s"]))
        body.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{H - BOTTOM}" stroke="#2e7d32" stroke-dasharray="2,3"/>')
        rate = f"{planned['requests_per_s']:,.1f}"
        right = px(planned["requests_per_s"]) > (LEFT + W - RIGHT) / 2  # the label on the side with room
        body.append(f'<text x="{_n(px(planned["requests_per_s"]) + (-4 if right else 4))}" y="{TOP + 12}" '
                    f'text-anchor="{"end" if right else "start"}" fill="#2e7d32">'
                    f'{escape(_t("operating", lang, rate=rate))}</text>')
    colours = {"ttft_p99": "#1565c0", "tpot_hi": "#ef6c00"}
    for k, (name, pts) in enumerate(series.items()):
        path = " ".join(f"{_n(px(x))},{_n(py(y))}" for x, y in pts)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colours[name]}" stroke-width="2"/>')
        body += [f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3" fill="{colours[name]}"/>' for x, y in pts]
        body.append(f'<text x="{LEFT + 10}" y="{TOP + 14 + 16 * k}" fill="{colours[name]}">'
                    f'{escape(_t(name, lang))}</text>')
    body += _axis_titles(_t("load_x", lang), _t("load_y", lang))
    return _svg(body, _t("load_title", lang))


def _line_chart(series: list[tuple[str, str, list[tuple[float, float]]]], title: str, x_label: str, y_label: str,
                limit: tuple[float, str] | None = None, operating: tuple[float, str] | None = None,
                lead_in: bool = False) -> str:
    """Lines of (x, y) points with a legend, a dashed limit line (y) and the planned point (x);
    ``lead_in``: the first point's value drawn back to x = 0 (dashed), where it holds too."""
    xs = [x for _, _, pts in series for x, _ in pts] + ([operating[0]] if operating else [])
    ys = [y for _, _, pts in series for _, y in pts] + ([limit[0] * 1.1] if limit else [])
    px, py, body = _axes(_ticks(0, max(xs) * 1.05), _ticks(0, max(ys) * 1.05), grid=True)
    if limit:
        body.append(f'<line x1="{LEFT}" y1="{_n(py(limit[0]))}" x2="{W - RIGHT}" y2="{_n(py(limit[0]))}" '
                    f'stroke="#c62828" stroke-dasharray="5,4"/>')
    if operating:
        x = _n(px(operating[0]))
        body.append(f'<line x1="{x}" y1="{TOP}" x2="{x}" y2="{H - BOTTOM}" stroke="#2e7d32" stroke-dasharray="2,3"/>')
        right = px(operating[0]) > (LEFT + W - RIGHT) / 2  # the label on the side with room
        body.append(f'<text x="{_n(px(operating[0]) + (-4 if right else 4))}" y="{TOP + 20 + 16 * len(series)}" '
                    f'text-anchor="{"end" if right else "start"}" fill="#2e7d32" stroke="white" stroke-width="3" '
                    f'paint-order="stroke">{escape(operating[1])}</text>')
    for k, (name, colour, pts) in enumerate(series):
        if lead_in and pts:
            body.append(f'<line x1="{LEFT}" y1="{_n(py(pts[0][1]))}" x2="{_n(px(pts[0][0]))}" '
                        f'y2="{_n(py(pts[0][1]))}" stroke="{colour}" stroke-dasharray="4,3"/>')
        path = " ".join(f"{_n(px(x))},{_n(py(y))}" for x, y in pts)
        style = 'stroke-width="3"' if k == 0 else 'stroke-width="2" stroke-dasharray="6,4"'  # both seen where equal
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" {style}/>')
        body += [f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3" fill="{colour}"/>' for x, y in pts]
        body.append(f'<text x="{LEFT + 10}" y="{TOP + 14 + 16 * k}" fill="{colour}" stroke="white" stroke-width="3" '
                    f'paint-order="stroke">{escape(name)}</text>')
    if limit:  # over the lines, on the left where the load is light
        body.append(f'<text x="{LEFT + 10}" y="{_n(py(limit[0]) - 6)}" fill="#c62828" stroke="white" '
                    f'stroke-width="3" paint-order="stroke">{escape(limit[1])}</text>')
    body += _axis_titles(x_label, y_label)
    return _svg(body, title)


def _fmt(x: float) -> str:
    """A chart label's number: no decimals from 100, one below."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.1f}".rstrip("0").rstrip(".")


def class_load_chart(plan: dict[str, Any], lang: str = "en") -> str | None:
    """The load chart of a plan that is not an online decoder (``performance.load_curve_kind``):
    an offline job's output tokens/s against its batch with the job's need per replica; an
    encoder's latency against requests/s with the latency target; a streaming ASR GPU's
    partial-result latency (% of its target) and busy time against its streams; a video box's
    compute and decoder load against its camera streams. The planned point marked; None without
    a curve."""
    perf = plan.get("performance") or {}
    kind, curve = perf.get("load_curve_kind"), perf.get("load_curve") or []
    operating, limit = perf.get("load_curve_operating"), perf.get("load_curve_limit")
    if len(curve) < 2 or kind not in ("offline", "encoder", "asr-streaming", "video"):
        return None
    blue, orange = "#1565c0", "#ef6c00"
    key = kind.replace("-", "_")

    def t(name: str, **args: Any) -> str:
        return _t(f"load.{key}.{name}", lang, **args)

    op = (operating, t("operating", x=_fmt(operating))) if operating is not None else None
    if kind == "offline":
        series = [(t("tokens"), blue, [(r["concurrency"], r["output_tokens_per_s"]) for r in curve])]
        lim = (limit, t("limit", y=_fmt(limit))) if limit else None
        return _line_chart(series, t("title"), t("x"), t("y"), lim, op)
    if kind == "encoder":
        series = [(t("worst"), blue, [(r["requests_per_s"], r["latency_p99_ms"]) for r in curve]),
                  (t("own"), orange, [(r["requests_per_s"], r["latency_ms"]) for r in curve])]
        lim = (limit, t("limit", y=_fmt(limit))) if limit else None
        return _line_chart(series, t("title"), t("x"), t("y"), lim, op, lead_in=True)
    hundred = (100.0, t("limit"))
    if kind == "asr-streaming":
        if not limit:
            return None
        series = [(t("latency", target=_fmt(limit)), blue,
                   [(r["streams"], 100 * r["latency_ms"] / limit) for r in curve]),
                  (t("busy"), orange, [(r["streams"], r["gpu_busy_pct"]) for r in curve])]
        return _line_chart(series, t("title"), t("x"), t("y"), hundred, op)
    series = [(t("compute"), blue, [(r["streams"], r["compute_load_pct"]) for r in curve])]
    if all(r.get("decode_load_pct") is not None for r in curve):
        series.append((t("decode"), orange, [(r["streams"], r["decode_load_pct"]) for r in curve]))
    return _line_chart(series, t("title"), t("x"), t("y"), hundred, op)


POOL_COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#455a64")


def pools_latency_vs_load(plan: dict[str, Any], lang: str = "en") -> str | None:
    """A several-model plan: for each model's replica the latency that binds first (TTFT P99 or
    the upper end of TPOT, as % of that model's targets) against its load as % of its planned
    point, one line a model; None without two pools with curves and targets."""
    wl = plan.get("workload") or {}
    entries = wl.get("models") or []
    series = []
    for i, pool in enumerate(plan.get("pools") or []):
        curve = [r for r in (pool.get("performance") or {}).get("load_curve") or [] if r.get("share")]
        own = (entries[i].get("sla") if i < len(entries) else None) or {}
        sla = {**(wl.get("sla") or {}), **{k: v for k, v in own.items() if v is not None}}
        if len(curve) < 2 or not sla.get("ttft_ms") or not sla.get("tpot_ms"):
            continue
        pts = [(100 * r["share"], 100 * max((r.get("ttft_p99_ms") or r["ttft_ms"]) / sla["ttft_ms"],
                                            r["tpot_ms_hi"] / sla["tpot_ms"])) for r in curve]
        series.append((pool["model"], pts))
    if len(series) < 2:
        return None
    px, py, body = _axes(_ticks(0, max(x for _, pts in series for x, _ in pts)),
                         _ticks(0, max(110.0, *(y for _, pts in series for _, y in pts))))
    body.append(f'<line x1="{LEFT}" y1="{_n(py(100))}" x2="{W - RIGHT}" y2="{_n(py(100))}" stroke="#c62828" '
                f'stroke-dasharray="5,4"/>')
    body.append(f'<text x="{W - RIGHT - 4}" y="{_n(py(100) - 6)}" text-anchor="end" fill="#c62828">SLA 100 %</text>')
    body.append(f'<line x1="{_n(px(100))}" y1="{TOP}" x2="{_n(px(100))}" y2="{H - BOTTOM}" stroke="#2e7d32" '
                f'stroke-dasharray="2,3"/>')
    for k, (name, pts) in enumerate(series):
        colour = POOL_COLOURS[k % len(POOL_COLOURS)]
        path = " ".join(f"{_n(px(x))},{_n(py(y))}" for x, y in pts)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        body += [f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3" fill="{colour}"/>' for x, y in pts]
        body.append(f'<text x="{LEFT + 10}" y="{TOP + 14 + 16 * k}" fill="{colour}">{escape(name)}</text>')
    body += _axis_titles(_t("pools_load_x", lang), _t("load_y", lang))
    return _svg(body, _t("pools_load_title", lang))


def _pool_sla(plan: dict[str, Any], i: int) -> dict[str, Any]:
    """The targets of the ``i``-th pool of a several-model plan: its entry's over the workload's."""
    wl = plan.get("workload") or {}
    entries = wl.get("models") or []
    own = (entries[i].get("sla") if i < len(entries) else None) or {}
    return {**(wl.get("sla") or {}), **{k: v for k, v in own.items() if v is not None}}


def _front(pts: list[tuple[float, float, dict[str, Any]]]) -> list[tuple[float, float, dict[str, Any]]]:
    """The points no other beats on both axes (lower latency and lower cost), by latency."""
    out: list[tuple[float, float, dict[str, Any]]] = []
    for x, y, c in sorted(pts, key=lambda p: (p[0], p[1])):
        if not out or y < out[-1][1]:
            out.append((x, y, c))
    return out


def pools_cost_vs_latency(plan: dict[str, Any], lang: str = "en") -> str | None:
    """A several-model plan: each pool's ranked candidates as planned on its own servers, reduced
    to those no other candidate of the pool beats on both TCO and TPOT (its cost-latency front),
    TCO (log scale) against the upper end of TPOT as % of that model's target, one colour a model,
    each pool's chosen one marked and named in the legend, the target as the 100 % line; None
    without two pools with candidates and TPOT targets."""
    series = []
    for i, pool in enumerate(plan.get("pools") or []):
        target = _pool_sla(plan, i).get("tpot_ms")
        rows = [c for c in pool.get("candidates") or [] if c.get("tco_cny") and c.get("tpot_ms_hi")]
        if target and rows:
            pts = [(100 * c["tpot_ms_hi"] / target, c["tco_cny"] / 1e6, c) for c in rows]
            series.append((pool["model"], _front(pts), next((p for p in pts if p[2].get("chosen")), None)))
    if len(series) < 2:
        return None
    xs = [x for _, pts, _ in series for x, _, _ in pts]
    ys = [y for _, pts, ch in series for _, y, _ in pts + ([ch] if ch else [])]
    lo, hi = min(ys) / 1.3, max(ys) * 1.3
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    y_ticks = [t for t in (m * 10 ** e for e in range(first, last + 1) for m in (1, 2, 5)) if lo <= t <= hi]
    x_ticks = _ticks(0, max(110.0, max(xs) * 1.05))
    span = math.log10(hi) - math.log10(lo)

    def px(x: float) -> float:
        return LEFT + (W - LEFT - RIGHT) * x / x_ticks[-1]

    def py(y: float) -> float:
        return H - BOTTOM - (H - TOP - BOTTOM) * (math.log10(y) - math.log10(lo)) / span

    body = [f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>']
    body += [f'<text x="{_n(px(t))}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>' for t in x_ticks]
    for t in y_ticks:
        body.append(f'<text x="{LEFT - 6}" y="{_n(py(t) + 4)}" text-anchor="end">{t:g}</text>')
        body.append(f'<line x1="{LEFT}" y1="{_n(py(t))}" x2="{W - RIGHT}" y2="{_n(py(t))}" stroke="#eee"/>')
    body.append(f'<line x1="{_n(px(100))}" y1="{TOP}" x2="{_n(px(100))}" y2="{H - BOTTOM}" stroke="#c62828" '
                f'stroke-dasharray="5,4"/>')
    body.append(f'<text x="{_n(px(100) - 4)}" y="{TOP + 12}" text-anchor="end" fill="#c62828">'
                f'{escape(_t("pools_cost_sla", lang))}</text>')

    def tip(name: str, c: dict[str, Any]) -> str:
        return (f"<title>{escape(name)} · {escape(c['id'])}: {c['tco_cny']:,.0f} CNY, "
                f"TPOT {c['tpot_ms_hi']:.1f} ms</title>")

    for k, (name, pts, _) in enumerate(series):
        colour = POOL_COLOURS[k % len(POOL_COLOURS)]
        path = " ".join(f"{_n(px(x))},{_n(py(y))}" for x, y, _ in pts)
        body.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5" '
                    f'stroke-opacity="0.7"/>')
        body += [f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3" fill="{colour}">{tip(name, c)}</circle>'
                 for x, y, c in pts if not c.get("chosen")]
    for k, (name, _, ch) in enumerate(series):  # drawn last, on top
        if ch:
            body.append(f'<circle cx="{_n(px(ch[0]))}" cy="{_n(py(ch[1]))}" r="7" '
                        f'fill="{POOL_COLOURS[k % len(POOL_COLOURS)]}" stroke="black" stroke-width="1.5">'
                        f'{tip(name, ch[2])}</circle>')
    for k, (name, _, ch) in enumerate(series):  # the legend below the plot: it never hides a point
        c = ch[2] if ch else None
        label = name if c is None else _t("pools_cost_chosen", lang, model=name, gpus=c.get("gpus") or "",
                                           gpu=c.get("gpu") or c["id"], precision=c.get("precision") or "",
                                           tco=f"{c['tco_cny'] / 1e6:,.2f}")
        body.append(f'<text x="{LEFT}" y="{H + 4 + 16 * k}" fill="{POOL_COLOURS[k % len(POOL_COLOURS)]}">'
                    f'● {escape(label)}</text>')
    body += _axis_titles(_t("pools_cost_x", lang), _t("pools_cost_y", lang))
    return _svg(body, _t("pools_cost_title", lang), H + 16 * len(series))


def capex_breakdown(plan: dict[str, Any], lang: str = "en") -> str | None:
    """Horizontal bars of the capex by BOM category (Σ qty × midpoint), largest first; None
    without a priced bill of materials."""
    totals: dict[str, float] = {}
    for line in plan.get("bom") or []:
        rng = line.get("unit_price_cny")
        if rng:
            totals[line["category"]] = totals.get(line["category"], 0.0) + line["qty"] * (rng[0] + rng[1]) / 2
    rows = sorted(((v, k) for k, v in totals.items() if v > 0), reverse=True)
    if not rows:
        return None
    from .render import bom_category

    top = rows[0][0]
    bar_h = min(28.0, (H - TOP - 30) / len(rows) - 6)
    labels = [bom_category(category, lang) for _, category in rows]
    start = 20 + max(_text_width(x) for x in labels)  # the bars begin after the widest label
    room = W - start - 100  # and leave room for the amount after the longest
    body = []
    for i, ((value, _), category) in enumerate(zip(rows, labels, strict=True)):
        y = TOP + 10 + i * (bar_h + 6)
        width = room * value / top
        share = 100 * value / sum(v for v, _ in rows)
        body.append(f'<text x="{start - 8}" y="{_n(y + bar_h / 2 + 4)}" text-anchor="end">{escape(category)}</text>')
        body.append(f'<rect x="{start}" y="{_n(y)}" width="{_n(width)}" height="{_n(bar_h)}" fill="#1565c0">'
                    f'<title>{escape(category)}: {value:,.0f} CNY ({share:.0f} %)</title></rect>')
        body.append(f'<text x="{_n(start + 6 + width)}" y="{_n(y + bar_h / 2 + 4)}">{value:,.0f}</text>')
    return _svg(body, _t("capex_title", lang, total=f"{sum(v for v, _ in rows):,.0f}"))


def _log_axis(lo: float, hi: float, size: float, start: float, flip: bool = False
              ) -> tuple[list[float], Callable[[float], float]]:
    """1-2-5 ticks between ``lo`` and ``hi`` and the value-to-pixel map of a log axis of ``size``
    pixels from ``start`` (``flip``: upwards, as a y axis)."""
    ticks = [t for t in _log_ticks(lo, hi) if lo <= t <= hi]
    span = math.log10(hi) - math.log10(lo)

    def to_px(v: float) -> float:
        d = size * (math.log10(v) - math.log10(lo)) / span
        return start - d if flip else start + d

    return ticks, to_px


def nearest_misses(plan: dict[str, Any], lang: str = "en") -> str | None:
    """An infeasible decoder plan: one request's TTFT against its TPOT (upper ends, log scales) on
    every configuration that fits the model, from the rejections that record them
    (``figures`` of sla.reject-candidate-missing-sla), the targets as lines and the corner that
    meets both shaded (empty: why the plan is infeasible), the nearest miss named with how far it
    is from the targets; None without such rejections or targets."""
    sla = (plan.get("workload") or {}).get("sla") or {}
    ttft_t, tpot_t = sla.get("ttft_ms"), sla.get("tpot_ms")
    pts = []
    for r, f in _fitting(plan):
        if isinstance(f.get("ttft_ms"), (int, float)) and isinstance(f.get("tpot_ms"), (int, float)) \
                and f["ttft_ms"] > 0 and f["tpot_ms"] > 0:
            pts.append((float(f["tpot_ms"]), float(f["ttft_ms"]), f.get("miss"), r))
    if not pts or not ttft_t or not tpot_t:
        return None
    x_lo, x_hi = min(tpot_t, *(x for x, _, _, _ in pts)) / 1.5, max(tpot_t, *(x for x, _, _, _ in pts)) * 1.5
    y_lo, y_hi = min(ttft_t, *(y for _, y, _, _ in pts)) / 1.5, max(ttft_t, *(y for _, y, _, _ in pts)) * 1.5
    x_ticks, px = _log_axis(x_lo, x_hi, W - LEFT - RIGHT, LEFT)
    y_ticks, py = _log_axis(y_lo, y_hi, H - TOP - BOTTOM, H - BOTTOM, flip=True)
    body = [f'<rect x="{LEFT}" y="{_n(py(ttft_t))}" width="{_n(px(tpot_t) - LEFT)}" '
            f'height="{_n(H - BOTTOM - py(ttft_t))}" fill="#e8f5e9"/>',
            f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>']
    body += [f'<text x="{_n(px(t))}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>' for t in x_ticks]
    body += [f'<text x="{LEFT - 6}" y="{_n(py(t) + 4)}" text-anchor="end">{t:g}</text>' for t in y_ticks]
    body.append(f'<text x="{LEFT + 6}" y="{_n(H - BOTTOM - 8)}" fill="#2e7d32">{escape(_t("miss.meets", lang))}</text>')
    for x1, y1, x2, y2, label, anchor in (
            (px(tpot_t), TOP, px(tpot_t), H - BOTTOM, _t("miss.tpot_target", lang, target=f"{tpot_t:g}"), "start"),
            (LEFT, py(ttft_t), W - RIGHT, py(ttft_t), _t("miss.ttft_target", lang, target=f"{ttft_t:g}"), "end")):
        body.append(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="#c62828" '
                    f'stroke-dasharray="5,4"/>')
        tx, ty = (x1 + 4, TOP + 12) if anchor == "start" else (x2 - 4, y1 - 6)
        body.append(f'<text x="{_n(tx)}" y="{_n(ty)}" text-anchor="{anchor}" fill="#c62828" stroke="white" '
                    f'stroke-width="3" paint-order="stroke">{escape(label)}</text>')

    def tip(r: dict[str, Any], x: float, y: float) -> str:
        return f"<title>{escape(r['option'])}: TTFT {y:,.0f} ms, TPOT {x:,.1f} ms</title>"

    # the nearest the buyer could order (restricted ones as hollow red rings), any where none is
    nearest = min(pts, key=lambda p: (not _orderable(p[3]), p[2] if isinstance(p[2], (int, float)) else math.inf,
                                      p[3]["option"]))
    for x, y, _, r in pts:
        if r is not nearest[3]:
            body.append(f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3.5" {_point_style(r)}>{tip(r, x, y)}</circle>')
    body += _legends(lang, not all(_orderable(p[3]) for p in pts), any(_limited(p[3]) for p in pts))
    x, y, miss, r = nearest
    body.append(f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="7" fill="#ef6c00" stroke="black">'
                f'{tip(r, x, y)}</circle>')
    n, gpu, precision = _replica_label(r)
    label = _t("miss.nearest", lang, gpus=n, gpu=gpu, precision=precision,
               times=f"{miss:.1f}" if isinstance(miss, (int, float)) else "?") + _limited_tag(r, lang)
    body.append(f'<text x="{_n(_label_start(px(x), label))}" y="{_n(py(y) - 10)}" '
                f'font-weight="bold" stroke="white" stroke-width="3" paint-order="stroke">{escape(label)}</text>')
    body += _axis_titles(_t("miss.x", lang), _t("miss.y", lang))
    return _svg(body, _t("miss.title", lang, n=len(pts)))


def _orderable(r: dict[str, Any]) -> bool:
    """Whether the buyer could order the rejected candidate (``figures.orderable``; True when the
    rejection does not say)."""
    return (r.get("figures") or {}).get("orderable") is not False


def _limited(r: dict[str, Any]) -> bool:
    """Whether the rejected candidate's GPU is orderable only under conditions in the buyer's market
    (``figures.availability`` 'limited': a licence per order, a fee, an allocation)."""
    return (r.get("figures") or {}).get("availability") == "limited"


def _limited_tag(r: dict[str, Any], lang: str) -> str:
    """What a named configuration's label adds when its GPU is orderable only under conditions."""
    return _t("limited_tag", lang) if _limited(r) else ""


def _point_style(r: dict[str, Any]) -> str:
    """A rejected configuration's point: grey (with an amber ring where it is orderable only under
    conditions), or a hollow red ring where the buyer could not order it."""
    if not _orderable(r):
        return 'fill="none" stroke="#c62828"'
    return 'fill="#90a4ae" fill-opacity="0.7"' + (f" {LIMITED_RING}" if _limited(r) else "")


def _fitting(plan: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(rejection, its figures) of every configuration that fits but misses the targets for one
    request (sla.reject-candidate-missing-sla's figures), in the plan's order."""
    return [(r, f) for r in plan.get("rejected") or [] for f in [r.get("figures") or {}] if f.get("fits")]


def _label_start(x: float, label: str, lo: float = LEFT + 4) -> float:
    """Where a point's bold label (left-aligned, above it) starts: beside the point on the side
    with room, moved inwards as far as it takes to stay inside the plot (bold text a little wider
    than :func:`_text_width`) and right of ``lo`` where it fits there (a shaded band it must not
    seem to sit in)."""
    width = 1.1 * _text_width(label)
    start = x - 10 - width if x > (LEFT + W - RIGHT) / 2 else x + 10
    lo = min(lo, W - 4 - width)  # where it does not fit right of ``lo``: as far right as it fits
    return max(LEFT + 4, lo, min(start, W - 4 - width))


def _restricted_legend(lang: str, key: str = "restricted") -> str:
    return (f'<text x="{LEFT + 10}" y="{TOP - 4}" fill="#c62828">○ '
            f'{escape(_t(key, lang))}</text>')


def _legends(lang: str, restricted: bool, limited: bool) -> list[str]:
    """The legends of a point chart's market marks above the plot: export-restricted at the left,
    orderable under conditions at the right (both shortened to share the line)."""
    if not limited:
        return [_restricted_legend(lang)] if restricted else []
    out = [_restricted_legend(lang, "restricted_short")] if restricted else []
    text = _t("limited_short" if restricted else "limited", lang)
    return out + [f'<text x="{W - RIGHT}" y="{TOP - 4}" text-anchor="end" fill="#b26a00">◎ {escape(text)}</text>']


def _replica_label(r: dict[str, Any]) -> tuple[int, str, str]:
    """(GPUs, GPU, precision) of a rejected candidate's replica, from the rule's values."""
    v = r.get("values") or {}
    n = int(v.get("candidate.tp") or 1) * int(v.get("candidate.pp") or 1)
    return n, str(v.get("candidate.gpu") or r["option"]), str(v.get("candidate.precision") or "")


def cost_vs_miss(plan: dict[str, Any], lang: str = "en") -> str | None:
    """An infeasible decoder plan's cost picture: what one replica costs at least (the rejection's
    ``replica_capex_cny``, capex_floor at midpoint prices) against how far one request on it misses
    the targets (``miss``: its largest latency / target ratio), both log scales, the targets as a
    line at 1x with the side that meets them shaded and empty; the nearest miss and the cheapest
    configuration that fits are named. Money spent on more or faster GPUs moves a point down the
    miss axis only so far: the chart shows where it stops. None without such figures."""
    pts = []
    for r, f in _fitting(plan):
        miss, capex = f.get("miss"), f.get("replica_capex_cny")
        if isinstance(miss, (int, float)) and isinstance(capex, (int, float)) and miss > 0 and capex > 0:
            pts.append((float(miss), float(capex), r))
    if not pts:
        return None
    x_lo, x_hi = min(1.0, *(x for x, _, _ in pts)) / 3, max(1.0, *(x for x, _, _ in pts)) * 1.5
    y_lo, y_hi = min(y for _, y, _ in pts) / 1.5, max(y for _, y, _ in pts) * 1.5
    x_ticks, px = _log_axis(x_lo, x_hi, W - LEFT - RIGHT, LEFT)
    y_ticks, py = _log_axis(y_lo, y_hi, H - TOP - BOTTOM, H - BOTTOM, flip=True)
    body = [f'<rect x="{LEFT}" y="{TOP}" width="{_n(px(1.0) - LEFT)}" height="{H - BOTTOM - TOP}" fill="#e8f5e9"/>',
            f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="black"/>',
            f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="black"/>',
            f'<line x1="{_n(px(1.0))}" y1="{TOP}" x2="{_n(px(1.0))}" y2="{H - BOTTOM}" stroke="#c62828" '
            f'stroke-dasharray="5,4"/>',
            f'<text x="{_n(px(1.0) + 4)}" y="{TOP + 12}" fill="#c62828" stroke="white" stroke-width="3" '
            f'paint-order="stroke">{escape(_t("costmiss.target", lang))}</text>']
    band_x, mid_y = (LEFT + px(1.0)) / 2, (TOP + H - BOTTOM) // 2
    body.append(f'<text x="{_n(band_x)}" y="{mid_y}" text-anchor="middle" fill="#2e7d32" '
                f'transform="rotate(-90 {_n(band_x)} {mid_y})">{escape(_t("costmiss.meets", lang))}</text>')
    body += [f'<text x="{_n(px(t))}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}×</text>' for t in x_ticks]
    body += [f'<text x="{LEFT - 6}" y="{_n(py(t) + 4)}" text-anchor="end">{t / 1e6:g}</text>' for t in y_ticks]
    nearest = min(pts, key=lambda p: (not _orderable(p[2]), p[0], p[1], p[2]["option"]))
    cheapest = min(pts, key=lambda p: (not _orderable(p[2]), p[1], p[0], p[2]["option"]))

    def tip(x: float, y: float, r: dict[str, Any]) -> str:
        return f"<title>{escape(r['option'])}: {x:.1f}×, {y / 1e6:,.2f} M CNY</title>"

    for x, y, r in pts:
        if r is not nearest[2] and r is not cheapest[2]:
            body.append(f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="3.5" {_point_style(r)}>{tip(x, y, r)}</circle>')
    body += _legends(lang, not all(_orderable(p[2]) for p in pts), any(_limited(p[2]) for p in pts))
    marks = [(nearest, "#ef6c00", "costmiss.nearest", -12)]
    if cheapest[2] is not nearest[2]:
        marks.append((cheapest, "#1565c0", "costmiss.cheapest", -12))
    for (x, y, r), colour, key, dy in marks:
        n, gpu, precision = _replica_label(r)
        body.append(f'<circle cx="{_n(px(x))}" cy="{_n(py(y))}" r="7" fill="{colour}" stroke="black">'
                    f'{tip(x, y, r)}</circle>')
        label = _t(key, lang, gpus=n, gpu=gpu, precision=precision, times=f"{x:.1f}",
                   capex=f"{y / 1e6:,.2f}") + _limited_tag(r, lang)
        # (not over the band that meets the targets: nothing there does)
        body.append(f'<text x="{_n(_label_start(px(x), label, px(1.0) + 4))}" y="{_n(py(y) + dy)}" '
                    f'font-weight="bold" fill="{colour}" stroke="white" '
                    f'stroke-width="3" paint-order="stroke">{escape(label)}</text>')
    body += _axis_titles(_t("costmiss.x", lang), _t("costmiss.y", lang))
    return _svg(body, _t("costmiss.title", lang, n=len(pts)))


def nearest_by_gpu(plan: dict[str, Any], lang: str = "en", most: int = 12) -> str | None:
    """An infeasible decoder plan, GPU model by GPU model: how near its best configuration that
    fits comes to the targets (the lowest ``miss`` among its rejections' figures), as bars from
    the 1x line on a log scale, nearest first (the ``most`` nearest models; the count of the
    others in the title). None without such figures."""
    best: dict[str, tuple[float, dict[str, Any]]] = {}
    for r, f in _fitting(plan):
        miss = f.get("miss")
        if isinstance(miss, (int, float)) and miss > 0:
            gpu = _replica_label(r)[1]
            if gpu not in best or (miss, r["option"]) < (best[gpu][0], best[gpu][1]["option"]):
                best[gpu] = (float(miss), r)
    if not best:
        return None
    # nearest first, the GPUs the buyer could order before those they could not
    rows = sorted(best.items(), key=lambda kv: (not _orderable(kv[1][1]), kv[1][0], kv[0]))
    shown = rows[:most]
    lo, hi = min(1.0, shown[0][1][0]) / 1.2, max(x for _, (x, _) in shown) * 1.25
    names = {g: g + _limited_tag(r, lang) for g, (_, r) in shown}
    start = 20 + max(_text_width(name) for name in names.values())
    room = W - start - 190  # the value and its configuration after the longest bar
    ticks, px = _log_axis(lo, hi, room, start)
    bar_h = min(24.0, (H - TOP - BOTTOM) / len(shown) - 5)
    body = [f'<line x1="{_n(px(1.0))}" y1="{TOP}" x2="{_n(px(1.0))}" y2="{H - BOTTOM}" stroke="#c62828" '
            f'stroke-dasharray="5,4"/>',
            f'<text x="{_n(px(1.0) + 4)}" y="{H - BOTTOM + 16}" fill="#c62828">'
            f'{escape(_t("costmiss.target", lang))}</text>',
            f'<line x1="{start}" y1="{H - BOTTOM}" x2="{_n(start + room)}" y2="{H - BOTTOM}" stroke="black"/>']
    body += [f'<text x="{_n(px(t))}" y="{H - BOTTOM + 32}" text-anchor="middle">{t:g}×</text>' for t in ticks
             if abs(px(t) - px(1.0)) > 24 or t == 1.0]
    for i, (gpu, (miss, r)) in enumerate(shown):
        y = TOP + 6 + i * (bar_h + 5)
        n, _, precision = _replica_label(r)
        x0, x1 = px(1.0), px(miss)
        style = ('fill="none" stroke="#c62828"' if not _orderable(r) else
                 ('fill="#ef6c00"' if i == 0 else 'fill="#90a4ae"') + (f" {LIMITED_RING}" if _limited(r) else ""))
        body.append(f'<text x="{start - 8}" y="{_n(y + bar_h / 2 + 4)}" text-anchor="end">{escape(names[gpu])}</text>')
        body.append(f'<rect x="{_n(min(x0, x1))}" y="{_n(y)}" width="{_n(abs(x1 - x0))}" height="{_n(bar_h)}" '
                    f'{style}><title>{escape(r["option"])}: {miss:.1f}×</title></rect>')
        body.append(f'<text x="{_n(max(x0, x1) + 6)}" y="{_n(y + bar_h / 2 + 4)}">'
                    f'{escape(_t("bygpu.value", lang, times=f"{miss:.1f}", gpus=n, precision=precision))}</text>')
    body.append(f'<text x="{_n(start + room / 2)}" y="{H - 12}" text-anchor="middle">'
                f'{escape(_t("bygpu.x", lang))}</text>')
    if not all(_orderable(r) for _, (_, r) in shown):
        body.append(f'<text x="{_n(start + room + 180)}" y="{H - BOTTOM + 16}" text-anchor="end" fill="#c62828">□ '
                    f'{escape(_t("restricted", lang))}</text>')
    if any(_limited(r) for _, (_, r) in shown):
        body.append(f'<text x="{LEFT + 10}" y="{TOP - 4}" fill="#b26a00">{escape(_t("limited_tag", lang).strip())}: '
                    f'{escape(_t("limited", lang))}</text>')
    title = _t("bygpu.title", lang, n=len(rows)) + ("" if len(rows) <= most else _t("bygpu.more", lang,
                                                                                      n=len(rows) - most))
    return _svg(body, title)


def charts(plan: dict[str, Any], lang: str = "en") -> dict[str, str]:
    """The plan's charts by file name (those it has data for; an infeasible plan configured
    nothing to draw but how near its candidates came)."""
    if not plan.get("feasible", True):
        out = {"nearest-misses.svg": nearest_misses(plan, lang), "cost-vs-miss.svg": cost_vs_miss(plan, lang),
               "nearest-by-gpu.svg": nearest_by_gpu(plan, lang)}
        return {name: svg for name, svg in out.items() if svg}
    if plan.get("pools"):
        load = pools_latency_vs_load(plan, lang)
    elif (plan.get("performance") or {}).get("load_curve_kind") not in (None, "online"):
        load = class_load_chart(plan, lang)
    else:
        load = latency_vs_load(plan, lang)
    cost = pools_cost_vs_latency(plan, lang) if plan.get("pools") else cost_vs_latency(plan, lang)
    out = {"cost-vs-latency.svg": cost, "latency-vs-load.svg": load,
           "capex-breakdown.svg": capex_breakdown(plan, lang)}
    return {name: svg for name, svg in out.items() if svg}


METRIC_NAMES = ("ttft_ms", "tpot_ms", "output_tokens_per_s", "offline_output_tokens_per_s")
BACKEND_COLOURS = {"vllm": "#1565c0", "sglang": "#ef6c00", "trtllm": "#2e7d32"}


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks from the decade at or below ``lo`` to the one at or above ``hi``: 1-2-5 within two
    decades, the decades alone over a wider span (labels would overlap)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    return [m * 10 ** e for e in range(first, last + 1) for m in steps]


def predicted_vs_measured(errors: list[dict[str, Any]], metric: str, lang: str = "en") -> str | None:
    """Log-log scatter of the predicted against the measured value of ``metric`` for every row
    `validate` compared (one point a row, coloured by backend), the line where they are equal and
    the ±25 % lines; None when no row has the metric."""
    pts = [(e["meas"], e["pred"], e.get("backend") or "") for e in errors
           if e["metric"] == metric and e.get("meas") and e.get("pred") and e["meas"] > 0 and e["pred"] > 0]
    if not pts:
        return None
    name, unit = ((metric.split("_")[0].upper(), "ms") if metric.endswith("_ms")
                  else (_t(f"metric.{metric}", lang), _t("unit.tokens_per_s", lang)))
    lo = min(min(m, p) for m, p, _ in pts) / 1.3
    hi = max(max(m, p) for m, p, _ in pts) * 1.3
    side = H - TOP - BOTTOM
    left = LEFT + 20
    ticks, px = _log_axis(lo, hi, side, left)
    _, py = _log_axis(lo, hi, side, H - BOTTOM, flip=True)

    body = [f'<line x1="{left}" y1="{H - BOTTOM}" x2="{_n(left + side)}" y2="{H - BOTTOM}" stroke="black"/>',
            f'<line x1="{left}" y1="{TOP}" x2="{left}" y2="{H - BOTTOM}" stroke="black"/>']
    for t in ticks:
        body.append(f'<text x="{_n(px(t))}" y="{H - BOTTOM + 16}" text-anchor="middle">{t:g}</text>')
        body.append(f'<text x="{left - 6}" y="{_n(py(t) + 4)}" text-anchor="end">{t:g}</text>')
    for factor, dash in ((1.0, ""), (1.25, ' stroke-dasharray="5,4"'), (0.8, ' stroke-dasharray="5,4"')):
        a, b = lo, hi
        body.append(f'<line x1="{_n(px(a))}" y1="{_n(py(min(hi, max(lo, a * factor))))}" x2="{_n(px(b))}" '
                    f'y2="{_n(py(min(hi, max(lo, b * factor))))}" stroke="#c62828"{dash}/>')
    for m, p, backend in pts:
        colour = BACKEND_COLOURS.get(backend, "#757575")
        body.append(f'<circle cx="{_n(px(m))}" cy="{_n(py(p))}" r="2" fill="{colour}" fill-opacity="0.45"/>')
    legend = [(escape(_t("validate.equal", lang)), "#c62828")]
    legend += [(b, c) for b, c in BACKEND_COLOURS.items() if any(x == b for _, _, x in pts)]
    for k, (label, colour) in enumerate(legend):
        body.append(f'<text x="{_n(left + side + 12)}" y="{TOP + 14 + 16 * k}" fill="{colour}">{label}</text>')
    body.append(f'<text x="{_n(left + side / 2)}" y="{H - 20}" text-anchor="middle">'
                f'{escape(_t("validate.x", lang, metric=name, unit=unit))}</text>')
    body.append(f'<text x="18" y="{(TOP + H - BOTTOM) // 2}" text-anchor="middle" '
                f'transform="rotate(-90 18 {(TOP + H - BOTTOM) // 2})">'
                f'{escape(_t("validate.y", lang, metric=name, unit=unit))}</text>')
    apes = sorted(abs(p - m) / m * 100 for m, p, _ in pts)
    title = _t("validate.title", lang, metric=name, n=len(pts), ape=apes[len(apes) // 2])
    return _svg(body, title)


def validate_charts(errors: list[dict[str, Any]], lang: str = "en") -> dict[str, str]:
    """`validate`'s charts by file name: predicted against measured, one per metric compared."""
    out = {f"validate-{metric.replace('_', '-')}.svg": predicted_vs_measured(errors, metric, lang)
           for metric in METRIC_NAMES}
    return {name: svg for name, svg in out.items() if svg}
