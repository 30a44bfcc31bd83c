"""Tests that bite (issue #12 item 4): every shipped rule has a case where it fires with its concrete
result checked and a case where it must not fire; a missing one is a lint error for shipped rules and
a warning for a `--rules-dir` folder."""

from __future__ import annotations

import dataclasses
import textwrap

from servewise.engine.app.ruletest import case_coverage
from servewise.engine.lang.rulebase import RuleBase, load_rules
from servewise.engine.lang.rulelint import coverage_gaps, lint

RULE = """\
- id: my.hot
  title: {{en: t, zh: t}}
  source: {{url: https://example.com}}
  stage: checks
  constants:
    limit_c: {{value: 35, source: "https://example.com"}}
  let:
    margin_c: "edge.ambient_max_c - limit_c"
  when: ["edge.ambient_max_c != None", "edge.ambient_max_c > limit_c"]
  then:
    - warn: {{severity: warning}}
  because: {{en: "{{margin_c:.0f}} °C above the limit", zh: "超出 {{margin_c:.0f}} °C"}}
  tests:
{cases}
"""
FIRES_BARE = "    - {name: hot, facts: {edge.ambient_max_c: 40}, expect: {warns: true}}"
FIRES_SAYS = "    - {name: hot, facts: {edge.ambient_max_c: 40}, expect: {warns: true, says: [5 °C above]}}"
NOT_FIRES = "    - {name: cool, facts: {edge.ambient_max_c: 35}, expect: {fires: false}}"


def _folder(tmp_path, *cases: str):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "my.yaml").write_text(RULE.format(cases="\n".join(cases)), encoding="utf-8")
    return d


def test_every_shipped_rule_has_biting_cases():
    gaps = case_coverage(load_rules().rules)
    listing = "\n".join(f"{s.file}:{s.line}: {s.id}: no case {' and no case '.join(m)}" for s, m in gaps)
    assert not gaps, "shipped rules whose tests cannot fail enough (see docs/rule-authoring.md, Tests):\n" + listing


def test_shipped_rule_without_biting_cases_is_a_lint_error():
    rb = load_rules()
    spec = next(s for s in rb.rules if s.id == "cooling.site-cannot-cool")
    bare = [{"name": "bare", "facts": spec.tests[0]["facts"], "expect": {"warns": True}}]
    weak = dataclasses.replace(spec, tests=bare)
    findings = [f for f in lint(RuleBase([weak], rb.files, rb.knowledge_hash)) if f.code == "test-coverage"]
    assert [(f.rule, f.severity) for f in findings] == [("cooling.site-cannot-cool", "error")]
    assert "no test case where it fires with a checked result" in findings[0].message
    assert "and no case where it must not fire" in findings[0].message


def test_rules_dir_without_biting_cases_is_a_warning(cli, tmp_path):
    d = _folder(tmp_path, FIRES_BARE)
    result = cli("rules", "lint", str(d))
    assert result.exit_code == 0, result.output
    assert (f"{d / 'my.yaml'}:13: my.hot: warning: no test case where it fires with a checked result"
            in result.output), result.output
    tested = cli("rules", "test", str(d))
    assert tested.exit_code == 0 and "my.hot: warning: no case where it fires with a checked result" in tested.output


def test_biting_cases_satisfy_lint_and_test(cli, tmp_path):
    d = _folder(tmp_path, FIRES_SAYS, NOT_FIRES)
    result = cli("rules", "lint", str(d))
    assert result.exit_code == 0 and "warning" not in result.output, result.output
    tested = cli("rules", "test", str(d), "--coverage")
    assert tested.exit_code == 0, tested.output
    assert "1 of 1 rules have both" in tested.output and "2 passed, 0 failed" in tested.output


def test_a_must_not_fire_case_catches_a_rule_that_fires_too_often(cli, tmp_path):
    d = _folder(tmp_path, FIRES_SAYS, NOT_FIRES)
    text = (d / "my.yaml").read_text().replace('"edge.ambient_max_c > limit_c"', '"edge.ambient_max_c >= limit_c"')
    (d / "my.yaml").write_text(text)
    result = cli("rules", "test", str(d))
    assert result.exit_code == 1
    assert "my.hot: cool: expected the rule not to fire, it fired (it said: 0 °C above the limit)" in result.output


def test_a_wrong_result_fails_even_though_the_rule_fires(cli, tmp_path):
    d = _folder(tmp_path, FIRES_SAYS.replace("5 °C above", "6 °C above"), NOT_FIRES)
    result = cli("rules", "test", str(d))
    assert result.exit_code == 1
    assert "expected the explanation to say '6 °C above'; it says: 5 °C above the limit" in result.output


def test_rules_test_takes_paths_and_k(cli, tmp_path):
    d = _folder(tmp_path, FIRES_SAYS, NOT_FIRES)
    assert "2 passed" in cli("rules", "test", str(d / "my.yaml")).output
    assert cli("rules", "test", str(d), "-k", "my.hot").exit_code == 0
    nothing = cli("rules", "test", str(d), "-k", "no-such-rule")
    assert nothing.exit_code == 2 and "no rule matches -k no-such-rule" in nothing.output


def test_asks_checks_the_question(cli, tmp_path):
    d = tmp_path / "ask"
    d.mkdir()
    (d / "ask.yaml").write_text(textwrap.dedent("""\
        - id: my.ask
          title: {en: t, zh: t}
          source: {url: https://example.com}
          stage: inputs
          when: ["not provided('mode')"]
          then:
            - ask: {input: mode}
          because: {en: "assumes {mode}", zh: "按 {mode}"}
          tests:
            - {name: asks, facts: {mode: online}, expect: {asks: [traffic.peak_qps]}}
        """), encoding="utf-8")
    result = cli("rules", "test", str(d))
    assert result.exit_code == 1
    assert "expected the rule to ask for 'traffic.peak_qps'; it asked for ['mode']" in result.output


def test_a_rule_without_conditions_needs_no_must_not_fire_case():
    spec = next(s for s in load_rules().rules if not s.when)
    assert coverage_gaps(spec) == []


def _tool(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_negative_case_tool_falsifies_one_condition():
    tool = _tool("add_negative_cases")
    assert tool.falsifier("chosen.tp > 1") == {"chosen.tp": 1}
    assert tool.falsifier("x.cores < x.needed", {"x.needed": 64}) == {"x.cores": 64}
    assert tool.falsifier("not constraints.multi_tenant") == {"constraints.multi_tenant": True}
    assert tool.falsifier("sla.availability < 99.9 or mode == 'offline'") == {
        "sla.availability": 99.9, "mode": tool._other("mode", ["offline"])}
    assert tool.falsifier("f(x) > 1") is None
    assert tool.is_guard("mode != 'edge'") and tool.is_guard("chosen.id != None") and not tool.is_guard("x > 4")
