"""Domain functions for workload classes that are not decoder LLMs: encoders (embedding, reranking)
sized by prefill compute and batch latency, ASR sized by audio-seconds per second from a sourced
real-time factor, and video analytics sized by frames per second × per-frame cost plus hardware
video decode capacity.

Encoder timings come from :func:`servewise.engine.domain.perf.estimate_embedding` (the calibrated model that
``servewise estimate --task embedding`` uses); nothing here is a second performance formula. The
ASR and vision figures are catalog facts with their sources; the arithmetic is shown as details.
"""

from __future__ import annotations

from typing import Any

# the module, not its names: importing fn_facilities first loads this module while it is half-imported
from servewise.engine.domain import fn_facilities
from servewise.engine.domain.functions import current, domain_function, note_detail, policy

# vLLM's default upper limit of sequences in one engine step (max_num_seqs, 256; docs.vllm.ai
# engine arguments): an encoder batch is searched up to it.
MAX_BATCH_SEQUENCES = 256


def _perf():
    from servewise.engine.domain import perf

    return perf


def _step(steps: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for s in steps:
        if s.get("name") == name:
            return s
    return {}


def _encoder_raw(model: str, gpu: str, tp: int, precision: str, isl: int, sequences: int) -> dict[str, Any]:
    """The perf model's encoder estimate for one batch of ``sequences`` inputs, memoised per run."""
    ctx = current()
    key = ("encoder", model, gpu, int(tp), str(precision), int(isl), int(sequences))
    if key not in ctx.cache:
        ctx.cache[key] = _perf().estimate_embedding(
            ctx.model(model), ctx.catalog.gpu(gpu), tp=int(tp), precision=str(precision),
            isl=int(isl), concurrency=max(1, int(sequences))).to_dict()
    return ctx.cache[key]


def _encoder_record(data: dict[str, Any], sequences: int) -> dict[str, Any]:
    """Latency, batch step, throughput and the compute behind them, from the estimate's steps."""
    steps = data.get("steps") or []
    comp = _step(steps, "encoder_compute").get("values", {})
    step_ms = _step(steps, "encoder_step").get("result")
    latency = data.get("ttft_ms")
    band = (data.get("band") or {}).get("ttft_ms")
    hi = band[1] if band else latency
    factor = (hi / latency) if latency else None
    gflops = (comp.get("gemm_gflops", 0.0) + comp.get("moe_gflops", 0.0)
              + comp.get("attention_gflops", 0.0))
    mem = data.get("memory") or {}
    return {
        "fits": bool(data.get("fits")) and latency is not None,
        "latency_ms": latency, "latency_ms_hi": hi,
        "step_ms": step_ms, "step_ms_hi": step_ms * factor if step_ms and factor else step_ms,
        "sequences": int(sequences),
        "sequences_per_s": (sequences / step_ms * 1e3) if step_ms else None,
        "gflops_per_sequence": gflops / sequences if sequences else None,
        "peak_tflops": comp.get("peak_tflops"),
        "eta_flops": (comp.get("eta_flops") or 0.0) * (comp.get("eta_lowp") or 1.0),
        "weights_gib": mem.get("weights_gib"), "per_gpu_gib": mem.get("per_gpu_gib"),
    }


@domain_function
def encoder(model: str, gpu: str, tp: int, precision: str, isl: int, requests: int,
            sequences_per_request: int = 1) -> dict[str, Any]:
    """An encoder replica (embedding / reranking) running batches of ``requests`` requests of
    ``sequences_per_request`` inputs of ``isl`` tokens: ``latency_ms`` (+ ``_hi``, the band's
    upper end), ``step_ms`` (+ ``_hi``), ``requests_per_s`` at a full batch, ``gflops_per_request``,
    ``peak_tflops`` and ``eta_flops`` (the calibrated compute efficiency), ``fits``, memory."""
    seqs = max(1, int(requests)) * max(1, int(sequences_per_request))
    data = _encoder_raw(model, gpu, tp, precision, isl, seqs)
    rec = _encoder_record(data, seqs)
    k = max(1, int(sequences_per_request))
    rec["requests"] = max(1, int(requests))
    rec["requests_per_s"] = rec["sequences_per_s"] / k if rec["sequences_per_s"] else None
    rec["gflops_per_request"] = rec["gflops_per_sequence"] * k if rec["gflops_per_sequence"] else None
    note_detail({"function": "encoder", "steps": data.get("steps", []),
                 "calibration": data.get("calibration")})
    return rec


@domain_function
def encoder_max_batch(model: str, gpu: str, tp: int, precision: str, isl: int,
                      sequences_per_request: int, target_ms: float | None) -> int:
    """Largest batch (requests) per encoder replica whose worst-case latency meets ``target_ms``:
    a request arriving just after a batch started waits for that batch step, then runs in the
    next one, so ``step_hi(B) + latency_hi(B) ≤ target`` (upper band of the estimate). Without a
    target the batch is limited by vLLM's default of 256 sequences per step; 0 when even one
    request misses the target or the weights do not fit."""
    k = max(1, int(sequences_per_request))
    limit = max(1, MAX_BATCH_SEQUENCES // k)
    ctx = current()
    key = ("encoder_max_batch", model, gpu, int(tp), str(precision), int(isl), k, target_ms)
    if key not in ctx.cache:
        def ok(b: int) -> bool:
            rec = _encoder_record(_encoder_raw(model, gpu, tp, precision, isl, b * k), b * k)
            if not rec["fits"]:
                return False
            return target_ms is None or rec["step_ms_hi"] + rec["latency_ms_hi"] <= float(target_ms)

        n = 0
        if ok(1):
            lo, hi = 1, limit
            if ok(hi):
                lo = hi
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if ok(mid) else (lo, mid)
            n = lo
        ctx.cache[key] = n
    n = ctx.cache[key]
    note_detail({"function": "encoder_max_batch", "result": n,
                 "formula": "largest B (requests, ≤ 256 sequences) with step_hi(B) + latency_hi(B) "
                            "≤ latency target: one batch of waiting, then its own batch"})
    return int(n)


@domain_function
def asr_capacity(model: str, gpu: str, precision: str) -> dict[str, Any]:
    """Audio seconds per second one GPU transcribes: the model's sourced real-time factor
    (batched, measured on a reference GPU) scaled by the smaller of the GPU's ratios to the
    reference in 16-bit dense tensor TFLOPS (the encoder is compute-bound) and in memory
    bandwidth (the token-by-token decoder is bandwidth-bound); an estimate. Returns ``audio_s_per_s``, ``rtf``,
    the reference, the ratio, the decoder's tokens/s at that load and ``gflops_per_audio_s``."""
    m = current().model(model)
    ref = m.get("asr_reference") or {}
    tflops = _perf().compute_rate(current().catalog.gpu(gpu), "bf16")[0]
    if not ref or not tflops:
        return {"audio_s_per_s": None, "rtf": None}
    bw = current().catalog.gpu(gpu).get("bandwidth_gbs")
    compute_ratio = float(tflops) / float(ref["gpu_fp16_tflops"])
    bandwidth_ratio = float(bw) / float(ref["gpu_bandwidth_gbs"]) if bw else compute_ratio
    ratio = min(compute_ratio, bandwidth_ratio)
    rtf = float(ref["rtf"]) / ratio
    out = {"audio_s_per_s": 1.0 / rtf, "rtf": rtf, "rtf_reference": float(ref["rtf"]),
           "reference_gpu": ref["gpu"], "reference_tflops": float(ref["gpu_fp16_tflops"]),
           "reference_bandwidth_gbs": float(ref["gpu_bandwidth_gbs"]),
           "gpu_tflops": float(tflops), "gpu_bandwidth_gbs": float(bw) if bw else None,
           "compute_ratio": compute_ratio, "bandwidth_ratio": bandwidth_ratio, "ratio": ratio,
           "bound": "compute (encoder)" if compute_ratio <= bandwidth_ratio else "bandwidth (decoder)",
           "decoder_tokens_per_audio_s": float(ref["decoder_tokens_per_audio_s"]),
           "gflops_per_audio_s": float(ref["gflops_per_audio_s"]),
           "precision_note": "16-bit reference; int8/int4 speed-ups are not assumed"}
    out["eta_flops"] = out["audio_s_per_s"] * out["gflops_per_audio_s"] / 1e3 / float(tflops)
    note_detail({"function": "asr_capacity", "result": round(out["audio_s_per_s"], 1),
                 "formula": "audio_s_per_s = min(tflops_gpu / tflops_ref, bandwidth_gpu / bandwidth_ref)"
                            " / rtf_ref",
                 "values": {k: v for k, v in out.items() if isinstance(v, (int, float))}})
    return out


@domain_function
def asr_streaming_capacity(model: str, gpu: str, precision: str, chunk_ms: float,
                           latency_ms: float, utilisation: float) -> dict[str, Any]:
    """Live (streaming) transcription on one GPU: how many streams it serves when each stream sends
    a chunk of ``chunk_ms`` and the chunk's partial result must return within ``latency_ms``.

    A Whisper-style model has no streaming state: at every chunk it re-encodes its fixed window
    (``asr_reference.window_s``, 30 s) and re-decodes the stream's buffered speech (policy
    ``asr_streaming_buffer_s``), as whisper_streaming / WhisperLive do. One update therefore costs
    ``u = rtf × (window × encoder share + buffer × decoder share)`` GPU seconds at the batched
    real-time factor of this GPU (:func:`asr_capacity`; the shares are the encoder's and decoder's
    GFLOP per audio second), and ``u1`` the same at the unbatched factor (one update alone).
    Updates of different streams are batched: N streams take ``T(N) = max(u1, N × u)`` per round,
    and a chunk may wait for the round already running, so its worst-case latency is ``2 T(N)``
    (``u1`` for a single stream). Streams per GPU = the largest N with ``N × u ≤ utilisation ×
    chunk`` (the GPU keeps up) and that latency within the target; 0 when even one misses it."""
    a = asr_capacity(model, gpu, precision)
    ref = current().model(model).get("asr_reference") or {}
    need = ("window_s", "encoder_gflops_per_audio_s", "gflops_per_audio_s", "rtf_unbatched")
    if a.get("rtf") is None or any(ref.get(k) is None for k in need):
        return {"streams_per_gpu": None}
    window, buffer = float(ref["window_s"]), float(policy("asr_streaming_buffer_s"))
    enc_g, all_g = float(ref["encoder_gflops_per_audio_s"]), float(ref["gflops_per_audio_s"])
    enc_share = enc_g / all_g
    audio_equiv = window * enc_share + buffer * (1.0 - enc_share)   # offline audio seconds per update
    u = float(a["rtf"]) * audio_equiv
    u1 = float(ref["rtf_unbatched"]) / float(a["ratio"]) * audio_equiv
    chunk, target = float(chunk_ms) / 1e3, float(latency_ms) / 1e3

    def latency(n: int) -> float:
        return u1 if n == 1 else 2.0 * max(u1, n * u)

    by_throughput = int(float(utilisation) * chunk / u)
    by_latency = 0
    if latency(1) <= target:
        by_latency = 1
        if 2.0 * u1 <= target:
            by_latency = max(1, int(target / (2.0 * u)))
    n = max(0, min(by_throughput, by_latency))
    gflops_per_stream_s = (window * enc_g + buffer * (all_g - enc_g)) / chunk
    out = {"streams_per_gpu": n, "by_throughput": by_throughput, "by_latency": by_latency,
           "update_s": u, "update_s_alone": u1, "latency_ms": latency(n) * 1e3 if n else latency(1) * 1e3,
           "chunk_s": chunk, "target_s": target, "window_s": window, "buffer_s": buffer,
           "encoder_share": enc_share, "audio_s_per_update": audio_equiv,
           "gpu_s_per_stream_s": u / chunk, "offline_multiple": u / chunk / float(a["rtf"]),
           "gflops_per_audio_s": gflops_per_stream_s, "rtf": float(a["rtf"]),
           "rtf_unbatched": float(ref["rtf_unbatched"]) / float(a["ratio"])}
    note_detail({"function": "asr_streaming_capacity", "result": n,
                 "formula": "u = rtf x (window x encoder share + buffer x decoder share); u1 the same at the "
                            "unbatched rtf; streams = max N with N u <= utilisation x chunk and "
                            "(u1 if N = 1 else 2 max(u1, N u)) <= latency target",
                 "values": {k: v for k, v in out.items() if isinstance(v, (int, float))}})
    return out


@domain_function
def vision_frame_capacity(detector: str, gpu: str) -> dict[str, Any]:
    """Frames per second one accelerator runs ``detector`` at: its 16-bit dense tensor TFLOPS × the
    detector's measured efficiency (GFLOPs per frame ÷ measured ms per frame ÷ the measuring
    device's TFLOPS, from the catalog) ÷ GFLOPs per frame; and its hardware video decode capacity
    (1080p frames/s, None when not sourced)."""
    det = fn_facilities._entry("vision-models", detector)
    g = current().catalog.gpu(gpu)
    tflops = _perf().compute_rate(g, "bf16")[0] or (g.get("dense_tflops") or {}).get("int8")
    if det is None or not tflops:
        return {"frames_per_s": None, "decode_fps": g.get("video_decode_1080p_fps")}
    meas = det["measured"]
    eta = det["gflops_per_frame"] / meas["ms_per_frame"] / meas["device_fp16_tflops"]
    fps = float(tflops) * eta * 1e3 / det["gflops_per_frame"]
    out = {"frames_per_s": fps, "eta_flops": eta, "peak_tflops": float(tflops),
           "gflops_per_frame": float(det["gflops_per_frame"]),
           "decode_fps": g.get("video_decode_1080p_fps"), "detector": det["id"]}
    note_detail({"function": "vision_frame_capacity", "result": round(fps, 1),
                 "formula": "fps = peak_tflops x eta x 1e3 / gflops_per_frame; eta = gflops_per_frame"
                            " / measured ms_per_frame / measuring device TFLOPS",
                 "values": {k: v for k, v in out.items() if isinstance(v, (int, float))}})
    return out


# shares of the operating point a load curve is drawn at (past 1.0: where the target is missed)
CURVE_POINTS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
ENCODER_CURVE_POINTS = (0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)


def _counts(n: float, shares: tuple[float, ...], limit: int | None = None) -> list[tuple[float, int]]:
    """(share, whole count) at ``shares`` of ``n``, at least 1, at most ``limit``, each count once
    (the planned point, share 1.0, kept where a smaller share rounds to the same count)."""
    by_count: dict[int, float] = {}
    for share in shares:
        c = max(1, round(float(n) * share))
        if limit is not None and c > limit:
            break
        if c not in by_count or share == 1.0:
            by_count[c] = share
    return [(share, c) for c, share in by_count.items()]


@domain_function
def encoder_load_curve(model: str, gpu: str, tp: int, precision: str, isl: int,
                       sequences_per_request: int, batch_requests: int) -> list[dict[str, Any]]:
    """Latency against load of one encoder replica whose batcher runs whatever waits: in steady
    state the requests that arrive during one batch step form the next batch, so a batch of ``b``
    requests serves ``b / step(b)`` requests/s; a request runs in its own batch (``latency_ms``,
    the estimate of :func:`encoder`) after waiting at most for the running one (``latency_p99_ms``
    = ``step_hi(b) + latency_hi(b)``, how :func:`encoder_max_batch` sizes the batch). ``b`` at
    shares ``ENCODER_CURVE_POINTS`` of ``batch_requests`` (the largest batch within the target,
    share 1.0), up to vLLM's 256 sequences a step. A batch that serves no more requests/s than a
    smaller one is left out (a load that smaller batch covers never grows the queue to it: the
    steady-state batch is the smallest whose rate covers the arrivals), as is one that does not fit."""
    k = max(1, int(sequences_per_request))
    rows: list[dict[str, Any]] = []
    for share, b in _counts(batch_requests, ENCODER_CURVE_POINTS, max(1, MAX_BATCH_SEQUENCES // k)):
        rec = _encoder_record(_encoder_raw(model, gpu, tp, precision, isl, b * k), b * k)
        if not rec["fits"] or not rec["sequences_per_s"]:
            continue
        if rows and round(rec["sequences_per_s"] / k, 2) <= max(r["requests_per_s"] for r in rows):
            continue
        rows.append({"share": share, "batch_requests": b,
                     "requests_per_s": round(rec["sequences_per_s"] / k, 2),
                     "latency_ms": round(rec["latency_ms"], 1),
                     "latency_p99_ms": round(rec["step_ms_hi"] + rec["latency_ms_hi"], 1)})
    note_detail({"function": "encoder_load_curve", "result": len(rows),
                 "formula": "per batch b: requests/s = b / step(b); latency = latency(b); worst case = "
                            "step_hi(b) + latency_hi(b)"})
    return rows


@domain_function
def asr_streaming_load_curve(model: str, gpu: str, precision: str, chunk_ms: float, latency_ms: float,
                             utilisation: float, streams_per_gpu: int) -> list[dict[str, Any]]:
    """Partial-result latency and GPU time against live streams on one GPU, from the same update
    model as :func:`asr_streaming_capacity`: ``n`` streams take a round of ``max(u1, n u)`` (``u1``
    for one stream alone), a chunk's worst latency is two rounds (one round for a single stream),
    and the GPU is busy ``n u / chunk`` of the time (above 100 % it cannot keep up). ``n`` at shares
    ``CURVE_POINTS`` of ``streams_per_gpu`` (the planned streams per GPU, share 1.0)."""
    s = asr_streaming_capacity(model, gpu, precision, chunk_ms, latency_ms, utilisation)
    if not s.get("streams_per_gpu") or not streams_per_gpu:
        return []
    u, u1, chunk = float(s["update_s"]), float(s["update_s_alone"]), float(s["chunk_s"])
    rows = []
    for share, n in _counts(streams_per_gpu, CURVE_POINTS):
        worst = u1 if n == 1 else 2.0 * max(u1, n * u)
        rows.append({"share": share, "streams": n, "latency_ms": round(worst * 1e3, 1),
                     "gpu_busy_pct": round(100.0 * n * u / chunk, 1)})
    return rows


@domain_function
def video_load_curve(detector: str, gpu: str, tp: int, fps: float, decode_fps: float,
                     streams_per_box: float, llm_boxes: float, utilisation: float,
                     compute_ratio: float = 1.0, bandwidth_ratio: float = 1.0) -> list[dict[str, Any]]:
    """The load of one box (replica) against its camera streams: ``n`` streams at ``fps`` analysed
    frames/s take ``n fps / (detector frames/s x utilisation x tp)`` of the box's compute
    (:func:`vision_frame_capacity`, at the planned utilisation as the sizing counts it), scaled by
    the power mode's compute ratio, plus the LLM's share (``llm_boxes``, at the mode's memory-clock
    ratio) — as :func:`edge_power_mode` loads a box; and ``n decode_fps / (decode capacity x tp)``
    of its hardware video decoder (None when not sourced). ``n`` at shares ``CURVE_POINTS`` of
    ``streams_per_box`` (the planned streams per box, share 1.0); above 100 % the box falls behind."""
    v = vision_frame_capacity(detector, gpu)
    if not v.get("frames_per_s") or not streams_per_box:
        return []
    per_box = float(v["frames_per_s"]) * float(utilisation) * max(1, int(tp))
    rc, rb = float(compute_ratio or 1.0), float(bandwidth_ratio or 1.0)
    dec = v.get("decode_fps")
    rows = []
    for share, n in _counts(streams_per_box, CURVE_POINTS):
        rows.append({"share": share, "streams": n, "frames_per_s": round(n * float(fps), 1),
                     "compute_load_pct": round(100.0 * (n * float(fps) / per_box / rc + float(llm_boxes or 0) / rb), 1),
                     "decode_load_pct": (round(100.0 * n * float(decode_fps) / (float(dec) * max(1, int(tp))), 1)
                                         if dec else None)})
    return rows
