"""Guidelines on sharing hardware between models: the VRAM headroom used by sizing and MIG alike
(G-MEM-020, G-ISO-005) and one model store for several models with the logs counted once (G-STO-008)."""

from __future__ import annotations

from typing import Any

import pytest

from servewise.engine.app.pools_pack import packed_option
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext, reset_context, use_context
from servewise.engine.runtime.justify import settled_steps

GIB_PER_GB = 1e9 / 2**30
# Llama-3.1-8B bf16 on an H100 sized for 181 requests in flight: 15 + 2 + 25.6 = 42.6 GiB per GPU
EIGHT_B = {"chosen.id": "x", "chosen.framework": "vLLM", "mode": "online", "model.id": "Llama-3.1-8B", "chosen.precision": "bf16",
           "traffic.avg_input_tokens": 1024, "traffic.avg_output_tokens": 256, "chosen.gpu": "H100 SXM", "chosen.tp": 1, "chosen.pp": 1,
           "chosen.replicas": 1, "chosen.max_concurrency": 181, "chosen.requests_per_s": 20,
           "performance.memory_weights_gib": 15, "performance.memory_overhead_gib": 2,
           "performance.memory_kv_cache_gib": 25.6, "performance.memory_per_gpu_gib": 42.6,
           "constraints.multi_tenant": True, "constraints.tenant_isolation": "hard",
           "mem.usable_vram_fraction": 0.9, "chosen.tpot_ms": 20, "chosen.ttft_ms": 100,
           "sla.tpot_ms": 50, "sla.ttft_ms": 800}
RULES = ["mem.vram-headroom", "packing.whole-gpus", "packing.mig-slice", "isolation.mig-for-tenants"]


def test_g_mem_020(run):
    """One headroom rule: the replica as sized (weights + KV for its requests in flight + overhead)
    within 90 % of the memory, for whole GPUs and MIG instances alike — the 8B sized at 42.6 GiB for
    181 requests at full load does not go into a 3g.40gb instance (40 GB × 0.9 = 33.5 GiB)."""
    assert run("mem.vram-headroom", {"model.id": "Llama-3.1-8B", "mode": "online"}).values[
        "mem.usable_vram_fraction"] == 0.9
    out = run(RULES[1:], {**EIGHT_B, "traffic.peak_qps": 18, "bom.cpu_cores_needed": 16, "chosen.per_server": 1,
                          "chosen.gpus": 1})
    assert not out.fired("packing.mig-slice")
    assert out.values["pack.unit"] == "gpu"
    assert out.values["components.isolation.mig_profile_per_replica"] is None
    assert "whole GPUs" in out.values["components.isolation.layout"]
    assert 42.6 > 40 * GIB_PER_GB * 0.9


def test_g_iso_005(run):
    """A MIG instance is chosen by the same headroom rule, with the concurrency it holds re-derived:
    at a tenth of the load the 8B needs 19 requests in flight, and a 3g.40gb holds 116 of them
    (weights + overhead + KV within 90 % of 40 GB); re-partitioning is planned for maintenance windows."""
    out = run(RULES[1:], {**EIGHT_B, "traffic.peak_qps": 2, "bom.cpu_cores_needed": 16, "chosen.per_server": 1,
                          "chosen.gpus": 1})
    assert out.values["pack.unit"] == "mig"
    assert out.values["pack.slice_profile"] == "3g.40gb"
    held = out.values["pack.slice_concurrency"]
    assert held >= 19
    assert 15 + 2 + 25.6 / 181 * held <= 40 * GIB_PER_GB * 0.9
    assert out.values["components.isolation.mig_profile_per_replica"] == "3g.40gb"
    assert any("maintenance windows" in st["because"]["en"] for st in settled_steps(out.mem))
    # day / night: with an offline share the night layout keeps what the night load needs
    night = run(["packing.whole-gpus", "packing.night-repartition"],
                {**EIGHT_B, "traffic.peak_qps": 18, "traffic.night_to_peak": 0.2, "chosen.gpus": 1,
                 "deployment.night_offline_share": 0.5, "bom.cpu_cores_needed": 16, "chosen.per_server": 1})
    assert night.values["pack.night_online_gpus"] == pytest.approx(3 / 7, abs=1e-3)  # a 3g.40gb at night
    assert night.values["pack.night_offline_gpus"] >= night.values["pack.night_offline_wanted_gpus"]
    assert "maintenance window" in night.values["components.isolation.night_layout"]


@pytest.fixture()
def ctx():
    token = use_context(RunContext(load_catalog()))
    yield
    reset_context(token)


def _pool(weights_gb: float) -> dict[str, Any]:
    return {"chosen.id": "x", "chosen.gpu": "L40S", "chosen.gpus": 1, "chosen.tp": 1, "chosen.pp": 1,
            "chosen.per_server": 1, "pack.unit": "gpu", "pack.may_share_server": True, "pack.cpu_cores_per_gpu": 8,
            "bom.cpu_cores_needed": 16, "bom.ram_load_kv_gb": 40, "bom.memory_channels": 12,
            "bom.weights_gb": weights_gb, "logs.storage_tb": 5, "bom.model_store_ssd": "Samsung PM1743",
            "bom.model_store_min_drives": 2, "facility.server_draw_w": 950, "components.cpu.model": "EPYC 9254",
            "components.memory.type": "DDR5 RDIMM", "components.cooling.type": "air",
            "components.power.psu_total_w": 2000}


def test_g_sto_008(ctx: Any) -> None:
    """The seed's three-model store: (140 + 145 + 670) GB × 3 versions × 2 + 5,000 GB of logs ≈ 10.7 TB
    in one store — the 5 TB log reserve counted once, not once per model (which would be 20.7 TB)."""
    pools = {"Llama-3.1-70B": _pool(140), "Qwen2.5-72B": _pool(145), "DeepSeek-V3": _pool(670)}
    workload = {"deployment": {"model_versions": 3, "log_storage_tb": 5, "region": "cn", "horizon_months": 36},
                "constraints": {"electricity_cny_per_kwh": 0.8}}
    opt = packed_option("L40S", list(pools), pools, workload, 6.0)
    assert opt is not None and len(opt.servers) == 1
    assert opt.components["storage"]["capacity_tb"] == pytest.approx(10.73, abs=0.001)
    assert opt.servers[0]["logs_tb"] == 5
    s = opt.servers[0]
    assert s["drives"] * s["drive_tb"] / 2 >= 10.73  # mirrored: half the raw capacity is usable
