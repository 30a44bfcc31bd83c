"""The plan's charts (issue 39 item 5): valid SVG with the plan's own numbers — every ranked
candidate a point inside the plot, the chosen one marked once, the TPOT target drawn; latency
against load rising through the operating point; the capex bars add up to the plan's capex; in
the html report, and as files with `plan --plot DIR`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from click.testing import CliRunner
from conftest import EXAMPLES

from servewise.cli import charts as ch
from servewise.cli.main import cli
from servewise.cli.render_html import to_html

NS = "{http://www.w3.org/2000/svg}"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def test_every_example_draws_valid_charts_from_its_numbers(example_plans):
    drew = 0
    for name in NAMES:
        plan = example_plans[name].plan
        drawn = ch.charts(plan, "en")
        assert drawn == ch.charts(plan, "en"), "deterministic"
        if "cost-vs-latency.svg" in drawn and not plan.get("pools"):  # (several models: the test below)
            drew += 1
            root = ET.fromstring(drawn["cost-vs-latency.svg"])
            points = [(float(c.get("cx")), float(c.get("cy")), float(c.get("r"))) for c in root.iter(NS + "circle")]
            field, target, key = ch.latency_axis(plan)
            ranked = [c for c in plan["candidates"] if c.get("tco_cny") and c.get(field)]
            assert len(points) == len(ranked), name
            assert sum(1 for p in points if p[2] > 5) == sum(1 for c in ranked if c["chosen"]) == 1, name
            assert all(ch.LEFT <= x <= ch.W - ch.RIGHT and ch.TOP <= y <= ch.H - ch.BOTTOM for x, y, _ in points), name
            if target:
                label = {"tpot": "TPOT target", "encoder": "latency target", "asr": "partial-result target"}[key]
                assert f"{label} {target:g} ms" in drawn["cost-vs-latency.svg"], name
            restricted = [c for c in ranked if c.get("availability") == "restricted" and not c["chosen"]]
            hollow = [c for c in root.iter(NS + "circle") if c.get("fill") == "none"]
            assert len(hollow) == len(restricted), name
            # orderable only under conditions (licence, fee, allocation): an amber ring, and the legend
            # (the chosen one's label says "(conditional)")
            limited = [c for c in ranked if c.get("availability") == "limited"]
            ringed = [c for c in root.iter(NS + "circle") if c.get("stroke") == "#f9a825"]
            assert len(ringed) == sum(not c["chosen"] for c in limited), name
            assert ("licence, fee or allocation" in drawn["cost-vs-latency.svg"]) == bool(limited), name
            assert ("(conditional)" in drawn["cost-vs-latency.svg"]) == any(c["chosen"] for c in limited), name
        if "latency-vs-load.svg" in drawn and not plan.get("pools") and "load_curve_kind" not in plan["performance"]:
            curve = plan["performance"]["load_curve"]
            root = ET.fromstring(drawn["latency-vs-load.svg"])
            assert len(list(root.iter(NS + "polyline"))) == 2, name
            assert sum(1 for r in curve if r["share"] == 1.0) == 1, name
            rates = [r["requests_per_s"] for r in curve]
            assert rates == sorted(rates), name  # more requests in flight serve more requests/s
            assert [r["tpot_ms"] for r in curve] == sorted(r["tpot_ms"] for r in curve), name
        if "capex-breakdown.svg" in drawn:
            root = ET.fromstring(drawn["capex-breakdown.svg"])
            values = [float(t.text.replace(",", "")) for t in root.iter(NS + "text")
                      if t.text and t.text.replace(",", "").isdigit()]
            assert abs(sum(values) - plan["cost"]["capex_cny"]) <= len(values), name
    assert drew >= 29  # every feasible example but the several-model plans (drawn by pool: below)


def test_the_html_report_embeds_the_charts(example_plans):
    html = to_html(example_plans["chat-70b-online"].plan, "zh")
    assert html.count("<svg") >= 3 and "候选方案：总拥有成本与 TPOT" in html


def test_plot_writes_svg_files_and_the_md_links_them(tmp_path):
    out = tmp_path / "charts"
    res = CliRunner().invoke(cli, ["plan", str(EXAMPLES / "chat-8b-small.yaml"), "--format", "md",
                                   "--plot", str(out)])
    assert res.exit_code == 0, res.output[-400:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["capex-breakdown.svg", "cost-vs-latency.svg", "latency-vs-load.svg"]
    for f in files:
        ET.parse(out / f)
        assert f"({out}/{f})" in res.output


def test_ticks_run_past_the_largest_value():
    for hi in (0.5, 3.2, 11.9, 40, 52.5, 130, 1e4):
        ticks = ch._ticks(0, hi)
        assert ticks[0] == 0 and ticks[-1] >= hi and 3 <= len(ticks) <= 8


def test_a_md_report_written_to_a_file_has_its_charts_beside_it(tmp_path):
    """`plan --format md -o FILE` writes the charts beside FILE (FILE's stem + -charts/) and links
    them relative to it; to stdout the report says how to get them."""
    out = tmp_path / "reports" / "plan.md"
    out.parent.mkdir()
    res = CliRunner().invoke(cli, ["plan", str(EXAMPLES / "chat-8b-small.yaml"), "--format", "md", "-o", str(out)])
    assert res.exit_code == 0, res.output[-400:]
    charts_dir = out.parent / "plan-charts"
    files = sorted(p.name for p in charts_dir.iterdir())
    assert files == ["capex-breakdown.svg", "cost-vs-latency.svg", "latency-vs-load.svg"]
    text = out.read_text(encoding="utf-8")
    for f in files:
        ET.parse(charts_dir / f)
        assert f"](plan-charts/{f})" in text
    piped = CliRunner().invoke(cli, ["plan", str(EXAMPLES / "chat-8b-small.yaml"), "--format", "md"])
    assert "--plot DIR" in piped.output and "](" not in piped.output.split("## Charts")[1].split("##")[0]


def test_validate_plots_predicted_against_measured(tmp_path):
    """`validate --plot DIR`: one SVG per metric compared, a point per compared row (inside the
    plot), the line where predicted equals measured, the median error in the title."""
    from servewise.engine.domain.perf.validate import validate

    res = CliRunner().invoke(cli, ["validate", "--plot", str(tmp_path / "v")])
    assert res.exit_code == 0, res.output[-400:]
    errors = validate(None)["errors"]
    for metric in ("ttft_ms", "tpot_ms"):
        path = tmp_path / "v" / f"validate-{metric.replace('_', '-')}.svg"
        root = ET.parse(path).getroot()
        points = [(float(c.get("cx")), float(c.get("cy"))) for c in root.iter(NS + "circle")]
        compared = [e for e in errors if e["metric"] == metric and e.get("pred") and e.get("meas")]
        assert len(points) == len(compared) > 100
        assert all(ch.TOP <= y <= ch.H - ch.BOTTOM and ch.LEFT <= x <= ch.W for x, y in points)
        title = next(t.text for t in root.iter(NS + "text") if t.text and "predicted against measured" in t.text)
        assert f"({len(compared)} rows" in title
    assert ch.validate_charts(errors, "zh") != ch.validate_charts(errors, "en")


def test_a_several_model_plan_draws_each_models_latency_against_load(example_plans):
    """One line a model: the latency that binds first as % of its targets against its load as % of
    its planned point; at the planned point every model is within its target (the plan meets the
    SLA), past it the lines rise."""
    for name in ("multi-model-tenants", "saas-five-tenants"):
        plan = example_plans[name].plan
        svg = ch.charts(plan, "en")["latency-vs-load.svg"]
        root = ET.fromstring(svg)
        lines = list(root.iter(NS + "polyline"))
        assert len(lines) == len([p for p in plan["pools"] if p["performance"].get("load_curve")]) >= 2, name
        labels = {t.text for t in root.iter(NS + "text")}
        assert {p["model"] for p in plan["pools"]} <= labels, name
        for line in lines:
            ys = [float(p.split(",")[1]) for p in line.get("points").split()]
            assert ys[-1] < ys[0], name  # at 150 % of the planned load slower than at 25 % (smaller y)
        assert ch.charts(plan, "zh")["latency-vs-load.svg"] != svg


def test_a_several_model_plan_draws_each_pools_cost_against_latency(example_plans):
    """Each pool's candidates as planned on its own servers, reduced to its cost-latency front
    (each point cheaper than every faster one), TPOT as % of that model's target; every pool's
    chosen configuration marked once, inside the target, and named with its model in the legend."""
    for name in ("multi-model-tenants", "saas-five-tenants"):
        plan = example_plans[name].plan
        svg = ch.charts(plan, "en")["cost-vs-latency.svg"]
        root = ET.fromstring(svg)
        circles = list(root.iter(NS + "circle"))
        chosen = [c for c in circles if float(c.get("r")) > 5]
        assert len(chosen) == len(plan["pools"]) >= 2, name
        height = float(root.get("height"))
        assert all(ch.LEFT <= float(c.get("cx")) <= ch.W - ch.RIGHT
                   and ch.TOP <= float(c.get("cy")) <= ch.H - ch.BOTTOM for c in circles), name
        assert height == ch.H + 16 * len(plan["pools"]), name  # the legend below the plot
        legend = [t.text for t in root.iter(NS + "text") if t.text and t.text.startswith("● ")]
        for pool in plan["pools"]:
            pick = [c for c in pool["candidates"] if c["chosen"]]
            assert len(pick) == 1, (name, pool["model"])
            assert any(t.startswith(f"● {pool['model']}: ") and pick[0]["gpu"] in t for t in legend), (name, legend)
        for line in root.iter(NS + "polyline"):  # a front: more TPOT, less cost
            pts = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
            assert [x for x, _ in pts] == sorted(x for x, _ in pts), name
            assert all(y2 > y1 for (_, y1), (_, y2) in zip(pts, pts[1:], strict=False)), name  # lower: cheaper
        assert ch.charts(plan, "zh")["cost-vs-latency.svg"] != svg


def test_each_class_draws_its_load_curve(example_plans):
    """The plans that are not online decoders draw a load curve of their own class, from the rules'
    numbers: an offline replica's throughput rises with its batch and reaches the job's need at
    its memory-limited batch; an encoder serves more requests/s, slower, as its batch grows, and
    meets its target at the largest batch it is planned with; a live-transcription GPU's latency
    and busy time rise with its streams and are within the target at its planned streams; a video
    box's load rises with its cameras and at the planned ones equals the power mode's load."""
    kinds = {}
    for name, ex in example_plans.items():
        perf = ex.plan["performance"]
        kind = perf.get("load_curve_kind")
        if not kind:
            continue
        kinds[kind] = name
        curve, limit, operating = perf["load_curve"], perf.get("load_curve_limit"), perf["load_curve_operating"]
        svg = ch.charts(ex.plan, "en")["latency-vs-load.svg"]
        root = ET.fromstring(svg)
        lines = list(root.iter(NS + "polyline"))
        texts = " ".join(t.text or "" for t in root.iter(NS + "text"))
        assert "planned" in texts or "memory-limited batch" in texts, name
        at = next((r for r in curve if r["share"] == 1.0), None)
        if kind == "offline":
            assert len(lines) == 1, name
            tokens = [r["output_tokens_per_s"] for r in curve]
            assert tokens == sorted(tokens) and at["concurrency"] == operating, name
            assert at["output_tokens_per_s"] >= limit, name  # the replicas carry the job
            assert f"the job needs {limit:,.0f} tokens/s per replica" in texts, name
        elif kind == "encoder":
            assert len(lines) == 2, name
            assert [r["requests_per_s"] for r in curve] == sorted(r["requests_per_s"] for r in curve), name
            assert [r["latency_p99_ms"] for r in curve] == sorted(r["latency_p99_ms"] for r in curve), name
            assert operating < max(r["requests_per_s"] for r in curve), name
            if at is not None:
                assert at["latency_p99_ms"] <= limit, name
            assert curve[-1]["latency_p99_ms"] > limit, name  # past the largest batch the target is missed
        elif kind == "asr-streaming":
            assert len(lines) == 2, name
            assert at["latency_ms"] <= limit and at["gpu_busy_pct"] <= 100, name
            assert [r["latency_ms"] for r in curve] == sorted(r["latency_ms"] for r in curve), name
            assert at["streams"] == ex.plan["performance"]["asr_streams_per_gpu"], name
        elif kind == "video":
            assert len(lines) == 2, name
            assert abs(at["compute_load_pct"] - ex.plan["components"]["edge"]["power_mode_load_pct"]) <= 1, name
            assert at["streams"] == operating and curve[-1]["compute_load_pct"] > 100, name
        assert ch.charts(ex.plan, "zh")["latency-vs-load.svg"] != svg, name
    assert sorted(kinds) == ["asr-streaming", "encoder", "offline", "video"], kinds


def test_a_title_too_long_for_the_width_is_set_smaller():
    """Every example's chart titles fit at 14 px; one that would not (a long translation) shrinks."""
    short = ch._svg([], "Short title")
    assert 'font-size="14">Short title' in short
    long_title = "x" * 120
    size = float(re.search(r'font-size="([\d.]+)">x{120}', ch._svg([], long_title)).group(1))
    assert size < 14 and ch._text_width(long_title) * size / 12 <= ch.W - 16
    _, y_title = ch._axis_titles("x", "y" * 100)
    assert float(re.search(r'font-size="([\d.]+)"', y_title).group(1)) < 12
    assert "font-size" not in ch._axis_titles("x", "TTFT (ms)")[1]
