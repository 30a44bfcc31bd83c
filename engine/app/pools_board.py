"""A several-model plan's host re-plans, begun while its pools are still being planned.

To compare packing the pools into shared servers, every pool is re-planned on every host GPU
(engine/app/pools.py choose_layout): each GPU some pool chose, and the first MIG-capable GPU
among the pools' ranked alternatives. Which re-plans are needed becomes known pool by pool: once
a pool has chosen GPU G, every other planned pool needs a re-plan on G, and it needs one on every
host known. With several processes (engine/common/forkmap.py), a worker whose pools are done
would wait for the caller's last pools; instead it takes such re-plans from a board shared
through a temporary folder:

- each planned pool leaves a summary there (its GPU, how many, its ranked alternatives' GPUs);
- a worker claims a re-plan by creating its claim file (so each is computed once), computes it
  and leaves its result; it never waits for a pool (the caller, planning it, waits for the
  worker), so it ends when nothing known is left to take;
- once every pool is planned, the hosts are the ones choose_layout finds (:func:`hosts_of`, the
  same function), MIG-capable alternative included.

choose_layout then takes the re-plans from the board and computes only what is missing (a
re-plan that failed, or one a process never finished). A re-plan is a pure function of its pool
and GPU, so the plan is the same whichever process computes it, and when.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servewise.engine.app.plan_contract import PlanResult
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext, catalog, reset_context, use_context


@dataclass(frozen=True)
class PoolSummary:
    """What deciding the hosts and the re-plans needs of one planned pool."""

    feasible: bool
    gpu: str | None            # the GPU model it chose
    gpus: int                  # how many
    ranked: tuple[str, ...]    # the GPU models of its ranked alternatives, best first


def summary(result: PlanResult) -> PoolSummary:
    values = result.memory.values
    ranked = (str(r["option"]).split(" | ")[0] for r in result.plan["rejected"] if r.get("ranked"))
    return PoolSummary(bool(result.feasible), None if values.get("chosen.gpu") is None else str(values["chosen.gpu"]),
                       int(values.get("chosen.gpus") or 0), tuple(dict.fromkeys(ranked)))


def hosts_of(pools: list[PoolSummary]) -> list[str]:
    """The host GPUs to compare: the GPUs the pools chose (largest pool first), then the first
    MIG-capable GPU among their ranked alternatives (largest pool first), where MIG slices may
    let several small pools share one card."""
    order = sorted(range(len(pools)), key=lambda i: (-pools[i].gpus, i))
    hosts = list(dict.fromkeys(str(pools[i].gpu) for i in order))
    for i in order:
        for gpu in pools[i].ranked:
            if gpu not in hosts and catalog("gpus", gpu, "mig") is True and catalog("gpus", gpu, "mig_max_instances"):
                return [*hosts, gpu]
    return hosts


def moves_of(hosts: list[str], pools: dict[int, PoolSummary]) -> list[tuple[str, int]]:
    """Every (host GPU, pool) re-plan: each pool that chose another GPU, on each host."""
    return [(gpu, i) for gpu in hosts for i, p in sorted(pools.items()) if p.gpu != gpu]


class Board:
    """The temporary folder the processes of one several-model plan share (see the module)."""

    def __init__(self, pools: int):
        self.pools = pools
        self.folder = tempfile.mkdtemp(prefix="servewise-board-")
        self._seen: dict[int, PoolSummary] = {}
        self._tried: set[tuple[str, int]] = set()  # claimed here or by another process: not tried again

    def _path(self, kind: str, key: Any) -> str:
        return os.path.join(self.folder, f"{kind}-{hashlib.sha256(repr(key).encode()).hexdigest()[:20]}")

    def _write(self, path: str, value: Any) -> None:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)

    @staticmethod
    def _read(path: str) -> Any:
        try:
            with open(path, "rb") as fh:
                return pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError):
            return None

    def publish(self, index: int, pool: PoolSummary) -> None:
        """Pool ``index`` is planned (nothing is lost where it cannot be written: choose_layout
        computes what the board lacks)."""
        with contextlib.suppress(OSError):
            self._write(self._path("pool", index), pool)

    def planned(self) -> dict[int, PoolSummary]:
        """The pools planned so far, by index."""
        for i in range(self.pools):
            if i not in self._seen:
                found = self._read(self._path("pool", i))
                if found is not None:
                    self._seen[i] = found
        return dict(self._seen)

    def claim(self, move: tuple[str, int]) -> bool:
        """Whether this process is the first to take ``move``."""
        if move in self._tried:
            return False
        self._tried.add(move)
        try:
            os.close(os.open(self._path("claim", move), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except OSError:  # taken by another process (or the folder cannot be written: left to choose_layout)
            return False
        return True

    def put(self, move: tuple[str, int], result: PlanResult, portable: Callable[[PlanResult], Any]) -> None:
        """A worker's re-plan ``move``, as ``portable`` sends it (lost where it cannot be written:
        choose_layout computes it again)."""
        with contextlib.suppress(OSError):
            self._write(self._path("result", move), portable(result))

    def take(self, move: tuple[str, int]) -> PlanResult | None:
        """The re-plan ``move`` if a worker finished it (read by the caller once the workers ended)."""
        return self._read(self._path("result", move))

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def take_replans(board: Board, replan: Callable[[int, str], PlanResult],
                 portable: Callable[[PlanResult], Any]) -> None:
    """Compute the re-plans known to be needed and not yet claimed, until none is (a worker's
    ``after`` in ``fork_map``: it never waits for a pool another process plans, so it ends
    whatever happens to that pool). A re-plan that fails is left to choose_layout, which computes
    it again where its error is reported."""
    while True:
        pools = board.planned()
        if not all(p.feasible for p in pools.values()):
            return  # a pool that fits nowhere: nothing is packed (choose_layout)
        done = len(pools) == board.pools
        if done:
            token = use_context(RunContext(load_catalog()))
            try:
                hosts = hosts_of([pools[i] for i in range(board.pools)])
            finally:
                reset_context(token)
        else:  # the GPUs chosen so far: each is a host whatever the pools still to come choose
            hosts = list(dict.fromkeys(str(p.gpu) for p in pools.values()))
        move = next((m for m in moves_of(hosts, pools) if board.claim(m)), None)
        if move is None:
            return
        with contextlib.suppress(Exception):
            board.put(move, replan(move[1], move[0]), portable)
