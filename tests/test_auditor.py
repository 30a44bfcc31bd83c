"""The auditor's views end to end: explain, why-not, audit, and the Markdown and HTML reports."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

from servewise.cli.main import cli as group

CHAT = str(EXAMPLES / "chat-70b-online.yaml")


def run(*args: str):
    return CliRunner().invoke(group, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, example_plans):
    """The 70B example saved as plan.json, as `plan --format json -o` writes it: (path, plan)."""
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(example_plans["chat-70b-online"].json_text, encoding="utf-8")
    return str(path), json.loads(path.read_text(encoding="utf-8"))


def setter_step(plan, fact):
    return max(s["step"] for s in plan["trace"] if any(c["fact"] == fact for c in s["conclusions"]))


# ------------------------------------------------------------------------------------------ explain

@pytest.fixture(scope="module")
def in_process():
    """explain and why-not as the CLI runs them (same engine calls and renderers), without a
    process or a plan-file load per call: (explain(plan, target) -> (text, data),
    why_not(plan, option) -> (text, data))."""
    from servewise.cli.cmd_audit import render_explain, render_why_not, rule_titles, to_json
    from servewise.cli.main import Settings
    from servewise.cli.wrap import NOT_A_TTY_WIDTH, wrap
    from servewise.engine.app import explain as ex
    from servewise.engine.domain.catalog import load_catalog

    titles = rule_titles(Settings("en", ()))
    gpus = dict(load_catalog().table("gpus").index)

    def explain(plan, target):
        result = ex.explain(plan, target, titles)
        return wrap(render_explain(result, plan, "en"), NOT_A_TTY_WIDTH), json.loads(to_json(result))

    def why_not(plan, option):
        result = ex.why_not(plan, option, titles, gpus)
        return wrap(render_why_not(result, "en"), NOT_A_TTY_WIDTH), json.loads(to_json(result))

    return explain, why_not


def test_explain_every_component_text_and_json(saved, in_process):
    path, plan = saved
    explain, _ = in_process
    assert plan["components"]
    for n, (comp, fields) in enumerate(plan["components"].items()):
        text, data = explain(plan, comp)
        if n == 0:  # the CLI prints the same (each component through the CLI would re-read the file)
            cli_text = run("explain", path, comp)
            assert cli_text.exit_code == 0, cli_text.output
            assert cli_text.output == text
            assert json.loads(run("explain", path, comp, "--format", "json").output) == data
        assert text.startswith(f"explain {comp}")
        assert data["target"] == comp
        assert data["facts"] == {f"components.{comp}.{f}": v for f, v in fields.items()}
        steps = {s["step"] for s in data["steps"]}
        # the chain starts at the steps that set the component and is closed under premise links
        assert {setter_step(plan, f) for f in data["facts"]} <= steps
        for s in data["steps"]:
            assert {p["step"] for p in s["premises"] if "step" in p} <= steps
            assert f"[{s['step']}] {s['rule']}" in text
            assert s["source"], s["rule"]
        for i in data["inputs"]:
            mark = "[given]" if i["given"] else "[default]"
            assert f"{i['fact']} = " in text and mark in text


def test_explain_gpu_reaches_inputs_catalog_sources_and_formulas(saved):
    path, plan = saved
    data = json.loads(run("explain", path, "gpu", "--format", "json").output)
    facts = {i["fact"]: i for i in data["inputs"]}
    assert facts["traffic.peak_qps"]["given"] is True
    assert facts["constraints.vendors"]["given"] is False  # not in the example: a default
    gpu = plan["components"]["gpu"]["model"]
    assert f"catalog:gpus/{gpu}" in data["catalog"]
    assert any(r.startswith("catalog:models/") for r in data["catalog"])
    text = run("explain", path, "gpu").output
    assert "“" in text and "source: G-" in text           # the guideline and its verbatim quote
    assert re.search(r"formula: .*\d.* = ", text)          # a formula with its numbers substituted
    assert "[given]" in text and "[default]" in text


def test_explain_field_and_sections(saved):
    path, plan = saved
    data = json.loads(run("explain", path, "cooling.type", "--format", "json").output)
    assert data["facts"] == {"components.cooling.type": plan["components"]["cooling"]["type"]}
    assert data["steps"][0]["step"] == setter_step(plan, "components.cooling.type")
    for target in ("cost", "performance", "cost.buy_or_rent"):
        assert run("explain", path, target).exit_code == 0


def test_explain_chinese(saved):
    path, _ = saved
    out = run("--lang", "zh", "explain", path, "cooling").output
    assert "推理链" in out and "理由" in out


def test_explain_unknown_component_and_bad_files(saved, tmp_path):
    path, _ = saved
    bad = run("explain", path, "gpus")
    assert bad.exit_code == 2
    assert len(bad.output.strip().splitlines()) == 1 and "did you mean gpu" in bad.output
    missing = run("explain", str(tmp_path / "nope.json"), "gpu")
    assert missing.exit_code == 2 and "no such plan file" in missing.output
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    broken = run("explain", str(tmp_path / "broken.json"), "gpu")
    assert broken.exit_code == 2 and "Traceback" not in broken.output
    (tmp_path / "other.json").write_text('{"a": 1}', encoding="utf-8")
    other = run("why-not", str(tmp_path / "other.json"), "L40S")
    assert other.exit_code == 2 and "not a servewise plan" in other.output


# ------------------------------------------------------------------------------------------ why-not

def rejected_gpus(plan):
    return sorted({r["option"].split(" | ")[0] for r in plan["rejected"] if r["kind"] == "candidate"})


def test_why_not_every_rejected_gpu(saved, in_process):
    path, plan = saved
    _, why_not = in_process
    gpus = rejected_gpus(plan)
    assert len(gpus) >= 10
    for n, gpu in enumerate(gpus):
        text, data = why_not(plan, gpu)
        if n == 0:  # the CLI prints the same
            cli_text = run("why-not", path, gpu)
            assert cli_text.exit_code == 0, cli_text.output
            assert cli_text.output == text
            assert json.loads(run("why-not", path, gpu, "--format", "json").output) == data
        assert text.startswith(f"why-not {gpu}:")
        mine = [r for r in plan["rejected"] if r["option"].split(" | ")[0] == gpu]
        listed = [e for g in data["groups"] for e in g["entries"]]
        assert sorted(e["option"] for e in listed) == sorted(r["option"] for r in mine)
        expected = "chosen" if gpu == plan["components"]["gpu"]["model"] else None
        assert data["status"] == expected if expected else data["status"] in ("rejected", "never-candidate")
        for g in data["groups"]:
            assert g["rule"] in text
        if data["status"] == "never-candidate":  # everything was excluded at proposal
            assert all(g["at_proposal"] for g in data["groups"])


def test_why_not_candidate_id_and_alias(saved):
    path, plan = saved
    option = next(r["option"] for r in plan["rejected"] if r["kind"] == "candidate")
    data = json.loads(run("why-not", path, option, "--format", "json").output)
    assert data["status"] == "rejected" and data["groups"][0]["entries"][0]["option"] == option
    # a catalog alias resolves to the catalog name (H200 → H200 SXM)
    if "H200 SXM" in rejected_gpus(plan):
        assert json.loads(run("why-not", path, "h200", "--format", "json").output)["resolved"] == "H200 SXM"


def test_why_not_infiniband_air_rent(saved):
    path, plan = saved
    ib = json.loads(run("why-not", path, "infiniband-ndr", "--format", "json").output)
    entries = [r for r in plan["rejected"] if r["option"] == "infiniband-ndr"]
    if entries:
        assert ib["status"] == "rejected" and ib["groups"][0]["rule"] == entries[0]["rule"]
        assert entries[0]["rule"] in run("why-not", path, "infiniband-ndr").output
    else:
        assert ib["status"] in ("chosen", "not-chosen")
    for option, fact in (("air", "components.cooling.type"), ("rent", "cost.buy_or_rent")):
        section, _, field = fact.rpartition(".")
        value = (plan["components"]["cooling"] if section.startswith("components") else plan["cost"])[field]
        data = json.loads(run("why-not", path, option, "--format", "json").output)
        assert data["status"] == ("chosen" if value == option else "not-chosen")
        assert data["field"] == fact and data["value"] == value
        assert data["decided_by"]["step"] == setter_step(plan, fact)
        text = run("why-not", path, option).output
        assert data["decided_by"]["rule"] in text and "“" in text


def test_why_not_a_warning_that_was_given_shows_its_conditions_and_inputs(saved):
    """Issue 39 item 6: why-not on a warning's rule id (also warning:<id>): given, with each
    condition and the values the firing read, and the inputs to give or change to avoid it — here
    the site's cooling and rack power, both defaulted."""
    path, plan = saved
    assert any(w["rule"] == "cooling.site-requirements" for w in plan["warnings"])
    for name in ("cooling.site-requirements", "warning:cooling.site-requirements"):
        data = json.loads(run("why-not", path, name, "--format", "json").output)
        assert data["status"] == "given" and data["rule"] == "cooling.site-requirements"
        assert all(c["holds"] for c in data["conditions"]) and len(data["conditions"]) >= 3
        inputs = {i["fact"]: i["given"] for i in data["inputs"]}
        assert inputs.get("constraints.cooling_available") is False and inputs.get("constraints.rack_power_kw") is False
    text = run("why-not", path, "cooling.site-requirements").output
    assert "given (the warning is in the plan)" in text and "✓ not site.described" in text
    assert "constraints.cooling_available = unknown   [default]" in text
    zh = run("--lang", "zh", "why-not", path, "cooling.site-requirements").output
    assert "已给出" in zh and "[默认值]" in zh


def test_why_not_a_warning_that_was_not_given_names_the_condition_that_failed(saved):
    """A warning the plan does not have: the recorded workload is planned again and its conditions
    are checked in order; the first that does not hold is the reason, with its values."""
    path, plan = saved
    assert not any(w["rule"] == "market.restricted-not-allowed" for w in plan["warnings"])
    data = json.loads(run("why-not", path, "market.restricted-not-allowed", "--format", "json").output)
    assert data["status"] == "not-given"
    last = data["conditions"][-1]
    assert last["holds"] is False and last["expression"] == "chosen.availability == 'restricted'"
    assert all(c["holds"] for c in data["conditions"][:-1])
    chosen = plan["components"]["gpu"]["model"]
    assert f"'{chosen}" in data["conditions"][1]["values"] or "!=" in data["conditions"][1]["values"]
    text = run("why-not", path, "market.restricted-not-allowed").output
    assert "Not given because this condition does not hold: chosen.availability ==" in text.replace("\n    ", " ")
    # a rule that is not a warning's stays a why-not error (exit 2)
    assert run("why-not", path, "cooling.air-below-4kw").exit_code == 2


def test_why_not_unknown_option(saved):
    path, _ = saved
    res = run("why-not", path, "H20O")
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "did you mean" in res.output and "H20" in res.output
    res = run("why-not", path, "quantum-annealer")
    assert res.exit_code == 2 and res.output.startswith("error:")


# -------------------------------------------------------------------------------------------- audit

def test_audit_identical(tmp_path):
    path = str(tmp_path / "fresh.json")  # planned just now: the knowledge base is the current one
    assert run("plan", CHAT, "--format", "json", "-o", path).exit_code == 0
    plan = json.loads((tmp_path / "fresh.json").read_text(encoding="utf-8"))
    res = run("audit", path)
    assert res.exit_code == 0, res.output
    assert "identical" in res.output and plan["knowledge_hash"] in res.output
    data = json.loads(run("audit", path, "--format", "json").output)
    assert data["identical"] is True and data["changes"] == []


EXTRA_RULE = textwrap.dedent("""\
    - id: audittest.force-liquid
      title: {en: Audit test forces liquid cooling, zh: 审计测试强制液冷}
      source: {guideline: G-COOL-003}
      stage: facilities
      salience: -100
      when: ["facility.server_draw_w > 0"]
      then:
        - choose: {component: cooling, set: {type: liquid}}
        - warn: {severity: info}
      because:
        en: "Audit test: liquid cooling at {facility.server_draw_w:.0f} W."
        zh: "审计测试：{facility.server_draw_w:.0f} W 使用液冷。"
      tests:
        - name: forces liquid
          facts: {facility.server_draw_w: 3000}
          expect: {values: {components.cooling.type: liquid}}
    """)


def test_audit_after_rule_change_shows_what_changed(saved, tmp_path):
    path, plan = saved
    (tmp_path / "extra.yaml").write_text(EXTRA_RULE, encoding="utf-8")
    res = run("--rules-dir", str(tmp_path), "audit", path)
    assert res.exit_code == 1, res.output
    assert "CHANGED" in res.output and plan["knowledge_hash"] in res.output and "→" in res.output
    before = plan["components"]["cooling"]["type"]
    assert f"components.cooling.type: {before} → liquid" in " ".join(res.output.split()) or before == "liquid"
    assert "audittest.force-liquid" in res.output
    data = json.loads(run("--rules-dir", str(tmp_path), "audit", path, "--format", "json").output)
    assert data["identical"] is False and data["old_knowledge_hash"] != data["new_knowledge_hash"]
    assert any(w["rule"] == "audittest.force-liquid" for w in data["warnings_added"])
    assert "audittest.force-liquid" in data["rules_added"]


# ------------------------------------------------------------------------------------------ reports

def test_markdown_report(saved, tmp_path):
    _, plan = saved
    out = tmp_path / "plan.md"
    assert run("plan", CHAT, "--format", "md", "-o", str(out)).exit_code == 0
    assert "```mermaid\nflowchart" in out.read_text(encoding="utf-8")
    from servewise.cli.render import to_markdown

    md = to_markdown(plan)  # the saved plan: rules edited meanwhile cannot make this check flaky
    assert "```mermaid\nflowchart" in md and "<details>" in md and "</details>" in md
    assert re.search(r"knowledge `sha256:[0-9a-f]{16}`", md) and plan["servewise_version"] in md
    assert "| `traffic.peak_qps` | 10 | given |" in md and "*default*" in md
    for gpu in rejected_gpus(plan):  # one summary row per rejected GPU model
        assert f"\n| {gpu} | " in md
    for s in plan["trace"]:
        assert f"### {s['step']}. `{s['rule']}`" in md


def html_report(tmp_path):
    out = tmp_path / "plan.html"
    res = run("plan", CHAT, "--format", "html", "-o", str(out))
    assert res.exit_code == 0, res.output
    return out


def test_html_report_is_self_contained(saved, tmp_path):
    _, plan = saved
    out = html_report(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["plan.html"]  # one file
    assert "<svg" in out.read_text(encoding="utf-8")
    from servewise.cli.render_html import to_html

    html = to_html(plan)
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    # nothing loaded from elsewhere (a source URL may appear as text, never as a resource)
    assert not re.search(r"""(src|href|xlink:href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert not re.search(r"""url\(\s*["']?\s*(https?:)?//""", html, re.I)
    assert not re.search(r"<script|<link|<img|<iframe|<object|<embed|@import|@font-face", html, re.I)
    assert "<svg" in html and "</svg>" in html and "mermaid" not in html
    for s in plan["trace"]:  # every step is a node of the graph, linked to its details
        assert f'<a href="#step-{s["step"]}">' in html and f'id="step-{s["step"]}"' in html
    assert re.search(r"knowledge <code>sha256:[0-9a-f]{16}</code>", html)


def test_html_graph_is_laid_out_by_stage_with_fan_outs_collapsed(saved):
    from servewise.cli.render_html import FAN_MAX, STAGE_COLOURS, consumers, layout, svg_graph

    _, plan = saved
    trace = plan["trace"]
    pos, _, _, _, bands = layout(trace)
    order = list(STAGE_COLOURS)
    assert [b[0] for b in bands] == sorted((b[0] for b in bands), key=order.index)
    for stage, top, bottom in bands:  # every step sits inside its own stage's band
        for s in trace:
            if s["stage"] == stage:
                assert top <= pos[s["step"]][1] <= bottom
    for s in trace:  # premises never sit below the step that uses them
        for p in s["premises"]:
            if p.get("step") in pos:
                assert pos[p["step"]][1] <= pos[s["step"]][1]
    svg = svg_graph(plan)
    users = consumers(trace)
    wide = [n for n, u in users.items() if len(u) > FAN_MAX]
    assert wide, "the example has a step used by many others"
    drawn = svg.count('marker-end="url(#arrow)"/>')
    expected = sum(1 for s in trace for p in dict.fromkeys(p.get("step") for p in s["premises"])
                   if p in users and len(users[p]) <= FAN_MAX) + len(wide)
    assert drawn == expected
    assert svg.count("used by ") == len(wide)


def test_html_renders_in_headless_chromium(tmp_path):
    from render_html_check import chromium, problems, render

    binary = chromium()
    if binary is None:
        pytest.skip("chromium is not installed")
    png, dom = render(html_report(tmp_path), tmp_path, binary)
    assert problems(png, dom) == []


def test_the_reports_graph_shows_the_gpu_chain_first_and_the_whole_chain_on_request(saved):
    """Issue 39 item 5: the explanation graph shows one component's chain by default (the GPU's,
    about twenty steps, readable at a glance); the whole graph stays one click away."""
    from servewise.cli.render import component_trace, to_markdown
    from servewise.cli.render_html import to_html

    _, plan = saved
    chain = component_trace(plan)
    assert 8 <= len(chain) < len(plan["trace"]) / 2
    assert chain[-1]["rule"] == "select.gpu-component"
    html = to_html(plan)
    first = html.split('<div class="graph">')[1].split("</svg>")[0]
    assert first.count('<a href="#step-') == len(chain)
    assert "<details><summary>The whole explanation graph" in html
    md = to_markdown(plan)
    graph = md.split("```mermaid")[1].split("```")[0]
    assert graph.count('["') == len(chain) and "The whole explanation graph" in md


def test_why_not_on_an_infeasible_plan_names_its_nearest_miss(example_plans, in_process):
    """An infeasible plan chose nothing: why-not says so (not 'the plan uses None') and shows the
    GPU's configuration that came closest, with the latencies one request would see."""
    _, why_not = in_process
    plan = example_plans["infeasible-target"].plan
    text, data = why_not(plan, "B200")
    assert data["status"] == "rejected" and "None" not in text.splitlines()[0]
    assert "the plan chose no configuration" in " ".join(text.split())
    assert "closest to being chosen: B200 | int4 | tp8" in " ".join(text.split())


def test_why_not_another_layout_of_a_several_model_plan(example_plans, in_process):
    """The layouts a several-model plan compared are alternatives an auditor can ask about:
    'packed on A30' and 'separate' name the chosen layout and every layout's cost per month,
    cheapest first, with the step that decided; the brief lists the next layouts first."""
    from servewise.cli.brief import alternatives

    _, why_not = in_process
    plan = example_plans["saas-five-tenants"].plan
    options = {o["option"]: o for o in plan["packing"]["options"]}
    chosen = f"packed on {plan['packing']['host_gpu']}"
    other = min((o for o in options.values() if o["option"] != chosen and o.get("feasible", True)),
                key=lambda o: o["monthly_cost_cny"])
    text, data = why_not(plan, other["option"].upper())
    assert data["status"] == "not-chosen" and data["kind"] == "packing" and data["chosen"] == chosen
    assert data["decided_by"]["rule"] == "pools.pack"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("- ")]
    monthly = [int(re.search(r": ([\d,]+) CNY/month", ln).group(1).replace(",", "")) for ln in lines]
    assert monthly == sorted(monthly) and len(lines) == len(options)
    assert lines[0].endswith("(chosen)") and lines[0].startswith(f"- {chosen}:")
    pct = 100 * (other["monthly_cost_cny"] - options[chosen]["monthly_cost_cny"]) / options[chosen]["monthly_cost_cny"]
    assert f"({pct:+.1f} %)" in lines[1]
    assert why_not(plan, "separate")[1]["status"] == "not-chosen"
    assert why_not(plan, chosen)[1]["status"] == "chosen"
    assert alternatives(plan, "en")[0][0] == other["option"]


def test_why_not_a_layout_names_the_layouts_and_refuses_a_tampered_one(example_plans, tmp_path):
    """An unknown layout name is a one-line error that suggests the layouts the plan compared; a
    plan whose layout has a host GPU that is not a name is refused by the plan schema (exit 2)."""
    plan = example_plans["saas-five-tenants"].plan
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    result = run("why-not", str(path), "packed on")
    assert result.exit_code == 2 and "did you mean packed on" in result.output
    bad = json.loads(json.dumps(plan))
    bad["packing"]["options"][1]["host_gpu"] = 5
    path.write_text(json.dumps(bad), encoding="utf-8")
    result = run("why-not", str(path), "separate")
    assert result.exit_code == 2 and "packing.options[1].host_gpu" in result.output
    assert len(result.output.strip().splitlines()) == 1
