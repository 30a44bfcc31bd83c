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


def test_every_warning_can_be_explained(plans):
    """An auditor can ask about a warning by its rule id (issue #39 item 6): the chain starts at the step
    that warned and runs back to the inputs."""
    asked = 0
    for name, plan in plans.items():
        for w in plan["warnings"][:6]:
            chain = explain(plan, w["rule"])
            assert chain["target"] == f"warning {w['rule']}", name
            assert chain["steps"] and chain["steps"][0]["rule"] == w["rule"], (name, w["rule"])
            asked += 1
    assert asked > 100


def test_explain_a_warning_through_the_cli(cli, tmp_path):
    plan = tmp_path / "plan.json"
    assert cli("plan", str(EXAMPLES / "chat-70b-online.yaml"), "--format", "json", "-o", str(plan)).exit_code == 0
    result = cli("explain", str(plan), "warning:market.restricted-option")
    assert result.exit_code == 0, result.output
    assert "explain warning market.restricted-option" in result.output
    assert "allow_restricted" in result.output
