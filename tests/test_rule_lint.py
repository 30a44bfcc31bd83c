"""The mistakes a new rule author makes (issue #12) each give `file:line: rule-id: message` and exit 2,
in `rules lint DIR` and when the folder is loaded with `--rules-dir`."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import EXAMPLES

RULE = """\
- id: my.rule
  title: {{en: t, zh: t}}
  source: {{url: https://example.com}}
  stage: {stage}
  when: [{when}]
  then:
    - {action}
  because: {{en: "{because}", zh: "{because}"}}
  tests:
    - name: fires
      facts: {{{facts}}}
      expect: {{fires: true}}
"""


def _rule(tmp_path, stage="checks", when='"model.total_params_b > 100"', action="warn: {severity: info}",
          because="big", facts="model.total_params_b: 405", extra=""):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "my.yaml").write_text(RULE.format(stage=stage, when=when, action=action, because=because,
                                           facts=facts) + extra, encoding="utf-8")
    return d


CASES = {
    "misspelled fact": (dict(when='"model.total_param_b > 100"'),
                        "5: my.rule: unknown fact 'model.total_param_b'; did you mean 'model.total_params_b'?"),
    "read before its stage": (dict(stage="derivations", when='"chosen.precision == \'fp8\'"'),
                              "'chosen.precision' is first set in stage selection; this rule runs in derivations"),
    "typo in a test case": (dict(facts="model.total_param_b: 405"),
                            "11: my.rule: test 'fires': unknown fact 'model.total_param_b'; did you mean"),
    "broken placeholder": (dict(because="{model.params:.0f} B parameters"),
                           "8: my.rule: unknown fact 'model.params'"),
    "gpu count 0": (dict(action="choose: {component: gpu, set: {count: 0}}"),
                    "components.gpu.count = 0: 0 is less than the minimum of 1"),
    "writes plan.feasible": (dict(action="derive: {plan.feasible: 'True'}"),
                             "'plan.feasible' is a protected output"),
    "NaN": (dict(action="derive: {my.x: \"float('nan')\"}"), "result is not a number (NaN)"),
    "complex": (dict(action="derive: {my.x: \"(-8) ** 0.5\"}"), "complex result"),
    "catalog path": (dict(action="derive: {my.x: \"catalog('../../etc/passwd', 'a', 'b')\"}"),
                     "catalog(): '../../etc/passwd' is not a catalog table"),
    "format width": (dict(because="{traffic.peak_qps:999999999}"),
                     "format width 999999999 in '{traffic.peak_qps:999999999}' is larger than 64"),
    "round digits": (dict(action="derive: {my.x: 'round(1, -1000000000)'}"),
                     "round(): digits must be between -15 and 15"),
    "computing template": (dict(because="{=model.total_params_b * 2}"), None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_mistake_is_reported(cli, tmp_path, name):
    kwargs, message = CASES[name]
    d = _rule(tmp_path, **kwargs)
    result = cli("rules", "lint", str(d))
    if message is None:  # third-party `{=…}`: a warning, not an error
        assert result.exit_code == 0, result.output
        assert "warning: because.en computes" in result.output
        return
    assert result.exit_code == 2, result.output
    assert f"{d / 'my.yaml'}:" in result.output and message in result.output, result.output
    assert ": my.rule: " in result.output
    planned = cli("--rules-dir", str(d), "plan", str(EXAMPLES / "chat-8b-small.yaml"))
    assert planned.exit_code == 2 and message in planned.output


def test_alias_shadowing_a_shipped_rule(cli, tmp_path):
    d = _rule(tmp_path)
    text = (d / "my.yaml").read_text().replace("- id: my.rule\n", "- id: my.rule\n  aliases: [cpu.cores-needed]\n")
    (d / "my.yaml").write_text(text)
    result = cli("rules", "lint", str(d))
    assert result.exit_code == 2
    assert "my.rule: alias 'cpu.cores-needed' shadows the shipped rule cpu.cores-needed" in result.output


def test_clean_rule_passes_and_formats(cli, tmp_path):
    d = _rule(tmp_path)
    assert cli("rules", "lint", str(d)).exit_code == 0
    bad = _rule(tmp_path / "b", when='"model.total_param_b > 100"') if (tmp_path / "b").mkdir() is None else None
    out = cli("rules", "lint", str(bad), "--format", "json")
    assert out.exit_code == 2
    findings = json.loads(out.output)
    assert findings[0]["rule"] == "my.rule" and findings[0]["line"] == 5 and findings[0]["code"] == "unknown-name"
    sarif = json.loads(cli("rules", "lint", str(bad), "--format", "sarif").output)
    result = sarif["runs"][0]["results"][0]
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 5


def test_shipped_rules_are_clean_and_compute_nothing_in_templates(cli):
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.lang.rulelint import lint

    rb = load_rules()
    assert [str(f) for f in lint(rb) if f.severity == "error"] == []
    assert not [r.id for r in rb.rules for t in r.because.values() if t.exprs]


def test_k_matching_nothing_exits_2(cli):
    result = cli("rules", "test", "-k", "no-such-rule-id")
    assert result.exit_code == 2


def test_failing_case_says_why_the_rule_did_not_fire(cli, tmp_path):
    d = _rule(tmp_path, when='"model.total_params_b > 100", "mode == \'offline\'"',
              facts="model.total_params_b: 405, mode: online")
    result = cli("rules", "test", str(d))
    assert result.exit_code == 1
    out = result.output
    assert "why it did not fire" in out
    assert "when[0] model.total_params_b > 100  →  405 > 100  =  yes" in out
    assert "when[1] mode == 'offline'  →  'online' == 'offline'  =  no  ← first false" in out


def test_unknown_catalog_table_fails_at_run_time_too():
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.functions import FUNCTIONS, RunContext, reset_context, use_context

    token = use_context(RunContext(load_catalog()))
    try:
        with pytest.raises(ValueError, match="unknown catalog table"):
            FUNCTIONS["catalog"]("../../etc/passwd", "x", "y")
    finally:
        reset_context(token)


def test_let_bindings_and_records(tmp_path, cli):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "my.yaml").write_text(textwrap.dedent("""\
        - id: my.let
          title: {en: t, zh: t}
          source: {url: https://example.com}
          stage: checks
          let:
            big: "model.total_params_b * 2"
            p: "perf(model.id, 'H100 SXM', 1, 1, 'bf16', 1000, 200, 4)"
          when: ["big > 10"]
          then:
            - derive: {my.double: "big", my.ttft: "p.ttft_ms"}
          because: {en: "double {big:.0f}, TTFT {p.ttft_ms:.0f} ms", zh: "两倍 {big:.0f}"}
          tests:
            - name: fires
              facts: {model.total_params_b: 8, model.id: Llama-3.1-8B}
              expect: {values: {my.double: 16}}
            - name: does not fire
              facts: {model.total_params_b: 4, model.id: Llama-3.1-8B}
              expect: {fires: false}
        """), encoding="utf-8")
    result = cli("rules", "test", str(d), "-v")
    assert result.exit_code == 0, result.output
    assert "2 passed" in result.output


def test_says_checks_the_explanation(cli, tmp_path):
    d = _rule(tmp_path, because="{model.total_params_b:.0f} B is big")
    text = (d / "my.yaml").read_text().replace("expect: {fires: true}", "expect: {fires: true, says: [405 B]}")
    (d / "my.yaml").write_text(text)
    assert cli("rules", "test", str(d)).exit_code == 0
    (d / "my.yaml").write_text(text.replace("[405 B]", "[406 B]"))
    result = cli("rules", "test", str(d))
    assert result.exit_code == 1
    assert "expected the explanation to say '406 B'; it says: 405 B is big" in result.output


def test_coverage_lists_rules_without_biting_cases(cli, tmp_path):
    d = _rule(tmp_path)
    out = cli("rules", "test", str(d), "--coverage").output
    assert "my.rule: no case where it fires with a checked result" in out
    assert "and no case where it must not fire" in out


def test_constant_compute_is_checked_like_a_literal(cli, tmp_path):
    d = _rule(tmp_path, action="choose: {component: gpu, compute: {count: '1 - 1'}}")
    result = cli("rules", "lint", str(d))
    assert result.exit_code == 2 and "components.gpu.count = 0: 0 is less than the minimum of 1" in result.output



def test_every_built_in_rule_lives_where_its_stage_and_id_say(rulebase):
    """#41: `rules/<stage>/<file>.yaml` holds the ids `<file>.…` of rules of that stage; `rules lint
    --style` reports none out of place (renamed ids keep their old ones in `aliases:`)."""
    from servewise.engine.lang.rulelint import lint

    misplaced = [str(f) for f in lint(rulebase) if f.code == "layout"]
    assert not misplaced, misplaced
    aliased = {a: r.id for r in rulebase.rules for a in r.aliases}
    assert aliased["check.over-budget"] == "plan.over-budget"
    assert aliased["cost.claim-liquid-cooling-saving"] == "claims.liquid-cooling-saving"
