"""Packed servers for several model pools: the option, its per-server sizing, BOM and cost.

For one host GPU model, every pool (planned on that GPU) is packed into physical servers with
``fn_packing.pack_servers`` from what the rules concluded per pool (``pack.*``: whole GPUs, a MIG
instance or an MPS share, and whether the pool may share a server). Each physical server is then
sized once for everything it hosts, with the same domain functions the rules use:
CPU cores = Σ pools' cores per GPU × their GPUs on it; RAM = max(½ of the installed VRAM, Σ load + KV
reserves), one equal DIMM per filled channel (memory_channels_populated, as the RAM rule); one model
store per server for every model version it hosts
(weights × versions × 2) plus the logs counted once (G-STO-008); power = platform + installed GPUs'
TDP. Opex follows the cost rules (rules/cost/cost.yaml), with the same policies
(facts/catalog/policies.yaml: hours a month, PUE air / liquid, ops labour per server-month, write-off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.domain.fn_bom import (
    bom_lines,
    bom_total,
    network_lines,
    server_capacity,
    server_gpus,
    server_label,
    server_sku,
)
from servewise.engine.domain.fn_facilities import pcie_gbs, raid10_drive_tb, raid10_drives
from servewise.engine.domain.fn_network import ethernet_layout
from servewise.engine.domain.fn_packing import Demand, Server, gpu_share_of, pack_servers
from servewise.engine.domain.functions import balanced_dimm_gb, catalog, current, memory_channels_populated, policy


@dataclass
class PackedOption:
    host_gpu: str
    servers: list[dict[str, Any]] = field(default_factory=list)
    components: dict[str, Any] = field(default_factory=dict)
    bom: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    tenants: list[dict[str, Any]] = field(default_factory=list)
    network: dict[str, Any] = field(default_factory=dict)  # fn_network.ethernet_layout of the shared servers
    network_nic: str | None = None                         # their front-end NIC


def demand(label: str, values: dict[str, Any]) -> Demand | None:
    """The GPU demand of one pool from its rule conclusions; None when it cannot be packed (no
    packing conclusion, or a replica spanning servers)."""
    if values.get("pack.unit") is None or values.get("chosen.id") is None:
        return None
    if (values.get("chosen.servers_per_replica") or 1) > 1:
        return None
    own = not values.get("pack.may_share_server", True)
    if values["pack.unit"] in ("mig", "mps"):
        share = (float(values["pack.gpu_share"]), float(values["pack.memory_share"]))
        return Demand(label, shares=[share], share_label=str(values["pack.slice_profile"]), own_servers=own,
                      spread=bool(values.get("pack.spread_servers")),
                      spare_shares=[share] if values.get("pack.spread_servers") else [])
    size = int(values.get("chosen.tp") or 1) * int(values.get("chosen.pp") or 1)
    return Demand(label, group_size=size, groups=max(1, int(values["chosen.gpus"]) // size), own_servers=own,
                  spread=bool(values.get("pack.spread_servers")))


def _v(values: dict[str, Any], key: str, default: float = 0.0) -> float:
    val = values.get(key)
    return float(val) if isinstance(val, (int, float)) else default


def _cpu(cores: int, pool_cpus: list[str], sku: str | None) -> tuple[str | None, int]:
    """The CPU of the family the pools' rules chose (EPYC, Xeon, Kunpeng, ...) with the fewest cores
    ≥ ``cores`` in at most the sockets the server SKU has (default 2); else the largest, all sockets."""
    if not pool_cpus:
        return None, 1
    families = {c.split()[0] for c in pool_cpus}
    table = current().catalog.table("cpus")
    options = sorted({str(e["id"]) for e in table if str(e["id"]).split()[0] in families} | set(pool_cpus))
    max_sockets = int(catalog("servers", sku, "cpu_sockets") or 2) if sku else 2
    min_sockets = min(int(catalog("servers", sku, "cpu_sockets_min") or 1) if sku else 1, max_sockets)
    fits = sorted(((catalog("cpus", c, "cores") or 0) * n, n, c) for c in options
                  for n in range(min_sockets, max_sockets + 1)
                  if (catalog("cpus", c, "cores") or 0) * n >= cores)
    if fits:
        return fits[0][2], fits[0][1]
    largest = max(options, key=lambda c: (catalog("cpus", c, "cores") or 0, c))
    return largest, max_sockets


def _size_server(server: Server, gpu: str, pools: dict[str, dict[str, Any]], workload: dict[str, Any],
                 logs_once_tb: float | None, first: bool) -> dict[str, Any]:
    """One physical server sized for the pools it hosts."""
    installed = server_gpus(gpu, server.used, 8)
    sku = server_sku(gpu, installed)
    here = server.pools()
    frac = {p: gpu_share_of(server, p) / max(_v(pools[p], "chosen.gpus", 1), 1) for p in here}
    floor = min(_v(pools[p], "bom.cpu_cores_needed") for p in here)
    cores = max(floor, math.ceil(sum(_v(pools[p], "pack.cpu_cores_per_gpu") * gpu_share_of(server, p) for p in here)))
    cpu, sockets = _cpu(cores, [str(pools[p].get("components.cpu.model")) for p in here
                                if pools[p].get("components.cpu.model")], sku)
    memory_gb = catalog("gpus", gpu, "memory_gb") or 0
    ram_need = max(installed * memory_gb / 2, sum(_v(pools[p], "bom.ram_load_kv_gb") * frac[p] for p in here))
    per_socket = catalog("cpus", cpu, "memory_channels") if cpu else None  # channels of every socket
    channels = int(per_socket * sockets) if per_socket else int(max(_v(pools[p], "bom.memory_channels", 8)
                                                                   for p in here))
    bw = (catalog("cpus", cpu, "memory_bw_gbs") or 0) * sockets if cpu else 0
    links = installed * (pcie_gbs(catalog("gpus", gpu, "pcie_gen"), 16) or 0)
    channels = memory_channels_populated(ram_need, channels, links, bw / channels if bw and channels else None)
    dimm = balanced_dimm_gb(ram_need, channels)
    versions = workload["deployment"]["model_versions"]
    models_tb = sum(_v(pools[p], "bom.weights_gb") / 1000 * versions * 2 for p in here)
    if logs_once_tb is not None:
        logs_tb = logs_once_tb if first else 0.0
    else:
        logs_tb = sum(_v(pools[p], "logs.storage_tb") * frac[p] for p in here)
    store_tb = round(models_tb + logs_tb, 3)
    ssd = next((pools[p].get("bom.model_store_ssd") for p in here if pools[p].get("bom.model_store_ssd")), None)
    min_drives = int(max(_v(pools[p], "bom.model_store_min_drives", 2) for p in here))
    drives = raid10_drives(ssd, store_tb, min_drives) if ssd else 0
    drive_tb = raid10_drive_tb(ssd, store_tb, drives) if ssd else None
    tdp = catalog("gpus", gpu, "tdp_w") or 0
    base_w = max(_v(pools[p], "facility.server_draw_w") - _v(pools[p], "chosen.per_server") * tdp for p in here)
    draw_w = round(base_w + installed * tdp)
    complement = catalog("servers", sku, "psu_complement") or {}
    psu_w = complement.get("usable_w") or max(_v(pools[p], "components.power.psu_total_w") for p in here)
    cooling = "liquid" if any(pools[p].get("components.cooling.type") == "liquid" for p in here) else \
        str(pools[here[0]].get("components.cooling.type") or "air")
    return {"gpus_used": server.used, "gpus_installed": installed, "sku": sku,
            "form": server_label(sku, gpu, installed), "pools": here,
            "gpu_residents": [[{"pool": p, "as": w} for p, w in g] for g in server.gpus],
            "cpu": cpu, "sockets": sockets, "cores_needed": cores,
            "cores_total": int((catalog("cpus", cpu, "cores") or 0) * sockets) if cpu else 0,
            "ram_need_gb": round(ram_need), "dimm_gb": dimm, "channels": channels, "memory_gb": dimm * channels,
            "store_tb": store_tb, "models_tb": round(models_tb, 3), "logs_tb": round(logs_tb, 3),
            "ssd": ssd, "drives": drives, "drive_tb": drive_tb,
            "raid": "RAID 1" if drives == 2 else "RAID 10",
            "draw_w": draw_w, "psu_w": psu_w, "redundancy": complement.get("redundancy"), "cooling": cooling}


def writeoff_months(workload: dict[str, Any]) -> int:
    """Months the hardware is written off over: the horizon, at most the policy's (as the cost rules)."""
    return min(workload["deployment"]["horizon_months"], policy("max_writeoff_months"))


def packed_option(gpu: str, labels: list[str], pools: dict[str, dict[str, Any]], workload: dict[str, Any],
                  rack_limit_kw: float) -> PackedOption | None:
    """Every pool packed into servers of ``gpu``; None when a pool cannot be packed or no server holds it."""
    demands = [demand(lb, pools[lb]) for lb in labels]
    capacity = server_capacity(gpu, 8)
    if any(d is None for d in demands) or capacity < 1:
        return None
    limit = catalog("policies", "max_gpus_per_plan", "value")
    if sum(d.groups * d.group_size + len(d.shares) for d in demands if d is not None) > limit:
        return None  # beyond what one plan designs: each pool's own plan says so (plan.beyond-plan-scale)
    servers = pack_servers([d for d in demands if d is not None], capacity)
    given_logs = workload["deployment"].get("log_storage_tb")
    sized = [_size_server(s, gpu, pools, workload, given_logs, i == 0) for i, s in enumerate(servers)]
    region = workload["deployment"]["region"]
    network = shared_network(labels, pools, len(sized))
    rack = racks_for([s["draw_w"] for s in sized], rack_limit_kw)
    layout = ethernet_layout(len(sized), rack["racks"], rack["servers_per_rack"], network["redundant"],
                             network["spine"]) if network["nic"] else None
    lines: list[dict[str, Any]] = []
    for s in sized:
        for ln in bom_lines(gpu, s["gpus_installed"], 1, s["sku"], region, s["cpu"], s["sockets"],
                            str(pools[s["pools"][0]].get("components.memory.type") or "DDR5 RDIMM"),
                            s["dimm_gb"], s["channels"], s["ssd"], s["drives"], 2, network["nic"],
                            1 if network["nic"] else 0, None, 0, s["cooling"], s["drive_tb"]):
            same = next((x for x in lines if {k: v for k, v in x.items() if k != "qty"}
                         == {k: v for k, v in ln.items() if k != "qty"}), None)
            if same:
                same["qty"] += ln["qty"]
            else:
                lines.append(dict(ln))
    if layout is not None:  # one network for all the shared servers, laid out over their racks
        lines += network_lines(region, network["nic"], network["switch"], layout["switches"], layout["spine"],
                               layout["spines"], layout["dac"], layout["aoc"], layout["uplinks"])
    n = len(sized)
    pue = policy("pue_liquid") if any(s["cooling"] == "liquid" for s in sized) else policy("pue_air")
    price = workload["constraints"]["electricity_cny_per_kwh"]
    electricity = round(sum(s["draw_w"] for s in sized) / 1000 * policy("hours_per_month") * pue * price)
    labour = policy("ops_labour_cny_per_server_month") * n
    opex = electricity + labour
    capex = round(bom_total(lines), 0)
    months = writeoff_months(workload)
    option = PackedOption(gpu, sized, bom=lines)
    option.cost = {"capex_cny": capex,
                   "capex_range_cny": [round(bom_total(lines, "low")), round(bom_total(lines, "high"))],
                   "monthly_opex_cny": opex, "electricity_cny_per_month": electricity,
                   "ops_labour_cny_per_month": labour, "pue": pue,
                   "monthly_cost_cny": round(capex / months + opex)}
    option.components = _components(gpu, sized, pools, labels, rack)
    option.network, option.network_nic = layout or {}, network["nic"]
    return option


def shared_network(labels: list[str], pools: dict[str, dict[str, Any]], servers: int) -> dict[str, Any]:
    """The Ethernet front-end the pools' rules chose (bom.net_*), for their shared servers: the
    fastest NIC any pool needs with its switch, redundant when any pool's is (the strictest
    availability decides) and the spine switch model of the pools' market; no NIC when no pool
    has an Ethernet front-end."""
    nets = [pools[lb] for lb in labels if str(pools[lb].get("bom.net_nic") or "").startswith("ethernet")]
    if not nets:
        return {"nic": None, "switch": None, "redundant": False, "spine": None}
    fastest = max(nets, key=lambda v: int("".join(c for c in str(v["bom.net_nic"]) if c.isdigit()) or 0))
    return {"nic": fastest["bom.net_nic"], "switch": fastest.get("bom.net_switch"),
            "redundant": servers > 1 and any(bool(v.get("bom.net_redundant")) for v in nets),
            "spine": fastest.get("bom.net_spine_model")}


def by_server(values: list[str]) -> str:
    """What each server has, the servers with the same named once: ``v (each server)`` when all
    are alike, else ``v (server 1); w (servers 2, 3)``; ``v`` alone for one server."""
    groups: dict[str, list[int]] = {}
    for k, value in enumerate(values, 1):
        groups.setdefault(value, []).append(k)
    if len(values) == 1:
        return values[0]
    if len(groups) == 1:
        return f"{values[0]} (each server)"
    return "; ".join(f"{v} (server {ks[0]})" if len(ks) == 1 else f"{v} (servers {', '.join(map(str, ks))})"
                     for v, ks in groups.items())


def _join(values: list[Any]) -> Any:
    distinct = list(dict.fromkeys(values))
    return distinct[0] if len(distinct) == 1 else "; ".join(str(v) for v in distinct)


def _components(gpu: str, sized: list[dict[str, Any]], pools: dict[str, dict[str, Any]], labels: list[str],
                rack: dict[str, Any]) -> dict[str, Any]:
    n = len(sized)
    return {
        "servers": {"count": n, "form": _join([s["form"] for s in sized]), "sku": _join([s["sku"] for s in sized]),
                    "gpus_per_server": [s["gpus_installed"] for s in sized], "packed": True},
        "cpu": {"model": _join([s["cpu"] for s in sized]), "sockets": max(s["sockets"] for s in sized),
                "cores_total": sum(s["cores_total"] for s in sized),
                "cores_needed": sum(s["cores_needed"] for s in sized),
                "per_server": [f"{s['sockets']} × {s['cpu']} ({s['cores_total']} cores, {s['cores_needed']} needed)"
                               for s in sized]},
        "memory": {"capacity_gb": sum(s["memory_gb"] for s in sized),
                   "type": _join([pools[lb].get("components.memory.type") for lb in labels]),
                   "channels_populated": max(s["channels"] for s in sized),
                   "dimm_gb": _join([s["dimm_gb"] for s in sized]),
                   "per_server": [f"{s['channels']} × {s['dimm_gb']} GB = {s['memory_gb']} GB "
                                  f"(needs {s['ram_need_gb']} GB)" for s in sized]},
        "storage": {"system": "2 × 480 GB SSD, RAID 1 (OS only) per server",
                    "model_store": by_server([f"{s['drives']} × {s['drive_tb']} TB {s['ssd']}, {s['raid']}"
                                              for s in sized]),
                    "raid": _join([f"RAID 1 (system) + {s['raid']} (model store)" for s in sized]),
                    "capacity_tb": round(sum(s["store_tb"] for s in sized), 3),
                    "usable_tb": round(sum(s["drives"] * (s["drive_tb"] or 0) / 2 for s in sized), 2),
                    "single_store": "one model store per server for every model version it hosts; logs counted once",
                    "per_server": [f"{s['models_tb']} TB models + {s['logs_tb']} TB logs" for s in sized]},
        "power": {"server_draw_w": max(s["draw_w"] for s in sized), "psu_total_w": max(s["psu_w"] for s in sized),
                  "redundancy": _join([s["redundancy"] or "as shipped" for s in sized]),
                  "per_server_w": [s["draw_w"] for s in sized],
                  "psu_per_server": by_server([f"{s['psu_w']} W, {s['redundancy'] or 'as shipped'}" for s in sized])},
        "cooling": {"type": _join([s["cooling"] for s in sized])},
        "rack": rack,
    }


def racks_for(draws_w: list[float], limit_kw: float) -> dict[str, Any]:
    """Racks for servers of different draws: as many per rack as the limit holds of the heaviest
    (the rule rack.servers-per-rack, for every server), filled heaviest first; each rack's load
    is the sum of its servers' draws (``rack_kw``), the heaviest of them ``power_kw_per_rack``."""
    n = len(draws_w)
    per_rack = min(n, max(1, math.floor(limit_kw * 1000 / max(draws_w))))
    heaviest = sorted(draws_w, reverse=True)
    loads = [round(sum(heaviest[i:i + per_rack]) / 1000, 2) for i in range(0, n, per_rack)]
    return {"servers_per_rack": per_rack, "racks": len(loads), "rack_limit_kw": limit_kw,
            "power_kw_per_rack": max(loads), "rack_kw": loads}


def separate_rack(plans: list[dict[str, Any]]) -> dict[str, Any]:
    """Racks for the pools on servers of their own: all servers in the same racks."""
    draws = [float(p["components"]["power"].get("server_draw_w") or 0)
             for p in plans for _ in range(p["components"]["servers"].get("count") or 0)]
    limit = max((p["components"]["rack"].get("rack_limit_kw") or 0) for p in plans)
    if not draws or not max(draws) or not limit:
        return {}
    return racks_for(draws, limit)
