"""Signed TTFT/TPOT residuals of the serving model, grouped, with the TTFT terms' shares.

    python -m tools.perf.residuals [--metric ttft_ms] [--by gpu backend ...] [--calibration F]

For every closed-loop latency row of the shipped data: the signed log error ``log(predicted /
measured)`` (reported as the median ratio − 1) and, for TTFT, the share of each term of the
closed-loop form (front = t_request + isl × t_in_token, prefill compute, prefill communication,
chunk overhead, step wait, burst, admission, dp wait, the scheduler receive interval's wait and
batch) in the prediction. Groups: GPU, backend, GPU class × backend, precision, model,
concurrency and ISL bins, the prefill share of the predicted TTFT and the prefill server's
predicted utilisation ``rho = C / dp x t_prefill / lifetime`` (how busy the engine is with
prefills in the closed loop). Analysis only: it changes nothing.

``--ceiling``: the median APE the shipped model would reach if every group of rows (by model,
backend, GPU, then also precision, layout, input/output lengths) had a free correction factor of
its own (the group's median ratio): how much of the error is a constant per group, which more
per-group constants could remove, and how much is the model's response within a group.

``--within-campaign``: each row's error less its (model, backend, GPU, precision) group's median
before grouping, e.g. ``--metric tpot --within-campaign --by layout``: how the error moves with
TP / EP / DP inside one campaign (session 29: dense TP 8 under-predicted by every backend).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.perf.calibration import gpu_class
from servewise.engine.domain.perf.data import DEFAULT_FILES, Row, read_rows
from servewise.engine.domain.perf.serving import MAX_BATCH, _step_model, solve
from servewise.engine.domain.perf.validate import quantile

TERMS = ("front", "pf_compute", "pf_comm", "pf_chunks", "pf_topk", "step_wait", "burst", "admission",
         "dp_wait", "recv")


def _bin(x: float, edges: tuple[float, ...]) -> str:
    prev = 0.0
    for e in edges:
        if x <= e:
            return f"{prev:g}-{e:g}"
        prev = e
    return f">{prev:g}"


def closed_loop_rows() -> Iterator[tuple[str, Row]]:
    """(data file name, row) of every closed-loop latency row of the shipped data: measured
    TTFT or TPOT, not skipped, offline, prefill-only, open-loop or a P99 statistic."""
    for f in DEFAULT_FILES:
        for r in read_rows(f)[1]:
            if (r.skipped or r.offline or r.prefill_only or r.request_rate
                    or r.statistic == "p99" or not (r.ttft_ms or r.tpot_ms)):
                continue
            yield f.name, r


def records(cal: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One record per closed-loop latency row: errors and the TTFT terms (ms)."""
    out = [_record(r, cal, name) for name, r in closed_loop_rows()]
    return [x for x in out if x]


def _record(r: Row, cal: dict[str, Any] | None, file: str) -> dict[str, Any] | None:
    assert r.model is not None and r.gpu is not None
    try:
        sm = _step_model(r.model, r.gpu, r.layout, r.precision, r.backend, r.kv_precision, cal)
    except ValueError:
        return None
    s = solve(sm, isl=r.isl, osl=r.osl, concurrency=float(r.concurrency or 1),
              limit=MAX_BATCH.get(sm.prof.backend, 1024), recv_interval=r.recv_interval,
              lengths=r.lengths)
    pf = s["prefill"]
    terms = {"front": s["front"], "pf_compute": pf["t_compute"], "pf_comm": pf["t_comm"],
             "pf_chunks": pf["t_overhead"], "pf_topk": pf["t_topk"], "step_wait": s["step_wait"], "burst": s["burst"],
             "admission": s["admission"], "dp_wait": s["dp_wait"],
             "recv": s["recv_wait"] + s["recv_batch"]}
    rec = {"file": file, "gpu": r.gpu_name, "cls": gpu_class(r.gpu), "backend": r.backend,
           "model": r.model_name, "precision": r.precision, "isl": r.isl, "osl": r.osl,
           "c": float(r.concurrency or 1), "recv_interval": r.recv_interval, "tp": r.layout.tp,
           "ep": r.layout.ep,
           "dp": r.layout.dp, "moe": sm.p.is_moe, "ttft_pred": s["ttft"],
           "ttft_meas": r.ttft_ms, "tpot_pred": s["tpot"], "tpot_meas": r.tpot_ms,
           "t_dec": s["dec"]["total"], "t_pf": pf["total"], **terms,
           "attn_share_pf": (pf["attn_flops"] / pf["flops"]) if pf["flops"] else 0.0,
           "params_b": (sm.p.shared + sm.p.experts_per_token * sm.p.per_expert) / 1e9,
           "rho": s["c_rank"] * pf["total"] / s["life"]}
    rec["e_ttft"] = math.log(s["ttft"] / r.ttft_ms) if r.ttft_ms else None
    rec["e_tpot"] = math.log(s["tpot"] / r.tpot_ms) if r.tpot_ms and r.osl > 1 else None
    return rec


def table(recs: list[dict[str, Any]], key: Any, metric: str = "ttft") -> list[str]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        groups[key(x) if callable(key) else str(x[key])].append(x)
    lines = [f"{'group':44s} {'n':>5s} {'signed med':>10s} {'|APE| med':>9s} "
             + " ".join(f"{t[:9]:>9s}" for t in TERMS)]
    for g in sorted(groups):
        xs = [x for x in groups[g] if x[f"e_{metric}"] is not None]
        if not xs:
            continue
        e = [x[f"e_{metric}"] for x in xs]
        ape = [abs(math.exp(v) - 1) for v in e]
        shares = [quantile([x[t] / x["ttft_pred"] for x in xs], 0.5) for t in TERMS]
        lines.append(f"{g[:44]:44s} {len(xs):5d} {math.exp(quantile(e, 0.5)) - 1:+10.1%} "
                     f"{quantile(ape, 0.5):9.1%} " + " ".join(f"{s:9.2f}" for s in shares))
    return lines


CEILING_KEYS = (
    ("model, backend, GPU", ("model", "backend", "gpu")),
    ("+ precision", ("model", "backend", "gpu", "precision")),
    ("+ layout", ("model", "backend", "gpu", "precision", "tp", "ep", "dp")),
    ("+ lengths", ("model", "backend", "gpu", "precision", "tp", "ep", "dp", "isl", "osl")),
)


def ceiling(recs: list[dict[str, Any]]) -> list[str]:
    """Median APE with a free factor per group (see the module docstring), per metric."""
    lines = [f"{'free factor per':24s} {'groups':>7s} {'TPOT':>7s} {'TTFT':>7s}"]
    base = {m: [abs(math.exp(x[f"e_{m}"]) - 1) for x in recs if x[f"e_{m}"] is not None]
            for m in ("tpot", "ttft")}
    lines.append(f"{'(none: shipped model)':24s} {1:7d} "
                 + " ".join(f"{quantile(base[m], 0.5):7.1%}" for m in ("tpot", "ttft")))
    for name, cols in CEILING_KEYS:
        cells, n = [], 0
        for m in ("tpot", "ttft"):
            groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
            for x in recs:
                if x[f"e_{m}"] is not None:
                    groups[tuple(x[c] for c in cols)].append(x[f"e_{m}"])
            ape = [abs(math.exp(v - quantile(e, 0.5)) - 1) for e in groups.values() for v in e]
            cells.append(f"{quantile(ape, 0.5):7.1%}")
            n = max(n, len(groups))
        lines.append(f"{name:24s} {n:7d} " + " ".join(cells))
    return lines


def within_campaign(recs: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """``recs`` with each row's log error less the median of its (model, backend, GPU,
    precision) group: a constant offset per campaign removed (rows without the metric kept)."""
    key = f"e_{metric}"
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for x in recs:
        if x[key] is not None:
            groups[(x["model"], x["backend"], x["gpu"], x["precision"])].append(x[key])
    med = {k: quantile(v, 0.5) for k, v in groups.items()}
    return [{**x, key: x[key] - med[(x["model"], x["backend"], x["gpu"], x["precision"])]}
            if x[key] is not None else x for x in recs]


def implied_burst(recs: list[dict[str, Any]], min_c: float = 16.0) -> list[str]:
    """Per campaign (model, backend, GPU, precision, prompt over 3,000 tokens) at ``min_c``+ in
    flight: the median burst share φ the measured TTFT implies, (measured − the other predicted
    terms) / ((C − 1)/2 × t_prefill), next to the fitted one."""
    groups: dict[tuple[Any, ...], list[tuple[float, float]]] = defaultdict(list)
    for x in recs:
        unit = (x["c"] - 1) / 2 * x["t_pf"]
        if x["ttft_meas"] and x["c"] >= min_c and unit > 0:
            rest = x["ttft_pred"] - x["burst"]
            groups[(x["model"], x["backend"], x["gpu"], x["precision"], x["isl"] > 3000)].append(
                ((x["ttft_meas"] - rest) / unit, x["burst"] / unit))
    lines = [f"{'campaign (model backend GPU precision long-prompt)':60s} {'n':>4s} "
             f"{'implied phi':>11s} {'fitted':>7s}"]
    for k in sorted(groups):
        v = groups[k]
        lines.append(f"{' '.join(map(str, k))[:60]:60s} {len(v):4d} "
                     f"{quantile([a for a, _ in v], 0.5):11.3f} {v[0][1]:7.3f}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metric", default="ttft", choices=("ttft", "tpot"))
    ap.add_argument("--by", nargs="*", default=["gpu", "backend", "cls_backend", "precision",
                                                "model", "conc", "isl", "pf_share",
                                                "backend_rho"])
    ap.add_argument("--calibration", default=None)
    ap.add_argument("--ceiling", action="store_true",
                    help="median APE with a free correction factor per group of rows")
    ap.add_argument("--within-campaign", action="store_true",
                    help="subtract each (model, backend, GPU, precision) group's median error "
                         "first: how the error moves with layout, lengths or load inside one "
                         "campaign (e.g. --by layout)")
    ap.add_argument("--implied-burst", action="store_true",
                    help="the arrival-burst share each campaign's TTFT implies at C >= 16")
    a = ap.parse_args(argv)
    cal = yaml.safe_load(Path(a.calibration).read_text()) if a.calibration else None
    recs = records(cal)
    if a.implied_burst:
        print("\n".join(implied_burst(recs)))
        return
    if a.within_campaign:
        recs = within_campaign(recs, a.metric)
    if a.ceiling:
        print("\n".join(ceiling(recs)))
        return
    keys = {"cls_backend": lambda x: f"{x['cls']} {x['backend']}",
            "conc": lambda x: _bin(x["c"], (1, 8, 32, 128)),
            "isl": lambda x: _bin(x["isl"], (512, 1024, 2048, 4096, 8192)),
            "pf_share": lambda x: _bin((x["pf_compute"] + x["pf_comm"]) / x["ttft_pred"],
                                       (0.2, 0.4, 0.6, 0.8)),
            "gpu_backend_prec": lambda x: f"{x['gpu']} {x['backend']} {x['precision']}",
            "layout": lambda x: f"{x['backend']} tp{x['tp']} ep{x['ep']} dp{x['dp']}"
                                + (" moe" if x["moe"] else " dense"),
            "backend_conc": lambda x: f"{x['backend']} " + _bin(x["c"], (1, 8, 32, 128)),
            "backend_isl": lambda x: f"{x['backend']} "
                                     + _bin(x["isl"], (512, 1024, 2048, 4096, 8192)),
            "backend_rho": lambda x: f"{x['backend']} rho "
                                     + _bin(x["rho"], (0.05, 0.1, 0.2, 0.4, 0.7, 1.0))}
    for k in a.by:
        print(f"\n== {a.metric} by {k} (terms: median share of predicted TTFT)")
        print("\n".join(table(recs, keys.get(k, k), a.metric)))


if __name__ == "__main__":
    main()
