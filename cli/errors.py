"""User-facing errors: one line, exit code 2 for bad input, never a traceback."""

from __future__ import annotations

import click

_LANG = ["en"]  # the --lang of this invocation, set by the command group before any command runs


def set_lang(lang: str) -> None:
    _LANG[0] = lang


class InputError(click.ClickException):
    """Bad input (file, field, option): exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # one line, no "Error:" noise from click's default
        from servewise.engine.common.messages import message
        from servewise.engine.common.text import terminal_safe

        # the message may quote a file's text (a key of a plan file): no escape sequence reaches the terminal
        click.echo(terminal_safe(message("error.prefix", _LANG[0], text=self.message)), err=True, file=file)


def workload_error(exc, lang: str) -> InputError:
    """An InputError with a workload validation message in the user's language (a message without
    a catalog code, such as a file that cannot be read, through the value glossary)."""
    from .i18n import value_text

    return InputError(value_text(exc.text(lang), lang))


class Infeasible(click.ClickException):
    exit_code = 1


class InternalError(click.ClickException):
    """A bug in servewise or its built-in knowledge (exit code 3): a short message and where to report."""

    exit_code = 3

    def __init__(self, message: str, lang: str = "en"):
        super().__init__(message)
        self.lang = lang

    def show(self, file=None) -> None:
        from servewise.engine.common.messages import message

        click.echo(message("internal.error", self.lang, kind="knowledge", text=self.message), err=True, file=file)
        click.echo(message("internal.hint", self.lang), err=True, file=file)


def current_lang() -> str:
    """The --lang of this invocation (en before the command group ran)."""
    return _LANG[0]
