"""Several models hosted together (`models:` in the workload).

Each model is planned as its own pool of GPUs by the same rules (the sources put different
models on separate GPUs or MIG instances, G-ISO-010), then the pools are combined into one plan:
counts add up, equal choices are kept, differing choices are listed per model, and one
composition step per component links the combined value to the pool steps that decided it.
"""

from __future__ import annotations

import copy
from typing import Any

from .messages import both
from .plan_contract import COMPONENT_FIELDS, PlanResult, cite

SUMMED = {("gpu", "count"), ("gpu", "replicas"), ("servers", "count"), ("storage", "capacity_tb")}
STEP_OFFSET = 100_000
COMBINE_SOURCE = {"guideline": ["G-ISO-010", "G-ISO-002", "G-MEM-007"]}


def sub_workload(workload: dict[str, Any], entry: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The single-model workload of one pool (its own model and peak QPS)."""
    sub = copy.deepcopy(workload)
    sub["model"] = entry["model"]
    sub["models"] = None
    extra: list[str] = []
    if entry.get("peak_qps") is not None:
        sub["traffic"]["peak_qps"] = entry["peak_qps"]
    return sub, extra


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
    return "; ".join(f"{label}: {value}" for label, value in values)


def _shift(step: dict[str, Any], offset: int, prefix: str) -> dict[str, Any]:
    out = copy.deepcopy(step)
    out["step"] += offset
    out["pool"] = prefix
    for p in out["premises"]:
        if "step" in p:
            p["step"] += offset
    return out


def combine(workload: dict[str, Any], defaults_used: list[str], entries: list[dict[str, Any]],
            results: list[PlanResult]) -> dict[str, Any]:
    labels = [_label(e) for e in entries]
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

    def worst(key: str) -> Any:
        vals = [r.get(key) for r in perf]
        return max(vals) if all(isinstance(v, (int, float)) for v in vals) else None

    tokens = [r.get("output_tokens_per_s") or 0 for r in perf]
    per_m = [c.get("cny_per_million_tokens") for c in cost]
    weighted = (round(sum(t * c for t, c in zip(tokens, per_m, strict=True)) / sum(tokens), 3)
                if sum(tokens) > 0 and all(isinstance(c, (int, float)) for c in per_m) else None)
    decisions = {c.get("buy_or_rent") for c in cost}
    warnings = [dict(w, message=f"[{labels[i]}] {w['message']}", pool=labels[i])
                for i, p in enumerate(plans) for w in p["warnings"]]
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
        "performance": {
            "ttft_ms": worst("ttft_ms"), "tpot_ms": worst("tpot_ms"),
            "output_tokens_per_s": total("output_tokens_per_s", perf),
            "max_concurrency": total("max_concurrency", perf),
            "meets_sla": all(r.get("meets_sla") for r in perf),
        },
        "bom": [dict(line, pool=labels[i]) for i, p in enumerate(plans) for line in p.get("bom") or []],
        "cost": {
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
                   "performance": plans[i]["performance"], "cost": plans[i]["cost"]}
                  for i in range(len(plans))],
        "warnings": warnings,
        "rejected": [dict(r, pool=labels[i]) for i, p in enumerate(plans) for r in p["rejected"]],
        "asks": [a for p in plans for a in p.get("asks", [])],
        "trace": trace,
    }
