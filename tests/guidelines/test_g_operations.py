"""Operations, software, isolation, vendor, edge and cost guidelines (G-OPS, G-TEST, G-SW, G-ISO, G-VEND,
G-EDGE, G-SCEN, G-COST)."""

from __future__ import annotations

import pytest

CHOSEN = {"chosen.id": "x"}
SERVING = {**CHOSEN, "chosen.tp": 1, "chosen.replicas": 2, "chosen.max_concurrency": 32, "chosen.precision": "fp8",
           "traffic.max_context_tokens": 8192, "model.attention_type": "GQA"}
FRAMEWORKS = ["software.vllm-default", "software.trtllm-for-tensorrt-teams", "software.mindie-for-ascend",
              "software.vllm-rocm-for-amd"]


@pytest.mark.parametrize("vendor,stack", [("nvidia", "NVIDIA DCGM exporter"), ("amd", "AMD Device Metrics Exporter"),
                                          ("huawei", "Ascend NPU exporter")])
def test_g_ops_003(run, vendor, stack):
    """Telemetry exporter → Prometheus/Grafana with alerts, DCGM on NVIDIA (the vendor's exporter otherwise)."""
    out = run(["monitoring.dcgm-prometheus", "monitoring.vendor-exporter"],
              {**CHOSEN, "chosen.vendor": vendor, "chosen.gpu": "g"})
    assert out.values["components.monitoring.stack"].startswith(stack)
    assert "Prometheus" in out.values["components.monitoring.stack"]


@pytest.mark.parametrize("gpu,warns", [("RTX 4090", True), ("L40S", False)])
def test_g_ops_004(run, gpu, warns):
    """Consumer GPUs expose few monitoring counters: choosing one is flagged, a data-centre card is not."""
    out = run("vendor.consumer-gpu-ops", {**CHOSEN, "chosen.gpu": gpu})
    assert out.warned("vendor.consumer-gpu-ops") is warns


@pytest.mark.parametrize("vendor", ["nvidia", "amd", "huawei"])
def test_g_ops_005(run, vendor):
    """Pin a long-term-support data-centre driver for the service's life; upgrade only in windows."""
    out = run("software.lts-driver", {**CHOSEN, "chosen.vendor": vendor, "deployment.horizon_months": 24})
    driver = out.values["components.software.driver"]
    assert "pinned for the 24-month service" in driver


def test_g_test_005(run):
    """Before deployment, profile peak memory in the production container and keep a buffer."""
    out = run("loadtest.memory-profile-first", {**CHOSEN, "chosen.precision": "int4", "chosen.gpu": "L40S"})
    steps = out.values["components.loadtest.preparation"]
    assert any("peak GPU and host memory" in s and "buffer" in s for s in steps)


def test_g_test_003(run):
    """Quantised plans verify accuracy and the real speed-up on the target GPU; 16-bit plans do not need to."""
    quant = run("loadtest.memory-profile-first", {**CHOSEN, "chosen.precision": "int4", "chosen.gpu": "L40S"})
    assert any("accuracy" in s and "L40S" in s for s in quant.values["components.loadtest.preparation"])
    plain = run("loadtest.memory-profile-first", {**CHOSEN, "chosen.precision": "bf16", "chosen.gpu": "L40S"})
    assert not any("accuracy within tolerance" in s for s in plain.values["components.loadtest.preparation"])


LOADTEST = {**CHOSEN, "performance.max_concurrency": 108, "performance.output_tokens_per_s": 3000, "mode": "online",
            "sla.ttft_ms": 1000, "sla.tpot_ms": 50, "traffic.peak_qps": 10, "traffic.avg_input_tokens": 1024,
            "traffic.avg_output_tokens": 256, "model.id": "Llama-3.1-70B", "components.software.framework": "vLLM"}


def test_g_test_006(run):
    """Load-test at several concurrency levels with the vLLM benchmark, judged on P99 and throughput."""
    out = run("loadtest.plan", LOADTEST)
    v = out.values
    assert v["components.loadtest.concurrencies"] == [54, 108, 162]
    assert v["components.loadtest.target_p99_ttft_ms"] == 1000
    assert v["components.loadtest.tool"] == "vllm bench serve"
    assert "--max-concurrency C" in v["components.loadtest.command"]
    assert "request throughput ≥ 10 requests/s" in v["components.loadtest.acceptance"]


def test_g_test_007(run):
    """Go-live: P99 within target at the planned concurrency, throughput met, stable, no OOM."""
    acceptance = " | ".join(run("loadtest.plan", LOADTEST).values["components.loadtest.acceptance"])
    assert "P99 TTFT ≤ 1000 ms" in acceptance and "≥ 10 requests/s" in acceptance
    assert "stable" in acceptance and "out-of-memory" in acceptance


def test_g_test_008(run):
    """The benchmark is `vllm bench serve` (not 'bench_serving', not ab) and reports percentiles."""
    command = run("loadtest.plan", LOADTEST).values["components.loadtest.command"]
    assert command.startswith("vllm bench serve ") and "bench_serving" not in command
    assert "--metric-percentiles 50,99" in command and "ttft" in command


@pytest.mark.parametrize("vendor,skills,framework", [("nvidia", ["cuda"], "vLLM"),
                                                     ("nvidia", ["cuda", "tensorrt"], "TensorRT-LLM"),
                                                     ("huawei", [], "MindIE")])
def test_g_sw_006(run, vendor, skills, framework):
    """Framework: Ascend → MindIE; a team that can build engines → TensorRT-LLM; otherwise vLLM."""
    out = run(FRAMEWORKS, {**SERVING, "chosen.vendor": vendor, "constraints.team_skills": skills})
    assert out.values["components.software.framework"] == framework


def test_g_sw_007(run):
    """Continuous batching is always on in the serving settings."""
    out = run(FRAMEWORKS, {**SERVING, "chosen.vendor": "nvidia", "constraints.team_skills": []})
    assert out.values["components.software.settings"]["continuous_batching"] is True


def test_g_sw_008(run):
    """vLLM settings: --gpu-memory-utilization 0.9, max-num-seqs sized to the SLA-limited batch."""
    settings = run(FRAMEWORKS, {**SERVING, "chosen.vendor": "nvidia",
                                "constraints.team_skills": []}).values["components.software.settings"]
    assert settings["gpu_memory_utilization"] == 0.9
    assert settings["max_num_seqs"] == 32


def test_g_sw_004(run):
    """After deployment: an inference framework (not native loading), dynamic batching, quantisation."""
    steps = run("software.deployment-steps", {**CHOSEN, "chosen.precision": "fp8"}).values[
        "components.software.deployment_steps"]
    text = " ".join(steps)
    assert "not native PyTorch" in text and "batching" in text and "fp8 quantized" in text


@pytest.mark.parametrize("gpu,method", [("H100 SXM", "MIG"), ("A100 80GB SXM", "MIG")])
def test_g_iso_003(run, gpu, method):
    """Multi-tenant on a MIG-capable GPU → MIG instances with dedicated memory and compute."""
    out = run("isolation.mig-for-tenants", {**CHOSEN, "constraints.multi_tenant": True, "chosen.gpu": gpu,
                                            "chosen.tp": 1, "chosen.weights_gib": 15})
    assert out.values["components.isolation.method"] == method


@pytest.mark.parametrize("gpu", ["L40S", "L20", "A10"])
def test_g_iso_007(run, gpu):
    """MIG support is checked per SKU: L40S, L20 and A10 (data-centre cards) have none, so no MIG layout."""
    out = run(["isolation.mig-for-tenants", "isolation.no-mig-whole-gpus"],
              {**CHOSEN, "constraints.multi_tenant": True, "chosen.gpu": gpu, "chosen.tp": 1,
               "chosen.weights_gib": 15, "chosen.replicas": 2})
    assert not out.fired("isolation.mig-for-tenants")
    assert out.fired("isolation.no-mig-whole-gpus")


def test_g_iso_010(run):
    """Single tenant: each replica in its own container pinned to its own GPUs, no GPU shared."""
    out = run("isolation.dedicated-containers", {**CHOSEN, "constraints.multi_tenant": False, "chosen.replicas": 3,
                                                 "chosen.tp": 2})
    assert out.values["components.isolation.method"] == "containers"
    assert out.values["components.isolation.layout"].startswith("3 container(s)")


@pytest.mark.parametrize("skills,warns", [(["cuda"], True), (["rocm"], False)])
def test_g_vend_003(run, skills, warns):
    """AMD only with a team that can handle ROCm: without that skill the choice is flagged."""
    out = run("vendor.rocm-skill-risk", {**CHOSEN, "chosen.vendor": "amd", "chosen.gpu": "AMD MI300X",
                                         "constraints.team_skills": skills})
    assert out.warned("vendor.rocm-skill-risk") is warns


def test_g_test_009(run):
    """On Ascend: run test samples end to end first, then add instances and concurrency step by step."""
    out = run("loadtest.ascend-staged-bringup", {**CHOSEN, "chosen.vendor": "huawei"})
    assert out.fired("loadtest.ascend-staged-bringup")
    assert not run("loadtest.ascend-staged-bringup", {**CHOSEN, "chosen.vendor": "nvidia"}).fired(
        "loadtest.ascend-staged-bringup")


@pytest.mark.parametrize("streams,units", [(8, 1), (9, 2), (20, 3)])
def test_g_edge_003(run, streams, units):
    """One Jetson AGX Orin per 8 × 1080p streams: modules = ceil(streams ÷ 8)."""
    out = run("edge.jetson-module", {"mode": "edge", "constraints.domestic_only": False, "edge.video_streams": streams})
    assert out.values["components.edge.units"] == units


@pytest.mark.parametrize("budget_w,warns", [(100, True), (200, False)])
def test_g_edge_002(run, budget_w, warns):
    """Edge modules draw 15-60 W each; a total above the site's power budget is flagged."""
    out = run("edge.power-budget", {"mode": "edge", "edge.power_budget_w": budget_w,
                                    "components.edge.power_w_total": 180, "components.edge.units": 3,
                                    "components.edge.power_w_min_per_unit": 15})
    assert out.warned("edge.power-budget") is warns


@pytest.mark.parametrize("horizon,decision", [(3, "rent"), (36, "buy")])
def test_g_cost_024(run, horizon, decision):
    """Short validation → rent cloud GPUs; long-term online service → buy (compared at sourced rental rates)."""
    out = run("cost.buy-or-rent-compare", {"deployment.buy_or_rent": "auto", "chosen.id": "x",
                                           "chosen.gpu": "H100 SXM", "chosen.gpus": 4, "cost.capex_cny": 400000,
                                           "cost.monthly_opex_cny": 5000, "deployment.horizon_months": horizon})
    assert out.values["cost.buy_or_rent"] == decision


@pytest.mark.parametrize("racks", [1, 3])
def test_g_cost_034(run, racks):
    """Hosted by a cloud vendor: 2,000-5,000 CNY per rack-month on top (midpoint 3,500 per rack)."""
    out = run("cost.colocation-fee", {**CHOSEN, "components.rack.racks": racks})
    assert out.values["cost.colocation_cny_per_month"] == 3500 * racks


@pytest.mark.parametrize("used", [True, False])
def test_g_cost_025(run, used):
    """Buying used cards: test memory, cooling and fans under load and read the warranty."""
    out = run("procurement.used-hardware", {"constraints.accept_used_hardware": used})
    checks = out.values.get("components.procurement.used_hardware_checks")
    if used:
        assert any("memory test" in c for c in checks) and any("warranty" in c for c in checks)
    else:
        assert checks is None
