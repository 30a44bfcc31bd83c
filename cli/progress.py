"""Progress on stderr for work slower than a second: one line rewritten in place while stderr is
a terminal, nothing otherwise (pipes and files stay clean). With ``delay`` the line appears only
once the work has taken that long (a fast run shows nothing); it is cleared when the work ends,
before the command prints its result."""

from __future__ import annotations

import sys
import threading
from typing import TextIO

from .i18n import display_width

SLOW_S = 1.0  # work expected to take about this long or more shows progress (issue 39 item 8)


class Progress:
    """``with Progress("planning examples", 31) as p: p.step("chat-70b-online")``; ``total`` 0:
    no count, only the label and the item (one piece of work whose length is not known);
    ``delay``: show nothing until the work has run that many seconds."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None, delay: float = 0.0):
        self.label, self.total, self.done = label, total, 0
        self.stream = stream or sys.stderr
        try:
            self.live = self.stream.isatty()
        except (AttributeError, ValueError):
            self.live = False
        self._width = 0
        self._text = label
        self._lock = threading.Lock()
        self._shown = delay <= 0
        self._timer: threading.Timer | None = None
        if self.live and delay > 0:
            self._timer = threading.Timer(delay, self._appear)
            self._timer.daemon = True

    def _write(self, text: str) -> None:
        text = text[:76]
        pad = " " * max(0, self._width - display_width(text))
        self.stream.write(f"\r{text}{pad}")
        self.stream.flush()
        self._width = display_width(text)

    def _appear(self) -> None:
        with self._lock:
            if not self._shown:
                self._shown = True
                self._write(self._text)

    def step(self, item: str = "") -> None:
        """Count one item (``item``: what is being worked on next)."""
        self.done += 1
        if self.live:
            count = f" {self.done}/{self.total}" if self.total else ""
            with self._lock:
                self._text = f"{self.label}{count} {item}".rstrip()
                if self._shown:
                    self._write(self._text)

    def __enter__(self) -> Progress:
        if self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._shown = True  # a timer firing now finds nothing left to show
            if self.live and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
                self._width = 0


def slow(label_code: str, lang: str) -> Progress:
    """The progress of one command's work (``label_code``: a message of facts/messages/cli.yaml),
    shown only if it takes longer than :data:`SLOW_S`."""
    from servewise.engine.common.messages import message

    return Progress(message(label_code, lang), 0, delay=SLOW_S)
