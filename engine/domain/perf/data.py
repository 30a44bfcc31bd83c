"""Read measured serving results (measured.csv or benchmarks.csv layout) into uniform rows.

Column semantics of measured.csv (aiconfigurator silicon sample), as checked against each row's
source id:

* Requests in flight: a row's source id states them (``..._c256_...``). In measured.csv
  ``concurrency`` is per attention-DP rank: ids say ``c256`` where the row says 32 with
  attention_dp 8. In measured-extra.csv it is the total: every one of its 97 rows with
  attention_dp > 1 has the id's ``c`` = ``concurrency`` = ``silicon_concurrency`` =
  ``batch_size(per-rank) x attn_dp`` in its notes. So the id's count is read when the id states
  one, else ``concurrency x attention_dp``.
* Some measured-extra runs spread their requests over several identical workers: the notes give
  ``batch_size(per-rank)`` B with ``concurrency`` > B x attention_dp (e.g. Qwen3-32B NVFP4 on
  GB200, c448 with B 14 at tp 2: its 15,000-token KV of 448 sequences could not fit two GPUs).
  One worker, the unit the model predicts, then had B x attention_dp requests in flight.
* The GPU count of a run is ``max(tp x attention_dp, moe_tp x moe_ep)``; where attention is
  narrower than the MoE group (vLLM rows with tp 1, moe_tp 2), the extra GPUs serve attention
  data-parallel.
* vLLM runs with data-parallel attention and expert-parallel MoE are written ``tp`` N,
  ``attention_dp`` N, ``moe_tp`` 1, ``moe_ep`` N x N (the source's ``gpu_count`` =
  tp x attn_dp counts each GPU N times); their ids say ``tpN_epN``, and N GPUs is what the
  numbers allow: MiniMax-M2.5 FP8 at c512 on "tp4 ep4" B200 measures TPOT 32 ms, which 16
  GPUs would serve in a third of that (weights and KV read per step: 57 + 50 GB per GPU on 4,
  a quarter on 16). A row whose notes carry that derivation is read as N GPUs, attention
  data-parallel over N, EP N; elsewhere (a user's own file) the columns mean what they say.
* On NVL72 racks (GB200/GB300, ``nvlink_domain`` 72) wide runs are real; an MLA model there
  with ``tp`` > 8 and no attention DP is read as attention data-parallel over the ``tp`` GPUs
  (its latent KV, replicated per TP rank, could not hold the thousands of sequences in flight).
* Rows with ``tp x attention_dp`` > 8 are mislabelled single-node runs: their ids say
  ``tp8_ep8`` / ``tp4_ep4`` and their numbers equal the rows labelled tp 8, moe_ep 8. There the
  ``tp``/``attention_dp`` column holds tp x ep; the run used ``moe_ep`` GPUs with expert-parallel
  MoE and attention TP (or DP when ``attention_dp`` > 1) over the same GPUs.
"""

from __future__ import annotations

import csv
import gzip
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.domain.catalog import UnknownEntry, load_catalog
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.precision import KV_PRECISIONS
from servewise.engine.domain.perf.serving import HARNESSES, LENGTHS

DATA_DIR = PACKAGE_ROOT / "facts" / "data"
DEFAULT_FILES = (DATA_DIR / "measured.csv", DATA_DIR / "benchmarks.csv",
                 DATA_DIR / "measured-extra.csv.gz", DATA_DIR / "benchmarks-extra.csv.gz")
# Measured runs of model families the calibration is never fitted on (tools/perf/fit.py reads
# DEFAULT_FILES only): gpt-oss-120b (facts/data/measured-gptoss.csv, tools/perf/gptoss_data.py).
# `servewise validate facts/data/measured-gptoss.csv` predicts them as an unseen model.
HELD_OUT_FILES = (DATA_DIR / "measured-gptoss.csv",)
NODE_GPUS = 8

# Names used by the data files that the catalog may not carry (same architecture).
MODEL_ALIASES = {"deepseek-r1": "DeepSeek-V3", "llama-3-8b": "Llama-3.1-8B",
                 "llama-3-70b": "Llama-3.1-70B", "llama-3.3-70b": "Llama-3.1-70B"}

MEASURED_COLUMNS = {"model", "gpu", "backend", "precision", "isl", "osl", "concurrency", "tp",
                    "pp", "ttft_ms", "tpot_ms"}
BENCH_COLUMNS = {"model", "gpu", "n_gpus", "framework", "precision", "tp", "input_len",
                 "output_len", "concurrency_or_batch", "ttft_ms", "tpot_or_itl_ms",
                 "output_tokens_per_s_total"}


class DataError(ValueError):
    """A data file that cannot be read as either layout."""


@dataclass(frozen=True)
class DisaggRun:
    """The pools of a disaggregated run (prefill and decode workers); the row's ``layout`` is
    one decode worker's."""

    prefill: Layout
    prefill_workers: int
    decode_workers: int
    source: str  # where the layouts come from: the row's notes or a recipe
    decode_batch: int | None = None  # the recipe's max sequences per decode rank, where stated


@dataclass
class Row:
    """One measurement, normalised; ``skipped`` says why it cannot be predicted."""

    index: int
    model: dict[str, Any] | None = None
    gpu: dict[str, Any] | None = None
    model_name: str = ""
    gpu_name: str = ""
    backend: str = ""
    precision: str = ""
    kv_precision: str | None = None
    isl: int = 0
    osl: int = 0
    concurrency: float | None = None   # total requests in flight; None = offline (max)
    layout: Layout = field(default_factory=Layout)
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    tput: float | None = None
    offline: bool = False
    prefill_only: bool = False         # in-process engine benchmark: TTFT = the prefill alone
    request_rate: float | None = None  # offered requests/s: open loop (Poisson arrivals)
    statistic: str = "mean"            # of the latency columns: mean | median | p99
    recv_interval: int = 1             # SGLang --scheduler-recv-interval of the run's recipe
    lengths: str = "fixed"             # closed-loop request lengths: fixed | random (a range)
    skipped: str | None = None
    unused: str | None = None          # a measurement of the row left out, and why
    speculative_tokens: int = 0        # draft tokens per step of a speculative run (0: none)
    disagg: DisaggRun | None = None    # a disaggregated run (prefill and decode pools)
    harness: str = "openai-http"       # what sent the requests (serving.HARNESSES, benchmark_harness)
    num_requests: float | None = None  # requests an open-loop run sent (its TTFT once saturated)
    # a maximum-rate run (MLPerf Server and the like): ``request_rate`` is the highest Poisson rate
    # whose P99 TTFT / TPOT stayed within these limits; ``replicas`` engines shared the rate
    p99_ttft_limit_ms: float | None = None
    p99_tpot_limit_ms: float | None = None
    replicas: int = 1

    @property
    def max_rate_run(self) -> bool:
        """The row measured the largest open-loop rate meeting P99 limits (its ``request_rate``)."""
        return bool(self.request_rate and (self.p99_ttft_limit_ms or self.p99_tpot_limit_ms))


def _f(v: str | None) -> float | None:
    try:
        x = float(str(v).replace(",", "").strip())
    except (TypeError, ValueError):
        return None
    return x if x > 0 else None


LAYOUT_COLUMNS = ("tp", "pp", "attention_dp", "moe_tp", "moe_ep")


def _number(v: str | None) -> bool:
    """Empty or a number (a layout column may be empty or 0: the default applies)."""
    text = str(v or "").strip()
    try:
        float(text or "0")
    except ValueError:
        return False
    return True


def _i(v: str | None, default: int = 0) -> int:
    x = _f(v)
    return int(x) if x else default


def resolve_model(name: str) -> dict[str, Any]:
    cat = load_catalog()
    base = re.sub(r"\s*\(.*\)\s*$", "", name).strip()
    try:
        return cat.model(base)
    except UnknownEntry:
        alias = MODEL_ALIASES.get(base.lower())
        if alias:
            return cat.model(alias)
        raise


def resolve_gpu(name: str) -> dict[str, Any]:
    return load_catalog().gpu(name)


def _entities(row: Row, model: str, gpu: str) -> None:
    row.model_name, row.gpu_name = model, gpu
    try:
        row.model = resolve_model(model)
        row.gpu = resolve_gpu(gpu)
    except UnknownEntry as exc:
        row.skipped = str(exc)


STATISTICS = ("mean", "median", "p99")


# What sent a row's requests (serving.HARNESSES), where its file has no ``harness`` column: the
# fixed per-request client cost of its TTFT follows (serving.client_ms). From each source's
# description of how it measured:
# * measured.csv / measured-extra / measured-gptoss / measured-disagg (aiconfigurator's silicon
#   sample): openai-http. InferenceX's runs (date-stamped ids, db-dump rows) send every request
#   from utils/bench_serving/benchmark_serving.py to the engine's HTTP server
#   (benchmarks/benchmark_lib.sh run_benchmark_serving: --base-url http://0.0.0.0:$PORT;
#   SemiAnalysisAI/InferenceX 843c6254); aiconfigurator's own runs ran in ai-dynamo runtime images
#   (the notes' image=, dynamo_version=) behind Dynamo's OpenAI-compatible frontend, benchmarked
#   with aiperf (aiconfigurator generator/config/backend_templates/benchmark/bench_run.sh.j2,
#   `aiperf profile`; ai-dynamo/aiconfigurator 095f58a5).
# * benchmarks.csv / benchmarks-extra.csv rows by their framework, scenario and notes text:
#   in-process where an engine benchmark ran the engine in its own process (HARNESS_IN_PROCESS:
#   trtllm-bench, gptSessionBenchmark, vLLM's offline throughput / latency benchmarks, llama-bench,
#   MLC's bench), otherwise openai-http (vLLM bench serve, AIPerf against NIM).
HARNESS_IN_PROCESS = ("trtllm-bench", "gptsessionbenchmark", "offline", "llama-bench",
                      "llama.cpp", "mlc llm", "single-stream prefill")


def benchmark_harness(r: dict[str, str]) -> str:
    """The harness of a benchmarks-layout row without a ``harness`` column (HARNESS_IN_PROCESS)."""
    text = " ".join((r.get(k) or "") for k in ("framework", "scenario", "notes")).lower()
    return "in-process" if any(k in text for k in HARNESS_IN_PROCESS) else "openai-http"


def _load(row: Row, r: dict[str, str]) -> None:
    """The optional ``request_rate`` and ``statistic`` columns (CONTRACTS §2), ``num_requests``
    (the requests an open-loop run sent: the TTFT of a saturated run grows with it), ``harness`` (what
    sent the requests, serving.HARNESSES; empty: the rules above benchmark_harness), ``kv_precision``
    (the run's KV-cache format where its recipe states it; empty = the default for its weights),
    ``p99_ttft_limit_ms`` / ``p99_tpot_limit_ms`` with ``request_rate``: a maximum-rate run (the
    highest Poisson rate, over ``replicas`` engines of the row's layout, whose P99 TTFT and TPOT met
    the limits: MLPerf Inference's Server scenario), ``scheduler_recv_interval``: the run's SGLang
    ``--scheduler-recv-interval`` (new requests
    taken every N decode steps; empty = 1, or the InferenceX recipe of RECV_INTERVAL_RULES), and
    ``request_lengths``: ``fixed`` (every request isl / osl, the default) or ``random`` (lengths
    drawn from a range whose means are isl / osl; InferenceX rows are read so)."""
    row.request_rate = _f(r.get("request_rate"))
    row.num_requests = _f(r.get("num_requests"))
    row.p99_ttft_limit_ms = _f(r.get("p99_ttft_limit_ms"))
    row.p99_tpot_limit_ms = _f(r.get("p99_tpot_limit_ms"))
    reps = _f(r.get("replicas"))
    if reps is not None and reps != int(reps):
        row.skipped = row.skipped or f"replicas '{r.get('replicas')}': expected a whole number"
    row.replicas = int(reps) if reps else 1
    kv = (r.get("kv_precision") or "").strip().lower()
    if kv:
        if kv not in KV_PRECISIONS:
            row.skipped = row.skipped or (f"kv_precision '{kv}': expected one of "
                                          f"{', '.join(KV_PRECISIONS)}")
        else:
            row.kv_precision = kv
    stat = (r.get("statistic") or "").strip().lower() or "mean"
    if stat not in STATISTICS:
        row.skipped = row.skipped or f"statistic '{stat}': expected one of {', '.join(STATISTICS)}"
    row.statistic = stat
    text = (r.get("scheduler_recv_interval") or "").strip()
    if text:
        n = _f(text)
        if n is None or n != int(n):
            row.skipped = row.skipped or (f"scheduler_recv_interval '{text}': expected a whole "
                                          "number of decode steps (1 or more)")
        else:
            row.recv_interval = int(n)
    harness = (r.get("harness") or "").strip().lower()
    if harness:
        if harness not in HARNESSES:
            row.skipped = row.skipped or (f"harness '{harness}': expected one of "
                                          f"{', '.join(HARNESSES)}")
        else:
            row.harness = harness
    lengths = (r.get("request_lengths") or "").strip().lower()
    if lengths:
        if lengths not in LENGTHS:
            row.skipped = row.skipped or (f"request_lengths '{lengths}': expected one of "
                                          f"{', '.join(LENGTHS)}")
        else:
            row.lengths = lengths


_COUNTED_TWICE = "gpu_count derived = sum(workers*tp*pp*attn_dp)"
_ID_CONCURRENCY = re.compile(r"\bid=\S*_c(\d+)_")
_BATCH_PER_RANK = re.compile(r"batch_size\(per-rank\)=(\d+)")


def _in_flight(r: dict[str, str], adp: int) -> float:
    """Requests in flight on one serving instance (see the module docstring): the source id's
    ``c<N>`` when it states one, else ``concurrency x attention_dp``; a run over several
    workers (notes' ``batch_size(per-rank)`` x attention_dp below that) counts one worker's."""
    stated = _ID_CONCURRENCY.search(r.get("source") or "")
    total = float(stated.group(1)) if stated else (_f(r.get("concurrency")) or 0) * adp
    per_rank = _BATCH_PER_RANK.search(r.get("notes") or "")
    if per_rank and 0 < int(per_rank.group(1)) * adp < total:
        return float(int(per_rank.group(1)) * adp)
    return total


def _measured_layout(r: dict[str, str], gpu: dict[str, Any] | None = None,
                     model: dict[str, Any] | None = None) -> tuple[Layout, float]:
    """Layout and requests in flight of a measured row; a run wider than the GPU's NVLink
    domain (8, or 72 for NVL72 racks: ``nvlink_domain`` in the catalog) is a mislabelled
    single-node run (see the module docstring)."""
    domain = int((gpu or {}).get("nvlink_domain") or NODE_GPUS)
    tp, adp = _i(r.get("tp"), 1), _i(r.get("attention_dp"), 1)
    mtp, mep = _i(r.get("moe_tp"), 1), _i(r.get("moe_ep"), 1)
    pp = _i(r.get("pp"), 1)
    conc = _in_flight(r, adp)
    if adp > 1 and tp == adp and mtp * mep == tp * adp and _COUNTED_TWICE in (r.get("notes") or ""):
        # data-parallel attention with expert-parallel MoE written N, N, 1, N x N by a source
        # whose GPU count multiplies tp by attn_dp: the ids say tpN_epN, and the run used N GPUs
        # (see the module docstring). A file of its own may mean tp x attention_dp GPUs.
        return Layout(1, pp, tp, tp), conc
    if tp * adp > domain and mtp * mep == tp * adp:
        n = mep
        real_tp, real_dp = (n, 1) if adp == 1 else (1, n)
        return Layout(real_tp, pp, mep, real_dp), conc
    n = max(tp * adp, mtp * mep)
    if tp > NODE_GPUS and adp == 1 and model and str(model.get("attention_type")).upper() == "MLA":
        # MLA's latent KV is replicated on every TP rank: tp 72 with thousands of sequences
        # cannot hold its KV, so such a run split attention data-parallel over the GPUs
        return Layout(1, pp, mep, tp), conc
    return Layout(tp, pp, mep, max(1, n // tp)), conc


# Runs with speculative decoding whose draft length their source does not give (the model predicts
# speculation only with a known number of draft tokens, MODELLED_SPECULATIVE_RUNS below), known from their source's
# configuration: the columns (lower-case; ``image`` is the notes' ``image=``) a run matches, and
# why. From InferenceX's .github/configs/nvidia-master.yaml (SemiAnalysisAI/InferenceX), Feb to
# Apr 2026 (e.g. commit 51e31df):
# * DeepSeek-R1 on B200 with TensorRT-LLM: the plain configurations (dsr1-fp4/fp8-b200-trt) ran
#   in image 1.2.0rc6.post2, the MTP ones (dsr1-fp4/fp8-b200-trt-mtp: "MTP=3 (or MTP=1 when
#   DP_ATTN=true)") in 1.2.0rc6.post3; the same configuration measures TPOT 10.1 ms in post2 and
#   4.4 ms in post3 (c4, tp 8, 1k/8k). H200 ran both in one image, so its rows are kept.
# * Qwen3.5-397B FP8 on B200 with SGLang: qwen3.5-fp8-b200-sglang-mtp searched tp 4 / ep 1 in
#   image lmsysorg/sglang:v0.5.9-cu130, the plain configuration tp 8 / ep 1 and tp 4 / ep 4 in
#   the -amd64 images (until May 2026); rows without an image repeat those runs' numbers. B300
#   rows in the same image and layout (April 2026) are the same recipe.
_MTP_QWEN35 = ("speculative decoding: InferenceX's qwen3.5-fp8-b200-sglang-mtp configuration "
               "(tp 4, ep 1, image lmsysorg/sglang:v0.5.9-cu130; the plain one searched tp 8 and "
               "tp 4 / ep 4); the model has no speculative-decoding term")
# Speculative runs whose recipe says how many draft tokens they ran, predicted with speculation:
# InferenceX benchmarks/dsr1_fp8_b200_trt_mtp.sh (and its fp4 twin) set
# `speculative_config: {decoding_type: MTP, num_nextn_predict_layers: MTP}` with "MTP=1" when
# DP_ATTENTION is true, else "MTP=3"; the client sends random prompts in the chat template
# (--use-chat-template). (match, recipe label)
MODELLED_SPECULATIVE_RUNS: tuple[tuple[dict[str, str], str], ...] = (
    ({"backend": "trtllm", "backend_version": "1.2.0rc6.post3", "model": "deepseek-r1"},
     "dsr1-trt-mtp"),
)


def speculative_tokens(recipe: str, attention_dp: int) -> int:
    """Draft tokens per step of a modelled speculative recipe (MODELLED_SPECULATIVE_RUNS)."""
    if recipe == "dsr1-trt-mtp":
        return 1 if attention_dp > 1 else 3
    raise ValueError(f"unknown speculative recipe {recipe!r}")


SPECULATIVE_RUNS: tuple[tuple[dict[str, str], str], ...] = (
    ({"backend": "sglang", "model": "qwen3.5-397b-a17b", "image": "lmsysorg/sglang:v0.5.9-cu130"},
     _MTP_QWEN35),
    ({"backend": "sglang", "model": "qwen3.5-397b-a17b", "gpu": "b200", "precision": "fp8",
      "tp": "4", "moe_ep": "1", "attention_dp": "1"}, _MTP_QWEN35),
)
_IMAGE = re.compile(r"\bimage=([^;\s]+)")

# InferenceX runs whose columns do not say how they ran, from that project's history
# (SemiAnalysisAI/InferenceX):
# * GB200: runners/launch_gb200-nv.sh ran every GB200 configuration as a multi-node Dynamo
#   deployment with separate context (prefill) and generation (decode) workers: TensorRT-LLM
#   through dynamo's performance_sweeps/submit_disagg.sh ("ctx_num gen_num gen_tp_size ...",
#   some with MTP), SGLang through its disaggregated sglang-configs (launcher of 2025-11-05,
#   897ccdcaa; no aggregated path in it up to Feb 2026), and the results' TP column is the
#   deployment's total GPU count ("Fix TP column to use total_gpus", cb9876f9e, 2025-09-18).
#   The aggregated serving model does not describe such a deployment (measured-disagg.csv holds
#   the disaggregated runs, which the model does not predict yet).
_DISAGG_GB200 = ("disaggregated serving: InferenceX ran its GB200 configurations as multi-node "
                 "Dynamo deployments with separate prefill and decode workers "
                 "(runners/launch_gb200-nv.sh, submit_disagg.sh), the TP column counting all of "
                 "their GPUs; the model predicts aggregated serving")
DISAGGREGATED_RUNS: tuple[tuple[dict[str, str], str], ...] = (({"gpu": "gb200"}, _DISAGG_GB200),)

# Runs of InferenceX's first recipes (Sep - early Nov 2025), whose scripts, not the
# configuration, chose expert parallelism and attention DP: the configuration named only `tp`,
# so the rows say moe_ep 1, no attention DP and no backend version. Identified by those labels
# on DeepSeek-R1 configurations whose later recipes state ep (the scripts at 2025-10-19,
# 6e64167cd; unchanged from 2025-09-18 until the search space named ep / dp-attn on 2025-11-03,
# 17d5e204f, or 2025-11-10, 7daaa8bb3, for SGLang):
# * dsr1_fp4_b200_docker.sh (SGLang) passed --enable-ep-moe, which SGLang's ServerArgs turns
#   into ep_size = tp_size: expert-parallel over the TP GPUs at every concurrency.
# * dsr1_fp4_b200_trt_slurm.sh: EP_SIZE 1, or TP above a concurrency, and attention DP from
#   another, per (TP, ISL, OSL) (table below: EP when C > the first number, DP when C >= the
#   second).
# * dsr1_fp8_h200_trt_slurm.sh: EP_SIZE = TP always; attention DP when C > 64 (ISL 1,024) or
#   C > 32 (ISL 8,192).
# Those runs' client had no warm-up (benchmark_serving's 2 x CONC warm-up requests came on
# 2026-01-21, d053ae24e), so their first requests met a cold server. It shows in the SGLang
# rows (image v0.5.3rc1, whose script patched a race in FlashInfer's cubin loader, which fetches
# TRT-LLM-gen kernels when first used): ISL 8,192 at TP 8 measures TTFT 5.6, 9.2, 7.3, 2.1, 2.4,
# 2.9 s at C 4 to 128 (highest at C 8, lowest at C 32), 14-25 x the later recipe's at C 4-16;
# their TTFT is not compared (their TPOT is). The TensorRT-LLM rows' TTFT grows with load as it
# should; kept.
_COLD_START = ("TTFT not compared: InferenceX's client had no warm-up before 2026-01-21 "
               "(d053ae24e) and this recipe (dsr1-fp4-b200-sglang, tp without ep, until "
               "2025-11-07) met a cold server; its TTFT does not grow with load (ISL 8,192, "
               "TP 8: 9.2 s at C 8, 2.1 s at C 32)")
_K = 1_000_000  # "never"
# (match, {(tp, isl, osl): (EP when C >, attention DP when C >=)}, TTFT left out because)
SCRIPT_CHOSEN_LAYOUTS: tuple[tuple[dict[str, str], dict[tuple[int, int, int], tuple[int, int]],
                                   str | None], ...] = (
    ({"model": "deepseek-r1", "gpu": "b200", "backend": "sglang", "precision": "fp4"},
     {(tp, i, o): (0, _K) for tp in (4, 8) for i, o in ((1024, 1024), (1024, 8192),
                                                        (8192, 1024))}, _COLD_START),
    ({"model": "deepseek-r1", "gpu": "b200", "backend": "trtllm", "precision": "fp4"},
     {(4, 1024, 1024): (32, 256), (4, 1024, 8192): (32, 256), (4, 8192, 1024): (32, 33),
      (8, 1024, 1024): (8, 256), (8, 1024, 8192): (16, 256), (8, 8192, 1024): (32, 33)}, None),
    ({"model": "deepseek-r1", "gpu": "h200 sxm", "backend": "trtllm", "precision": "fp8"},
     {(8, 1024, 1024): (0, 65), (8, 1024, 8192): (0, 65), (8, 8192, 1024): (0, 33)}, None),
)


def _script_layout(cols: dict[str, str], lay: Layout,
                   conc: float) -> tuple[Layout, str | None]:
    """Layout of a run whose script chose EP and attention DP (SCRIPT_CHOSEN_LAYOUTS), and the
    measurement to leave out; other rows keep ``lay``."""
    if (cols.get("moe_ep") not in ("", "1") or cols.get("attention_dp") not in ("", "1")
            or cols.get("backend_version")):
        return lay, None
    for match, table, unused in SCRIPT_CHOSEN_LAYOUTS:
        if not _has(cols, match):
            continue
        rule = table.get((lay.tp, _i(cols.get("isl")), _i(cols.get("osl"))))
        if rule is None:
            return lay, None
        ep = lay.tp if conc > rule[0] else 1
        if conc >= rule[1]:
            return Layout(1, lay.pp, ep, lay.tp), unused
        return Layout(lay.tp, lay.pp, ep, 1), unused
    return lay, None


def _cols(r: dict[str, str]) -> dict[str, str]:
    """A row's columns stripped and lower-cased, for matching against the recipe tables."""
    return {k: (v or "").strip().lower() for k, v in r.items() if isinstance(k, str)}


def _has(cols: dict[str, str], match: dict[str, str]) -> bool:
    """Whether a row's normalised columns (``_cols``) hold every value of ``match``."""
    return all(cols.get(k) == v for k, v in match.items())


def _matching(table: tuple[tuple[dict[str, str], str], ...], cols: dict[str, str]) -> str | None:
    """The reason of the first entry of ``table`` whose columns the row has, or None."""
    return next((why for match, why in table if _has(cols, match)), None)


def _speculative(cols: dict[str, str]) -> str | None:
    """Why an InferenceX row is a speculative-decoding run (SPECULATIVE_RUNS), or None. Asked of
    InferenceX rows only: the evidence is that project's configuration, not the versions."""
    image = _IMAGE.search(cols.get("notes", ""))
    return _matching(SPECULATIVE_RUNS, {**cols, "image": image.group(1) if image else ""})


# InferenceX (InferenceMAX) draws every request's input and output length uniformly from the
# integers [floor(0.8 L), L] of the nominal L: RANDOM_RANGE_RATIO 0.8 in
# .github/workflows/benchmark-tmpl.yml and sample_uniform() in utils/bench_serving/
# benchmark_serving.py (SemiAnalysisAI/InferenceX, commit 51e31df, Apr 2026), with --ignore-eos.
INFERENCEX_RANGE_RATIO = 0.8
_INFERENCEX_ID = re.compile(r"\bid=20\d\d_\d\d_\d\d_")
_GAP_ANALYSIS = re.compile(r"source_file=[^;]*-gap-analysis\.csv")


def _inferencex(r: dict[str, str]) -> bool:
    """A row of an InferenceX run: a date-stamped id of its result dumps (2026_04_06_...), a
    'provenance: db-dump' of its database, or a row of the '-gap-analysis.csv' files (all 123 of
    their rows repeat a date-stamped or db-dump row's numbers)."""
    notes = r.get("notes") or ""
    return bool(_INFERENCEX_ID.search(r.get("source") or "") or "provenance: db-dump" in notes
                or _GAP_ANALYSIS.search(notes))


# SGLang's --scheduler-recv-interval N (default 1): the scheduler takes new requests from the
# tokenizer only every N decode steps (SchedulerRecvSkipper: a decode step weighs 1, a prefill
# 1,000, so it also takes them right after a prefill). InferenceX's SGLang launch scripts set it
# per recipe (SemiAnalysisAI/InferenceX, benchmarks/...):
# * DeepSeek-R1 on B200/B300 (dsr1_fp4_b200, dsr1_fp8_b200, dsr1_fp*_b300; Sep 2025 - Jun 2026):
#   30 when CONC >= 16, else 10; FP8 at TP 4: 10 ("if [[ $TP -eq 8 ]] ... else ... =10").
# * Qwen3.5-397B on B200/B300: qwen3.5_fp8_b200.sh 30 / 10 at CONC >= 16 from 2026-03-17
#   (29d69fa54) until 2026-04-14 (bf116b2f5: 10); qwen3.5_fp4_b200.sh from 2026-04-08
#   (48d35c480) and qwen3.5_bf16_b300.sh / qwen3.5_fp4_b300 from 2026-04-17 (77c8b9657): 30 / 10
#   at CONC >= 16. qwen3.5_bf16_b200.sh had it for one day (8729d9d3f, 2026-02-18; removed
#   2026-02-19, 8d81e0bf4): its runs of 2026-02-20 took the default.
# * GLM-5 (B200 FP8 Mar 2026, B300 FP8 Apr 2026, H200), DeepSeek-R1 / Qwen3.5 on H200: not set.
#   GLM-5 FP4 B200 (run 2026-03-29) predates glm5_fp4_b200.sh's setting (405c601e9, 2026-04-07).
# A row whose run date is not in its notes takes the date of the dated row whose numbers it
# repeats (the image-less rows repeat dated runs); without one, the default 1.
# (match, first run date, last run date or "", rule): rule "10/30" = 30 from CONC 16, else 10.
RECV_INTERVAL_RULES: tuple[tuple[dict[str, tuple[str, ...]], str, str, str], ...] = (
    ({"model": ("deepseek-r1",), "gpu": ("b200", "b300"), "precision": ("fp8",), "tp": ("4",),
      "attention_dp": ("1",)}, "", "", "10"),
    ({"model": ("deepseek-r1",), "gpu": ("b200", "b300"), "attention_dp": ("1",)}, "", "",
     "10/30"),
    ({"model": ("qwen3.5-397b-a17b",), "gpu": ("b200",), "precision": ("fp8",),
      "attention_dp": ("1",)}, "2026-03-17", "2026-04-14", "10/30"),
    ({"model": ("qwen3.5-397b-a17b",), "gpu": ("b200",), "precision": ("fp4",),
      "attention_dp": ("1",)}, "2026-04-08", "", "10/30"),
    ({"model": ("qwen3.5-397b-a17b",), "gpu": ("b300",), "precision": ("bf16", "fp4"),
      "attention_dp": ("1",)}, "2026-04-17", "", "10/30"),
)
_RUN_DATE = re.compile(r"\bmeasured=(\d{4}-\d\d-\d\d)")


def _twin_key(r: dict[str, str]) -> tuple[str, ...]:
    """The columns that identify a run's numbers (a repeated row has the same values, the
    latencies sometimes with fewer decimals: TTFT compared to 1 ms, TPOT to 0.1 ms)."""
    ttft, tpot = _f(r.get("ttft_ms")), _f(r.get("tpot_ms"))
    return (*((r.get(k) or "").strip().lower() for k in
              ("model", "gpu", "backend", "precision", "isl", "osl", "concurrency")),
            f"{ttft:.0f}" if ttft else "", f"{tpot:.1f}" if tpot else "")


def run_dates(rows: list[dict[str, str]]) -> dict[tuple[str, ...], str]:
    """Run date of each numbers key of the rows that state one (notes ``measured=``)."""
    out: dict[tuple[str, ...], str] = {}
    for r in rows:
        m = _RUN_DATE.search(r.get("notes") or "")
        if m:
            out.setdefault(_twin_key(r), m.group(1))
    return out


def recv_interval(r: dict[str, str], date: str, tp: int | None = None) -> int:
    """SGLang's scheduler receive interval of an InferenceX row's recipe (RECV_INTERVAL_RULES);
    ``tp``: the attention TP the row was read as (a tp x ep column holds the product)."""
    if (r.get("backend") or "").strip().lower() != "sglang":
        return 1
    cols = _cols(r)
    if tp is not None:
        cols["tp"] = str(tp)
    for match, first, last, rule in RECV_INTERVAL_RULES:
        if not all(cols.get(k) in v for k, v in match.items()):
            continue
        if (first or last) and not (date and date >= first and (not last or date < last)):
            continue
        if rule == "10":
            return 10
        return 30 if (_f(r.get("concurrency")) or 0) >= 16 else 10
    return 1


def _mean_length(nominal: int) -> int:
    """Mean of the lengths drawn uniformly from [floor(0.8 L), L], to the nearest token."""
    return round((math.floor(nominal * INFERENCEX_RANGE_RATIO) + nominal) / 2)


_WORKER = re.compile(r"\b(prefill|decode): workers=(\d+) tp=(\d+) pp=(\d+) attn_dp=(\d+) "
                     r"moe_tp=(\d+) moe_ep=(\d+)")


def disaggregated(r: dict[str, str]) -> bool:
    """A row of a disaggregated run (measured-disagg.csv: its notes say ``mode=disagg``)."""
    return "mode=disagg" in (r.get("notes") or "")


def _read_disagg(row: Row, r: dict[str, str]) -> None:
    """The pools of a disaggregated row: from the InferenceX recipe that ran it where one matches
    (perf.disagg_recipes: the configuration states the worker counts, layouts and draft length),
    else from the notes' ``prefill: workers=.. tp=..`` / ``decode: ..`` — except for InferenceX
    rows whose notes say one worker of each (``provenance: source_file``: those files did not
    keep the worker counts; the same measurements in ``db-dump`` rows ran several)."""
    from servewise.engine.domain.perf.disagg_recipes import recipe_for

    notes = r.get("notes") or ""
    found = {ph: tuple(int(x) for x in rest) for ph, *rest in _WORKER.findall(notes)}
    recipe, why = recipe_for(r)
    if recipe is not None:
        p, d = recipe.prefill, recipe.decode
        row.disagg = DisaggRun(Layout(p.tp, 1, p.ep, p.attention_dp), p.workers, d.workers,
                               f"InferenceX {recipe.key} @ {recipe.commit}", recipe.decode_batch)
        row.layout = Layout(d.tp, 1, d.ep, d.attention_dp)
        if recipe.spec_decoding != "none" and recipe.draft_tokens is None:
            row.skipped = (f"speculative decoding: InferenceX {recipe.key} ran "
                           f"{recipe.spec_decoding} and no source gives its draft length")
        row.speculative_tokens = int(recipe.draft_tokens or 0)
        return
    if set(found) != {"prefill", "decode"}:
        row.skipped = "disaggregated run: the notes do not give both pools' layouts"
        return
    (pw, ptp, ppp, padp, _pmtp, pep), (dw, dtp, dpp, dadp, _dmtp, dep) = (
        found["prefill"], found["decode"])
    if "provenance: source_file" in notes and pw == dw == 1:
        row.skipped = ("disaggregated InferenceX run without its worker counts (the source file "
                       f"kept one worker of each) and no InferenceX recipe: {why}")
        return
    row.disagg = DisaggRun(Layout(ptp, ppp, pep, padp), pw, dw, "the row's notes")
    row.layout = Layout(dtp, dpp, dep, dadp)


def read_measured(rows: list[dict[str, str]]) -> list[Row]:
    out = []
    dates = run_dates(rows)
    for i, r in enumerate(rows):
        row = Row(index=i, backend=(r.get("backend") or "").strip().lower(),
                  precision=(r.get("precision") or "").strip().lower(),
                  isl=_i(r.get("isl")), osl=_i(r.get("osl")),
                  ttft_ms=_f(r.get("ttft_ms")), tpot_ms=_f(r.get("tpot_ms")))
        _entities(row, r.get("model", ""), r.get("gpu", ""))
        _load(row, r)
        if disaggregated(r):
            _read_disagg(row, r)
            row.concurrency = _f(r.get("concurrency"))
            if _inferencex(r):
                row.isl, row.osl = _mean_length(row.isl), _mean_length(row.osl)
                row.lengths = "random"
            if not row.skipped and not (row.isl and row.osl and row.concurrency):
                row.skipped = "isl, osl or concurrency missing"
            out.append(row)
            continue
        inferencex = _inferencex(r)
        cols = _cols(r) if inferencex else {}
        recipe = _matching(MODELLED_SPECULATIVE_RUNS, cols) if inferencex else None
        if inferencex:
            row.skipped = (row.skipped or _speculative(cols)
                           or _matching(DISAGGREGATED_RUNS, cols))
            row.isl, row.osl = _mean_length(row.isl), _mean_length(row.osl)
            row.lengths = "random"
        try:
            row.layout, row.concurrency = _measured_layout(r, row.gpu, row.model)
        except ValueError as exc:
            row.skipped = row.skipped or f"parallel layout: {exc}"
        if inferencex and not row.skipped:
            row.layout, row.unused = _script_layout(cols, row.layout, row.concurrency or 0.0)
            if recipe:
                row.speculative_tokens = speculative_tokens(recipe, row.layout.attention_dp)
            if row.unused:
                row.ttft_ms = None
        if inferencex and not (r.get("scheduler_recv_interval") or "").strip():
            row.recv_interval = recv_interval(r, dates.get(_twin_key(r), ""), row.layout.tp)
        if not row.skipped and (not row.isl or not row.osl
                                or not (row.concurrency or row.request_rate)):
            bad = [f"{k} '{r[k]}'" for k in ("isl", "osl", "concurrency", "request_rate")
                   if (r.get(k) or "").strip() and _f(r.get(k)) is None]
            row.skipped = (f"not a number: {', '.join(bad)}" if bad
                           else "isl, osl or concurrency/request_rate missing")
        bad_layout = [f"{k} '{r[k]}'" for k in LAYOUT_COLUMNS if not _number(r.get(k))]
        if not row.skipped and bad_layout:
            row.skipped = f"not a number: {', '.join(bad_layout)}"
        if not row.skipped and not row.precision:
            row.skipped = "precision missing"
        out.append(row)
    return out


def _backend(framework: str) -> str | None:
    f = framework.lower()
    if "tensorrt" in f or "nim" in f or "trt" in f:
        return "trtllm"
    if "sglang" in f:
        return "sglang"
    if "vllm" in f:
        return "vllm"
    return None


def _precision(text: str) -> tuple[str | None, str | None]:
    """Weight precision named first in the text, and an FP8 KV cache if stated."""
    t = text.lower()
    kv = "fp8" if "fp8 kv" in t else None
    keys = {"fp4": "fp4", "q4": "int4", "4-bit": "int4", "int4": "int4", "fp8": "fp8",
            "int8": "int8", "bf16": "bf16", "fp16": "fp16"}
    found = sorted((t.find(k), p) for k, p in keys.items() if k in t)
    return (found[0][1] if found else None), kv


def read_benchmarks(rows: list[dict[str, str]]) -> list[Row]:
    out = []
    for i, r in enumerate(rows):
        row = Row(index=i, ttft_ms=_f(r.get("ttft_ms")), tpot_ms=_f(r.get("tpot_or_itl_ms")),
                  tput=_f(r.get("output_tokens_per_s_total")))
        _entities(row, r.get("model", ""), r.get("gpu", ""))
        row.backend = _backend(r.get("framework", "")) or ""
        row.precision, row.kv_precision = _precision(r.get("precision", ""))
        row.precision = row.precision or ""
        row.isl, row.osl = _i(r.get("input_len")), _i(r.get("output_len"))
        row.harness = benchmark_harness(r)
        tp, n = _i(r.get("tp"), 1), _i(r.get("n_gpus"), 1)
        row.layout = Layout(tp, max(1, n // tp), 1, 1)
        conc = (r.get("concurrency_or_batch") or "").strip().lower()
        _load(row, r)
        qps = re.match(r"request rate ([\d.]+)", conc)
        if qps and not row.request_rate:
            row.request_rate = float(qps.group(1))
        row.offline = conc.startswith("max")
        # "single-stream prefill (batch 1)" rows time one prefill inside the engine (static
        # batching, no server, no scheduler): their TTFT is the prefill step alone.
        row.prefill_only = "prefill (batch" in (r.get("scenario") or "").lower()
        row.concurrency = None if row.offline else _f(conc)
        if row.skipped:
            pass
        elif not row.backend:
            row.skipped = f"framework '{r.get('framework')}' has no calibration profile"
        elif not row.precision:
            row.skipped = f"precision '{r.get('precision')}' not recognised"
        elif not row.isl or not row.osl:
            row.skipped = "input/output length not numeric"
        elif not row.offline and not row.concurrency and not row.request_rate:
            row.skipped = f"concurrency '{conc}' not numeric"
        elif not (row.ttft_ms or row.tpot_ms or row.tput):
            row.skipped = "no TTFT/TPOT/throughput measurement"
        out.append(row)
    return out


def read_rows(path: str | Path) -> tuple[str, list[Row]]:
    """Read a CSV of either layout; returns ("measured"|"benchmarks", rows)."""
    p = Path(path)
    try:
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt", newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            cols = set(reader.fieldnames or [])
            raw = list(reader)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{p}: cannot read ({exc})") from exc
    if MEASURED_COLUMNS <= cols:
        return "measured", read_measured(raw)
    if BENCH_COLUMNS <= cols:
        return "benchmarks", read_benchmarks(raw)
    missing_m = sorted(MEASURED_COLUMNS - cols)
    raise DataError(f"{p}: columns do not match measured.csv (missing {', '.join(missing_m)}) "
                    f"or benchmarks.csv layout (missing {', '.join(sorted(BENCH_COLUMNS - cols))})")
