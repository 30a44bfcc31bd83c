"""Progress on stderr for work slower than a second: one line rewritten in place while stderr is
a terminal, nothing otherwise (pipes and files stay clean)."""

from __future__ import annotations

import sys
from typing import TextIO

from .i18n import display_width


class Progress:
    """``with Progress("planning examples", 31) as p: p.step("chat-70b-online")``; ``total`` 0:
    no count, only the label and the item (one piece of work whose length is not known)."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        try:
            self.live = self.stream.isatty()
        except (AttributeError, ValueError):
            self.live = False
        self._width = 0

    def step(self, item: str = "") -> None:
        """Count one item (``item``: what is being worked on next)."""
        self.done += 1
        if self.live:
            count = f" {self.done}/{self.total}" if self.total else ""
            text = f"{self.label}{count} {item}"[:76]
            pad = " " * max(0, self._width - display_width(text))
            self.stream.write(f"\r{text}{pad}")
            self.stream.flush()
            self._width = display_width(text)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
