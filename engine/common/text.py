"""The one home for formatting a value as text: in formula text (rendered expressions), in a rule's
sentence (``because`` templates) and in the auditor's tables."""

from __future__ import annotations

import re
from typing import Any

from servewise.engine.common.messages import message


def format_number(value: float) -> str:
    """A number for formula text: integers as integers, never an exponent for everyday magnitudes."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 1000:
        return f"{value:.0f}"
    if abs(value) >= 1e-4:
        return f"{value:.4g}"
    return f"{value:.3g}"


def format_operand(value: Any) -> str:
    """An operand in formula text: strings quoted, numbers as :func:`format_number`."""
    if value is None:
        return "—"  # an unset optional input or fact; never the word None in an explanation
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return f"[{len(value)} records]"  # e.g. BOM lines: listed in full where they are concluded
    return str(value)


def is_bilingual(value: Any) -> bool:
    """A text value given in both languages: ``{"en": str, "zh": str}``."""
    return isinstance(value, dict) and value.keys() == {"en", "zh"} and all(isinstance(v, str) for v in value.values())


def format_value(value: Any, spec: str | None, lang: str = "en") -> str:
    """A value in a sentence: ``spec`` is a format spec (``.1f``) when the template gives one."""
    if value is None:
        return "—"
    if is_bilingual(value):  # one value in both languages (e.g. a catalog fact): the reader's
        return value.get(lang) or value["en"]
    if spec:
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            pass
    if isinstance(value, float):  # never an exponent for everyday magnitudes (1.752e+05)
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            return f"[{len(value)} records]"  # e.g. BOM lines: listed in full as the conclusion's value
        return ", ".join(map(str, value))
    if isinstance(value, bool):
        return message("yes" if value else "no", lang)
    return str(value)


def format_display(value: Any, lang: str = "en") -> str:
    """A value in the auditor's tables: yes/no, lists in brackets, large numbers grouped; a text
    given in both languages in ``lang``."""
    if value is None:
        return "—"
    if is_bilingual(value):
        return value.get(lang) or value["en"]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list):
        return "[" + ", ".join(format_display(v, lang) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_display(v, lang)}" for k, v in value.items()) + "}"
    return str(value)


# C0 controls but newline and tab, DEL and the C1 controls (U+0080-U+009F: a terminal may take
# U+009B as CSI): shown as their escapes, so that no escape sequence reaches the terminal whole
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(m: re.Match[str]) -> str:
    return f"\\x{ord(m.group()):02x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab shown as its escape (``\\x1b``,
    ``\\x07``): what a file supplied (a plan's texts) can then change no terminal's state (title,
    colours, cursor, clipboard) and hide nothing. For text output; JSON escapes them itself."""
    return _CONTROL.sub(_escape, text)
