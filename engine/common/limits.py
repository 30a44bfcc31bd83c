"""Size limits of what a rule expression builds (engine/lang/expr.py) and of what the domain
functions it calls build (engine/domain/functions.py ``joined``): one home for both layers.

A value holds at most ``MAX_ITEMS`` items (nested lists and records counted) and ``MAX_TEXT``
characters; an operation that builds one checks the size it would have before building it."""

from __future__ import annotations

MAX_ITEMS = 20_000
MAX_TEXT = 1_000_000


class SizeLimit(ValueError):
    """A value would hold more than MAX_ITEMS items or MAX_TEXT characters."""


def check_items(n: int, what: str, error: type[ValueError] = SizeLimit) -> None:
    """Raise ``error`` if ``what`` would hold ``n`` > MAX_ITEMS items."""
    if n > MAX_ITEMS:
        raise error(f"{what} would hold {n} items (limit {MAX_ITEMS})")


def check_text(n: int, what: str, error: type[ValueError] = SizeLimit) -> None:
    """Raise ``error`` if ``what`` would be ``n`` > MAX_TEXT characters long."""
    if n > MAX_TEXT:
        raise error(f"{what} would be {n} characters long (limit {MAX_TEXT})")
