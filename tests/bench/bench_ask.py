"""Benchmark (not a test): `servewise ask` latency, the interview target of issue #14.

    .venv/bin/python tests/bench/bench_ask.py                  # every example, 3 runs each
    .venv/bin/python tests/bench/bench_ask.py --runs 1 --examples chat-70b-online offline-batch
    .venv/bin/python tests/bench/bench_ask.py --code /path/to/pkgroot   # another checkout

Answer → next prompt: each example's interview is driven through cli/cmd_ask.py's ``Interview``
(the code behind the terminal: checking, saving the answers file, choosing the next question,
printing it) in a fresh process per example and run, answering every question with the
example's value (``skip`` for the inputs it leaves at their default). The time is measured from
the moment an answer line is returned to the interview until the next prompt is written:
median, p95 and max (wall, and CPU seconds of the interview process, which a busy machine inflates
much less) over every answer of every interview (the answers that end the interview,
followed by the plan instead of a prompt, are given apart). `servewise ask` loads the catalog
(~0.2 s) once the first prompt is shown, while the operator reads it and types; the scripted
operator answers at once, so that time is printed apart: it is in neither figure, and an answer
typed faster than it waits for it. Start → first prompt: a fresh ``servewise ask`` process until
it writes ``model> ``. Targets: median ≤ 100 ms, p95 ≤ 200 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
MAIN = "import sys; from servewise.cli.main import main; sys.argv[0] = 'servewise'; main()"

CHILD = r"""
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
import yaml
from servewise.cli import cmd_ask
from servewise.engine.app import interview as iv
from servewise.engine.app.inputs import get_path, input_defs
from servewise.engine.lang.rulebase import load_rules

example, save = Path(sys.argv[1]), Path(sys.argv[2])
data = yaml.safe_load(example.read_text(encoding="utf-8"))
given = {d.key: cmd_ask._fmt(get_path(data, d.key)) for d in input_defs() if get_path(data, d.key) is not None}


class Scripted(cmd_ask.Terminal):
    # a terminal whose operator answers at once from the example: the time from an answer to the
    # next prompt is the interview's own latency
    def __init__(self):
        super().__init__("en")
        self.color = False
        self.out = []
        self.latencies = []
        self.cpu = []
        self.keys = []
        self.answered_at = None
        self.answered_cpu = None
        self.meanwhile = []
        self.tries = {}

    def say(self, text="", style=None):
        self.out.append(text)

    def read(self, prompt, meanwhile=None):
        now, cpu = time.perf_counter(), time.process_time()
        if self.answered_at is not None:
            self.latencies.append(now - self.answered_at)
            self.cpu.append(cpu - self.answered_cpu)
        if meanwhile is not None:  # work done while the operator reads the prompt: timed apart
            meanwhile()
            self.meanwhile.append(time.perf_counter() - now)
        key = prompt[:-2]
        self.keys.append(key)
        self.tries[key] = self.tries.get(key, 0) + 1
        text = given.get(key, "skip") if self.tries[key] == 1 else "skip"
        self.answered_at, self.answered_cpu = time.perf_counter(), time.process_time()
        return text


rulebase = load_rules()
term = Scripted()
runner = cmd_ask.Interview(term, iv.Session(), save, rulebase)
runner.persist()
plan = runner.run()
final = time.perf_counter() - term.answered_at
print(json.dumps({"latencies": term.latencies, "cpu": term.cpu, "keys": term.keys,
                  "meanwhile": max(term.meanwhile, default=0.0), "final": final, "questions": len(term.latencies) + 1,
                  "feasible": plan["feasible"]}))
"""


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))]


def first_prompt(env: dict[str, str]) -> float:
    """Seconds from starting `servewise ask` to its first prompt (``model> ``)."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", MAIN, "--lang", "en", "ask"], cwd=tmp, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        seen = b""
        assert proc.stdout is not None
        while b"model> " not in seen:
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            chunk = os.read(proc.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                break
            seen += chunk
        took = time.perf_counter() - start
        proc.kill()
        proc.wait()
        return took


def bench(code: str | None, runs: int, examples: list[Path]) -> dict[str, object]:
    env = {**os.environ, "NO_COLOR": "1"}
    if code:
        env["PYTHONPATH"] = code + os.pathsep + env.get("PYTHONPATH", "")
    all_lat: list[float] = []
    all_cpu: list[float] = []
    finals: list[float] = []
    meanwhile: list[float] = []
    per: dict[str, dict[str, float]] = {}
    for ex in examples:
        if "model" not in yaml.safe_load(ex.read_text(encoding="utf-8")):
            continue  # several models (`models:`): the interview plans one model
        lat: list[float] = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                proc = subprocess.run([sys.executable, "-c", CHILD, str(ex), str(Path(tmp) / "a.yaml")],
                                      env=env, capture_output=True, text=True,
                                      check=False, cwd=ROOT)
            if proc.returncode:
                print(f"  {ex.stem}: failed\n{proc.stderr[-2000:]}", flush=True)
                break
            out = json.loads(proc.stdout)
            lat += out["latencies"]
            all_cpu += out["cpu"]
            finals.append(out["final"])
            meanwhile.append(out.get("meanwhile", 0.0))
        if not lat:
            continue
        all_lat += lat
        per[ex.stem] = {"answers": len(lat), "median": statistics.median(lat), "p95": pct(lat, 0.95),
                        "max": max(lat)}
        print(f"  {ex.stem:30s} {len(lat) // runs:3d} answers  median {1000 * statistics.median(lat):7.1f} ms  "
              f"p95 {1000 * pct(lat, 0.95):7.1f} ms  max {1000 * max(lat):7.1f} ms", flush=True)
    first_prompt(env)  # warm the OS file cache and the rule cache; not counted
    starts = [first_prompt(env) for _ in range(max(runs, 5))]
    result = {
        "runs": runs, "code": code or str(ROOT), "examples": per,
        "answer_to_prompt": {"answers": len(all_lat), "median": statistics.median(all_lat),
                             "p95": pct(all_lat, 0.95), "max": max(all_lat)},
        "answer_to_prompt_cpu": {"median": statistics.median(all_cpu), "p95": pct(all_cpu, 0.95),
                                 "max": max(all_cpu)},
        "last_answer_to_plan": {"median": statistics.median(finals), "max": max(finals)},
        "first_prompt_meanwhile": {"median": statistics.median(meanwhile), "max": max(meanwhile)},
        "start_to_first_prompt": {"median": statistics.median(starts), "min": min(starts), "max": max(starts)},
    }
    a, f, s = result["answer_to_prompt"], result["last_answer_to_plan"], result["start_to_first_prompt"]
    c = result["answer_to_prompt_cpu"]
    print(f"answer → next prompt ({a['answers']} answers): median {1000 * a['median']:.1f} ms (≤ 100)  "
          f"p95 {1000 * a['p95']:.1f} ms (≤ 200)  max {1000 * a['max']:.1f} ms; CPU of the interview "
          f"process: median {1000 * c['median']:.1f} ms  p95 {1000 * c['p95']:.1f} ms  max {1000 * c['max']:.1f} ms")
    m = result["first_prompt_meanwhile"]
    print(f"loading done while the first prompt waits (before the operator's answer is read): "
          f"median {1000 * m['median']:.0f} ms  max {1000 * m['max']:.0f} ms")
    print(f"last answer → plan computed (the whole plan, once): median {f['median']:.2f} s  max {f['max']:.2f} s")
    print(f"start → first prompt: median {s['median']:.2f} s  (min {s['min']:.2f}, max {s['max']:.2f})")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="interviews per example (fresh processes)")
    ap.add_argument("--code", help="folder holding servewise/ to benchmark instead of this checkout")
    ap.add_argument("--examples", nargs="*", help="only these example names")
    ap.add_argument("--json", type=Path, help="write the raw results here")
    args = ap.parse_args()
    examples = [e for e in EXAMPLES if not args.examples or e.stem in args.examples]
    result = bench(args.code, args.runs, examples)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
