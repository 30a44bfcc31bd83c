"""The engine's folders are its layers (#14, DESIGN.md): arrows point down only, and no module
imports another in a cycle. Imports inside functions count too: a lazy import upward is still an
arrow upward."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

ENGINE = ROOT / "engine"
# layer -> the layers it may import (itself included); from the bottom up
ALLOWED = {
    "common": {"common"},
    "domain": {"common", "domain"},
    "lang": {"common", "domain", "lang"},
    "runtime": {"common", "domain", "lang", "runtime"},
    "app": {"common", "domain", "lang", "runtime", "app"},
}


def _module(path: Path) -> str:
    """engine/runtime/runner.py -> runtime.runner; engine/domain/perf/__init__.py -> domain.perf."""
    parts = list(path.relative_to(ENGINE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _target(node: ast.ImportFrom, here: str, is_package: bool) -> list[str]:
    """Engine modules an import names (relative or absolute), as dotted names below engine/."""
    if node.level:
        base = here.split(".") if is_package else here.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    elif node.module and node.module.startswith("servewise.engine"):
        mod = node.module[len("servewise.engine"):].lstrip(".")
    else:
        return []
    if not mod:
        return [a.name for a in node.names]
    return [mod]


def _imports(top_level_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(ENGINE.rglob("*.py")):
        if "__pycache__" in path.parts or path.parent == ENGINE:
            continue
        here = _module(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        deps: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                deps |= {d for d in _target(node, here, path.name == "__init__.py") if d != here}
        graph[here] = deps
    return graph


def _layer(module: str) -> str:
    return module.split(".")[0]


def test_every_engine_module_sits_in_a_layer_folder():
    loose = sorted(p.name for p in ENGINE.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside the layer folders: {loose}"
    assert {p.name for p in ENGINE.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ALLOWED)


def test_imports_point_down_only():
    wrong = [f"{m} -> {d}" for m, deps in _imports(top_level_only=False).items() for d in sorted(deps)
             if _layer(d) not in ALLOWED[_layer(m)]]
    assert not wrong, "imports against the layers: " + "; ".join(wrong)


def test_no_import_cycle_between_engine_modules():
    graph = _imports(top_level_only=True)
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
    graph = _imports(top_level_only=True)
    assert "app.plan" not in graph["app.pools"] and "app.plan_contract" in graph["app.pools"]
    assert "app.pools" in graph["app.plan"]


def test_runner_parts_each_have_one_job():
    graph = _imports(top_level_only=True)
    assert "runtime.experta_compat" in graph["runtime.compiler"] and "runtime.actions" not in graph["runtime.compiler"]
    runner_users = graph["runtime.actions"] | graph["runtime.compiler"] | graph["runtime.memory"] | graph["runtime.justify"]
    assert "runtime.runner" not in runner_users


def test_only_the_compat_module_imports_experta():
    importers = []
    for path in sorted(ENGINE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "experta" or n.startswith("experta.") for n in names):
                importers.append(_module(path))
    assert set(importers) == {"runtime.experta_compat"}


def test_every_domain_function_is_wrapped_whichever_module_is_imported_first():
    """Importing a fn_* module first makes engine/domain/functions.py load the others while that one
    is half-imported, so its functions register after the registry was wrapped: they must still get
    their memo and their catalog-read records (else a plan made in such a process loses the
    `catalog` details of its conclusions and is no longer byte-identical)."""
    import subprocess
    import sys

    probe = (
        "import servewise.engine.domain.fn_sizing\n"
        "from servewise.engine.domain.functions import FUNCTIONS, META\n"
        "bad = [n for n, m in META.items() if (m.reads and not getattr(FUNCTIONS[n], 'records_reads', False))"
        " or (m.memoise and not getattr(FUNCTIONS[n], 'memoised', False))]\n"
        "print(len(META), bad)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split(maxsplit=1)
    assert int(out[0]) > 80 and out[1].strip() == "[]", out


def test_every_function_module_can_be_imported_first():
    """Whichever fn_* module a process imports first, the import succeeds and every function is
    wrapped: a fn_* module that took names from another at import time failed when that other was
    the first (engine/domain/functions.py loads them all while it is half-imported). One process,
    the domain's modules dropped from sys.modules before each import."""
    import subprocess
    import sys

    names = sorted(p.stem for p in (ROOT / "engine" / "domain").glob("fn_*.py"))
    probe = (
        "import importlib, sys\n"
        f"names = {names!r}\n"
        "bad = []\n"
        "for name in names:\n"
        "    for m in [m for m in sys.modules if m.startswith('servewise.engine.domain')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module('servewise.engine.domain.' + name)\n"
        "        from servewise.engine.domain.functions import FUNCTIONS, META\n"
        "        if any(m.memoise and not getattr(FUNCTIONS[n], 'memoised', False) for n, m in META.items()):\n"
        "            bad.append(name + ': unwrapped')\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {exc!r}')\n"
        "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert len(names) > 10 and out.strip() == "[]", out
