"""Refit facts/calibration.yaml from the measured data (needs numpy and scipy: ``fit`` extra).

    python -m tools.perf.fit [--data CSV ...] [--out facts/calibration.yaml]

Per backend, one joint robust least-squares fit (Cauchy loss, scale 0.1: noisy repeats and
overloaded-queue rows pull little; the median error is what is judged) of log(predicted /
measured) of TPOT, TTFT and throughput (weight 1 each) over the rows of every GPU class the
backend was measured on. The seventeen constants of ``calibration.PARAMS`` are split in two:

* engine (software) costs shared by all GPU classes of the backend (``SHARED``: per step, per
  layer, per MoE layer, per sequence, per prefill chunk, prefill interference, per-request
  latency, per prompt token before the engine, admission steps, arrival-burst share) -- the
  same scheduler, server and kernel launches run on Hopper and Blackwell;
* hardware efficiencies per (GPU class, backend): bandwidth, FLOPS, MoE and 8/4-bit GEMM
  efficiencies, the MoE expert-read floor; and the waits that also absorb each class's
  benchmark campaign (completion-admission share, attention-DP wait).

A prior keeps the efficiencies near published values when the rows do not pin them. Nothing
is fitted per model or per row. The output is deterministic for the same data and date.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import functools
import hashlib
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.perf.calibration import (
    BOUNDS,
    CALIBRATION_FILE,
    FALLBACK_BAND,
    FALLBACK_LINKS,
    MIXED_PREFILL_BACKENDS,
    PARAMS,
    gpu_class,
)
from servewise.engine.domain.perf.data import DEFAULT_FILES, Row, read_rows
from servewise.engine.domain.perf.validate import predict_row, quantile

# Log-space prior on the efficiencies: (centre, weight). Where the rows do not pin an
# efficiency (a precision or class one backend has no rows of) the prior sets it.
PRIOR = {
    # decode 74-77 % of peak HBM bandwidth at batch 1 (benchmarks.csv, shared data README)
    "eta_bw": (0.75, 0.3),
    # prefill 54-69 % of peak dense FLOPS (benchmarks.csv: A100 FP16 61-69 %, L40S 54 %)
    "eta_flops": (0.6, 1.0),
    # no external figure: grouped expert GEMMs somewhat below dense ones
    "eta_moe": (0.7, 0.3),
    # a judgement: FP8 GEMMs alone reach about the share of their doubled peak that large BF16
    # GEMMs reach (a cuBLASLt 8192^3 E4M3 GEMM report: ~1,610 TFLOPS per GPU, 81 % of Hopper's
    # 1,979; FP8_GEMM_SOURCE); served FP8 layers add per-token activation quantisation
    "eta_lowp": (0.85, 1.0),
}
FP8_GEMM_SOURCE = ("https://gitea.d-robotics.cc/han.zhao/test_gpu_scripts/raw/commit/"
                   "7ec2da18bc66f5199b97863ea8e4dea01dd801f0/"
                   "reports_cublaslt_fp8_crosscheck_20260524.md")
# Start of the fit: the prior centres for the efficiencies, round values for the rest.
START = {**{k: centre for k, (centre, _) in PRIOR.items()},
         "t_step_ms": 1.0, "t_layer_us": 10.0, "t_seq_us": 10.0, "interference": 1.0,
         "t_chunk_ms": 5.0, "t_request_ms": 50.0, "k_step": 1.0, "burst": 0.1, "admission": 0.1,
         "dp_wait": 1.0, "t_moe_layer_us": 10.0, "t_in_token_us": 1.0,
         "interference_lockstep": 1.0}
# Physical ordering the fit must keep (tools/perf/ordering.py checks the result): a
# newer class's reference GPU, running the same backend's kernels, reads memory and multiplies
# at 16 and 8 bit at least as fast as an older class's, since it has more of both. Where a
# class's rows cannot pin its dense-model efficiencies (Blackwell's are mostly MoE and MLA
# models), the fit could otherwise make B200 slower than H200 on dense models. Each rate the
# newer GPU falls below the older one's adds ORDER_WEIGHT x log(shortfall) to the residuals.
ORDERED_CLASSES = (("blackwell-hbm", "B200", "hopper-hbm", "H200 SXM"),)
ORDER_WEIGHT = 10.0
MAX_NFEV = int(os.environ.get("FIT_MAX_NFEV", "40"))
WEIGHTS = {"tpot_ms": 1.0, "ttft_ms": 1.0, "output_tokens_per_s": 1.0}
REFERENCE_CLASS = "hopper-hbm"
# Classes without measured rows and why they borrow the reference (Hopper) class's efficiencies:
# the class with rows of every backend (borrowing the A100's for the Ampere-generation and older
# GPUs was tried: its vLLM profile is itself a ratio transfer, and the two band widenings
# compound to a 2.8x TTFT band; docs/accuracy-attempts.md, session 29).
UNMEASURED = {
    "ampere-hbm": "HBM datacenter GPU; A100 decode 77% of peak bandwidth (benchmarks.csv) is "
                  "close to Hopper's",
    "ada-gddr": "GDDR PCIe cards (L40S, L20, L4, RTX); L40S prefill 54% of peak FLOPS",
    "ampere-gddr": "GDDR PCIe cards (A10, A6000)",
    "turing-gddr": "T4", "volta-hbm": "V100", "pascal-gddr": "P40",
    "cdna3-hbm": "AMD MI300X/MI325X (ROCm builds of the same backends)",
    "cdna4-hbm": "AMD MI355X (ROCm builds of the same backends; no measured rows: InferenceX's "
                 "MI355X runs are not in the shared data)",
    "ascend-hbm": "Huawei Ascend 910B (vLLM-Ascend / MindIE)",
    "ascend-lpddr": "Ascend 310P cards", "orin-lpddr": "Jetson Orin",
}


def _band_entry(params: dict[str, float]) -> dict[str, Any]:
    return {**params, "band": {"ttft_ms": [1, 1], "tpot_ms": [1, 1],
                               "output_tokens_per_s": [1, 1]}}


def _kept(section: str, default: dict[str, Any]) -> dict[str, Any]:
    """A calibration section fitted from kernel data and kept across refits (``links``,
    ``moe_kernels``; written by the kernels tool), else ``default``."""
    from servewise.engine.domain.perf.calibration import load_calibration

    return load_calibration().get(section) or default


def _inherited(why: str) -> dict[str, Any]:
    """The ``inherit`` entry of a class without rows. Where the reference class holds eta_lowp at
    its own measured GEMM kernels' ratio (kernel_lowp), that ratio says nothing of another
    architecture's 8-bit kernels (Ascend INT8, Turing INT8, MI300X FP8): such a class takes the
    prior centre instead."""
    entry: dict[str, Any] = {"inherit": REFERENCE_CLASS, "why": why}
    if REFERENCE_CLASS in kernel_lowp():
        entry["eta_lowp"] = PRIOR["eta_lowp"][0]
    return entry


def calibration_dict(profiles: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    classes: dict[str, Any] = defaultdict(lambda: {"backends": {}})
    for (cls, be), entry in sorted(profiles.items()):
        classes[cls]["backends"][be] = entry
    return {"default_class": REFERENCE_CLASS, "links": _kept("links", FALLBACK_LINKS),
            "moe_kernels": _kept("moe_kernels", {}),
            "speculative": _kept("speculative", {}),
            "disaggregated": _kept("disaggregated", {}),
            "unmeasured_band_widening": 2.0,
            "classes": {**dict(classes),
                        **{c: _inherited(w) for c, w in UNMEASURED.items() if c not in classes}}}


def _named(data_name: str, entry: dict[str, Any] | None, names: Iterable[str]) -> bool:
    ex = {n.lower() for n in names}
    return data_name.lower() in ex or str((entry or {}).get("id", "")).lower() in ex


def is_model(row: Row, names: Iterable[str]) -> bool:
    """Whether ``row`` is of one of the models ``names`` (data name or catalog id)."""
    return _named(row.model_name, row.model, names)


def is_gpu(row: Row, names: Iterable[str]) -> bool:
    """Whether ``row`` ran on one of the GPUs ``names`` (data name or catalog id)."""
    return _named(row.gpu_name, row.gpu, names)


def usable_rows(paths: Iterable[str | Path], exclude_models: Iterable[str] = (),
                exclude_gpus: Iterable[str] = (),
                exclude_campaigns: Iterable[tuple[str, str, str, str, str]] = ()) -> list[Row]:
    """Rows with a known model and GPU, without those of ``exclude_models`` / ``exclude_gpus``
    nor of the campaigns ``exclude_campaigns``: ``(file name, model_name, backend, gpu_name,
    precision)`` keys (the row attributes; held-out refits of tools/perf/bands.py)."""
    exclude_models, exclude_gpus = list(exclude_models), list(exclude_gpus)
    campaigns = {tuple(c) for c in exclude_campaigns}
    out = []
    for p in paths:
        _, rows = read_rows(p)
        name = Path(p).name
        for r in rows:
            if r.skipped or r.model is None or r.gpu is None or r.disagg is not None:
                continue  # disaggregated runs fit their own constant (tools/perf/disagg_fit.py)
            if campaigns and (name, r.model_name, r.backend, r.gpu_name,
                              r.precision) in campaigns:
                continue
            if not is_model(r, exclude_models) and not is_gpu(r, exclude_gpus):
                out.append(r)
    return out


def residuals(rows: list[Row], cal: dict[str, Any]) -> list[float]:
    res = []
    for r in rows:
        pr = predict_row(r, cal)
        for m, meas in (("tpot_ms", r.tpot_ms), ("ttft_ms", r.ttft_ms),
                        ("output_tokens_per_s", r.tput)):
            if pr.get(m) and meas:
                res.append(WEIGHTS[m] * math.log(pr[m] / meas))
    return res


# Engine (software) constants shared by every GPU class of a backend; the rest (hardware
# efficiencies and campaign-dependent waits) are fitted per (class, backend).
# Opt-in, for reproducing session 34's variants A / B (docs/accuracy-attempts.md; not kept):
# FIT_HOST_PER_CLASS=t_request_ms[,t_in_token_us] fits the host request path per class where the
# class has HOST_MIN_ROWS rows or more with a measured TTFT; a class with fewer takes the value of
# the backend's class with the most of them. Default: shared, as shipped.
HOST_PER_CLASS = tuple(k for k in os.environ.get("FIT_HOST_PER_CLASS", "").split(",") if k)
HOST_MIN_ROWS = 20
if set(HOST_PER_CLASS) - {"t_request_ms", "t_in_token_us"}:
    print(f"FIT_HOST_PER_CLASS={','.join(HOST_PER_CLASS)}: expected t_request_ms and/or "
          "t_in_token_us, comma-separated", file=sys.stderr)
    raise SystemExit(2)
SHARED = tuple(k for k in ("t_step_ms", "t_layer_us", "t_moe_layer_us", "t_seq_us",
                           "interference", "t_chunk_ms", "t_request_ms", "k_step", "burst",
                           "t_in_token_us", "interference_lockstep")
               if k not in HOST_PER_CLASS)
PER_CLASS = tuple(k for k in PARAMS if k not in SHARED)
# Per-class constants that only some rows exercise: without such a row in a class the data say
# nothing of the constant, and the fit holds it at its round START value instead of letting the
# optimiser drift it to a bound (dp_wait: rows with data-parallel attention).
EXERCISED_BY = {"dp_wait": lambda r: r.layout.attention_dp > 1}


@functools.lru_cache(maxsize=1)
def kernel_lowp() -> dict[str, float]:
    """eta_lowp per GPU class from the measured GEMM kernels (tools/perf/gemm.yaml): the median
    over the class's measured GPUs of the FP8 / BF16 ratio of their efficiency on an 8192^3
    GEMM (Hopper: H100 0.741, H200 0.845; B200 0.730; RTX PRO 6000 0.944). Held, not fitted:
    fitted, eta_lowp traded with the MoE and FLOPS efficiencies and sat at its bounds."""
    import statistics

    from servewise.engine.domain.catalog import load_catalog
    from tools.perf.gemm import load_gemm

    cat = load_catalog()
    by_class: dict[str, list[float]] = defaultdict(list)
    for name, dtypes in (load_gemm().get("by_gpu") or {}).items():
        if "fp8" in dtypes and "bfloat16" in dtypes:
            ratio = dtypes["fp8"]["eta_ref"] / dtypes["bfloat16"]["eta_ref"]
            by_class[gpu_class(cat.gpu(name))].append(min(ratio, BOUNDS["eta_lowp"][1]))
    return {c: round(statistics.median(v), 3) for c, v in sorted(by_class.items())}


def _warm(cls: str, backend: str, key: str) -> float:
    """Start value: the shipped calibration's constant (inside the bounds), else START."""
    from servewise.engine.domain.perf.calibration import entry_key, load_calibration

    entry = ((load_calibration().get("classes") or {}).get(cls) or {}).get("backends") or {}
    b = entry.get(backend) or {}
    v = b.get(entry_key(b, key), START[key])
    lo, hi = BOUNDS[key]
    return min(max(float(v), lo * 1.05), hi / 1.05)


def fit_backend(groups: dict[str, list[Row]], backend: str, max_nfev: int = MAX_NFEV,
                warm: bool = True) -> dict[str, dict[str, float]]:
    """Joint robust fit of one backend: shared engine constants, per-class efficiencies.

    Starts from the shipped calibration (a refit after new data or a model change), at most
    ``max_nfev`` iterations (each one Jacobian of finite differences over every row)."""
    import numpy as np
    from scipy.optimize import least_squares

    classes = sorted(groups)
    held = {f"{c}:{k}": START[k] for c in classes for k, uses in EXERCISED_BY.items()
            if not any(uses(r) for r in groups[c])}
    n_ttft = {c: sum(1 for r in groups[c] if r.ttft_ms) for c in classes}
    host_ref = max(classes, key=lambda c: (n_ttft[c], c))
    tied = {f"{c}:{k}": f"{host_ref}:{k}" for c in classes if n_ttft[c] < HOST_MIN_ROWS
            for k in HOST_PER_CLASS}
    held.update({f"{c}:eta_lowp": v for c, v in kernel_lowp().items() if c in classes})
    shared = [k for k in SHARED
              if not (k == "interference_lockstep" and backend in MIXED_PREFILL_BACKENDS)]
    names = shared + [f"{c}:{k}" for c in classes for k in PER_CLASS
                      if f"{c}:{k}" not in held and f"{c}:{k}" not in tied]
    base = [k.split(":")[-1] for k in names]
    lo = np.log([BOUNDS[k][0] for k in base])
    hi = np.log([BOUNDS[k][1] for k in base])
    ref = classes[0]
    x0 = np.log([_warm(ref if ":" not in n else n.split(":")[0], backend, b) if warm
                 else START[b] for n, b in zip(names, base, strict=True)])
    prior_x = np.log([PRIOR.get(k, (1.0, 0.0))[0] for k in base])
    prior_w = np.array([PRIOR.get(k, (1.0, 0.0))[1] for k in base])

    def split(x: Any) -> dict[str, dict[str, float]]:
        v = {**held, **dict(zip(names, (float(a) for a in np.exp(x)), strict=True))}
        v.update({k: v[ref_key] for k, ref_key in tied.items()})
        v.setdefault("interference_lockstep", v["interference"])  # a mixed-prefill backend
        return {c: {k: v[k] if k in SHARED else v[f"{c}:{k}"] for k in PARAMS} for c in classes}

    order = _order_pairs(classes)

    def f(x: Any) -> Any:
        params = split(x)
        cal = calibration_dict({(c, backend): _band_entry(params[c]) for c in classes})
        res = [r for c in classes for r in residuals(groups[c], cal)]
        res += [ORDER_WEIGHT * v for pair in order for v in _order_shortfall(params, *pair)]
        return np.concatenate([np.asarray(res), prior_w * (x - prior_x)])

    sol = least_squares(f, x0, bounds=(lo, hi), loss="cauchy", f_scale=0.1, max_nfev=max_nfev,
                        x_scale=1.0, diff_step=1e-3)
    return {c: {k: float(f"{v:.4g}") for k, v in p.items()} for c, p in split(sol.x).items()}


def _order_pairs(classes: list[str]) -> list[tuple[str, dict[str, Any], str, dict[str, Any]]]:
    """The ORDERED_CLASSES pairs both fitted here, with their reference GPUs' catalog entries."""
    from servewise.engine.domain.catalog import load_catalog

    cat = load_catalog()
    return [(fast, cat.gpu(fast_gpu), slow, cat.gpu(slow_gpu))
            for fast, fast_gpu, slow, slow_gpu in ORDERED_CLASSES
            if fast in classes and slow in classes]


def _order_shortfall(params: dict[str, dict[str, float]], fast: str, fast_gpu: dict[str, Any],
                     slow: str, slow_gpu: dict[str, Any]) -> list[float]:
    """log(slow rate / fast rate), floored at 0, for bandwidth, 16-bit and 8-bit GEMM rates."""
    def rates(p: dict[str, float], g: dict[str, Any]) -> tuple[float, float, float]:
        t16, t8 = g["dense_tflops"]["bf16"], g["dense_tflops"]["fp8"]
        return (g["bandwidth_gbs"] * p["eta_bw"], t16 * p["eta_flops"],
                t8 * p["eta_flops"] * p["eta_lowp"])

    return [max(0.0, math.log(s / f)) for f, s in zip(rates(params[fast], fast_gpu),
                                                        rates(params[slow], slow_gpu),
                                                        strict=True)]


def _ratio_band(rows: list[Row], cal: dict[str, Any]) -> tuple[dict[str, list[float]],
                                                               dict[str, Any]]:
    """[p10, p90] of measured/predicted per metric, and median APE of the group."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        pr = predict_row(r, cal)
        for m, meas in (("tpot_ms", r.tpot_ms), ("ttft_ms", r.ttft_ms),
                        ("output_tokens_per_s", r.tput)):
            if pr.get(m) and meas:
                ratios[m].append(meas / pr[m])
    band: dict[str, list[float]] = {}
    err = {}
    for m in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
        xs = ratios.get(m) or []
        if len(xs) >= 5:
            band[m] = [round(min(1.0, quantile(xs, 0.1)), 3),
                       round(max(1.0, quantile(xs, 0.9)), 3)]
        if m != "output_tokens_per_s":
            err[m] = {"n": len(xs), "median_ape": round(
                quantile([abs(1 / x - 1) for x in xs] or [0.0], 0.5), 4)}
    # a metric the group did not measure: from its reciprocal (throughput ~ 1/TPOT), else the
    # first-order band (never the degenerate [1, 1] of no rows)
    if "output_tokens_per_s" not in band:
        lo, hi = band.get("tpot_ms", FALLBACK_BAND["tpot_ms"])
        band["output_tokens_per_s"] = [round(1 / hi, 3), round(1 / lo, 3)]
    if "tpot_ms" not in band:
        lo, hi = band["output_tokens_per_s"]
        band["tpot_ms"] = [round(min(1 / hi, FALLBACK_BAND["tpot_ms"][0]), 3),
                           round(max(1 / lo, FALLBACK_BAND["tpot_ms"][1]), 3)]
    if "ttft_ms" not in band:
        band["ttft_ms"] = list(FALLBACK_BAND["ttft_ms"])
    return {k: band[k] for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s")}, err


ROWS_PER_MODEL = int(os.environ.get("FIT_ROWS_PER_MODEL", "120"))


def _thin(rows: list[Row]) -> list[Row]:
    """At most ROWS_PER_MODEL rows per model of a group, evenly spaced (deterministic): keeps
    the fit's cost bounded and stops one heavily sampled model from dominating it."""
    by_model: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_model[r.model_name].append(r)
    out = []
    for rs in by_model.values():
        step = max(1, math.ceil(len(rs) / ROWS_PER_MODEL))
        out += rs[::step]
    return out


def fit(paths: Iterable[str | Path] = DEFAULT_FILES, exclude_models: Iterable[str] = (),
        exclude_gpus: Iterable[str] = (), warm: bool = True,
        max_nfev: int = MAX_NFEV, backends: Iterable[str] | None = None,
        exclude_campaigns: Iterable[tuple[str, str, str, str, str]] = ()) -> dict[str, Any]:
    """Fit every measured (class, backend) group; returns the calibration dict.

    ``warm=False`` starts from the round START values instead of the shipped constants (a
    held-out refit must not start from constants that saw the held-out rows). ``backends``:
    refit only these (each backend is an independent fit), keep the shipped constants of the
    others (a model change that moves only one backend's rows). ``exclude_campaigns``: leave
    out the rows of these (file name, model, backend, GPU, precision) campaigns (usable_rows)."""
    from servewise.engine.domain.perf.calibration import _value, load_calibration

    only = {b.lower() for b in backends} if backends else None
    paths = [Path(p) for p in paths]
    rows = usable_rows(paths, exclude_models, exclude_gpus, exclude_campaigns)
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        assert r.gpu is not None
        groups[(gpu_class(r.gpu), r.backend)].append(r)
    measured = sorted({g for g, rs in groups.items()
                       if any(r.tpot_ms for r in rs) or sum(1 for r in rs if r.tput) >= 20})
    profiles: dict[tuple[str, str], dict[str, Any]] = {}
    shipped = load_calibration().get("classes") or {}
    for be in sorted({b for _, b in measured}):
        if only is not None and be not in only:
            for c, b in measured:
                entry = ((shipped.get(c) or {}).get("backends") or {}).get(be)
                if b == be and entry:
                    profiles[(c, be)] = _band_entry({k: _value(entry, k) for k in PARAMS})
            continue
        fitted = fit_backend({c: _thin(groups[(c, b)]) for c, b in measured if b == be}, be,
                             max_nfev=max_nfev, warm=warm)
        for c, params in fitted.items():
            profiles[(c, be)] = _band_entry(params)
    cal = calibration_dict(profiles)
    for key in measured:
        band, err = _ratio_band(groups[key], cal)
        models = sorted({r.model_name for r in groups[key]})
        gpus = sorted({r.gpu_name for r in groups[key]})
        profiles[key].update(band=band, fit_error=err,
                             fitted_on=f"{len(groups[key])} rows of {', '.join(gpus)} "
                                       f"({', '.join(models)})")
    return calibration_dict(profiles)


def rebanded(paths: Iterable[str | Path]) -> dict[str, Any]:
    """The shipped calibration with its bands and fit errors recomputed on ``paths``."""
    from servewise.engine.domain.perf.calibration import load_calibration

    cal = load_calibration()
    rows = usable_rows([Path(p) for p in paths])
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        assert r.gpu is not None
        groups[(gpu_class(r.gpu), r.backend)].append(r)
    profiles = {(c, b): dict(e) for c, v in (cal.get("classes") or {}).items()
                for b, e in (v.get("backends") or {}).items()}
    for key in profiles:
        band, err = _ratio_band(groups.get(key, []), cal)
        profiles[key].update(band=band, fit_error=err)
    return calibration_dict(profiles)


def _sha(paths: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


HEADER = """\
# Calibration constants of the performance model (servewise.engine.domain.perf).
# Written by `python -m tools.perf.fit`; do not edit by hand, refit instead.
#
# Per GPU class (architecture + memory technology) and backend (the engine costs t_step_ms,
# t_layer_us, t_moe_layer_us, t_seq_us, t_chunk_ms, interference, interference_lockstep,
# t_request_ms, k_step, burst, t_in_token_us are shared by all classes of a backend: one joint
# fit per backend):
#   eta_bw        achieved share of peak memory bandwidth in decode steps
#   eta_flops     achieved share of peak dense tensor FLOPS (GEMMs and attention)
#   eta_moe       efficiency of grouped expert GEMMs / expert reads relative to dense ones
#   t_step_ms     fixed cost per engine step (scheduler, kernel launch)
#   t_layer_us    cost per layer per step (small kernels: norms, rotary, routing)
#   t_seq_us      cost per sequence per step (sampling, detokenisation, bookkeeping)
#   interference  share kappa of other requests' prefill time that lands on decode steps
#                 (open loop, and closed loops of random-length requests)
#   interference_lockstep  kappa of a closed loop of fixed-length requests: they start and
#                 finish together and stay in step, so fewer prefills land on decode steps
#                 where the scheduler runs prefills as steps of their own (SGLang); vLLM and
#                 TensorRT-LLM mix prefill chunks into decode steps: their value is their
#                 interference (calibration.MIXED_PREFILL_BACKENDS, not fitted)
#   t_chunk_ms    extra cost per prefill chunk (its own engine step)
#   t_request_ms  fixed per-request latency before the first token through the backend's
#                 OpenAI-compatible HTTP server and its client: the openai-http harness's client
#                 cost t_client_ms (serving.client_ms). Fitted on the closed-loop TTFT rows, all of
#                 which ran so (InferenceX: benchmark_serving.py against vllm serve / sglang /
#                 trtllm-serve; aiconfigurator: aiperf against a Dynamo frontend); rows of an
#                 in-process load generator (trtllm-bench, gptSessionBenchmark, vLLM's offline
#                 benchmarks: data.benchmark_harness) pay policy harness_in_process_client_ms (0)
#   k_step        decode steps a new request waits before its prefill starts (runs whose recipe
#                 sets SGLang's --scheduler-recv-interval N wait (N-1)/2 steps more: data.py)
#   burst         share phi of the arrival-burst wait (C-1)/2 x t_prefill left in TTFT
#   admission     share psi of the completion interval (osl-1) x TPOT / (C-1) waited
#   dp_wait       decode steps a new request waits before its prefill when attention runs
#                 data-parallel (ranks prefill in lockstep; TRT-LLM attention-DP balancing
#                 holds context requests up to timeout_iters); a class with no such rows
#                 keeps the start value 1 (not fitted)
#   eta_lowp      efficiency of native 8/4-bit GEMMs relative to 16-bit ones; held (not fitted)
#                 at the measured GEMM kernels' FP8 / BF16 ratio where the class has them
#                 (tools/perf/gemm.yaml: Hopper 0.793, Blackwell HBM 0.73, Blackwell GDDR 0.944)
#   t_moe_layer_us extra cost per MoE layer per step (routing, grouped-GEMM launches)
#   t_in_token_us cost per prompt token before the engine (tokenise, IPC, HTTP body)
#   band          [p10, p90] of measured/predicted on the fitted rows (uncertainty band)
#   fit_error     median absolute percentage error on the fitted rows
# Method: robust least squares (scipy least_squares, Cauchy loss, f_scale 0.1) of
#   log(predicted/measured) of TPOT, TTFT, throughput (weight 1 each), jointly per backend, with
#   a prior in log space on the efficiencies (centre, weight): eta_bw 0.75, 0.3 and eta_flops
#   0.6, 1 (decode 74-77 % of peak bandwidth and prefill 54-69 % of peak FLOPS in
#   benchmarks.csv), eta_lowp 0.85, 1 (cuBLASLt FP8 GEMM 81 % of its peak, as BF16; less
#   activation quantisation), eta_moe 0.7, 0.3 (no external figure).
# links: all-reduce latency and efficiency (share of one-direction link bandwidth) per link kind
#   and GPU count, and per measured GPU (by_gpu), fitted from vLLM custom all-reduce kernel
#   latencies (../shared/data/ops, `python -m tools.perf.kernels`); kept across refits.
#   GPUs without kernel data use their link kind's median (NVLink: A100/H100/H200/B200; PCIe:
#   L40S, RTX PRO 6000). eta > 1 at 8 NVLink GPUs: NVLS in-switch reduction. PCIe beyond two
#   GPUs: the engines run an NCCL ring there (vLLM disables its custom all-reduce on more than
#   two PCIe-only GPUs), so the model uses the two-GPU efficiency with n-1 ring-hop latencies
#   (calibration.link_params); the 4/8-GPU PCIe custom all-reduce entries are kept as measured.
# moe_kernels: per GPU with measured vLLM fused-MoE kernels (../shared/data/ops,
#   `python -m tools.perf.kernels`; kept across refits): `read`, the expert-read
#   efficiency of weight-only INT4 (Marlin de-quantises every weight) relative to FP8 at 1-4
#   tokens, and `multiply`, the grouped expert GEMM rate of FP8 / FP4 / INT4 relative to BF16 at
#   2,048-8,192 tokens (median over the shapes measured in both dtypes). The serving model reads
#   INT4 experts at eta_moe x read and multiplies expert GEMMs at the BF16 peak x multiply
#   (calibration.moe_kernel_rates: read from the GPU or its class's nearest-bandwidth measured
#   GPU, multiply the class median); a class without kernel data uses the precision's peak x
#   eta_lowp. `route`: bytes per routed (token x hidden) element at the GPU's datasheet
#   bandwidth that the kernels move whatever the expert slice (permuting, scattering and
#   gathering every (token, expert) pair's activations on each MoE-TP rank): the intercepts of
#   latency against 1/moe_tp (EP 1, >= 1,024 tokens, three or more TP sizes) rise with
#   tokens x top-k x hidden by this slope (Theil-Sen over shapes and token counts); the serving
#   model adds moe_layers x tokens x k x hidden / ep x route bytes at the bandwidth to every
#   step's compute (from the GPU or its class's nearest-bandwidth measured GPU).
# Not fitted (documented priors): memory overhead 1.5 GiB + activations (engine/domain/perf/memory.py),
#   prefill chunk sizes (engine/domain/perf/calibration.py CHUNK_TOKENS).
# Refit: warm start from the shipped constants, at most FIT_MAX_NFEV (default 40) iterations.
# Classes marked `inherit` have no measured rows: they use the inherited class's
#   efficiencies with their own bandwidth/FLOPS and a band widened by
#   unmeasured_band_widening (band ** factor).
"""


def write(cal: dict[str, Any], paths: list[Path], out: Path, date: str) -> None:
    meta = {"fitted_on": [p.name for p in paths], "data_sha256_16": _sha(paths), "date": date,
            "method": "robust least squares on log errors per (gpu class, backend)"}
    text = HEADER + yaml.safe_dump({"meta": meta, **cal}, sort_keys=False, width=100)
    out.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", help="CSV (repeatable); default: shipped data")
    ap.add_argument("--out", default=str(CALIBRATION_FILE))
    ap.add_argument("--date", default=os.environ.get("FIT_DATE")
                    or _dt.date.today().isoformat())
    ap.add_argument("--backend", action="append",
                    help="refit only this backend (repeatable); the others keep their constants")
    ap.add_argument("--bands-only", action="store_true",
                    help="keep the shipped constants, recompute bands and fit errors only")
    a = ap.parse_args(argv)
    paths = [Path(p) for p in (a.data or DEFAULT_FILES)]
    cal = rebanded(paths) if a.bands_only else fit(paths, backends=a.backend)
    write(cal, paths, Path(a.out), a.date)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
