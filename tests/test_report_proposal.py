"""The md and html reports read as an architect's proposal (issue 39 items 5 and 6): they open with
the decision (GPUs, servers, cost with its range, the SLA verdict), the warnings to decide on, most
severe first and before any info note, and the nearest alternatives; numbers are formatted and
labelled (latencies name their statistic), never a raw key or a Python value."""

from __future__ import annotations

import re

import pytest

from servewise.cli.render import to_markdown
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
        if plan["performance"].get("load_curve"):
            assert "Latency against load" in md and "100 % ◀" in md, name
        html = to_html(plan, "en")
        assert "{'share'" not in html, name
        report = html.split("<h2>Explanation chain")[0]  # what a buyer reads; the chain names facts by key
        assert "capex_range_cny" not in report, name
        if not plan.get("pools"):  # (a several-model plan's per-pool values are joined as text by the engine)
            assert not re.search(r"\d{5,}\.0\b", report), name
        assert not re.search(r"<td>\d{5,}\.0, ", html), name  # the chain's values formatted too


def test_every_feasible_report_embeds_its_charts(example_plans):
    """The html report embeds the capex breakdown and the latency-against-load chart of every
    feasible online decoder plan (several models: one line a model), and the candidates' cost
    against latency of every plan that ranked candidates. Not drawn (no data in the plan): latency
    against load of offline, encoder, speech and edge plans (the rules compute no load curve for
    them), cost against latency of several-model plans (the pools' candidates are not kept)."""
    for name, ex in example_plans.items():
        plan = ex.plan
        if not plan["feasible"]:
            continue
        html = to_html(plan, "en")
        figures = re.findall(r"<figure><svg[^>]*aria-label=\"([^\"]+)\"", html)
        assert any(f.startswith("Capex by bill-of-materials") for f in figures), name
        online_decoder = plan["workload"]["mode"] == "online" and (
            plan["performance"].get("load_curve") or any(p["performance"].get("load_curve")
                                                         for p in plan.get("pools") or []))
        assert any("latency against load" in f for f in figures) == bool(online_decoder), (name, figures)
        assert any(f.startswith("Candidates:") for f in figures) == bool(plan.get("candidates")), name
