"""Guidelines finished in session 18 (issue #16 item 2): vetoes, latency segments, ecosystem tie-break, load
test, licence line, cold start, presets and certified systems evaluated as configurations."""

from __future__ import annotations

from pathlib import Path

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.lang.rulebase import RuleBase, load_rule_file
from servewise.engine.runtime.runner import Origin, Runner

SMALL = {"model": "Qwen2.5-7B", "precision": "fp8", "traffic": {"peak_qps": 2},
         "constraints": {"gpu_models": ["L40S"], "allow_restricted": True}}  # L40S is export-restricted in cn


def _with(workload: dict, **sections) -> dict:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in workload.items()}
    for key, extra in sections.items():
        out[key] = {**out.get(key, {}), **extra}
    return out


def test_g_ops_006(plan, run, monkeypatch):
    """At 99.9 % a single point of failure is vetoed: the N+1 spare replica sits on a second server and is
    counted in GPUs, servers and capex; the buyer may accept one server; below 99.9 % there is no spare; a
    server without a redundant PSU is vetoed and the hot-swap parts are stated."""
    three_nines = plan(SMALL)
    v = three_nines.values
    assert (v["components.gpu.count"], v["components.servers.count"], v["components.gpu.spare_replicas"]) == (2, 2, 1)
    assert v["bom.redundant_gpus"] == 1
    l40s = [line for line in v["bom.lines"] if line["part"] == "L40S"]
    assert l40s and l40s[0]["qty"] == 2  # the spare is bought, not only recommended
    assert "hot-swap" in v["components.availability.hot_swap"]

    accepted = plan(_with(SMALL, constraints={"allow_single_point_of_failure": True}))
    assert (accepted.values["components.gpu.count"], accepted.values["components.servers.count"]) == (2, 1)

    relaxed = plan(_with(SMALL, sla={"availability": 99.5}))
    assert (relaxed.values["components.gpu.count"], relaxed.values["components.servers.count"]) == (1, 1)
    assert relaxed.values["cost.capex_cny"] < v["cost.capex_cny"]

    veto = run("plan.no-redundant-psu-veto", {
        "chosen.id": "x", "chosen.sku": "s", "sla.spof_allowed": False, "sla.availability": 99.9,
        "facility.sku_psu_count": 1, "facility.sku_psu_module_w": 2000, "facility.sku_psu_usable_w": 2000})
    assert veto.values["plan.feasible"] is False

    # the candidate filter: a server SKU shipped without a redundant PSU drops its candidates at 99.9 %
    entry = load_catalog().table("servers").get("generic-2u-pcie-2gpu")
    monkeypatch.setitem(entry, "psu_complement", {**entry["psu_complement"], "count": 1, "usable_w": 2000})
    out = plan(_with(SMALL, traffic={"peak_qps": 2.01}))  # a workload of its own (the fixture caches plans)
    vetoed = out.rejected_by("availability.reject-no-redundant-psu")
    assert vetoed and all(option.startswith("L40S") for option in vetoed)


def test_g_sla_007(run, plan):
    """L_infer = L_e2e − network − pre-processing − post-processing, each an input printed in the plan."""
    out = run("sla.inference-budget", {"sla.e2e_p99_ms": 3000, "mode": "online", "sla.network_ms": 40,
                                       "sla.preprocess_ms": 600, "sla.postprocess_ms": 60})
    assert out.values["sla.inference_budget_ms"] == 2300
    rag = plan(_with(SMALL, sla={"e2e_p99_ms": 6000, "preprocess_ms": 800}))
    assert rag.values["sla.inference_budget_ms"] == 6000 - 20 - 800 - 10
    assert rag.values["sla.preprocess_ms"] == 800 and rag.values["sla.network_ms"] == 20


def test_g_sla_005(run):
    """The end-to-end latency is the serial sum of the segments: the budget check prints each one."""
    out = run(["sla.inference-budget", "sla.e2e-budget-check"], {
        "sla.e2e_p99_ms": 8000, "mode": "online", "sla.network_ms": 30, "sla.preprocess_ms": 120,
        "sla.postprocess_ms": 50, "chosen.id": "x", "chosen.ttft_ms_hi": 500, "chosen.tpot_ms_hi": 20,
        "traffic.avg_output_tokens": 256})
    assert out.values["sla.non_model_ms"] == 200 and out.values["sla.inference_budget_ms"] == 7800
    text = " ".join(str(w["message"].get("en", w["message"])) if isinstance(w["message"], dict) else w["message"]
                    for w in out.mem.warnings)
    assert "network 30 ms + pre-processing 120 ms + post-processing 50 ms" in text


TIE = """
- id: test.two-candidates
  title: {en: two candidates, zh: 两个候选}
  source: {guideline: G-VEND-002}
  stage: candidates
  then:
    - propose:
        kind: candidate
        over: {gpu: "['AMD MI300X', 'H100 SXM']"}
        id: "gpu"
        attrs: {gpu: "gpu", vendor: "catalog('gpus', gpu, 'vendor')", tco_cny: "1000000", capex_cny: "900000",
                capex_low_cny: "800000", capex_high_cny: "1000000", availability: "'available'", orderable: "True", gpus: "8",
                precision: "'fp8'", tp: "8", servers: "1", sku: "'s'"}
  because: {en: two, zh: 两}
"""


def test_g_vend_002(rulebase, tmp_path: Path):
    """NVIDIA is the safe default as a tie-break only: on equal TCO it wins, a lower cost still wins."""
    (tmp_path / "tie.yaml").write_text(TIE, encoding="utf-8")
    specs, problems = load_rule_file(tmp_path / "tie.yaml")
    assert problems == []
    select = next(s for s in rulebase.rules if s.id == "select.cheapest-candidate")
    base = {"mode": "online", "deployment.horizon_months": 36, "deployment.region": "cn", "thumb.gpus": [],
            "constraints.capex_budget_cny": None, "constraints.allow_restricted": True}

    def choose() -> str:
        rb = RuleBase([*specs, select], rulebase.files, rulebase.knowledge_hash)
        given = {k: (v, Origin("input", k)) for k, v in base.items()}
        return Runner(rb).run(given, RunContext(load_catalog())).values["chosen.gpu"]

    assert choose() == "H100 SXM"  # same TCO: the NVIDIA ecosystem breaks the tie (AMD is proposed first)
    cheaper_amd = TIE.replace('tco_cny: "1000000"', 'tco_cny: "1000000 if gpu == \'H100 SXM\' else 900000"')
    (tmp_path / "tie.yaml").write_text(cheaper_amd, encoding="utf-8")
    specs[:], _ = load_rule_file(tmp_path / "tie.yaml")
    assert choose() == "AMD MI300X"  # never an override of a lower cost


LOADTEST = {"chosen.id": "x", "performance.max_concurrency": 40, "performance.output_tokens_per_s": 2000,
            "mode": "online", "sla.ttft_ms": 800, "sla.tpot_ms": 50, "traffic.peak_qps": 5,
            "traffic.avg_input_tokens": 1024, "traffic.avg_output_tokens": 256, "model.id": "Qwen2.5-7B",
            "model.served_name": "Qwen2.5-7B", "components.software.framework": "vLLM"}


def test_g_test_004(run):
    """The load test replays captured production traffic first (at the peak rate), judged by P99; synthetic
    random prompts are only the fallback."""
    v = run("loadtest.plan", LOADTEST).values
    assert "--dataset-name custom --dataset-path captured-requests.jsonl" in v["components.loadtest.command"]
    assert "--request-rate 5" in v["components.loadtest.command"]
    assert "--dataset-name random" in v["components.loadtest.command_fallback"]
    assert v["components.loadtest.dataset"].startswith("first: captured production requests")
    assert v["components.loadtest.judged_by"].startswith("P99")
    assert "P99 TTFT ≤ 800 ms" in v["components.loadtest.acceptance"][0]


def test_g_cost_023(run):
    """Licences and tuning services enter the TCO as their own line when the buyer gives them."""
    facts = {"chosen.id": "x", "deployment.horizon_months": 24, "cost.capex_cny": 500000,
             "cost.monthly_opex_cny": 4000}
    out = run("cost.software-services-line", {**facts, "deployment.software_services_cny_per_year": 60000})
    assert out.values["cost.software_services_cny_total"] == 120000
    assert out.values["cost.tco_cny"] == 500000 + 4000 * 24 + 120000
    assert "buyer input" in out.values["cost.software_services_source"]
    none = run("cost.software-services-line", {**facts, "deployment.software_services_cny_per_year": None})
    assert "cost.tco_cny" not in none.values


def test_g_sto_004(run):
    """The cold start is the disk read plus the transfer to GPU memory plus the engine start-up (an estimate
    with its range), not the disk read alone."""
    out = run("sla.cold-start-total", {"mode": "online", "chosen.id": "x", "bom.cold_start_s": 12.0,
                                       "chosen.weights_gib": 130.0, "chosen.tp": 4, "chosen.pp": 1,
                                       "chosen.gpu": "H100 SXM"})
    v = out.values
    assert v["performance.weights_to_gpu_s"] == pytest.approx(130 * 1.073741824 / 4 / 63.0, abs=0.1)
    assert v["performance.cold_start_s"] == round(12.0 + v["performance.weights_to_gpu_s"] + 60)
    low, high = v["performance.cold_start_range_s"]
    assert low < v["performance.cold_start_s"] < high and v["performance.cold_start_estimated"] is True


PRESET = {"chosen.id": "x", "mode": "online", "sla.ttft_ms": 3000, "sla.tpot_ms": 60, "sla.inference_budget_ms": None,
          "traffic.avg_input_tokens": 1024, "traffic.avg_output_tokens": 256}


def test_g_scen_001(run):
    """The 4 × L20 DIY preset is evaluated as a configuration: replicas, requests/s, servers needed, price."""
    facts = {**PRESET, "model.id": "Qwen2.5-32B", "model.total_params_b": 32.76, "chosen.precision": "fp8",
             "cost.capex_cny": 400000}
    light = run("thumb.four-l20-preset-evaluated", {**facts, "traffic.peak_qps": 1.5}).values
    assert light["thumb.l20_preset_meets_sla"] is True and light["thumb.l20_preset_servers_needed"] == 1
    assert light["thumb.l20_preset_price_cny"] == [80000, 120000]
    heavy = run("thumb.four-l20-preset-evaluated", {**facts, "traffic.peak_qps": 6}).values
    rate = heavy["thumb.l20_preset_requests_per_s"]
    assert heavy["thumb.l20_preset_meets_sla"] is False and heavy["thumb.l20_preset_servers_needed"] >= 2
    assert heavy["thumb.l20_preset_servers_needed"] * rate >= 6 > (heavy["thumb.l20_preset_servers_needed"] - 1) * rate


def test_g_scen_002(run):
    """The 2 × H200 preset is evaluated for a long-context 70B: it holds it within the targets."""
    v = run("thumb.two-h200-preset-evaluated", {**PRESET, "model.id": "Llama-3.1-70B", "model.total_params_b": 70.55,
                                                "traffic.max_context_tokens": 131072, "chosen.precision": "fp8",
                                                "cost.capex_cny": 2000000, "traffic.peak_qps": 2}).values
    assert v["thumb.h200_preset_tp"] >= 1 and v["thumb.h200_preset_requests_per_s"] > 0
    assert v["thumb.h200_preset_price_cny"] == [250000, 350000]


def test_g_scen_005(run):
    """The knowledge-base preset (one L20, 4-bit 14B) is evaluated against the workload's peak."""
    facts = {**PRESET, "task": "rag", "model.id": "Qwen2.5-14B", "cost.capex_cny": 200000}
    small = run("thumb.knowledge-base-preset-evaluated", {**facts, "traffic.peak_qps": 0.4}).values
    assert small["thumb.kb_preset_meets_sla"] is True
    big = run("thumb.knowledge-base-preset-evaluated", {**facts, "traffic.peak_qps": 5}).values
    assert big["thumb.kb_preset_meets_sla"] is False and big["thumb.kb_preset_servers_needed"] > 1


def test_g_vend_006(run):
    """The certified DGX H100 is priced against the plan's OEM HGX build for the same servers."""
    v = run("vendor.certified-system-evaluated", {"chosen.id": "x", "chosen.gpu": "H100 SXM", "chosen.per_server": 8,
                                                  "chosen.servers": 1, "cost.capex_cny": 1500000}).values
    assert v["vendor.dgx_capex_cny"] == [1432800, 1944000]
    assert v["vendor.dgx_vs_plan_pct"] == round(100 * ((1432800 + 1944000) / 2 - 1500000) / 1500000)


def test_g_gpu_030(run):
    """Offline batch: the A6000 48 GB and A100 80 GB are evaluated (batch, tokens/s per card) against the
    chosen card; the larger memory holds the larger batch."""
    v = run("thumb.offline-large-vram-evaluated", {
        "chosen.id": "x", "mode": "offline", "model.id": "Llama-3.1-8B", "chosen.gpu": "L40S", "chosen.tp": 1,
        "chosen.pp": 1, "chosen.precision": "fp8", "chosen.tokens_per_s": 3000, "traffic.avg_input_tokens": 1024,
        "traffic.avg_output_tokens": 256, "deployment.region": "cn"}).values
    assert v["thumb.a100_batch"] > v["thumb.a6000_batch"] >= 1
    assert v["thumb.a100_tokens_per_s_per_gpu"] > v["thumb.a6000_tokens_per_s_per_gpu"] > 0


def test_g_sla_006(plan, run):
    """Top-down SLOs: P99 latency, peak QPS, availability and a cost cap per inference (per million output
    tokens) are inputs; a configuration above the cap is rejected and a plan above it is infeasible."""
    capped = plan(_with(SMALL, sla={"max_cny_per_million_tokens": 0.01}))
    assert capped.feasible is False
    assert capped.rejected_by("cost.candidate-over-token-cost-cap")
    loose = plan(_with(SMALL, sla={"max_cny_per_million_tokens": 1000}))
    assert loose.feasible is True and not loose.rejected_by("cost.candidate-over-token-cost-cap")
    check = run("plan.token-cost-cap", {"sla.max_cny_per_million_tokens": 1, "cost.cny_per_million_tokens": 2.2})
    assert check.values["plan.feasible"] is False
