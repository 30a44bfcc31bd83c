"""Regression tests for issue #42 (hardening, second round): item 2, bounded work (a small rule file
cannot make the rule language build a huge list or text; wrapping and trace rendering are linear),
and the terminal part of item 7 (control characters from a plan file never reach the terminal raw)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT

from servewise.cli.main import cli as group
from servewise.engine.lang.expr import MAX_ITEMS, MAX_TEXT, EvalError, compile_expr

QUICK = str(EXAMPLES / "deepseek-r1-h20.yaml")


def invoke(*args: str):
    return CliRunner().invoke(group, list(args))


# ------------------------------------------------------------------ 2. bounded work: the rule language

RULE = """\
- id: bounded.{name}{i}
  title: {{en: t, zh: t}}
  source: {{guideline: G-COOL-001}}
  stage: derivations
  when: ["{prev} != None"]
  then:
    - derive:
        bounded.v{i}: "{expr}"
  because: {{en: x, zh: x}}
"""
PROPOSE = """\
- id: bounded.propose0
  title: {en: t, zh: t}
  source: {guideline: G-COOL-001}
  stage: candidates
  when: ["model.id != None"]
  then:
    - propose:
        kind: boundeditem
        over: {OVER}
        id: "a"
        attrs: {x: "a"}
  because: {en: x, zh: x}
"""


def chain(name: str, first: str, step: str, rules: int) -> str:
    """``rules`` rules, each deriving ``bounded.v<i>`` from the previous one with ``step`` ({a})."""
    out = [RULE.format(name=name, i=0, prev="model.id", expr=first)]
    for i in range(1, rules):
        a = f"bounded.v{i - 1}"
        out.append(RULE.format(name=name, i=i, prev=a, expr=step.format(a=a)))
    return "".join(out)


EIGHT = ", ".join(["{a}"] * 8)
GPUS = "catalog_ids('gpus')"  # about 40 ids
# Each folder is one small rule file that, without the limits, builds gigabytes (the last rule of
# each chain: joined 15x, sum and nesting 8x per rule; propose 40^5 combinations)
HUGE = {
    "joined": chain("joined", "text(model.id) + '" + "y" * 150 + "'", f"joined([{EIGHT}], {{a}})", 8),
    "sum": chain("sum", GPUS, f"sum([{EIGHT}], [])", 8),
    "nested": chain("nested", GPUS, f"[{EIGHT}]", 8) + RULE.format(
        name="nested", i=8, prev="bounded.v7", expr="len(text(bounded.v7))"),
    "propose": PROPOSE.replace("{OVER}", "{" + ", ".join(f'{v}: "{GPUS}"' for v in "abcde") + "}"),
    "repetition": RULE.format(name="repetition", i=0, prev="model.id", expr="[model.id] * 100000000"),
}
# The same operations just past the limits (without them: a few MB, planned in a second)
PAST = {
    "joined": chain("joined", "text(model.id) + '" + "y" * 150 + "'", f"joined([{EIGHT}], {{a}})", 3)
    + RULE.format(name="joined", i=3, prev="bounded.v2", expr=f"joined({GPUS}, bounded.v2)"),
    "sum": chain("sum", GPUS, f"sum([{EIGHT}], [])", 4),
    "nested": chain("nested", GPUS, f"[{EIGHT}]", 4),
    "repetition": RULE.format(name="repetition", i=0, prev="model.id", expr="text(model.id) * 1000000"),
}


def rule_folder(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "bounded.yaml").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.parametrize("op", sorted(PAST))
def test_rule_operations_stop_at_the_size_limits(tmp_path, op):
    folder = rule_folder(tmp_path, PAST[op])
    res = invoke("--rules-dir", str(folder), "plan", QUICK)
    assert res.exit_code == 2, res.output[-2000:]
    assert f"{folder / 'bounded.yaml'}:" in res.output and f"bounded.{op}" in res.output, res.output
    assert "limit" in res.output or "arithmetic on text or lists" in res.output, res.output


def test_propose_counts_its_combinations_before_making_them(tmp_path, monkeypatch):
    import itertools
    import math

    made = []  # the number of combinations of every product built while planning
    real = itertools.product
    monkeypatch.setattr(itertools, "product",
                        lambda *lists: made.append(math.prod(map(len, lists))) or real(*lists))
    from servewise.engine.domain.catalog import load_catalog

    over = "{" + ", ".join(f'{v}: "{GPUS}"' for v in "abc") + "}"  # (catalog GPUs)³ ≈ 70,000 combinations
    combos = len(list(load_catalog().table("gpus"))) ** 3
    folder = rule_folder(tmp_path, PROPOSE.replace("{OVER}", over))
    res = invoke("--rules-dir", str(folder), "plan", QUICK)
    assert res.exit_code == 2 and "bounded.yaml:1: bounded.propose0" in res.output, res.output
    assert f"propose would create {combos} items (limit 20000)" in res.output
    assert made and max(made) <= 20_000  # the built-in rules' proposals only: not the cube of the catalog


def test_sum_joined_and_lists_check_the_size_before_building():
    from servewise.engine.domain.functions import FUNCTIONS

    big = [[1] * (MAX_ITEMS // 2 + 1)] * 2  # an input value (not built by the rules)
    with pytest.raises(EvalError, match=f"sum\\(\\) would hold {MAX_ITEMS + 2} items \\(limit {MAX_ITEMS}\\)"):
        compile_expr("sum(x, [])").evaluate_with({"x": big})
    assert compile_expr("sum(x, [])").evaluate_with({"x": [[1, 2], [3]]}) == [1, 2, 3]
    assert compile_expr("sum(x)").evaluate_with({"x": [1, 2.5]}) == 3.5
    with pytest.raises(EvalError, match="limit"):
        compile_expr("[x, x, x]").evaluate_with({"x": list(range(MAX_ITEMS // 2))})
    joined = compile_expr("joined(xs, sep)", FUNCTIONS)
    with pytest.raises(EvalError, match=f"joined\\(\\) would be {9 * (MAX_TEXT // 8)} characters long"):
        joined.evaluate_with({"xs": ["a"] * 10, "sep": "-" * (MAX_TEXT // 8)})
    assert joined.evaluate_with({"xs": ["a", "b"], "sep": "-"}) == "a-b"
    with pytest.raises(EvalError, match="limit"):
        compile_expr("text(x)", FUNCTIONS).evaluate_with({"x": ["y" * 100] * (MAX_ITEMS // 2)})


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(HUGE))
def test_a_small_rule_file_cannot_exhaust_memory(tmp_path, op):
    """The 1-3 kB rule files of the probe, in a process limited to 1 GiB of address space."""
    folder = rule_folder(tmp_path, HUGE[op])
    assert len(HUGE[op]) < 3000
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))"
    code = f"{limit}; import sys; from servewise.cli.main import run; sys.exit(run(sys.argv[1:]))"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, "--rules-dir", str(folder), "plan", QUICK],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "bounded.yaml:" in proc.stderr and f"bounded.{op}" in proc.stderr, proc.stderr
    assert time.perf_counter() - start < 10


# ---------------------------------------------------------------- 2. bounded work: text and traces

def test_wrapping_a_long_field_is_linear():
    from servewise.cli.wrap import wrap

    for text in ("  x " + "y" * 100_000 + "\n", "  x " + "word " * 20_000 + "\n",
                 "  x 中" + "。" * 100_000 + "\n", "  x " + "中" * 100_000 + "\n"):
        start = time.perf_counter()
        out = wrap(text, 80)
        assert time.perf_counter() - start < 0.5
        assert "".join(text.split()) == "".join(out.split())


def test_wrapping_a_line_led_by_more_spaces_than_fit_ends():
    """It used to loop for ever (and grow without bound): the continuation indent left no room."""
    code = "from servewise.cli.wrap import wrap_line; print(len(wrap_line(' ' * 100 + 'a ' * 100, 80)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=20)
    assert proc.returncode == 0 and int(proc.stdout) < 10, proc.stderr


def long_trace(plan: dict, n: int) -> dict:
    """``plan`` behind a chain of ``n`` synthetic steps: every step of the plan's own trace also
    rests on the last of them, so that any explanation walks all of them."""
    plan = copy.deepcopy(plan)
    chain_steps = [{"step": i, "rule": "synthetic.chain", "stage": "derivations", "source": {},
                    "because": f"link {i}", "conclusions": [{"fact": f"chain.x{i}", "value": i}],
                    "premises": [{"fact": f"chain.x{i - 1}", "value": i - 1, "step": i - 1}] if i > 1 else []}
                   for i in range(1, n + 1)]
    for s in plan["trace"]:
        s["step"] += n
        for p in s["premises"]:
            if "step" in p:
                p["step"] += n
        s["premises"].append({"fact": f"chain.x{n}", "value": n, "step": n})
    plan["trace"] = chain_steps + plan["trace"]
    return plan


def test_a_44k_step_trace_explains_in_linear_time(example_plans):
    from servewise.cli.cmd_audit import BRIEF_LINES, render_explain, render_explain_brief
    from servewise.cli.wrap import wrap
    from servewise.engine.app import explain as ex

    plan = long_trace(example_plans["deepseek-r1-h20"].plan, 44_000)
    start = time.perf_counter()
    result = ex.explain(plan, "gpu")
    text = wrap(render_explain(result, plan, "en"), 80)
    brief = render_explain_brief(result, plan, "en", 80)
    assert time.perf_counter() - start < 8
    assert len(result["steps"]) > 44_000 and "[1] synthetic.chain" in text and "[44000] synthetic.chain" in text
    assert brief.count("\n") <= BRIEF_LINES and "earlier steps" in brief


# ------------------------------------------------------------ 7. no control character reaches a terminal

PWNED = "\x1b]0;pwned\x07 \x1b[2J\x9b31m\r"
SHOWN = "\\x1b]0;pwned\\x07 \\x1b[2J\\x9b31m\\x0d"


@pytest.fixture
def tampered(tmp_path, example_plans):
    """deepseek-r1-h20's plan with escape sequences in its GPU's model, the reasons of the steps
    concluding it and of a rejection."""
    plan = json.loads(example_plans["deepseek-r1-h20"].json_text)
    plan["components"]["gpu"]["model"] += PWNED
    for s in plan["trace"]:
        if any(c["fact"].startswith("components.gpu.") for c in s["conclusions"]):
            s["because"] = s.setdefault("because_i18n", {})["en"] = "chosen " + PWNED
        for c in s["conclusions"]:  # edited consistently: the trace agrees (else the file is refused)
            if c["fact"] == "components.gpu.model":
                c["value"] = plan["components"]["gpu"]["model"]
    rejected = plan["rejected"][0]
    rejected["because"] = "too slow " + PWNED
    rejected["because_i18n"] = {"en": "too slow " + PWNED, "zh": "太慢 " + PWNED}
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(plan), encoding="utf-8")
    return path, rejected["option"]


def assert_neutralised(text: str) -> None:
    assert SHOWN in text, text[-3000:]
    assert not any(c in text for c in "\x1b\x07\x9b\r"), [c for c in text if ord(c) < 32 and c not in "\n\t"]


def test_explain_and_why_not_show_control_characters_as_escapes(tampered):
    path, option = tampered
    for mode in ("--full", "--brief"):
        res = invoke("explain", str(path), "gpu", mode)
        assert res.exit_code == 0, res.output
        assert_neutralised(res.output)
    res = invoke("why-not", str(path), option)
    assert res.exit_code == 0, res.output
    assert_neutralised(res.output)
    res = invoke("explain", str(path), "gpu", "--format", "json")  # JSON escapes them itself
    assert "\x1b" not in res.output and "\\u001b]0;pwned" in res.output


def test_audit_text_shows_control_characters_as_escapes():
    from servewise.cli.cmd_audit import render_audit
    from servewise.engine.common.text import terminal_safe

    report = {"identical": False, "status": "edited", "old_knowledge_hash": "h", "new_knowledge_hash": "h",
              "changes": [{"path": "components.gpu.model", "old": "H20" + PWNED, "new": "H20"}],
              "warnings_added": [], "warnings_removed": [{"rule": "r", "severity": "info", "message": PWNED}],
              "rejected_added": [], "rejected_removed": [], "rules_added": [], "rules_removed": [],
              "trace_changed": True}
    assert_neutralised(render_audit(report, "en"))
    assert terminal_safe("a\tb\nc 中文 ✓") == "a\tb\nc 中文 ✓"
    assert terminal_safe("".join(map(chr, range(32)))) == "".join(
        c if c in "\t\n" else f"\\x{ord(c):02x}" for c in map(chr, range(32)))
