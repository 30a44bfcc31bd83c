"""No cyclic garbage collection while the engine builds or runs.

Loading rules, building the engine and running the rules allocate hundreds of thousands of small
objects (closures, facts, tokens, resolvers, step records). At Python's default thresholds
(700, 10, 10) the collector runs dozens of times per plan and each collection walks every young
object still alive: most of a plan's memory, again and again. Those collections find nothing:
the engine makes no reference cycles (every object it drops goes with its last reference;
tests/test_runner.py checks that a plan leaves no cyclic garbage). So inside
:func:`fewer_collections` the cyclic collector is off, and its previous state comes back
afterwards (blocks nest; the outermost restores it).

A process whose results live until it exits (the `servewise` command) calls
:func:`keep_results_for_the_process`: the objects that outlive an outermost block are then frozen
(``gc.freeze``) instead of being walked by the collection that re-enabling would start at once
(~25 ms after a 70B plan). Frozen objects are still freed by reference counting when dropped.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_FREEZE_SURVIVORS = False


def keep_results_for_the_process() -> None:
    """From now on, freeze what outlives an outermost :func:`fewer_collections` block."""
    global _FREEZE_SURVIVORS
    _FREEZE_SURVIVORS = True


@contextmanager
def fewer_collections() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting frees as usual)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if _FREEZE_SURVIVORS:
                gc.freeze()
            gc.enable()
