"""experta works on modern Python through one compat module, with a stable, exact agenda."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT


def test_only_the_compat_module_imports_experta():
    pattern = re.compile(r"^\s*(import experta|from experta)", re.M)
    offenders = []
    for folder in ("engine", "cli", "facts", "rules", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "experta_compat.py":
                continue
            if pattern.search(path.read_text(encoding="utf-8")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_import_leaves_collections_clean_and_logging_quiet():
    code = (
        "import collections, logging\n"
        "import servewise.engine.runtime.experta_compat as c\n"
        "assert c.experta.__version__ == '1.9.4'\n"
        "assert not hasattr(collections, 'Mapping')\n"
        "assert not any(isinstance(h, logging.StreamHandler) for h in logging.getLogger().handlers)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _run_stale_case(strategy, n: int = 6) -> list[int]:
    """EXPERTA-NOTES bug 2: equal-key activations added one by one, then all removed at once.

    Six rules match the same fact with equal salience; their activations arrive in reverse
    order (as NOT(Hold) conditions clear), then a Block fact removes all of them. A strategy that
    fails to find a removed activation lets it fire although NOT(Block) is false.
    """
    from servewise.engine.runtime.experta_compat import NOT, Fact, KnowledgeEngine, Rule

    class Item(Fact):
        pass

    class Hold(Fact):
        pass

    class Block(Fact):
        pass

    fired: list[int] = []
    attrs = {"__strategy__": strategy}

    def make(i):
        def rhs(self):
            fired.append(i)
        return Rule(Item(), NOT(Hold(i=i)), NOT(Block()))(rhs)

    for i in range(n):
        attrs[f"r{i}"] = make(i)
    engine = type("E", (KnowledgeEngine,), attrs)()
    engine.reset()
    engine.declare(Item())
    holds = [engine.declare(Hold(i=i)) for i in range(n)]
    for hold in reversed(holds):
        engine.retract(hold)
    engine.declare(Block())
    engine.run()
    return fired


def test_stock_strategy_fires_removed_activations():
    """The reproduction: experta's DepthStrategy leaves removed activations on the agenda."""
    from servewise.engine.runtime.experta_compat import StockStrategy

    stale = sum(bool(_run_stale_case(StockStrategy)) for _ in range(50))
    assert stale > 0


def test_removed_activations_never_fire():
    from servewise.engine.runtime.experta_compat import StableStrategy

    assert all(_run_stale_case(StableStrategy) == [] for _ in range(200))


def test_equal_salience_order_is_load_order():
    from servewise.engine.runtime.experta_compat import Fact, KnowledgeEngine, Rule, StableStrategy

    class Item(Fact):
        pass

    fired: list[int] = []
    attrs = {"__strategy__": StableStrategy}
    for i in range(6):
        def rhs(self, i=i):
            fired.append(i)
        rhs.load_order = i
        attrs[f"r{i}"] = Rule(Item())(rhs)
    engine = type("E", (KnowledgeEngine,), attrs)()
    engine.reset()
    engine.declare(Item())
    engine.run()
    assert fired == [0, 1, 2, 3, 4, 5]


@pytest.mark.slow
def test_plan_is_byte_identical_in_five_fresh_processes():
    code = (
        "import sys\n"
        "from servewise.cli.main import cli\n"
        "cli(['plan', sys.argv[1], '--format', 'json'], standalone_mode=False)\n"
    )
    outputs = set()
    for seed in ("1", "2", "3", "4", "5"):
        out = subprocess.run(
            [sys.executable, "-c", code, str(ROOT / "examples" / "chat-70b-online.yaml")],
            check=True, capture_output=True, env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        ).stdout
        outputs.add(out)
    assert len(outputs) == 1
    assert b'"knowledge_hash"' in outputs.pop()
