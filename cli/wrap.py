"""Wrap text output to the terminal width by display columns (CJK characters count two), never
cutting content: long lines continue on the next line, indented under their first word."""

from __future__ import annotations

import re
import shutil
import sys

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


def wrap_line(line: str, width: int) -> list[str]:
    if display_width(line) <= width:
        return [line]
    indent = _continuation(line)
    out: list[str] = []
    current, used = "", 0
    for token in _TOKEN.findall(line):
        w = display_width(token)
        no_break = token in _CLOSING and current.strip()  # CJK: no line starts with "，" or "。"
        if current and used + w > width and not token.isspace() and not no_break:
            out.append(current.rstrip())
            current, used = indent, display_width(indent)
            if w > width - used:  # a word longer than the line: split it by columns
                while w > width - used:
                    cut, cols = 0, 0
                    while cut < len(token) and cols + display_width(token[cut]) <= width - used:
                        cols += display_width(token[cut])
                        cut += 1
                    cut = max(cut, 1)
                    out.append(current + token[:cut])
                    token = token[cut:]
                    current, used = indent, display_width(indent)
                    w = display_width(token)
        if token.isspace() and current.strip() == "" and out:
            continue
        current += token
        used += w
    if current.strip():
        out.append(current.rstrip())
    return out


def wrap(text: str, width: int | None) -> str:
    """``text`` with every line longer than ``width`` display columns wrapped (None: unchanged)."""
    if not width:
        return text
    end = "\n" if text.endswith("\n") else ""
    lines = text[: len(text) - len(end)].split("\n")
    return "\n".join(piece for line in lines for piece in wrap_line(line, width)) + end
