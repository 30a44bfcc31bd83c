"""Progress lines (issue 39 item 8): on a terminal a line rewritten in place and cleared at the
end; into a pipe or file nothing at all."""

from __future__ import annotations

import io

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
