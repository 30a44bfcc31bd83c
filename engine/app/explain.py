"""The auditor's views over a plan document: explain (HOW), why-not and audit.

``explain`` and ``why_not`` are pure functions of a plan dict (CONTRACTS §4): they walk the trace
steps and their premises' ``step`` links, and the ``rejected`` list. ``audit`` re-runs the plan's
recorded workload with a rule base and compares. Nothing here prints; the CLI renders the results.
"""

from __future__ import annotations

import difflib
import heapq
import json
import math
from collections.abc import Iterable
from typing import Any

from servewise.engine.domain.catalog import normalise_name
from servewise.engine.domain.perf.precision import PRECISIONS
from servewise.engine.lang.rulebase import STAGES, RuleBase

TOP_SECTIONS = ("performance", "cost")
# Values a component field can take besides the chosen one (CONTRACTS §4 enumerations), so that
# `why-not air` or `why-not rent` can point at the step that decided the field.
ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "components.network.inter_node": ("none", "ethernet-10g", "ethernet-25g", "ethernet-100g",
                                      "roce-v2-400g", "infiniband-ndr"),
    "components.interconnect.intra_node": ("nvlink", "pcie", "xgmi", "hccs", "none"),
    "components.cooling.type": ("air", "hybrid", "liquid"),
    "cost.buy_or_rent": ("buy", "rent"),
    "components.software.framework": ("vLLM", "TensorRT-LLM", "SGLang", "MindIE", "LMDeploy"),
}


class ExplainError(LookupError):
    """An unknown component or option; ``suggestions`` holds close names."""

    def __init__(self, message: str, suggestions: Iterable[str] = ()):
        self.suggestions = list(suggestions)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(message + hint)

    def __str__(self) -> str:
        return self.args[0]


def _close(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    by_key: dict[str, str] = {}
    for x in names:
        by_key.setdefault(normalise_name(x), x)
    hits = difflib.get_close_matches(normalise_name(name), list(by_key), n=n, cutoff=0.5)
    hits += [k for k in by_key if normalise_name(name) and normalise_name(name) in k and k not in hits]
    return [by_key[h] for h in hits[:n]]


def rule_index(rulebase: RuleBase) -> dict[str, dict[str, Any]]:
    """Title, stage and cited sources of every rule (for rejections, which carry only the id)."""
    from servewise.engine.app.plan import cite

    out: dict[str, dict[str, Any]] = {}
    for r in rulebase.rules:
        info = {"title": r.title, "stage": r.stage, "source": [cite(s) for s in r.sources]}
        for rid in (r.id, *r.aliases):
            out[rid] = info
    return out


# ---------------------------------------------------------------------------------------- explain

def targets(plan: dict[str, Any]) -> list[str]:
    """Everything `explain` accepts: components, their fields, performance and cost, and the rule id
    of every warning the plan carries."""
    out: list[str] = []
    for comp, fields in plan["components"].items():
        out.append(comp)
        out += [f"{comp}.{f}" for f in fields]
    for section in TOP_SECTIONS:
        out.append(section)
        out += [f"{section}.{f}" for f in plan.get(section, {})]
    out += [w["rule"] for w in plan.get("warnings") or [] if w.get("rule")]
    return out


def _warning_target(plan: dict[str, Any], target: str) -> tuple[str, dict[str, Any], list[int]] | None:
    """A warning named by its rule id (``market.restricted-option``, also ``warning:<id>``): its
    name, the message as its one fact, and the trace steps of that rule (the chain starts there)."""
    name = target.strip()
    name = name[len("warning:"):] if name.lower().startswith("warning:") else name
    found = next((w for w in plan.get("warnings") or [] if str(w.get("rule", "")).lower() == name.lower()), None)
    if found is None:
        return None
    steps = [s["step"] for s in plan["trace"] if s["rule"] == found["rule"]]
    return f"warning {found['rule']}", {"warning": found["message"]}, sorted(steps, reverse=True)[:1]


def _target_facts(plan: dict[str, Any], target: str) -> tuple[str, dict[str, Any]]:
    """The canonical target name and the facts (dotted path → value) it stands for."""
    name = target.strip()
    if name.startswith("components."):
        name = name[len("components."):]
    head, _, field = name.partition(".")
    lookup = {k.lower(): k for k in list(plan["components"]) + list(TOP_SECTIONS)}
    if head.lower() not in lookup:
        raise ExplainError(f"unknown component '{target}' (components: "
                           f"{', '.join(list(plan['components']) + list(TOP_SECTIONS))})",
                           _close(target, targets(plan)))
    head = lookup[head.lower()]
    section = plan["components"][head] if head in plan["components"] else plan.get(head, {})
    prefix = f"components.{head}" if head in plan["components"] else head
    if field:
        if field not in section:
            raise ExplainError(f"unknown field '{target}' (fields of {head}: {', '.join(section) or '—'})",
                               _close(target, targets(plan)))
        return f"{head}.{field}", {f"{prefix}.{field}": section[field]}
    return head, {f"{prefix}.{f}": v for f, v in section.items()}


def _steps_setting(plan: dict[str, Any], facts: dict[str, Any]) -> list[int]:
    """The last step that concluded each fact (a later `choose` overrides an earlier one)."""
    last: dict[str, int] = {}
    for step in plan["trace"]:
        for c in step["conclusions"]:
            if c["fact"] in facts:
                last[c["fact"]] = step["step"]
    return sorted(set(last.values()), reverse=True)


def _used_conclusions(step: dict[str, Any], wanted: set[str]) -> list[dict[str, Any]]:
    """The conclusions of a step the chain uses (all of them when no specific one matches)."""
    used = [c for c in step["conclusions"]
            if c["fact"] in wanted or any(w.startswith(c["fact"] + ".") for w in wanted)]
    return used or step["conclusions"][:12]


def catalog_refs(step: dict[str, Any], conclusions: list[dict[str, Any]] | None = None) -> list[str]:
    """Catalog entries a step read for ``conclusions`` (default: all): premise origins,
    catalog(...) calls, priced or estimated GPUs, calibration data."""
    refs: list[str] = []
    for p in step["premises"]:
        origin = p.get("origin") or {}
        if origin.get("kind") == "catalog":
            refs.append(origin["ref"])
    for c in step["conclusions"] if conclusions is None else conclusions:
        for d in c.get("details") or []:  # recorded by the functions that read them (engine/domain/provenance.py)
            refs += [f"catalog:{ref}" for ref in d.get("catalog") or [] if isinstance(ref, str)]
            refs += [f"catalog:prices/{x['price']}" for x in d.get("from") or [] if "price" in x]
            cal = d.get("calibration") or {}
            if cal.get("source"):
                refs.append(f"calibration:{cal.get('gpu_class', '?')}/{cal.get('backend', '?')} ({cal['source']})")
        if isinstance(c.get("value"), dict) and c["fact"].endswith("]") and c["value"].get("gpu"):
            refs.append(f"catalog:gpus/{c['value']['gpu']}")  # a proposed candidate's catalog attributes
    return list(dict.fromkeys(refs))


def explain(plan: dict[str, Any], target: str, rules: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The chain from a component (or field), or from a warning named by its rule id, back to inputs
    and catalog entries.

    Steps are listed from the component back towards the inputs (descending step number); each
    carries only the conclusions the chain uses. ``rules`` (from :func:`rule_index`) adds titles.
    """
    warning = _warning_target(plan, target)
    if warning:
        name, facts, roots = warning
    else:
        name, facts = _target_facts(plan, target)
        roots = _steps_setting(plan, facts)
    by_no = {s["step"]: s for s in plan["trace"]}
    wanted: dict[int, set[str]] = {n: set(facts) for n in roots}
    order: list[int] = []
    visited: set[int] = set()
    todo = [-n for n in roots]  # a heap of negated step numbers: the highest step first, so that
    heapq.heapify(todo)         # every dependant is visited before its premises
    while todo:
        n = -heapq.heappop(todo)
        if n in visited or n not in by_no:
            continue
        visited.add(n)
        order.append(n)
        for p in by_no[n]["premises"]:
            if "step" in p:
                wanted.setdefault(p["step"], set()).add(p["fact"])
                if p["step"] not in visited:
                    heapq.heappush(todo, -p["step"])
    steps: list[dict[str, Any]] = []
    inputs: dict[str, dict[str, Any]] = {}
    catalog: list[str] = []
    for n in order:
        s = by_no[n]
        info = (rules or {}).get(s["rule"], {})
        used = _used_conclusions(s, wanted.get(n, set()))
        steps.append({
            "step": n, "rule": s["rule"], "title": info.get("title"), "stage": s.get("stage"),
            "item": s.get("item"), "source": s["source"], "corrects": s.get("corrects"),
            "corrects_i18n": s.get("corrects_i18n"),
            "because": s["because"], "because_i18n": s.get("because_i18n") or {"en": s["because"]},
            "conclusions": used,
            "conclusions_total": len(s["conclusions"]),
            "premises": s["premises"],
            "catalog": catalog_refs(s, used),
        })
        for p in s["premises"]:
            origin = p.get("origin")
            if origin and origin.get("kind") in ("input", "default"):
                inputs.setdefault(p["fact"], {"fact": p["fact"], "value": p.get("value"),
                                              "given": origin["kind"] == "input", "ref": origin["ref"]})
        catalog += steps[-1]["catalog"]
    return {
        "target": name, "facts": facts, "knowledge_hash": plan["knowledge_hash"],
        "steps": steps, "inputs": sorted(inputs.values(), key=lambda x: x["fact"]),
        "catalog": list(dict.fromkeys(catalog)),
        "undecided": not roots,
    }


# ---------------------------------------------------------------------------------------- why-not

def _stage_rank(rule: str, rules: dict[str, dict[str, Any]] | None, trace_stage: dict[str, str],
                stage: str | None = None) -> int:
    stage = stage or (rules or {}).get(rule, {}).get("stage") or trace_stage.get(rule)
    return STAGES.index(stage) if stage in STAGES else len(STAGES)


def rejection_rank(r: dict[str, Any], rules: dict[str, dict[str, Any]] | None,
                   trace_stage: dict[str, str]) -> tuple:
    """Sort key: the rejection that came closest to being chosen first (ranked at selection by
    score, then the latest stage that rejected it, then, where the rejection records them, one the
    buyer could order before one they could not (``figures.orderable``, as selection ranks) and how
    far it missed the targets: ``figures.miss``, the largest latency / target ratio of one
    request)."""
    score = (r.get("values") or {}).get("score") if r.get("ranked") else None
    numbers = tuple(float(x) if isinstance(x, (int, float)) else 0.0 for x in (score or []))
    figures = r.get("figures") or {}
    miss = figures.get("miss")
    far = float(miss) if isinstance(miss, (int, float)) else (math.inf if "miss" in figures else 0.0)
    return (0 if r.get("ranked") else 1, numbers, -_stage_rank(r["rule"], rules, trace_stage, r.get("stage")),
            1 if figures.get("orderable") is False else 0, far, r["option"])


def _proposal_rules(plan: dict[str, Any]) -> set[str]:
    """Rules that proposed items (their rejections mean: never a candidate)."""
    return {s["rule"] for s in plan["trace"]
            if any(c["fact"].endswith("]") and "[" in c["fact"] for c in s["conclusions"])}


def chosen_candidate(plan: dict[str, Any]) -> str | None:
    for s in plan["trace"]:
        for c in s["conclusions"]:
            if c["fact"] == "chosen.id":
                return c["value"]
    return None


def group_rejections(plan: dict[str, Any], entries: list[dict[str, Any]],
                     rules: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Rejections grouped by rule, best-ranked group (closest to being chosen) first."""
    trace_stage = {s["rule"]: s.get("stage") for s in plan["trace"]}
    proposal = _proposal_rules(plan)
    groups: dict[str, dict[str, Any]] = {}
    for r in sorted(entries, key=lambda r: rejection_rank(r, rules, trace_stage)):
        g = groups.setdefault(r["rule"], {
            "rule": r["rule"], "title": (rules or {}).get(r["rule"], {}).get("title"),
            "source": (rules or {}).get(r["rule"], {}).get("source"),
            "stage": (rules or {}).get(r["rule"], {}).get("stage") or trace_stage.get(r["rule"]),
            "at_proposal": r["rule"] in proposal, "ranked": bool(r.get("ranked")), "entries": []})
        g["entries"].append(r)
    return list(groups.values())


def rejections_by_gpu(plan: dict[str, Any], rules: dict[str, dict[str, Any]] | None = None
                      ) -> dict[str, list[dict[str, Any]]]:
    """Rejected candidates by their first id part (the GPU model), best-ranked first in each list;
    options that are not candidates (e.g. ``infiniband-ndr``) keep their own name."""
    trace_stage = {s["rule"]: s.get("stage") for s in plan["trace"]}
    out: dict[str, list[dict[str, Any]]] = {}
    for r in plan["rejected"]:
        out.setdefault(r["option"].split(" | ")[0], []).append(r)
    ranked = {k: sorted(v, key=lambda r: rejection_rank(r, rules, trace_stage)) for k, v in out.items()}
    return dict(sorted(ranked.items(), key=lambda kv: rejection_rank(kv[1][0], rules, trace_stage)))


def _value_fields(plan: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for comp, fields in plan["components"].items():
        for f, v in fields.items():
            out[f"components.{comp}.{f}"] = v
    for section in TOP_SECTIONS:
        for f, v in plan.get(section, {}).items():
            out[f"{section}.{f}"] = v
    return out


def _deciding_step(plan: dict[str, Any], fact: str) -> dict[str, Any] | None:
    step = None
    for s in plan["trace"]:
        if any(c["fact"] == fact for c in s["conclusions"]):
            step = s
    if step is None:
        return None
    return {"step": step["step"], "rule": step["rule"], "stage": step.get("stage"),
            "source": step["source"], "because": step["because"],
            "because_i18n": step.get("because_i18n") or {"en": step["because"]},
            "conclusions": step["conclusions"]}


def known_options(plan: dict[str, Any], catalog_gpus: Iterable[str] = ()) -> list[str]:
    names = [r["option"] for r in plan["rejected"]] + [r["option"].split(" | ")[0] for r in plan["rejected"]]
    names += list(catalog_gpus) + [v for vs in ALTERNATIVES.values() for v in vs] + list(PRECISIONS)
    names += list(dict.fromkeys(LAYOUT_NAMES.values()))  # replicas, attention-dp, disaggregated, speculative
    names += [o["option"] for o in (plan.get("packing") or {}).get("options") or []]  # packed on A30, separate
    return list(dict.fromkeys(names))


# Serving layouts an auditor may ask about by name (normalised as catalog names are); a candidate's
# layout is read from its id: 'GPU | precision | tp8' replicas, 'GPU | precision | dp8 ep8' attention-DP.
LAYOUT_NAMES = {normalise_name(n): layout for layout, names in {
    "replicas": ("replicas", "tensor-parallel", "tensor parallel", "tp-only", "tp"),
    "attention-dp": ("attention-dp", "attention dp", "dp-attention", "dp attention", "attention data parallel",
                     "expert-parallel", "expert parallel", "ep", "wide-ep"),
    "disaggregated": ("disaggregated", "disaggregation", "pd", "prefill-decode", "prefill/decode"),
    "speculative": ("speculative", "speculative decoding", "mtp", "eagle", "eagle3"),
}.items() for n in names}
NOT_SEARCHED: dict[str, str] = {}  # layouts the planner does not yet propose, and why (issue #36)


def _candidate_layout(option: str) -> str | None:
    parts = option.split(" | ")
    if len(parts) < 3:
        return None
    return ("attention-dp" if parts[2].startswith("dp") else "disaggregated" if parts[2].startswith("pd")
            else "replicas" if parts[2].startswith("tp") else None)


def _why_not_layout(plan: dict[str, Any], layout: str, rules: dict[str, dict[str, Any]] | None
                    ) -> dict[str, Any]:
    """The candidates of one serving layout: chosen, rejected (best first) or never searched."""
    if layout == "speculative":  # not a layout of its own: every candidate is sized with or without it
        value = plan["components"].get("gpu", {}).get("speculative") or "off"
        return {"status": "chosen" if value != "off" else "not-chosen", "kind": "value",
                "resolved": layout, "field": "components.gpu.speculative", "value": value,
                "groups": [], "decided_by": _deciding_step(plan, "workload.spec_tokens")}
    if layout in NOT_SEARCHED:
        return {"status": "never-candidate", "kind": "layout", "resolved": layout, "groups": [],
                "reason": NOT_SEARCHED[layout]}
    chosen_layout = plan["components"].get("gpu", {}).get("layout") or "replicas"
    entries = [r for r in plan["rejected"] if r["kind"] == "candidate" and _candidate_layout(r["option"]) == layout]
    status = "chosen" if chosen_layout == layout else ("rejected" if entries else "never-candidate")
    gpu = plan["components"].get("gpu", {}).get("model")
    trace_stage = {s["rule"]: s.get("stage") for s in plan["trace"]}
    same_gpu = sorted((r for r in entries if r["option"].split(" | ")[0] == gpu),
                      key=lambda r: rejection_rank(r, rules, trace_stage))
    return {"status": status, "kind": "layout", "resolved": layout,
            # the layout on the plan's own GPU is the comparison an auditor asks for
            "closest": same_gpu[0] if same_gpu else None,
            "groups": group_rejections(plan, entries, rules),
            "decided_by": _deciding_step(plan, "workload.layouts") if not entries else (
                _deciding_step(plan, "chosen.id") if status == "chosen" else None)}


def chosen_layout(packing: dict[str, Any]) -> str:
    """The option name (``packing.options[].option``) of the layout a several-model plan chose."""
    return "separate" if packing.get("chosen") != "packed" else f"packed on {packing.get('host_gpu')}"


def why_not(plan: dict[str, Any], option: str, rules: dict[str, dict[str, Any]] | None = None,
            catalog_gpus: dict[str, str] | None = None) -> dict[str, Any]:
    """Why OPTION is not in the plan: the rules and numbers that rejected it, or why it never was
    a candidate. ``catalog_gpus`` maps normalised names and aliases to catalog GPU ids."""
    query = option.strip()
    key = normalise_name(query)
    chosen = chosen_candidate(plan)
    base = {"option": query, "chosen": chosen, "knowledge_hash": plan["knowledge_hash"]}
    # 0. a layout a several-model plan compared ('packed on A30', 'separate')
    packing = plan.get("packing") or {}
    layout_option = next((o for o in packing.get("options") or [] if normalise_name(o["option"]) == key), None)
    if layout_option is not None:
        chosen = chosen_layout(packing)
        return base | {"chosen": chosen, "kind": "packing", "resolved": layout_option["option"],
                       "status": "chosen" if layout_option["option"] == chosen else "not-chosen",
                       "layouts": packing, "groups": [], "decided_by": _deciding_step(plan, "packing.chosen")}
    # 1. an exact rejected option (a candidate id such as 'L40S | bf16 | tp2', or 'infiniband-ndr')
    exact = [r for r in plan["rejected"] if normalise_name(r["option"]) == key]
    if chosen and normalise_name(chosen) == key:
        return base | {"status": "chosen", "kind": "candidate", "resolved": chosen,
                       "decided_by": _deciding_step(plan, "chosen.id"), "groups": []}
    if exact:
        return base | {"status": "rejected", "kind": exact[0]["kind"], "resolved": exact[0]["option"],
                       "groups": group_rejections(plan, exact, rules)}
    # 2. a GPU model (by name or catalog alias): every candidate of it
    gpu = (catalog_gpus or {}).get(key)
    by_gpu = {normalise_name(g): g for g in rejections_by_gpu(plan)}
    name = by_gpu.get(key) or (gpu if gpu and normalise_name(gpu) in by_gpu else None)
    chosen_gpu = plan["components"].get("gpu", {}).get("model")
    if name is not None or (gpu and gpu == chosen_gpu) or (chosen_gpu and normalise_name(chosen_gpu) == key):
        name = name or chosen_gpu
        entries = [r for r in plan["rejected"] if r["option"].split(" | ")[0] == name]
        status = "chosen" if name == chosen_gpu else (
            "never-candidate" if entries and all(g["at_proposal"] for g in group_rejections(plan, entries, rules))
            else "rejected")
        return base | {"status": status, "kind": "gpu", "resolved": name,
                       "groups": group_rejections(plan, entries, rules),
                       "decided_by": _deciding_step(plan, "chosen.id") if status == "chosen" else None}
    if gpu:  # in the catalog now, but the plan never considered it
        return base | {"status": "never-candidate", "kind": "gpu", "resolved": gpu, "groups": [],
                       "reason": "not-in-plan"}
    # 3. a serving layout: the best candidate of that layout and every candidate of it
    layout = LAYOUT_NAMES.get(key)
    if layout is not None:
        return base | _why_not_layout(plan, layout, rules)
    # 4. a precision: the candidates at it, or the step that chose which precisions to consider
    if key in PRECISIONS:
        entries = [r for r in plan["rejected"] if r["kind"] == "candidate"
                   and len(r["option"].split(" | ")) > 1 and r["option"].split(" | ")[1] == key]
        chosen_prec = plan["components"].get("gpu", {}).get("precision")
        status = "chosen" if chosen_prec == key else ("rejected" if entries else "never-candidate")
        return base | {"status": status, "kind": "precision", "resolved": key,
                       "groups": group_rejections(plan, entries, rules),
                       "decided_by": _deciding_step(plan, "workload.precisions") if not entries else None}
    # 5. another value of an enumerated field (air, rent, ethernet-100g, ...)
    values = _value_fields(plan)
    for fact, alternatives in ALTERNATIVES.items():
        match = next((a for a in alternatives if normalise_name(a) == key), None)
        if match is None or fact not in values:
            continue
        status = "chosen" if normalise_name(str(values[fact])) == key else "not-chosen"
        return base | {"status": status, "kind": "value", "resolved": match, "field": fact,
                       "value": values[fact], "groups": [], "decided_by": _deciding_step(plan, fact)}
    for fact, value in values.items():  # any other field whose value is exactly this option
        if isinstance(value, str) and normalise_name(value) == key:
            return base | {"status": "chosen", "kind": "value", "resolved": value, "field": fact,
                           "value": value, "groups": [], "decided_by": _deciding_step(plan, fact)}
    raise ExplainError(f"'{query}' is neither a rejected option nor a known alternative in this plan",
                       _close(query, known_options(plan, (catalog_gpus or {}).values())))


# ------------------------------------------------------------------------------------------ audit

def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: node}


def compare(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """What differs between two plans: values of components/performance/cost, warnings,
    rejections and the rules that fired."""
    same_json = json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True)
    changes: list[dict[str, Any]] = []
    for key in ("servewise_version", "knowledge_hash", "feasible"):
        if old.get(key) != new.get(key):
            changes.append({"path": key, "old": old.get(key), "new": new.get(key)})
    for section in ("components", "performance", "cost"):
        a, b = _flat(old.get(section, {}), section), _flat(new.get(section, {}), section)
        for path in sorted(set(a) | set(b)):
            if a.get(path, "<absent>") != b.get(path, "<absent>"):
                changes.append({"path": path, "old": a.get(path), "new": b.get(path)})

    def keyed(items: list[dict[str, Any]], fields: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        return {" | ".join(str(i.get(f)) for f in fields): i for i in items}

    ow, nw = keyed(old.get("warnings", []), ("rule", "message")), keyed(new.get("warnings", []), ("rule", "message"))
    orj, nrj = keyed(old.get("rejected", []), ("option", "rule")), keyed(new.get("rejected", []), ("option", "rule"))
    orules = sorted({s["rule"] for s in old.get("trace", [])})
    nrules = sorted({s["rule"] for s in new.get("trace", [])})
    return {
        "identical": same_json,
        "changes": changes,
        "warnings_added": [nw[k] for k in nw if k not in ow],
        "warnings_removed": [ow[k] for k in ow if k not in nw],
        "rejected_added": [nrj[k] for k in nrj if k not in orj],
        "rejected_removed": [orj[k] for k in orj if k not in nrj],
        "rules_added": [r for r in nrules if r not in orules],
        "rules_removed": [r for r in orules if r not in nrules],
        "trace_changed": json.dumps(old.get("trace"), sort_keys=True) != json.dumps(new.get("trace"), sort_keys=True),
    }


def audit(plan: dict[str, Any], rulebase: RuleBase, rules_dirs: list[Any] | None = None,
          overlay: Any = None) -> dict[str, Any]:
    """Re-run the plan's recorded workload with ``rulebase`` (loaded with the extra ``rules_dirs``)
    and compare with the plan.

    ``status`` is ``identical``; ``edited`` when the knowledge hash is the same but the result is not
    (the recorded inputs and result do not match: the file was edited, or servewise changed); or
    ``knowledge-changed`` when the hash differs. ``overlay``: the calibration overlay the plan
    records (``calibration_overlay``), re-read from its file."""
    from servewise.engine.app.plan import plan_calibrated, rules_dirs_record

    result = plan_calibrated(plan["workload"], list(plan.get("defaults_used", [])), rulebase,
                             "<plan workload>", overlay)
    if rules_dirs:
        result.plan["rules_dirs"] = rules_dirs_record(rules_dirs)
    new = json.loads(json.dumps(result.plan, ensure_ascii=False, sort_keys=True))
    report = compare(plan, new)
    report["old_knowledge_hash"] = plan.get("knowledge_hash")
    report["new_knowledge_hash"] = new.get("knowledge_hash")
    report["old_rules_dirs"] = plan.get("rules_dirs") or []
    report["new_rules_dirs"] = new.get("rules_dirs") or []
    if report["identical"]:
        report["status"] = "identical"
    elif report["old_knowledge_hash"] == report["new_knowledge_hash"]:
        report["status"] = "edited"
    else:
        report["status"] = "knowledge-changed"
    return report


# ------------------------------------------------------------------------------- why-not a warning

def warning_rule(rulebase: RuleBase, name: str) -> Any | None:
    """The rule (a spec with a ``warn`` action) that ``name`` names (``warning:<id>`` too), or None."""
    rid = name.strip()
    rid = rid[len("warning:"):] if rid.lower().startswith("warning:") else rid
    try:
        spec = rulebase.by_id(rid)
    except KeyError:
        return None
    return spec if any(a.kind == "warn" for a in spec.actions) else None


def _provided_inputs(spec: Any) -> list[str]:
    """Inputs a rule's conditions test with ``provided('key')`` (whether the workload gave them)."""
    import ast

    keys = []
    for e in spec.when:
        for node in ast.walk(e.tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "provided"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                keys.append(node.args[0].value)
    return keys


def _condition_inputs(plan: dict[str, Any], step: dict[str, Any] | None, names: set[str],
                      provided: list[str] = ()) -> list[dict[str, Any]]:
    """The workload inputs the conditions of a warning read: directly, through the step that set a
    fact they read (one step back: further back every input of the plan would count), or by asking
    whether the workload gave them (``provided('key')``)."""
    if step is None:
        return []
    by_no = {s["step"]: s for s in plan["trace"]}
    found: dict[str, dict[str, Any]] = {}
    for key in provided:
        node: Any = plan.get("workload") or {}
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        found[key] = {"fact": key, "value": node, "given": key not in (plan.get("defaults_used") or []),
                      "ref": f"workload:{key}"}

    def take(premises: list[dict[str, Any]]) -> None:
        for p in premises:
            origin = p.get("origin") or {}
            if origin.get("kind") in ("input", "default"):
                found.setdefault(p["fact"], {"fact": p["fact"], "value": p.get("value"),
                                             "given": origin["kind"] == "input", "ref": origin["ref"]})

    direct = [p for p in step["premises"] if p["fact"] in names]
    take(direct)
    for p in direct:
        if "step" in p and p["step"] in by_no:
            take(by_no[p["step"]]["premises"])
    return sorted(found.values(), key=lambda x: (x["given"], x["fact"]))


def why_not_warning(plan: dict[str, Any], spec: Any, rulebase: RuleBase, overlay: Any = None) -> dict[str, Any]:
    """Why the warning of rule ``spec`` was given in ``plan``, or why it was not.

    Given: its conditions with the values the firing read, and the inputs its chain rests on (change
    one of them to make the warning go away). Not given: the recorded workload is planned again under
    the current knowledge (as ``audit`` does) and each condition is evaluated on the final facts of
    that run: the first that does not hold is why (``holds`` False; None when a fact it reads was
    never set). A plan of several models is evaluated on its first model's run."""
    base = {"rule": spec.id, "title": spec.title, "knowledge_hash": plan["knowledge_hash"],
            "message_i18n": None, "conditions": [], "inputs": [], "step": None}
    given = next((w for w in plan.get("warnings") or [] if w["rule"] == spec.id), None)
    if given is not None:
        chain = explain(plan, f"warning:{spec.id}")
        first = chain["steps"][0] if chain["steps"] else None
        read = {p["fact"]: p.get("value") for p in (first or {}).get("premises", [])}
        conditions = [{"expression": e.source, "values": e.render(read), "holds": True} for e in spec.when]
        return base | {"status": "given", "message_i18n": given.get("message_i18n") or {"en": given["message"]},
                       "severity": given.get("severity"), "conditions": conditions,
                       "inputs": _condition_inputs(plan, first, {n for e in spec.when for n in e.names},
                                                   _provided_inputs(spec)),
                       "step": first["step"] if first else None}
    from servewise.engine.app.plan import plan_calibrated
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.functions import RunContext, reset_context, use_context
    from servewise.engine.runtime.resolve import with_lets

    result = plan_calibrated(plan["workload"], list(plan.get("defaults_used", [])), rulebase,
                             "<plan workload>", overlay)
    mem = result.memory

    class Unset(LookupError):
        pass

    def resolve(name: str) -> Any:
        if name not in mem.values:
            raise Unset(name)
        return mem.values[name]

    conditions = []
    token = use_context(RunContext(load_catalog()))
    try:
        resolver = with_lets(spec, resolve)
        for e in spec.when:
            read = {n: mem.values[n] for n in e.names if n in mem.values}
            try:
                holds: bool | None = bool(e.evaluate(resolver))
            except Exception:  # noqa: BLE001 - a fact never set, or a function failing on it: unknown
                holds = None
            conditions.append({"expression": e.source, "values": e.render(read), "holds": holds,
                               "unset": [n for n in e.names if n not in mem.values]})
            if holds is not True:
                break
    finally:
        reset_context(token)
    return base | {"status": "not-given", "conditions": conditions,
                   "rerun_knowledge_hash": result.plan.get("knowledge_hash"),
                   "several_models": bool(plan.get("pools"))}
