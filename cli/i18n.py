"""Language selection and the few fixed strings of the command-line interface."""

from __future__ import annotations

import locale
import os
import re
import string
import unicodedata
from collections.abc import Iterator, Mapping
from functools import lru_cache


class _Texts(Mapping):
    """The texts of facts/messages whose code starts with ``prefix``, by the rest of the code
    (``{"en": …, "zh": …}`` each), read at first use: templates their callers format."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self._data: dict[str, dict[str, str]] | None = None

    def _texts(self) -> dict[str, dict[str, str]]:
        if self._data is None:
            from servewise.engine.common.messages import catalog

            n = len(self.prefix)
            self._data = {code[n:]: texts for code, texts in catalog().items() if code.startswith(self.prefix)}
        return self._data

    def __getitem__(self, key: str) -> dict[str, str]:
        return self._texts()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts())

    def __len__(self) -> int:
        return len(self._texts())


STRINGS = _Texts("ui.")  # facts/messages/render.yaml ui.*
COMPONENT_NAMES = _Texts("component.")  # facts/messages/render.yaml component.*



def default_lang() -> str:
    """zh for a zh_* locale, else en."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


def t(key: str, lang: str) -> str:
    return STRINGS[key].get(lang, STRINGS[key]["en"])


def pick(texts: dict[str, str] | str | None, lang: str) -> str:
    if texts is None:
        return ""
    if isinstance(texts, str):
        return texts
    return texts.get(lang) or texts.get("en") or ""


def colon(lang: str) -> str:
    """The colon after a label: full width in Chinese."""
    return "：" if lang == "zh" else ": "


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: wide and full-width characters (CJK) count two."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` display columns (``f"{text:<13}"`` counts characters)."""
    return text + " " * max(0, width - display_width(text))


def unit_text(unit: str, lang: str) -> str:
    """A unit of facts/inputs.yaml or the fact dictionary as the reader reads it (``unit.*`` of
    facts/messages/commands.yaml; the unit itself when it has no entry: ms, GB, kW …)."""
    from servewise.engine.common.messages import catalog, message

    return message(f"unit.{unit}", lang) if f"unit.{unit}" in catalog() else unit


def msg(code: str, lang: str, **args: object) -> str:
    """A sentence of the plan views from the message catalog (facts/messages/render.yaml)."""
    from servewise.engine.common.messages import message

    return message(code, lang, **args)


@lru_cache(maxsize=1)
def _glossary() -> list[tuple[re.Pattern[str], str, bool, str]]:
    """The ``value.*`` messages (facts/messages/values.yaml) as (pattern, Chinese, is a phrase),
    longest first; a ``{x}`` placeholder matches a number or an id, ``{x_name}`` a name (up to a
    separator), ``{x_num}`` a number with thousands separators, ``{x_text}`` any text up to the
    literal that follows it; ``value.phrase.*`` entries count as phrases however short. Each entry
    carries its longest literal part: a text without it cannot match (checked before the regex)."""
    from servewise.engine.common.messages import catalog

    entries = sorted(((t["en"], t["zh"], code.startswith("value.phrase.")) for code, t in catalog().items()
                      if code.startswith("value.")), key=lambda e: -len(e[0]))
    out = []
    for en, zh, always in entries:
        pattern = "".join(re.escape(lit) + ("" if not field else rf"(?P<{field}>.+?)" if field.endswith("_text")
                                            else rf"(?P<{field}>[^;,，；()]+)" if field.endswith("_name")
                                            else rf"(?P<{field}>[\d,.]+)" if field.endswith("_num")
                                            else rf"(?P<{field}>[\w.+\-/]+)")
                          for lit, field, _, _ in string.Formatter().parse(en))
        lead = r"(?<![\w\-])" if en[:1].isalnum() else ""
        tail = r"(?![\w\-])" if en[-1:].isalnum() or en.endswith("}") else ""
        needle = max((lit for lit, _, _, _ in string.Formatter().parse(en)), key=len, default="")
        out.append((re.compile(lead + pattern + tail), zh, always or len(en.split()) >= 3, needle))
    return out


def value_text(text: object, lang: str, phrases_only: bool = False) -> str:
    """A catalog or rule value as shown in ``lang``: in Chinese every phrase of the value glossary
    replaced (names, numbers and ids stay as they are); ``phrases_only`` (for explanations, where
    a short word may be an identifier) replaces only phrases of three words or more."""
    text = str(text)
    if lang != "zh":
        return text
    for pattern, zh, phrase, needle in _glossary():
        if (phrases_only and not phrase) or needle not in text:
            continue
        if pattern.search(text):
            text = pattern.sub(lambda m, zh=zh: zh.format(**m.groupdict()), text)
    return text
