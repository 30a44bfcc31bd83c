"""Several models hosted together (`models:` in the workload).

Each model is planned as its own pool of GPUs by the same rules (the sources put different
models on separate GPUs or MIG instances, G-ISO-010), then the pools are combined into one plan:
counts add up, equal choices are kept, differing choices are listed per model, and one
composition step per component links the combined value to the pool steps that decided it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from servewise.engine.app.inputs import input_defs
from servewise.engine.app.plan_contract import COMPONENT_FIELDS, PlanResult, cite
from servewise.engine.app.plan_contract import closure as _closure
from servewise.engine.app.pools_board import Board, hosts_of, moves_of, summary
from servewise.engine.app.pools_pack import PackedOption, packed_option, separate_rack, writeoff_months
from servewise.engine.common.forkmap import fork_map
from servewise.engine.common.messages import LANGS, both, message
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext, reset_context, use_context
from servewise.engine.runtime.compiler import WORK
from servewise.engine.runtime.memory import Memory

SUMMED = {("gpu", "count"), ("gpu", "replicas"), ("servers", "count"), ("storage", "capacity_tb")}
STEP_OFFSET = 100_000
COMBINE_SOURCE = {"guideline": ["G-ISO-010", "G-ISO-002", "G-MEM-007"]}
PACK_SOURCE = {"guideline": ["G-ISO-010", "G-ISO-003", "G-ISO-006", "G-STO-008", "G-MEM-020"]}
PACKED_COMPONENTS = ("servers", "cpu", "memory", "storage", "power", "cooling", "rack")


def sub_workload(workload: dict[str, Any], entry: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The single-model workload of one pool (its own model, peak QPS and request lengths)."""
    from servewise.engine.app.inputs import POOL_TRAFFIC

    sub = copy.deepcopy(workload)
    sub["model"] = entry["model"]
    sub["models"] = None
    extra: list[str] = []
    if entry.get("peak_qps") is not None:
        sub["traffic"]["peak_qps"] = entry["peak_qps"]
    for key in POOL_TRAFFIC:
        if entry.get(key) is not None:
            sub["traffic"][key] = entry[key]
    return sub, extra


def pool_given(entry: dict[str, Any]) -> set[str]:
    """The workload fields a ``models:`` entry gives for its pool (not defaulted there)."""
    from servewise.engine.app.inputs import POOL_TRAFFIC

    keys = ["peak_qps", *POOL_TRAFFIC]
    return {f"traffic.{k}" for k in keys if entry.get(k) is not None}


def pack_steps(mem: Memory) -> list[dict[str, Any]]:
    """The steps of a pool's run that concluded a ``pack.*`` fact and the steps behind them (all a
    combined plan shows of a pool's trace besides its plan), written out."""
    roots = [st["step"] for st in mem.steps if any(c["fact"].startswith("pack.") for c in st["conclusions"])]
    return _closure(mem, roots)


def portable(result: PlanResult) -> PlanResult:
    """What combining needs of a pool planned in another process (engine/common/forkmap.py): its
    plan, its values and where they came from, its firings and its pack steps (a whole working
    memory holds engine objects that do not pickle and is ~10x larger)."""
    mem = result.memory
    slim = Memory(values=mem.values, value_step=mem.value_step, fired=mem.fired, steps=pack_steps(mem))
    return PlanResult(result.plan, slim)


def _label(entry: dict[str, Any]) -> str:
    model = entry["model"] if isinstance(entry["model"], str) else entry["model"]["name"]
    return f"{model} ({entry['tenant']})" if entry.get("tenant") else model


def _combine_field(comp: str, field: str, values: list[tuple[str, Any]]) -> Any:
    present = [v for _, v in values]
    if (comp, field) in SUMMED and all(isinstance(v, (int, float)) for v in present):
        total = sum(present)
        return round(total, 3) if isinstance(total, float) else total
    if all(v == present[0] for v in present):
        return present[0]
    if comp == "gpu" and field in ("per_server", "tensor_parallel") and all(isinstance(v, int) for v in present):
        return max(present)
    if any(isinstance(v, dict) for v in present):  # settings per pool: a mapping, not its repr
        return {label: value for label, value in values}
    # the pools that have a value (a PCIe link speed only where tensor parallel traffic crosses it)
    return "; ".join(f"{label}: {value}" for label, value in values if value is not None)


def _shift(step: dict[str, Any], offset: int, prefix: str) -> dict[str, Any]:
    """A pool's step as the combined plan numbers it (``offset`` added to its own number and to
    those of its premises' steps) and labels it: a new step and premises, the rest (conclusions,
    source, texts: written out already, and read only from here on) shared with the pool's."""
    out = dict(step)
    out["step"] = step["step"] + offset
    out["pool"] = prefix
    out["premises"] = [dict(p, step=p["step"] + offset) if "step" in p else dict(p) for p in step["premises"]]
    return out


def _both_by_lang(code: str, per_lang: dict[str, dict[str, Any]], **args: Any) -> dict[str, str]:
    """Like ``both`` where some arguments are themselves language-specific texts."""
    return {lang: message(code, lang, **args, **per_lang.get(lang, per_lang["en"])) for lang in LANGS}


def _monthly(capex: Any, opex: Any, months: int) -> float | None:
    if not isinstance(capex, (int, float)) or not isinstance(opex, (int, float)):
        return None
    return round(capex / months + opex)


def _tenants(option: PackedOption | None, labels: list[str], results: list[PlanResult]) -> list[dict[str, Any]]:
    """What separates each tenant (pool) from the others."""
    out = []
    for i, label in enumerate(labels):
        v = results[i].memory.values
        if option is None or not v.get("pack.may_share_server", True):
            texts = both("pools.tenant-own-servers")
            out.append({"pool": label, "isolation": texts["en"], "isolation_i18n": texts, "servers": []})
            continue
        where = [k for k, s in enumerate(option.servers) if label in s["pools"]]
        others_en = others_zh = ""
        for k in where:
            mates = [p for p in option.servers[k]["pools"] if p != label]
            if mates:
                t = both("pools.tenant-shares-with", server=k + 1, pools=", ".join(mates))
                others_en += t["en"]
                others_zh += t["zh"]
        unit = v.get("pack.unit")
        if unit in ("mig", "mps"):
            texts = _both_by_lang(f"pools.tenant-{unit}", {"en": {"others": others_en}, "zh": {"others": others_zh}},
                                  profile=v.get("pack.slice_profile"))
        else:
            texts = _both_by_lang("pools.tenant-gpu", {"en": {"others": others_en}, "zh": {"others": others_zh}},
                                  gpus=v.get("chosen.gpus"), gpu=v.get("chosen.gpu"))
        out.append({"pool": label, "isolation": texts["en"], "isolation_i18n": texts,
                    "unit": unit, "servers": [k + 1 for k in where]})
    return out


def choose_layout(workload: dict[str, Any], entries: list[dict[str, Any]], labels: list[str],
                  results: list[PlanResult], replan: Callable[[dict[str, Any], str], PlanResult] | None,
                  board: Board | None = None) -> tuple[list[PlanResult], PackedOption | None, dict[str, Any]]:
    """Separate servers per pool vs the pools packed into shared servers of one host GPU model (each
    GPU model some pool chose, the others re-planned on it): the cheapest per month (capex written off
    over the write-off months + opex) within what the rules allow each pool to share."""
    months = writeoff_months(workload)
    plans = [r.plan for r in results]
    sep_capex = sum(p["cost"].get("capex_cny") or 0 for p in plans)
    sep_opex = sum(p["cost"].get("monthly_opex_cny") or 0 for p in plans)
    sep_servers = sum(p["components"]["servers"].get("count") or 0 for p in plans)
    separate = {"option": "separate", "servers": sep_servers, "capex_cny": sep_capex,
                "monthly_opex_cny": sep_opex, "monthly_cost_cny": _monthly(sep_capex, sep_opex, months)}
    options: list[dict[str, Any]] = [separate]
    best: tuple[float, list[PlanResult], PackedOption] | None = None
    reasons: list[str] = []
    if replan is not None and len(results) > 1 and all(r.feasible for r in results) and workload["mode"] != "edge":
        pools = [summary(r) for r in results]
        token = use_context(RunContext(load_catalog()))
        try:
            hosts = hosts_of(pools)
            # every pool that chose another GPU, re-planned on each host: those the board holds
            # (engine/app/pools_board.py), the rest one item each, so the cores share them evenly
            # (a host's re-plans differ several-fold in cost)
            moves = moves_of(hosts, dict(enumerate(pools)))
            done = {m: r for m in moves if board is not None and (r := board.take(m)) is not None}
            missing = [m for m in moves if m not in done]
            done |= dict(zip(missing, fork_map(lambda move: replan(entries[move[1]], move[0]), missing,
                                               portable=portable, counters=(WORK,)), strict=True))
            replanned = []
            for gpu in hosts:  # each host's re-plans in pool order, up to the first that cannot run on it
                pairs: list[tuple[int, PlanResult]] = []
                for i in (i for g, i in moves if g == gpu):
                    pairs.append((i, done[(gpu, i)]))
                    if not pairs[-1][1].feasible:
                        break
                replanned.append(pairs)
            for gpu, pairs in zip(hosts, replanned, strict=True):
                if pairs and not pairs[-1][1].feasible:  # stop at the first misfit
                    lb = labels[pairs[-1][0]]
                    reasons.append(f"{lb} cannot run on {gpu}")
                    options.append({"option": f"packed on {gpu}", "host_gpu": gpu, "feasible": False,
                                    "reason": f"{lb}: no feasible configuration on {gpu}"})
                    continue
                moved = dict(pairs)
                used = [moved.get(i, r) for i, r in enumerate(results)]
                values = {lb: u.memory.values for lb, u in zip(labels, used, strict=True)}
                limit = max(float(v.get("facility.rack_limit_kw") or 0) for v in values.values()) or 6.0
                opt = packed_option(gpu, labels, values, workload, limit)
                if opt is None:
                    reasons.append(f"a pool on {gpu} spans servers or has no packing conclusion")
                    continue
                options.append({"option": f"packed on {gpu}", "host_gpu": gpu, "feasible": True,
                                "servers": len(opt.servers),
                                "capex_cny": opt.cost["capex_cny"], "monthly_opex_cny": opt.cost["monthly_opex_cny"],
                                "monthly_cost_cny": opt.cost["monthly_cost_cny"]})
                if best is None or opt.cost["monthly_cost_cny"] < best[0]:
                    best = (opt.cost["monthly_cost_cny"], used, opt)
        finally:
            reset_context(token)
    sep_monthly = separate["monthly_cost_cny"]
    packed = best is not None and sep_monthly is not None and best[0] < sep_monthly
    fmt = {"count": len(results), "sep_servers": sep_servers, "sep_monthly": sep_monthly or 0}
    if packed and best is not None:
        _, used, opt = best
        level = workload["constraints"].get("tenant_isolation") or "hard"
        labels_zh = next((d.labels.get("zh", {}) for d in input_defs() if d.key == "constraints.tenant_isolation"), {})
        texts = _both_by_lang("pools.packed-chosen", {"en": {"isolation": level},
                                                      "zh": {"isolation": labels_zh.get(level, level)}},
                              servers=len(opt.servers), gpu=opt.host_gpu, monthly=best[0],
                              capex=int(opt.cost["capex_cny"]), months=months, opex=opt.cost["monthly_opex_cny"], **fmt)
        tenants = _tenants(opt, labels, used)
    else:
        if best is not None:
            why = both("pools.packed-dearer", servers=len(best[2].servers), gpu=best[2].host_gpu, monthly=best[0])
        else:
            reason = "; ".join(reasons) or "one pool only, or a pool is infeasible"
            why = both("pools.no-packing", reason=reason)
        texts = _both_by_lang("pools.separate-chosen", {lang: {"why": why[lang]} for lang in why}, **fmt)
        used, opt = results, None
        tenants = _tenants(None, labels, results)
    packing = {"chosen": "packed" if opt else "separate", "host_gpu": opt.host_gpu if opt else None,
               "because": texts["en"], "because_i18n": texts, "options": options, "tenants": tenants,
               "tenant_isolation": workload["constraints"].get("tenant_isolation"),
               "servers": opt.servers if opt else []}
    return used, opt, packing


def _component_texts(option: PackedOption | None, components: dict[str, Any], plans: list[dict[str, Any]],
                     packing: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The explanation of each component sized once per physical server (or of the shared racks)."""
    rack = components["rack"]
    rack_args = {"count": components["servers"].get("count"), "limit": rack.get("rack_limit_kw"),
                 "per_rack": rack.get("servers_per_rack"), "racks": rack.get("racks"),
                 "kws": ", ".join(str(kw) for kw in rack.get("rack_kw") or []),
                 "draw": (option.components["power"]["server_draw_w"] if option else
                          max((p["components"]["power"].get("server_draw_w") or 0) for p in plans))}
    if option is None:
        return {"rack": both("pools.pack-rack", **rack_args)} if rack.get("racks") else {}
    sv = option.servers
    net = option.network
    network = {"network": _both_by_lang(
        "pools.pack-network", {lang: {"spines": message("pools.pack-network-spines", lang, spines=net["spines"])
                                      if net["spines"] else ""} for lang in LANGS},
        count=len(sv), nic=option.network_nic, links=net["links_per_server"], switches=net["switches"],
        groups=net["groups"], dac=net["dac"], aoc=net["aoc"])} if net else {}
    return network | {
        "servers": both("pools.pack-servers", count=len(sv), gpu=option.host_gpu,
                        gpus=", ".join(str(x["gpus_installed"]) for x in sv), sku=", ".join(x["sku"] for x in sv)),
        "cpu": both("pools.pack-cpu", detail="; ".join(components["cpu"]["per_server"])),
        "memory": both("pools.pack-memory", detail="; ".join(components["memory"]["per_server"])),
        "storage": both("pools.pack-storage", detail="; ".join(
            f"{x['models_tb']} TB models + {x['logs_tb']} TB logs = {x['store_tb']} TB on {x['drives']} × "
            f"{x['drive_tb']} TB {x['ssd']} ({x['raid']})" for x in sv)),
        "power": both("pools.pack-power", detail=", ".join(str(x["draw_w"]) for x in sv)),
        "cooling": both("pools.pack-cooling", type=components["cooling"]["type"]),
        "rack": both("pools.pack-rack", **rack_args),
    }


def _dedupe_warnings(warnings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A warning several pools share (same rule, same text) appears once, naming the pools."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for w in warnings:
        groups.setdefault((w["rule"], w["raw"]), []).append(w)
    out = []
    for ws in groups.values():
        w = dict(ws[0])
        pools = [x["pool"] for x in ws]
        raw, raw_i18n = w.pop("raw"), w.pop("raw_i18n")
        if len(pools) > 1 or pools[0] is not None:
            names = ", ".join(p for p in pools if p)  # message_i18n stays unprefixed (renderers add the pool)
            w.update(message=f"[{names}] {raw}", message_i18n=raw_i18n, pool=names, pools=[p for p in pools if p])
        out.append(w)
    return out


def _without_spares(option: PackedOption | None, labels: list[str], results: list[PlanResult],
                    workload: dict[str, Any]) -> dict[str, Any]:
    """What the defaulted availability target costs the whole plan (sla.defaulted-availability-cost
    per pool): every pool that added N+1 spares at its lean size instead (``sla.lean_*``), the
    others as chosen; re-packed on the host GPU when the pools share servers, else the pools' own
    lean capex added up. Empty when no pool added spares for a defaulted target."""
    vals = [r.memory.values for r in results]
    lean = [v.get("sla.lean_gpus") is not None and v.get("sla.lean_capex_cny") is not None for v in vals]
    if not any(lean):
        return {}
    if option is None:
        chosen = [v.get("chosen.capex_cny") for v in vals]
        if not all(isinstance(c, (int, float)) and c > 0 for c in chosen):
            return {}
        pairs = list(zip(vals, lean, strict=True))

        def lean_or(key: str, chosen_key: str) -> float:
            return sum(float(v[key] if ln else v.get(chosen_key) or 0) for v, ln in pairs)
        capex, base = lean_or("sla.lean_capex_cny", "chosen.capex_cny"), float(sum(chosen))
        gpus, servers = int(lean_or("sla.lean_gpus", "chosen.gpus")), int(lean_or("sla.lean_servers", "chosen.servers"))
    else:
        pools = {lb: (dict(v, **{"chosen.gpus": v["sla.lean_gpus"], "pack.spread_servers": False}) if ln else v)
                 for lb, v, ln in zip(labels, vals, lean, strict=True)}
        limit = max(float(v.get("facility.rack_limit_kw") or 0) for v in vals) or 6.0
        token = use_context(RunContext(load_catalog()))
        try:
            alt = packed_option(option.host_gpu, labels, pools, workload, limit)
        finally:
            reset_context(token)
        if alt is None:
            return {}
        capex, base = float(alt.cost["capex_cny"]), float(option.cost["capex_cny"])
        gpus, servers = sum(sv["gpus_installed"] for sv in alt.servers), len(alt.servers)
    return {"without_n1_gpus": gpus, "without_n1_servers": servers, "without_n1_capex_cny": round(capex, 0),
            "without_n1_change_pct": round(100 * (capex - base) / base, 0) if base else None}


WORST_HIGH = ("ttft_ms", "tpot_ms", "ttft_p99_ms", "ttft_ms_band_hi", "tpot_ms_band_hi", "ttft_p99_ms_band_hi",
              "ttft_checked_ms", "tpot_checked_ms")
WORST_LOW = ("ttft_margin_pct", "tpot_margin_pct")
SHARED = ("confidence", "ttft_target_statistic")


def combined_performance(perf: list[dict[str, Any]]) -> dict[str, Any]:
    """The pools' performance as one plan's: tokens and requests in flight added up, each latency,
    band and checked value the highest of the pools and each margin the lowest (the targets are
    the workload's, shared by every pool), so the plan meets its targets only if every pool does;
    a figure is left out where a pool lacks it."""
    out: dict[str, Any] = {}
    for key in (*WORST_HIGH, *WORST_LOW):
        vals = [r.get(key) for r in perf]
        if all(isinstance(v, (int, float)) for v in vals):
            out[key] = max(vals) if key in WORST_HIGH else min(vals)
    for key in SHARED:
        vals = {r.get(key) for r in perf}
        if len(vals) == 1 and None not in vals:
            out[key] = vals.pop()
    for key in ("output_tokens_per_s", "max_concurrency"):
        vals = [r.get(key) for r in perf]
        out[key] = round(sum(vals), 3) if all(isinstance(v, (int, float)) for v in vals) else None
    out.setdefault("ttft_ms", None)
    out.setdefault("tpot_ms", None)
    out["meets_sla"] = all(r.get("meets_sla") for r in perf)
    return dict(sorted(out.items()))


def pool_candidates(alone: list[dict[str, Any]], used: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A pool's ranked candidates as it was planned on its own (every GPU it could use: what the
    cost-vs-latency chart of a several-model plan shows), the one its final plan chose marked —
    found among them by id, else added (a pool re-planned on another host GPU)."""
    final = next((c for c in used if c.get("chosen")), None)
    fid = final["id"] if final else None
    out = [dict(c, chosen=c["id"] == fid) for c in alone]
    if final is not None and all(c["id"] != fid for c in alone):
        out.append(dict(final))
    return out


def combine(workload: dict[str, Any], defaults_used: list[str], entries: list[dict[str, Any]],
            results: list[PlanResult],
            replan: Callable[[dict[str, Any], str], PlanResult] | None = None,
            board: Board | None = None) -> dict[str, Any]:
    labels = [_label(e) for e in entries]
    alone = [r.plan.get("candidates") or [] for r in results]  # each pool's options on its own
    results, option, packing = choose_layout(workload, entries, labels, results, replan, board)
    plans = [r.plan for r in results]
    first = plans[0]
    trace: list[dict[str, Any]] = []
    for i, (label, plan) in enumerate(zip(labels, plans, strict=True)):
        trace += [_shift(s, (i + 1) * STEP_OFFSET, label) for s in plan["trace"]]
    components: dict[str, Any] = {}
    next_step = (len(plans) + 1) * STEP_OFFSET
    for comp in [*COMPONENT_FIELDS, *sorted({c for p in plans for c in p["components"]} - set(COMPONENT_FIELDS))]:
        fields = sorted({f for p in plans for f in p["components"].get(comp, {})})
        section = {}
        for f in fields:
            section[f] = _combine_field(comp, f, [(lb, p["components"].get(comp, {}).get(f))
                                                   for lb, p in zip(labels, plans, strict=True)])
        components[comp] = section
        if option is not None and comp in PACKED_COMPONENTS:
            continue  # sized once per physical server: the pools.pack steps below
        premises = []
        for i, plan in enumerate(plans):
            for s in plan["trace"]:
                if any(c["fact"].startswith(f"components.{comp}.") for c in s["conclusions"]):
                    premises.append({"fact": f"pools[{labels[i]}].components.{comp}",
                                     "value": plan["components"].get(comp), "step": s["step"] + (i + 1) * STEP_OFFSET})
        if not premises:
            continue
        texts = both("pools.combine", count=len(plans), component=comp)
        trace.append({
            "step": next_step, "rule": "pools.combine", "stage": "bom", "source": cite(COMBINE_SOURCE),
            "item": None, "premises": premises,
            "conclusions": [{"fact": f"components.{comp}.{f}", "value": v} for f, v in section.items()],
            "because": texts["en"], "because_i18n": texts,
        })
        next_step += 1
    perf = [p["performance"] for p in plans]
    cost = [p["cost"] for p in plans]

    def total(key: str, rows: list[dict[str, Any]]) -> Any:
        vals = [r.get(key) for r in rows]
        return round(sum(vals), 3) if all(isinstance(v, (int, float)) for v in vals) else None

    tokens = [r.get("output_tokens_per_s") or 0 for r in perf]
    per_m = [c.get("cny_per_million_tokens") for c in cost]
    weighted = (round(sum(t * c for t, c in zip(tokens, per_m, strict=True)) / sum(tokens), 3)
                if sum(tokens) > 0 and all(isinstance(c, (int, float)) for c in per_m) else None)
    monthly = total("monthly_cost_cny", cost)
    if option is not None and weighted is not None and monthly:
        # the pools' tokens at the shared servers' monthly cost: the ratio of cost.per-million-tokens
        # (monthly cost ÷ tokens a month) with the packed monthly cost for the pools' own
        weighted = round(weighted * option.cost["monthly_cost_cny"] / monthly, 3)
    decisions = {c.get("buy_or_rent") for c in cost}
    warnings = _dedupe_warnings([dict(w, raw=w["message"], raw_i18n=w.get("message_i18n") or {"en": w["message"]},
                                      pool=labels[i]) for i, p in enumerate(plans) for w in p["warnings"]])
    if option is not None:
        for comp in PACKED_COMPONENTS:
            components[comp] = option.components[comp]
        components["gpu"] = dict(components["gpu"], count=sum(sv["gpus_installed"] for sv in option.servers),
                                 per_server=max(sv["gpus_installed"] for sv in option.servers))
    else:
        components["rack"] = dict(components["rack"], **separate_rack(plans))
    if "availability" in components:  # the pools' lean alternatives, as one plan's
        avail = {k: v for k, v in components["availability"].items() if not k.startswith("without_n1_")}
        components["availability"] = avail | _without_spares(option, labels, results, workload)
    components["isolation"] = dict(components.get("isolation") or {},
                                   per_tenant={t["pool"]: t["isolation"] for t in packing["tenants"]})
    premises = [{"fact": f"pools[{labels[i]}].pack.unit", "value": r.memory.values.get("pack.unit"),
                 "step": r.memory.value_step["pack.unit"] + (i + 1) * STEP_OFFSET}
                for i, r in enumerate(results) if "pack.unit" in r.memory.value_step]
    kept = {s["step"] for s in trace}
    for i, r in enumerate(results):  # the pack.* steps and what they read join the trace
        for st in pack_steps(r.memory):
            shifted = st["step"] + (i + 1) * STEP_OFFSET
            if shifted not in kept:
                kept.add(shifted)
                step = dict(st)
                src = step["source"]
                step["source"] = [cite(x) for x in src] if isinstance(src, list) else cite(src)
                step["because_i18n"] = step["because"]
                step["because"] = step["because"]["en"]
                trace.append(_shift(step, (i + 1) * STEP_OFFSET, labels[i]))
    decision = next_step
    trace.append({"step": decision, "rule": "pools.pack", "stage": "bom", "source": cite(PACK_SOURCE),
                  "item": None, "premises": premises,
                  "conclusions": [{"fact": "packing.chosen", "value": packing["chosen"]},
                                  {"fact": "packing.options", "value": packing["options"]}],
                  "because": packing["because"], "because_i18n": packing["because_i18n"]})
    for comp, texts in _component_texts(option, components, plans, packing).items():
        next_step += 1
        trace.append({"step": next_step, "rule": "pools.pack", "stage": "bom", "source": cite(PACK_SOURCE),
                      "item": None,
                      "premises": [{"fact": "packing.chosen", "value": packing["chosen"], "step": decision}],
                      "conclusions": [{"fact": f"components.{comp}.{f}", "value": v}
                                      for f, v in sorted(components[comp].items())],
                      "because": texts["en"], "because_i18n": texts})
    trace.sort(key=lambda st: st["step"])
    if option is not None and len(option.servers) == 1:
        texts = both("pools.packed-one-server", count=len(plans))
        warnings.append({"rule": "pools.pack", "severity": "warning", "pool": ", ".join(labels),
                         "pools": labels, "message": texts["en"], "message_i18n": texts})
    if len(decisions) > 1:
        texts = both("pools.buy-or-rent-differ")
        warnings.append({"rule": "pools.combine", "severity": "warning", "pool": None,
                         "message": texts["en"], "message_i18n": texts})
    return {
        "servewise_version": first["servewise_version"],
        "knowledge_hash": first["knowledge_hash"],
        "workload": workload,
        "defaults_used": sorted(defaults_used),
        "feasible": all(p["feasible"] for p in plans),
        "components": components,
        "performance": combined_performance(perf),
        "bom": (option.bom if option is not None else
                [dict(line, pool=labels[i]) for i, p in enumerate(plans) for line in p.get("bom") or []]),
        "packing": packing,
        "cost": option.cost | {"cny_per_million_tokens": weighted, "buy_or_rent": "buy"} if option is not None else {
            "capex_cny": total("capex_cny", cost),
            "capex_range_cny": ([total("lo", [{"lo": (c.get("capex_range_cny") or [None, None])[0]} for c in cost]),
                                 total("hi", [{"hi": (c.get("capex_range_cny") or [None, None])[1]} for c in cost])]
                                if all(c.get("capex_range_cny") for c in cost) else None),
            "monthly_opex_cny": total("monthly_opex_cny", cost),
            "cny_per_million_tokens": weighted,
            "buy_or_rent": decisions.pop() if len(decisions) == 1 else "buy",
        },
        "pools": [{"model": labels[i], "peak_qps": plans[i]["workload"]["traffic"]["peak_qps"],
                   "feasible": plans[i]["feasible"], "components": plans[i]["components"],
                   "performance": plans[i]["performance"], "cost": plans[i]["cost"],
                   "candidates": pool_candidates(alone[i], plans[i].get("candidates") or [])}
                  for i in range(len(plans))],
        "warnings": warnings,
        "rejected": [dict(r, pool=labels[i]) for i, p in enumerate(plans) for r in p["rejected"]],
        "asks": [a for p in plans for a in p.get("asks", [])],
        "trace": trace,
    }
