"""Cooling, rack and power guidelines (G-COOL, G-RACK, G-PWR): condition → conclusion."""

from __future__ import annotations

import pytest

COOLING = ["cooling.air-below-4kw", "cooling.hybrid-4-to-6kw", "cooling.liquid-above-6kw",
           "cooling.air-as-shipped-above-6kw", "cooling.air-only-server-above-6kw"]


def _facts(draw_w: float, sku: str = "NVIDIA HGX H100 8-GPU", site: str = "unknown", pays: bool = False) -> dict:
    """One server per rack at ``draw_w``; the site ``site`` (not described by default: the seeds' bands
    then recommend); the server a board sold with an air or a liquid variant; whether cold plates pay
    back within the horizon (cooling.liquid-payback)."""
    return {"mode": "online", "facility.server_draw_w": draw_w, "components.rack.power_kw_per_rack": draw_w / 1000,
            "constraints.cooling_available": site, "components.servers.sku": sku,
            "facility.liquid_pays_back": pays, "facility.liquid_payback_months": 20 if pays else 150,
            "facility.liquid_premium_cny": 400000, "facility.liquid_vs_air_saving_cny_year": 30000,
            "deployment.horizon_months": 36}


def _cooling(run, draw_w: float, **kw) -> str | None:
    return run(COOLING, _facts(draw_w, **kw)).values.get("components.cooling.type")


@pytest.mark.parametrize("draw_w,expected", [(600, "air"), (3999, "air"), (4000, "hybrid")])
def test_g_cool_001(run, draw_w, expected):
    """Below 4 kW of whole-server power air cooling is enough, in a standard 2U/4U chassis."""
    assert _cooling(run, draw_w) == expected
    if expected == "air":
        out = run(COOLING, _facts(draw_w))
        assert out.values["components.cooling.chassis"] == "standard 2U/4U"


@pytest.mark.parametrize("draw_w,expected", [(3999, "air"), (4000, "hybrid"), (6000, "hybrid"), (6001, "liquid")])
def test_g_cool_002(run, draw_w, expected):
    """4-6 kW (both ends included) → hybrid: liquid-cooled GPUs, air-cooled CPUs; above it liquid where the
    site is built for it."""
    assert _cooling(run, draw_w, site="liquid" if draw_w > 6000 else "unknown") == expected


@pytest.mark.parametrize("draw_w,site,pays,expected", [(6000, "unknown", False, "hybrid"),
                                                      (6001, "liquid", False, "liquid"),
                                                      (10200, "unknown", True, "liquid"),
                                                      (10200, "unknown", False, "air")])
def test_g_cool_003(run, draw_w, site, pays, expected):
    """Above 6 kW the band is the room's requirement: liquid cooling (a rack-level solution) is bought for a
    liquid-cooled site or when its premium pays back within the horizon; otherwise the server stays as
    shipped (air) and the room must provide high-density racks; a server sold air-cooled only stays on air."""
    assert _cooling(run, draw_w, site=site, pays=pays) == expected
    out = run(COOLING, _facts(draw_w, site=site, pays=pays))
    if expected == "liquid":
        assert "rack-level" in out.values["components.cooling.chassis"]
        air_only = run(COOLING, _facts(draw_w, "NVIDIA HGX H20 8-GPU", site=site, pays=pays))
        assert air_only.values["components.cooling.type"] == "air"
        assert "high-density air" in air_only.values["components.cooling.chassis"]
    if expected == "air":
        assert out.values["components.cooling.chassis"].startswith("as shipped (air)")


def test_g_cool_004(run):
    """Liquid cooling lowers PUE 1.6 → 1.2: saving = servers × kW × 8,760 h × 0.4 × price; none for air."""
    facts = {"mode": "online", "facility.server_draw_w": 7000, "chosen.servers": 2,
             "constraints.electricity_cny_per_kwh": 0.8}
    liquid = run("cooling.liquid-pue-saving", {**facts, "components.cooling.type": "liquid"})
    assert liquid.values["facility.liquid_saving_cny_year"] == pytest.approx(2 * 7 * 8760 * 0.4 * 0.8)
    air = run("cooling.liquid-pue-saving", {**facts, "components.cooling.type": "air"})
    assert not air.fired("cooling.liquid-pue-saving")


def test_g_cool_005(run):
    """GPU cores must stay below 80 °C under sustained load: the cooling spec carries an 80 °C alert."""
    out = run("cooling.gpu-temperature-limit", {"mode": "online", "chosen.id": "x", "facility.server_draw_w": 3000})
    assert out.values["components.cooling.gpu_temp_alert_c"] == 80


@pytest.mark.parametrize("gpu,warns", [("RTX 4090", True), ("L40S", False), ("H100 SXM", False)])
def test_g_cool_006(run, gpu, warns):
    """Consumer fan-cooled cards wear out under 7×24 load; passively cooled data-centre cards do not warn."""
    out = run("cooling.consumer-card-24x7", {"mode": "online", "chosen.id": "x", "chosen.gpu": gpu})
    assert out.warned("cooling.consumer-card-24x7") is warns


def test_g_rack_001(run):
    """A 42U rack carries 6-10 kW: a server above the rack's limit is flagged, racks are counted by kW."""
    over = run("rack.server-exceeds-rack", {"mode": "online", "facility.server_draw_w": 10200,
                                            "facility.rack_limit_kw": 10, "site.described": True})
    assert over.warned("rack.server-exceeds-rack")
    under = run("rack.server-exceeds-rack", {"mode": "online", "facility.server_draw_w": 9000,
                                             "facility.rack_limit_kw": 10, "site.described": True})
    assert not under.fired("rack.server-exceeds-rack")
    # site unknown: racks planned at up to 6 kW (the seeds' band for air/hybrid), so 2 × 3 kW per rack
    racks = run("rack.servers-per-rack", {"mode": "online", "facility.server_draw_w": 3000, "chosen.servers": 7,
                                          "constraints.rack_power_kw": None, "constraints.cooling_available": "unknown"})
    assert racks.values["components.rack.servers_per_rack"] == 2
    assert racks.values["components.rack.racks"] == 4  # ceil(7 / 2)


def test_g_pwr_005(run):
    """A GPU at TDP around the clock: kWh/day = TDP × 24 h, kWh/year = × 365 (300 W → 7.2 and 2,628)."""
    out = run("power.energy-per-gpu-year", {"mode": "online", "chosen.id": "x", "chosen.gpu": "A10",
                                            "chosen.tdp_w": 300, "constraints.electricity_cny_per_kwh": 0.8})
    assert out.values["facility.gpu_kwh_per_day"] == pytest.approx(7.2)
    assert out.values["facility.gpu_kwh_per_year"] == pytest.approx(2628)


@pytest.mark.parametrize("tdp_w,needs_cable", [(350, True), (76, True), (75, False), (60, False)])
def test_g_pwr_006(run, tdp_w, needs_cable):
    """A GPU needs its own power feed above what the PCIe slot supplies (corrected from 400 W to 75 W)."""
    out = run("power.gpu-auxiliary-power", {"mode": "online", "chosen.id": "x", "chosen.gpu": "g",
                                            "chosen.tdp_w": tdp_w})
    assert ("components.power.gpu_aux_power" in out.values) is needs_cable


@pytest.mark.parametrize("draw_w", [1035, 2500, 7000, 10200])
def test_g_pwr_007(run, draw_w):
    """PSU capacity (N of N+N) is at least 1.5 × the server's draw (a chassis class without a shipped PSU
    complement; a catalog SKU's complement is taken as shipped, power.psu-from-sku)."""
    out = run("power.psu-headroom", {"mode": "online", "facility.server_draw_w": draw_w,
                                     "chosen.sku": None})
    assert out.values["facility.psu_need_w"] == pytest.approx(1.5 * draw_w)
    assert out.values["components.power.psu_total_w"] >= 1.5 * draw_w
    assert out.values["components.power.headroom"] >= 1.5
