"""All-reduce links of the performance model (calibration.link_params): NVLink bridges join only
the cards they bridge."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.calibration import link_params


@pytest.mark.parametrize(("gpu", "bridged"), [("A100 80GB PCIe", 2), ("H100 PCIe", 2), ("H100 NVL", 2),
                                              ("A30", 2), ("RTX A6000", 2), ("H200 NVL", 4)])
def test_a_bridged_card_all_reduces_over_nvlink_within_the_bridge_and_pcie_beyond(gpu, bridged):
    g = load_catalog().gpu(gpu)
    assert g["nvlink_bridge_gpus"] == bridged
    inside = link_params(g, n_gpus=bridged)
    beyond = link_params(g, n_gpus=bridged * 2)
    assert inside[0] == "nvlink" and inside[1] == g["link_gbs"] / 2
    assert beyond[0] == "pcie" and beyond[1] < inside[1]
    # the PCIe ring beyond two GPUs: one hop latency per further GPU
    assert beyond[3] == pytest.approx(link_params(dict(g, intra_node="pcie"), n_gpus=2)[3] * (bridged * 2 - 1))


def test_an_nvswitch_baseboard_keeps_nvlink_at_eight_gpus():
    g = load_catalog().gpu("H100 SXM")
    assert "nvlink_bridge_gpus" not in g or g.get("nvlink_bridge_gpus") is None
    assert link_params(g, n_gpus=8)[0] == "nvlink"


def test_a_wider_tp_group_on_a_bridged_card_predicts_a_slower_step():
    """The estimate charges the PCIe ring beyond the bridge: TP 4 on H100 PCIe pairs spends more
    of each decode step on all-reduce than TP 4 with the bridge ignored."""
    from servewise.engine.domain.perf import estimate

    cat = load_catalog()
    g = dict(cat.gpu("H100 PCIe"))
    m = cat.model("Llama-3.1-70B")
    kw = {"tp": 4, "precision": "fp8", "isl": 1024, "osl": 256, "concurrency": 32}
    bridged = estimate(m, g, **kw)
    g.pop("nvlink_bridge_gpus")
    unbridged = estimate(m, g, **kw)
    assert bridged.tpot_ms > unbridged.tpot_ms
