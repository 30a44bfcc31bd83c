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


def synthetic_rules(folder: Path, n: int) -> None:
    """n extra check-stage rules, each reading two facts of the plan and warning on a threshold."""
    lines = []
    for i in range(n):
        lines.append(f"""- id: bench.rule-{i:05d}
  title: {{en: bench {i}, zh: bench {i}}}
  source: {{guideline: G-SLA-001}}
  stage: checks
  when: ["performance.tpot_ms > {i % 97}", "cost.capex_cny > {i * 1000}"]
  then: [{{warn: {{severity: info}}}}]
  because: {{en: "bench {i}", zh: "bench {i}"}}
""")
    (folder / "bench.yaml").write_text("".join(lines), encoding="utf-8")


def growth() -> None:
    import tempfile

    from servewise.engine.plan import plan_file
    from servewise.engine.rulebase import load_rules
    from servewise.engine.runner import Runner

    for n in (0, 200, 1000, 3000):
        with tempfile.TemporaryDirectory() as tmp:
            synthetic_rules(Path(tmp), n)
            t = time.perf_counter()
            rb = load_rules([Path(tmp)])
            load = time.perf_counter() - t
            t = time.perf_counter()
            Runner(rb)
            build = time.perf_counter() - t
            t = time.perf_counter()
            plan_file(ROOT / "examples" / "chat-70b-online.yaml", rb)
            run = time.perf_counter() - t
        print(f"+{n:5d} rules ({len(rb.rules):5d} total): load {load:5.2f} s, build {build:5.2f} s, "
              f"plan {run:5.2f} s")


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
    growth()
