"""Shared fixtures: the CLI runner, paths of the repository, the rule base and the example plans.

For a new test module: ``example_plans`` gives every example planned once per test run (shared by
the xdist workers); ``rulebase`` the loaded rules; ``cli(*args)`` runs the CLI in-process. Plan in
a test only what no example covers, and run the CLI in a subprocess only to test the process itself
(exit codes of the console script, fresh-process determinism); mark such slow tests ``slow``
(`make test-slow`). ``shared_once`` shares any other expensive JSON-able result between workers.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)


@pytest.fixture
def cli():
    from servewise.cli.main import cli as group

    runner = CliRunner()

    def invoke(*args: str, **kw):
        return runner.invoke(group, list(args), catch_exceptions=False, **kw)

    return invoke


@pytest.fixture(scope="session")
def rulebase():
    from servewise.engine.lang.rulebase import load_rules

    return load_rules()


@dataclass(frozen=True)
class PlannedExample:
    """One example planned in-process: the plan (as its JSON reads back), its canonical JSON (what
    `plan --format json` prints) and the engine work it took (engine.runner.WORK deltas, over
    every pool)."""

    path: Path
    plan: dict
    json_text: str
    work: dict


def _shared_dir(tmp_path_factory) -> Path | None:
    """A folder every xdist worker of this run shares (the run's own base temp folder), or None
    outside xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    d = tmp_path_factory.getbasetemp().parent / "shared"
    d.mkdir(exist_ok=True)
    return d


def shared_once(tmp_path_factory, name: str, key: str, compute: Callable[[], dict]) -> tuple[dict, bool]:
    """``compute()`` (a JSON-able dict) once per test run, shared by the xdist workers through a
    file of the run's temp folder: the worker computing ``name`` holds its lock, another one
    needing it waits and reads the file (so let workers take shared items in different orders,
    as :func:`_plan_examples` does). ``key`` (e.g. the knowledge hash and an input digest) must
    match or it is recomputed. Returns (value, whether it was computed here)."""
    shared = _shared_dir(tmp_path_factory)
    if shared is None:
        return compute(), True
    target = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if target.exists():
                stored = json.loads(target.read_text(encoding="utf-8"))
                if stored.get("key") == key:
                    return stored["value"], False
            value = compute()
            tmp = target.with_suffix(".tmp")
            tmp.write_text(json.dumps({"key": key, "value": value}), encoding="utf-8")
            tmp.replace(target)
            return value, True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _plan_examples(rulebase, tmp_path_factory) -> dict[str, PlannedExample]:
    from servewise.cli.render import to_json
    from servewise.engine.app.plan import plan_file
    from servewise.engine.runtime.runner import WORK

    def planned(path: Path) -> Callable[[], dict]:
        def compute() -> dict:
            before = Counter(WORK)
            result = plan_file(path, rulebase)
            work = {k: v for k, v in sorted((Counter(WORK) - before).items())}
            return {"json_text": to_json(result.plan), "work": work}
        return compute

    paths = sorted(EXAMPLES.glob("*.yaml"))
    # the workers take the examples in opposite orders, so that each plans about half of them
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    if worker.isdigit() and int(worker) % 2:
        paths.reverse()
    out = {}
    for path in paths:
        key = f"{rulebase.knowledge_hash} {hashlib.sha256(path.read_bytes()).hexdigest()}"
        value, _ = shared_once(tmp_path_factory, f"example-{path.stem}", key, planned(path))
        out[path.stem] = PlannedExample(path, json.loads(value["json_text"]), value["json_text"], value["work"])
    return dict(sorted(out.items()))


@pytest.fixture(scope="session")
def example_plans(rulebase, tmp_path_factory) -> dict[str, PlannedExample]:
    """Every example (examples/*.yaml, by file stem) planned once per test run, in-process.

    Use it in any module that only reads the example plans: ``example_plans["chat-70b-online"]``
    gives ``.plan`` (a dict as the JSON reads back; mutate a copy, it is shared), ``.json_text``
    (byte for byte what ``servewise plan X --format json`` prints; tests/test_examples.py checks
    that for one example through the CLI) and ``.work`` (engine work counters). Under xdist the
    workers share the plans through files of the run's temp folder, each planning about half of
    the examples. Modules that test the CLI itself still run it."""
    return _plan_examples(rulebase, tmp_path_factory)


def pytest_configure(config):
    os.environ.setdefault("PYTHONHASHSEED", "random")


# Tests that share an expensive per-process cache run on one xdist worker (`make test` passes
# `--dist loadgroup`), so that the cache is filled once instead of once per worker: the rule cases'
# workload runs (engine.ruletest keeps them per process) and the guideline tests' `plan` fixture.
XDIST_GROUPS = {"test_rule_cases.py": "rule-case-workloads"}
XDIST_GROUP_FIXTURES = {"plan": "guideline-plans"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        group = XDIST_GROUPS.get(item.path.name) or next(
            (g for f, g in XDIST_GROUP_FIXTURES.items() if f in getattr(item, "fixturenames", ())), None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private servewise cache folder for one test (SERVEWISE_CACHE_DIR), caching switched on."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SERVEWISE_CACHE_DIR", str(folder))
    monkeypatch.delenv("SERVEWISE_NO_CACHE", raising=False)
    return folder


def json_paths(node, prefix=(), items: int = 6):
    """Every path into a JSON document (a list's first ``items`` entries), the document's own first."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from json_paths(v, (*prefix, k), items)
    elif isinstance(node, list):
        for i, v in enumerate(node[:items]):
            yield from json_paths(v, (*prefix, i), items)


def mutate_json(doc, paths, data, values, times: int) -> None:
    """Change ``doc`` in place at ``times`` paths drawn by hypothesis ``data`` from ``paths``: drop
    the key, or put a value drawn from the strategy ``values`` there (paths gone by now are skipped)."""
    from hypothesis import strategies as st

    mutate_with(doc, lambda: data.draw(st.sampled_from(paths)), lambda: data.draw(st.booleans()),
                lambda: data.draw(values), times)


def mutate_with(doc, path, drop, value, times: int) -> None:
    """:func:`mutate_json` with any source of draws: ``path()`` a path of ``doc``, ``drop()``
    whether to drop a dictionary's key there, ``value()`` what to put there otherwise."""
    for _ in range(times):
        parent, where = doc, path()
        try:
            for part in where[:-1]:
                parent = parent[part]
            if drop() and isinstance(parent, dict):
                parent.pop(where[-1], None)
            else:
                parent[where[-1]] = value()
        except (KeyError, IndexError, TypeError):
            continue
