"""Render a plan as text, JSON or Markdown. Pure formatting: no reasoning happens here."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from json.encoder import encode_basestring as _json_text
from typing import Any

from servewise.engine.app.plan import COMPONENT_FIELDS

from .i18n import COMPONENT_NAMES, colon, msg, pad, pick, t, value_text

CONTRACT_COMPONENTS = tuple(COMPONENT_FIELDS)


def to_json(plan: dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, fixed separators, UTF-8 text (byte-identical across runs).

    The text of ``json.dumps(plan, ensure_ascii=False, sort_keys=True, indent=2)`` (the standard
    library writes indented JSON in pure Python; this writer, about twice as fast, gives the same
    bytes, tests/test_plan_cli.py), or that call itself for a value it does not write."""
    out: list[str] = []
    try:
        _write_json(plan, out, "\n")
    except _NotPlain:
        return json.dumps(plan, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    return "".join(out) + "\n"


class _NotPlain(Exception):
    """A value the canonical writer leaves to ``json.dumps`` (a subclass, a non-text key...)."""


_INF = float("inf")


def _write_json(value: Any, out: list[str], newline: str) -> None:
    kind = type(value)
    if kind is str:
        out.append(_json_text(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        keys = list(value)
        if any(type(k) is not str for k in keys):
            raise _NotPlain
        keys.sort()
        inner = newline + "  "
        sep = "{" + inner
        for key in keys:
            out.append(sep)
            out.append(_json_text(key))
            out.append(": ")
            _write_json(value[key], out, inner)
            sep = "," + inner
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        sep = "[" + inner
        for item in value:
            out.append(sep)
            _write_json(item, out, inner)
            sep = "," + inner
        out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float:
        out.append("NaN" if value != value else "Infinity" if value == _INF else
                   "-Infinity" if value == -_INF else float.__repr__(value))
    else:
        raise _NotPlain


def _v(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_v(x)}" for k, x in value.items() if x is not None)
    return str(value)


def _cny(value: float) -> str:
    return f"{value:,.0f}"


def bom_rows(plan: dict[str, Any], lang: str = "en") -> list[list[str]]:
    """Bill-of-materials rows: part, category, qty, unit price range, line range, source (date)."""
    rows = []
    for ln in plan.get("bom") or []:
        rng = ln.get("unit_price_cny")
        unit = (msg("render.bom.unpriced", lang) if not rng
                else _cny(rng[0]) if rng[0] == rng[1] else f"{_cny(rng[0])}-{_cny(rng[1])}")
        line = "—" if not rng else (_cny(ln["qty"] * rng[0]) if rng[0] == rng[1]
                                    else f"{_cny(ln['qty'] * rng[0])}-{_cny(ln['qty'] * rng[1])}")
        date = (f"（{ln['date']}）" if lang == "zh" else f" ({ln['date']})") if ln.get("date") else ""
        source = value_text(ln["source"], lang) + date
        rows.append([value_text(ln["part"], lang), bom_category(ln["category"], lang), str(ln["qty"]), unit, line,
                     source])
    return rows


def bom_category(category: str, lang: str = "en") -> str:
    """A bill-of-materials category as shown (facts/messages/render.yaml; the id when not listed)."""
    code = f"render.bom.category.{category}"
    return msg(code, lang) if code in _catalog() else category


def capex_line(cost: dict[str, Any], lang: str = "en") -> str:
    """'capex X CNY (range L-H)' as the plans print it."""
    rng = cost.get("capex_range_cny")
    text = msg("render.capex", lang, capex=_v(cost["capex_cny"]))
    if rng:
        text += msg("render.capex.range", lang, lo=_cny(rng[0]), hi=_cny(rng[1]))
    return text


def _short(text: str, limit: int = 110) -> str:
    """Component lines are never cut (text output is wrapped to the terminal instead; reports
    show everything); ``limit`` is kept for callers."""
    return text


SUMMARY_FIELDS: dict[str, tuple[str, ...]] = {
    "isolation": ("method", "layout"),
    "monitoring": ("stack",),
    "loadtest": ("tool", "concurrencies"),
    "procurement": ("route", "lead_time"),
    "availability": ("target_pct", "replicas_for_peak", "redundant_replicas"),
    "edge": ("device", "units", "power_w_total"),
}


def component_line(name: str, comp: dict[str, Any], lang: str = "en") -> str:
    """One readable line per component in ``lang`` (a generic listing when values differ per pool)."""
    try:
        return _component_line(name, comp, lang)
    except (TypeError, KeyError, ValueError, AttributeError):
        return _short(value_text(_v(comp), lang), 160)


def _component_line(name: str, comp: dict[str, Any], lang: str = "en") -> str:
    c = comp

    def m(code: str, **args: Any) -> str:
        return msg(f"render.{code}", lang, **args)

    def val(value: Any) -> str:
        return value_text(value, lang)

    if c.get("status"):
        return val(c["status"])
    if name == "gpu" and c.get("model"):
        pp = c.get("pipeline_parallel") or 1
        span = (m("gpu.span", pp=pp, servers=c.get("servers_per_replica") or pp) if pp and pp > 1 else "")
        standby = m("gpu.standby", n=c["standby_gpus"]) if c.get("standby_gpus") else ""
        cards = (m("gpu.cards", cards=c["cards"], per=c["devices_per_card"])
                 if (c.get("devices_per_card") or 1) > 1 else "")
        if c.get("speculative") == "mtp":
            standby += m("gpu.mtp", tokens=c.get("speculative_tokens"), acceptance=c.get("speculative_acceptance"))
        common = {"count": c["count"], "model": c["model"], "cards": cards, "precision": c["precision"],
                  "replicas": c["replicas"], "standby": standby, "per_server": c["per_server"]}
        if c.get("layout") == "disaggregated":
            return m("gpu.disaggregated", prefill=c.get("prefill_workers"), decode=c.get("decode_workers"),
                     adp=c["attention_dp"], ep=c["expert_parallel"], gpus=c.get("gpus_per_replica"), **common)
        if c.get("layout") == "attention-dp":
            return m("gpu.attention_dp", adp=c["attention_dp"], ep=c["expert_parallel"],
                     gpus=c.get("gpus_per_replica"), **common)
        return m("gpu.tensor", tp=c["tensor_parallel"], span=span, **common)
    if name == "servers" and c.get("count"):
        if c.get("packed") and "; " in str(c["form"]):  # packed servers of different forms, listed below
            return m("servers.packed", count=c["count"], form=val(c["form"]))
        orderable = c.get("orderable_as") or []
        shown = ", ".join(orderable[:3]) + (m("servers.more", n=len(orderable) - 3) if len(orderable) > 3 else "")
        return (m("servers.line", count=c["count"], form=val(c["form"]))
                + (m("servers.orderable", shown=shown) if orderable else ""))
    servers = c.get("per_server") if isinstance(c.get("per_server"), list) and len(c["per_server"]) > 1 else None
    if name == "cpu" and servers:  # shared servers of a several-model plan: each its own CPUs
        return m("cpu.servers", detail=val("; ".join(servers)), cores=c["cores_total"])
    if name == "cpu" and c.get("model"):
        return m("cpu", sockets=c["sockets"], model=c["model"], cores=c["cores_total"])
    if name == "memory" and servers:
        return m("memory.servers", capacity=c["capacity_gb"], type=val(c["type"]), detail=val("; ".join(servers)))
    if name == "memory" and c.get("capacity_gb"):
        dimm = m("memory.dimm", channels=c["channels_populated"], dimm=c["dimm_gb"]) if c.get("dimm_gb") else ""
        channels = m("memory.channels", channels=c["channels_populated"]) if c.get("channels_populated") else ""
        return m("memory", capacity=c["capacity_gb"], type=val(c["type"]), channels=channels, dimm=dimm)
    if name == "interconnect" and c.get("intra_node"):
        link = m("interconnect.link", gbs=c["link_gbs"]) if c.get("link_gbs") else ""
        lanes = m("interconnect.lanes", lanes=c["pcie_lanes_per_gpu"]) if c.get("pcie_lanes_per_gpu") else ""
        return f"{val(c['intra_node'])}{link}{lanes}"
    if name == "network" and c.get("inter_node"):
        switch = m("network.switch", switch=val(c["switch"])) if c.get("switch") and c["switch"] != "none" else ""
        feats = m("network.features", features=val(_v(c["switch_features"]))) if c.get("switch_features") else ""
        return f"{val(c['inter_node'])}{feats}{switch}"
    if name == "storage" and c.get("system"):
        usable = m("storage.usable", tb=c["usable_tb"]) if c.get("usable_tb") is not None else ""
        return _short(m("storage", capacity=c["capacity_tb"], usable=usable, store=val(c["model_store"]),
                        system=val(c["system"])), 140)
    if name == "power" and len(c.get("per_server_w") or []) > 1 and c.get("psu_per_server"):
        return m("power.servers", draws=", ".join(str(w) for w in c["per_server_w"]), psu=val(c["psu_per_server"]))
    if name == "power" and c.get("server_draw_w"):
        mode = m("power.mode", mode=val(c["power_mode"])) if c.get("power_mode") else ""
        return m("power", draw=c["server_draw_w"], mode=mode, psu=c["psu_total_w"], redundancy=val(c["redundancy"]))
    if name == "edge" and c.get("power_mode"):
        return m("edge.mode", device=val(c.get("device")), mode=val(c["power_mode"]), id=c.get("power_mode_id"),
                 watts=_v(c.get("power_mode_w")), load=_v(c.get("power_mode_load_pct")),
                 command=c.get("power_mode_command"))
    if name == "cooling" and c.get("type"):
        return val(c["type"]) + (m("cooling.chassis", chassis=val(c["chassis"])) if c.get("chassis") else "")
    if name == "rack" and len(set(c.get("rack_kw") or [])) > 1:  # racks of servers that draw differently
        return m("rack.loads", racks=c["racks"], servers=c["servers_per_rack"],
                 kws=", ".join(_v(kw) for kw in c["rack_kw"]))
    if name == "rack" and c.get("servers_per_rack"):
        return m("rack", servers=c["servers_per_rack"], kw=c["power_kw_per_rack"])
    if name == "rack" and c.get("placement"):
        return val(c["placement"])
    if name == "software" and c.get("framework"):
        s = c.get("settings") or {}
        keys = ("tensor_parallel_size", "tp_size", "tp", "dp_size", "data_parallel_size", "enable_dp_attention",
                "enable_attention_dp", "ep_size", "enable_expert_parallel", "pipeline_parallel_size",
                "data_parallel_replicas",
                "max_num_seqs", "max_batch_size", "max_running_requests", "gpu_memory_utilization",
                "mem_fraction_static", "quantization")
        shown = ", ".join(f"{k}={s[k]}" for k in keys if s.get(k) is not None)
        return c["framework"] + ((f"（{shown}）" if lang == "zh" else f" ({shown})") if shown else "")
    if name == "availability" and c.get("target_pct") is not None:
        worker = "_worker" if c.get("spare_unit") == "worker" else ""   # disaggregated: workers, not replicas
        pools = isinstance(c.get("redundant_replicas"), str)  # several models: "label: n; label: n"
        spare = (m("avail.spare_pools", detail=c["redundant_replicas"]) if pools
                 else m("avail.spare" + worker, n=c["redundant_replicas"], gpus=c.get("redundant_gpus")))
        spare = (spare + m("avail.included" if c.get("included_in_counts") else "avail.recommended")
                 if c.get("redundant_replicas") else "")
        left = c.get("replicas_after_server_loss")
        domain = ((m("avail.domain_pools", detail=left) if isinstance(left, str)
                   else m("avail.domain" + worker, n=left)) if c.get("survives_server_loss") else "")
        default = ""
        if c.get("without_n1_capex_cny") is not None:
            default = m("avail.default", gpus=c.get("without_n1_gpus"), servers=c.get("without_n1_servers"),
                        capex=f"{c['without_n1_capex_cny']:,.0f}", change=f"{c.get('without_n1_change_pct'):+.0f}")
        target = m("avail.target", pct=c["target_pct"], minutes=c.get("downtime_min_per_month"))
        return f"{target}{spare}{domain}{default}"
    fields = SUMMARY_FIELDS.get(name)
    if fields and any(c.get(f) is not None for f in fields):
        return _short(("；" if lang == "zh" else "; ").join(val(_v(c[f])) for f in fields if c.get(f) is not None))
    return _short(val(_v({k: v for k, v in c.items()})) or "—")


def _reason_for(plan: dict[str, Any], comp: str, lang: str) -> str | None:
    prefix = f"components.{comp}."
    for step in reversed(plan["trace"]):
        if any(c["fact"].startswith(prefix) for c in step["conclusions"]):
            return value_text(pick(step.get("because_i18n") or step["because"], lang), lang, phrases_only=True)
    return None


_ACRONYMS = {"ttft": "TTFT", "tpot": "TPOT", "sla": "SLA", "kv": "KV", "itl": "ITL", "p99": "P99", "gpu": "GPU",
             "cpu": "CPU", "tco": "TCO", "bom": "BOM", "pue": "PUE", "rtf": "RTF", "tflops": "TFLOP/s", "cny": "CNY"}
_UNITS = {"ms": "ms", "s": "s", "gib": "GiB", "gb": "GB", "tb": "TB", "CNY": "CNY", "pct": "%", "w": "W",
          "kw": "kW", "kwh": "kWh", "fps": "frames/s"}


def field_label(key: str, lang: str = "en") -> str:
    """A plan field's key as a reader's label: ``ttft_p99_ms_band_hi`` → "TTFT P99 band hi (ms)",
    ``capex_range_cny`` → "Capex range (CNY)"; in Chinese the label of facts/messages/fields.yaml
    (the English label made from the key when there is none)."""
    if f"field.{key}" in _catalog() and (lang != "en" or _catalog()[f"field.{key}"]["en"] != key):
        return msg(f"field.{key}", lang)
    words = [_ACRONYMS.get(w, w) for w in key.split("_")]
    unit = ""
    for i, w in enumerate(words):
        if w in _UNITS and i > 0:
            if words[i - 1] == "per" and i > 1:  # tokens_per_s → "tokens/s"
                words = words[:i - 2] + [f"{words[i - 2]}/{_UNITS[w]}"] + words[i + 1:]
            else:
                unit = _UNITS[w]
                words = words[:i] + words[i + 1:]
            break
    text = " ".join(words)
    text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text


def field_value(value: Any, lang: str = "en") -> str:
    """A plan value formatted for a report: thousands separators, ranges as "low – high",
    booleans as yes / no (in ``lang``)."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value):
        return f"{_v(value[0])} – {_v(value[1])}"
    return _yes(value, lang) if isinstance(value, bool) else value_text(_v(value), lang)


SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


def by_severity(warnings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Warnings critical first, then warnings, then notes (stable within each)."""
    return sorted(warnings, key=lambda w: SEVERITY_RANK.get(w.get("severity", "info"), 3))


def latency_lines(plan: dict[str, Any], lang: str = "en") -> list[str]:
    """The token-stream latencies of a plan, each with its statistic (P99, mean) and the upper end
    of its band, against the target and the statistic the target names (``sla.p99``); empty for
    a plan without a token stream."""
    perf = plan["performance"]
    if perf.get("ttft_ms") is None:
        return []
    sla = (plan.get("workload") or {}).get("sla") or {}
    offline = (plan.get("workload") or {}).get("mode") == "offline"

    def band(key: str) -> str:
        return t("band_le", lang).format(hi=perf[key]) if perf.get(key) is not None else ""

    stats = []
    if perf.get("ttft_p99_ms") is not None:
        stats.append(t("p99_stat", lang).format(value=perf["ttft_p99_ms"], band=band("ttft_p99_ms_band_hi")))
    stats.append(t("mean_stat", lang).format(value=perf["ttft_ms"], band=band("ttft_ms_band_hi")))
    statistic = perf.get("ttft_target_statistic") or ("mean" if sla.get("p99") is False else "p99")
    edge = t("edge_median" if perf.get("confidence") == "median" else "edge_p80", lang)
    if sla.get("ttft_ms") is not None and not offline:
        how = "ttft_how_p99" if statistic == "p99" and perf.get("ttft_p99_ms") is not None else "ttft_how_mean"
        ttft_target = t("ttft_target", lang).format(
            stat="P99" if statistic == "p99" else t("mean_word", lang), target=sla["ttft_ms"],
            checked=perf.get("ttft_checked_ms", perf.get("ttft_ms_band_hi")),
            how=t(how, lang).format(edge=edge), margin=_v(perf.get("ttft_margin_pct")))
    else:
        ttft_target = t("no_target", lang)
    tpot_target = (t("tpot_target", lang).format(
        target=sla["tpot_ms"], checked=perf.get("tpot_checked_ms", perf.get("tpot_ms_band_hi")), edge=edge,
        margin=_v(perf.get("tpot_margin_pct")))
        if sla.get("tpot_ms") is not None and not offline else t("no_target", lang))
    sep = "，" if lang == "zh" else ", "
    return [t("ttft_line", lang).format(stats=sep.join(stats), target=ttft_target),
            t("tpot_line", lang).format(mean=perf["tpot_ms"], band=band("tpot_ms_band_hi"), target=tpot_target),
            t("throughput_line", lang).format(tokens=_v(perf["output_tokens_per_s"]),
                                              inflight=perf["max_concurrency"],
                                              meets=t("yes" if perf["meets_sla"] else "no", lang))]


def _yes(value: Any, lang: str) -> str:
    return _v(value) if not isinstance(value, bool) else t("yes" if value else "no", lang)


def severity(name: str, lang: str) -> str:
    """A warning's severity in ``lang``."""
    return msg(f"render.severity.{name}", lang) if f"render.severity.{name}" in _catalog() else name


def _catalog() -> dict[str, dict[str, str]]:
    from servewise.engine.common.messages import catalog

    return catalog()


def plan_head(workload: dict[str, Any], lang: str = "en") -> str:
    """"servewise plan — MODEL, MODE, N QPS" in ``lang``."""
    mode = workload["mode"]
    shown = msg(f"render.mode.{mode}", lang) if f"render.mode.{mode}" in _catalog() else mode
    return msg("render.title", lang, model=plan_title(workload), mode=shown, qps=workload["traffic"]["peak_qps"])


def plan_title(workload: dict[str, Any]) -> str:
    """The model(s) a plan is for."""
    def name(m: Any) -> str:
        return m if isinstance(m, str) else (m or {}).get("name", "?")

    if workload.get("model") is None and workload.get("models"):
        return " + ".join(name(e["model"]) for e in workload["models"])
    return name(workload.get("model"))


def to_text(plan: dict[str, Any], lang: str = "en") -> str:
    out: list[str] = []
    w = plan["workload"]
    out.append(plan_head(w, lang) + msg("render.knowledge", lang, hash=plan["knowledge_hash"]))
    if not plan["feasible"]:
        out.append("")
        out.append(t("infeasible", lang))
    out.append("")
    out.append(t("configuration", lang))
    extras = [n for n in plan["components"] if n not in CONTRACT_COMPONENTS]
    pools = plan.get("pools") or []
    packing = plan.get("packing") or {}
    packed = packing.get("chosen") == "packed"
    per_pool = ("gpu", "software") if packed else CONTRACT_COMPONENTS
    for pool in pools:
        out.append(f"  [{pool['model']}, {pool['peak_qps']} QPS]")
        for name in per_pool:
            label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
            out.append(f"    {pad(label, 13)} {component_line(name, pool['components'].get(name, {}), lang)}")
    if pools:
        gpu, servers = plan["components"]["gpu"], plan["components"]["servers"]
        out.append("  " + msg("render.total", lang, gpus=gpu.get("count"), servers=servers.get("count")))
    if packed:
        out.append(f"  [{t('packed_servers', lang)}]")
        for name in CONTRACT_COMPONENTS[1:-1]:  # every component but the GPUs and the software
            label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
            out.append(f"    {pad(label, 13)} {component_line(name, plan['components'].get(name, {}), lang)}")
        for k, srv in enumerate(packing.get("servers") or [], 1):
            gpus = "; ".join(" + ".join(f"{r['pool']} ({r['as']})" for r in g) for g in srv["gpu_residents"])
            out.append(f"    #{k} {value_text(srv['form'], lang)}: {gpus}")
    if packing:
        out.append(f"  {t('layout', lang)}: {pick(packing.get('because_i18n') or packing.get('because'), lang)}")
        for tenant in packing.get("tenants") or []:
            out.append(f"    {tenant['pool']}: {pick(tenant.get('isolation_i18n') or tenant['isolation'], lang)}")
        layouts = layout_options(packing, lang)
        if layouts:
            out.append(f"  {msg('render.layout.title', lang)}")
            out += [f"    - {name}{colon(lang)}{text}" for name, text, _ in layouts]
    for name in CONTRACT_COMPONENTS if not pools else ():
        comp = plan["components"].get(name, {})
        label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
        out.append(f"  {pad(label, 13)} {component_line(name, comp, lang)}")
        settings = (comp.get("settings") or {}) if name == "software" else {}
        pools_launch = [(key, settings[key]) for key in ("launch_prefill", "launch_decode", "launch_router")
                        if settings.get(key)]
        for key, line in pools_launch or ([("launch", settings["launch"])] if settings.get("launch") else []):
            out.append(f"  {pad(t(key, lang), 13)} {line}")
        if name == "software" and comp.get("power_mode_command"):
            out.append(f"  {pad(t('power_mode_command', lang), 13)} {comp['power_mode_command']}")
    if extras:
        out.append("")
        out.append(t("operations", lang))
        for name in extras:
            label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
            out.append(f"  {pad(label, 13)} {component_line(name, plan['components'][name], lang)}")
    perf = plan["performance"]
    if perf.get("ttft_ms") is not None:
        out.append("")
        out.append(t("performance", lang))
        out += [f"  {line}" for line in latency_lines(plan, lang)]
        if perf.get("sized_with"):
            framework = (plan["components"].get("software") or {}).get("framework")
            same = framework in (None, perf["sized_with"])
            out.append("  " + t("sized_with" if same else "sized_for", lang).format(
                profile=perf["sized_with"], framework=framework))
    elif perf.get("latency_ms") is not None:  # an encoder: requests/s and latency, no token stream
        out.append("")
        out.append(t("performance", lang))
        out.append("  " + msg("render.perf.encoder", lang, latency=perf["latency_ms"],
                              p99=_v(perf.get("latency_p99_ms")), rps=_v(perf["requests_per_s"]),
                              planned=_v(perf.get("planned_requests_per_s")), batch=_v(perf.get("batch_requests")),
                              seqs=perf["max_concurrency"], meets=_yes(perf["meets_sla"], lang)))
        if perf.get("compute_needed_tflops") is not None:
            out.append("  " + msg("render.perf.compute", lang, needed=_v(perf["compute_needed_tflops"]),
                                  delivered=_v(perf.get("compute_delivered_tflops")),
                                  efficiency=_v(perf.get("efficiency"))))
    elif perf.get("audio_s_per_s_needed") is not None:  # ASR: audio seconds per second
        out.append("")
        out.append(t("performance", lang))
        out.append("  " + msg("render.perf.asr", lang, needed=_v(perf["audio_s_per_s_needed"]),
                              capacity=_v(perf.get("audio_s_per_s_capacity")), rtf=perf.get("rtf"),
                              tokens=_v(perf.get("decoder_tokens_per_s")), meets=_yes(perf["meets_sla"], lang)))
        if perf.get("asr_streams_per_gpu") is not None:
            out.append("  " + msg("render.perf.asr_streaming", lang, streams=_v(perf.get("asr_streams")),
                                  chunk=_v(perf.get("asr_chunk_ms")), per_gpu=_v(perf["asr_streams_per_gpu"]),
                                  latency=_v(perf.get("asr_partial_latency_ms")),
                                  target=_v(perf.get("asr_partial_latency_target_ms")),
                                  multiple=_v(perf.get("asr_offline_multiple"))))
    if perf.get("video_streams"):
        out.append("  " + msg("render.perf.video", lang, streams=perf["video_streams"],
                              fps=_v(perf["video_frames_per_s_needed"]), detector=perf["video_detector"],
                              needed=_v(perf["video_compute_needed_tflops"]),
                              delivered=_v(perf["video_compute_delivered_tflops"]),
                              decode=_v(perf["video_decode_fps_needed"]),
                              capacity=_v(perf.get("video_decode_fps_capacity"))))
    cost = plan["cost"]
    if cost.get("capex_cny") is not None:
        out.append("")
        out.append(t("cost", lang))
        if cost.get("cny_per_audio_hour") is not None:
            unit = msg("render.cost.audio", lang, v=cost["cny_per_audio_hour"])
        elif cost.get("cny_per_million_requests") is not None:
            unit = msg("render.cost.requests", lang, v=_v(cost["cny_per_million_requests"]))
        else:
            unit = msg("render.cost.tokens", lang, v=_v(cost.get("cny_per_million_tokens")))
        out.append("  " + msg("render.cost.line", lang, capex=capex_line(cost, lang), opex=_v(cost["monthly_opex_cny"]),
                              unit=unit, buy=value_text(cost.get("buy_or_rent"), lang)))
        if cost.get("unpriced_parts"):
            parts = ", ".join(value_text(x, lang) for x in cost["unpriced_parts"])
            out.append("  " + msg("render.cost.unpriced", lang, parts=parts))
        if cost.get("software_services_cny_per_year") is not None:
            out.append("  " + msg("render.cost.software", lang, v=_v(cost["software_services_cny_per_year"]),
                                  tco=_v(cost.get("tco_cny"))))
    if plan.get("bom"):
        out.append("")
        out.append(t("bom", lang))
        for part, _cat, qty, unit, line, source in bom_rows(plan, lang):
            out.append(f"  {qty:>3} × {_short(part, 48):<48} {unit:>17} {line:>23}  {_short(source, 70)}")
    out.append("")
    out.append(t("reasons", lang))
    for name in CONTRACT_COMPONENTS:
        reason = _reason_for(plan, name, lang)
        if reason:
            label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
            out.append(f"  - {label}: {reason}")
    serious = [w for w in plan["warnings"] if w["severity"] != "info"]
    notes = [w for w in plan["warnings"] if w["severity"] == "info"]
    if serious:
        out.append("")
        out.append(t("warnings", lang))
        for warn in serious:
            out.append(f"  ! [{severity(warn['severity'], lang)}] {warning_text(warn, lang)} ({warn['rule']})")
    if notes:
        out.append("")
        rules = list(dict.fromkeys(w["rule"] for w in notes))  # a note several pools give, named once
        out.append(f"{t('notes', lang)} ({len(rules)}): " + ", ".join(rules))
    if plan["rejected"]:
        from servewise.engine.app.explain import rejections_by_gpu

        groups = rejections_by_gpu(plan)
        out.append("")
        out.append(f"{t('rejected', lang)} ({len(plan['rejected'])}; servewise why-not PLAN.json OPTION)")
        chosen_gpu = (plan["components"].get("gpu") or {}).get("model")
        # GPU alternatives first (the chosen GPU's own other configurations are not alternatives)
        order = [o for o, v in groups.items() if v[0].get("kind") == "candidate" and o != chosen_gpu]
        order += [o for o, v in groups.items() if v[0].get("kind") != "candidate"]
        for option in order[:8]:
            first = groups[option][0]  # the configuration that came closest to being chosen
            out.append(f"  - {option}: {without_option(rejection_text(first, lang), option)}")
    if open_asks(plan):
        out.append("")
        out.append(t("questions", lang))
        per_rule = Counter(a["rule"] for a in plan["asks"])
        for ask in open_asks(plan):  # a rule asking for several inputs explains them together: ask each
            text = ask["because"] if per_rule[ask["rule"]] == 1 else question_text(ask["input"])
            out.append(f"  ? {ask['input']}: {pick(text, lang)}")
    out.append("")
    out.append(t("more", lang))
    return "\n".join(out) + "\n"


def warning_text(warn: dict[str, Any], lang: str) -> str:
    """A warning in ``lang``, prefixed with its pool's label when several models share the plan
    (the label is data, ``warn["pool"]``; the English ``message`` already carries it)."""
    if not warn.get("message_i18n"):
        return warn["message"]
    prefix = f"[{warn['pool']}] " if warn.get("pool") else ""
    return prefix + value_text(pick(warn["message_i18n"], lang), lang, phrases_only=True)


def layout_options(packing: dict[str, Any], lang: str = "en") -> list[tuple[str, str, bool]]:
    """The layouts a several-model plan compared (its ``packing``: separate servers, packed on each
    host GPU) as (name, cost per month against the chosen one's, chosen), cheapest first, the
    infeasible last; empty for a plan that compared none."""
    options = packing.get("options") or []
    if len(options) < 2:
        return []
    from servewise.engine.app.explain import chosen_layout

    chosen = chosen_layout(packing)
    base = next((o.get("monthly_cost_cny") for o in options if o["option"] == chosen), None)
    out = []
    for o in sorted(options, key=lambda o: (o.get("feasible") is False, o.get("monthly_cost_cny") or 0)):
        name = (msg("render.layout.packed", lang, gpu=o["host_gpu"]) if o.get("host_gpu")
                else msg("render.layout.separate", lang))
        if o.get("feasible") is False or o.get("monthly_cost_cny") is None:
            out.append((name, msg("render.layout.infeasible", lang,
                                  reason=value_text(o.get("reason") or "", lang, True)), False))
            continue
        mark = o["option"] == chosen
        delta = (msg("render.layout.chosen", lang) if mark else msg(
            "render.layout.delta", lang, pct=f"{100 * (o['monthly_cost_cny'] - base) / base:+.1f}") if base else "")
        out.append((name, msg("render.layout.cost", lang, monthly=f"{o['monthly_cost_cny']:,.0f}",
                              servers=o.get("servers"), delta=delta), mark))
    return out


def without_option(text: str, option: str) -> str:
    """A rejection's text without its leading "OPTION: " (or the Chinese "OPTION："), for a list
    that names the option itself."""
    pool = ""
    if text.startswith("[") and "] " in text:  # a several-model plan's pool label stays
        pool, text = text[:text.index("] ") + 2], text[text.index("] ") + 2:]
    for sep in (": ", "："):
        if text.startswith(option + sep):
            return pool + text[len(option) + len(sep):]
    return pool + text


def rejection_text(rejected: dict[str, Any], lang: str) -> str:
    """Why a configuration was rejected, in ``lang`` (phrases the engine computed in English
    through the value glossary); in a several-model plan led by the pool it was an option of."""
    text = value_text(pick(rejected.get("because_i18n") or rejected["because"], lang), lang, phrases_only=True)
    return f"[{rejected['pool']}] {text}" if rejected.get("pool") else text


def question_text(key: str) -> dict[str, str]:
    """The interview question of an input (facts/inputs.yaml), or the key itself."""
    from servewise.engine.app.inputs import input_def

    try:
        return input_def(key).question
    except KeyError:
        return {"en": key}


def open_asks(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The inputs rules asked for that the workload left at their default (answered ones are not open)."""
    defaulted = set(plan.get("defaults_used") or [])
    return [a for a in plan.get("asks") or [] if a["input"] in defaulted]


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


STAGE_CLASSES = {
    "inputs": "#e8eaf6", "derivations": "#e3f2fd", "candidates": "#e0f7fa", "filters": "#e8f5e9",
    "selection": "#fff8e1", "bom": "#fbe9e7", "facilities": "#f3e5f5", "cost": "#fce4ec", "checks": "#eceff1",
}


GRAPH_COMPONENT = "gpu"  # the reports' explanation graph shows this component's chain by default


def component_trace(plan: dict[str, Any], component: str = GRAPH_COMPONENT) -> list[dict[str, Any]]:
    """The trace steps of one component's chain (explain's walk back to the inputs), in trace
    order; the whole trace when the plan has no such chain."""
    from servewise.engine.app.explain import ExplainError, explain

    try:
        wanted = {s["step"] for s in explain(plan, component)["steps"]}
    except ExplainError:
        return plan["trace"]
    return [s for s in plan["trace"] if s["step"] in wanted] or plan["trace"]


def mermaid(plan: dict[str, Any], trace: list[dict[str, Any]] | None = None) -> str:
    """The explanation chain as a mermaid graph: steps and the steps they depend on, coloured by
    stage (``trace``: the steps to draw, all by default)."""
    lines = ["flowchart LR"]
    stages: dict[str, list[str]] = {}
    steps = plan["trace"] if trace is None else trace
    shown = {s["step"] for s in steps}
    for step in steps:
        label = step["rule"].replace('"', "'")
        lines.append(f'  s{step["step"]}["{step["step"]}. {label}"]')
        stages.setdefault(step.get("stage", ""), []).append(f's{step["step"]}')
        for p in step["premises"]:
            if "step" in p and p["step"] in shown:
                lines.append(f'  s{p["step"]} --> s{step["step"]}')
    for stage, nodes in stages.items():
        if stage in STAGE_CLASSES:
            lines.append(f"  classDef {stage} fill:{STAGE_CLASSES[stage]},stroke:#57606a")
            lines.append(f"  class {','.join(nodes)} {stage}")
    return "\n".join(dict.fromkeys(lines))


def chain_value(fact: str, value: Any, plan: dict[str, Any], lang: str) -> str:
    """A value of the explanation chain (a step's conclusion or premise) in ``lang``: in Chinese a
    warning's message in Chinese, a text given in both languages in Chinese, phrases of the value
    glossary translated (ids, names and numbers stay); English as :func:`_v`. Numbers in a list
    are formatted like single ones (3,016,244, not 3016244.0)."""
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in value):
        return ", ".join(_v(v) for v in value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return msg("render.chain.records", lang, n=len(value))  # a table (the plan's JSON has it)
    if lang == "en":
        return _v(value)
    if fact.startswith("warning["):
        rule = fact[len("warning["):-1]
        found = next((w for w in plan.get("warnings") or [] if w["rule"] == rule), None)
        if found is not None:
            return warning_text(found, lang)
    if isinstance(value, dict) and value.keys() == {"en", "zh"}:
        return str(value.get(lang) or value["en"])
    if isinstance(value, bool):
        return t("yes" if value else "no", lang)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return msg("render.chain.records", lang, n=len(value))
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "；".join(_chain_text(v, lang) for v in value)
    if isinstance(value, dict):
        return "，".join(f"{k}={chain_value(k, v, plan, lang)}" for k, v in value.items() if v is not None)
    if isinstance(value, str):
        return _chain_text(value, lang)
    return _v(value)


def _chain_text(text: str, lang: str) -> str:
    """A text value of the chain: a short value (a few words, no identifier) translated as a whole
    phrase of the glossary, a longer one phrase by phrase (its short words may be identifiers)."""
    short = len(text.split()) <= 4 and "_" not in text and "." not in text
    return value_text(text, lang, phrases_only=not short)


def shown_conclusions(step: dict[str, Any], lang: str) -> list[dict[str, Any]]:
    """A step's conclusions as the chain shows them: in Chinese a fact whose Chinese twin
    (``x_zh``) the step also concluded is shown by the twin only."""
    conclusions = step["conclusions"]
    if lang == "en":
        return conclusions
    facts = {c["fact"] for c in conclusions}
    return [c for c in conclusions if f"{c['fact']}_zh" not in facts]


def input_rows(plan: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(field, value, 'given' | 'default') for every workload input, nested keys dotted."""
    rows: list[tuple[str, str, str]] = []

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and prefix != "model":
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif not (prefix == "models" and node is None):  # `models` is the alternative to `model`
            rows.append((prefix, _v(node), "default" if prefix in plan["defaults_used"] else "given"))

    walk("", plan["workload"])
    return rows


def _sources_md(source: Any) -> tuple[str, list[str]]:
    src = source if isinstance(source, list) else [source]
    cites = "; ".join(f"{s.get('guideline') if not isinstance(s.get('guideline'), list) else ', '.join(s['guideline'])}"
                      f" ({s.get('doc', '')} § {s.get('section', '')})" if s.get("guideline") else str(s.get("url"))
                      for s in src)
    return cites, [s["quote"] for s in src if s.get("quote")]


def _rejected_md(plan: dict[str, Any], lang: str) -> list[str]:
    """Rejections grouped by option (GPU model), with the reason of the configuration that came
    closest to being chosen; the full lists are collapsed so ~500 rejections stay readable."""
    from servewise.engine.app.explain import rejections_by_gpu

    groups = rejections_by_gpu(plan)
    def col(*names: str) -> str:
        return "| " + " | ".join(msg(f"render.md.col.{n}", lang) for n in names) + " |"

    o = [msg("render.md.rejected_intro", lang, n=len(plan["rejected"]), options=len(groups)), "",
         col("option", "rejected", "rule", "closest"), "|---|---|---|---|"]
    for option, items in groups.items():
        best = items[0]
        because = _md_escape(rejection_text(best, lang))
        o.append(f"| {_md_escape(option)} | {len(items)} | `{best['rule']}` | {because} |")
    o += ["", f"<details><summary>{msg('render.md.all_rejected', lang)}</summary>", ""]
    o += [col("option", "rule", "because"), "|---|---|---|"]
    for items in groups.values():
        for r in items:
            because = _md_escape(rejection_text(r, lang))
            o.append(f"| {_md_escape(r['option'])} | `{r['rule']}` | {because} |")
    o += ["", "</details>"]
    return o


# the load table's columns by performance.load_curve_kind: (column, the row's value as text)
LOAD_COLUMNS: dict[str, tuple[tuple[str, Callable[[dict[str, Any]], str]], ...]] = {
    "online": (("concurrency", lambda r: str(r["concurrency"])), ("rate", lambda r: f"{r['requests_per_s']:,.2f}"),
               ("ttft", lambda r: f"{r['ttft_ms']:,.1f}"),
               ("ttft_p99", lambda r: "—" if r.get("ttft_p99_ms") is None else f"{r['ttft_p99_ms']:,.1f}"),
               ("tpot", lambda r: f"{r['tpot_ms']:,.2f}"), ("tpot_hi", lambda r: f"{r['tpot_ms_hi']:,.2f}")),
    "offline": (("concurrency", lambda r: str(r["concurrency"])),
                ("tokens", lambda r: f"{r['output_tokens_per_s']:,.0f}"),
                ("rate", lambda r: f"{r['requests_per_s']:,.2f}"), ("ttft", lambda r: f"{r['ttft_ms']:,.1f}"),
                ("tpot", lambda r: f"{r['tpot_ms']:,.2f}"), ("tpot_hi", lambda r: f"{r['tpot_ms_hi']:,.2f}")),
    "encoder": (("batch", lambda r: str(r["batch_requests"])), ("rate", lambda r: f"{r['requests_per_s']:,.2f}"),
                ("latency", lambda r: f"{r['latency_ms']:,.1f}"),
                ("latency_worst", lambda r: f"{r['latency_p99_ms']:,.1f}")),
    "asr-streaming": (("streams_gpu", lambda r: str(r["streams"])),
                      ("partial", lambda r: f"{r['latency_ms']:,.0f}"), ("busy", lambda r: f"{r['gpu_busy_pct']:.1f}")),
    "video": (("streams_box", lambda r: str(r["streams"])), ("frames", lambda r: f"{r['frames_per_s']:,.0f}"),
              ("compute", lambda r: f"{r['compute_load_pct']:.1f}"),
              ("decode", lambda r: "—" if r.get("decode_load_pct") is None else f"{r['decode_load_pct']:.1f}")),
}


def load_kind(plan: dict[str, Any]) -> str:
    """The kind of the plan's load curve (``performance.load_curve_kind``; an online decoder's has none)."""
    kind = (plan.get("performance") or {}).get("load_curve_kind") or "online"
    return kind if kind in LOAD_COLUMNS else "online"


def load_rows(plan: dict[str, Any], lang: str = "en") -> tuple[list[str], list[list[str]]]:
    """The load table of one replica (``performance.load_curve``, columns by its kind): its header
    and one row per load, the planned point (share 1.0) marked; no rows without a curve."""
    kind = load_kind(plan)
    suffix = "" if kind == "online" else "." + kind.replace("-", "_")
    cols = LOAD_COLUMNS[kind]
    head = [msg(f"render.load{suffix}.col.share", lang)] + [msg(f"render.load.col.{c}", lang) for c, _ in cols]
    rows = []
    for r in (plan.get("performance") or {}).get("load_curve") or []:
        share = f"{100 * r['share']:g} %" + (" ◀" if r["share"] == 1.0 else "")
        rows.append([share] + [value(r) for _, value in cols])
    return head, rows


def load_title(plan: dict[str, Any], lang: str = "en") -> str:
    """The load table's title, by the curve's kind."""
    kind = load_kind(plan)
    return msg("render.load.title" if kind == "online" else f"render.load.{kind.replace('-', '_')}.title", lang)


def performance_rows(plan: dict[str, Any]) -> list[tuple[str, Any]]:
    """The performance table's (key, value) pairs: the load curve has its own table and chart; a
    feasible plan leaves out what does not apply to its workload's class (an encoder's TTFT, TPOT
    and output tokens/s are None: it generates no tokens), an infeasible one shows them as not
    computed."""
    return [(k, v) for k, v in plan["performance"].items()
            if not k.startswith("load_curve") and not (v is None and plan.get("feasible"))]


def to_markdown(plan: dict[str, Any], lang: str = "en", charts_dir: str | None = None) -> str:
    """A report for GitHub-flavoured Markdown: tables, a mermaid graph, collapsed long lists;
    with ``charts_dir`` (where ``plan --plot`` wrote the SVG charts) the charts as images."""
    w = plan["workload"]
    o: list[str] = []
    def m(code: str, **args: Any) -> str:
        return msg(f"render.md.{code}", lang, **args)

    def col(*names: str) -> str:
        return "| " + " | ".join(m(f"col.{n}") for n in names) + " |"

    sep = colon(lang)
    o.append(f"# {m('title', model=_md_escape(plan_title(w)))}")
    o.append("")
    o.append(f"- servewise {plan['servewise_version']}, {m('knowledge')} `{plan['knowledge_hash']}`")
    o.append(f"- {m('feasible')}{sep}**{_yes(plan['feasible'], lang)}**")
    o.append("")
    from .brief import decision

    d = decision(plan, lang)
    o += [f"## {msg('render.decision', lang)}", ""]
    o += [f"- **{label}**{sep if label else ''}{_md_escape(text)}" for label, text in d["rows"]]
    if d["warnings"]:
        o += ["", f"**{msg('render.decision.warnings', lang)}**", ""]
        o += [f"- **{severity(w['severity'], lang)}** {_md_escape(warning_text(w, lang))} (`{w['rule']}`)"
              for w in d["warnings"]]
    if d["alternatives"]:
        o += ["", f"**{msg('render.decision.alternatives', lang, total=len(plan['rejected']))}**", ""]
        o += [f"- {_md_escape(option)}: {_md_escape(text)}" for option, text in d["alternatives"]]
    o.append("")
    from .charts import charts

    drawn = charts(plan, lang)

    def chart_section() -> list[str]:
        if not drawn:
            return []
        if charts_dir:
            return [f"## {t('charts', lang)}", ""] + [f"![{name[:-4]}]({charts_dir.rstrip('/')}/{name})"
                                                       for name in drawn] + [""]
        return [f"## {t('charts', lang)}", "", m("charts_elsewhere"), ""]

    if not plan["feasible"]:  # nothing configured: how near the candidates came is the content
        o += chart_section()
    o.append(f"## {t('configuration', lang)}")
    o.append("")
    o.append(col("component", "choice", "why"))
    o.append("|---|---|---|")
    for name, comp in plan["components"].items():
        reason = _reason_for(plan, name, lang) or ""
        label = pick(COMPONENT_NAMES.get(name, {"en": name}), lang)
        o.append(f"| {label} | {_md_escape(component_line(name, comp, lang))} | {_md_escape(reason)} |")
    o.append("")
    o.append(f"## {t('performance', lang)}")
    o.append("")
    o += [f"- {_md_escape(line)}" for line in latency_lines(plan, lang)]
    o.append("")
    o += [col("metric", "value"), "|---|---|"]
    o += [f"| {field_label(k, lang)} | {_md_escape(field_value(v, lang))} |" for k, v in performance_rows(plan)]
    o.append("")
    head, rows = load_rows(plan, lang)
    if rows:
        o += [f"**{load_title(plan, lang)}**", "", "| " + " | ".join(head) + " |",
              "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows] + [""]
    o.append(f"## {t('cost', lang)}")
    o.append("")
    o += [col("item", "value"), "|---|---|"] + [f"| {field_label(k, lang)} | {_md_escape(field_value(v, lang))} |"
                                                for k, v in plan["cost"].items()]
    o.append("")
    if plan["feasible"]:
        o += chart_section()
    if plan.get("bom"):
        o.append(f"## {t('bom', lang)}")
        o.append("")
        o += [col("part", "category", "qty", "unit_price", "line", "source"), "|---|---|---|---|---|---|"]
        o += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in bom_rows(plan, lang)]
        o.append("")
    o.append(f"## {t('warnings', lang)}")
    o.append("")
    for warn in by_severity(plan["warnings"]):
        message = _md_escape(warning_text(warn, lang))
        o.append(f"- **{severity(warn['severity'], lang)}** {message} (`{warn['rule']}`)")
    if not plan["warnings"]:
        o.append(t("not_applicable", lang))
    o.append("")
    o.append(f"## {t('inputs', lang)}")
    o.append("")
    o.append(col("field", "value") + " |")
    o.append("|---|---|---|")
    for field, value, mark in input_rows(plan):
        o.append(f"| `{field}` | {_md_escape(value)} | {m('default') if mark == 'default' else m('given')} |")
    o.append("")
    o.append(f"## {t('rejected', lang)}")
    o.append("")
    o += _rejected_md(plan, lang)
    o.append("")
    o.append(f"## {t('chain', lang)}")
    o.append("")
    chain = component_trace(plan)
    if len(chain) < len(plan["trace"]):
        o.append(m("graph_component", component=COMPONENT_NAMES[GRAPH_COMPONENT].get(lang, GRAPH_COMPONENT),
                   n=len(chain), total=len(plan["trace"])))
        o.append("")
    o.append("```mermaid")
    o.append(mermaid(plan, chain))
    o.append("```")
    o.append("")
    if len(chain) < len(plan["trace"]):
        o += [f"<details><summary>{m('graph_all', total=len(plan['trace']))}</summary>", "", "```mermaid",
              mermaid(plan), "```", "", "</details>", ""]
    for step in plan["trace"]:
        cites, quotes = _sources_md(step["source"])
        stage = msg(f"render.stage.{step['stage']}", lang) if f"render.stage.{step['stage']}" in _catalog() \
            else step["stage"]
        o.append(f"### {step['step']}. `{step['rule']}` ({stage})")
        o.append("")
        o.append(_md_escape(value_text(pick(step.get("because_i18n") or step["because"], lang), lang, True)))
        o.append("")
        conclusions = shown_conclusions(step, lang)
        for c in conclusions[:12]:
            formula = f" — `{c['formula']}`" if c.get("formula") else ""
            o.append(f"- {c['fact']} = {_md_escape(chain_value(c['fact'], c['value'], plan, lang))}{formula}")
        if len(conclusions) > 12:
            o.append(m("more_conclusions", n=len(conclusions) - 12))
        if step.get("corrects"):
            o.append(m("correction", text=pick(step.get("corrects_i18n") or step["corrects"], lang)))
        o.append(m("source", text=cites))
        if quotes:
            o.append(f"  > {quotes[0]}")
        premises = [f"`{p['fact']}` = {_md_escape(chain_value(p['fact'], p.get('value'), plan, lang))} "
                    + (m("step", n=p["step"]) if "step" in p else
                       f"({(p.get('origin') or {}).get('kind', '')}: `{(p.get('origin') or {}).get('ref', '')}`)")
                    for p in step["premises"]]
        if premises:
            o.append(m("premises", text="; ".join(premises)))
        o.append("")
    o.append(f"---\nservewise {plan['servewise_version']} · {m('knowledge')} `{plan['knowledge_hash']}`")
    return "\n".join(o) + "\n"
