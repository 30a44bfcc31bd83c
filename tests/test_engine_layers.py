"""The engine's modules import each other without cycles (#14): e.g. pools.py reads the plan's
parts from plan_contract.py, not from plan.py, which plans one pool and calls pools.py."""

from __future__ import annotations

import ast

from conftest import ROOT

ENGINE = ROOT / "engine"


def _imports() -> dict[str, set[str]]:
    """Module-level relative imports of every engine module (imports inside functions are lazy)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(ENGINE.glob("*.py")):
        deps: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        graph[path.stem] = deps
    return graph


def test_no_import_cycle_between_engine_modules():
    graph = _imports()
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        for dep in sorted(graph.get(name, ())):
            assert dep not in path, "import cycle: " + " -> ".join(path[path.index(dep):] + [dep])
            if dep in graph and dep not in done:
                visit(dep, path + [dep])
        done.add(name)

    for name in graph:
        visit(name, [name])


def test_pools_do_not_import_the_single_pool_planner():
    graph = _imports()
    assert "plan" not in graph["pools"] and "plan_contract" in graph["pools"]
    assert "pools" in graph["plan"]


def test_runner_parts_each_have_one_job():
    graph = _imports()
    assert "experta_compat" in graph["compiler"] and "actions" not in graph["compiler"]
    assert "runner" not in graph["actions"] | graph["compiler"] | graph["memory"] | graph["justify"]
