"""engine/common/forkmap.py: the pools of a several-model plan on the machine's cores."""

from __future__ import annotations

import glob
import os
import tempfile
import time
from collections import Counter

import pytest

from servewise.engine.common import forkmap
from servewise.engine.common.forkmap import fork_map, processes_available


@pytest.fixture
def two_processes(monkeypatch, tmp_path):
    """Two processes whatever the machine (the items still give the same results on one core),
    their result files in this test's own temporary folder (other tests fork at the same time)."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(forkmap, "processes_available", lambda: 2)


def _leftover_files() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "servewise-worker-*")))


def test_results_come_in_item_order_and_workers_take_items(two_processes):
    before = _leftover_files()
    def fn(x: int) -> tuple[int, int]:
        time.sleep(0.02)  # long enough for a worker to start and take items
        return x * x, os.getpid()

    out = fork_map(fn, list(range(12)))
    assert [v for v, _ in out] == [x * x for x in range(12)]
    assert out[0][1] == os.getpid()  # the first item is always the caller's
    assert {pid for _, pid in out} - {os.getpid()}, "no item was planned by a worker"
    assert _leftover_files() == before


def test_one_core_or_one_item_runs_in_the_caller(monkeypatch):
    monkeypatch.setenv("SERVEWISE_WORKERS", "1")
    assert processes_available() == 1
    assert {pid for pid in fork_map(lambda _: os.getpid(), range(5))} == {os.getpid()}
    monkeypatch.setattr(forkmap, "processes_available", lambda: 2)
    assert fork_map(lambda _: os.getpid(), [1]) == [os.getpid()]


def test_portable_applies_to_what_workers_send(two_processes):
    out = fork_map(lambda x: (x, os.getpid()), list(range(8)), portable=lambda r: ("sent", r[0]))
    for x, r in enumerate(out):
        assert r == (x, os.getpid()) or r == ("sent", x)


def test_counters_get_the_workers_increments(two_processes):
    work: Counter = Counter()

    def fn(x: int) -> int:
        work["items"] += 1
        work["units"] += x
        return x

    fork_map(fn, list(range(10)), counters=(work,))
    assert work == Counter(items=10, units=sum(range(10)))


def test_an_item_failing_in_a_worker_is_computed_and_raises_in_the_caller(two_processes):
    caller = os.getpid()

    def fn(x: int) -> int:
        if x == 5:
            raise ValueError(f"item 5 in {'caller' if os.getpid() == caller else 'worker'}")
        return x

    before = _leftover_files()
    with pytest.raises(ValueError, match="item 5 in caller"):
        fork_map(fn, list(range(10)))
    assert _leftover_files() == before


def test_a_worker_failing_only_in_its_process_costs_time_not_results(two_processes):
    caller = os.getpid()

    def fn(x: int) -> tuple[int, int]:
        if os.getpid() != caller:
            raise RuntimeError("worker-only failure")
        return x, os.getpid()

    assert fork_map(fn, list(range(6))) == [(x, caller) for x in range(6)]


def test_an_unpicklable_result_is_recomputed_in_the_caller(two_processes):
    out = fork_map(lambda x: (lambda: x), list(range(4)))
    assert [f() for f in out] == list(range(4))


def test_the_caller_failing_stops_the_workers_and_removes_their_files(two_processes):
    before = _leftover_files()

    def fn(x: int) -> int:
        if x == 0:
            raise KeyboardInterrupt
        return x

    with pytest.raises(KeyboardInterrupt):
        fork_map(fn, list(range(50)))
    assert _leftover_files() == before


@pytest.mark.parametrize("processes", [1, 2])
def test_a_several_model_plan_is_the_same_with_and_without_workers(example_plans, monkeypatch, processes):
    """The pools planned in workers and combined give the plan (and count the engine work) that
    planning them one after the other in this process does."""
    from servewise.cli.render import to_json
    from servewise.engine.app.plan import plan_file
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.runtime.compiler import WORK

    if processes > 1 and not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(forkmap, "processes_available", lambda: processes)
    name = "multi-model-tenants"
    before = Counter(WORK)
    result = plan_file(example_plans[name].path, load_rules())
    assert to_json(result.plan) == example_plans[name].json_text
    assert {k: v for k, v in sorted((Counter(WORK) - before).items())} == example_plans[name].work
    assert result.memory.steps and len(result.memory.steps) > 100  # the first pool's whole memory


def test_a_fork_refused_leaves_the_items_to_the_caller(two_processes, monkeypatch):
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    before = _leftover_files()
    assert fork_map(lambda x: (x, os.getpid()), list(range(5))) == [(x, os.getpid()) for x in range(5)]
    assert _leftover_files() == before
