"""Issue #36: serving layouts as candidates — attention-DP × expert-parallel engines for MoE models,
sized by the same performance model, configured with launch lines and answerable by why-not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servewise.engine.domain.fn_cost import serving_settings
from servewise.engine.domain.fn_sizing import attention_layout

PUBLIC_API = "examples/deepseek-v3-public-api.yaml"


def test_an_engine_of_tp_gpus_splits_into_attention_ranks():
    assert attention_layout(8, 8, 8) == (1, 8, 8)  # SGLang --tp 8 --dp 8: attention on one GPU per rank
    assert attention_layout(8, 4, 2) == (4, 4, 2)
    assert attention_layout(4, 1, 1) == (4, 1, 1)  # a plain tensor-parallel replica
    with pytest.raises(ValueError, match="must divide"):
        attention_layout(8, 1, 3)


def test_launch_settings_follow_each_frameworks_flags():
    sg = serving_settings("SGLang", 8, 3, 240, "fp8", 8192, 8, 8, "DeepSeek-V3")
    assert (sg["tp_size"], sg["dp_size"], sg["ep_size"], sg["enable_dp_attention"]) == (8, 8, 8, True)
    assert sg["max_running_requests"] == 240  # SGLang shares it among the DP ranks
    assert "--tp 8 --dp 8 --enable-dp-attention --ep-size 8" in sg["launch"]
    vl = serving_settings("vLLM", 8, 3, 240, "fp8", 8192, 8, 8, "Qwen3-235B-A22B")
    assert (vl["tensor_parallel_size"], vl["data_parallel_size"], vl["max_num_seqs"]) == (1, 8, 30)  # per rank
    assert "--tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel" in vl["launch"]
    tr = serving_settings("TensorRT-LLM", 8, 3, 240, "fp8", 8192, 8, 8, "DeepSeek-R1")
    assert tr["enable_attention_dp"] is True and tr["ep_size"] == 8 and tr["max_batch_size"] == 30
    assert "--tp_size 8" in tr["launch"] and "enable_attention_dp: true" in tr["launch"]
    plain = serving_settings("vLLM", 2, 3, 64, "fp8", 8192)
    assert "data_parallel_size" not in plain and "launch" not in plain


def test_moe_models_get_attention_dp_candidates_of_2_to_8_gpus_only(example_plans):
    plan = example_plans["qwen3-235b-a22b"].plan
    ids = [r["option"] for r in plan["rejected"]] + [c["id"] for c in plan["candidates"]]
    dp = {i.split(" | ")[2] for i in ids if " | dp" in i}
    assert dp == {"dp2 ep2", "dp4 ep4", "dp8 ep8"}, dp  # one GPU is the replica, 16 not modelled: skipped
    dense = example_plans["chat-70b-online"].plan
    assert not [r for r in dense["rejected"] if " | dp" in r["option"]]
    assert dense["components"]["gpu"]["layout"] == "replicas"


def test_the_public_deepseek_api_runs_disaggregated_on_at_most_18_servers(cli):
    res = cli("plan", PUBLIC_API, "--format", "json")
    assert res.exit_code == 0, res.output[-2000:]
    plan = json.loads(res.output)
    gpu, servers = plan["components"]["gpu"], plan["components"]["servers"]
    assert (gpu["model"], gpu["layout"], gpu["attention_dp"], gpu["expert_parallel"]) == ("B200", "disaggregated", 8, 8)
    assert gpu["prefill_workers"] >= 1 and gpu["decode_workers"] >= 1
    assert gpu["replicas_for_peak"] == gpu["prefill_workers"] + gpu["decode_workers"]
    assert servers["count"] <= 18 and plan["performance"]["meets_sla"] is True
    settings = plan["components"]["software"]["settings"]
    assert "--disaggregation-mode prefill" in settings["launch_prefill"]
    assert "--disaggregation-mode decode" in settings["launch_decode"]
    assert settings["launch_router"].count("--prefill http") == gpu["prefill_workers"]
    assert settings["launch_router"].count("--decode http") == gpu["decode_workers"]
    net = plan["components"]["network"]  # the KV cache between the pools needs RDMA, sized from it
    assert net["inter_node"] == "roce-v2-400g" and net["nics_per_server"] >= 1 and net["traffic_gbps"] > 0
    chosen = next(c for c in plan["candidates"] if c["chosen"])
    for kind in (" | tp", " | dp"):  # TP-only replicas and aggregated attention-DP engines both cost more
        others = [c for c in plan["candidates"] if c["gpu"] == "B200" and kind in c["id"]]
        assert others and min(c["tco_cny"] for c in others) > chosen["tco_cny"], kind
    text = cli("plan", PUBLIC_API, "--full").output
    assert "prefill/decode disaggregated" in text and "Router" in text


def test_the_pools_are_sized_from_their_loads_not_a_fixed_ratio(cli, tmp_path):
    """Long prompts with short answers need more prefill than decode workers; short prompts with
    long answers the reverse; a higher rate needs more of both."""
    def pools(isl: int, osl: int, qps: int) -> tuple[int, int]:
        wl = tmp_path / f"w{isl}-{osl}-{qps}.yaml"
        wl.write_text(f"model: DeepSeek-V3\nprecision: fp8\nsla: {{ttft_ms: 2000, tpot_ms: 40}}\n"
                      f"traffic: {{peak_qps: {qps}, avg_input_tokens: {isl}, avg_output_tokens: {osl}, "
                      "max_context_tokens: 32768}\nconstraints: {gpu_models: [B200], cooling_available: liquid, "
                      "rack_power_kw: 40}\ndeployment: {region: global}\n")
        plan = json.loads(cli("plan", str(wl), "--format", "json").output)
        rec = next(c for c in plan["candidates"] if c["id"] == "B200 | fp8 | pd dp8 ep8")
        assert rec["layout"] == "disaggregated"
        return rec["prefill_workers"], rec["decode_workers"]

    long_prompts = pools(8000, 200, 60)
    long_answers = pools(500, 2000, 60)
    assert long_prompts[0] > long_prompts[1], long_prompts
    assert long_answers[1] > long_answers[0], long_answers
    more = pools(8000, 200, 120)
    assert more[0] > long_prompts[0] and more[1] >= long_prompts[1]


def test_why_not_answers_for_layouts(cli, tmp_path):
    out = tmp_path / "plan.json"
    assert cli("plan", PUBLIC_API, "--format", "json", "-o", str(out)).exit_code == 0
    chosen = cli("why-not", str(out), "disaggregated")
    assert chosen.exit_code == 0 and "disaggregated: chosen" in chosen.output
    for name, tag in (("tensor-parallel", "| tp8"), ("attention-dp", "| dp8 ep8")):
        res = cli("why-not", str(out), name)
        assert ": rejected" in res.output and tag in res.output, res.output
        assert "% more than the chosen" in res.output
    spec = cli("why-not", str(out), "speculative")
    assert spec.exit_code == 0 and "components.gpu.speculative = mtp" in spec.output


def test_a_rejected_layout_is_compared_on_the_plans_own_gpu(cli, tmp_path):
    """With the default 500 ms TTFT the attention-DP engines miss the target: why-not names the
    plan's GPU in that layout (not an unpriced GPU elsewhere), and the plan warns what the default
    costs."""
    wl = tmp_path / "w.yaml"
    wl.write_text("model: DeepSeek-V3\nprecision: fp8\nsla: {tpot_ms: 40}\n"
                  "traffic: {peak_qps: 100, avg_input_tokens: 2000, avg_output_tokens: 800}\n"
                  "constraints: {gpu_models: [H200 SXM, A100 80GB PCIe], cooling_available: liquid, rack_power_kw: 40, "
                  "allow_restricted: true}\n")
    out = tmp_path / "plan.json"
    assert cli("plan", str(wl), "--format", "json", "-o", str(out)).exit_code == 0
    plan = json.loads(out.read_text())
    assert plan["components"]["gpu"]["layout"] == "replicas"
    assert any(w["rule"] == "sla.defaulted-ttft-excludes-attention-dp" for w in plan["warnings"])
    res = cli("why-not", str(out), "attention-dp")
    assert "closest to being chosen: H200 SXM | fp8 | dp8 ep8" in res.output, res.output
    assert "TTFT ≤" in res.output and "(target 500 ms)" in res.output


def test_the_serving_framework_is_decided_once_for_sizing_and_layouts():
    from servewise.engine.domain.fn_cost import serving_framework

    assert serving_framework("nvidia", ["cuda"], "MLA") == "SGLang"
    assert serving_framework("nvidia", ["cuda", "tensorrt"], "MLA") == "TensorRT-LLM"
    assert serving_framework("nvidia", None, "GQA") == "vLLM"
    assert (serving_framework("amd", [], "GQA"), serving_framework("huawei", [], "GQA")) == ("vLLM (ROCm)", "MindIE")
    assert serving_framework("intel", [], "GQA") is None


def test_an_mtp_model_is_sized_with_its_module_and_a_dense_one_is_not(example_plans, cli, tmp_path):
    v3 = example_plans["deepseek-v3-online"].plan
    gpu = v3["components"]["gpu"]
    assert (gpu["speculative"], gpu["speculative_tokens"], gpu["speculative_acceptance"]) == ("mtp", 1, 0.7)
    assert "--speculative-algorithm EAGLE --speculative-num-steps 1" in v3["components"]["software"]["settings"]["launch"]
    assert [w for w in v3["warnings"] if w["rule"] == "sla.speculative-decoding-on"]
    dense = example_plans["chat-70b-online"].plan
    assert dense["components"]["gpu"]["speculative"] == "off"
    assert "speculative" not in dense["components"]["software"]["settings"]["launch"]
    wl = tmp_path / "off.yaml"
    wl.write_text((Path("examples/deepseek-v3-online.yaml").read_text()) + "serving: {speculative: 'off'}\n")
    off = json.loads(cli("plan", str(wl), "--format", "json").output)
    assert off["components"]["gpu"]["speculative"] == "off"
    assert off["components"]["gpu"]["count"] >= gpu["count"]
    note = [w for w in off["warnings"] if w["rule"] == "sla.speculative-decoding-not-modelled"]
    assert note and "serving.speculative: off" in note[0]["message"]


def test_disaggregated_launch_lines_per_pool_and_router():
    """Each framework's own disaggregation flags; a prefill worker keeps the framework's batch limit
    (it holds no decode batch), a decode worker the plan's; the router lists every worker."""
    sg = serving_settings("SGLang", 8, 7, 761, "fp8", 8192, 8, 8, "DeepSeek-V3", 1, 3, 4)
    assert sg["disaggregation"] == {"prefill_workers": 3, "decode_workers": 4}
    assert "--disaggregation-mode prefill" in sg["launch_prefill"]
    assert "--max-running-requests" not in sg["launch_prefill"]
    assert "--disaggregation-mode decode" in sg["launch_decode"] and "--max-running-requests 761" in sg["launch_decode"]
    assert sg["launch_router"].count("--prefill http") == 3 and sg["launch_router"].count("--decode http") == 4
    vl = serving_settings("vLLM", 8, 7, 761, "fp8", 8192, 8, 8, "DeepSeek-V3", 0, 2, 2)
    assert vl["launch_prefill"].startswith("python3 -m dynamo.vllm --model /models/DeepSeek-V3 ")
    assert vl["launch_prefill"].endswith("--disaggregation-mode prefill") and "--max-num-seqs" not in vl["launch_prefill"]
    assert "--data-parallel-size 8 --enable-expert-parallel" in vl["launch_decode"]
    assert vl["launch_decode"].endswith("--disaggregation-mode decode") and "--max-num-seqs 96" in vl["launch_decode"]
    assert vl["launch_router"].startswith("python3 -m dynamo.frontend") and "2 prefill workers" in vl["launch_router"]
    tr = serving_settings("TensorRT-LLM", 8, 7, 761, "fp8", 8192, 8, 8, "DeepSeek-R1", 0, 2, 5)
    assert "trtllm-serve disaggregated" in tr["launch_router"] and "num_instances: 5" in tr["launch_router"]
    plain = serving_settings("SGLang", 8, 3, 240, "fp8", 8192, 8, 8, "DeepSeek-V3")
    assert "launch_prefill" not in plain and "disaggregation" not in plain
