"""Shared fixtures: the CLI runner and paths of the repository."""

from __future__ import annotations

import os
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


def pytest_configure(config):
    os.environ.setdefault("PYTHONHASHSEED", "random")
