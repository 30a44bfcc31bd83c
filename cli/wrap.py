"""Wrap text output to the terminal width by display columns (CJK characters count two), never
cutting content: long lines continue on the next line, indented under their first word."""

from __future__ import annotations

import io
import re
import shutil
import sys
from contextlib import contextmanager

from .i18n import display_width

NOT_A_TTY_WIDTH = 80
_CLOSING = set("，。、；：？！）」』】》,.;:)!?")
_WIDE = "\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6"
_TOKEN = re.compile(rf"\s+|[{_WIDE}]|[^\s{_WIDE}]+")  # spaces, one wide character, or a word


def output_width(stream=None) -> int:
    """The terminal's width when writing to one, else 80."""
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return max(40, shutil.get_terminal_size((NOT_A_TTY_WIDTH, 24)).columns)
    except (AttributeError, ValueError):
        pass
    return NOT_A_TTY_WIDTH


def _continuation(line: str) -> str:
    """Indent of continuation lines: under the text after a bullet or label ("  - ", "  [12] ")."""
    label = re.match(r"^(\s*\S(?:\S| (?! ))*\s{2,})\S", line)  # "  Cooling       air ..."
    if label and display_width(label.group(1)) <= 24:
        return " " * display_width(label.group(1))
    m = re.match(r"^(\s*(?:[-*?•⇒⇐!]\s+|\[\d+\]\s+)?)", line)
    lead = m.group(1) if m else ""
    return " " * display_width(lead) if lead.strip() else " " * (display_width(lead) + 4)


_CHAR_WIDTHS: dict[str, int] = {}


def _width(text: str) -> int:
    """:func:`display_width`, at once for ASCII (one column a character)."""
    return len(text) if text.isascii() else display_width(text)


def _width_of(c: str) -> int:
    w = _CHAR_WIDTHS.get(c)
    if w is None:
        w = _CHAR_WIDTHS[c] = display_width(c)
    return w


def _split_word(token: str, w: int, room: int, indent: str, out: list[str]) -> tuple[str, int]:
    """A word wider than the ``room`` after ``indent``: whole lines of it cut by columns onto ``out``
    (at least one character per line), and the rest with its width. Linear in the word's length."""
    widths = [1] * len(token) if token.isascii() else [_width_of(c) for c in token]
    p, n = 0, len(token)
    while w > room and p < n:
        start, cols = p, 0
        while p < n and cols + widths[p] <= room:
            cols += widths[p]
            p += 1
        if p == start:  # not even one character fits: it takes a line of its own
            cols = widths[p]
            p += 1
        out.append(indent + token[start:p])
        w -= cols
    return token[p:], w


def wrap_line(line: str, width: int) -> list[str]:
    """``line`` cut into lines of at most ``width`` columns at spaces (a longer word cut by columns),
    continuations indented (see :func:`_continuation`). Linear in the line's length."""
    if _width(line) <= width:
        return [line]
    indent = _continuation(line)
    indent_w = display_width(indent)
    if indent_w >= width:  # a line led by more spaces than fit: continuations leave room for text
        indent, indent_w = " " * (width // 2), width // 2
    out: list[str] = []
    parts: list[str] = []  # the line being filled, in pieces
    used = 0
    text = False  # it holds more than spaces
    first = 0  # where the current line's text starts in ``parts``
    marks = None  # where the run of closing marks that ends ``parts`` starts (None: it ends otherwise)
    for token in _TOKEN.findall(line):
        w = _width(token)
        space = token.isspace()
        if parts and used + w > width and not space:
            carry: list[str] = []
            if text and token in _CLOSING:
                # CJK: no line starts with "，" or "。" and none hangs past the edge: the character
                # before it (and the closing marks between) goes down with it
                k = (len(parts) if marks is None else marks) - 1  # (one step: linear in the line)
                if k <= first or parts[k].isspace():  # nothing to take down: it hangs
                    marks = len(parts) if marks is None else marks
                    parts.append(token)
                    used += w
                    continue
                carry, parts = parts[k:], parts[:k]
            out.append("".join(parts).rstrip())
            parts, used, text = [indent, *carry], indent_w + sum(_width(c) for c in carry), bool(carry)
            first = 1
            marks = next((i for i in range(1, len(parts)) if parts[i] in _CLOSING), None)
            if w > width - used and not carry:  # a word longer than the line: split it by columns
                token, w = _split_word(token, w, width - used, indent, out)
        if space and not text and out:
            continue
        if not text and not space:
            first = len(parts)
        if token in _CLOSING:
            marks = len(parts) if marks is None else marks
        else:
            marks = None
        parts.append(token)
        used += w
        text = text or (bool(token) and not space)
    if text:
        out.append("".join(parts).rstrip())
    return out


def wrap(text: str, width: int | None) -> str:
    """``text`` with every line longer than ``width`` display columns wrapped (None: unchanged)."""
    if not width:
        return text
    end = "\n" if text.endswith("\n") else ""
    lines = text[: len(text) - len(end)].split("\n")
    return "\n".join(piece for line in lines for piece in wrap_line(line, width)) + end


class _WrappingWriter(io.TextIOBase):
    """A text stream that writes whole lines to ``real``, each wrapped to ``width``."""

    def __init__(self, real, width: int):
        self.real, self.width, self.pending = real, width, ""

    @property
    def encoding(self) -> str:  # what click and print look at
        return getattr(self.real, "encoding", "utf-8")

    def isatty(self) -> bool:
        return self.real.isatty()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        if "\n" in self.pending:
            done, self.pending = self.pending.rsplit("\n", 1)
            self.real.write(wrap(done + "\n", self.width))
        return len(text)

    def flush(self) -> None:
        self.real.flush()

    def finish(self) -> None:
        if self.pending:
            self.real.write(wrap(self.pending, self.width))
            self.pending = ""
        self.real.flush()


@contextmanager
def wrapped_stdout(enabled: bool = True):
    """Inside, text written to ``sys.stdout`` (``click.echo``, ``print``) is wrapped line by line
    to the terminal's width (80 when not a terminal) by :func:`wrap`: never cut, continuations
    indented. For text output only: JSON must not be wrapped."""
    if not enabled:
        yield
        return
    real = sys.stdout
    writer = _WrappingWriter(real, output_width(real))
    sys.stdout = writer
    try:
        yield
    finally:
        try:
            writer.finish()
        finally:
            sys.stdout = real


def text_wrapped(command=None, *, terminal_only: bool = False):
    """Decorate a click command so that its text output (``fmt`` "text" or absent) is wrapped by
    :func:`wrapped_stdout`; other formats (JSON, Markdown) pass through untouched.
    ``terminal_only``: wrap only when stdout is a terminal — for output that tools parse line by
    line (``file:line: rule: message`` of the linter and the rule tests), which a pipe gets whole."""
    import functools

    def decorate(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            tty = sys.stdout.isatty() if hasattr(sys.stdout, "isatty") else False
            with wrapped_stdout(kwargs.get("fmt", "text") == "text" and (tty or not terminal_only)):
                return fn(*args, **kwargs)

        return run

    return decorate(command) if command is not None else decorate
