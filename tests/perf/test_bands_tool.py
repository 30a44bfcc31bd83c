"""The out-of-sample bands tool (tools/perf/bands.py): its pure parts, on synthetic residuals
(no refit, no numpy or scipy)."""

import math
import random
import subprocess
import sys
from pathlib import Path

import yaml

from servewise.engine.domain.perf.bands import ANY, lookup
from servewise.engine.domain.perf.validate import quantile
from tools.perf.bands import (
    assign_folds,
    band,
    bands_dict,
    build_regimes,
    coverage_cv,
    header,
    level_keys,
    median_ape,
)

ROOT = Path(__file__).resolve().parents[2]


def _counts(n: int = 40, seed: int = 1) -> dict[tuple[str, str, str, str, str], int]:
    rng = random.Random(seed)
    return {(f"f{i % 3}.csv", f"model{i}", ("vllm", "sglang", "trtllm")[i % 3], f"gpu{i % 5}",
             "fp8"): rng.randint(1, 200) for i in range(n)}


def test_folds_are_deterministic_and_independent_of_insertion_order():
    counts = _counts()
    a = assign_folds(counts, 8)
    b = assign_folds(dict(reversed(list(counts.items()))), 8)
    assert a == b == assign_folds(counts, 8)
    assert set(a) == set(counts) and set(a.values()) == set(range(8))


def test_folds_are_balanced_by_rows():
    counts = _counts()
    a = assign_folds(counts, 8)
    rows = [sum(n for c, n in counts.items() if a[c] == k) for k in range(8)]
    # greedy largest-first: no fold exceeds another by more than the largest campaign
    assert max(rows) - min(rows) <= max(counts.values())
    assert max(rows) <= sum(counts.values()) / 8 + max(counts.values())


def test_folds_greedy_ties():
    counts = {("a",) * 5: 10, ("b",) * 5: 10, ("c",) * 5: 5, ("d",) * 5: 5}
    a = assign_folds(counts, 2)
    assert a[("a",) * 5] == 0 and a[("b",) * 5] == 1  # equal size: by key, lowest fold first
    assert a[("c",) * 5] == 0 and a[("d",) * 5] == 1


def test_band_is_p10_p90_linear_interpolated():
    xs = [float(i) for i in range(1, 12)]  # 1..11: p10 = 2, p90 = 10
    assert band(xs) == [2.0, 10.0]
    ys = [0.5, 1.0, 2.0]
    assert band(ys) == [round(quantile(ys, 0.1), 4), round(quantile(ys, 0.9), 4)]
    assert band([1.23456789] * 3) == [1.2346, 1.2346]


def test_coverage_uses_the_other_folds_band_only():
    # fold 0 ratios all 1.0; fold 1 ratios 10..19: fold 1's band [~11, ~18] excludes fold 0's
    # rows, fold 0's band [1, 1] excludes every fold 1 row
    pairs = [(0, 1.0)] * 10 + [(1, 10.0 + i) for i in range(10)]
    share, n = coverage_cv(pairs)
    assert share == 0.0 and n == 20
    # same distribution in every fold: about 80 % inside
    rng = random.Random(3)
    pairs = [(k, rng.lognormvariate(0, 0.3)) for k in range(8) for _ in range(200)]
    share, n = coverage_cv(pairs)
    assert n == 1600 and 0.75 <= share <= 0.85


def test_coverage_skips_folds_without_enough_other_rows():
    pairs = [(0, 1.0)] * 3 + [(1, 1.0)] * 3
    assert coverage_cv(pairs) == (None, 0)
    share, n = coverage_cv([(0, 1.0)] * 3 + [(1, 1.0)] * 6)
    assert n == 3 and share == 1.0  # only fold 0 has >= 5 other-fold ratios


def _records(seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    regimes = [("vllm", "closed", "1-4"), ("vllm", "closed", "129+"), ("sglang", "open",
                                                                      "rho<0.5"),
               ("trtllm", "offline", "max")]
    out = []
    for i in range(600):
        b, a, load = regimes[i % len(regimes)]
        metrics = ["output_tokens_per_s"] if a == "offline" else ["ttft_ms", "tpot_ms"]
        for m in metrics:
            out.append({"fold": i % 4, "file": "x.csv", "row": i, "backend": b,
                        "regime": {"backend": b, "arrival": a, "load": load}, "metric": m,
                        "offline": a == "offline", "ratio": rng.lognormvariate(0.05, 0.25)})
    return out


def test_level_keys_are_the_lookup_fallbacks():
    assert level_keys({"backend": "vllm", "arrival": "open", "load": "rho<0.5"}) == [
        ("vllm", "open", "rho<0.5"), ("vllm", "open", ANY), ("vllm", ANY, ANY), (ANY, ANY, ANY)]


def test_regimes_layout_sorted_and_metrics_omitted_without_rows():
    regs = build_regimes(_records())
    keys = [(e["backend"], e["arrival"], e["load"]) for e in regs]
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert (ANY, ANY, ANY) in keys and ("vllm", "closed", ANY) in keys
    assert ("vllm", ANY, ANY) in keys and ("trtllm", "offline", "max") in keys
    by = dict(zip(keys, regs, strict=True))
    off = by[("trtllm", "offline", "max")]
    assert "output_tokens_per_s" in off and "ttft_ms" not in off and "tpot_ms" not in off
    top = by[(ANY, ANY, ANY)]
    assert top["ttft_ms"]["n"] == 450 and top["output_tokens_per_s"]["n"] == 150
    for e in regs:
        for m in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
            if m in e:
                x = e[m]
                assert set(x) >= {"n", "band", "median_ape", "coverage_cv"}
                assert x["band"][0] <= x["band"][1] and len(x["band"]) == 2
                assert x["coverage_cv"] is None or 0.0 <= x["coverage_cv"] <= 1.0
                for v in (*x["band"], x["median_ape"]):
                    assert v == round(v, 4)


def test_median_ape_of_ratios():
    recs = [{"metric": "tpot_ms", "ratio": r, "backend": "vllm"} for r in (0.5, 1.0, 2.0)]
    # APE |pred - meas| / meas = |1 / ratio - 1|: 1.0, 0.0, 0.5 -> median 0.5
    assert median_ape(recs) == {ANY: {"tpot_ms": {"n": 3, "median_ape": 0.5}}}
    assert median_ape(recs, "backend")["vllm"]["tpot_ms"]["median_ape"] == 0.5


def _run() -> dict:
    return {"meta": {"method": "grouped K-fold", "folds": 4, "max_nfev": 3,
                     "fitted_on": ["x.csv"], "data_sha256": {"x.csv": "0" * 16},
                     "data_sha256_16": "0" * 16, "rows": 600, "campaigns": 12},
            "records": _records()}


def test_written_yaml_is_what_lookup_reads():
    run = _run()
    d = bands_dict(run, min_rows=100, date="2000-01-01")
    text = header(run, "2000-01-01") + yaml.safe_dump(d, sort_keys=False)
    assert all(line.startswith("#") for line in header(run, "2000-01-01").splitlines())
    b = yaml.safe_load(text)
    assert list(b) == ["meta", "min_rows", "regimes"] and b["min_rows"] == 100
    assert b["meta"]["folds"] == 4 and b["meta"]["warm"] is False
    assert set(b["meta"]["held_out_median_ape"]) == {"ttft_ms", "tpot_ms",
                                                     "output_tokens_per_s"}
    by = {(e["backend"], e["arrival"], e["load"]): e for e in b["regimes"]}
    # 150 rows: the regime itself
    hit = lookup("vllm", "closed", "1-4", "tpot_ms", b)
    assert hit == (by[("vllm", "closed", "1-4")]["tpot_ms"]["band"],
                   {"backend": "vllm", "arrival": "closed", "load": "1-4"})
    # a load bin without rows: the backend and arrival over every load
    hit = lookup("vllm", "closed", "5-32", "ttft_ms", b)
    assert hit is not None and hit[1] == {"backend": "vllm", "arrival": "closed", "load": ANY}
    # a backend without rows of the metric: all rows
    hit = lookup("vllm", "offline", "max", "output_tokens_per_s", b)
    assert hit is not None and hit[1] == {"backend": ANY, "arrival": ANY, "load": ANY}
    assert all(math.isfinite(v) for v in hit[0])


def test_pure_parts_do_not_need_numpy():
    code = ("import sys; sys.modules['numpy'] = sys.modules['scipy'] = None\n"
            "from tools.perf.bands import assign_folds, build_regimes\n"
            "assert assign_folds({('a',) * 5: 1}, 2) == {('a',) * 5: 0}\n"
            "r = {'backend': 'vllm', 'arrival': 'closed', 'load': '1-4'}\n"
            "e = build_regimes([{'fold': 0, 'regime': r, 'metric': 'tpot_ms', 'ratio': 1.0}])\n"
            "assert len(e) == 4\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
