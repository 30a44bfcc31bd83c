"""Issue #10: plans a buyer can order — site, SKUs, BOM capex, market availability, ranking text."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

from servewise.cli.render import to_text
from servewise.engine.catalog import load_catalog
from servewise.engine.plan import plan_file


def _plan(workload: dict) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(workload, fh)
    try:
        return plan_file(fh.name).plan
    finally:
        Path(fh.name).unlink()


@pytest.fixture(scope="module")
def v3_h100() -> dict:
    return plan_file(EXAMPLES / "deepseek-v3-h100-site-unknown.yaml").plan


@pytest.fixture(scope="module")
def site_8kw() -> dict:
    return plan_file(EXAMPLES / "site-8kw-air.yaml").plan


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
    for plan in (v3_h100, site_8kw):
        gpu, srv = plan["components"]["gpu"], plan["components"]["servers"]
        sku = servers[srv["sku"]]
        assert sku["type"] == "baseboard"
        assert gpu["per_server"] == sku["gpus_max"]
        assert gpu["count"] == srv["count"] * gpu["per_server"]


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
        if ln["unit_price_cny"]:
            assert ln["source"].split(":")[0] in out


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
