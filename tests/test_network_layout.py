"""The network of every example as laid out (issue #38): from its traffic, switched per rack group,
redundant at three nines, cabled by distance."""

from __future__ import annotations


def _qty(plan: dict, category: str, word: str) -> int:
    return sum(ln["qty"] for ln in plan["bom"] if ln["category"] == category and word in ln["part"])


def _single_plans(example_plans, inter_node) -> list[tuple[str, dict, dict]]:
    """(name, plan, network) of the feasible one-model examples whose inter-node network passes
    ``inter_node`` (a predicate of its name)."""
    out = []
    for name, ex in example_plans.items():
        plan = ex.plan
        if plan.get("pools") or not plan["feasible"]:
            continue
        net = plan["components"]["network"]
        if inter_node(str(net.get("inter_node", ""))):
            out.append((name, plan, net))
    return out


def _step(plan: dict, rule: str) -> dict | None:
    return next((s for s in plan["trace"] if s["rule"] == rule), None)


def test_every_ethernet_plan_states_its_traffic_and_is_redundant_at_three_nines(example_plans):
    checked = 0
    for name, plan, net in _single_plans(example_plans, lambda n: n.startswith("ethernet")):
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


def test_every_rdma_fabric_buys_a_lossless_switch_that_holds_its_ports_and_a_second_plane_at_three_nines(
        example_plans):
    """A switched RoCE fabric is a catalogued PFC/ECN switch with enough 400G ports for one plane (servers ×
    NICs per plane), two planes (switches, NICs) from the front-end pair's availability, the BOM buying those
    switches and an optic at each end of every link; a two-server pipeline replica is cabled point to point."""
    from servewise.engine.domain.catalog import load_catalog
    switches = load_catalog().table("switches")
    checked = 0
    for name, plan, net in _single_plans(example_plans, lambda n: n == "roce-v2-400g"):
        servers = plan["components"]["servers"]["count"]
        links = servers * net["nics_per_server"]
        optics = _qty(plan, "optics", "roce-v2-400g optics")
        if net["switches"] == 0:  # point to point: one module at each NIC port
            assert net["switch"].startswith("none (point-to-point"), name
            assert optics == links, name
            continue
        entry = switches.get(net["switch"])
        assert entry["roce"] and entry["pfc"], name
        planes = net["fabric_planes"]
        assert planes == (2 if plan["workload"]["sla"]["availability"] >= 99.9 else 1), name
        assert entry["ports_400g"] >= servers * net["nics_per_server"] // planes, name
        assert _qty(plan, "switch", net["switch"]) == net["switches"] == planes, name
        assert optics == 2 * links, name  # a NIC end and a switch end per link
        checked += 1
    assert checked >= 2


def test_a_workload_that_allows_a_single_point_of_failure_buys_one_switch_per_network(cli, tmp_path):
    """The switch pair and the RDMA fabric's second plane exist to veto a single point of failure
    (sla.availability-policy): a workload that allows one at three nines gets one front-end switch
    and one fabric plane, and the plan says why."""
    import json

    from conftest import EXAMPLES

    text = (EXAMPLES / "deepseek-v3-public-api.yaml").read_text(encoding="utf-8")
    path = tmp_path / "spof.yaml"
    path.write_text(text.replace("constraints: {", "constraints: {allow_single_point_of_failure: true, ", 1),
                    encoding="utf-8")
    plan = json.loads(cli("plan", str(path), "--format", "json").output)
    net = plan["components"]["network"]
    assert plan["workload"]["sla"]["availability"] >= 99.9
    assert net["fabric_planes"] == 1 and net["switches"] == 1, net
    assert _qty(plan, "switch", "ToR") == 1
    assert "single point of failure is allowed" in _step(plan, "network.fabric-switch")["because"]
