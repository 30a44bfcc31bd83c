"""Domain functions for the inter-node network (rules/bom/network.yaml): which catalogued switch carries
a lossless RDMA fabric, and how an Ethernet front-end is laid out over racks (rules/cost/bom.yaml).

Generic mechanics only: the switches, their ports and features are catalog data (switches.yaml), their
prices are market data (market-prices.yaml, read through ``fn_bom.market_price``), and how many ports a
fabric needs (servers x NICs, planes for redundancy) is decided by the rule that calls this.
"""

from __future__ import annotations

from math import ceil, floor
from typing import Any

# the module, not its names: importing fn_bom first loads this module while fn_bom is half-imported
from servewise.engine.domain import fn_bom
from servewise.engine.domain.functions import current, domain_function, note_detail, policy

UNORDERABLE = ("restricted", "discontinued")  # availability.yaml statuses a switch is not bought in


def _ports_at(entry: dict[str, Any], gbps: int) -> int:
    """Ports of this switch at ``gbps`` (its ``ports_<gbps>g`` field; breakout ports included where the
    catalog lists them at that speed, e.g. SN5600's 128 x 400G from 64 x 800G)."""
    return int(entry.get(f"ports_{gbps}g") or 0)


def _own_market(switch: str, region: str) -> bool:
    """Whether the switch has a price of the buyer's market itself (not the other market's, marked)."""
    return (fn_bom._canonical(switch), region) in fn_bom._price_index()


@domain_function
def fabric_switch(port_gbps: int, ports: int, region: str, domestic: bool = False) -> dict[str, Any]:
    """The switch one plane of a lossless RoCE fabric of ``ports`` NIC ports at ``port_gbps`` is built
    on: among the catalogued Ethernet switches with RoCE and PFC (ECN) lossless forwarding, ports at
    that speed, orderable in the ``region`` (availability not restricted or discontinued), domestic
    when ``domestic``, and a market price, the least costly (midpoint of its range) that holds all the
    ports in one switch — a plane is one switch, so every server reaches every other in one hop —
    priced in the buyer's market first, else at the other market's price. When no switch holds the
    ports, the one with most ports, ``per_plane`` of them (joining them needs a spine layer that this
    does not design). Returns ``{id, ports, per_plane, low_cny, high_cny, mid_cny, own_market,
    considered, next, next_mid_cny}`` (``id`` None when no switch qualifies; ``next`` is the runner-up)."""
    gbps, need = int(port_gbps), max(1, int(ports))
    rows = []
    for order, entry in enumerate(current().catalog.table("switches")):
        have = _ports_at(entry, gbps)
        if entry.get("fabric") != "ethernet" or not (entry.get("roce") and entry.get("pfc")) or have < 1:
            continue
        if domestic and entry.get("domestic") is not True:
            continue
        if fn_bom.availability_status(entry["id"], region) in UNORDERABLE:
            continue
        price = fn_bom.market_price(entry["id"], region)
        if price is None:
            continue
        low, high = (float(x) for x in price["unit_price_cny"])
        own = _own_market(entry["id"], region)
        rows.append({"id": entry["id"], "ports": have, "per_plane": ceil(need / have), "low_cny": low,
                     "high_cny": high, "mid_cny": (low + high) / 2, "own_market": own, "order": order})
    fits = [r for r in rows if r["ports"] >= need]
    pool = [r for r in fits if r["own_market"]] or fits
    if pool:
        ranked = sorted(pool, key=lambda r: (r["mid_cny"], -r["ports"], r["order"]))
    else:  # no single switch holds the plane: the largest, several of them
        ranked = sorted(rows, key=lambda r: (-r["ports"], r["mid_cny"], r["order"]))
    note_detail({"function": "fabric_switch", "metric": f"{need} ports at {gbps}G, {region} market",
                 "steps": [{"name": r["id"], "formula": f"{r['ports']} ports at {gbps}G",
                            "result": "{:,.0f}-{:,.0f} CNY{}".format(
                                r["low_cny"], r["high_cny"], "" if r["own_market"] else " (other market)")}
                           for r in ranked]})
    if not ranked:
        return {"id": None, "ports": 0, "per_plane": 0, "low_cny": None, "high_cny": None, "mid_cny": None,
                "own_market": False, "considered": 0, "next": None, "next_mid_cny": None}
    best = ranked[0]
    runner = ranked[1] if len(ranked) > 1 else None
    return {**{k: best[k] for k in ("id", "ports", "per_plane", "low_cny", "high_cny", "mid_cny", "own_market")},
            "considered": len(ranked), "next": runner["id"] if runner else None,
            "next_mid_cny": runner["mid_cny"] if runner else None}


@domain_function
def ethernet_layout(servers: int, racks: int | None, servers_per_rack: int | None, redundant: bool,
                    spine: str | None) -> dict[str, Any]:
    """The Ethernet front-end of ``servers`` servers in ``racks`` racks of at most
    ``servers_per_rack`` (the rule bom.network-parts-ethernet, and the shared servers of a
    several-model plan): one NIC per server with a link to each switch of its group (two, a
    redundant pair, when ``redundant``); a rack of at least policy tor_per_rack_min_servers
    servers has its own switches, sparser racks share a group of up to tor_group_max_racks adjacent
    racks (as many as tor_ports ports hold); more than one group is joined by ``spine`` switches,
    redundant like the leaves; copper DAC links inside a group's own racks, active optical cables
    from the other racks, one 100G uplink from each leaf to each spine."""
    links = 2 if redundant else 1
    rack_servers = max(1, min(servers_per_rack or servers, servers))
    racks = max(1, racks or 1)
    per_group = 1 if rack_servers >= policy("tor_per_rack_min_servers") else max(
        1, min(racks, policy("tor_group_max_racks"), floor(policy("tor_ports") / rack_servers)))
    groups = ceil(racks / per_group)
    switches = groups * (2 if redundant else 1)
    spines = (2 if redundant else 1) if groups > 1 else 0
    dac = min(servers, groups * rack_servers) * links
    return {"redundant": redundant, "links_per_server": links, "rack_servers": rack_servers, "racks": racks,
            "racks_per_group": per_group, "groups": groups, "switches": switches,
            "spine": spine if groups > 1 else None, "spines": spines, "dac": dac, "aoc": servers * links - dac,
            "uplinks": switches * spines}
