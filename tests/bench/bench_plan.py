"""Benchmark (not a test): cold `servewise plan` per example, and rule-base load/build time.

    .venv/bin/python tests/bench/bench_plan.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVEWISE = Path(sys.executable).parent / "servewise"


def cold_plan(example: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(SERVEWISE), "plan", str(example), "--format", "json"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    from servewise.engine.plan import plan_file
    from servewise.engine.rulebase import load_rules
    from servewise.engine.runner import Runner

    t = time.perf_counter()
    rb = load_rules()
    load = time.perf_counter() - t
    t = time.perf_counter()
    Runner(rb)
    build = time.perf_counter() - t
    print(f"rule base: {len(rb.rules)} rules, load+validate {load * 1000:.0f} ms, "
          f"build Rete {build * 1000:.0f} ms")
    for example in sorted((ROOT / "examples").glob("*.yaml")):
        cold = min(cold_plan(example) for _ in range(2))
        t = time.perf_counter()
        result = plan_file(example, rb)
        warm = time.perf_counter() - t
        fired = sum(result.memory.fired.values())
        print(f"{example.stem:32s} cold {cold:5.2f} s  in-process {warm:5.2f} s  "
              f"{fired:5d} firings  {len(result.memory.items):4d} candidates")


if __name__ == "__main__":
    main()
