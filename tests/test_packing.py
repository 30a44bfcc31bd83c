"""Several model pools packed into shared servers (engine/domain/fn_packing.py, engine/app/pools_pack.py,
engine/app/pools.py, rules/bom/packing.yaml)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from servewise.engine.app.pools import _dedupe_warnings
from servewise.engine.app.pools_pack import packed_option, racks_for, separate_rack
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.fn_packing import Demand, mig_fit, pack_servers
from servewise.engine.domain.functions import RunContext, reset_context, use_context

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def ctx():
    token = use_context(RunContext(load_catalog()))
    yield
    reset_context(token)


def test_mig_slice_must_hold_the_replica_as_sized(ctx: Any) -> None:
    """G-MEM-020 / G-ISO-005: Llama-3.1-8B bf16 sized at 42.6 GiB for 181 requests in flight (15 GiB
    weights + 2 GiB overhead + 25.6 GiB KV) does not go into a 3g.40gb instance at full load; at a
    tenth of the load the 3g.40gb holds the 19 requests it keeps in flight (re-derived: 116)."""
    kv = 25.6 / 181
    assert mig_fit("H100 SXM", 15, 2, kv, 181, 0.9, 0.9) is None
    fit = mig_fit("H100 SXM", 15, 2, kv, 19, 0.1, 0.9)
    assert fit is not None and fit["profile"] == "3g.40gb"
    room = 40 * 1e9 / 2**30 * 0.9 - 17
    assert fit["concurrency"] == math.floor(room / kv) >= 19
    assert 15 + 2 + kv * fit["concurrency"] <= 40 * 1e9 / 2**30 * 0.9
    assert mig_fit("L40S", 6, 2, 0.1, 10, 0.1, 0.9) is None  # no MIG on L40S


def test_pack_servers_keeps_groups_and_dedicated_tenants() -> None:
    demands = [Demand("a", group_size=2, groups=3), Demand("b", groups=1),
               Demand("c", shares=[(3 / 7, 0.5)], share_label="3g.40gb"),
               Demand("d", shares=[(3 / 7, 0.5)], share_label="3g.40gb"),
               Demand("e", groups=1, own_servers=True)]
    servers = pack_servers(demands, 4)
    assert servers[0].pools() == ["e"] and servers[0].used == 1  # a dedicated tenant shares nothing
    shared = servers[1:]
    assert sum(s.used for s in shared) == 6 + 1 + 1  # c and d share one GPU through MIG
    assert len(shared) == 2
    for s in shared:  # a tensor-parallel pair never spans servers
        assert sum(1 for g in s.gpus for p, _ in g if p == "a") % 2 == 0
    mig_gpu = [g for s in shared for g in s.gpus if len(g) == 2]
    assert [p for p, _ in mig_gpu[0]] == ["c", "d"]


def test_a_pool_that_must_spread_keeps_a_replica_outside_its_first_server() -> None:
    """Under a vetoed single point of failure a pool's replicas (its spare included) must not all
    sit in one server: first-fit would put a, b and c (3 GPUs each) on an 8-GPU server and the
    remainder on a second; each spreading pool then keeps one replica on the other server."""
    demands = [Demand(p, groups=3, spread=True) for p in "abc"]
    servers = pack_servers(demands, 8)
    assert sum(s.used for s in servers) == 9 and all(s.used <= 8 for s in servers)
    for p in "abc":
        assert sum(1 for s in servers if p in s.pools()) >= 2, p
    # without the veto first-fit leaves a and b whole in the first server
    plain = pack_servers([Demand(p, groups=3) for p in "abc"], 8)
    assert [s.pools() for s in plain] == [["a", "b", "c"], ["c"]]
    # a dedicated pool spreads over servers of its own; one replica has nothing to spread
    own = pack_servers([Demand("d", groups=2, own_servers=True, spread=True), Demand("e", groups=1, spread=True)], 8)
    assert [s.pools() for s in own] == [["d"], ["d"], ["e"]]


def _pool(gpus: int, cores: float, ram: float, weights_gb: float, logs_tb: float) -> dict[str, Any]:
    return {"chosen.id": "x", "chosen.gpu": "L40S", "chosen.gpus": gpus, "chosen.tp": 1, "chosen.pp": 1,
            "chosen.per_server": gpus, "chosen.servers_per_replica": 1, "pack.unit": "gpu",
            "pack.may_share_server": True, "bom.cpu_cores_needed": cores, "pack.cpu_cores_per_gpu": 8, "bom.ram_load_kv_gb": ram,
            "bom.memory_channels": 12, "bom.weights_gb": weights_gb, "logs.storage_tb": logs_tb,
            "bom.model_store_ssd": "Samsung PM1743", "bom.model_store_min_drives": 2,
            "facility.server_draw_w": 600 + 350 * gpus, "components.cpu.model": "EPYC 9254",
            "components.memory.type": "DDR5 RDIMM", "components.cooling.type": "air",
            "components.power.psu_total_w": 2000}


def _workload(log_tb: float | None = None) -> dict[str, Any]:
    return {"deployment": {"model_versions": 3, "log_storage_tb": log_tb, "region": "cn", "horizon_months": 36},
            "constraints": {"electricity_cny_per_kwh": 0.8}}


def test_per_server_sizing_counted_once_and_logs_once(ctx: Any) -> None:
    """CPU cores and RAM add up per physical server; one model store holds every model version and
    the given 5 TB log reserve once (G-STO-008), not once per pool."""
    pools = {"a": _pool(2, 16, 40, 15.2, 0.3), "b": _pool(1, 16, 20, 29.5, 0.1)}
    opt = packed_option("L40S", ["a", "b"], pools, _workload(5.0), 6.0)
    assert opt is not None and len(opt.servers) == 1
    s = opt.servers[0]
    assert s["gpus_used"] == 3 and s["cores_needed"] == 24  # 8 per GPU, not two 16-core floors
    assert s["sockets"] <= 2 and s["cores_total"] >= 24
    assert s["logs_tb"] == 5.0  # the reserve once
    assert s["models_tb"] == pytest.approx((15.2 + 29.5) / 1000 * 3 * 2, abs=1e-3)
    assert opt.components["storage"]["capacity_tb"] == pytest.approx(5 + 0.268, abs=1e-3)
    assert s["memory_gb"] >= max(s["gpus_installed"] * 48 / 2, 60)
    assert opt.cost["ops_labour_cny_per_month"] == 2000  # one server, one ops share
    # from the traffic instead: each pool's own logs (different requests), summed
    opt2 = packed_option("L40S", ["a", "b"], pools, _workload(None), 6.0)
    assert opt2 is not None and opt2.servers[0]["logs_tb"] == pytest.approx(0.4)


def test_racks_hold_all_servers(ctx: Any) -> None:
    pools = {f"p{i}": _pool(4, 16, 40, 15, 0.1) for i in range(5)}
    opt = packed_option("L40S", list(pools), pools, _workload(), 6.0)
    assert opt is not None
    n = len(opt.servers)
    rack = opt.components["rack"]
    draw = max(s["draw_w"] for s in opt.servers)
    assert n >= 3
    assert rack["servers_per_rack"] == min(n, math.floor(6000 / draw))
    assert rack["racks"] == math.ceil(n / rack["servers_per_rack"])
    plans = [{"components": {"servers": {"count": 1}, "power": {"server_draw_w": 1500}, "rack": {"rack_limit_kw": 6}}}
             for _ in range(5)]
    assert separate_rack(plans) == {"servers_per_rack": 4, "racks": 2, "rack_limit_kw": 6, "power_kw_per_rack": 6.0,
                                    "rack_kw": [6.0, 1.5]}
    assert sum(rack["rack_kw"]) == pytest.approx(sum(s["draw_w"] for s in opt.servers) / 1000, abs=0.02)


def test_a_rack_of_unequal_servers_draws_what_they_draw() -> None:
    """Servers of different draws: as many per rack as the limit holds of the heaviest, filled
    heaviest first, and each rack's load the sum of its own servers (not the heaviest × count)."""
    rack = racks_for([725, 1475, 1025], 6.0)
    assert rack == {"servers_per_rack": 3, "racks": 1, "rack_limit_kw": 6.0, "power_kw_per_rack": 3.23,
                    "rack_kw": [3.23]}
    rack = racks_for([2500, 1000, 2500, 500], 6.0)  # two 2.5 kW servers fill a rack to 5 kW
    assert rack["servers_per_rack"] == 2 and rack["rack_kw"] == [5.0, 1.5] and rack["power_kw_per_rack"] == 5.0
    two = [{"components": {"servers": {"count": c}, "power": {"server_draw_w": w}, "rack": {"rack_limit_kw": 6}}}
           for c, w in ((2, 2000), (1, 900))]
    assert separate_rack(two)["rack_kw"] == [4.9]


def test_a_warning_several_pools_share_is_shown_once_naming_them() -> None:
    w = {"rule": "r", "severity": "warning", "raw": "same text", "raw_i18n": {"en": "same text", "zh": "同样"}}
    out = _dedupe_warnings([dict(w, pool="A"), dict(w, pool="B"),
                            dict(w, raw="other", raw_i18n={"en": "other"}, pool="A")])
    assert len(out) == 2
    assert out[0]["message"] == "[A, B] same text" and out[0]["pools"] == ["A", "B"]
    assert out[0]["pool"] == "A, B" and out[0]["message_i18n"]["zh"] == "同样"  # renderers prefix the pools
    assert out[1]["message"] == "[A] other"


@pytest.fixture(scope="module")
def three_tenants(example_plans) -> dict[str, Any]:
    return example_plans["multi-model-tenants"].plan


def test_packed_vs_separate_chosen_by_cost(three_tenants: dict[str, Any]) -> None:
    packing = three_tenants["packing"]
    options = [o for o in packing["options"] if o.get("feasible", True)]
    separate = next(o for o in options if o["option"] == "separate")
    cheapest = min(options, key=lambda o: (o["monthly_cost_cny"], o["option"] != "separate"))
    # each pool on its own servers, at least two so a server failure leaves its peak (N+1 at the server, G-OPS-006)
    assert separate["servers"] >= 2 * len(three_tenants["pools"])
    assert packing["chosen"] == ("separate" if cheapest is separate else "packed")
    assert packing["chosen"] == "packed"  # three small pools fit one chassis
    assert f"{cheapest['monthly_cost_cny']:,}" in packing["because"]
    assert packing["because_i18n"]["zh"]
    assert three_tenants["components"]["servers"]["count"] == cheapest["servers"]
    assert three_tenants["cost"]["capex_cny"] == cheapest["capex_cny"]
    assert any(s["rule"] == "pools.pack" for s in three_tenants["trace"])
    # every tenant says what separates it from the others
    assert {t["pool"] for t in packing["tenants"]} == {p["model"] for p in three_tenants["pools"]}
    assert all(t["isolation"] and t["isolation_i18n"]["zh"] for t in packing["tenants"])
    # warnings shared by the pools appear once
    messages = [w["message"] for w in three_tenants["warnings"]]
    assert len(messages) == len(set(messages))


def test_the_packed_plan_is_a_valid_explainable_plan_file(three_tenants: dict[str, Any]) -> None:
    """The packed plan passes the plan-file checks `explain` applies (every premise an earlier step)
    and each shared component is explained by a pools.pack step."""
    import json

    from servewise.engine.app.planfile import validate_plan

    validate_plan(json.loads(json.dumps(three_tenants)), "multi-model-tenants")
    for comp in ("servers", "cpu", "memory", "storage", "power", "rack"):
        steps = [s for s in three_tenants["trace"] if s.get("pool") is None  # not a pool's own step
                 and any(c["fact"].startswith(f"components.{comp}.") for c in s["conclusions"])]
        assert [s["rule"] for s in steps] == ["pools.pack"], comp
        assert steps[0]["because_i18n"]["zh"]
