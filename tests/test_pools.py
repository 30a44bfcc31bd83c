"""Several models hosted together: one pool per model, combined with explanations."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import EXAMPLES, ROOT

MULTI = str(EXAMPLES / "multi-model-tenants.yaml")


def test_pools_plan_each_model_and_add_up(cli):
    result = cli("plan", MULTI, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    plan = json.loads(result.output)
    pools = plan["pools"]
    assert [p["model"] for p in pools] == [
        "Qwen2.5-7B (customer-service)", "Qwen2.5-14B (developers)", "Llama-3.2-3B (search-summaries)"]
    assert [p["peak_qps"] for p in pools] == [8, 2, 10]
    assert plan["components"]["gpu"]["count"] == sum(p["components"]["gpu"]["count"] for p in pools)
    separate = round(sum(p["cost"]["capex_cny"] for p in pools), 3)
    if plan["packing"]["chosen"] == "separate":
        assert plan["cost"]["capex_cny"] == separate
    else:  # the pools as planned on the host GPU, packed into fewer servers
        chosen = next(o for o in plan["packing"]["options"] if o["option"] == f"packed on {plan['packing']['host_gpu']}")
        assert plan["cost"]["capex_cny"] == chosen["capex_cny"]
        assert plan["components"]["servers"]["count"] < sum(p["components"]["servers"]["count"] for p in pools)
    steps = {s["step"]: s for s in plan["trace"]}
    combine = [s for s in plan["trace"] if s["rule"] == "pools.combine"
               and any(c["fact"].startswith("components.gpu.") for c in s["conclusions"])]
    assert combine and all(p["step"] in steps for p in combine[0]["premises"])
    assert all(r.get("pool") for r in plan["rejected"])


def test_unknown_model_in_models_is_a_field_error(cli, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("models:\n  - {model: Qwen9-7B, peak_qps: 1}\n", encoding="utf-8")
    result = cli("plan", str(path))
    assert result.exit_code == 2
    assert "model" in result.output and "Qwen9-7B" in result.output


def test_a_deferred_plan_is_the_plan_written_out_at_once():
    """A pool re-planned on another host GPU writes out its plan only when read (issue #41: most
    hosts lose and are read for their values): the same plan as written out at once, feasible
    told from the run's memory without writing it, for a feasible run and an infeasible one."""
    from servewise.cli.render import to_json
    from servewise.engine.app.inputs import load_workload
    from servewise.engine.app.plan import plan_workload
    from servewise.engine.app.plan_contract import DeferredPlanResult
    from servewise.engine.lang.rulebase import load_rules

    rb = load_rules()
    for name in ("chat-8b-small", "infeasible-target"):
        workload, defaults = load_workload(EXAMPLES / f"{name}.yaml")
        now = plan_workload(workload, defaults, rb)
        later = plan_workload(workload, defaults, rb, deferred=True)
        assert isinstance(later, DeferredPlanResult) and later._plan is None
        assert later.feasible == now.feasible == (name == "chat-8b-small")
        assert later._plan is None  # feasible did not write the plan out
        assert to_json(later.plan) == to_json(now.plan)
        assert later.plan is later.plan  # written once


def test_a_defaulted_target_costs_the_whole_plan_not_each_pool(cli, tmp_path, example_plans):
    """The multi-model example leaves sla.availability to the default: the plan's availability says
    what the N+1 spares cost the plan as built (re-packed without them on the host GPU, or the pools'
    lean sizes added up), as numbers, and the text reads per model instead of raw key=value pairs."""
    from servewise.cli.render import component_line

    plan = example_plans["multi-model-tenants"].plan
    avail = plan["components"]["availability"]
    pools = [p["components"]["availability"] for p in plan["pools"]]
    assert all(isinstance(avail[k], (int, float)) for k in
               ("without_n1_gpus", "without_n1_servers", "without_n1_capex_cny", "without_n1_change_pct"))
    assert avail["without_n1_gpus"] < plan["components"]["gpu"]["count"]
    assert avail["without_n1_capex_cny"] < plan["cost"]["capex_cny"]
    assert avail["without_n1_change_pct"] == round(
        100 * (avail["without_n1_capex_cny"] - plan["cost"]["capex_cny"]) / plan["cost"]["capex_cny"])
    if plan["packing"]["chosen"] == "separate":
        assert avail["without_n1_capex_cny"] == sum(p["without_n1_capex_cny"] for p in pools)
    text = component_line("availability", avail)  # the line plan's text and reports show
    assert "redundant_replicas=" not in text and "without_n1_capex_cny=" not in text
    assert "spare replicas per model" in text and f"{avail['without_n1_capex_cny']:,.0f} CNY" in text
    given = tmp_path / "given.yaml"
    text = open(MULTI, encoding="utf-8").read().replace("sla: {", "sla: {availability: 99.9, ", 1)
    given.write_text(text, encoding="utf-8")
    assert "without_n1_capex_cny" not in json.loads(cli("plan", str(given), "--format", "json").output)[
        "components"]["availability"]


def test_a_several_model_plan_reads_as_the_servers_are_built(example_plans):
    """The shared servers of a packed plan differ (CPU, RAM, PSU, draw): the text lists each one's
    instead of the first server's under a total, no pool's missing value shows as "None", the
    latencies are checked against the targets as the tightest pool's (no "checked None ms"), the
    rack draws what its servers draw, and each alternative names the pool it was an option of."""
    from servewise.cli.brief import to_brief
    from servewise.cli.render import component_line, to_text

    for name in ("saas-five-tenants", "multi-model-tenants"):
        plan = example_plans[name].plan
        comps, packing = plan["components"], plan["packing"]
        assert packing["chosen"] == "packed"
        servers = packing["servers"]
        cpu = component_line("cpu", comps["cpu"])
        assert all(f"{s['sockets']} × {s['cpu']} ({s['cores_total']} cores" in cpu for s in servers)
        assert cpu.startswith(f"{sum(s['cores_total'] for s in servers)} cores in all")
        memory = component_line("memory", comps["memory"])
        assert memory.startswith(f"{sum(s['memory_gb'] for s in servers)} GB")
        assert all(f"{s['channels']} × {s['dimm_gb']} GB = {s['memory_gb']} GB" in memory for s in servers)
        power = component_line("power", comps["power"])
        assert power.startswith(", ".join(str(s["draw_w"]) for s in servers) + " W per server")
        rack = comps["rack"]
        assert sum(rack["rack_kw"]) == round(sum(s["draw_w"] for s in servers) / 1000, 2)
        assert rack["power_kw_per_rack"] == max(rack["rack_kw"]) <= rack["rack_limit_kw"]
        perf = plan["performance"]
        pools = [p["performance"] for p in plan["pools"]]
        assert perf["ttft_checked_ms"] == max(p["ttft_checked_ms"] for p in pools)
        assert perf["tpot_margin_pct"] == min(p["tpot_margin_pct"] for p in pools)
        for lang in ("en", "zh"):
            text = to_text(plan, lang) + to_brief(plan, lang)
            assert "None" not in text and "— %" not in text
        assert "[" + plan["rejected"][0]["pool"] + "]" in to_text(plan)
        notes = to_text(plan).split("Notes and corrections")[1].split("\n\n")[0]
        assert "sla.cold-start-total" in notes and notes.count("sla.cold-start-total,") <= 1


def test_the_shared_servers_are_bought_with_their_network(example_plans):
    """A packed plan's parts list holds the Ethernet front-end of its shared servers, laid out as
    a one-model plan's (fn_network.ethernet_layout, the rule bom.network-parts-ethernet): a NIC in
    every server, a redundant top-of-rack pair at three nines and a cable per link; its capex is
    the sum of its lines."""
    from servewise.engine.domain.fn_bom import bom_total

    plan = example_plans["saas-five-tenants"].plan
    servers = plan["components"]["servers"]["count"]
    qty = {}
    for line in plan["bom"]:
        qty[line["category"]] = qty.get(line["category"], 0) + line["qty"]
    assert qty["nic-frontend"] == servers
    assert qty["switch"] == 2 and qty["optics"] == 2 * servers  # one link to each switch of the pair
    assert plan["cost"]["capex_cny"] == round(bom_total(plan["bom"]), 0)
    # per token at the shared servers' monthly cost (cost.per-million-tokens' ratio), not the pools' own
    hours = next(p["value"] for p in yaml.safe_load(open(ROOT / "facts/catalog/policies.yaml", encoding="utf-8"))
                 if p["id"] == "hours_per_month")
    tokens_month = plan["performance"]["output_tokens_per_s"] * 3600 * hours / 1e6
    assert plan["cost"]["cny_per_million_tokens"] == pytest.approx(plan["cost"]["monthly_cost_cny"] / tokens_month,
                                                                   rel=2e-3)
    step = next(s for s in plan["trace"] if s["rule"] == "pools.pack"
                and any(c["fact"].startswith("components.network.") for c in s["conclusions"]))
    assert "2 top-of-rack switch(es)" in step["because"]


def test_an_ethernet_layout_over_many_racks_has_leaves_and_spines():
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.fn_network import ethernet_layout
    from servewise.engine.domain.functions import RunContext, reset_context, use_context

    token = use_context(RunContext(load_catalog()))
    try:
        wide = ethernet_layout(27, 14, 2, True, "spine-x")
        alone = ethernet_layout(1, 1, 1, False, "spine-x")
    finally:
        reset_context(token)
    assert (wide["racks_per_group"], wide["groups"], wide["switches"], wide["spine"], wide["spines"]) == \
        (8, 2, 4, "spine-x", 2)
    assert wide["dac"] + wide["aoc"] == 27 * 2 and wide["uplinks"] == 8
    assert (alone["switches"], alone["spine"], alone["dac"], alone["aoc"]) == (1, None, 1, 0)
