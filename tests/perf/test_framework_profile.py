"""A plan is sized with the measured profile of the framework it recommends (session 30, issue #13)."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate
from servewise.engine.domain.perf.calibration import BACKEND_NAMES, FRAMEWORK_PROFILE, framework_backend


@pytest.mark.parametrize("framework,backend", [("vLLM", "vllm"), ("SGLang", "sglang"),
                                               ("TensorRT-LLM", "trtllm"), ("vLLM (ROCm)", "vllm"),
                                               ("MindIE", "vllm"), (None, "vllm"), ("sglang", "sglang"),
                                               ("LMDeploy", "vllm")])
def test_framework_backend(framework: str | None, backend: str) -> None:
    assert framework_backend(framework) == backend


def test_every_framework_the_rules_name_has_a_profile() -> None:
    """The frameworks the candidate rule can name (rules/candidates/gpu.yaml decides them with
    serving_framework) are the mapping's keys."""
    from pathlib import Path

    from servewise.engine.domain.fn_cost import serving_framework

    text = (Path(__file__).parents[2] / "rules" / "candidates" / "gpu.yaml").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("framework:"))
    assert "serving_framework(" in line
    named = {serving_framework(vendor, skills, attention)
             for vendor in ("nvidia", "amd", "huawei") for skills in ([], ["tensorrt"]) for attention in ("GQA", "MLA")}
    assert named == set(FRAMEWORK_PROFILE)


def _disagg_tpot(catalog, wl: dict, gpu: dict, backend: str) -> float:
    """TPOT of a disaggregated plan's pools re-estimated with ``backend``'s profile."""
    from servewise.engine.domain.perf.disagg import Pool, predict_disagg
    from servewise.engine.domain.perf.memory import Layout
    from servewise.engine.domain.perf.speculative import Speculation

    card = catalog.gpu(gpu["model"])
    lay = Layout(1, 1, gpu["expert_parallel"], gpu["attention_dp"])
    spec = (Speculation(gpu["speculative_tokens"], gpu["speculative_acceptance"])
            if gpu.get("speculative") == "mtp" else None)
    s = predict_disagg(catalog.model(wl["model"]), Pool(card, lay, gpu["prefill_workers"]),
                       Pool(card, lay, gpu["decode_workers"]), precision=gpu["precision"],
                       isl=wl["traffic"]["avg_input_tokens"], osl=wl["traffic"]["avg_output_tokens"],
                       request_rate=wl["traffic"]["peak_qps"], backend=backend, speculative=spec)
    return round(s["tpot"], 2)


def test_example_plans_state_and_use_their_framework_profile(example_plans) -> None:
    """Each example's operating point is the estimate with the profile the plan names: re-estimated
    here with that backend it gives the plan's TPOT; for the MLA examples (SGLang) the vLLM
    profile would give another number, so the profile is not a label only."""
    catalog = load_catalog()
    seen = set()
    for name, ex in sorted(example_plans.items()):
        plan = ex.plan
        perf, sw, gpu = plan["performance"], plan["components"]["software"], plan["components"]["gpu"]
        if perf.get("tpot_ms") is None or not gpu.get("model") or plan["workload"].get("models"):
            continue
        assert perf["sized_with"] == BACKEND_NAMES[framework_backend(sw["framework"])], name
        seen.add(perf["sized_with"])
        if perf["sized_with"] != "SGLang":
            continue
        wl = plan["workload"]
        if gpu.get("layout") == "disaggregated":  # the two pools at the peak rate (fn_disagg)
            own, other = (_disagg_tpot(catalog, wl, gpu, backend) for backend in ("sglang", "vllm"))
            assert own == pytest.approx(perf["tpot_ms"], abs=0.01), name
            assert abs(other - own) > 0.5, name
            continue
        per_replica = sw["settings"]["max_running_requests"]  # SGLang's per-replica limit
        kwargs = dict(tp=gpu["tensor_parallel"], pp=gpu["pipeline_parallel"], precision=gpu["precision"],
                      ep=gpu.get("expert_parallel") or 1, attention_dp=gpu.get("attention_dp") or 1,
                      isl=wl["traffic"]["avg_input_tokens"], osl=wl["traffic"]["avg_output_tokens"],
                      concurrency=per_replica, arrival="poisson")
        if gpu.get("speculative") == "mtp":
            from servewise.engine.domain.perf.speculative import Speculation

            kwargs["speculative"] = Speculation(gpu["speculative_tokens"], gpu["speculative_acceptance"])
        model, card = catalog.model(wl["model"]), catalog.gpu(gpu["model"])
        own = estimate(model, card, backend="sglang", **kwargs).tpot_ms
        other = estimate(model, card, backend="vllm", **kwargs).tpot_ms
        assert own == pytest.approx(perf["tpot_ms"], abs=0.01), name
        assert abs(other - own) > 0.5, name
    assert seen >= {"vLLM", "SGLang"}
