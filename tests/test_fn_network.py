"""The RDMA fabric's switch (engine/domain/fn_network.py: fabric_switch), over the shipped catalog and prices."""

from __future__ import annotations

from servewise.engine.domain import fn_network
from servewise.engine.domain.fn_network import fabric_switch


def test_a_small_global_fabric_takes_the_32_port_switch_not_the_sn5600():
    sw = fabric_switch(400, 7, "global")
    assert sw["id"] == "NVIDIA Spectrum-3 SN4700"
    assert (sw["ports"], sw["per_plane"], sw["low_cny"], sw["high_cny"]) == (32, 1, 129600.0, 270000.0)
    assert sw["own_market"] is True
    assert sw["next"] == "NVIDIA Spectrum-4 SN5600" and sw["next_mid_cny"] == 1440000.0


def test_the_cn_market_takes_its_own_priced_switches():
    small = fabric_switch(400, 7, "cn")
    assert small["id"] == "Huawei CloudEngine CE8851-32CQ8DQ-P" and small["ports"] == 8 and small["own_market"]
    large = fabric_switch(400, 40, "cn")
    assert large["id"] == "H3C S9825-64D" and large["ports"] == 64 and large["own_market"]


def test_a_lossless_switch_is_required_even_when_a_cheaper_one_has_the_ports():
    # the 64 x 400G InfiniBand QM9700 (259-360k CNY, no RoCE/PFC) is cheaper than the SN5600 and holds 40 ports
    sw = fabric_switch(400, 40, "global")
    assert sw["id"] == "NVIDIA Spectrum-4 SN5600" and sw["considered"] == 1


def test_domestic_only_reaches_the_other_markets_price_and_says_so():
    sw = fabric_switch(400, 7, "global", True)
    assert sw["id"] == "Huawei CloudEngine CE8851-32CQ8DQ-P"
    assert sw["own_market"] is False


def test_a_plane_no_switch_holds_takes_several_of_the_largest():
    sw = fabric_switch(400, 200, "global")
    assert sw["id"] == "NVIDIA Spectrum-4 SN5600" and sw["ports"] == 128 and sw["per_plane"] == 2


def test_no_switch_at_a_speed_nothing_offers():
    sw = fabric_switch(200, 4, "global")
    assert sw["id"] is None and sw["considered"] == 0


def test_a_restricted_switch_is_not_bought(monkeypatch):
    monkeypatch.setattr(fn_network.fn_bom, "availability_status",
                        lambda part, region: "restricted" if "SN4700" in part else "available")
    assert fabric_switch(400, 7, "global")["id"] == "NVIDIA Spectrum-4 SN5600"
