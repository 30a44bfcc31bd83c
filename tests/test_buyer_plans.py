"""Issue #10: plans a buyer can order — site, SKUs, BOM capex, market availability, ranking text."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

from servewise.cli.render import to_text
from servewise.engine.app.plan import plan_file
from servewise.engine.domain.catalog import load_catalog


def _plan(workload: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(workload, fh)
    try:
        return plan_file(fh.name).plan
    finally:
        Path(fh.name).unlink()


@pytest.fixture(scope="module")
def v3_h100(example_plans) -> dict:
    return example_plans["deepseek-v3-h100-site-unknown"].plan


@pytest.fixture(scope="module")
def site_8kw(example_plans) -> dict:
    return example_plans["site-8kw-air"].plan


def _mid_sum(plan: dict, i: int | None = None) -> float:
    total = 0.0
    for ln in plan["bom"]:
        rng = ln["unit_price_cny"]
        if rng:
            total += ln["qty"] * (sum(rng) / 2 if i is None else rng[i])
    return total


# 1. facilities: an undescribed site never makes a standard server infeasible
def test_unknown_site_plans_8_gpu_hgx_and_states_site_needs(v3_h100):
    assert v3_h100["feasible"], "DeepSeek-V3 FP8 on H100 SXM must be feasible with the site unknown"
    assert v3_h100["workload"]["constraints"]["cooling_available"] == "unknown"
    assert not [r for r in v3_h100["rejected"] if r["rule"].startswith("site.")]
    needs = [w for w in v3_h100["warnings"] if w["rule"] == "cooling.site-requirements"]
    assert needs and "kW" in needs[0]["message"]


def test_described_site_is_respected(site_8kw):
    rack = site_8kw["components"]["rack"]
    assert rack["power_kw_per_rack"] <= 8
    assert site_8kw["components"]["power"]["server_draw_w"] <= 8000
    assert site_8kw["components"]["cooling"]["type"] == "air"  # the site offers nothing else


# 2. server SKUs: whole boards, SKU named, PSUs as shipped
def test_sxm_plans_use_whole_boards_from_the_catalog(v3_h100, site_8kw):
    servers = {e["id"]: e for e in load_catalog().table("servers")}
    gpus = load_catalog().table("gpus")
    for plan in (v3_h100, site_8kw):
        gpu, srv = plan["components"]["gpu"], plan["components"]["servers"]
        sku = servers[srv["sku"]]
        if gpus.get(gpu["model"])["form_factor"] in ("SXM", "OAM"):
            assert sku["type"] == "baseboard"
            assert gpu["per_server"] == sku["gpus_max"]
            assert gpu["count"] == srv["count"] * gpu["per_server"]
        else:  # PCIe cards go into a chassis class, never more than its slots
            assert sku["type"] == "chassis-class" and gpu["per_server"] <= sku["gpus_max"]
    assert gpus.get(v3_h100["components"]["gpu"]["model"])["form_factor"] == "SXM"


def test_psu_layout_comes_from_the_sku(v3_h100):
    power = v3_h100["components"]["power"]
    assert power["psu_units"] == 6 and power["psu_module_w"] == 3300
    assert power["redundancy"].startswith("4+2")
    assert power["psu_total_w"] >= power["server_draw_w"]


def test_a_one_gpu_need_is_a_pcie_card_not_a_partial_board():
    plan = _plan({"model": "Qwen2.5-14B", "traffic": {"peak_qps": 0.5}})
    gpu = plan["components"]["gpu"]
    form = load_catalog().gpu(gpu["model"])["form_factor"]
    assert form not in ("SXM", "OAM") or gpu["per_server"] in (4, 8)


# 3. capex is the bill of materials, with a range
def test_capex_is_the_sum_of_bom_midpoints_and_the_range_its_ends(v3_h100, site_8kw):
    for plan in (v3_h100, site_8kw):
        cost = plan["cost"]
        assert cost["capex_cny"] == pytest.approx(_mid_sum(plan), abs=1)
        assert cost["capex_range_cny"] == pytest.approx([_mid_sum(plan, 0), _mid_sum(plan, 1)], abs=1)
        assert cost["capex_range_cny"][0] <= cost["capex_cny"] <= cost["capex_range_cny"][1]
        for ln in plan["bom"]:
            assert set(ln) >= {"part", "category", "qty", "unit_price_cny", "source", "date"}
            if ln["unit_price_cny"] is None:
                assert ln["source"].startswith("unpriced:") and ln["part"] in cost["unpriced_parts"]


def test_bom_is_rendered_with_the_range(v3_h100):
    text = to_text(v3_h100)
    assert "Bill of materials" in text and "range" in text


def test_explain_cost_reaches_each_bom_line_source(v3_h100, cli, tmp_path):
    path = tmp_path / "plan.json"
    import json

    path.write_text(json.dumps(v3_h100), encoding="utf-8")
    out = cli("explain", str(path), "cost").output
    for ln in v3_h100["bom"]:
        if ln["unit_price_cny"]:  # the price entry id (the text after it is wrapped)
            assert ln["source"].split(" ")[0].split(":")[0] in out


# 4. every orderable GPU has a price or a stated reason
def test_every_gpu_the_issue_names_is_priced_or_rejected_with_a_reason():
    plan = _plan({"model": "Llama-3.1-8B", "precision": "int8",
                  "constraints": {"gpu_models": ["H20", "A800", "L4", "T4", "A100 80GB SXM"]}})
    unpriced = [r for r in plan["rejected"] if r["rule"] == "cost.candidate-needs-price"]
    assert not unpriced, [r["option"] for r in unpriced]


# 5. market and availability
def test_restricted_gpu_warns_with_the_dated_fact(v3_h100):
    warn = [w for w in v3_h100["warnings"] if w["rule"] == "market.restricted-part-warning"]
    assert warn and "av-h100-sxm-cn" in warn[0]["message"] and "2023-10-17" in warn[0]["message"]


def test_exclude_restricted_removes_the_part_and_names_the_fact():
    plan = _plan({"model": "Llama-3.1-8B", "precision": "bf16",
                  "constraints": {"exclude_restricted": True, "gpu_models": ["H100 SXM", "L20"]}})
    assert plan["components"]["gpu"]["model"] == "L20"
    h100 = [r for r in plan["rejected"] if r["option"].startswith("H100 SXM")]
    assert h100 and all("av-h100-sxm-cn" in r["because"] for r in h100)


def test_region_selects_the_market_price():
    cn = _plan({"model": "Llama-3.1-8B", "precision": "bf16", "constraints": {"gpu_models": ["H100 SXM"]}})
    gl = _plan({"model": "Llama-3.1-8B", "precision": "bf16", "constraints": {"gpu_models": ["H100 SXM"]},
                "deployment": {"region": "global"}})
    price = {p["id"]: p for p in load_catalog().table("market-prices")}
    lines = {plan["workload"]["deployment"]["region"]: next(ln for ln in plan["bom"] if ln["category"] == "gpu")
             for plan in (cn, gl)}
    assert lines["cn"]["unit_price_cny"] == [price["mp-h100-sxm-card-cn"]["low_cny"],
                                            price["mp-h100-sxm-card-cn"]["high_cny"]]
    assert lines["global"]["unit_price_cny"] == [price["mp-h100-sxm-card-global"]["low_cny"],
                                                price["mp-h100-sxm-card-global"]["high_cny"]]


# 6. ranking reads as a buyer expects
def test_rejected_alternatives_never_list_the_chosen_gpu_against_itself(v3_h100):
    text = to_text(v3_h100)
    block = text.split("Rejected alternatives", 1)[1].split("\n\n", 1)[0]
    chosen = v3_h100["components"]["gpu"]["model"]
    assert f"  - {chosen}:" not in block
    assert "size-tier GPU 0" not in block and "size-tier GPU 1" not in block


# ------------------------------------------------------------------ session 18: gaps of #10, #11 item 4

def _costed(example_plans) -> dict[str, dict]:
    return {name: ex.plan for name, ex in example_plans.items() if ex.plan.get("bom")}


# parts listed as unpriced (never invented, left out of the sum) because no public price was found
UNPRICED_KNOWN = {"interconnect": "the NVLink bridges of Ampere PCIe cards (A30, A100 PCIe): no dated public price "
                                  "found (session 42: Lenovo lists the H200 NVL bridge only)"}


def test_every_example_bom_line_is_priced_and_capex_is_its_midpoint_sum(example_plans):
    costed = _costed(example_plans)
    assert len(costed) >= 15
    for name, plan in costed.items():
        unpriced = [ln for ln in plan["bom"] if ln["unit_price_cny"] is None]
        if plan["workload"].get("mode") == "edge":  # carrier, enclosure, M.2 drive: no sourced price yet
            assert all(ln["source"].startswith("unpriced: ") and "quote" in ln["source"] for ln in unpriced), name
            assert all(ln["category"] != "gpu" for ln in unpriced), name
        else:
            assert all(ln["category"] in UNPRICED_KNOWN and ln["source"].startswith("unpriced: ") for ln in unpriced), \
                f"{name}: unpriced BOM lines {[ln['part'] for ln in unpriced]}"
        assert plan["cost"]["capex_cny"] == pytest.approx(_mid_sum(plan), abs=2), name
        for ln in plan["bom"]:
            assert ln["source"], (name, ln["part"])


def test_ssd_nic_switch_and_optics_lines_name_their_price_entry(v3_h100):
    ids = {p["id"] for p in load_catalog().table("market-prices")}
    by_cat = {}
    for ln in v3_h100["bom"]:
        by_cat.setdefault(ln["category"], []).append(ln)
    for cat in ("ssd", "nic", "switch", "optics"):
        assert cat in by_cat, cat
        for ln in by_cat[cat]:
            assert ln["source"].split(" ")[0] in ids, ln
    ssd = by_cat["ssd"][0]
    tb = float(ssd["part"].split()[-2])
    per_tb = next(p for p in load_catalog().table("market-prices") if p["id"] == "mp-nvme-per-tb-cn")
    assert ssd["unit_price_cny"] == pytest.approx([per_tb["low_cny"] * tb, per_tb["high_cny"] * tb], abs=1)


def test_estimated_prices_are_marked_as_estimates(example_plans):
    status = {p["id"]: p["status"] for p in load_catalog().table("market-prices")}
    for plan in _costed(example_plans).values():
        for ln in plan["bom"]:
            entry = ln["source"].split(" ")[0]
            if status.get(entry) == "estimate":
                assert "(estimate" in ln["source"], ln


def test_hgx_and_oem_8_gpu_platforms_are_dual_socket_in_plan_and_bom(example_plans):
    servers = {e["id"]: e for e in load_catalog().table("servers")}
    checked = 0
    for name, plan in _costed(example_plans).items():
        sku = plan["components"]["servers"].get("sku")
        entry = servers.get(sku)
        if not entry or (entry.get("cpu_sockets_min") or 1) < 2:
            continue
        cpu = plan["components"]["cpu"]
        assert cpu["sockets"] == entry["cpu_sockets_min"] == 2, name
        cpu_lines = [ln for ln in plan["bom"] if ln["category"] == "cpu"]
        assert sum(ln["qty"] for ln in cpu_lines) == 2 * plan["components"]["servers"]["count"], name
        assert plan["components"]["memory"]["channels_populated"] % 2 == 0, name
        checked += 1
    assert checked >= 5


def test_every_sxm_and_system_sku_has_a_maximum_draw_with_its_status():
    for entry in load_catalog().table("servers"):
        if entry["type"] == "baseboard" and entry["gpus_max"] >= 4:
            assert entry.get("max_power_w"), entry["id"]
            assert entry.get("max_power_status") in ("verified", "datasheet-recall", "estimate"), entry["id"]
            fields = [f for s in entry["sources"] for f in s.get("fields") or []]
            assert "max_power_w" in fields, entry["id"]


def test_h20_server_draw_is_the_skus_maximum_not_the_gpu_sum(example_plans):
    plan = example_plans["deepseek-r1-h20"].plan
    sku = load_catalog().table("servers").get(plan["components"]["servers"]["sku"])
    draw = plan["components"]["power"]["server_draw_w"]
    assert draw == sku["max_power_w"] and 5500 <= draw <= 6500
    assert draw > 8 * load_catalog().gpu("H20")["tdp_w"] * 1.5


def test_seed_cross_check_says_why_ranges_disagree():
    from servewise.engine.app.kbcheck import seed_price_crosscheck

    apart = [c["check"] for c in seed_price_crosscheck() if "the BOM is above it" in c["check"]]
    assert apart and all("the seed's server price" in c for c in apart)


def test_restricted_part_names_closest_unrestricted_alternative_with_cost_difference():
    plan = _plan({"model": "Llama-3.1-8B", "sla": {"ttft_ms": 2000, "tpot_ms": 60},
                  "traffic": {"peak_qps": 40, "avg_input_tokens": 1024, "avg_output_tokens": 256},
                  "constraints": {"gpu_models": ["H100 PCIe", "L20"]}})
    if plan["components"]["gpu"]["model"] != "H100 PCIe":
        pytest.skip("the cheaper unrestricted L20 won outright; nothing to warn")
    warn = next(w for w in plan["warnings"] if w["rule"] == "market.restricted-part-warning")
    assert "av-h100-pcie-cn" in warn["message"] and "× L20" in warn["message"] and "CNY (" in warn["message"]


# #11 item 4: domestic compliance through the BOM
@pytest.mark.parametrize("name", ["qwen-72b-domestic", "domestic-14b", "domestic-compliance"])
def test_domestic_plans_use_ascend_tools_os_and_name_foreign_parts(example_plans, name):
    plan = example_plans[name].plan
    comps = plan["components"]
    assert comps["cpu"]["model"].startswith("Kunpeng")
    assert comps["software"]["framework"] == "MindIE"
    assert "openEuler" in comps["software"]["os"] and "Kylin" in comps["software"]["os"]
    assert comps["loadtest"]["tool"].startswith("MindIE Benchmark")
    assert "vllm bench" not in comps["loadtest"]["command"]
    dom = [w for w in plan["warnings"] if w["rule"] == "market.domestic-bom"]
    assert dom and "every part bought separately is domestic" in dom[0]["message"]
    assert comps["storage"]["drive"].startswith(("Memblaze", "YMTC", "DapuStor"))
    assert comps["network"]["switch"] in (None, "none") or comps["network"]["switch"].startswith(("Huawei", "H3C"))
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.fn_bom import foreign_parts
    from servewise.engine.domain.functions import RunContext, reset_context, use_context
    token = use_context(RunContext(catalog=load_catalog()))
    try:
        assert foreign_parts(plan["bom"]) == []  # no foreign drive, switch or NIC bought separately
    finally:
        reset_context(token)
    notes = {w["rule"] for w in plan["warnings"]}
    assert not notes & {"thumb.l40s-bandwidth", "thumb.four-l20-preset", "thumb.tier-large-model"}


def test_domestic_examples_carry_an_expert_rationale():
    for name in ("qwen-72b-domestic", "domestic-14b", "domestic-compliance"):
        head = (EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8")
        assert "Expert rationale" in head, name


# #37: a platform is never cheaper than the parts it includes, orderable GPUs by default
def test_no_example_prices_a_platform_below_the_parts_it_includes(example_plans):
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.fn_bom import platform_shortfalls
    from servewise.engine.domain.functions import RunContext, reset_context, use_context

    token = use_context(RunContext(catalog=load_catalog()))
    try:
        short = {n: platform_shortfalls(ex.plan.get("bom")) for n, ex in example_plans.items()}
    finally:
        reset_context(token)
    assert {n: s for n, s in short.items() if s} == {}
    included = [ln for ex in example_plans.values() for ln in ex.plan.get("bom") or [] if ln.get("included_in")]
    assert included and any(ln.get("alone_cny") for ln in included)  # the check had parts to weigh


def test_platform_shortfalls_finds_a_platform_priced_below_its_parts():
    from servewise.engine.domain.fn_bom import platform_shortfalls

    lines = [{"part": "P", "category": "platform", "qty": 1, "unit_price_cny": [80000, 130000]},
             {"part": "EPYC 9554", "category": "cpu", "qty": 2, "unit_price_cny": [0, 0], "included_in": "P",
              "alone_cny": [65000, 70000]}]
    assert platform_shortfalls(lines) == [{"part": "P", "price_cny": 80000, "parts_cny": 130000,
                                           "parts": ["2 × EPYC 9554"]}]
    lines[0]["unit_price_cny"] = [140000, 160000]
    assert platform_shortfalls(lines) == []


def test_no_cn_example_chooses_a_restricted_gpu_unless_allowed(example_plans):
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.fn_bom import availability_status
    from servewise.engine.domain.functions import RunContext, reset_context, use_context

    token = use_context(RunContext(catalog=load_catalog()))
    try:
        for name, ex in example_plans.items():
            plan = ex.plan
            wl = plan["workload"]
            gpu = plan["components"].get("gpu", {}).get("model")
            if not gpu or wl["deployment"]["region"] != "cn" or not plan.get("feasible"):
                continue
            for model in gpu.split("; "):
                restricted = availability_status(model, "cn") == "restricted"
                assert not restricted or wl["constraints"].get("allow_restricted"), name
                if restricted:
                    assert any(w["rule"] == "market.restricted-part-warning" for w in plan["warnings"]), name
    finally:
        reset_context(token)
    shown = [n for n, ex in example_plans.items()
             if any(w["rule"] == "market.restricted-option" for w in ex.plan["warnings"])]
    assert len(shown) >= 10  # the best restricted option is shown beside the orderable plans


def test_a_7b_chat_for_ten_users_fits_60000_cny(example_plans):
    plan = example_plans["chat-7b-10-users-60k"].plan
    assert plan["feasible"] is True
    assert plan["cost"]["capex_cny"] <= 60000
    assert plan["components"]["servers"]["count"] == 1


# #38 item 2: cooling that pays — no liquid premium for an unknown site unless it pays back
def test_no_unknown_site_buys_a_liquid_premium_that_does_not_pay_back(example_plans):
    checked = 0
    for name, ex in example_plans.items():
        plan = ex.plan
        if plan["workload"].get("mode") == "edge" or not plan.get("feasible"):
            continue
        if plan["workload"]["constraints"].get("cooling_available") != "unknown":
            continue
        premium = [ln for ln in plan["bom"] if ln["category"] == "cooling"]
        payback = [w["message"] for w in plan["warnings"] if w["rule"] == "cooling.liquid-payback"]
        if premium:
            assert payback and "pays back within the horizon" in payback[0] and "does not" not in payback[0], name
        if payback and "does not pay back" in payback[0]:
            checked += 1
            assert not premium and plan["components"]["cooling"]["type"] != "liquid", name
    assert checked >= 2  # the site-unknown 8-GPU plans were liquid before issue #38


def test_bridged_pcie_cards_buy_their_nvlink_bridges(example_plans):
    """A tensor-parallel group of PCIe cards that the performance model links over NVLink (catalog
    nvlink_bridge_gpus) needs the bridge: one per group, in the BOM; one-card replicas and cards
    without a bridge buy none."""
    from servewise.engine.domain.catalog import load_catalog

    gpus = load_catalog().table("gpus")
    seen = 0
    for name, ex in example_plans.items():
        plan = ex.plan
        gpu = plan["components"].get("gpu") or {}
        if plan.get("pools") or not plan.get("bom") or not gpu.get("model"):
            continue
        bridges = [ln for ln in plan["bom"] if ln["category"] == "interconnect"]
        joins = gpus.get(gpu["model"]).get("nvlink_bridge_gpus")
        tp = gpu.get("tensor_parallel") or 1
        if joins and 1 < tp <= joins:
            seen += 1
            assert [(ln["part"], ln["qty"]) for ln in bridges] == [
                (f"NVLink bridge {tp}-way ({gpu['model']})", gpu["replicas"])], name
            assert plan["components"]["interconnect"]["intra_node"] == "nvlink", name
        else:
            assert not bridges, name
    assert seen >= 3  # chat-70b-online, cuda-team-nvidia-amd (H200 NVL), the A30 pilots
    chat = example_plans["chat-70b-online"].plan
    line = next(ln for ln in chat["bom"] if ln["category"] == "interconnect")
    assert line["unit_price_cny"] and line["source"].startswith("mp-nvlink-bridge-h200-nvl-2way-global")
