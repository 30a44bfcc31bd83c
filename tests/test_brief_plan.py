"""`servewise plan` opens with the decision on one screen (issue 39 item 4): for every example, in
English and Chinese, at most 40 lines of at most 80 columns, with the configuration, the cost, the
SLA verdict, the critical warnings first and the nearest alternatives; `--full` has the rest."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

from servewise.cli.brief import MAX_LINES, clip, to_brief
from servewise.cli.i18n import display_width, pick
from servewise.cli.main import cli

EXAMPLE_NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
HANG = 0  # closing CJK punctuation never hangs past the edge: it takes the character before it down


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("width", [80, 64])
def test_every_example_fits_one_screen(example_plans, lang, width):
    for name in EXAMPLE_NAMES:
        plan = example_plans[name].plan
        lines = to_brief(plan, lang, width).splitlines()
        assert len(lines) <= MAX_LINES, (name, lang, width, len(lines))
        widest = max(display_width(line) for line in lines)
        assert widest <= width + HANG, (name, lang, width, widest)


def test_the_summary_holds_the_decision(example_plans):
    for name in EXAMPLE_NAMES:
        plan = example_plans[name].plan
        text = to_brief(plan, "en", 80)
        flat = " ".join(text.split())
        if plan["feasible"]:
            gpu = plan["components"]["gpu"]
            if gpu.get("model"):
                assert gpu["model"] in flat, name
            assert f"{plan['cost']['capex_cny']:,.0f}" in flat.replace(".0 ", " "), name
            assert "meets SLA: " + ("yes" if plan["performance"]["meets_sla"] else "no") in flat, name
        else:
            assert "INFEASIBLE" in text, name
        critical = [w for w in plan["warnings"] if w["severity"] == "critical"]
        serious = [w for w in plan["warnings"] if w["severity"] != "info"]
        if serious:
            first = text.split("Warnings to decide on", 1)[1].split("!", 1)[1]
            top = (critical or serious)[0]
            lead = " ".join(pick(top.get("message_i18n") or top["message"], "en").split()[:6])
            assert lead in " ".join(first.split()[:12]), name


def test_clip_marks_what_it_leaves_out():
    line = "  GPU           " + "word " * 60
    one = clip(line, 40)
    assert len(one) == 1 and one[0].endswith("…") and display_width(one[0]) <= 40
    two = clip(line, 40, 2)
    assert len(two) == 2 and two[1].endswith("…") and two[1].startswith(" " * 16)
    assert clip("short", 40) == ["short"]


def test_cli_prints_the_summary_and_full_on_request():
    path = str(EXAMPLES / "chat-8b-small.yaml")
    brief = CliRunner().invoke(cli, ["--lang", "en", "plan", path])
    full = CliRunner().invoke(cli, ["--lang", "en", "plan", path, "--full"])
    assert brief.exit_code == 0 and full.exit_code == 0
    assert len(brief.output.splitlines()) <= MAX_LINES < len(full.output.splitlines())
    assert "Bill of materials" in full.output and "Bill of materials" not in brief.output
    assert "--full" in brief.output


def test_latencies_say_their_statistic_and_what_was_checked(example_plans):
    """Issue 39 item 3: TTFT as P99 and mean with their bands, the value checked against the
    target at the confidence edge, and the margin; the verdict agrees with the value checked."""
    from servewise.cli.render import latency_lines

    plan = example_plans["chat-70b-online"].plan
    perf, sla = plan["performance"], plan["workload"]["sla"]
    text = " ".join(" ".join(latency_lines(plan, "en")).split())
    assert f"TTFT P99 {perf['ttft_p99_ms']} ms (≤ {perf['ttft_p99_ms_band_hi']}), mean {perf['ttft_ms']} ms" in text
    assert f"target P99 ≤ {sla['ttft_ms']} ms, checked {perf['ttft_checked_ms']} ms" in text
    assert perf["ttft_checked_ms"] == round(max(perf["ttft_p99_ms"], perf["ttft_ms_band_hi"]), 1)
    assert perf["tpot_checked_ms"] == perf["tpot_ms_band_hi"] and perf["confidence"] == "p80"
    assert perf["meets_sla"] == (perf["ttft_checked_ms"] <= sla["ttft_ms"] and perf["tpot_checked_ms"] <= sla["tpot_ms"])
    zh = "".join(latency_lines(plan, "zh"))
    assert "平均" in zh and "校验值" in zh and "余量" in zh


def test_the_load_test_names_the_model_the_workload_serves(example_plans):
    """Issue 39 item 2: DeepSeek-R1 shares DeepSeek-V3's architecture entry; its load test and
    the engine load DeepSeek-R1, not V3."""
    plan = example_plans["deepseek-r1-h200-fp8"].plan
    assert plan["workload"]["model"] == "DeepSeek-R1"
    command = plan["components"]["loadtest"]["command"]
    assert "--model DeepSeek-R1 " in command and "DeepSeek-V3" not in command


def test_reports_use_labels_formatted_numbers_and_severity_order(example_plans):
    """Issue 39 item 6: md/html reports show labels and formatted numbers, not raw keys and
    floats, and list warnings critical first."""
    from servewise.cli.render import field_label, field_value, to_markdown
    from servewise.cli.render_html import to_html

    assert field_label("output_tokens_per_s") == "Output tokens/s"
    assert field_label("capex_range_cny") == "Capex range (CNY)"
    assert field_value([1213095.0, 2219483.0]) == "1,213,095 – 2,219,483"
    for name in ("chat-70b-online", "budget-7b"):
        plan = example_plans[name].plan
        for text in (to_markdown(plan, "en"), to_html(plan, "en")):
            report = text.split("Explanation chain", 1)[0]  # the chain lists the trace's raw facts
            assert "capex_range_cny" not in report and "Capex range (CNY)" in report, name
            warnings = report.split("Warnings", 1)[1].split("Inputs", 1)[0]
            ranks = [("critical", "warning", "info").index(w["severity"]) for w in plan["warnings"]]
            order = sorted(plan["warnings"], key=lambda w: warnings.find(w["rule"]))
            assert [("critical", "warning", "info").index(w["severity"]) for w in order] == sorted(ranks), name


def test_explain_brief_gives_reasons_not_titles(example_plans, tmp_path):
    plan = example_plans["chat-70b-online"]
    path = tmp_path / "p.json"
    path.write_text(plan.json_text, encoding="utf-8")
    res = CliRunner().invoke(cli, ["--lang", "en", "explain", str(path), "gpu", "--brief"])
    assert res.exit_code == 0
    flat = " ".join(res.output.split())
    assert "select.gpu-component: 6 × H200 NVL (fp8, tensor parallel 2" in flat
