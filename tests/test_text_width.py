"""No line of a command's text output is wider than the terminal (80 columns when not one):
issue 39 item 4. Wrapped, never cut; JSON untouched."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

from servewise.cli.i18n import display_width
from servewise.cli.main import cli

HANG = 0  # closing CJK punctuation never hangs past the edge: it takes the character before it down
COMMANDS = [
    ["estimate", "--model", "Llama-3.1-70B", "--gpu", "H200 NVL", "--tp", "2", "--precision", "fp8",
     "--isl", "1024", "--osl", "256", "--concurrency", "48"],
    ["estimate", "--model", "bge-m3", "--gpu", "L20", "--tp", "1", "--precision", "bf16", "--isl", "512",
     "--task", "embedding", "--concurrency", "8"],
    ["validate"],
    ["validate", "--rows"],
    ["rules", "facts"],
    ["rules", "show", "select.performance"],
    ["plan", str(EXAMPLES / "chat-70b-online.yaml")],
    ["plan", str(EXAMPLES / "chat-70b-online.yaml"), "--full"],
]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_text_output_fits_80_columns(args, lang):
    res = CliRunner().invoke(cli, ["--lang", lang, *args])
    assert res.exit_code == 0, res.output[-500:]
    widest = max(display_width(line) for line in res.output.splitlines())
    assert widest <= 80 + HANG, (args, widest)


def test_json_is_not_wrapped():
    res = CliRunner().invoke(cli, ["rules", "facts", "--format", "json"])
    assert res.exit_code == 0
    assert isinstance(json.loads(res.output), list)


def test_lint_lines_stay_whole_for_tools_in_a_pipe():
    """The linter's file:line: rule: message lines are wrapped on a terminal only."""
    res = CliRunner().invoke(cli, ["rules", "lint"])
    assert res.exit_code == 0
    assert any(line.startswith("rules/") and ": warning: " in line for line in res.output.splitlines())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_example_plan_fits_80_columns_in_full(example_plans, lang):
    """`plan --full` of every example: the text the CLI writes is ``to_text`` wrapped to the width."""
    from servewise.cli.render import to_text
    from servewise.cli.wrap import wrap

    wide = {}
    for name, ex in example_plans.items():
        widest = max(display_width(line) for line in wrap(to_text(ex.plan, lang), 80).splitlines())
        if widest > 80:
            wide[name] = widest
    assert not wide, wide


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_auditors_commands_fit_80_columns(tmp_path, example_plans, lang):
    plan = tmp_path / "plan.json"
    plan.write_text(example_plans["chat-70b-online"].json_text, encoding="utf-8")
    warning = example_plans["chat-70b-online"].plan["warnings"][0]["rule"]
    runs = [["explain", str(plan), "gpu"], ["explain", str(plan), "gpu", "--brief"], ["explain", str(plan), warning],
            ["why-not", str(plan), "L40S"], ["why-not", str(plan), warning], ["audit", str(plan)],
            ["kb", "coverage", "--format", "text"], ["rules", "functions"],
            ["rules", "show", "cooling.air-as-shipped-above-6kw"]]  # (--examples plans every example: 20 s)
    for args in runs:
        res = CliRunner().invoke(cli, ["--lang", lang, *args])
        assert res.exit_code == 0, (args, res.output[-300:])
        widest = max(display_width(line) for line in res.output.splitlines())
        assert widest <= 80, (args, widest)


def test_help_of_every_command_fits_80_columns():
    from servewise.cli.help_i18n import walk
    from servewise.cli.main import _register_optional

    _register_optional()
    wide = {}
    for path, _command in walk(cli):
        for lang in ("en", "zh"):
            res = CliRunner().invoke(cli, ["--lang", lang, *path.split(), "--help"])
            widest = max(display_width(line) for line in res.output.splitlines())
            if widest > 80:
                wide[(lang, path)] = widest
    assert not wide, wide


def test_a_closing_mark_takes_the_character_before_it_down():
    from servewise.cli.wrap import wrap_line

    for tail in ("。后面还有", "））。后面", "），后面"):
        line = "  服务器        " + "一" * 32 + tail  # the first closing mark falls on columns 81-82
        out = wrap_line(line, 80)
        assert all(display_width(x) <= 80 for x in out), [display_width(x) for x in out]
        assert "".join("".join(x.split()) for x in out) == "".join(line.split())
        assert out[1].strip().startswith("一" + tail[0]), out
