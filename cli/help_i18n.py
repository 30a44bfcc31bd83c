"""``--help`` in the user's language: the Chinese help of every command and option comes from
facts/messages/help.yaml (``help.<command path>[.<parameter>]``), set on the click objects before
click prints any help; English restores the decorators' own texts. Click's own words (Usage,
Options, Commands, the --help option, [default: ...]) go through ``LocalizedFormatter``."""

from __future__ import annotations

from typing import Any

import click

from servewise.engine.common.messages import catalog

from .i18n import display_width, pad
from .wrap import wrap_line

_ENGLISH: dict[int, tuple[Any, ...]] = {}  # id(command or option) -> its English help texts
_LANG = ["en"]


def _code(path: str, param: str | None = None) -> str:
    return f"help.{path or 'servewise'}" + (f".{param}" if param else "")


def walk(command: click.Command, path: str = ""):
    """(path, command) for ``command`` and every sub-command, depth first."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands):
            yield from walk(command.commands[name], f"{path} {name}".strip())


def _short(text: str) -> str:
    """A command's line in its group's listing: the first clause of its Chinese help, without a
    closing parenthesis when that is long (click's own shortening cuts at spaces)."""
    cut = min((i for i in (text.find("。"), text.find("：")) if i > 0), default=len(text))
    short = text[:cut]
    if display_width(short) > 50 and short.endswith("）") and "（" in short:
        short = short[: short.rindex("（")]
    return short


def apply_help(root: click.Command, lang: str) -> None:
    """Set the help texts of ``root`` and its sub-commands to ``lang`` (zh from the catalog, en the
    decorators' own); called on every invocation, so one process can switch languages."""
    _LANG[0] = lang
    texts = catalog()
    for path, command in walk(root):
        key = path.replace(" ", ".")
        if id(command) not in _ENGLISH:
            _ENGLISH[id(command)] = (command.help, command.short_help)
        help_en, short_en = _ENGLISH[id(command)]
        zh = texts.get(_code(key), {}).get("zh") if lang == "zh" else None
        command.help = zh or help_en
        command.short_help = _short(zh) if zh else short_en
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            if id(param) not in _ENGLISH:
                _ENGLISH[id(param)] = (param.help,)
            zh = texts.get(_code(key, param.name), {}).get("zh") if lang == "zh" else None
            param.help = zh or _ENGLISH[id(param)][0]


class LocalizedFormatter(click.HelpFormatter):
    """click's formatter, its fixed words in the current help language (English unchanged)."""

    def _t(self, name: str, english: str) -> str:
        if _LANG[0] != "zh":
            return english
        return catalog().get(f"help.click.{name}", {}).get("zh", english)

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        if prefix is None and _LANG[0] == "zh":
            prefix = self._t("usage", "Usage:") + " "
        super().write_usage(prog, args, prefix)

    def write_heading(self, heading: str) -> None:
        if _LANG[0] != "zh":
            super().write_heading(heading)
            return
        names = {"Options": "options", "Commands": "commands"}
        shown = self._t(names[heading], heading) if heading in names else heading
        self.write(f"{'':>{self.current_indent}}{shown}：\n")

    def write_text(self, text: str) -> None:
        if _LANG[0] != "zh":
            super().write_text(text)
            return
        indent = " " * self.current_indent
        for paragraph in text.split("\n\n"):
            for line in wrap_line(" ".join(paragraph.split()), max(20, self.width - self.current_indent)):
                self.write(f"{indent}{line.lstrip()}\n")

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        """Rows of term and text; in Chinese wrapped by display columns (click counts characters,
        so a Chinese text would run past the terminal's edge)."""
        if _LANG[0] != "zh":
            super().write_dl(rows, col_max, col_spacing)
            return
        help_en = "Show this message and exit."
        rows = [(term, (text or "").replace(help_en, self._t("help", help_en))
                 .replace("[default: ", f"[{self._t('default', 'default')}：")
                 .replace("required]", f"{self._t('required', 'required')}]")) for term, text in rows]
        first = min(max((display_width(term) for term, _ in rows), default=0), col_max) + col_spacing
        indent = " " * self.current_indent
        room = max(20, self.width - self.current_indent - first - 2)  # a closing "，" may hang
        for term, text in rows:
            if not text:
                self.write(f"{indent}{term}\n")
                continue
            lines = [line.lstrip() for line in wrap_line(text, room)]
            if display_width(term) <= first - col_spacing:
                self.write(f"{indent}{pad(term, first)}{lines[0]}\n")
                lines = lines[1:]
            else:
                self.write(f"{indent}{term}\n")
            for line in lines:
                self.write(f"{indent}{' ' * first}{line}\n")


def install() -> None:
    """Every click context formats help with ``LocalizedFormatter``; click's messages go through
    :func:`_gettext` (its modules' ``_`` / ``ngettext``)."""
    import click.core
    import click.exceptions
    import click.parser
    import click.types

    click.Context.formatter_class = LocalizedFormatter
    for module in (click.core, click.exceptions, click.parser, click.types):
        if hasattr(module, "_"):
            module._ = _gettext  # type: ignore[attr-defined]
        if hasattr(module, "ngettext"):
            module.ngettext = _ngettext  # type: ignore[attr-defined]


def _click_zh() -> dict[str, str]:
    """click's English message ids → Chinese (facts/messages/help.yaml help.click.msg.*)."""
    return {t["en"]: t["zh"] for code, t in catalog().items() if code.startswith("help.click.msg.")}


def _gettext(message: str) -> str:
    """click's message ``message`` in the current language (English as click wrote it)."""
    return _click_zh().get(message, message) if _LANG[0] == "zh" else message


def _ngettext(singular: str, plural: str, n: int) -> str:
    return _gettext(singular if n == 1 else plural)
