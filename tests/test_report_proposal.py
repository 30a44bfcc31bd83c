"""The md and html reports read as an architect's proposal (issue 39 items 5 and 6): they open with
the decision (GPUs, servers, cost with its range, the SLA verdict), the warnings to decide on, most
severe first and before any info note, and the nearest alternatives; numbers are formatted and
labelled (latencies name their statistic), never a raw key or a Python value."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html import unescape

import pytest

from servewise.cli.render import load_title, to_markdown
from servewise.cli.render_html import to_html


def _sections(md: str) -> list[str]:
    return re.findall(r"^## (.+)$", md, re.M)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_report_opens_with_the_decision(example_plans, lang):
    first = {"en": "Decision", "zh": "结论"}[lang]
    for name, ex in example_plans.items():
        plan = ex.plan
        md = to_markdown(plan, lang)
        assert _sections(md)[0] == first, (name, _sections(md)[:2])
        head = md.split("\n## ")[1]  # the decision section
        serious = [w for w in plan["warnings"] if w["severity"] != "info"]
        rules = re.findall(r"\(`([\w.-]+)`\)$", head, re.M)
        assert rules == [w["rule"] for w in sorted(serious, key=lambda w: ["critical", "warning"].index(
            w["severity"]))], name
        if plan["feasible"] and plan["cost"].get("capex_cny") is not None:
            assert f"{plan['cost']['capex_cny']:,.0f}" in head, name
            assert "SLA" in head, name
        html = to_html(plan, lang)
        assert html.index(first) < html.index("<h2>" + {"en": "Configuration", "zh": "配置"}[lang]), name


def test_reports_show_labels_and_formatted_numbers(example_plans):
    for name, ex in example_plans.items():
        plan = ex.plan
        md = to_markdown(plan, "en")
        assert "{'share'" not in md, name
        assert "load_curve" not in md.split("## Explanation chain")[0], name  # the chain names facts by key
        assert not re.search(r"^\| (gpu|servers|cpu|cooling) \|", md, re.M), name  # component keys
        assert "| TTFT (ms) |" not in md and "| TPOT (ms) |" not in md, name  # a latency names its statistic
        if plan["performance"].get("ttft_ms") is not None:
            assert "| TTFT mean (ms) |" in md, name
        curve = plan["performance"].get("load_curve")
        if curve:
            assert f"**{load_title(plan, 'en')}**" in md, name
            assert ("100 % ◀" in md) == any(r["share"] == 1.0 for r in curve), name
        html = to_html(plan, "en")
        assert "{'share'" not in html, name
        report = html.split("<h2>Explanation chain")[0]  # what a buyer reads; the chain names facts by key
        assert "capex_range_cny" not in report, name
        if not plan.get("pools"):  # (a several-model plan's per-pool values are joined as text by the engine)
            assert not re.search(r"\d{5,}\.0\b", report), name
        assert not re.search(r"<td>\d{5,}\.0, ", html), name  # the chain's values formatted too


def test_every_feasible_report_embeds_its_charts(example_plans, tmp_path):
    """Every feasible example's reports carry the three charts: the candidates' cost against
    latency (several models: each pool's front, one colour a model), the load chart of its class
    (an online decoder's latency against requests/s, an offline job's throughput against batch,
    an encoder's latency against requests/s, a live-transcription GPU's latency and busy time
    against streams, a video box's load against cameras; several models: one line a model) and
    the capex breakdown. The html embeds them as figures, `--plot` / `-o` write them as files the
    md links; each is valid SVG (an XML document whose root is an <svg> with its title)."""
    from servewise.cli.charts import charts
    from servewise.cli.main import write_charts

    names = ["cost-vs-latency.svg", "latency-vs-load.svg", "capex-breakdown.svg"]
    for name, ex in example_plans.items():
        plan = ex.plan
        if not plan["feasible"]:
            continue
        drawn = charts(plan, "en")
        assert list(drawn) == names, (name, list(drawn))
        titles = []
        for svg in drawn.values():
            root = ET.fromstring(svg)
            assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("aria-label"), name
            titles.append(root.get("aria-label"))
        html = to_html(plan, "en")
        figures = [unescape(f) for f in re.findall(r"<figure><svg[^>]*aria-label=\"([^\"]+)\"", html)]
        assert figures == titles, (name, figures)
        assert titles[0].startswith("Candidates:") and titles[2].startswith("Capex by bill-of-materials"), name
        md = to_markdown(plan, "en", charts_dir="charts")
        assert all(f"](charts/{f})" in md for f in names), name
    plan = example_plans["edge-video"].plan
    write_charts(plan, str(tmp_path / "charts"), "zh")
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == sorted(names)
    for f in names:
        assert ET.parse(tmp_path / "charts" / f).getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_an_infeasible_report_draws_how_near_the_candidates_came(example_plans, tmp_path):
    """An infeasible plan configured nothing to draw a load curve or a bill of materials of; its
    report draws the nearest misses instead: one request's TTFT against its TPOT on every
    configuration that fits, from the rejections that record them, the corner meeting both
    targets empty, and the nearest miss named. The text plan lists the nearest misses first."""
    from servewise.cli.brief import to_brief
    from servewise.cli.charts import charts

    plan = example_plans["infeasible-target"].plan
    recorded = [r for r in plan["rejected"] if r.get("figures", {}).get("fits")]
    assert recorded and all(r["figures"]["miss"] > 1 for r in recorded)
    drawn = charts(plan, "en")
    assert list(drawn) == ["nearest-misses.svg", "cost-vs-miss.svg", "nearest-by-gpu.svg"]
    root = ET.fromstring(drawn["nearest-misses.svg"])
    assert root.get("aria-label") == f"Nearest misses: one request's latency on the {len(recorded)} configurations that fit"
    # the nearest the buyer could order (the cn market: B200, nearer, is export-restricted)
    nearest = min(recorded, key=lambda r: (not r["figures"]["orderable"], r["figures"]["miss"]))
    assert min(recorded, key=lambda r: r["figures"]["miss"])["figures"]["orderable"] is False
    gpu = nearest["values"]["candidate.gpu"]
    assert f"× {gpu} ({nearest['values']['candidate.precision']}), {nearest['figures']['miss']:.1f}× the target" \
        in drawn["nearest-misses.svg"]
    sla = plan["workload"]["sla"]
    assert all(r["figures"]["ttft_ms"] > sla["ttft_ms"] or r["figures"]["tpot_ms"] > sla["tpot_ms"] for r in recorded)
    html, md = to_html(plan, "en"), to_markdown(plan, "en", charts_dir="charts")
    assert "<figure><svg" in html
    assert "](charts/nearest-misses.svg)" in md
    # nothing was configured: the charts come right after the decision, before the empty tables
    assert html.index("<h2>Charts</h2>") < html.index("<h2>Configuration</h2>")
    assert md.index("## Charts") < md.index("## Configuration")
    alternatives = to_brief(plan, "en").split("Nearest alternatives")[1]
    assert f"- {gpu}:" in alternatives and "- A10:" not in alternatives


def test_an_infeasible_report_draws_what_a_replica_costs_against_its_miss(example_plans):
    """The infeasible plan's cost picture: each configuration that fits at the least its replica
    costs (capex_floor of its GPUs, recorded with the rejection) against how far one request on it
    misses the targets; the nearest miss and the cheapest configuration named with both numbers,
    and no point on the side of the 1x line that meets the targets."""
    from servewise.cli.charts import charts
    from servewise.engine.domain.fn_bom import capex_floor

    plan = example_plans["infeasible-target"].plan
    region = plan["workload"]["deployment"]["region"]
    recorded = [r for r in plan["rejected"] if r.get("figures", {}).get("fits")]
    for r in recorded[:5]:
        v = r["values"]
        n = int(v["candidate.tp"]) * int(v["candidate.pp"])
        assert r["figures"]["replica_capex_cny"] == capex_floor(v["candidate.gpu"], n, region)
    svg = charts(plan, "en")["cost-vs-miss.svg"]
    root = ET.fromstring(svg)
    assert root.get("aria-label") == f"One replica's cost against how far it misses the targets ({len(recorded)} that fit)"
    priced = [r for r in recorded if r["figures"]["replica_capex_cny"]]
    nearest = min(priced, key=lambda r: (not r["figures"]["orderable"], r["figures"]["miss"],
                                         r["figures"]["replica_capex_cny"], r["option"]))
    cheapest = min(priced, key=lambda r: (not r["figures"]["orderable"], r["figures"]["replica_capex_cny"],
                                          r["figures"]["miss"], r["option"]))
    for r, word in ((nearest, "nearest"), (cheapest, "cheapest that fits")):
        f = r["figures"]
        assert (f"{word}: {int(r['values']['candidate.tp']) * int(r['values']['candidate.pp'])} × "
                f"{r['values']['candidate.gpu']} ({r['values']['candidate.precision']}), {f['miss']:.1f}×, "
                f"≥ {f['replica_capex_cny'] / 1e6:,.2f} M CNY") in svg
    assert cheapest["figures"]["miss"] > nearest["figures"]["miss"]  # spending buys latency, up to a floor
    zh = charts(plan, "zh")["cost-vs-miss.svg"]
    assert "最接近" in zh and "最便宜且放得下" in zh and "nearest" not in zh


def test_an_infeasible_report_shows_how_near_each_gpu_model_comes(example_plans):
    """One bar per GPU model that fits (the nearest twelve), its best configuration's miss, nearest
    first, those the buyer cannot order (export-restricted) after the others and drawn hollow; the
    title counts the models and says how many are not shown."""
    from servewise.cli.charts import charts

    plan = example_plans["infeasible-target"].plan
    best: dict[str, float] = {}
    orderable: dict[str, bool] = {}
    for r in plan["rejected"]:
        f = r.get("figures") or {}
        if f.get("fits"):
            gpu = r["values"]["candidate.gpu"]
            best[gpu] = min(best.get(gpu, float("inf")), f["miss"])
            orderable[gpu] = f["orderable"]
    order = sorted(best, key=lambda g: (not orderable[g], best[g], g))  # orderable in the market first
    svg = charts(plan, "en")["nearest-by-gpu.svg"]
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    bars = [t.find(f"{ns}title").text for t in root.iter(f"{ns}rect") if t.find(f"{ns}title") is not None]
    shown = order[:12]
    assert [b.split(" | ")[0] for b in bars] == shown
    assert [float(b.rsplit(": ", 1)[1].rstrip("×")) for b in bars] == [round(best[g], 1) for g in shown]
    assert sum(1 for t in root.iter(f"{ns}rect") if t.get("fill") == "none") == sum(not orderable[g] for g in shown)
    # a GPU the buyer can order only under conditions in the market (cn: H200, H20, L4) is named so
    limited = {r["values"]["candidate.gpu"] for r in plan["rejected"] if (r.get("figures") or {}).get("availability") == "limited"}
    assert {"H200 SXM", "H20"} <= limited
    names = [t.text for t in root.iter(f"{ns}text") if t.get("text-anchor") == "end" and t.text]
    assert sorted(n.removesuffix(" (conditional)") for n in names if n.endswith(" (conditional)")) == sorted(
        g for g in shown if g in limited)
    assert sum(1 for t in root.iter(f"{ns}rect") if t.get("stroke") == "#f9a825") == sum(g in limited for g in shown)
    assert "(conditional): orderable with conditions in this market" in svg
    assert root.get("aria-label") == (f"Each GPU model's nearest configuration ({len(best)} models)"
                                      + (f", {len(best) - 12} farthest not shown" if len(best) > 12 else ""))


# one feasible example of each load chart's kind (an online decoder's html is rendered by
# tests/test_auditor.py::test_html_renders_in_headless_chromium)
CHART_KINDS = ["offline-batch", "embedding-500qps", "asr-whisper-100-streams", "edge-video", "multi-model-tenants",
               "infeasible-target"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CHART_KINDS)
def test_the_charts_render_in_headless_chromium(example_plans, tmp_path, name):
    """The html report of each kind of load chart (and of a several-model plan's cost chart, and
    an infeasible plan's nearest misses) renders offline in headless Chromium, where it is
    installed: a real PNG screenshot, and the figures' SVGs in the DOM Chromium parsed (three; the
    nearest misses, the cost against the miss and the nearest by GPU model where nothing was
    configured)."""
    from render_html_check import chromium, problems, render

    binary = chromium()
    if binary is None:
        pytest.skip("chromium is not installed")
    page = tmp_path / "report.html"
    page.write_text(to_html(example_plans[name].plan, "en"), encoding="utf-8")
    png, dom = render(page, tmp_path, binary)
    assert problems(png, dom) == [], name
    assert dom.count("<figure><svg") == 3, name


def test_a_report_shows_no_decoder_row_an_encoder_has_no_value_for(example_plans):
    """An encoder generates no tokens: its report's performance table has its latency rows and no
    TTFT/TPOT/output tokens/s rows reading '—'; an infeasible plan shows what was not computed."""
    md = to_markdown(example_plans["embedding-500qps"].plan, "en")
    table = md.split("## Performance")[1].split("\n## ")[0]
    assert "| — |" not in table and "TTFT" not in table and "Max concurrency" in table
    infeasible = to_markdown(example_plans["infeasible-target"].plan, "en").split("## Performance")[1]
    assert "| TPOT mean (ms) | — |" in infeasible.split("\n## ")[0]


def test_the_chinese_alternatives_do_not_repeat_the_option(example_plans):
    """A Chinese rejection text begins "OPTION：" (a full-width colon): the list that names the
    option strips it as it strips the English "OPTION: "."""
    from servewise.cli.brief import to_brief
    from servewise.cli.render import without_option

    # the unpriced A100 of the infeasible plan reads "A100 80GB PCIe：在 cn 市场受出口管制，且无价格…"
    plan = example_plans["infeasible-target"].plan
    a100 = next(r for r in plan["rejected"] if r["rule"] == "cost.candidate-needs-price"
                and r["option"].startswith("A100 80GB PCIe"))
    zh = a100["because_i18n"]["zh"]
    assert zh.startswith("A100 80GB PCIe：") and without_option(zh, "A100 80GB PCIe").startswith("在 cn 市场受出口管制")
    for name, planned in example_plans.items():
        text = to_brief(planned.plan, "zh")
        alternatives = [line for line in text.splitlines() if line.startswith("  - ")]
        options = [line[4:].split(": ", 1)[0] for line in alternatives]
        assert not any(line.startswith(f"  - {o}: {o}：") for line, o in zip(alternatives, options, strict=True)), name
