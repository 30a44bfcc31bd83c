"""Disaggregated serving: prefill and decode on separate pools of workers (SGLang PD, NVIDIA
Dynamo, llm-d, TensorRT-LLM disaggregated serving).

A request is prefilled by one of ``P`` prefill workers, its KV cache moved to one of ``D`` decode
workers, which decode it to the end. All times in milliseconds:

* ``R_p = P x dp_p`` prefill ranks each serve a prefill in ``t_prefill`` (the aggregated step
  model's prefill of the prefill worker's layout); at ``λ`` requests/ms the prefill queue runs at
  ``ρ = λ x t_prefill / R_p`` and a request waits ``ρ t_prefill / (2 (1 - ρ))`` on average
  (M/D/1, Pollaczek-Khinchine);
* ``TTFT = t_request + isl x t_in_token + t_handoff + wait + burst + t_prefill``: the front
  end's costs of the aggregated profile, the disaggregated request path's fixed cost
  (``t_handoff``: router, remote-prefill hand-off, transfer set-up), the queue, and in a closed
  loop the arrival burst ``φ x (C / R_p - 1) / 2 x t_prefill`` (benchmark clients start their
  ``C`` requests together and requests of similar lengths stay partly in step, so each prefill
  rank meets a cohort of ``C / R_p`` prompts; the share ``φ`` left in the mean), then the prefill,
  which emits the first token. ``t_handoff`` and ``φ`` are fitted per backend on measured
  disaggregated runs (facts/calibration.yaml ``disaggregated``, tools/perf/disagg_fit.py);
* the KV cache, ``isl x`` the bytes per token each decode GPU of the sequence holds, crosses the
  prefill-to-decode link (NVLink inside an NVLink domain, else the scale-out NIC) while the first
  token is sent; the decode worker admits the request at its next step boundary. Both delay the
  second token, so they are spread over the ``osl - 1`` decode steps of TPOT;
* the decode pool's ``R_d = D x dp_d`` ranks hold the ``n_d = λ x (osl - 1) x TPOT`` decoding
  requests; ``TPOT`` is one decode step (or speculative step) at ``n_d / R_d`` sequences per rank
  with **no** prefill interference: that is what disaggregation buys;
* throughput ``λ x osl`` is limited by the slower pool: prefill below ``RHO_MAX``, decode by its
  batch cap (MAX_BATCH sequences, the KV cache per rank, or the deployment's configured limit
  ``decode_batch``, e.g. TensorRT-LLM's ``max_batch_size`` of the generation workers);
* a closed loop of more clients than the pools hold at that largest rate ``λ_max``: the others
  wait for a slot, ``admission = C / λ_max - (TTFT + (osl - 1) x TPOT)`` (Little's law over the
  loop), added to TTFT. A recipe with ``max_batch_size`` 8 on 4 decode workers run at C = 36
  holds 32 sequences; the other 4 clients wait about an eighth of a request's life.

A closed loop of ``C`` clients solves ``λ = C / (TTFT(λ) + (osl - 1) x TPOT(λ))`` (Little's law);
an open loop at ``λ`` solves the decode pool's occupancy for that rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servewise.engine.domain.perf.architecture import tp_split_problem
from servewise.engine.domain.perf.calibration import load_calibration
from servewise.engine.domain.perf.memory import Layout, kv_bytes_per_token, memory
from servewise.engine.domain.perf.precision import check_precision, default_kv_precision
from servewise.engine.domain.perf.serving import RHO_MAX, _step_model, band_of, batch_cap, regime_of
from servewise.engine.domain.perf.speculative import Speculation
from servewise.engine.domain.perf.timing import StepModel
from servewise.engine.domain.perf.types import MemoryEstimate, Step

NODE_GPUS = 8  # GPUs of an HGX/DGX board: the NVLink domain of a GPU without ``nvlink_domain``


@dataclass(frozen=True)
class Pool:
    """Workers of one phase: each runs ``layout`` on ``layout.n_gpus`` GPUs of ``gpu``."""

    gpu: dict[str, Any]
    layout: Layout
    workers: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")

    @property
    def ranks(self) -> int:
        """Attention ranks of the pool (each serves its own sequences)."""
        return self.workers * self.layout.dp

    @property
    def gpus(self) -> int:
        return self.workers * self.layout.n_gpus


def disagg_constants(backend: str, cal: dict[str, Any] | None = None) -> dict[str, Any]:
    """The disaggregated request path's constants of ``backend`` (facts/calibration.yaml
    ``disaggregated``): ``t_handoff_ms`` and the KV links, with what they were fitted on."""
    sec = (cal if cal is not None else load_calibration()).get("disaggregated") or {}
    by = (sec.get("backends") or {}).get(backend) or sec.get("default") or {}
    links = sec.get("kv_links") or {}
    return {"t_handoff_ms": float(by.get("t_handoff_ms", 0.0)),
            "burst": float(by.get("burst", 0.0)),
            "fitted_on": str(by.get("fitted_on") or sec.get("fitted_on") or ""),
            "nvlink_eta": float((links.get("nvlink") or {}).get("eta", 0.7)),
            "nic_gbs": float((links.get("network") or {}).get("gbs_per_gpu", 50.0)),
            "nic_eta": float((links.get("network") or {}).get("eta", 0.8)),
            "latency_ms": float(links.get("latency_ms", 0.05))}


def kv_link(prefill: Pool, decode: Pool, consts: dict[str, Any]) -> tuple[str, float]:
    """(kind, GB/s per receiving GPU) of the KV transfer: NVLink when both pools fit one NVLink
    domain of the GPU (72 on an NVL72 rack, a board of 8 otherwise), else the scale-out NIC."""
    domain = int(decode.gpu.get("nvlink_domain") or NODE_GPUS)
    same = prefill.gpu.get("id") == decode.gpu.get("id")
    link = decode.gpu.get("link_gbs")
    if (same and str(decode.gpu.get("intra_node") or "").lower() == "nvlink"
            and isinstance(link, (int, float)) and link > 0
            and prefill.gpus + decode.gpus <= domain):
        return "nvlink", float(link) / 2 * consts["nvlink_eta"]
    return "network", consts["nic_gbs"] * consts["nic_eta"]


def _models(model: dict[str, Any], prefill: Pool, decode: Pool, precision: str, backend: str,
            kv_precision: str | None, calibration: dict[str, Any] | None,
            speculative: Speculation | None) -> tuple[StepModel, StepModel]:
    sm_p = _step_model(model, prefill.gpu, prefill.layout, precision, backend, kv_precision,
                       calibration)
    sm_d = _step_model(model, decode.gpu, decode.layout, precision, backend, kv_precision,
                       calibration, speculative)
    return sm_p, sm_d


def occupancy_fixed_point(excess: Callable[[float], float], cap: float, tol: float = 1e-10) -> float:
    """The lowest occupancy ``c`` in ``[1, cap]`` where ``excess(c) = g(c) - c`` is 0, for an
    increasing ``g`` into ``[1, cap]`` (Little's law: the sequences a rank holds at the TPOT they
    cause). Below that root ``g(c) > c`` and ``g(c)`` stays below the root, so the plain step
    ``c -> g(c)`` is safe; a secant through the last two points jumps ahead, and once a point above
    the root is known, the secant inside the bracket (else its midpoint) closes it. Converges to
    ``tol`` (relative) in a handful of step evaluations where the plain iteration, slow when
    ``g'`` nears 1 close to saturation, took 10-60."""
    lo, e_lo = 1.0, excess(1.0)
    if e_lo <= 0:
        return 1.0
    hi, e_hi = None, 0.0
    x_prev, e_prev = lo, e_lo
    x = min(lo + e_lo, cap)
    for _ in range(200):
        e = excess(x)
        if abs(e) <= tol * x:
            return x
        if e > 0:
            lo, e_lo = x, e
        else:
            hi, e_hi = x, e
        secant = x - e * (x - x_prev) / (e - e_prev) if e != e_prev else None
        x_prev, e_prev = x, e
        if hi is None:  # still below the root: the plain step, or the secant when it goes further
            x = min(secant if secant is not None and secant > x + e else x + e, cap)
        else:
            if hi - lo <= tol * hi:
                break
            x = secant if secant is not None and lo < secant < hi else (lo + hi) / 2
    return lo if hi is None or e_lo < -e_hi else hi


def _decode_step(sm: StepModel, c_rank: float, context: float) -> tuple[float, dict[str, float]]:
    """(ms per output token, the step) with ``c_rank`` sequences on one decode rank."""
    dec = (sm.spec_decode if sm.spec else sm.decode)(max(c_rank, 1.0), context)
    return dec["total"] / dec.get("tokens_per_step", 1.0), dec


class _PoolPair:
    """What a disaggregated deployment's state is made of, for one model, GPU, pair of worker
    layouts, precision, request lengths, backend and speculation, whatever the worker counts: the
    two step models, the front end's cost, the decode batch cap, one prompt's prefill; and, per
    rate, the decode pool's occupancy fixed point (a function of its ranks and the KV transfer
    time alone) and the prefill queue (of its ranks alone), each remembered once solved, so a
    search over worker counts (fn_disagg.disagg_size: prefill workers for a fixed decode pool)
    solves each pool once per size instead of once per pair of sizes."""

    def __init__(self, model: dict[str, Any], prefill: Pool, decode: Pool, precision: str, isl: int,
                 osl: int, backend: str, kvp: str, calibration: dict[str, Any] | None,
                 speculative: Speculation | None, decode_batch: float | None):
        # the inputs, kept so that a memo entry is never used for other ones (identities of the
        # mutable records, which this object keeps alive)
        self.inputs = (model, prefill.gpu, prefill.layout, decode.gpu, decode.layout, precision, isl,
                       osl, backend, kvp, calibration, speculative, decode_batch)
        self.sm_p, self.sm_d = _models(model, prefill, decode, precision, backend, kvp, calibration,
                                       speculative)
        self.consts = consts = disagg_constants(backend, calibration)
        prof_p = self.sm_p.prof
        self.front = prof_p.t_request_ms + isl * prof_p.t_in_token_us / 1e3 + consts["t_handoff_ms"]
        cap = batch_cap(model, decode.gpu, decode.layout, precision, kvp, isl, osl, backend)
        if decode_batch:
            cap = max(1.0, min(cap, float(decode_batch)))
        self.cap = cap
        self.context = isl + osl / 2.0
        self.n_dec = max(osl - 1, 0)
        self.isl = isl
        self.dp_p = prefill.layout.dp
        self.one = self.sm_p.prefill_once(isl, ranks=1.0 if self.dp_p > 1 else None)
        self.t_full = self.sm_p.prefill_once(isl)["total"]
        self.kv_bytes_per_token = kv_bytes_per_token(model, kvp)
        self._decode: dict[tuple[float, int, float], tuple[float, float, float, dict[str, float]]] = {}
        self._prefill: dict[tuple[float, int], tuple[dict[str, float], float]] = {}
        self._steps: dict[float, tuple[float, dict[str, float]]] = {}

    def step(self, c_rank: float) -> tuple[float, dict[str, float]]:
        """:func:`_decode_step` of the decode pool at ``c_rank`` sequences a rank, remembered (every
        fixed point starts at one sequence, and many end at the batch cap)."""
        hit = self._steps.get(c_rank)
        if hit is None:
            hit = self._steps[c_rank] = _decode_step(self.sm_d, c_rank, self.context)
        return hit

    def same(self, model: dict[str, Any], prefill: Pool, decode: Pool, precision: str, isl: int,
             osl: int, backend: str, kvp: str, calibration: dict[str, Any] | None,
             speculative: Speculation | None, decode_batch: float | None) -> bool:
        mine = self.inputs
        return (mine[0] is model and mine[1] is prefill.gpu and mine[2] == prefill.layout
                and mine[3] is decode.gpu and mine[4] == decode.layout
                and mine[5:10] == (precision, isl, osl, backend, kvp) and mine[10] is calibration
                and mine[11] == speculative and mine[12] == decode_batch)

    def decode_at(self, lam: float, r_d: int, t_kv: float) -> tuple[float, float, float, dict[str, float]]:
        """(sequences per decode rank, step, TPOT, the step) at ``lam`` requests/ms: the decode
        pool's occupancy by fixed point."""
        key = (lam, r_d, t_kv)
        hit = self._decode.get(key)
        if hit is not None:
            return hit
        sm_d, n_dec, cap = self.sm_d, self.n_dec, self.cap
        k_step, per = sm_d.prof.k_step, max(n_dec, 1)

        def tpot_at(c: float) -> tuple[float, float, dict[str, float]]:
            step, dec = self.step(c)
            return step + (t_kv + k_step * dec["total"]) / per, step, dec

        def excess(c: float) -> float:
            """Little's law's occupancy at ``c`` minus ``c`` (clipped to 1 .. cap)."""
            return min(max(lam * n_dec * tpot_at(c)[0] / r_d, 1.0), cap) - c

        c_d = occupancy_fixed_point(excess, cap)
        tpot, step, dec = tpot_at(c_d)
        out = self._decode[key] = (c_d, step, tpot, dec)
        return out

    def busy_ranks(self, rho: float) -> float:
        dp_p = self.dp_p
        return round(1 + (dp_p - 1) * rho, 3) if dp_p > 1 else 1.0

    def prefill_at(self, lam: float, r_p: int) -> tuple[dict[str, float], float]:
        """(prefill, utilisation) at ``lam``: with attention DP, a prefill shares the MoE
        layers with the other ranks' prefills running at the same time, ``1 + (dp - 1) x ρ``."""
        key = (lam, r_p)
        hit = self._prefill.get(key)
        if hit is not None:
            return hit
        pf = self.one
        rho = min(lam * pf["total"] / r_p, RHO_MAX)
        for _ in range(20 if self.dp_p > 1 else 0):
            pf = self.sm_p.prefill_once(self.isl, ranks=self.busy_ranks(rho))
            nxt = min(lam * pf["total"] / r_p, RHO_MAX)
            if abs(nxt - rho) < 1e-6:
                break
            rho = nxt
        out = self._prefill[key] = (pf, min(lam * pf["total"] / r_p, RHO_MAX))
        return out


def predict_disagg(model: dict[str, Any], prefill: Pool, decode: Pool, *, precision: str,
                   isl: int, osl: int, concurrency: float | None = None,
                   request_rate: float | None = None, backend: str = "trtllm",
                   kv_precision: str | None = None, calibration: dict[str, Any] | None = None,
                   speculative: Speculation | None = None,
                   decode_batch: float | None = None,
                   memo: dict[str, Any] | None = None) -> dict[str, Any]:
    """TTFT, TPOT and throughput of a disaggregated deployment (module docstring): a closed loop
    of ``concurrency`` clients, or an open loop at ``request_rate`` requests/s. ``decode_batch``:
    the decode workers' configured sequence limit per rank (TensorRT-LLM ``max_batch_size``), when
    below the backend's limit and the KV cache's. ``memo``: a dict kept by a caller that predicts
    the same deployment with other worker counts (a search): the parts that do not depend on the
    counts and each pool's state per size are solved once (:class:`_PoolPair`); the same numbers
    as without it. A memo holds one deployment: given other inputs, it is emptied first."""
    if (concurrency is None) == (request_rate is None):
        raise ValueError("give either concurrency (closed loop) or request_rate (open loop)")
    kvp = kv_precision or default_kv_precision(decode.gpu, precision)
    args = (model, prefill, decode, precision, isl, osl, backend, kvp, calibration, speculative,
            decode_batch)
    pair = memo.get("pair") if memo is not None else None
    if pair is None or not pair.same(*args):
        pair = _PoolPair(*args)
        if memo is not None:
            memo["pair"] = pair
    sm_d, consts, front, cap, n_dec = pair.sm_d, pair.consts, pair.front, pair.cap, pair.n_dec
    prof_p = pair.sm_p.prof
    kind, gbs = kv_link(prefill, decode, consts)
    kv_gpu = isl * sm_d.kv_tok_gpu
    t_kv = consts["latency_ms"] + kv_gpu / (gbs * 1e9) * 1e3
    r_p, r_d = prefill.ranks, decode.ranks

    def at(lam: float) -> dict[str, Any]:
        """State at ``lam`` requests/ms: decode occupancy by fixed point, then the queue."""
        c_d, step, tpot, dec = pair.decode_at(lam, r_d, t_kv)
        pf, rho = pair.prefill_at(lam, r_p)
        t_pf = pf["total"]
        wait = rho * t_pf / (2 * (1 - rho))
        burst = consts["burst"] * max(c_total / r_p - 1.0, 0.0) / 2.0 * t_pf
        ttft = front + wait + burst + t_pf
        return {"admission": 0.0, "lam": lam, "c_decode_rank": c_d, "tpot": tpot, "step": step, "dec": dec,
                "rho_prefill": rho, "wait": wait, "burst": burst, "ttft": ttft, "life": ttft + n_dec * tpot,
                "t_prefill": t_pf, "pf": pf, "prefill_ranks_busy": pair.busy_ranks(rho),
                "saturated": lam * t_pf / r_p >= RHO_MAX or c_d >= cap}

    def lam_d_max() -> float:
        """The decode pool's largest rate: every rank at its batch cap, ``R_d cap / ((osl - 1)
        TPOT(cap))`` (no limit for a one-token output)."""
        if n_dec < 1:
            return float("inf")
        step, dec = _decode_step(sm_d, cap, pair.context)
        tpot = step + (t_kv + sm_d.prof.k_step * dec["total"]) / n_dec
        return r_d * cap / (n_dec * tpot)

    lam_p_max = RHO_MAX * r_p / pair.t_full
    c_total = float(concurrency) if concurrency is not None else 0.0  # the burst: closed loop
    if request_rate is not None:
        s = at(request_rate / 1e3)
    else:
        c = float(concurrency)
        lo, hi = 0.0, min(lam_p_max, lam_d_max())
        for _ in range(60):  # λ x life(λ) rises with λ: bisection on Little's law
            mid = (lo + hi) / 2
            if mid * at(mid)["life"] < c:
                lo = mid
            else:
                hi = mid
        s = at((lo + hi) / 2)
        # More clients than the pools hold at their largest rate (the decode ranks' batch
        # limit, or prefill at rho_max): the others wait for a slot. Little's law over the
        # whole loop, C = λ (TTFT + (osl - 1) TPOT), gives the wait.
        extra = c / s["lam"] - s["life"] if s["lam"] > 0 else 0.0
        s["admission"] = extra if extra > 1e-6 * s["life"] else 0.0  # the bisection's rounding
        s["ttft"] += s["admission"]
        s["life"] += s["admission"]
    s.update(front=front, t_kv=t_kv, kv_link=kind, kv_link_gbs=gbs,
             kv_bytes_per_gpu=kv_gpu, batch_cap=cap, prefill_ranks=r_p, decode_ranks=r_d,
             t_handoff=consts["t_handoff_ms"], phi=consts["burst"], c_total=c_total,
             prof=prof_p, prof_decode=sm_d.prof,
             kv_bytes_per_token=pair.kv_bytes_per_token)
    s["output_tokens_per_s"] = s["lam"] * 1e3 * osl
    return s


def disagg_steps(s: dict[str, Any], prefill: Pool, decode: Pool, isl: int,
                 osl: int) -> list[Step]:
    """The explanation of a solved disaggregated state: each number from the printed ones."""
    n_dec = max(osl - 1, 1)
    pf, dec = s["pf"], s["dec"]
    dec_total = dec["total"]
    k_step = s["prof_decode"].k_step
    return [
        Step("prefill_ms",
             "t_prefill_ms = t_compute_ms + t_comm_ms + n_chunks x t_chunk_ms + t_topk_ms",
             {"t_compute_ms": pf["t_compute"], "t_comm_ms": pf["t_comm"],
              "n_chunks": pf["n_chunks"], "t_chunk_ms": s["prof"].t_chunk_ms,
              "t_topk_ms": pf["t_topk"], "isl": isl,
              "prefill_gpus_per_worker": prefill.layout.n_gpus,
              "ranks_sharing_moe": s["prefill_ranks_busy"]}, s["t_prefill"], "ms",
             "the aggregated step model's prefill of one prompt on the prefill worker's layout; "
             "with attention DP, the other ranks' concurrent prefills share its MoE layers "
             "(1 + (dp - 1) x rho of them)"),
        Step("prefill_rho", "rho = lambda_per_ms x t_prefill_ms / prefill_ranks",
             {"lambda_per_ms": s["lam"], "t_prefill_ms": s["t_prefill"],
              "prefill_ranks": s["prefill_ranks"]}, s["rho_prefill"], "",
             f"{prefill.workers} prefill worker(s) x {prefill.layout.dp} attention rank(s)"),
        Step("prefill_wait", "wait_ms = rho x t_prefill_ms / (2 x (1 - rho))",
             {"rho": s["rho_prefill"], "t_prefill_ms": s["t_prefill"]}, s["wait"], "ms",
             "M/D/1 mean wait in the prefill queue (Pollaczek-Khinchine)"),
        Step("prefill_burst", "burst_ms = phi x max(C / prefill_ranks - 1, 0) / 2 x t_prefill_ms",
             {"phi": s["phi"], "C": s["c_total"], "prefill_ranks": s["prefill_ranks"],
              "t_prefill_ms": s["t_prefill"]}, s["burst"], "ms",
             "a closed loop's clients start together: each prefill rank meets a cohort of "
             "C / prefill_ranks prompts; phi, the share of that wait left in the mean, is fitted "
             "per backend on measured disaggregated runs (0 in an open loop)"),
        Step("admission_wait", "admission_ms = max(C / lambda_per_ms - life_ms, 0)",
             {"C": s["c_total"], "lambda_per_ms": s["lam"],
              "life_ms": s["life"] - s["admission"], "decode_batch_cap": s["batch_cap"]},
             s["admission"], "ms",
             "a closed loop with more clients than the pools hold at their largest rate (every "
             "decode rank at its batch cap, or prefill at rho_max): the others wait for a slot, "
             "by Little's law over the loop (0 in an open loop)"),
        Step("ttft", "ttft_ms = front_ms + t_handoff_ms + wait_ms + burst_ms + t_prefill_ms"
             " + admission_ms",
             {"front_ms": s["front"] - s["t_handoff"], "t_handoff_ms": s["t_handoff"],
              "wait_ms": s["wait"], "burst_ms": s["burst"], "t_prefill_ms": s["t_prefill"],
              "admission_ms": s["admission"]},
             s["ttft"], "ms",
             "front: the backend's fixed request cost and per-prompt-token cost; t_handoff: the "
             "disaggregated request path's fixed cost (router, remote-prefill hand-off, transfer "
             "set-up), fitted on measured disaggregated runs (facts/calibration.yaml disaggregated); "
             "the prefill worker emits the first token"),
        Step("kv_transfer", "t_kv_ms = latency_ms + kv_bytes_per_gpu / (link_gbs x 1e9) x 1e3",
             {"latency_ms": s["t_kv"] - s["kv_bytes_per_gpu"] / (s["kv_link_gbs"] * 1e9) * 1e3,
              "kv_bytes_per_gpu": s["kv_bytes_per_gpu"], "link_gbs": s["kv_link_gbs"]},
             s["t_kv"], "ms",
             f"the prompt's KV cache to each decode GPU of its attention group over {s['kv_link']} "
             f"({s['kv_bytes_per_token'] * isl / 1e6:,.1f} MB for the whole cache); it delays the "
             "second token, not the first"),
        Step("decode_step",
             "step_ms = (t_mem_ms + t_compute_ms + t_comm_ms + t_overhead_ms + t_draft_ms)"
             " / tokens_per_step",
             {"t_mem_ms": dec.get("t_mem", 0.0), "t_compute_ms": dec["t_compute"],
              "t_comm_ms": dec["t_comm"], "t_overhead_ms": dec["t_overhead"],
              "t_draft_ms": dec.get("t_draft", 0.0),
              "tokens_per_step": dec.get("tokens_per_step", 1.0),
              "c_rank": s["c_decode_rank"], "decode_ranks": s["decode_ranks"]}, s["step"], "ms",
             "the decode pool's step without prefill interference (no prompt is prefilled on a "
             "decode worker); a speculative step's time over the tokens it emits"),
        Step("tpot", "tpot_ms = step_ms + (t_kv_ms + k_step x t_decode_ms) / n_dec",
             {"step_ms": s["step"], "t_kv_ms": s["t_kv"], "k_step": k_step,
              "t_decode_ms": dec_total, "n_dec": n_dec}, s["tpot"], "ms",
             "the KV transfer and the admission at the decode worker's next step boundary, spread "
             "over the request's decode steps"),
        Step("throughput", "tokens_per_s = lambda_per_ms x 1e3 x osl",
             {"lambda_per_ms": s["lam"], "osl": osl}, s["output_tokens_per_s"], "tokens/s",
             "limited by the slower pool: prefill below rho_max, decode by its batch cap "
             f"({s['batch_cap']:.0f} sequences per rank)"),
    ]


def _pool_memory(model: dict[str, Any], pool: Pool, precision: str, kv_precision: str,
                 tokens: float) -> MemoryEstimate:
    lay = pool.layout
    return memory(model, pool.gpu, tp=lay.tp, pp=lay.pp, ep=lay.ep, precision=precision,
                  tokens_in_flight=tokens, kv_precision=kv_precision,
                  attention_dp=lay.attention_dp)


def estimate_disagg(model: dict[str, Any], prefill: Pool, decode: Pool, *, precision: str,
                    isl: int, osl: int, concurrency: float | None = None,
                    request_rate: float | None = None, backend: str = "trtllm",
                    kv_precision: str | None = None,
                    speculative: Speculation | None = None) -> dict[str, Any]:
    """:func:`predict_disagg` with each pool's memory, the 80 % band (the decode backend's closed
    loop at the decode ranks' batch) and the explanation steps, as plain values."""
    precision = check_precision(precision)
    if isl < 1 or osl < 1:
        raise ValueError("isl and osl must be positive")
    for name, pool in (("prefill", prefill), ("decode", decode)):
        problem = tp_split_problem(model, pool.layout.tp)
        if problem:
            raise ValueError(f"{name} workers: {problem}")
    kvp = kv_precision or default_kv_precision(decode.gpu, precision)
    s = predict_disagg(model, prefill, decode, precision=precision, isl=isl, osl=osl,
                       concurrency=concurrency, request_rate=request_rate, backend=backend,
                       kv_precision=kvp, speculative=speculative)
    per_dec = s["c_decode_rank"] * decode.layout.dp * (isl + osl / 2.0)
    mem = {"prefill": _pool_memory(model, prefill, precision, kvp, isl * prefill.layout.dp),
           "decode": _pool_memory(model, decode, precision, kvp, per_dec)}
    prof = s["prof_decode"]
    reg = regime_of(prof, {"arrival": "closed", "c_rank": s["c_decode_rank"]})
    band = {}
    for metric, v in (("ttft_ms", s["ttft"]), ("tpot_ms", s["tpot"]),
                      ("output_tokens_per_s", s["output_tokens_per_s"])):
        (lo, hi), _ = band_of(prof, reg, metric)
        band[metric] = [v * lo, v * hi]
    fits = all(m.fits for m in mem.values())
    why = "; ".join(f"{k} worker: {m.reason}" for k, m in mem.items() if not m.fits) or None

    def pool_dict(pool: Pool, m: MemoryEstimate) -> dict[str, Any]:
        lay = pool.layout
        return {"gpu": pool.gpu.get("id"), "workers": pool.workers, "tp": lay.tp, "ep": lay.ep,
                "attention_dp": lay.attention_dp, "gpus_per_worker": lay.n_gpus,
                "gpus": pool.gpus, "memory": m.to_dict(), "fits": m.fits}

    return {
        "mode": "disaggregated",
        "ttft_ms": s["ttft"], "tpot_ms": s["tpot"],
        "output_tokens_per_s": s["output_tokens_per_s"],
        "requests_per_s": s["lam"] * 1e3, "fits": fits, "reason": why,
        "saturated": bool(s["saturated"]),
        "band": band,
        "pools": {"prefill": pool_dict(prefill, mem["prefill"]),
                  "decode": pool_dict(decode, mem["decode"])},
        "kv_transfer": {"link": s["kv_link"], "gbs_per_gpu": s["kv_link_gbs"],
                        "bytes_per_request": s["kv_bytes_per_token"] * isl,
                        "ms": s["t_kv"]},
        "calibration": {"gpu_class": prof.gpu_class, "backend": prof.backend,
                        "measured": prof.measured, "band_regime": reg,
                        "band_source": band_of(prof, reg, "tpot_ms")[1],
                        "t_handoff_ms": s["t_handoff"],
                        "t_handoff_fitted_on": disagg_constants(backend)["fitted_on"]},
        "inputs": {"model": model.get("id"), "precision": precision, "kv_precision": kvp,
                   "isl": isl, "osl": osl, "concurrency": concurrency,
                   "request_rate": request_rate, "backend": prof.backend,
                   "speculative": None if speculative is None else {
                       "tokens": speculative.tokens, "acceptance": speculative.acceptance,
                       "source": speculative.source}},
        "steps": [st.to_dict() for st in disagg_steps(s, prefill, decode, isl, osl)],
    }
