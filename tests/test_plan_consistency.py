"""One consistent plan (issue 39 item 2): for every example, the views of one number agree —
GPUs vs replicas vs software settings vs containers vs standby, availability vs the GPU component,
the chosen configuration as rejected alternatives name it, the SLA verdict vs the values checked,
the model the load test names, and each component's reason its own."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES

from servewise.cli.render import _reason_for

NAMES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))


def _single(plan: dict) -> bool:
    return plan["feasible"] and not plan.get("pools")


@pytest.fixture(scope="module")
def plans(example_plans):
    return {name: example_plans[name].plan for name in NAMES}


def test_gpus_replicas_settings_and_containers_agree(plans):
    for name, plan in plans.items():
        if not _single(plan):
            continue
        c = plan["components"]
        gpu = c["gpu"]
        if not gpu.get("tensor_parallel"):
            continue  # edge devices, encoders without a replica layout
        pp = gpu.get("pipeline_parallel") or 1
        per_replica = gpu["tensor_parallel"] * (gpu.get("attention_dp") or 1) * pp  # an attention-DP engine: tp x dp
        assert per_replica == (gpu.get("gpus_per_replica") or per_replica), name
        assert gpu["count"] == gpu["replicas"] * per_replica + (gpu.get("standby_gpus") or 0), name
        assert gpu["replicas"] == gpu["replicas_for_peak"] + gpu["spare_replicas"], name
        settings = c["software"].get("settings") or {}
        if "data_parallel_replicas" in settings:
            assert settings["data_parallel_replicas"] == gpu["replicas"], name
        parallelism = c["software"].get("parallelism") or ""
        if "data-parallel replica" in parallelism:
            assert f"× {gpu['replicas']} data-parallel replica(s)" in parallelism, (name, parallelism)
        layout = (c.get("isolation") or {}).get("layout") or ""
        m = re.match(r"(\d+) container", layout)
        if m:
            assert int(m.group(1)) == gpu["replicas"], (name, layout)
        servers = c["servers"]
        assert servers["count"] * servers["gpus_per_server"] >= gpu["count"], name


def test_availability_counts_what_the_gpu_component_counts(plans):
    for name, plan in plans.items():
        if not _single(plan):
            continue
        gpu, av = plan["components"]["gpu"], plan["components"].get("availability") or {}
        if av.get("redundant_replicas") is None:
            continue
        assert av["redundant_replicas"] == gpu["spare_replicas"], name
        assert av["replicas_for_peak"] == gpu["replicas_for_peak"], name
        if av.get("replicas_after_server_loss") is not None and av.get("survives_server_loss"):
            assert av["replicas_after_server_loss"] >= gpu["replicas_for_peak"], name


CHOSEN = re.compile(r"(?:than|with) the chosen (.+?) \(([\d,]+) CNY on the same basis")


def test_rejected_alternatives_name_the_chosen_plan_and_their_basis(plans):
    """A ranked rejection names the chosen configuration as the plan has it and says its TCO
    covers GPUs, platforms and power (the BOM's drives and network are common to all)."""
    for name, plan in plans.items():
        if not plan["feasible"]:
            continue
        gpu = plan["components"]["gpu"]
        ranked = [r for r in plan["rejected"] if r.get("ranked") and r["rule"] == "select.cheapest-candidate"]
        for r in ranked:
            m = CHOSEN.search(r["because"])
            assert m, (name, r["because"][-200:])
            assert "TCO of GPUs, platforms and power" in r["because"], name
            if _single(plan):
                assert m.group(1) == f"{gpu['count']} × {gpu['model']}", (name, m.group(1))


def test_the_sla_verdict_is_the_values_it_checked(plans):
    for name, plan in plans.items():
        perf, sla = plan["performance"], plan["workload"].get("sla") or {}
        if not plan["feasible"] or perf.get("ttft_checked_ms") is None or plan["workload"]["mode"] == "offline":
            continue
        ok = ((sla.get("ttft_ms") is None or perf["ttft_checked_ms"] <= sla["ttft_ms"])
              and (sla.get("tpot_ms") is None or perf["tpot_checked_ms"] <= sla["tpot_ms"]))
        assert perf["meets_sla"] == ok, name
        if perf.get("itl_band") == "too slow" and perf["meets_sla"] and plan["workload"]["mode"] == "online":
            assert any(w["rule"] == "sla.itl-slower-than-streaming" for w in plan["warnings"]), name


def test_the_load_test_names_the_served_model(plans):
    for name, plan in plans.items():
        if not _single(plan):
            continue
        command = (plan["components"].get("loadtest") or {}).get("command") or ""
        model = plan["workload"]["model"]
        if command and isinstance(model, str):
            assert re.search(rf"(--model|--ModelName) {re.escape(model)} ", command, re.I), (name, command[:120])


def test_each_component_has_its_own_reason(plans):
    for name, plan in plans.items():
        if not _single(plan):
            continue
        reasons = {comp: _reason_for(plan, comp, "en") for comp in ("gpu", "servers", "cpu", "memory", "software")}
        assert reasons["servers"] and reasons["servers"] != reasons["gpu"], name
