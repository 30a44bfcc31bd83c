"""Progress lines (issue 39 item 8): on a terminal a line rewritten in place and cleared at the
end; into a pipe or file nothing at all."""

from __future__ import annotations

import io

import pytest

from servewise.cli.progress import Progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_sees_the_count_and_a_clean_line_after():
    out = Tty()
    with Progress("planning examples", 2, out) as p:
        p.step("chat-70b-online")
        p.step("reranker")
    text = out.getvalue()
    assert "planning examples 1/2 chat-70b-online" in text and "2/2 reranker" in text
    assert text.endswith("\r") and "\n" not in text


def test_a_pipe_sees_nothing():
    out = io.StringIO()
    with Progress("planning examples", 2, out) as p:
        p.step("a")
        p.step("b")
    assert out.getvalue() == ""


def test_without_a_total_only_the_item_shows():
    out = Tty()
    with Progress("servewise: planning…", 0, out) as p:
        p.step("w.yaml")
    assert "servewise: planning… w.yaml" in out.getvalue() and "/" not in out.getvalue().replace("w.yaml", "")


def test_with_a_delay_fast_work_shows_nothing_and_slow_work_a_line_cleared_at_the_end():
    import time

    out = Tty()
    with Progress("servewise: checking…", 0, out, delay=5.0):
        pass  # done long before the delay
    assert out.getvalue() == ""
    out = Tty()
    with Progress("servewise: checking…", 0, out, delay=0.05):
        time.sleep(0.5)
    text = out.getvalue()
    assert text.startswith("\rservewise: checking…") and text.endswith("\r") and "\n" not in text
    out = io.StringIO()  # a pipe: nothing, however long it takes
    with Progress("servewise: checking…", 0, out, delay=0.01):
        time.sleep(0.1)
    assert out.getvalue() == ""


@pytest.mark.slow
def test_a_slow_command_on_a_terminal_shows_its_progress_and_a_pipe_does_not(tmp_path, example_plans):
    """`audit` of a three-tenant plan plans three models again (seconds): on a terminal its
    progress line appears on stderr and is cleared before the result."""
    import os
    import sys
    from pathlib import Path

    pexpect = pytest.importorskip("pexpect")
    exe = Path(sys.executable).parent / "servewise"
    plan = tmp_path / "plan.json"
    plan.write_text(example_plans["multi-model-tenants"].json_text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("LC_ALL", "LC_MESSAGES")}
    env.update(LANG="en_US.UTF-8", TERM="xterm", NO_COLOR="1")
    child = pexpect.spawn(str(exe), ["audit", str(plan)], env=env, encoding="utf-8", timeout=120,
                          dimensions=(40, 120))
    child.expect("servewise: planning the recorded workload again")
    child.expect("audit: identical")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0  # (through a pipe nothing is written: the unit tests above)
