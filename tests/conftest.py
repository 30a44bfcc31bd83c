"""Shared fixtures: the CLI runner and paths of the repository."""

from __future__ import annotations

import os
from collections import Counter
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
    from servewise.engine.rulebase import load_rules

    return load_rules()


@dataclass(frozen=True)
class PlannedExample:
    """One example planned in-process: the plan, its canonical JSON (what `plan --format json`
    prints) and the engine work it took (engine.runner.WORK deltas, over every pool)."""

    path: Path
    plan: dict
    json_text: str
    work: dict


@pytest.fixture(scope="session")
def example_plans(rulebase) -> dict[str, PlannedExample]:
    """Every example planned once per test session (per xdist worker), for all modules that only
    read the plans; modules that test the CLI itself still run it."""
    from servewise.cli.render import to_json
    from servewise.engine.plan import plan_file
    from servewise.engine.runner import WORK

    out = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        before = Counter(WORK)
        result = plan_file(path, rulebase)
        work = {k: v for k, v in sorted((Counter(WORK) - before).items())}
        out[path.stem] = PlannedExample(path, result.plan, to_json(result.plan), work)
    return out


def pytest_configure(config):
    os.environ.setdefault("PYTHONHASHSEED", "random")
