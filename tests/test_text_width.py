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
