"""`servewise estimate` and `servewise validate` (CONTRACTS §2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from servewise.cli.errors import current_lang
from servewise.cli.i18n import display_width, value_text
from servewise.cli.wrap import output_width, wrap
from servewise.engine.common.messages import message
from servewise.engine.domain.catalog import UnknownEntry, load_catalog
from servewise.engine.domain.perf import PRECISIONS, estimate, estimate_embedding
from servewise.engine.domain.perf.calibration import BACKENDS, load_calibration, using_overlay
from servewise.engine.domain.perf.data import MODEL_ALIASES, DataError
from servewise.engine.domain.perf.disagg import Pool, estimate_disagg
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.overlay import Overlay, OverlayError, load_overlay
from servewise.engine.domain.perf.serving import HARNESSES, default_harness, max_rate_meeting
from servewise.engine.domain.perf.speculative import speculation
from servewise.engine.domain.perf.validate import METRICS, validate


class BadInput(click.ClickException):
    """Bad input: one line, exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(message("est.err.prefix", current_lang(), text=self.format_message()), err=True, file=file)


def bad(code: str, **args: Any) -> BadInput:
    """A BadInput whose text is the message ``est.err.<code>`` in the user's language."""
    return BadInput(message(f"est.err.{code}", current_lang(), **args))


CALIBRATION_HELP = ("A calibration overlay written by `servewise calibrate`: the estimates use the "
                    "constants it fitted on your own benchmark for its GPU and backend.")


def read_overlay(path: str | None) -> Overlay | None:
    """The ``--calibration`` overlay, or None; a missing or bad file is bad input (exit 2)."""
    if path is None:
        return None
    try:
        return load_overlay(path)
    except OverlayError as exc:
        raise BadInput(f"--calibration: {exc}") from None


def _lookup(kind: str, name: str, option: str) -> dict[str, Any]:
    cat = load_catalog()
    try:
        return cat.gpu(name) if kind == "gpu" else cat.model(name)
    except UnknownEntry as exc:
        alias = MODEL_ALIASES.get(name.strip().lower()) if kind == "model" else None
        if alias:
            return cat.model(alias)
        hint = message("est.err.hint", current_lang(), names=", ".join(exc.suggestions)) if exc.suggestions else ""
        raise bad("unknown", option=option, kind=kind, name=name, hint=hint) from None


def _fmt(x: float | None, nd: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{nd}f}"


def _values(v: dict[str, Any]) -> str:
    parts = []
    for k, x in v.items():
        if isinstance(x, float):
            x = f"{x:.4g}"
        parts.append(f"{k}={x}")
    return ", ".join(parts)


def _workload_line(i: dict[str, Any], lang: str = "en") -> str:
    def m(code: str, **args: Any) -> str:
        return message(f"est.{code}", lang, **args)

    if i.get("task") == "embedding":
        return m("workload.embedding", task=i["task"], isl=i["isl"], c=i["concurrency"])
    if i.get("request_rate"):
        load = m("workload.poisson_rate", rate=f"{i['request_rate']:g}")
    else:
        load = m("workload.inflight", c=i["concurrency"], how=m(
            "workload.open" if i.get("arrival") == "poisson"
            else "workload.random" if i.get("request_lengths") == "random" else "workload.closed_only"))
    spec = i.get("speculative")
    extra = (m("workload.spec", tokens=spec["tokens"], acceptance=f"{spec['acceptance']:g}",
               source=m("spec.given" if spec["source"] == "given" else "spec.fitted")) if spec else "")
    return m("workload", isl=i["isl"], osl=i["osl"], load=load, extra=extra)


def estimate_text(d: dict[str, Any], lang: str = "en") -> str:
    """An estimate as text in ``lang``."""
    def t(code: str, **args: Any) -> str:
        return message(f"est.{code}", lang, **args)

    i, m, b = d["inputs"], d["memory"], d["band"]
    adp = t("adp", n=i["attention_dp"]) if i.get("attention_dp", 1) > 1 else ""
    lines = [t("head", model=i["model"], n=i["n_gpus"], gpu=i["gpu"], tp=i["tp"], pp=i["pp"], ep=i["ep"],
               adp=adp, precision=i["precision"], kv=i["kv_precision"] or t("no_kv"), backend=i["backend"]),
             _workload_line(i, lang),
             t("memory", per=m["per_gpu_gib"], budget=m["budget_gib"], weights=m["weights_gib"],
               kv=m["kv_cache_gib"], overhead=m["overhead_gib"], verdict=t("fits" if d["fits"] else "no_fit"))]
    if d["reason"]:
        lines.append(t("reason", text=d["reason"]))
    if d["ttft_ms"] is not None:
        first = t("label.latency") if i.get("task") == "embedding" else t("label.ttft_mean")
        for key, label, unit in (("ttft_ms", first, t("unit.ms")), ("tpot_ms", t("label.tpot_mean"), t("unit.ms")),
                                 ("output_tokens_per_s", t("label.throughput"), t("unit.tokens"))):
            if d[key] is None or not b.get(key):
                continue
            lo, hi = b[key]
            lines.append(t("metric", label=label, value=_fmt(d[key]), unit=unit, lo=_fmt(lo), hi=_fmt(hi)))
            if key == "ttft_ms" and d.get("ttft_p99_ms") is not None:
                lo, hi = b["ttft_p99_ms"]
                lines.append(t("metric", label="TTFT p99", value=_fmt(d["ttft_p99_ms"]), unit=t("unit.ms"),
                               lo=_fmt(lo), hi=_fmt(hi)))
    for s in d["steps"]:
        if s["name"] in ("requests_per_s", "input_tokens_per_s"):
            label = s["name"].replace("_", " ") if lang == "en" else t(s["name"])
            lines.append(f"{label:>10}: {_fmt(s['result'])}" if lang == "en" else f"{label}：{_fmt(s['result'])}")
    lines += load_lines(d, lang)
    c = d["calibration"]
    lines.append(t("calibration", gpu_class=c["gpu_class"], backend=c["backend"],
                   measured=t("measured" if c["measured"] else "not_measured"),
                   overlay=t("overlay") if "overlay fitted" in c.get("source", "") else ""))
    if c.get("band_source"):
        lines.append(t("bands", source=value_text(c["band_source"], lang)))
    lines += how_lines(d["steps"], lang)
    return "\n".join(lines)


def how_lines(steps: list[dict[str, Any]], lang: str = "en") -> list[str]:
    """An estimate's formula steps, each with its values, result and note (the performance model
    writes the notes in English; Chinese through the value glossary, facts/messages/values.yaml)."""
    out = [message("est.how", lang)]
    for s in steps:
        res = s["result"]
        res = f"{res:,.4g}" if isinstance(res, float) else res
        out.append(f"  {s['name']}: {s['formula']}")
        out.append(f"      {_values(s['values'])} => {res} {value_text(s['unit'], lang)}".rstrip())
        if s.get("note"):
            note = value_text(s["note"], lang)
            out.append(f"      ({note})" if lang == "en" else f"      （{note}）")
    return out


def load_lines(d: dict[str, Any], lang: str = "en") -> list[str]:
    """The open loop's load: utilisation, saturation, the largest rate meeting the targets."""
    out = []
    ld = d.get("load")
    if ld:
        out.append(message("est.load", lang, offered=f"{ld['offered_requests_per_s']:g}",
                           max=f"{ld['max_requests_per_s']:.2f}", util=f"{100 * ld['utilisation']:.0f}",
                           rho=f"{ld['prefill_queue_rho']:.2f}", inflight=f"{ld['in_flight_per_rank']:g}",
                           cap=f"{ld['batch_cap_per_rank']:g}"))
        if ld["saturated"]:
            growth = ld.get("ttft_growth_ms_per_s") or 0.0
            out.append(message("est.saturated", lang, growth=_fmt(growth),
                               minute=_fmt((d.get("ttft_ms") or 0.0) + 60 * growth)))
    mr = d.get("max_rate_meeting_sla")
    if mr:
        want = message("est.and", lang).join(x for x in (
            f"TTFT P99 <= {mr['ttft_p99_target_ms']:g} ms" if mr["ttft_p99_target_ms"] else "",
            f"TPOT <= {mr['tpot_target_ms']:g} ms" if mr["tpot_target_ms"] else "") if x)
        out.append(message("est.max_rate", lang, rate=f"{mr['requests_per_s']:.2f}", want=want,
                           limited=mr["limited_by"], max=f"{mr['max_requests_per_s']:.2f}"))
    return out


@click.command("estimate")
@click.option("--model", required=True, help="Model catalog name (case-insensitive).")
@click.option("--gpu", required=True, help="GPU catalog name (case-insensitive).")
@click.option("--tp", type=click.IntRange(min=1), required=True, help="Tensor parallel size.")
@click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Pipeline parallel size.")
@click.option("--ep", type=click.IntRange(min=1), default=1, show_default=True,
              help="Expert parallel size of MoE layers.")
@click.option("--attention-dp", type=click.IntRange(min=1), default=1, show_default=True,
              help="Attention data-parallel ranks (each runs its own requests' attention on tp "
                   "GPUs; MoE layers span all tp x attention-dp GPUs).")
@click.option("--precision", type=click.Choice(PRECISIONS, case_sensitive=False), required=True)
@click.option("--isl", type=click.IntRange(min=1), required=True, help="Input tokens.")
@click.option("--osl", type=click.IntRange(min=1), default=None,
              help="Output tokens (required for --task generate).")
@click.option("--task", type=click.Choice(("generate", "embedding")), default="generate",
              show_default=True,
              help="generate: prefill + decode; embedding: an encoder pass (prefill only, "
                   "--concurrency requests batched, no output tokens).")
@click.option("--concurrency", type=click.IntRange(min=1), required=True,
              help="Requests in flight (steady state, continuous batching).")
@click.option("--backend", type=click.Choice(BACKENDS, case_sensitive=False), default="vllm",
              show_default=True)
@click.option("--arrival", type=click.Choice(("closed", "poisson")), default="closed",
              show_default=True,
              help="closed: a benchmark client keeps --concurrency requests in flight; poisson: "
                   "open-loop production traffic (TTFT mean and P99 from a queue model).")
@click.option("--request-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Offered requests/s (Poisson, open loop); requests in flight then follow "
                   "from Little's law and --concurrency is only the starting estimate.")
@click.option("--request-lengths", type=click.Choice(("fixed", "random")), default=None,
              help="Closed loop only: fixed (default; every request --isl / --osl tokens: the "
                   "requests start and finish together and stay in step) or random (lengths "
                   "drawn from a range whose means are --isl / --osl, e.g. a client's random "
                   "range ratio below 1).")
@click.option("--kv-precision", type=click.Choice(("bf16", "fp16", "fp8", "int8")),
              default=None, help="KV-cache format (default: fp8 with fp8/fp4 weights on GPUs "
                                 "with native FP8, else 16 bit).")
@click.option("--harness", type=click.Choice(HARNESSES), default=None,
              help="What sends the requests, which sets the fixed client cost in TTFT: "
                   "openai-http (the engine's OpenAI-compatible HTTP server and its client; the "
                   "default, policy harness_default) or in-process (a load generator calling the "
                   "engine in its own process, e.g. trtllm-bench or MLPerf LoadGen: no client "
                   "cost).")
@click.option("--speculative-tokens", type=click.IntRange(min=1, max=16), default=None,
              help="Speculative decoding: draft tokens proposed per step (e.g. 1-3 for a model's "
                   "MTP module); off when not given.")
@click.option("--acceptance", type=click.FloatRange(min=0, max=1), default=None,
              help="Probability a draft token is accepted given the ones before it (default: the "
                   "model family's fitted value, facts/calibration.yaml speculative; an error for "
                   "a family without one).")
@click.option("--ttft-target-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --request-rate or --arrival poisson: also find the largest offered rate "
                   "whose P99 TTFT (upper band edge) meets this target.")
@click.option("--tpot-target-ms", type=click.FloatRange(min=0, min_open=True), default=None,
              help="With --request-rate or --arrival poisson: the TPOT target of that rate.")
@click.option("--prefill-workers", type=click.IntRange(min=1), default=None,
              help="Disaggregated serving: prefill workers (with --decode-workers; --tp/--ep/"
                   "--attention-dp are then one decode worker's layout).")
@click.option("--decode-workers", type=click.IntRange(min=1), default=None,
              help="Disaggregated serving: decode workers.")
@click.option("--prefill-tp", type=click.IntRange(min=1), default=None,
              help="Tensor parallel size of a prefill worker (default: --tp).")
@click.option("--prefill-ep", type=click.IntRange(min=1), default=None,
              help="Expert parallel size of a prefill worker (default: --ep).")
@click.option("--prefill-attention-dp", type=click.IntRange(min=1), default=None,
              help="Attention data-parallel ranks of a prefill worker (default: --attention-dp).")
@click.option("--prefill-gpu", default=None,
              help="GPU of the prefill workers (default: --gpu).")
@click.option("--calibration", type=click.Path(dir_okay=False), default=None, help=CALIBRATION_HELP)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text",
              show_default=True)
def estimate_cmd(model: str, gpu: str, tp: int, pp: int, ep: int, attention_dp: int,
                 precision: str, isl: int, osl: int | None, task: str, concurrency: int,
                 backend: str,
                 arrival: str, request_rate: float | None, request_lengths: str | None,
                 kv_precision: str | None, harness: str | None, speculative_tokens: int | None,
                 acceptance: float | None, ttft_target_ms: float | None,
                 tpot_target_ms: float | None, prefill_workers: int | None,
                 decode_workers: int | None, prefill_tp: int | None, prefill_ep: int | None,
                 prefill_attention_dp: int | None, prefill_gpu: str | None,
                 calibration: str | None, fmt: str) -> None:
    """Performance and memory of one model on one GPU configuration (or, with
    --prefill-workers / --decode-workers, of a disaggregated deployment)."""
    targets = (ttft_target_ms, tpot_target_ms)
    prefill_opts = {"--prefill-tp": prefill_tp, "--prefill-ep": prefill_ep,
                    "--prefill-attention-dp": prefill_attention_dp, "--prefill-gpu": prefill_gpu}
    if prefill_workers is None and decode_workers is None:
        given = [k for k, v in prefill_opts.items() if v is not None]
        if given:
            raise bad("disagg_only", option=given[0])
    else:
        with using_overlay(read_overlay(calibration)):
            _estimate_disagg(model, gpu, tp, pp, ep, attention_dp, precision, isl, osl, task,
                             concurrency, backend, arrival, request_rate, kv_precision,
                             speculative_tokens, acceptance, prefill_workers or 1,
                             decode_workers or 1, prefill_tp or tp, prefill_ep or ep,
                             prefill_attention_dp or attention_dp, prefill_gpu, fmt, targets)
        return
    if any(x is not None for x in targets) and not (request_rate or arrival == "poisson"):
        raise bad("targets_open")
    with using_overlay(read_overlay(calibration)):
        _estimate(model, gpu, tp, pp, ep, attention_dp, precision, isl, osl, task, concurrency,
                  backend, arrival, request_rate, request_lengths, kv_precision,
                  speculative_tokens, acceptance, fmt, targets, harness)


def _estimate(model: str, gpu: str, tp: int, pp: int, ep: int, attention_dp: int,
              precision: str, isl: int, osl: int | None, task: str, concurrency: int,
              backend: str, arrival: str, request_rate: float | None,
              request_lengths: str | None, kv_precision: str | None,
              speculative_tokens: int | None, acceptance: float | None, fmt: str,
              targets: tuple[float | None, float | None] = (None, None),
              harness: str | None = None) -> None:
    m = _lookup("model", model, "--model")
    g = _lookup("gpu", gpu, "--gpu")
    if task == "embedding":
        try:
            emb = estimate_embedding(m, g, tp=tp, precision=precision.lower(), isl=isl,
                                     concurrency=concurrency, backend=backend.lower())
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        d = emb.to_dict()
        click.echo(json.dumps(d, indent=2, ensure_ascii=False) if fmt == "json"
                   else wrap(estimate_text(d, current_lang()), output_width()).rstrip("\n"))
        return
    if osl is None:
        raise bad("osl")
    if request_lengths and (arrival == "poisson" or request_rate):
        raise bad("lengths")
    if acceptance is not None and speculative_tokens is None:
        raise bad("acceptance")
    try:
        spec = (speculation(m, speculative_tokens, acceptance, load_calibration())
                if speculative_tokens else None)
        e = estimate(m, g, tp=tp, pp=pp, ep=ep, precision=precision.lower(), isl=isl, osl=osl,
                     concurrency=concurrency, backend=backend.lower(), kv_precision=kv_precision,
                     attention_dp=attention_dp, arrival=arrival, request_rate=request_rate,
                     request_lengths=request_lengths or "fixed", speculative=spec,
                     harness=harness)
        d = e.to_dict()
        if any(x is not None for x in targets) and e.fits:
            d["max_rate_meeting_sla"] = {
                "ttft_p99_target_ms": targets[0], "tpot_target_ms": targets[1],
                **max_rate_meeting(m, g, Layout(tp, pp, ep, attention_dp),
                                   precision=precision.lower(), isl=isl, osl=osl,
                                   ttft_ms=targets[0], tpot_ms=targets[1], backend=backend.lower(),
                                   kv_precision=kv_precision, speculative=spec,
                                   harness=harness or default_harness())}
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if fmt == "json":
        click.echo(json.dumps(d, indent=2, ensure_ascii=False))
    else:
        click.echo(wrap(estimate_text(d, current_lang()), output_width()).rstrip("\n"))


def _estimate_disagg(model: str, gpu: str, tp: int, pp: int, ep: int, attention_dp: int,
                     precision: str, isl: int, osl: int | None, task: str, concurrency: int,
                     backend: str, arrival: str, request_rate: float | None,
                     kv_precision: str | None, speculative_tokens: int | None,
                     acceptance: float | None, prefill_workers: int, decode_workers: int,
                     prefill_tp: int, prefill_ep: int, prefill_attention_dp: int,
                     prefill_gpu: str | None, fmt: str,
                     targets: tuple[float | None, float | None]) -> None:
    if task != "generate":
        raise bad("disagg_task")
    if osl is None:
        raise bad("osl")
    if pp > 1:
        raise bad("disagg_pp")
    if any(x is not None for x in targets):
        raise bad("disagg_targets")
    if acceptance is not None and speculative_tokens is None:
        raise bad("acceptance")
    if arrival == "poisson" and not request_rate:
        raise bad("disagg_poisson")
    m = _lookup("model", model, "--model")
    g = _lookup("gpu", gpu, "--gpu")
    gp = _lookup("gpu", prefill_gpu, "--prefill-gpu") if prefill_gpu else g
    try:
        spec = (speculation(m, speculative_tokens, acceptance, load_calibration())
                if speculative_tokens else None)
        d = estimate_disagg(
            m, Pool(gp, Layout(prefill_tp, 1, prefill_ep, prefill_attention_dp), prefill_workers),
            Pool(g, Layout(tp, 1, ep, attention_dp), decode_workers),
            precision=precision.lower(), isl=isl, osl=osl,
            concurrency=None if request_rate else float(concurrency),
            request_rate=request_rate,
            backend=backend.lower(), kv_precision=kv_precision, speculative=spec)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    if fmt == "json":
        click.echo(json.dumps(d, indent=2, ensure_ascii=False))
    else:
        click.echo(wrap(disagg_text(d, current_lang()), output_width()).rstrip("\n"))


def disagg_text(d: dict[str, Any], lang: str = "en") -> str:
    """A disaggregated estimate as text in ``lang``: the pools, the three numbers, how they were reached."""
    def t(code: str, **args: Any) -> str:
        return message(f"est.{code}", lang, **args)

    i, b = d["inputs"], d["band"]
    lines = [t("disagg.head", model=i["model"], precision=i["precision"], kv=i["kv_precision"],
               backend=i["backend"])]
    for name in ("prefill", "decode"):
        p = d["pools"][name]
        adp = t("adp", n=p["attention_dp"]) if p["attention_dp"] > 1 else ""
        mem = p["memory"]
        lines.append(t("disagg.pool", name=t(f"disagg.{name}"), workers=p["workers"], per=p["gpus_per_worker"],
                       gpu=p["gpu"], tp=p["tp"], ep=p["ep"], adp=adp, gpus=p["gpus"], used=mem["per_gpu_gib"],
                       budget=mem["budget_gib"], verdict=t("fits" if p["fits"] else "no_fit")))
    load = (t("workload.poisson_rate", rate=f"{i['request_rate']:g}") if i.get("request_rate")
            else t("workload.inflight", c=f"{i['concurrency']:g}", how=t("workload.closed_only")))
    spec = i.get("speculative")
    extra = t("disagg.spec", tokens=spec["tokens"], acceptance=f"{spec['acceptance']:g}") if spec else ""
    lines.append(t("workload", isl=i["isl"], osl=i["osl"], load=load, extra=extra))
    if d["reason"]:
        lines.append(t("reason", text=value_text(d["reason"], lang)))
    for key, label, unit in (("ttft_ms", t("label.ttft_mean"), t("unit.ms")),
                             ("tpot_ms", t("label.tpot_mean"), t("unit.ms")),
                             ("output_tokens_per_s", t("label.throughput"), t("unit.tokens"))):
        lo, hi = b[key]
        lines.append(t("metric", label=label, value=_fmt(d[key]), unit=unit, lo=_fmt(lo), hi=_fmt(hi)))
    lines.append(t("disagg.requests", n=_fmt(d["requests_per_s"], 2),
                   saturated=t("disagg.saturated") if d["saturated"] else ""))
    kv = d["kv_transfer"]
    lines.append(t("disagg.kv", mb=f"{kv['bytes_per_request'] / 1e6:,.1f}", link=kv["link"], gbs=kv["gbs_per_gpu"],
                   ms=kv["ms"]))
    c = d["calibration"]
    fitted = value_text(c["t_handoff_fitted_on"], lang) if c["t_handoff_fitted_on"] else t("disagg.not_fitted")
    lines.append(t("disagg.calibration", gpu_class=c["gpu_class"], backend=c["backend"], ms=c["t_handoff_ms"],
                   fitted=fitted))
    lines.append(t("bands", source=value_text(c["band_source"], lang)))
    lines += how_lines(d["steps"], lang)
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "   n/a" if x is None or x != x else f"{100 * x:5.1f}%"


_COLUMNS = ("ttft_ms", "tpot_ms", "output_tokens_per_s", "offline_output_tokens_per_s")
_CELL = 13  # "18.4% (2343)": a share and its number of rows


def _table(title: str, groups: dict[str, dict[str, dict]], stat: str, width: int, lang: str) -> list[str]:
    """One row per group, one column per metric compared (``stat`` of each with its rows); a group
    name too long for its column has a line of its own, its cells on the next."""
    metrics = [m for m in _COLUMNS if any(m in ms for ms in groups.values())]
    name_w = width - 2 - (_CELL + 1) * len(metrics)
    labels = [message(f"val.col.{m}", lang) for m in metrics]
    lines = [title, "  " + " " * name_w + "".join(" " * (_CELL + 1 - display_width(x)) + x for x in labels)]
    for g, ms in groups.items():
        cells = "".join(" " + (f"{_pct(ms[m].get(stat))} ({ms[m]['n']})" if m in ms else "").rjust(_CELL)
                        for m in metrics)
        if display_width(g) > name_w:
            lines += ["  " + g, ("  " + " " * name_w + cells).rstrip()]
        else:
            lines.append(("  " + g + " " * (name_w - display_width(g)) + cells).rstrip())
    return lines


def validate_summary(r: dict[str, Any], lang: str = "en", width: int = 80) -> str:
    """What `validate` prints without ``--rows``: the rows compared and skipped, the error per
    metric, the band coverage per regime, the median error per GPU, backend and model, the targets."""
    def t(code: str, **args: Any) -> str:
        return message(f"val.{code}", lang, **args)

    skipped = sum(1 for row in r["rows"] if row["skipped"])
    lines = [t("summary", rows=f"{len(r['rows']):,}", compared=f"{len(r['rows']) - skipped:,}",
               skipped=f"{skipped:,}", files=", ".join(Path(f["file"]).name for f in r["files"])), ""]
    s = r["summary"]
    lines.append(t("ape"))
    for m, st in s["overall"].items():
        lines.append(f"  {m:<28} {st['n']:>5}   {_pct(st['median_ape'])}   {_pct(st['p90_ape'])}"
                     f"   {_pct(st.get('band_coverage'))}")
    if s.get("by_regime"):
        lines += ["", *_table(t("regime"), s["by_regime"], "band_coverage", width, lang)]
    for group in ("by_gpu", "by_backend", "by_model"):
        lines += ["", *_table(t(f"group.{group}") + " " + t("median_of"), s[group], "median_ape", width, lang)]
    lines += ["", _targets(s, lang), t("rows_hint")]
    return "\n".join(lines)


def _targets(s: dict[str, Any], lang: str) -> str:
    def t(code: str, **args: Any) -> str:
        return message(f"val.{code}", lang, **args)

    lines = [t("targets", items=", ".join(
        t("target", metric=m, pct=f"{100 * x['target_median_ape']:.0f}", met=t("met" if x["met"] else "not_met"),
          coverage=t("met" if x["coverage_met"] else "not_met")) for m, x in s["targets"].items()))]
    mr = s.get("max_rate") or {}  # the largest open-loop rate meeting P99 limits (max-rate rows)
    if mr.get("n"):
        lines.append(t("max_rate", n=mr["n"], share=_pct(mr["share_within"]).strip(),
                       tol=f"{100 * mr['tolerance']:.0f}", target=f"{100 * mr['target_share']:.0f}",
                       met=t("met" if mr["met"] else "not_met")))
    else:
        lines.append(t("max_rate_none"))
    return "\n".join(lines)


def validate_text(r: dict[str, Any], errs_by_row: dict[tuple[str, int], list[dict]], lang: str = "en") -> str:
    """``validate --rows``: every row (its errors, or why it was skipped), then the summary."""
    def t(code: str, **args: Any) -> str:
        return message(f"val.{code}", lang, **args)

    lines = [t("header")]
    for row in r["rows"]:
        key = (row["file"], row["row"])
        if row["skipped"]:
            lines.append(f"{row['row']:>4} {row['file']:<15} {t('skipped', why=value_text(row['skipped'], lang))}")
            continue
        for e in errs_by_row.get(key, []):
            lines.append(f"{row['row']:>4} {row['file']:<15} {e['metric'][:12]:<12} "
                         f"{e['pred']:>10.1f} {e['meas']:>12.1f} {100 * e['err']:+7.1f}%")
        if row.get("note"):
            lines.append(f"{row['row']:>4} {row['file']:<15} {value_text(row['note'], lang)}")
    s = r["summary"]
    lines.append("")
    lines.append(t("ape"))
    for m, st in s["overall"].items():
        lines.append(f"  {m:<28} {st['n']:>5}   {_pct(st['median_ape'])}   {_pct(st['p90_ape'])}"
                     f"   {_pct(st.get('band_coverage'))}")
    lines.append(t("regime"))
    for g, ms in s.get("by_regime", {}).items():
        cells = "  ".join(f"{m.split('_')[0]} {_pct(st.get('band_coverage'))} (n={st['n']})"
                          for m, st in ms.items())
        lines.append(f"  {g:<26} {cells}")
    for group in ("by_gpu", "by_backend", "by_model"):
        lines.append(t(f"group.{group}"))
        for g, ms in s[group].items():
            cells = "  ".join(f"{m.split('_')[0]} {_pct(st['median_ape'])}/{_pct(st['p90_ape'])}"
                              f" (n={st['n']})" for m, st in ms.items())
            lines.append(f"  {g:<26} {cells}")
    lines.append(_targets(s, lang))
    return "\n".join(lines)


@click.command("validate")
@click.option("--data", "data", multiple=True, type=click.Path(dir_okay=False),
              help="CSV in the measured.csv or benchmarks.csv layout (repeatable); "
                   "default: the data the project ships.")
@click.option("--calibration", type=click.Path(dir_okay=False), default=None, help=CALIBRATION_HELP)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text",
              show_default=True)
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Also write the predicted-against-measured charts (one SVG per metric) into this folder.")
@click.option("--rows", "show_rows", is_flag=True, default=False,
              help="Print every row (its errors, or why it was not compared) before the summary.")
def validate_cmd(data: tuple[str, ...], calibration: str | None, fmt: str, plot_dir: str | None,
                 show_rows: bool = False) -> None:
    """Estimates against measured rows: median and p90 error per metric, by GPU, backend and
    model, and how often the 80 % bands hold the measurement (--rows: every row)."""
    for p in data:
        if not Path(p).is_file():
            raise bad("data_missing", path=p)
    overlay = read_overlay(calibration)
    from .progress import slow

    try:
        with using_overlay(overlay), slow("progress.validate", current_lang()):
            r = validate(list(data) or None)
    except DataError as exc:
        raise BadInput(f"--data: {exc}") from None
    if plot_dir:
        from .charts import validate_charts
        from .main import write_svgs

        write_svgs(validate_charts(r["errors"], current_lang()), plot_dir, current_lang())
    if fmt == "json":
        rows = [{"row": x["row"], **{m: (round(x[m], 4) if x[m] is not None else None)
                                      for m in METRICS},
                 **({"max_request_rate": round(x["max_request_rate"], 4)}
                    if x.get("max_request_rate") is not None else {}),
                 **{f"{m}_band": x.get(f"{m}_band") for m in ("ttft_ms", "tpot_ms")},
                 "regime": x.get("regime"), "skipped": x["skipped"],
                 "note": x.get("note"), "file": x["file"]} for x in r["rows"]]
        out = {"rows": rows, "summary": r["summary"], "files": r["files"]}
        if overlay is not None:
            out["calibration_overlay"] = overlay.record()
        click.echo(json.dumps(out, indent=1))
        return
    if not show_rows:
        click.echo(wrap(validate_summary(r, current_lang(), output_width()), output_width()).rstrip("\n"))
        return
    by_row: dict[tuple[str, int], list[dict]] = {}
    for e in r["errors"]:
        by_row.setdefault((e["file"], e["row"]), []).append(e)
    click.echo(wrap(validate_text(r, by_row, current_lang()), output_width()).rstrip("\n"))
