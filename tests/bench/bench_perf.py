"""Benchmark (not a test): validate over the shipped rows, and in-process estimate latency.

    python tests/bench/bench_perf.py

Targets: validate over all shipped rows (four files, ~3,400 rows) < 10 s; one estimate well
under 1 ms; open-loop max_concurrency (bisection over a bisection) fast enough for the rules;
max_concurrency (bisection over the fast path, called once per candidate by the rules) fast.
"""

from __future__ import annotations

import time

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate, max_concurrency
from servewise.engine.domain.perf.data import DEFAULT_FILES
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.serving import predict
from servewise.engine.domain.perf.validate import validate


def main() -> None:
    t = time.perf_counter()
    r = validate([DEFAULT_FILES[0]])
    dt = time.perf_counter() - t
    print(f"validate measured.csv ({len(r['rows'])} rows): {dt:.2f} s  (target < 10 s)")
    t = time.perf_counter()
    validate()
    print(f"validate all shipped files: {time.perf_counter() - t:.2f} s  (target < 10 s)")

    cat = load_catalog()
    m, g = cat.model("Llama-3.1-70B"), cat.gpu("H200 SXM")
    cases = {
        "estimate (with explanation steps)": lambda: estimate(
            m, g, tp=4, precision="fp8", isl=1024, osl=256, concurrency=32),
        "predict (fast path, no steps)": lambda: predict(
            m, g, Layout(tp=4), precision="fp8", isl=1024, osl=256, concurrency=32),
        "max_concurrency (TTFT 2 s, TPOT 50 ms)": lambda: max_concurrency(
            m, g, tp=4, precision="fp8", isl=1024, osl=256, ttft_ms=2000, tpot_ms=50),
        "max_concurrency open loop (P99 TTFT 2 s)": lambda: max_concurrency(
            m, g, tp=4, precision="fp8", isl=1024, osl=256, ttft_ms=2000, tpot_ms=50,
            arrival="poisson"),
    }
    for name, fn in cases.items():
        fn()
        n = 500
        t = time.perf_counter()
        for _ in range(n):
            fn()
        print(f"{name}: {(time.perf_counter() - t) / n * 1e3:.3f} ms per call")


if __name__ == "__main__":
    main()
