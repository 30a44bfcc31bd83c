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
    assert (sg["tensor_parallel_size"], sg["dp_size"], sg["ep_size"], sg["enable_dp_attention"]) == (8, 8, 8, True)
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


def test_the_public_deepseek_api_runs_attention_dp_engines_on_at_most_18_servers(cli):
    res = cli("plan", PUBLIC_API, "--format", "json")
    assert res.exit_code == 0, res.output[-2000:]
    plan = json.loads(res.output)
    gpu, servers = plan["components"]["gpu"], plan["components"]["servers"]
    assert (gpu["model"], gpu["layout"], gpu["attention_dp"], gpu["expert_parallel"]) == ("B200", "attention-dp", 8, 8)
    assert servers["count"] <= 18 and plan["performance"]["meets_sla"] is True
    assert "--enable-dp-attention --ep-size 8" in plan["components"]["software"]["settings"]["launch"]
    tp_only = [c for c in plan["candidates"] if c["gpu"] == "B200" and " | tp" in c["id"]]
    chosen = next(c for c in plan["candidates"] if c["chosen"])
    assert tp_only and min(c["tco_cny"] for c in tp_only) > 1.3 * chosen["tco_cny"]
    text = cli("plan", PUBLIC_API, "--full").output
    assert "attention data parallel 8 × expert parallel 8" in text and "Launch" in text


def test_why_not_answers_for_layouts(cli, tmp_path):
    out = tmp_path / "plan.json"
    assert cli("plan", PUBLIC_API, "--format", "json", "-o", str(out)).exit_code == 0
    chosen = cli("why-not", str(out), "attention-dp")
    assert chosen.exit_code == 0 and "attention-dp: chosen" in chosen.output
    replicas = cli("why-not", str(out), "tensor-parallel")
    assert "replicas: rejected" in replicas.output and "| tp8" in replicas.output, replicas.output
    assert "% more than the chosen" in replicas.output
    later = cli("why-not", str(out), "disaggregated")
    assert later.exit_code == 0 and "does not yet plan this layout" in later.output


def test_a_rejected_layout_is_compared_on_the_plans_own_gpu(cli, tmp_path):
    """With the default 500 ms TTFT the attention-DP engines miss the target: why-not names the
    plan's GPU in that layout (not an unpriced GPU elsewhere), and the plan warns what the default
    costs."""
    wl = tmp_path / "w.yaml"
    wl.write_text("model: DeepSeek-V3\nprecision: fp8\nsla: {tpot_ms: 40}\n"
                  "traffic: {peak_qps: 100, avg_input_tokens: 2000, avg_output_tokens: 800}\n"
                  "constraints: {gpu_models: [B200, A100 80GB PCIe], cooling_available: liquid, rack_power_kw: 40, "
                  "allow_restricted: true}\n")
    out = tmp_path / "plan.json"
    assert cli("plan", str(wl), "--format", "json", "-o", str(out)).exit_code == 0
    plan = json.loads(out.read_text())
    assert plan["components"]["gpu"]["layout"] == "replicas"
    assert any(w["rule"] == "sla.defaulted-ttft-excludes-attention-dp" for w in plan["warnings"])
    res = cli("why-not", str(out), "attention-dp")
    assert "closest to being chosen: B200 | fp8 | dp8 ep8" in res.output, res.output
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
