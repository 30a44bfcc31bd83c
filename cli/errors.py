"""User-facing errors: one line, exit code 2 for bad input, never a traceback."""

from __future__ import annotations

import click


class InputError(click.ClickException):
    """Bad input (file, field, option): exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:  # one line, no "Error:" noise from click's default
        click.echo(f"error: {self.message}", err=True, file=file)


class Infeasible(click.ClickException):
    exit_code = 1
