"""One catalog for the sentences servewise writes itself (not rule explanations): every
``facts/messages/*.yaml`` maps a code to ``{en, zh}`` texts with ``str.format`` placeholders."""

from __future__ import annotations

import string
from functools import lru_cache
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.common.rulecache import cached_yaml

MESSAGES_DIR = PACKAGE_ROOT / "facts" / "messages"
LANGS = ("en", "zh")


class MessageError(KeyError):
    """An unknown message code or a missing placeholder argument."""


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, str]]:
    """Every message, by code, from all ``facts/messages/*.yaml`` (a code defined twice is an error)."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(MESSAGES_DIR.glob("*.yaml")):
        data = cached_yaml(path) or {}  # every plan reads them: through the cache
        for code, texts in data.items():
            code = str(code)
            if code in out:
                raise MessageError(f"{path.name}: message code '{code}' is defined twice")
            out[code] = {lang: str(texts[lang]) for lang in LANGS if lang in texts}
    return out


def placeholders(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def message(code: str, lang: str, **args: Any) -> str:
    """The message ``code`` in ``lang`` (English if that language is missing), formatted with ``args``."""
    texts = catalog().get(code)
    if texts is None:
        raise MessageError(f"unknown message code '{code}'")
    text = texts.get(lang) or texts["en"]
    try:
        return text.format(**args)
    except KeyError as exc:
        raise MessageError(f"message '{code}' needs the argument {exc.args[0]!r}") from None


def both(code: str, **args: Any) -> dict[str, str]:
    """``{"en": …, "zh": …}`` for a plan's ``*_i18n`` fields."""
    return {lang: message(code, lang, **args) for lang in LANGS}
