"""The network of every example as laid out (issue #38): from its traffic, switched per rack group,
redundant at three nines, cabled by distance."""

from __future__ import annotations


def _qty(plan: dict, category: str, word: str) -> int:
    return sum(ln["qty"] for ln in plan["bom"] if ln["category"] == category and word in ln["part"])


def _step(plan: dict, rule: str) -> dict | None:
    return next((s for s in plan["trace"] if s["rule"] == rule), None)


def test_every_ethernet_plan_states_its_traffic_and_is_redundant_at_three_nines(example_plans):
    checked = 0
    for name, ex in example_plans.items():
        plan = ex.plan
        if plan.get("pools") or not plan["feasible"]:
            continue
        net = plan["components"]["network"]
        if not str(net.get("inter_node", "")).startswith("ethernet"):
            continue
        reason = _step(plan, "network.ethernet-for-independent-replicas")
        assert reason and "Gb/s in all" in reason["because"], name  # the traffic it was sized from
        assert net.get("traffic_gbps") is not None, name
        servers = plan["components"]["servers"]["count"]
        tors = _qty(plan, "switch", "ToR") + _qty(plan, "switch", "CloudEngine CE68")
        if servers > 1 and plan["workload"]["sla"]["availability"] >= 99.9:
            assert tors >= 2 and tors % 2 == 0, f"{name}: {tors} ToR switch(es) at three nines"
            checked += 1
        racks = plan["components"]["rack"]["racks"]
        across = _qty(plan, "optics", "cross-rack")
        if racks > 1 and plan["components"]["rack"]["servers_per_rack"] < servers:
            assert across > 0, f"{name}: {racks} racks but no cable that reaches the next one"
    assert checked >= 10


def test_no_single_rack_or_independent_replica_plan_buys_a_400g_fabric(example_plans):
    for name, ex in example_plans.items():
        plan = ex.plan
        if plan.get("pools") or not plan["feasible"]:
            continue
        net = plan["components"]["network"]
        if net.get("inter_node") == "roce-v2-400g":
            # only a replica split across servers carries activations between them, or separate
            # prefill and decode servers the KV cache: the fabric is sized from that traffic
            gpu = plan["components"]["gpu"]
            assert gpu.get("servers_per_replica", 1) > 1 or gpu.get("layout") == "disaggregated", name
            assert net["traffic_gbps"] > 0 and net["nics_per_server"] >= 1, name
            if gpu.get("layout") == "disaggregated":  # half load at most on each 400G NIC
                assert net["traffic_gbps"] <= net["nics_per_server"] * 400 * 0.5, name
