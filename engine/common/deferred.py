"""A value computed only when it is written out.

The performance model explains every estimate in formula steps, but a plan shows the steps of
few of the hundreds of estimates it makes (those behind its choices). An estimate's record
holds its steps as a :class:`Deferred`; engine/runtime/justify.py's ``jsonable`` computes it
when the step that holds it is shown. The function must be pure and its result plain JSON
values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Deferred:
    """``make()``, computed at most once, on first :meth:`get`."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], Any]):
        self._make: Callable[[], Any] | None = make
        self._value: Any = None

    def get(self) -> Any:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value
