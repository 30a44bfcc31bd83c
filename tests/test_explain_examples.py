"""`explain` works for every component and `why-not` for every rejected GPU of every example."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES

from servewise.engine.app.explain import explain, why_not

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))


@pytest.fixture(scope="module")
def plans(example_plans):
    """Fresh copies of the session's example plans (conftest.example_plans plans them once)."""
    return {name: json.loads(ex.json_text) for name, ex in example_plans.items()}


@pytest.mark.parametrize("name", [p.stem for p in EXAMPLE_FILES])
def test_explain_and_why_not_everywhere(plans, name):
    plan = plans[name]
    if plan["feasible"]:
        for component in plan["components"]:
            chain = explain(plan, component)
            assert chain["steps"], f"{name}: no chain for {component}"
    gpus = sorted({r["option"].split(" | ")[0] for r in plan["rejected"] if r["kind"] == "candidate"})
    assert gpus, name
    for gpu in gpus:
        answer = why_not(plan, gpu)
        assert answer["status"] in ("rejected", "never-candidate", "chosen"), (name, gpu, answer["status"])
        if answer["status"] != "chosen":
            assert answer["groups"], (name, gpu)
