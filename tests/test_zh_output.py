"""`--lang zh` plans read in Chinese (issue 39 item 7): every example's brief and full text plan
has no run of plain English words (tests/zh_check.py) beyond the documented exemptions below,
and the English views stay as they were (tests/snapshots, tests/test_brief_plan.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from zh_check import english_runs

from servewise.cli.brief import to_brief
from servewise.cli.i18n import value_text
from servewise.cli.render import component_line, to_markdown, to_text
from servewise.engine.common.messages import catalog

# Still English in Chinese output, by design (named so that a reader sees them):
# - product names that read like words ("Huawei Atlas 800 inference server (model 3000)");
# - the reports' inputs tables show the workload's values as given (ids such as "nvidia, amd");
# - code: the md report's `formulas` and expressions (string literals of rules included), and
#   what the CLI prints as code (launch commands, rule expressions; see tests/zh_check.py).
# The market warnings quote the availability facts in Chinese (availability.yaml fact_zh), a bill
# of materials' sources keep the cited id and note with Chinese words around them, and the
# explanation chain shows the rules' `corrects:` notes and the concluded values in Chinese.
EXEMPT = ("inference server (model 3000)",)
_INPUT_ROW = re.compile(r"^\| `[\w.]+` \|")
_CODE = re.compile(r"`[^`\n]*`")


def _untranslated(text: str) -> list[str]:
    lines = [_CODE.sub("", line) for line in text.splitlines() if not _INPUT_ROW.match(line)]
    return english_runs("\n".join(lines), EXEMPT)


def _html_text(doc: str) -> str:
    """The text a reader sees in an html report: no charts, styles or code; the inputs table out."""
    import html

    doc = re.sub(r"<(svg|style|script)\b.*?</\1>", "", doc, flags=re.S)
    doc = re.sub(r"<code>.*?</code>", "", doc, flags=re.S)
    doc = re.sub(r"<h2[^>]*>(输入)</h2>.*?</table>", "", doc, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", "\n", doc))


def test_the_check_finds_english_and_spares_names_ids_and_commands():
    assert english_runs("散热  direct liquid cooling with a CDU")
    assert not english_runs("服务器  8 × NVIDIA HGX H100 8-GPU；Dell PowerEdge XE9680")
    assert not english_runs("启动命令  vllm serve Qwen/Qwen2.5-72B --tensor-parallel-size 4")
    assert not english_runs("  ! 警告（cooling.air-as-shipped-above-6kw）")


def test_the_value_glossary_translates_whole_phrases_only():
    assert value_text("air", "zh") == "风冷" and value_text("air", "en") == "air"
    assert value_text("airflow", "zh") == "airflow"  # whole words only
    assert value_text("3 of 8 GPU slots fitted", "zh") == "8 个 GPU 插槽装 3 个"
    assert value_text("air", "zh", phrases_only=True) == "air"  # in explanations, short words may be ids
    for code, texts in catalog().items():
        if code.startswith("value."):
            assert texts["zh"] != texts["en"], code


def test_the_checks_see_what_used_to_slip_through():
    """The exemptions are gone: an English availability fact, a source's own words, a correction
    and a warning's English message in the chain fail the check."""
    assert _untranslated("  ! H200 NVL 在 cn 市场：limited (2026-01, av-h200-nvl-cn): covered by the case-by-case")
    assert _untranslated("6 × H200 NVL  175,000-320,000  mp-nvme-per-tb-cn (estimate), priced as enterprise NVMe")
    assert _untranslated("- 更正：G-STO-004 blames slow cold starts on IOPS; loading weights is a read")
    assert not _untranslated("- site.limit_label = 不限 — `'no limit: the site is not described yet'`")
    assert not _untranslated("| `constraints.vendors` | nvidia, amd, huawei | *默认* |")


@pytest.mark.parametrize("view", ["brief", "full", "md", "html"])
def test_every_example_plan_reads_in_chinese(example_plans, view):
    """Every view of every example, the md report's explanation chain and the html report's
    steps included (the facts concluded, the rules' corrections, the warnings they gave)."""
    from servewise.cli.render_html import to_html

    failures = {}
    for name, ex in example_plans.items():
        text = (to_brief(ex.plan, "zh", 10_000) if view == "brief" else to_text(ex.plan, "zh") if view == "full"
                else to_markdown(ex.plan, "zh") if view == "md" else _html_text(to_html(ex.plan, "zh")))
        bad = _untranslated(text)
        if bad:
            failures[name] = bad[:3]
    assert not failures, failures


def test_component_lines_differ_by_language_and_english_is_unchanged(example_plans):
    plan = example_plans["chat-70b-online"].plan
    gpu = plan["components"]["gpu"]
    en = component_line("gpu", gpu)
    assert en == component_line("gpu", gpu, "en")
    assert en.startswith(f"{gpu['count']} × {gpu['model']} ({gpu['precision']}), tensor parallel")
    zh = component_line("gpu", gpu, "zh")
    assert "张量并行" in zh and "tensor parallel" not in zh


ESTIMATES = [
    ["--model", "Llama-3.1-70B", "--gpu", "H200 NVL", "--tp", "2", "--precision", "fp8", "--isl", "1024",
     "--osl", "256", "--concurrency", "48"],
    ["--model", "Llama-3.1-70B", "--gpu", "H200 NVL", "--tp", "2", "--precision", "fp8", "--isl", "1024",
     "--osl", "256", "--concurrency", "48", "--request-rate", "30", "--ttft-target-ms", "1000"],
    ["--model", "DeepSeek-V3", "--gpu", "H200 SXM", "--tp", "8", "--precision", "fp8", "--isl", "1024",
     "--osl", "256", "--concurrency", "48", "--speculative-tokens", "1", "--arrival", "poisson"],
    ["--model", "bge-m3", "--gpu", "L20", "--tp", "1", "--precision", "bf16", "--isl", "512", "--task",
     "embedding", "--concurrency", "8"],
]


@pytest.mark.parametrize("args", ESTIMATES, ids=lambda a: a[1] + " " + a[-1])
def test_estimate_reads_in_chinese(cli, args):
    """Every line but the formula steps (identifiers and numbers); the performance model's English
    step notes are left out in Chinese, which says where to read them."""
    zh, en = cli("--lang", "zh", "estimate", *args), cli("estimate", *args)
    assert zh.exit_code == 0 and en.exit_code == 0
    assert not english_runs(zh.output), english_runs(zh.output)[:3]
    assert "计算过程：" in zh.output and "how:" in en.output


def test_validate_reads_in_chinese(cli):
    for args in ([], ["--rows"]):
        result = cli("--lang", "zh", "validate", *args)
        assert result.exit_code == 0
        assert not english_runs(result.output), english_runs(result.output)[:3]
        assert ("跳过：" in result.output) == bool(args) and "绝对百分比误差" in result.output


def test_lint_and_kb_check_summaries_read_in_chinese(cli):
    """Their headings and summaries, and the findings of the shipped rules (file:line: rule-id:
    message in Chinese); the catalog's conflict notes and price details quoted by kb check stay as
    written."""
    lint = cli("--lang", "zh", "rules", "lint")
    assert lint.output.splitlines()[-1].startswith("通过：")
    assert not english_runs(lint.output), english_runs(lint.output)  # the shipped rules' findings too
    kb = cli("--lang", "zh", "kb", "check")
    headings = [line for line in kb.output.splitlines() if line and not line.startswith(" ")]
    assert len(headings) >= 6 and not english_runs("\n".join(headings)), headings


def test_help_of_every_command_is_chinese_and_fits(cli):
    """Every command and option with an English help has a Chinese one (facts/messages/help.yaml)
    free of English sentences; click's own words are translated; Chinese lines fit 80 columns; English
    help comes back in the same process."""
    from servewise.cli.help_i18n import walk
    from servewise.cli.i18n import display_width
    from servewise.cli.main import _register_optional
    from servewise.cli.main import cli as root

    _register_optional()
    texts = catalog()
    missing = []
    for path, command in walk(root):
        key = "help." + (path.replace(" ", ".") or "servewise")
        if command.help and key not in texts:
            missing.append(key)
        missing += [f"{key}.{p.name}" for p in command.params
                    if getattr(p, "help", None) and p.name != "help" and f"{key}.{p.name}" not in texts]
        result = cli("--lang", "zh", *path.split(), "--help")
        assert result.exit_code == 0, path
        out = result.output
        assert "用法：" in out and "Usage:" not in out and "Show this message" not in out, path
        # (an option's list of choices is one word click does not break, in English too)
        assert all(display_width(line) <= 80 for line in out.splitlines() if not line.isascii()), path
        for name in [command.help] + [p.help for p in command.params if getattr(p, "help", None)]:
            assert not english_runs(name or ""), (path, name)
    assert not missing, missing
    english = cli("plan", "--help").output
    assert "Usage:" in english and "Show this message and exit." in english


def test_estimate_bad_input_is_reported_in_chinese(cli):
    args = ["estimate", "--model", "Llama-3.1-70B", "--gpu", "H200 NVL", "--tp", "1", "--precision", "fp8",
            "--isl", "1", "--concurrency", "1"]
    zh, en = cli("--lang", "zh", *args), cli(*args)
    assert zh.exit_code == en.exit_code == 2
    assert zh.output.startswith("错误：--osl：") and en.output.startswith("Error: --osl: required")


DISAGG = ["--model", "DeepSeek-R1", "--gpu", "GB200", "--tp", "8", "--ep", "8", "--precision", "fp4", "--isl", "1024",
          "--osl", "1024", "--concurrency", "48", "--backend", "trtllm", "--prefill-workers", "1", "--decode-workers",
          "4", "--prefill-tp", "4", "--prefill-ep", "4"]


@pytest.mark.parametrize("args", [DISAGG, DISAGG + ["--speculative-tokens", "1"],
                                  ["--model", "gpt-oss-120b", "--gpu", "H200 SXM", "--tp", "1", "--precision", "fp4",
                                   "--isl", "8192", "--osl", "256", "--concurrency", "8"]],
                         ids=["disaggregated", "disaggregated-mtp", "sliding-window"])
def test_estimate_steps_and_the_disaggregated_estimate_read_in_chinese(cli, args):
    """The formula steps' notes (the performance model writes them in English) and every line of
    a disaggregated estimate; the English text is unchanged (its notes in parentheses)."""
    zh, en = cli("--lang", "zh", "estimate", *args), cli("estimate", *args)
    assert zh.exit_code == 0 and en.exit_code == 0, zh.output
    assert not english_runs(zh.output), english_runs(zh.output)[:3]
    assert zh.output.count("（") >= 10 and "计算过程：" in zh.output
    assert "how:" in en.output and "      (" in en.output


def test_lint_findings_read_in_chinese(cli, tmp_path):
    """A rule author's findings: the file:line: rule-id: frame stays (tools parse it), the message
    is Chinese; English is exactly the finding's text."""
    rules = tmp_path / "mine"
    rules.mkdir()
    (rules / "mine.yaml").write_text("""\
- id: mine.checks
  title: {en: "A test rule", zh: "测试规则"}
  source: {guideline: [G-COOL-001]}
  stage: bom
  when: ["catalog('gpuz', 'x', 'y') != None", "chosen.nonexistent > 1"]
  then:
    - derive: {plan.feasible: "False"}
  let:
    note_en: "'x'"
  corrects: "An English-only correction."
  because: {en: "x {=1+2}", zh: "x"}
  tests:
    - name: a case
      facts: {chosen.bogus: 1}
      expect: {fires: true, values: {foo.bar: 1}}
- id: mine.schema
  title: {en: "Test rule 3"}
  stage: checks
  then:
    - warn: {}
  because: {en: "x", zh: "y"}
""", encoding="utf-8")
    zh, en = cli("--lang", "zh", "rules", "lint", str(rules)), cli("rules", "lint", str(rules))
    assert zh.exit_code == en.exit_code == 2
    assert "is a required property" in en.output and "缺少必需的属性" in zh.output
    (rules / "mine.yaml").write_text((rules / "mine.yaml").read_text().split("- id: mine.schema")[0])
    zh, en = cli("--lang", "zh", "rules", "lint", str(rules)), cli("rules", "lint", str(rules))
    findings = [line for line in zh.output.splitlines() if line.startswith(str(rules))]
    assert len(findings) >= 6 and len(findings) == len([x for x in en.output.splitlines() if x.startswith(str(rules))])
    messages = [f.split(": ", 2)[-1] for f in findings if "不是目录表" not in f]  # that one lists table ids
    assert not english_runs("\n".join(messages)), messages
    assert "unknown fact 'foo.bar'" in en.output and "未知的事实 'foo.bar'" in zh.output


def test_calibrate_reads_in_chinese(cli, tmp_path):
    bench = Path(__file__).parent / "fixtures" / "bench" / \
        "vllm-infqps-concurrency16-Llama-3.1-8B-Instruct-20250919-101530.json"
    args = ["calibrate", str(bench), "-o", str(tmp_path / "o.yaml"), "--gpu", "H100 SXM", "--tp", "1",
            "--precision", "fp8", "--backend", "vllm"]
    zh, en = cli("--lang", "zh", *args), cli(*args)
    assert zh.exit_code == en.exit_code == 0
    assert not english_runs(zh.output), zh.output
    assert "校准覆盖文件已写入" in zh.output and "median error" in en.output
    bad = cli("--lang", "zh", "calibrate", str(bench), "-o", str(tmp_path / "p.yaml"))
    assert bad.exit_code == 2 and "文件中没有给出（请用 --gpu 指定）" in bad.output


def test_explain_why_not_and_audit_read_in_chinese(cli, tmp_path, example_plans):
    """The auditor's commands on a plan: every explained warning and component, an alternative,
    and an audit that finds the knowledge changed (the formulas stay code)."""
    import json

    plan = example_plans["chat-70b-online"].plan
    path = tmp_path / "plan.json"
    path.write_text(example_plans["chat-70b-online"].json_text, encoding="utf-8")
    targets = [w["rule"] for w in plan["warnings"]] + ["gpu", "cooling", "cost", "servers"]
    bad = {}
    for target in targets:
        for mode in ("--brief", "--full"):
            out = cli("--lang", "zh", "explain", str(path), target, mode).output
            found = english_runs(_without_formulas(out))
            if found:
                bad[(target, mode)] = found[:2]
    for option in ("L40S", "air", "disaggregated", "cooling.site-requirements", "market.restricted-not-allowed"):
        out = cli("--lang", "zh", "why-not", str(path), option).output
        if english_runs(out):
            bad[("why-not", option)] = english_runs(out)[:2]
    assert not bad, bad
    changed = json.loads(example_plans["chat-70b-online"].json_text)
    changed["knowledge_hash"] = "sha256:0000000000000000"
    path.write_text(json.dumps(changed), encoding="utf-8")
    audit = cli("--lang", "zh", "audit", str(path))
    assert audit.exit_code == 1 and "已变化" in audit.output
    assert not english_runs(audit.output), english_runs(audit.output)[:3]


def _without_formulas(text: str) -> str:
    """explain --full without its formula lines (code: expressions with their string literals)."""
    out, skip = [], False
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("公式:") or stripped.startswith("公式："):
            skip, indent = True, len(line) - len(stripped)
            continue
        if skip and len(line) - len(line.lstrip()) > indent:
            continue
        skip = False
        out.append(line)
    return "\n".join(out)


def test_rules_show_reads_in_chinese(cli):
    """A rule's card: labels, correction, the verbs of its actions and its explanation in Chinese;
    expressions, fact names and the authors' test-case names stay as written."""
    out = cli("--lang", "zh", "rules", "show", "cooling.air-as-shipped-above-6kw").output
    lines = [line for line in out.splitlines()
             if not re.match(r"\s*(条件|绑定|测试)", line) and not line.startswith("        ")]
    assert not english_runs("\n".join(lines)), english_runs("\n".join(lines))
    assert "更正：G-COOL-003 的 > 6 kW" in out and "阶段 facilities" in out and "动作  选定 cooling：" in out


@pytest.mark.parametrize("args", [["estimate", "--model", "x"], ["plna"], ["plan", "--bogus", "x"],
                                  ["plan", "--format", "pdf", "x"], ["plan", "/nonexistent/w.yaml"]])
def test_usage_errors_read_in_chinese(cli, args):
    """click's own words of a usage error (its gettext messages, facts/messages/help.yaml) and a
    file that cannot be read; English unchanged."""
    zh, en = cli("--lang", "zh", *args), cli(*args)
    assert zh.exit_code == en.exit_code == 2
    assert "错误：" in zh.output and not english_runs(zh.output), zh.output
    assert "Error: " in en.output or "error: " in en.output


def test_kb_coverage_reads_in_chinese(cli):
    """The completeness verdicts: the status labels and the notes of the partly encoded guidelines
    (facts/coverage.yaml `missing`, translated in facts/messages/values.yaml)."""
    zh, en = cli("--lang", "zh", "kb", "coverage", "--format", "text"), cli("kb", "coverage", "--format", "text")
    assert zh.exit_code == en.exit_code == 0
    assert not english_runs(zh.output), english_runs(zh.output)[:3]
    assert "部分实现" in zh.output and "Partly encoded" in en.output


def test_the_fact_dictionary_reads_in_chinese(cli):
    """`rules facts`: every fact's type, first stage and writers in Chinese (names and ids as written)."""
    zh, en = cli("--lang", "zh", "rules", "facts"), cli("rules", "facts")
    assert zh.exit_code == en.exit_code == 0
    assert not english_runs(zh.output), english_runs(zh.output)[:3]
    assert "写入者：工作负载" in zh.output and "written by workload" in en.output
    assert len(zh.output.splitlines()) == len(en.output.splitlines())
