"""End to end through the CLI: the plan contract (CONTRACTS §4), explanations, extensibility."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

CHAT = str(EXAMPLES / "chat-70b-online.yaml")
TOP_KEYS = {"servewise_version", "knowledge_hash", "workload", "defaults_used", "feasible",
            "components", "performance", "cost", "warnings", "rejected", "trace"}
COMPONENT_KEYS = {
    "gpu": {"model", "count", "per_server", "precision", "tensor_parallel", "replicas", "vram_per_gpu_gib"},
    "servers": {"count", "form"}, "cpu": {"model", "sockets", "cores_total"},
    "memory": {"capacity_gb", "type", "channels_populated"},
    "interconnect": {"intra_node", "pcie_lanes_per_gpu"}, "network": {"inter_node", "switch_features"},
    "storage": {"system", "model_store", "raid", "capacity_tb"},
    "power": {"server_draw_w", "psu_total_w", "redundancy"}, "cooling": {"type"},
    "rack": {"power_kw_per_rack", "servers_per_rack"}, "software": {"framework", "settings"},
}


@pytest.fixture(scope="module")
def chat_plan():
    from click.testing import CliRunner

    from servewise.cli.main import cli

    result = CliRunner().invoke(cli, ["plan", CHAT, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output), result.output


def test_contract_keys(chat_plan):
    plan, _ = chat_plan
    assert TOP_KEYS <= set(plan)
    for comp, keys in COMPONENT_KEYS.items():
        assert keys <= set(plan["components"][comp]), comp
        assert all(plan["components"][comp][k] is not None for k in keys), comp
    assert {"ttft_ms", "tpot_ms", "output_tokens_per_s", "max_concurrency", "meets_sla"} <= set(plan["performance"])
    assert {"capex_cny", "monthly_opex_cny", "cny_per_million_tokens", "buy_or_rent"} <= set(plan["cost"])
    assert plan["cost"]["buy_or_rent"] in ("buy", "rent")
    assert plan["components"]["network"]["inter_node"] in (
        "none", "ethernet-10g", "ethernet-25g", "ethernet-100g", "roce-v2-400g", "infiniband-ndr")


def test_every_component_is_explained_with_rule_and_source(chat_plan):
    plan, _ = chat_plan
    for comp in COMPONENT_KEYS:
        steps = [s for s in plan["trace"]
                 if any(c["fact"].startswith(f"components.{comp}.") for c in s["conclusions"])]
        assert steps, comp
        for s in steps:
            assert s["rule"]
            src = s["source"] if isinstance(s["source"], list) else [s["source"]]
            assert all(x.get("guideline") or x.get("url") for x in src)
            assert all(x.get("quote") for x in src if x.get("guideline"))


def test_trace_premises_point_to_earlier_steps(chat_plan):
    plan, _ = chat_plan
    numbers = {s["step"] for s in plan["trace"]}
    for s in plan["trace"]:
        for p in s["premises"]:
            if "step" in p:
                assert p["step"] in numbers and p["step"] < s["step"]


def test_formulas_show_numbers(chat_plan):
    plan, _ = chat_plan
    formulas = [c["formula"] for s in plan["trace"] for c in s["conclusions"] if c.get("formula")]
    assert any("×" in f and "=" in f for f in formulas)


def test_every_catalog_gpu_has_a_reason(chat_plan):
    from servewise.engine.domain.catalog import load_catalog

    plan, _ = chat_plan
    chosen = plan["components"]["gpu"]["model"]
    rejected = {r["option"].split(" | ")[0] for r in plan["rejected"]}
    for gpu in load_catalog().table("gpus"):
        assert gpu["id"] == chosen or gpu["id"] in rejected, gpu["id"]


def test_json_is_byte_identical_across_runs(cli, chat_plan):
    _, first = chat_plan
    assert cli("plan", CHAT, "--format", "json").output == first


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(10**30), 10**30), st.floats(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_json_is_what_json_dumps_writes(value):
    from servewise.cli.render import to_json

    assert to_json(value) == json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


def test_canonical_json_of_plans_and_of_what_it_leaves_to_json_dumps(chat_plan):
    from servewise.cli.render import to_json

    plan, text = chat_plan
    assert to_json(plan) == text == json.dumps(plan, ensure_ascii=False, sort_keys=True, indent=2) + "\n"
    with pytest.raises(TypeError):  # keys json.dumps cannot sort: the same error
        to_json({1: "int key", "b": "text key"})
    assert to_json({"a": {2: "x", 1: "y"}, "f": MyFloat(2.5)}) == json.dumps(
        {"a": {2: "x", 1: "y"}, "f": MyFloat(2.5)}, ensure_ascii=False, sort_keys=True, indent=2) + "\n"


class MyFloat(float):
    pass


def test_text_and_markdown(cli, tmp_path):
    text = cli("plan", CHAT, "--full")
    assert text.exit_code == 0
    assert text.output.index("Configuration") < text.output.index("Key reasons")
    brief = cli("plan", CHAT)
    assert brief.exit_code == 0 and "Configuration" in brief.output and "Key reasons" not in brief.output
    out = tmp_path / "plan.md"
    md = cli("plan", CHAT, "--format", "md", "-o", str(out))
    assert md.exit_code == 0 and md.output == ""
    body = out.read_text(encoding="utf-8")
    assert "```mermaid" in body and "| component | choice | why |" in body
    zh = cli("--lang", "zh", "plan", CHAT)
    assert "配置" in zh.output


def test_rule_in_rules_dir_fires_and_changes_the_plan(cli, tmp_path, chat_plan):
    plan, _ = chat_plan
    chosen = plan["components"]["gpu"]["model"]
    (tmp_path / "site.yaml").write_text(textwrap.dedent(f"""\
        - id: site.no-{chosen.lower().replace(' ', '-')}
          title: {{en: Our supplier cannot deliver this GPU, zh: 供应商无法供货}}
          source: {{url: "https://example.com/site-policy"}}
          stage: filters
          for_each: candidate
          when: ["candidate.gpu == '{chosen}'"]
          then:
            - reject: {{}}
          because: {{en: "Supplier cannot deliver {{candidate.gpu}}.", zh: "供应商无法供货 {{candidate.gpu}}。"}}
        """), encoding="utf-8")
    result = cli("--rules-dir", str(tmp_path), "plan", CHAT, "--format", "json")
    new = json.loads(result.output)
    assert new["components"]["gpu"]["model"] != chosen
    assert any(r["rule"].startswith("site.no-") for r in new["rejected"])
    assert new["knowledge_hash"] != plan["knowledge_hash"]


def test_infeasible_workload_exits_1(cli, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("model: Llama-3.1-405B\nsla: {tpot_ms: 1}\n", encoding="utf-8")
    result = cli("plan", str(path), "--format", "json")
    assert result.exit_code == 1
    plan = json.loads(result.output)
    assert plan["feasible"] is False
    assert any(w["severity"] == "critical" for w in plan["warnings"])
