"""engine/app/pools_board.py: host re-plans begun while the pools are still being planned."""

from __future__ import annotations

import glob
import os
import tempfile

import pytest

from servewise.engine.app import pools_board
from servewise.engine.app.pools_board import Board, PoolSummary, hosts_of, moves_of, take_replans
from servewise.engine.common import forkmap
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext, reset_context, use_context


@pytest.fixture()
def ctx():
    token = use_context(RunContext(load_catalog()))
    yield
    reset_context(token)


@pytest.fixture
def board(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    b = Board(3)
    yield b
    b.close()


def test_hosts_are_the_chosen_gpus_largest_pool_first_then_a_mig_alternative(ctx):
    pools = [PoolSummary(True, "L20", 2, ("A10", "A30")), PoolSummary(True, "A10", 4, ("L4", "T4")),
             PoolSummary(True, "L20", 1, ())]
    assert hosts_of(pools) == ["A10", "L20", "A30"]  # A30 has MIG; A10, L4 and T4 have not
    assert moves_of(["A10", "L20"], dict(enumerate(pools))) == [("A10", 0), ("A10", 2), ("L20", 1)]


def test_a_move_is_claimed_once_across_processes(board):
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the other process
        os._exit(0 if board.claim(("A10", 1)) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not board.claim(("A10", 1)) and board.claim(("A10", 2)) and not board.claim(("A10", 2))


def test_the_board_holds_what_each_process_left(board):
    assert board.planned() == {} and board.take(("A10", 0)) is None
    board.publish(1, PoolSummary(True, "A10", 2, ()))
    assert board.planned() == {1: PoolSummary(True, "A10", 2, ())}
    board.put(("A10", 2), "theirs", portable=lambda r: r.upper())  # as the worker sends it
    assert board.take(("A10", 2)) == "THEIRS"
    folder = board.folder
    board.close()
    assert not os.path.exists(folder)


def test_replans_are_taken_as_the_pools_become_known(board, ctx):
    """With two of three pools planned, only the re-plans already known are taken, and it ends
    (never waiting for the third); a pool planned meanwhile adds its re-plans at once; with every
    pool planned, the rest (its own on every host, the others on its GPU)."""
    board.publish(0, PoolSummary(True, "L20", 2, ()))
    board.publish(1, PoolSummary(True, "A10", 2, ()))
    done: list[tuple[str, int]] = []

    def replan(i: int, gpu: str) -> str:
        done.append((gpu, i))
        if len(done) == 1:  # the third pool is planned by another process meanwhile
            board.publish(2, PoolSummary(True, "T4", 1, ()))
        return f"{i}@{gpu}"

    first = Board(3)
    try:
        first.publish(0, PoolSummary(True, "L20", 2, ()))
        first.publish(1, PoolSummary(True, "A10", 2, ()))
        first_done: list[tuple[str, int]] = []
        take_replans(first, lambda i, gpu: first_done.append((gpu, i)) or "x", portable=lambda r: r)
        assert first_done == [("L20", 1), ("A10", 0)]  # and it ended, the third pool unknown
    finally:
        first.close()
    take_replans(board, replan, portable=lambda r: r)
    assert done == [("L20", 1), ("L20", 2), ("A10", 0), ("A10", 2), ("T4", 0), ("T4", 1)]
    assert board.take(("T4", 1)) == "1@T4"


def test_a_failed_replan_is_left_for_choose_layout_and_an_infeasible_pool_stops_it(board, ctx):
    board.publish(0, PoolSummary(True, "L20", 2, ()))
    board.publish(1, PoolSummary(True, "A10", 2, ()))
    board.publish(2, PoolSummary(True, "A10", 1, ()))

    def replan(i: int, gpu: str) -> str:
        if i == 1:
            raise RuntimeError("reported where choose_layout computes it again")
        return "ok"

    take_replans(board, replan, portable=lambda r: r)
    assert board.take(("L20", 1)) is None and board.take(("A10", 0)) == "ok"
    other = Board(2)
    try:
        other.publish(0, PoolSummary(False, None, 0, ()))
        other.publish(1, PoolSummary(True, "A10", 1, ()))
        take_replans(other, lambda i, gpu: pytest.fail("nothing is packed"), portable=lambda r: r)
    finally:
        other.close()


def test_a_failing_several_model_plan_leaves_no_board(example_plans, monkeypatch, tmp_path):
    from servewise.engine.app import plan as plan_module
    from servewise.engine.lang.rulebase import load_rules

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(forkmap, "processes_available", lambda: 2)
    real = plan_module.plan_workload

    def failing(workload, *args, **kwargs):
        if workload.get("model") == "Llama-3.2-3B" and workload["constraints"].get("gpu_models"):
            raise KeyboardInterrupt
        return real(workload, *args, **kwargs)

    monkeypatch.setattr(plan_module, "plan_workload", failing)
    with pytest.raises(KeyboardInterrupt):
        plan_module.plan_file(example_plans["multi-model-tenants"].path, load_rules())
    assert glob.glob(os.path.join(str(tmp_path), "servewise-*")) == []


def test_without_a_temporary_folder_the_plan_is_the_same(example_plans, monkeypatch, tmp_path):
    """No board can be made, or it cannot be written (a full or read-only temporary folder): the
    re-plans wait for the pools, as without it, and the plan is the same."""
    from servewise.cli.render import to_json
    from servewise.engine.app import plan as plan_module
    from servewise.engine.lang.rulebase import load_rules

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(forkmap, "processes_available", lambda: 2)
    name = "multi-model-tenants"

    def refused(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pools_board.tempfile, "mkdtemp", refused)
    assert to_json(plan_module.plan_file(example_plans[name].path, load_rules()).plan) == example_plans[name].json_text
    monkeypatch.undo()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(forkmap, "processes_available", lambda: 2)
    monkeypatch.setattr(Board, "_write", refused)
    monkeypatch.setattr(os, "open", refused)
    assert to_json(plan_module.plan_file(example_plans[name].path, load_rules()).plan) == example_plans[name].json_text


def test_a_pool_failing_in_a_worker_neither_hangs_nor_changes_the_plan(example_plans, monkeypatch, tmp_path):
    """A pool whose plan fails only in the worker (its process, not the plan) is planned again by
    the caller once the workers end; nobody waits for it meanwhile, and the plan is the same."""
    import signal

    from servewise.cli.render import to_json
    from servewise.engine.app import plan as plan_module
    from servewise.engine.lang.rulebase import load_rules

    if not hasattr(os, "fork") or not hasattr(signal, "alarm"):
        pytest.skip("no fork or alarm on this platform")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(forkmap, "processes_available", lambda: 2)
    caller, real = os.getpid(), plan_module.plan_workload

    def failing_in_a_worker(workload, *args, **kwargs):
        if os.getpid() != caller and workload.get("model") == "Qwen2.5-14B" and not workload["constraints"].get(
                "gpu_models"):
            raise MemoryError("this worker only")
        return real(workload, *args, **kwargs)

    monkeypatch.setattr(plan_module, "plan_workload", failing_in_a_worker)

    def hung(*_):
        raise AssertionError("the plan hangs")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)
    try:
        name = "multi-model-tenants"
        assert to_json(plan_module.plan_file(example_plans[name].path, load_rules()).plan) == \
            example_plans[name].json_text
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
