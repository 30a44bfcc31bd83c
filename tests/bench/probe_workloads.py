#!/usr/bin/env python3
"""Probe: plan thousands of workloads that the workload schema accepts and report any that exit
outside {0, 1, 2} or exceed the time or memory budget (issue #42).

Each workload (tests/workload_strategies.py, drawn from `servewise schema workload`) is written to
a file and planned by the real CLI entry point (`servewise.cli.main.run`) in a process forked from
one that has loaded the rules and the catalog, so a case costs a plan, not a start-up. The child
gets an alarm at the time budget; its peak memory is the child's maximum resident set size
(wait4), which counts the pages shared with the parent too, so it is an upper bound.

    .venv/bin/python tests/bench/probe_workloads.py --cases 2000 --jobs 2
    .venv/bin/python tests/bench/probe_workloads.py --cases 200 --seed 7 --keep /tmp/failures

Exit status 0 when every case was within {0, 1, 2} and its budget, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from workload_strategies import workloads  # noqa: E402


def _child(path: str, out_fd: int, budget_s: float, mem_bytes: int) -> None:  # pragma: no cover
    """In the forked process: plan ``path`` as the CLI would, stdout discarded, stderr kept."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(out_fd, 2)
    signal.alarm(int(budget_s) + 1)
    if mem_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    from servewise.cli.main import run

    sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8")
    code = run(["plan", path, "--format", "json"])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--jobs", type=int, default=1, help="children at once")
    ap.add_argument("--seconds", type=float, default=20.0, help="time budget per case")
    ap.add_argument("--gib", type=float, default=2.0, help="memory budget per case (peak RSS)")
    ap.add_argument("--keep", type=Path, help="folder to copy failing workloads to")
    ap.add_argument("--json", type=Path, help="write every case's result here")
    args = ap.parse_args()

    os.environ.setdefault("SERVEWISE_WORKERS", "1")  # one process per case: the budget is per case
    from servewise.cli.main import run
    from servewise.engine.lang.rulebase import load_rules

    load_rules()  # loaded once, shared by every forked child
    with tempfile.TemporaryDirectory() as warm:
        w = Path(warm) / "w.yaml"
        w.write_text("model: Llama-3.1-8B\n")
        saved = os.dup(1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        run(["plan", str(w), "--format", "json"])
        os.dup2(saved, 1)

    tmp = Path(tempfile.mkdtemp(prefix="servewise-probe-"))
    running: dict[int, tuple[int, Path, float, Path]] = {}
    results: list[dict] = []

    def reap(block: bool) -> None:
        while running:
            pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
            if pid == 0:
                return
            n, path, started, err = running.pop(pid)
            code = os.waitstatus_to_exitcode(status)
            elapsed = time.monotonic() - started
            stderr = err.read_text(errors="replace").strip().splitlines()
            results.append({"case": n, "exit": code, "seconds": round(elapsed, 2),
                            "max_rss_mib": round(usage.ru_maxrss / 1024), "stderr": stderr[:3],
                            "workload": path.read_text()})
            if not block:
                continue
            return

    counter = [0]

    @seed(args.seed)
    @settings(max_examples=args.cases, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(workloads())
    def case(data: dict) -> None:
        n = counter[0]
        counter[0] += 1
        path = tmp / f"case-{n:05d}.yaml"
        path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
        err = tmp / f"case-{n:05d}.err"
        while len(running) >= args.jobs:
            reap(True)
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        pid = os.fork()
        if pid == 0:  # pragma: no cover
            try:
                _child(str(path), fd, args.seconds, int(6 * 2**30))
            finally:
                os._exit(99)
        os.close(fd)
        running[pid] = (n, path, time.monotonic(), err)
        if n % 100 == 0:
            print(f"  {n} cases ...", file=sys.stderr, flush=True)

    case()
    while running:
        reap(True)

    bad = [r for r in results if r["exit"] not in (0, 1, 2) or r["seconds"] > args.seconds
           or r["max_rss_mib"] > args.gib * 1024]
    exits = collections.Counter(r["exit"] for r in results)
    causes = collections.Counter((r["stderr"][0][:110] if r["stderr"] else f"exit {r['exit']}") for r in bad)
    print(f"{len(results)} schema-valid workloads planned; exit codes {dict(sorted(exits.items()))}")
    print(f"slowest {max(r['seconds'] for r in results):.1f} s, "
          f"largest peak RSS {max(r['max_rss_mib'] for r in results)} MiB "
          f"(budgets {args.seconds:.0f} s, {args.gib:.1f} GiB)")
    print(f"{len(bad)} outside exit {{0, 1, 2}} or over budget")
    for cause, count in causes.most_common():
        print(f"  {count:4d}  {cause}")
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        for r in bad:
            (args.keep / f"case-{r['case']:05d}.yaml").write_text(r["workload"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
