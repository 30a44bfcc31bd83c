"""Every example plans (or reports infeasible with the reason), every component is explained, and
each explanation is snapshotted so a behaviour change shows up as a reviewable diff.

Update the snapshots after an intended change with:
    SERVEWISE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_examples.py
"""

from __future__ import annotations

import json
import os
import re

import jsonschema
import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT

from servewise.cli.main import cli
from servewise.cli.render import to_text
from servewise.engine.app.plan import COMPONENT_FIELDS

EXAMPLE_FILES = sorted(EXAMPLES.glob("*.yaml"))
PLAN_SCHEMA = json.loads((ROOT / "facts" / "schemas" / "plan.schema.json").read_text(encoding="utf-8"))
SNAPSHOTS = ROOT / "tests" / "snapshots"


def test_there_are_at_least_twelve_examples():
    assert len(EXAMPLE_FILES) >= 12


def _chain(plan: dict, comp: str) -> list[str]:
    """Rule ids on the explanation chain of one component, in step order."""
    by_no = {s["step"]: s for s in plan["trace"]}
    todo = [s["step"] for s in plan["trace"]
            if any(c["fact"].startswith(f"components.{comp}.") for c in s["conclusions"])]
    seen: set[int] = set()
    while todo:
        n = todo.pop()
        if n in seen or n not in by_no:
            continue
        seen.add(n)
        todo += [p["step"] for p in by_no[n]["premises"] if "step" in p]
    return [by_no[n]["rule"] for n in sorted(seen)]


def snapshot_text(plan: dict, text: str) -> str:
    text = re.sub(r"knowledge sha256:[0-9a-f]+", "knowledge <hash>", text)
    lines = [text, "Explanation chains"]
    for comp in plan["components"]:
        lines.append(f"  {comp}: " + " → ".join(dict.fromkeys(_chain(plan, comp))))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", ["chat-70b-online", "chat-8b-small"])
def test_cli_plan_json_is_the_in_process_plan(example_plans, name, tmp_path):
    """The CLI prints, and writes with -o, exactly the plan the shared fixture computes in-process
    (two examples: the other tests read the fixture, or a file of its JSON, instead of running
    the CLI again)."""
    path = EXAMPLES / f"{name}.yaml"
    out = tmp_path / "plan.json"
    args = ["--lang", "en", "plan", str(path), "--format", "json"]
    result = CliRunner().invoke(cli, args if name == "chat-70b-online" else [*args, "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = result.output if name == "chat-70b-online" else out.read_text(encoding="utf-8")
    assert text == example_plans[name].json_text


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=[p.stem for p in EXAMPLE_FILES])
def test_example(path, example_plans):
    plan = json.loads(example_plans[path.stem].json_text)  # a fresh copy: the fixture is shared
    jsonschema.validate(plan, PLAN_SCHEMA)
    if plan["feasible"]:
        for comp, section in plan["components"].items():
            assert _chain(plan, comp), f"{comp} has no explanation"
            if comp in COMPONENT_FIELDS:  # the contract's fields are always decided
                assert all(section[f] is not None for f in COMPONENT_FIELDS[comp]), comp
    else:
        assert plan["rejected"], "an infeasible plan must say what was rejected and why"
        assert any(w["severity"] == "critical" for w in plan["warnings"])
    text = to_text(plan, "en")  # the same renderer `servewise plan` uses, without a second run
    snap = snapshot_text(plan, text)
    target = SNAPSHOTS / f"{path.stem}.txt"
    if os.environ.get("SERVEWISE_UPDATE_SNAPSHOTS"):
        target.write_text(snap, encoding="utf-8")
    assert target.exists(), f"no snapshot for {path.name}; create it with SERVEWISE_UPDATE_SNAPSHOTS=1"
    assert snap == target.read_text(encoding="utf-8"), (
        f"explanation of {path.name} changed; review and update with SERVEWISE_UPDATE_SNAPSHOTS=1")
