"""Build a plan: workload → input facts → rule run → the plan document of CONTRACTS §4.

A workload with several models (``models:``) is planned one pool at a time and combined by
engine/app/pools.py; both share the plan's parts through engine/app/plan_contract.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from servewise.engine.app.inputs import WorkloadError, flatten, get_path, input_defs, input_error, load_workload
from servewise.engine.app.plan_contract import (
    COMPONENT_FIELDS,
    COST_FIELDS,
    PERFORMANCE_FIELDS,
    DeferredPlanResult,
    PlanResult,
    cite,
    memory_feasible,
)
from servewise.engine.app.plan_contract import closure as _closure
from servewise.engine.app.pools import combine, pool_given, portable, sub_workload
from servewise.engine.app.pools_board import Board, summary, take_replans
from servewise.engine.common import forkmap
from servewise.engine.common.forkmap import fork_map
from servewise.engine.common.gctune import fewer_collections
from servewise.engine.common.messages import both, message
from servewise.engine.common.version import VERSION
from servewise.engine.domain.catalog import UnknownEntry, load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.domain.perf.calibration import using_overlay
from servewise.engine.domain.perf.overlay import Overlay
from servewise.engine.lang.factdict import MODEL_FACT_FIELDS
from servewise.engine.lang.rulebase import RuleBase, load_rules
from servewise.engine.runtime.memory import Memory, Origin
from servewise.engine.runtime.runner import WORK, Runner

# The architecture fields every sizing rule reads (weights, KV cache, FLOPs per token); a catalog
# model without them cannot be planned (tests/test_catalog_data.py lists which entries lack them).
SIZING_FIELDS = ("total_params_b", "num_layers", "hidden_size", "num_attention_heads")


def servewise_version() -> str:
    return VERSION


def custom_model(spec: dict[str, Any]) -> dict[str, Any]:
    """A catalog-shaped model entry from a workload's custom-model mapping."""
    entry = {k: v for k, v in spec.items() if k not in ("name", "params_b")}
    entry["id"] = spec["name"]
    entry["total_params_b"] = spec["params_b"]
    entry.setdefault("num_kv_heads", spec["num_attention_heads"])
    entry.setdefault("head_dim", spec["hidden_size"] // spec["num_attention_heads"])
    entry.setdefault("attention_type", "MHA" if entry["num_kv_heads"] == spec["num_attention_heads"] else "GQA")
    entry.setdefault("intermediate_size", 4 * spec["hidden_size"])
    entry.setdefault("vocab_size", 128000)
    entry["sources"] = [{"ref": "workload file (custom model)", "status": "user"}]
    return entry


def catalog_model(catalog: Any, name: str, file: str, path: str) -> dict[str, Any]:
    """The catalog entry of a model named in a workload at ``path``, or a WorkloadError: an unknown
    name (with suggestions), or an entry without the dimensions sizing needs (SIZING_FIELDS)."""
    try:
        entry = catalog.model(name)
    except UnknownEntry as exc:
        raise WorkloadError(file, 0, path, str(exc)) from None
    missing = [f for f in SIZING_FIELDS if entry.get(f) is None]
    if missing:  # e.g. a diffusion model, listed for the seeds' co-hosting passages only
        raise input_error(file, 0, path, "input.model_not_sizable", model=entry["id"],
                          task=entry.get("task") or "?", missing=", ".join(missing))
    return entry


def served_name(entry: dict[str, Any], spec: Any) -> str:
    """The model as the workload names it (an alias such as DeepSeek-R1 of the DeepSeek-V3
    architecture entry, in the catalog's spelling): what the serving engine loads and the load
    test names; the entry's id for a custom model or a name that is the id."""
    if isinstance(spec, str):
        for name in [entry["id"], *(entry.get("aliases") or [])]:
            if str(name).lower() == spec.strip().lower():
                return str(name)
    return str(entry["id"])


def input_facts(workload: dict[str, Any], defaults_used: list[str], ctx: RunContext,
                file: str = "<workload>") -> dict[str, tuple[Any, Origin]]:
    """Every input as a fact, plus the model's architecture from the catalog."""
    facts: dict[str, tuple[Any, Origin]] = {}
    for key, value in flatten(workload).items():
        if key == "models":
            continue
        kind = "default" if key in defaults_used else "input"
        facts[key] = (value, Origin(kind, f"workload:{key}"))
    model_spec = workload.get("model")
    if model_spec is None:
        raise WorkloadError(file, 0, "model", "missing required field 'model' (or 'models')")
    if isinstance(model_spec, dict):
        entry = custom_model(model_spec)
        ctx.custom_models[entry["id"]] = entry
        ref = "workload:model"
    else:
        entry = catalog_model(ctx.catalog, model_spec, file, "model")
        ref = f"catalog:models/{entry['id']}"
    facts["model"] = (entry["id"], Origin("input", "workload:model"))
    facts["model.id"] = (entry["id"], Origin("catalog", ref))
    facts["model.served_name"] = (served_name(entry, model_spec), Origin("input", "workload:model"))
    for f in MODEL_FACT_FIELDS:
        facts[f"model.{f}"] = (entry.get(f), Origin("catalog", ref))
    return facts


def _section(mem: Memory, prefix: str, fields: tuple[str, ...]) -> tuple[dict[str, Any], list[int]]:
    out: dict[str, Any] = {}
    steps = []
    for f in fields:
        key = f"{prefix}.{f}"
        out[f] = mem.values.get(key)
        if key in mem.value_step:
            steps.append(mem.value_step[key])
    for key in sorted(mem.values):  # extra fields rules chose beyond the contract
        if key.startswith(prefix + ".") and key.count(".") == prefix.count(".") + 1:
            f = key.rsplit(".", 1)[1]
            if f not in out:
                out[f] = mem.values[key]
                if key in mem.value_step:
                    steps.append(mem.value_step[key])
    return out, steps


CANDIDATE_FIELDS = ("gpu", "precision", "tp", "pp", "gpus", "servers", "tco_cny", "capex_cny",
                    "ttft_ms_hi", "ttft_p99_ms", "tpot_ms_hi", "availability", "layout",
                    "prefill_workers", "decode_workers")
# the latency of a candidate that is not a decoder LLM (an encoder's request latency, a streaming
# ASR's partial-result latency): listed only where the candidate has it
CANDIDATE_LATENCIES = ("latency_ms", "latency_p99_ms", "asr_partial_latency_ms")


def ranked_candidates(mem: Memory) -> list[dict[str, Any]]:
    """Every candidate that reached the ranking (it has a TCO), with its cost and latency and
    whether it was chosen: what the cost-vs-latency chart of the reports shows."""
    chosen = mem.values.get("chosen.id")
    out = []
    for kind, item_id in mem.item_order:
        attrs = mem.items.get((kind, item_id)) or {}
        if kind != "candidate" or attrs.get("tco_cny") is None:
            continue
        row = {"id": item_id, **{f: attrs.get(f) for f in CANDIDATE_FIELDS},
               **{f: attrs[f] for f in CANDIDATE_LATENCIES if attrs.get(f) is not None}}
        row["chosen"] = item_id == chosen
        out.append(row)
    return out


def assemble(workload: dict[str, Any], defaults_used: list[str], mem: Memory,
             rulebase: RuleBase) -> dict[str, Any]:
    components: dict[str, Any] = {}
    roots: list[int] = []
    undecided: list[str] = []
    for comp, fields in COMPONENT_FIELDS.items():
        section, steps = _section(mem, f"components.{comp}", fields)
        components[comp] = section
        roots += steps
        if not steps:
            undecided.append(comp)
    for key in sorted(mem.values):  # components beyond the contract (isolation, monitoring...)
        if key.startswith("components."):
            comp = key.split(".")[1]
            if comp not in components:
                section, steps = _section(mem, f"components.{comp}", ())
                components[comp] = section
                roots += steps
    performance, steps = _section(mem, "performance", PERFORMANCE_FIELDS)
    roots += steps
    cost, steps = _section(mem, "cost", COST_FIELDS)
    roots += steps
    bom = mem.values.get("bom.lines") or []  # capex_cny = Σ qty × midpoint of unit_price_cny
    if "bom.lines" in mem.value_step:
        roots.append(mem.value_step["bom.lines"])
    roots += [w["step"] for w in mem.warnings] + [a["step"] for a in mem.asks]
    feasible = memory_feasible(mem)
    if "plan.feasible" in mem.value_step:
        roots.append(mem.value_step["plan.feasible"])
    if not feasible:  # say so explicitly instead of leaving empty components unexplained
        for comp in undecided:
            components[comp]["status"] = message("plan.not-planned", "en")
    warnings = [{"rule": w["rule"], "severity": w["severity"], "message": w["message"]["en"],
                 "message_i18n": w["message"]} for w in mem.warnings]
    for comp in undecided if feasible else []:
        texts = both("plan.undecided-component", component=comp)
        warnings.append({"rule": "engine.undecided-component", "severity": "warning",
                         "message": texts["en"], "message_i18n": texts})
    rejected = [{"option": r["option"], "kind": r["kind"], "rule": r["rule"], "stage": r["stage"],
                 "because": r["because"]["en"], "because_i18n": r["because"],
                 "values": r.get("values", {})} | ({"ranked": True} if r.get("ranked") else {})
                | ({"figures": r["figures"]} if r.get("figures") else {})
                for r in mem.rejections]
    candidates = ranked_candidates(mem)
    trace = []
    for s in _closure(mem, roots):
        step = dict(s)
        src = step["source"]
        step["source"] = [cite(x) for x in src] if isinstance(src, list) else cite(src)
        step["because_i18n"] = step["because"]
        step["because"] = step["because"]["en"]
        trace.append(step)
    return {
        "servewise_version": servewise_version(),
        "knowledge_hash": rulebase.knowledge_hash,
        "workload": workload,
        "defaults_used": sorted(defaults_used),
        "feasible": bool(feasible),
        "components": components,
        "performance": performance,
        "bom": bom,
        "cost": cost,
        "warnings": warnings,
        "rejected": rejected,
        "candidates": candidates,
        "asks": [{"input": a["input"], "rule": a["rule"], "because": a["because"]} for a in mem.asks],
        "trace": trace,
    }


def plan_workload(workload: dict[str, Any], defaults_used: list[str],
                  rulebase: RuleBase | None = None, file: str = "<workload>",
                  provided: frozenset[str] | None = None,
                  cache: dict[tuple, Any] | None = None, deferred: bool = False) -> PlanResult:
    """Run the rules over a validated, default-filled workload. ``cache``: the domain functions'
    memory of results (RunContext.cache), shared by the pools of one several-model plan;
    ``deferred``: the plan document of a one-model workload is written out when first read
    (:class:`DeferredPlanResult`)."""
    with fewer_collections():  # a plan makes no reference cycles (engine/common/gctune.py)
        return _plan_workload(workload, defaults_used, rulebase, file, provided, cache, deferred)


def _plan_workload(workload: dict[str, Any], defaults_used: list[str], rulebase: RuleBase | None,
                   file: str, provided: frozenset[str] | None, cache: dict[tuple, Any] | None,
                   deferred: bool = False) -> PlanResult:
    rulebase = rulebase or load_rules()
    if workload.get("model") is None and workload.get("models"):
        entries = workload["models"]
        catalog = load_catalog()
        for i, e in enumerate(entries):  # every pool's model, before any is planned
            if isinstance(e.get("model"), str):
                catalog_model(catalog, e["model"], file, f"models.{i}.model")
        # the pools of this plan remember domain-function results together (pure functions of
        # their arguments and the catalog), unless a pool brings its own model definition
        shared: dict[tuple, Any] | None = {} if all(isinstance(e.get("model"), str) for e in entries) else None

        def pool(entry: dict[str, Any], gpu: str | None = None) -> PlanResult:
            """One model's pool; on ``gpu`` alone when given (a re-plan on another host GPU)."""
            sub, extra = sub_workload(workload, entry)
            dropped = pool_given(entry)
            if gpu is not None:
                sub["constraints"]["gpu_models"] = [gpu]
                dropped.add("constraints.gpu_models")
            # a re-plan's plan is written out only if its host's packing is chosen (pools.choose_layout)
            return plan_workload(sub, [d for d in defaults_used if d not in dropped] + extra,
                                 rulebase, file, provided, shared, deferred=gpu is not None)
        # the pools share this machine's cores (the first is planned here: its whole memory is kept);
        # a worker whose pools are done takes the host re-plans known by then (pools_board.py)
        board = (_board(len(entries)) if len(entries) > 1 and workload["mode"] != "edge"
                 and forkmap.processes_available() > 1 else None)
        try:
            def planned(i: int) -> PlanResult:
                result = pool(entries[i])
                if board is not None:
                    board.publish(i, summary(result))
                return result

            after = None if board is None else lambda: take_replans(
                board, lambda i, gpu: pool(entries[i], gpu), portable)
            results = fork_map(planned, range(len(entries)), portable=portable, counters=(WORK,), after=after)
            return PlanResult(combine(workload, defaults_used, entries, results, pool, board), results[0].memory)
        finally:
            if board is not None:
                board.close()
    mem = run_rules(workload, defaults_used, rulebase, file, provided, cache=cache)
    if deferred:
        rb = rulebase
        return DeferredPlanResult(mem, lambda: assemble(workload, defaults_used, mem, rb))
    return PlanResult(assemble(workload, defaults_used, mem, rulebase), mem)


def _board(pools: int) -> Board | None:
    """The board the processes of a several-model plan share (None where no temporary folder can
    be made: the re-plans then all wait for the pools, as without it)."""
    try:
        return Board(pools)
    except OSError:
        return None


def run_rules(workload: dict[str, Any], defaults_used: list[str], rulebase: RuleBase,
              file: str = "<workload>", provided: frozenset[str] | None = None,
              stop_after: str | None = None, cache: dict[tuple, Any] | None = None) -> Memory:
    """The rule run of one model's plan, stopped after stage ``stop_after`` if given (the
    interview runs only the stages that decide its next question: engine/app/askplan.py); ``cache``
    as in :func:`plan_workload`."""
    if provided is None:
        provided = frozenset(d.key for d in input_defs()
                             if d.key not in defaults_used and get_path(workload, d.key) is not None)
    ctx = RunContext(load_catalog(), provided=provided, cache={} if cache is None else cache)
    facts = input_facts(workload, defaults_used, ctx, file)
    return Runner(rulebase).run(facts, ctx, stop_after=stop_after)


def rules_dirs_record(dirs: list[Path] | list[str]) -> list[dict[str, str]]:
    """The extra rule folders (``--rules-dir``) as recorded in a plan: absolute path (so that
    `audit` finds them from any folder) and hash of their rule files, so that `audit` re-runs with
    the same folders and notices when they changed."""
    import os

    from servewise.engine.lang.rulebase import compute_hash, rule_files

    return [{"path": os.path.abspath(str(d)), "hash": compute_hash(rule_files([Path(d)]))} for d in dirs]


def plan_file(path: str | Path, rulebase: RuleBase | None = None,
              rules_dirs: list[Path] | None = None, overlay: Overlay | None = None) -> PlanResult:
    """Plan a workload file (``-`` is stdin); ``rules_dirs`` are recorded in the plan when given;
    ``overlay``: a calibration overlay (``servewise calibrate``) every estimate uses, recorded
    in the plan (``calibration_overlay``: file, absolute path, sha256, constants)."""
    workload, defaults_used = load_workload(path)
    result = plan_calibrated(workload, defaults_used, rulebase,
                             "<stdin>" if str(path) == "-" else str(path), overlay)
    if rules_dirs:
        result.plan["rules_dirs"] = rules_dirs_record(rules_dirs)
    return result


def plan_calibrated(workload: dict[str, Any], defaults_used: list[str], rulebase: RuleBase | None,
                    file: str, overlay: Overlay | None) -> PlanResult:
    """:func:`plan_workload` with every estimate through ``overlay`` (when given), which the plan
    records with a note of what it changed (the plan without it is made too, to compare)."""
    if overlay is None:
        return plan_workload(workload, defaults_used, rulebase, file)
    with using_overlay(overlay):
        result = plan_workload(workload, defaults_used, rulebase, file)
    plain = plan_workload(workload, defaults_used, rulebase, file)
    result.plan["calibration_overlay"] = overlay_record(overlay)
    result.plan["warnings"].insert(0, overlay_note(overlay, plain.plan, result.plan))
    return result


def _decision(plan: dict[str, Any]) -> str:
    """The headline of a plan: GPUs, servers and capex."""
    g, srv, cost = plan["components"]["gpu"], plan["components"]["servers"], plan["cost"]
    capex = cost.get("capex_cny")
    return (f"{g.get('count')} x {g.get('model')} in {srv.get('count')} server(s), capex "
            + (f"{capex:,.0f} CNY" if isinstance(capex, (int, float)) else "n/a"))


def overlay_note(overlay: Overlay, before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The plan's note that it was sized with ``overlay``, and what that changed."""
    rec = overlay.record()
    scopes = ", ".join(f"{s['gpu']} / {s['backend']}" for s in rec["scopes"])
    constants = "; ".join(f"{s['gpu']}: " + ", ".join(f"{k} {v:g}" for k, v in s["constants"].items())
                          for s in rec["scopes"])
    b, a = _decision(before), _decision(after)
    texts = {}
    for lang in ("en", "zh"):
        effect = (message("plan.calibration-overlay-same", lang, after=a) if a == b
                  else message("plan.calibration-overlay-changed", lang, before=b, after=a))
        texts[lang] = message("plan.calibration-overlay", lang, file=rec["file"],
                              sha=rec["sha256"][:12], scopes=scopes, effect=effect,
                              constants=constants)
    return {"rule": "engine.calibration-overlay", "severity": "info", "message": texts["en"],
            "message_i18n": texts}


def overlay_record(overlay: Overlay) -> dict[str, Any]:
    """What a plan records of its calibration overlay (`audit` re-reads it from ``path``)."""
    import os

    return {**overlay.record(), "path": os.path.abspath(overlay.path) if overlay.path else ""}
