"""Operations, software, isolation, vendor, edge and cost guidelines (G-OPS, G-TEST, G-SW, G-ISO, G-VEND,
G-EDGE, G-SCEN, G-COST)."""

from __future__ import annotations

import pytest

CHOSEN = {"chosen.id": "x"}
# the procurement rules name systems of the plan's host CPU family; None: no CPU chosen, every family
NO_HOST = {"components.cpu.model": None}
# a replica the packing rules placed in a MIG instance (rules/bom/packing.yaml)
MIG_SLICE = {"chosen.max_concurrency": 64, "performance.memory_per_gpu_gib": 25.0, "pack.unit": "mig",
             "pack.slice_profile": "3g.40gb", "pack.slice_concurrency": 64}
SERVING = {**CHOSEN, "chosen.tp": 1, "chosen.attention_dp": 1, "chosen.ep": 1, "model.served_name": "org/model", "components.gpu.speculative_tokens": 0, "components.gpu.prefill_workers": 0, "components.gpu.decode_workers": 0, "chosen.replicas": 2, "chosen.replicas_installed": 2, "chosen.max_concurrency": 32, "chosen.precision": "fp8",
           "traffic.max_context_tokens": 8192, "model.attention_type": "GQA"}
FRAMEWORKS = ["software.vllm-default", "software.trtllm-for-tensorrt-teams", "software.mindie-for-ascend",
              "software.vllm-rocm-for-amd"]


@pytest.mark.parametrize("vendor,stack", [("nvidia", "NVIDIA DCGM exporter"), ("amd", "AMD Device Metrics Exporter"),
                                          ("huawei", "Ascend NPU exporter")])
def test_g_ops_003(run, vendor, stack):
    """Telemetry exporter → Prometheus/Grafana with alerts, DCGM on NVIDIA (the vendor's exporter otherwise)."""
    out = run(["monitoring.dcgm-prometheus", "monitoring.vendor-exporter", "monitoring.jetson-tegrastats"],
              {**CHOSEN, "chosen.vendor": vendor, "chosen.gpu": "g", "mode": "online"})
    assert out.values["components.monitoring.stack"].startswith(stack)
    assert "Prometheus" in out.values["components.monitoring.stack"]
    if vendor == "nvidia":  # a Jetson edge box has no DCGM: tegrastats / jtop feed Prometheus instead
        edge = run(["monitoring.dcgm-prometheus", "monitoring.jetson-tegrastats"],
                   {**CHOSEN, "chosen.vendor": vendor, "chosen.gpu": "g", "mode": "edge"})
        assert edge.values["components.monitoring.stack"].startswith("tegrastats / jtop")


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
            "traffic.avg_output_tokens": 256, "model.id": "Llama-3.1-70B", "model.served_name": "Llama-3.1-70B", "components.software.framework": "vLLM"}


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


@pytest.mark.parametrize("gpu,skills,framework", [("L40S", ["cuda"], "vLLM"),
                                                  ("L40S", ["cuda", "tensorrt"], "TensorRT-LLM"),
                                                  ("Huawei Ascend 910B", ["cann"], "MindIE")])
def test_g_sw_006(plan, run, gpu, skills, framework):
    """Framework: Ascend → MindIE; a team that can build engines → TensorRT-LLM; otherwise vLLM.
    Decided per candidate (rules/candidates/gpu.yaml), so the replica is sized with that
    framework's measured profile, and configured by rules/bom/software.yaml (each software rule
    configures the framework the chosen candidate carries, and only that one)."""
    out = plan({"model": "Llama-3.1-8B", "constraints": {"gpu_models": [gpu], "team_skills": skills}})
    assert out.values["chosen.framework"] == framework
    assert out.values["components.software.framework"] == framework
    alone = run(FRAMEWORKS, {**SERVING, "chosen.framework": framework, "constraints.team_skills": []})
    assert alone.values["components.software.framework"] == framework
    assert sum(alone.fired(r) for r in FRAMEWORKS) == 1


def test_g_sw_007(run):
    """Continuous batching is always on in the serving settings."""
    out = run(FRAMEWORKS, {**SERVING, "chosen.framework": "vLLM", "constraints.team_skills": []})
    assert out.values["components.software.settings"]["continuous_batching"] is True


def test_g_sw_008(run):
    """vLLM settings: --gpu-memory-utilization 0.9, max-num-seqs sized to the SLA-limited batch."""
    settings = run(FRAMEWORKS, {**SERVING, "chosen.framework": "vLLM",
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
                                            "chosen.tp": 1, **MIG_SLICE})
    assert out.values["components.isolation.method"] == method


@pytest.mark.parametrize("gpu", ["L40S", "L20", "A10"])
def test_g_iso_007(run, gpu):
    """MIG support is checked per SKU: L40S, L20 and A10 (data-centre cards) have none, so no MIG layout."""
    out = run(["isolation.mig-for-tenants", "isolation.no-mig-whole-gpus"],
              {**CHOSEN, "constraints.multi_tenant": True, "chosen.gpu": gpu, "chosen.tp": 1,
               "chosen.weights_gib": 15, "chosen.replicas": 2, "chosen.replicas_installed": 2})
    assert not out.fired("isolation.mig-for-tenants")
    assert out.fired("isolation.no-mig-whole-gpus")


def test_g_iso_010(run):
    """Single tenant: each replica in its own container pinned to its own GPUs, no GPU shared."""
    out = run("isolation.dedicated-containers", {**CHOSEN, "constraints.multi_tenant": False, "chosen.replicas": 3, "chosen.replicas_installed": 3,
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


AVAILABILITY = {**CHOSEN, "mode": "online", "chosen.layout": "replicas", "chosen.tp": 2, "chosen.pp": 1, "chosen.replicas": 2, "chosen.servers": 2,
                "chosen.replicas_installed": 4, "chosen.fullest_server_replicas": 2,
                "chosen.gpu": "H100 SXM", "chosen.gpu_price_cny": 100000}


@pytest.mark.parametrize("availability,spare", [(99.9, True), (99.99, True), (99.5, False)])
def test_g_ops_002(run, availability, spare):
    """Availability ≥ 99.9 % (43.8 min a month) calls for a spare replica; below it, none is bought."""
    policy = run("sla.availability-policy", {"sla.availability": availability, "mode": "online",
                                             "constraints.allow_single_point_of_failure": None})
    out = run(["monitoring.availability-n-plus-1", "monitoring.availability-best-effort"],
              {**AVAILABILITY, "sla.availability": availability,
               "chosen.spare_replicas": 2 * policy.values["sla.spare_replicas"]})
    assert ("bom.redundant_replicas" in out.values and out.values["bom.redundant_replicas"] == 2) is spare
    minutes = round((100 - availability) / 100 * 730 * 60, 1)
    if spare:
        assert out.values["components.availability.downtime_min_per_month"] == pytest.approx(minutes)


def test_g_ops_001(run):
    """7×24 load: at ≥ 99.9 % a single server is a single point of failure, so the replicas are spread over
    servers behind a load balancer (the spare is counted; a one-server plan needs the buyer's consent)."""
    policy = run("sla.availability-policy", {"sla.availability": 99.9, "mode": "online",
                                             "constraints.allow_single_point_of_failure": None})
    assert policy.values["sla.spof_allowed"] is False
    out = run("monitoring.availability-n-plus-1", {**AVAILABILITY, "sla.availability": 99.9, "chosen.spare_replicas": 2})
    assert "spread over 2 servers" in out.values["components.availability.placement"]
    assert out.values["components.availability.survives_server_loss"] is True
    single = run("monitoring.availability-n-plus-1", {**AVAILABILITY, "sla.availability": 99.9,
                                                      "chosen.spare_replicas": 1, "chosen.servers": 1,
                                                      "chosen.fullest_server_replicas": 3})
    assert "single point of failure" in single.values["components.availability.placement"]


@pytest.mark.parametrize("multi,method", [(False, "containers"), (True, "whole-GPU containers")])
def test_g_iso_001(run, multi, method):
    """Sharing needs partitioning and isolation: multi-tenant plans get an isolation method for shared use."""
    out = run(["isolation.dedicated-containers", "isolation.mig-for-tenants", "isolation.no-mig-whole-gpus"],
              {**CHOSEN, "constraints.multi_tenant": multi, "chosen.gpu": "L40S", "chosen.tp": 1,
               "chosen.replicas": 2, "chosen.replicas_installed": 2, "chosen.weights_gib": 15})
    assert out.values["components.isolation.method"] == method


def test_g_iso_004(run):
    """With MIG each replica sits in its own instance, so one tenant's OOM cannot reach another."""
    out = run("isolation.mig-for-tenants", {**CHOSEN, "constraints.multi_tenant": True, "chosen.gpu": "H100 SXM",
                                            "chosen.tp": 1, **MIG_SLICE})
    assert out.values["components.isolation.layout"].startswith("each replica in a ")
    assert out.values["components.isolation.mig_max_instances_per_gpu"] == 7


def test_g_iso_006(run):
    """Without MIG, tenants get whole GPUs; MPS/time-slicing only within one trust domain (flagged)."""
    out = run("isolation.no-mig-whole-gpus", {**CHOSEN, "constraints.multi_tenant": True, "chosen.gpu": "L40S"})
    assert "one trust domain" in out.values["components.isolation.layout"]
    assert out.warned("isolation.no-mig-whole-gpus")


@pytest.mark.parametrize("sized_gib,shares", [(30, True), (40, False)])
def test_g_iso_009(run, sized_gib, shares):
    """One card hosts a second model when a replica as sized (weights + KV + overhead) fits in 45 % of it."""
    out = run("isolation.split-memory-between-instances",
              {**CHOSEN, "constraints.multi_tenant": True, "chosen.tp": 1, "performance.memory_per_gpu_gib": sized_gib,
               "chosen.memory_gb": 80})
    assert out.fired("isolation.split-memory-between-instances") is shares
    if shares:
        assert out.values["components.isolation.gpu_memory_utilization_per_instance"] == 0.45


@pytest.mark.parametrize("precision,method", [("fp8", "fp8"), ("int8", "int8")])
def test_g_mem_011(run, precision, method):
    """Inference runs on fixed weights: 8-bit (FP8 / INT8) quantisation is the serving precision."""
    out = run("software.quantization-8bit", {**CHOSEN, "chosen.precision": precision, "chosen.gpu": "H100 SXM",
                                             "chosen.framework": "vLLM"})
    assert method in out.values["components.software.quantization_method"]


@pytest.mark.parametrize("gpu,warns", [("H100 SXM", True), ("A100 80GB SXM", False)])
def test_g_gpu_019(run, gpu, warns):
    """INT4 support is checked per GPU: without INT4 tensor cores (Hopper) the plan explains W4A16."""
    out = run("mem.int4-without-int4-cores", {**CHOSEN, "chosen.precision": "int4", "chosen.gpu": gpu,
                                              "model.id": "Llama-3.1-70B", "chosen.weights_gib": 37.8})
    assert out.warned("mem.int4-without-int4-cores") is warns


@pytest.mark.parametrize("gpu,warns", [("Tesla P40", True), ("L40S", False)])
def test_g_scen_003(run, gpu, warns):
    """8 × P40 (used) is for test environments only; choosing it is flagged."""
    out = run("thumb.used-p40-test-only", {**CHOSEN, "chosen.gpu": gpu, "chosen.precision": "int8"})
    assert out.warned("thumb.used-p40-test-only") is warns


@pytest.mark.parametrize("domestic", [True, False])
def test_g_vend_009(run, domestic):
    """Domestic (信创) projects get the Ascend stack: Atlas 800 + Kunpeng + MindIE."""
    out = run("procurement.domestic-stack", {"constraints.domestic_only": domestic,
                                             "chosen.sku": "Huawei Atlas 800 inference server (model 3000)"})
    assert ("components.procurement.domestic_stack" in out.values) is domestic


def test_g_vend_004(run):
    """On Ascend, framework compatibility is confirmed before ordering (MindIE support of the model)."""
    out = run(["vendor.ascend-framework-check", "software.mindie-for-ascend"],
              {**SERVING, "chosen.vendor": "huawei", "chosen.framework": "MindIE", "chosen.gpu": "Ascend Atlas 300I Duo",
               "model.id": "Qwen2.5-7B",
               "constraints.team_skills": ["cuda"]})
    assert out.warned("vendor.ascend-framework-check")
    assert out.values["components.software.framework"] == "MindIE"


def test_g_vend_011(run):
    """Ascend PyTorch models are served through MindIE (or torch_npu), with Kunpeng host CPUs."""
    out = run(["software.mindie-for-ascend", "cpu.kunpeng-for-ascend"],
              {**SERVING, "mode": "online", "chosen.vendor": "huawei", "chosen.framework": "MindIE", "chosen.per_server": 8,
               "chosen.sku": "Huawei Atlas 800I A2", "bom.cpu_cores_needed": 64})
    assert out.values["components.software.framework"] == "MindIE"
    assert out.values["components.cpu.model"] == "Kunpeng 920 7260"


def test_g_vend_012(run):
    """Unsupported Ascend operators: compile offline with ATC and replace them with FP16 equivalents."""
    out = run("loadtest.ascend-staged-bringup", {**CHOSEN, "chosen.vendor": "huawei"})
    text = " ".join(str(v) for k, v in out.values.items() if k.startswith("components.loadtest"))
    assert "ATC" in text


@pytest.mark.parametrize("gpu,route", [("H100 SXM", "OEM / vendor-certified GPU-baseboard system")])
def test_g_vend_007(run, gpu, route):
    """Baseboard GPUs are bought as OEM turnkey systems (Dell XE9680, Supermicro TNHR, DGX)."""
    out = run("procurement.oem-system", {**CHOSEN, **NO_HOST, "chosen.gpu": gpu, "chosen.vendor": "nvidia", "chosen.sku": None,
                                         "deployment.region": "global"})
    assert out.values["components.procurement.route"] == route
    assert "Dell PowerEdge XE9680" in out.values["components.procurement.systems"]


@pytest.mark.parametrize("gpu,pcie", [("L40S", True), ("H200 NVL", True), ("H100 SXM", False)])
def test_g_vend_010(run, gpu, pcie):
    """PCIe cards can go into a self-assembled (barebones + parts) server; baseboard GPUs cannot."""
    out = run("procurement.pcie-server", {**CHOSEN, **NO_HOST, "chosen.gpu": gpu, "chosen.vendor": "nvidia", "chosen.sku": None,
                                          "deployment.region": "cn"})
    assert out.fired("procurement.pcie-server") is pcie


def test_g_sw_003(run):
    """Serving through native PyTorch costs 3-5× throughput: once a framework is chosen the pitfall is stated."""
    out = run("software.pitfall-native-pytorch", {"components.software.framework": "vLLM"})
    assert out.warned("software.pitfall-native-pytorch")


def test_g_test_001(run):
    """Throughput drives cost accounting: CNY per million output tokens = monthly cost ÷ tokens a month."""
    out = run("cost.per-million-tokens", {"cost.monthly_cost_cny": 11000, "performance.output_tokens_per_s": 1000})
    assert out.values["cost.cny_per_million_tokens"] == pytest.approx(11000 / (1000 * 3600 * 730 / 1e6), abs=1e-3)


def test_g_test_002(run):
    """Measure at the target batch: the load test runs at ½, 1 and 1½ × the planned concurrency."""
    out = run("loadtest.plan", {**LOADTEST, "performance.max_concurrency": 40})
    assert out.values["components.loadtest.concurrencies"] == [20, 40, 60]


@pytest.mark.parametrize("capex,warns", [(500000, True), (300000, False)])
def test_g_cost_016(run, capex, warns):
    """Over- and under-provisioning both fail: the SLA sets the hardware and a budget overrun is flagged."""
    out = run("plan.over-budget", {"constraints.capex_budget_cny": 400000, "cost.capex_cny": capex,
                                    "chosen.capex_cny": 300000})
    assert out.warned("plan.over-budget") is warns


@pytest.mark.parametrize("horizon,months", [(12, 12), (36, 36), (60, 36)])
def test_g_cost_036(run, horizon, months):
    """Self-build pays off long term but GPUs age: capex is written off over the horizon, at most 3 years."""
    out = run("cost.buy-without-rental-rate", {"deployment.buy_or_rent": "auto", "chosen.id": "x", "chosen.gpu": "T4",
                                               "deployment.horizon_months": horizon, "cost.capex_cny": 360000,
                                               "cost.monthly_opex_cny": 1000})
    assert out.values["cost.buy_monthly_cny"] == round(360000 / months + 1000)


def test_g_scen_007(run):
    """Hundreds of requests per second: many independent instances behind a load-balancing gateway."""
    out = run("network.ethernet-for-independent-replicas",
              {"chosen.id": "x", "chosen.layout": "replicas", "chosen.servers": 6, "chosen.tp": 1, "bom.servers_per_replica": 1,
               "mode": "online", "chosen.weights_gib": 15, "constraints.domestic_only": False,
               "traffic.peak_qps": 300, "traffic.avg_input_tokens": 1000, "traffic.avg_output_tokens": 200})
    assert "load-balancer" in out.values["components.network.switch_features"]


@pytest.mark.parametrize("precision", ["int8", "fp8"])
def test_g_gpu_031(run, precision):
    """Judge by tensor-core (quantised) compute, not FP32; the RTX 4090 is flagged for production."""
    out = run(["vendor.consumer-gpu-ops", "thumb.tensor-int8-not-fp32"],
              {**CHOSEN, "chosen.gpu": "RTX 4090", "chosen.precision": precision})
    assert out.warned("vendor.consumer-gpu-ops")
    assert out.warned("thumb.tensor-int8-not-fp32")


@pytest.mark.parametrize("gpu,domestic,rule", [("H100 SXM", False, "procurement.oem-system"),
                                              ("L40S", False, "procurement.pcie-server"),
                                              ("Ascend Atlas 300I Duo", True, "procurement.domestic-stack")])
def test_g_vend_005(run, gpu, domestic, rule):
    """Server families: DGX/HGX systems for baseboard GPUs, custom PCIe servers, Ascend Atlas for domestic."""
    rules = ["procurement.oem-system", "procurement.pcie-server", "procurement.domestic-stack"]
    out = run(rules, {**CHOSEN, **NO_HOST, "chosen.gpu": gpu, "constraints.domestic_only": domestic,
                      "chosen.vendor": "huawei" if domestic else "nvidia",
                      "chosen.sku": "Huawei Atlas 800 inference server (model 3000)" if domestic else None,
                      "deployment.region": "cn"})
    assert out.fired(rule)
    assert out.fired("procurement.oem-system") is (gpu == "H100 SXM")
    assert out.fired("procurement.domestic-stack") is domestic
