"""Seeded random inputs for the fuzz tests (tests/test_fuzz.py): the same kinds of values as its
hypothesis strategies, drawn with the standard library's ``random`` at a few microseconds a case
instead of hypothesis's several milliseconds, so that most of a run's 10,000 cases go to the code
under test. Hypothesis keeps the rest (its edge-case heuristics, shrinking); these cases are
reproduced from their seed, which a failure names (``SERVEWISE_FUZZ_SEED``)."""

from __future__ import annotations

import datetime
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

# characters a text is drawn from: ASCII letters and YAML syntax, control characters, a line
# separator, a byte-order mark, accents, CJK, an emoji and the highest code point
_CHARS = ("abcxyzABC019 _-.:,[]{}#&*!|>'\"%@`~\\/?=+\t\n\r\x00\x01\x1b\x7f\x85\u00a0\u2028"
          "\ufeffé中文模型🚀\U0010ffff")
_FLOATS = (0.0, -0.0, 1e-300, 1e300, 1.5, -2.5, math.inf, -math.inf, math.nan, 2.0 ** 53 + 1)


def run_seed() -> int:
    """This run's seed: ``SERVEWISE_FUZZ_SEED`` when set (to reproduce a failure), else random."""
    given = os.environ.get("SERVEWISE_FUZZ_SEED", "").strip()
    return int(given) if given.isdigit() else random.SystemRandom().randrange(2**32)


class Draw:
    """Random values of the shapes the fuzz tests feed to servewise."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def text(self, max_size: int) -> str:
        return "".join(self.r.choice(_CHARS) for _ in range(self.r.randint(0, max_size)))

    def integer(self) -> int:
        kind = self.r.randrange(3)
        return (self.r.randint(-5, 5) if kind == 0 else self.r.randint(-(10**30), 10**30) if kind == 1
                else self.r.choice((0, 1, -1, 2**31, 2**63, -(2**63) - 1, 10**30)))

    def scalar(self, words: Sequence[str] = ()) -> Any:
        kind = self.r.randrange(9)
        if kind == 0:
            return None
        if kind == 1:
            return self.r.random() < 0.5
        if kind in (2, 3):
            return self.integer()
        if kind == 4:
            return self.r.choice(_FLOATS) if self.r.random() < 0.5 else self.r.uniform(-1e6, 1e6)
        if kind == 5:
            return self.text(12)
        if kind == 6 and words:
            return self.r.choice(words)
        if kind == 7:
            return datetime.date(1, 1, 1) + datetime.timedelta(days=self.r.randrange(3_652_058))
        return self.r.choice(("", "0", "1e400", "nan", "-inf", "yes", "~", "null"))

    def value(self, scalar: Callable[[], Any], leaves: int = 8) -> Any:
        """A scalar, or lists and dictionaries of them nested up to ``leaves`` scalars in all."""
        budget = [leaves]

        def node(depth: int) -> Any:
            if budget[0] <= 1 or depth > 3 or self.r.random() < 0.55:
                budget[0] -= 1
                return scalar()
            if self.r.random() < 0.5:
                return [node(depth + 1) for _ in range(self.r.randint(0, 4))]
            return {self.key(): node(depth + 1) for _ in range(self.r.randint(0, 4))}
        return node(0)

    def key(self) -> Any:
        kind = self.r.randrange(4)
        return None if kind == 0 else self.integer() if kind == 1 else self.text(8)

    def choice(self, items: Sequence[Any]) -> Any:
        return self.r.choice(items)

    def chance(self, p: float = 0.5) -> bool:
        return self.r.random() < p

    def between(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)


def cases(seed: int, n: int) -> Iterator[tuple[int, Draw]]:
    """``n`` cases, each with its own generator seeded from ``seed`` and its number (a failing case
    is re-made alone from the two)."""
    for i in range(n):
        yield i, Draw(seed * 1_000_003 + i)


def mutate_json_seeded(doc: Any, paths: list[tuple], draw: Draw, value: Callable[[], Any], times: int) -> None:
    """:func:`conftest.mutate_json` with seeded draws: change ``doc`` in place at ``times`` paths
    (drop the key, or put ``value()`` there; paths gone by now are skipped)."""
    from conftest import mutate_with

    mutate_with(doc, lambda: draw.choice(paths), draw.chance, value, times)
