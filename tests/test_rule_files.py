"""Rule files are data: schema-checked, with file:line: rule-id: message errors and exit 2."""

from __future__ import annotations

import textwrap

import pytest

from servewise.engine.lang.rulebase import RuleLoadError, load_rules

GOOD = """\
- id: test.cooling-note
  title: {en: A note, zh: 备注}
  source: {guideline: G-COOL-001}
  stage: checks
  when: ["facility.server_draw_w > 0"]
  then:
    - warn: {severity: info}
  because: {en: "Draw {facility.server_draw_w:.0f} W.", zh: "功耗 {facility.server_draw_w:.0f} W。"}
"""


def write(tmp_path, text, name="extra.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


CASES = [
    ("unknown key", GOOD.replace("  stage: checks", "  stage: checks\n  priority: 3"),
     5, "test.cooling-note", "unknown key 'priority'"),
    ("missing because", GOOD.replace('  because: {en: "Draw {facility.server_draw_w:.0f} W.", zh: "功耗 {facility.server_draw_w:.0f} W。"}\n', ""),
     1, "test.cooling-note", "'because' is a required property"),
    ("bad stage", GOOD.replace("stage: checks", "stage: later"), 4, "test.cooling-note", "stage"),
    ("hostile expression", GOOD.replace('"facility.server_draw_w > 0"', "\"__import__('os')\""),
     1, "test.cooling-note", "unknown function '__import__'"),
    ("unknown guideline", GOOD.replace("G-COOL-001", "G-COOL-999"), 3, "test.cooling-note",
     "unknown guideline id 'G-COOL-999'"),
    ("wrong doc", GOOD.replace("{guideline: G-COOL-001}", "{doc: 001_a9389a2079b7d1d3.txt, guideline: G-COOL-001}"),
     3, "test.cooling-note", "is from 000_83eaec4bcde12e1d.txt"),
    ("yaml syntax", GOOD.replace("  then:\n", "  then: [\n"), 0, "-", "invalid YAML"),
    ("bad id", GOOD.replace("test.cooling-note", "Cooling Note"), 1, "Cooling Note", "id"),
    ("bad figure name", GOOD.replace("    - warn: {severity: info}", '    - reject: {option: x, figures: {Ratio: "1"}}'),
     7, "test.cooling-note", "unknown key 'Ratio'; a name must match ^[a-z][a-z0-9_]*$"),
]


@pytest.mark.parametrize("label,text,line,rule,message", CASES, ids=[c[0] for c in CASES])
def test_broken_rule_files_report_file_line_rule_message(tmp_path, label, text, line, rule, message):
    path = write(tmp_path, text)
    with pytest.raises(RuleLoadError) as info:
        load_rules([path], builtin=False)
    problem = info.value.problems[0]
    assert problem.file.endswith("extra.yaml")
    if line:
        assert problem.line == line
    assert problem.rule == rule
    assert message in problem.message
    assert str(problem).startswith(f"{problem.file}:{problem.line}: {rule}: ")


def test_duplicate_ids_are_reported(tmp_path):
    path = write(tmp_path, GOOD + GOOD.replace("A note", "Another"))
    with pytest.raises(RuleLoadError, match="duplicate rule id"):
        load_rules([path], builtin=False)


def test_lint_cli_exit_codes(tmp_path, cli):
    good = write(tmp_path, GOOD, "good.yaml")
    assert cli("rules", "lint", str(good)).exit_code == 0
    bad = write(tmp_path, GOOD.replace("stage: checks", "stage: later"), "bad.yaml")
    result = cli("rules", "lint", str(bad))
    assert result.exit_code == 2
    assert "bad.yaml:4: test.cooling-note: stage:" in result.output
    assert "Traceback" not in result.output


def test_builtin_rules_lint_clean(cli):
    result = cli("rules", "lint")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("ok: ")
    # stated, reasoned gaps only, and (#41, temporary) one line per file still to convert to logic once
    assert all(": warning: no firing case: " in line or " still to convert to one value per decision: " in line
               for line in lines[:-1]), lines


def test_broken_rules_dir_makes_plan_exit_2(tmp_path, cli):
    write(tmp_path, GOOD.replace("stage: checks", "stage: later"))
    result = cli("--rules-dir", str(tmp_path), "plan", "examples/chat-70b-online.yaml")
    assert result.exit_code == 2
    assert "extra.yaml:4: test.cooling-note:" in result.output
