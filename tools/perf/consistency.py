"""What the shared serving measurements say about themselves: where no model of the run as stated
can match them, whatever its constants.

    python -m tools.perf.consistency [--section kernel front load slope weights all]

``kernel``: rows whose measured throughput needs more FLOP/s per GPU than the fastest GEMM ever
measured on that GPU and dtype (../shared/data/ops/<gpu>_gemm_perf.csv.gz, any shape). A serving
engine that also decodes, runs attention and waits on the host cannot beat its best GEMM: the run
did less work than its stated lengths (cached prefixes, shorter prompts). The FLOPs come from the
model's architecture (``StepModel.prefill`` / ``decode`` FLOP counts), no fitted constant.

``front``: per campaign (model, backend, GPU, precision, data file), the measured TTFT at four or
fewer requests in flight with a prompt of 900-1,100 tokens, next to the model's prefill of that
prompt. The prefill is a small share; what is left is a fixed cost of the campaign (client,
HTTP, tokenizer, scheduler settings) that differs between campaigns of one backend on one GPU
class by more than the TTFT target, and that no column of the data records.

``load``: per campaign and configuration (layout, lengths) measured at three or more
concurrencies, how measured and predicted TPOT and TTFT grow from the lowest to the highest
concurrency: campaigns whose TTFT responds to load in ways the others of the same backend on
the same GPU do not.

``slope``: per campaign and parallel layout whose concurrencies span 3x or more, the slope of log
TPOT over log C (all lengths together), measured and predicted: a campaign whose TPOT stays flat
while its decode batch grows (a fixed cost per step that the GPU's measured kernels do not show).

``weights``: the TTFT median error if each group of rows had free weights of the model's own three
TTFT terms (front = t_request + isl x t_in_token; the arrival burst; the rest: prefill, step wait,
admission, ...), robustly fitted per group: at the fit's granularity (backend, GPU class), then
finer. How far apart campaigns are on the fixed cost and the load response, which no recorded
column separates.

Analysis only: it changes nothing.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from functools import lru_cache
from typing import Any

from servewise.engine.domain.perf.serving import _step_model
from servewise.engine.domain.perf.validate import quantile
from tools.perf.fit_gemm import GPUS, OPS_DIR, read_table
from tools.perf.residuals import closed_loop_rows, records

# the GEMM dtypes of ops/ that a row's weight precision runs (the fastest of them counts)
GEMM_DTYPES = {"bf16": ("bfloat16",), "fp16": ("bfloat16",), "fp8": ("fp8", "fp8_block"),
               "fp4": ("nvfp4",)}
SECTIONS = ("kernel", "front", "load", "slope", "weights")
# groupings for the free weights of the TTFT terms: the fit's own granularity first
WEIGHT_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("backend, GPU class (the fit's)", ("backend", "cls")),
    ("backend, GPU", ("backend", "gpu")),
    ("backend, model", ("backend", "model")),
    ("backend, GPU, model", ("backend", "gpu", "model")),
    ("campaign", ("model", "backend", "gpu", "precision", "file")),
)


@lru_cache(maxsize=1)
def best_gemm_tflops() -> dict[tuple[str, str], tuple[float, tuple[int, int, int]]]:
    """(GPU name, dtype) -> (fastest TFLOPS measured on any shape, that shape)."""
    out: dict[tuple[str, str], tuple[float, tuple[int, int, int]]] = {}
    for stem, name in GPUS.items():
        path = OPS_DIR / f"{stem}_gemm_perf.csv.gz"
        if not path.exists():
            continue
        for dtype, shapes in read_table(path).items():
            for (m, n, k), ms in shapes.items():
                tf = 2.0 * m * n * k / (ms / 1e3) / 1e12
                if tf > out.get((name, dtype), (0.0,))[0]:
                    out[(name, dtype)] = (tf, (m, n, k))
    return out


def kernel_bound(min_share: float = 0.8) -> list[dict[str, Any]]:
    """Closed-loop rows (TTFT and TPOT measured) on a GPU with GEMM tables whose measured
    throughput needs at least ``min_share`` of the fastest GEMM measured on that GPU at the
    row's precision: sustained FLOP/s per GPU = C / dp x FLOPs per request / lifetime."""
    best = best_gemm_tflops()
    out = []
    for name, r in closed_loop_rows():
        tops = [best[(r.gpu_name, d)] for d in GEMM_DTYPES.get(r.precision, ())
                if (r.gpu_name, d) in best]
        if not (tops and r.ttft_ms and r.tpot_ms):
            continue
        try:
            sm = _step_model(r.model, r.gpu, r.layout, r.precision, r.backend, r.kv_precision,
                             None)
        except ValueError:
            continue
        flops = (sm.prefill_once(r.isl)["flops"]
                 + (r.osl - 1) * sm.decode(1.0, r.isl + r.osl / 2.0)["flops"])
        life_s = (r.ttft_ms + (r.osl - 1) * r.tpot_ms) / 1e3
        need = float(r.concurrency or 1) / r.layout.dp * flops / life_s / 1e12
        top, shape = max(tops)
        if need >= min_share * top:
            out.append({"file": name, "model": r.model_name, "backend": r.backend,
                        "gpu": r.gpu_name, "precision": r.precision, "tp": r.layout.tp,
                        "isl": r.isl, "osl": r.osl, "c": r.concurrency, "ttft": r.ttft_ms,
                        "tpot": r.tpot_ms, "need_tflops": need, "best_tflops": top,
                        "best_shape": shape, "datasheet_tflops": sm.tflops})
    return sorted(out, key=lambda x: -x["need_tflops"] / x["best_tflops"])


def _campaign(x: dict[str, Any]) -> tuple[str, ...]:
    return (x["model"], x["backend"], x["gpu"], x["precision"], x["file"])


def front(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per campaign with rows at C <= 4 and a 900-1,100-token prompt: measured TTFT (min,
    median, max) and the model's prefill of the prompt; sorted by backend and GPU class."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        if x["ttft_meas"] and x["c"] <= 4 and 900 <= x["isl"] <= 1100:
            groups[_campaign(x)].append(x)
    out = []
    for k, xs in groups.items():
        t = sorted(x["ttft_meas"] for x in xs)
        out.append({"campaign": k, "backend": k[1], "cls": xs[0]["cls"], "n": len(xs),
                    "ttft_min": t[0], "ttft_med": quantile(t, 0.5), "ttft_max": t[-1],
                    "prefill": quantile([x["t_pf"] for x in xs], 0.5)})
    return sorted(out, key=lambda x: (x["backend"], x["cls"], x["ttft_med"]))


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return quantile([x[key] for x in rows], 0.5)


def load(recs: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """Per campaign and configuration (layout, lengths) measured at >= 3 concurrencies spanning
    >= 4x: measured and predicted ``metric`` at the highest over the lowest concurrency."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        if x[f"{metric}_meas"]:
            groups[(*_campaign(x), x["tp"], x["ep"], x["dp"], x["isl"], x["osl"])].append(x)
    out = []
    for k, xs in groups.items():
        cs = sorted({x["c"] for x in xs})
        if len(cs) < 3 or cs[-1] < 4 * cs[0]:
            continue
        lo = [x for x in xs if x["c"] == cs[0]]
        hi = [x for x in xs if x["c"] == cs[-1]]
        out.append({"campaign": k[:5], "config": k[5:], "c_lo": cs[0], "c_hi": cs[-1],
                    **{name: _median(hi, f"{metric}_{key}") / _median(lo, f"{metric}_{key}")
                       for name, key in (("measured", "meas"), ("predicted", "pred"))}})
    return out


def _slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs``."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True))
            / sum((a - mx) ** 2 for a in xs))


def slope(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per campaign and layout with concurrencies spanning >= 3x: least-squares slope of log
    TPOT over log C, measured and predicted."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        if x["tpot_meas"]:
            groups[(*_campaign(x), x["tp"], x["ep"], x["dp"])].append(x)
    out = []
    for k, xs in groups.items():
        cs = [x["c"] for x in xs]
        if len(xs) < 4 or max(cs) < 3 * min(cs):
            continue
        lc = [math.log(c) for c in cs]
        out.append({"campaign": k[:5], "layout": k[5:], "n": len(xs), "c_lo": min(cs),
                    "c_hi": max(cs),
                    "measured": _slope(lc, [math.log(x["tpot_meas"]) for x in xs]),
                    "predicted": _slope(lc, [math.log(x["tpot_pred"]) for x in xs])})
    return sorted(out, key=lambda x: x["measured"] - x["predicted"])


def free_weights(recs: list[dict[str, Any]], cols: tuple[str, ...]) -> tuple[int, float]:
    """(groups, TTFT median APE) with free weights of (front, burst, rest) per group of
    ``cols``, fitted in log space with a Cauchy loss (scale 0.1) like the calibration fit."""
    import numpy as np
    from scipy.optimize import least_squares

    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        if x["ttft_meas"]:
            groups[tuple(x[c] for c in cols)].append(x)
    ape: list[float] = []
    for xs in groups.values():
        terms = np.array([[x["front"], x["burst"], x["ttft_pred"] - x["front"] - x["burst"]]
                          for x in xs])
        y = np.array([x["ttft_meas"] for x in xs])

        def res(a: Any, terms: Any = terms, y: Any = y) -> Any:
            return np.log(np.maximum(terms @ np.exp(a), 1e-6) / y)

        sol = least_squares(res, np.zeros(3), loss="cauchy", f_scale=0.1)
        ape += [float(v) for v in np.abs(np.exp(res(sol.x)) - 1)]
    return len(groups), quantile(ape, 0.5)


def _fmt_campaign(k: tuple[str, ...]) -> str:
    return f"{k[0][:18]} {k[1]} {k[2][:8]} {k[3]} {k[4].replace('.csv', '')[:14]}"


def report(sections: tuple[str, ...] = SECTIONS) -> list[str]:
    lines: list[str] = []
    recs = records() if set(sections) - {"kernel"} else []
    if "kernel" in sections:
        rows = kernel_bound()
        lines += ["== rows needing >= 80 % of the fastest GEMM measured on their GPU "
                  "(sustained, per GPU)",
                  f"{'model':18s} {'backend':7s} {'GPU':9s} {'prec':5s} {'tp':>2s} "
                  f"{'isl/osl':>10s} {'C':>5s} {'TTFT':>7s} {'TPOT':>6s} {'needs':>6s} "
                  f"{'best GEMM':>9s} {'share':>6s}"]
        for x in rows:
            lines.append(f"{x['model'][:18]:18s} {x['backend']:7s} {x['gpu'][:9]:9s} "
                         f"{x['precision']:5s} {x['tp']:2d} {x['isl']:>5d}/{x['osl']:<4d} "
                         f"{x['c']:5.0f} {x['ttft']:7.1f} {x['tpot']:6.2f} "
                         f"{x['need_tflops']:6.0f} {x['best_tflops']:9.0f} "
                         f"{x['need_tflops'] / x['best_tflops']:6.0%}")
        lines.append(f"{len(rows)} rows; TFLOPS per GPU; best GEMM = any shape in ops/"
                     if best_gemm_tflops() else f"no GEMM kernel tables at {OPS_DIR}")
    if "front" in sections:
        rows = front(recs)
        lines += ["", "== measured TTFT at C <= 4, prompt 900-1,100 tokens, per campaign (ms)",
                  f"{'backend':7s} {'class':15s} {'campaign':58s} {'n':>3s} {'min':>6s} "
                  f"{'median':>6s} {'max':>6s} {'prefill':>7s}"]
        for x in rows:
            lines.append(f"{x['backend']:7s} {x['cls']:15s} {_fmt_campaign(x['campaign']):58s} "
                         f"{x['n']:3d} {x['ttft_min']:6.0f} {x['ttft_med']:6.0f} "
                         f"{x['ttft_max']:6.0f} {x['prefill']:7.1f}")
        by: dict[tuple[str, str], list[float]] = defaultdict(list)
        for x in rows:
            by[(x["backend"], x["cls"])].append(x["ttft_med"])
        lines.append("spread of the campaign medians per backend and GPU class: "
                     + "; ".join(f"{b} {c} {min(v):.0f}-{max(v):.0f} ms ({max(v) / min(v):.2f}x)"
                                 for (b, c), v in sorted(by.items()) if len(v) > 1))
    if "load" in sections:
        for metric in ("tpot", "ttft"):
            rows = load(recs, metric)
            lines += ["", f"== {metric.upper()} at the highest over the lowest concurrency, per "
                      "campaign (median over its configurations; min-max)",
                      f"{'campaign':58s} {'configs':>7s} {'C':>9s} {'measured':>16s} "
                      f"{'predicted':>16s}"]
            camp: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
            for x in rows:
                camp[x["campaign"]].append(x)
            for k in sorted(camp):
                xs = camp[k]
                m = sorted(x["measured"] for x in xs)
                p = sorted(x["predicted"] for x in xs)
                cs = f"{min(x['c_lo'] for x in xs):.0f}-{max(x['c_hi'] for x in xs):.0f}"
                lines.append(f"{_fmt_campaign(k):58s} {len(xs):7d} {cs:>9s} "
                             f"{quantile(m, 0.5):5.2f} ({m[0]:.2f}-{m[-1]:.2f}) "
                             f"{quantile(p, 0.5):5.2f} ({p[0]:.2f}-{p[-1]:.2f})")
    if "slope" in sections:
        rows = slope(recs)
        lines += ["", "== slope of log TPOT over log C per campaign and layout (tp ep dp), "
                  "measured - predicted ascending",
                  f"{'campaign':58s} {'layout':>8s} {'n':>3s} {'C':>8s} {'measured':>8s} "
                  f"{'predicted':>9s}"]
        for x in rows:
            lay = "/".join(str(v) for v in x["layout"])
            cs = f"{x['c_lo']:.0f}-{x['c_hi']:.0f}"
            lines.append(f"{_fmt_campaign(x['campaign']):58s} {lay:>8s} {x['n']:3d} {cs:>8s} "
                         f"{x['measured']:8.2f} {x['predicted']:9.2f}")
    if "weights" in sections:
        base = [abs(math.exp(x["e_ttft"]) - 1) for x in recs if x["e_ttft"] is not None]
        lines += ["", "== TTFT median APE with free weights of (front, burst, rest) per group",
                  f"{'free weights per':34s} {'groups':>6s} {'TTFT':>6s}",
                  f"{'(none: shipped model)':34s} {1:6d} {quantile(base, 0.5):6.1%}"]
        for name, cols in WEIGHT_GROUPS:
            n, med = free_weights(recs, cols)
            lines.append(f"{name:34s} {n:6d} {med:6.1%}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--section", nargs="*", default=["all"], choices=(*SECTIONS, "all"))
    a = ap.parse_args(argv)
    sections = SECTIONS if "all" in a.section else tuple(a.section)
    print("\n".join(report(sections)))


if __name__ == "__main__":
    main()

