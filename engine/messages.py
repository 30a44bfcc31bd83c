"""The message catalog: user-facing texts in English and Chinese, kept in ``facts/messages/*.yaml``.

Each file maps a code to ``{en: "...", zh: "..."}`` with ``str.format`` placeholders; the CLI's texts
are in ``cli.yaml``, the engine's in ``engine.yaml``. Nothing here prints.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .yamlio import safe_load

MESSAGES_DIR = Path(__file__).resolve().parent.parent / "facts" / "messages"


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, str]]:
    """Every message of every ``facts/messages/*.yaml`` file, by code."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted(MESSAGES_DIR.glob("*.yaml")):
        data = safe_load(path.read_text(encoding="utf-8")) or {}
        for code, texts in data.items():
            if code in out:
                raise ValueError(f"{path.name}: message code '{code}' is defined twice")
            out[code] = texts
    return out


def message(code: str, lang: str, **args: object) -> str:
    """The text of ``code`` in ``lang`` (English when missing), formatted with ``args``."""
    texts = catalog()[code]
    return (texts.get(lang) or texts["en"]).format(**args)
