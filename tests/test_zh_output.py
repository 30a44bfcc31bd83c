"""`--lang zh` plans read in Chinese (issue 39 item 7): every example's brief and full text plan
has no run of plain English words (tests/zh_check.py) beyond the documented exemptions below,
and the English views stay as they were (tests/snapshots, tests/test_brief_plan.py)."""

from __future__ import annotations

import re

import pytest
from zh_check import english_runs

from servewise.cli.brief import to_brief
from servewise.cli.i18n import value_text
from servewise.cli.render import component_line, to_markdown, to_text
from servewise.engine.common.messages import catalog

# Still English in Chinese output, by design or not yet translated (named so that a reader sees them):
# - product names that read like words ("Huawei Atlas 800 inference server (model 3000)");
# - the market warnings quote the availability catalog's dated `fact` (facts/catalog/availability.yaml,
#   46 English notes, not yet translated): lines of such a warning ("在 cn 市场：", "av-h20-cn): ...");
# - a bill-of-materials line's source column cites the price catalog's source note verbatim;
# - the md report's inputs table shows the workload's values as given (ids such as "nvidia, amd");
# - the md report's explanation chain (after "## 解释链") lists raw fact values and the rules'
#   `corrects:` notes, which the rule files have in English only.
EXEMPT = ("inference server (model 3000)",)
_MARKET = re.compile(r"在 \S+ 市场：|\bav-[\w.-]+\)?: ")
_SOURCE = re.compile(r"\b(mp|price|pr|av)-[\w.-]+ \(|estimate in servers\.yaml|seed:|^\| `")


def _untranslated(text: str) -> list[str]:
    text = text.split("## 解释链")[0]
    lines, skip = [], False
    for line in text.splitlines():
        if _MARKET.search(line):
            skip = True  # the warning's continuation lines quote the same fact
        elif not line.startswith("    "):
            skip = False
        if not skip and not _SOURCE.search(line):
            lines.append(line)
    return english_runs("\n".join(lines), EXEMPT)


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


@pytest.mark.parametrize("view", ["brief", "full", "md"])
def test_every_example_plan_reads_in_chinese(example_plans, view):
    failures = {}
    for name, ex in example_plans.items():
        text = (to_brief(ex.plan, "zh", 10_000) if view == "brief" else to_text(ex.plan, "zh") if view == "full"
                else to_markdown(ex.plan, "zh"))
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
    result = cli("--lang", "zh", "validate")
    assert result.exit_code == 0
    assert not english_runs(result.output), english_runs(result.output)[:3]
    assert "跳过：" in result.output and "绝对百分比误差" in result.output


def test_lint_and_kb_check_summaries_read_in_chinese(cli):
    """Their headings and summaries; a lint finding (file:line: rule-id: message, for rule authors
    and their tools) and the catalog's conflict notes and price details quoted by kb check stay as
    written."""
    lint = cli("--lang", "zh", "rules", "lint")
    assert lint.output.splitlines()[-1].startswith("通过：")
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
