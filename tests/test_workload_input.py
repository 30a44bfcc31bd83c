"""Workload files: one source of truth (facts/inputs.yaml), clear errors with field paths."""

from __future__ import annotations

import json

import pytest

from servewise.engine.app.inputs import fill_defaults, input_defs, workload_schema


def write(tmp_path, text):
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


BAD = [
    ("model: Llama-3.1-8B\ntrafic:\n  peak_qps: 3\n", "w.yaml:2: trafic: unknown key 'trafic'; did you mean 'traffic'?"),
    ("model: Llama-3.1-8B\ntraffic:\n  peak_qpss: 3\n", "w.yaml:3: traffic.peak_qpss: unknown key 'peak_qpss'; did you mean 'peak_qps'?"),
    ("model: Llama-3.1-8B\ntraffic:\n  peak_qps: -3\n", "traffic.peak_qps: expected a number in 0.001..100000 req/s, got -3"),
    ("model: Llama-3.1-8B\nmode: onlin\n", "mode: expected one of online, offline, edge, got 'onlin'"),
    ("model: Llama-3.1-8B\nsla:\n  ttft_ms: fast\n", "sla.ttft_ms: expected a number in 1..600000 ms or null, got 'fast'"),
    ("mode: online\n", "model: missing required field 'model'"),
    ("model: Llama-9-70B\n", "model: unknown models 'Llama-9-70B'"),
    ("model: {name: mine}\n", "model: expected a catalog model name or a custom-model mapping; 'params_b' is a required property"),
    ("model: [unclosed\n", "invalid YAML"),
    ("- just\n- a list\n", "a workload must be a mapping"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_bad_workloads_exit_2_with_field_path(tmp_path, cli, text, message):
    result = cli("plan", write(tmp_path, text))
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_missing_file(cli):
    result = cli("plan", "no/such/file.yaml")
    assert result.exit_code == 2
    assert "file not found" in result.output


def test_schema_is_generated_from_inputs_yaml():
    schema = workload_schema()
    for d in input_defs():
        node = schema
        for part in d.key.split("."):
            node = node["properties"][part]
        assert node is not None
    assert schema["additionalProperties"] is False
    assert schema["properties"]["traffic"]["additionalProperties"] is False


def test_every_input_has_bilingual_question():
    for d in input_defs():
        assert d.question.get("en") and d.question.get("zh"), d.key


def test_defaults_are_filled_and_reported():
    workload, used = fill_defaults({"model": "Llama-3.1-8B", "traffic": {"peak_qps": 3}})
    assert workload["traffic"]["peak_qps"] == 3
    assert workload["sla"]["ttft_ms"] == 500
    assert "sla.ttft_ms" in used and "traffic.peak_qps" not in used


def test_schema_command(cli):
    result = cli("schema", "workload")
    assert json.loads(result.output)["title"] == "servewise workload"


def test_every_numeric_bound_is_a_number():
    """A bound YAML reads as a string (`1.0e11` without a sign) broke jsonschema at plan time."""
    for d in input_defs():
        for bound in ("minimum", "maximum"):
            value = getattr(d, bound, None)
            assert value is None or isinstance(value, (int, float)) and not isinstance(value, bool), (d.key, bound, value)
        if d.type in ("number", "integer"):
            assert d.default is None or isinstance(d.default, (int, float)) and not isinstance(d.default, bool), d.key
            assert d.minimum is None or d.maximum is None or d.minimum < d.maximum, d.key


def test_a_budget_never_crashes(tmp_path, cli):
    result = cli("plan", write(tmp_path, "model: Qwen2.5-7B\nconstraints:\n  capex_budget_cny: 150000\n"))
    assert result.exit_code in (0, 1)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("text, en, zh", [
    ("model: Llama-3.1-70B\ntraffic: {peak_qps: -3}\n", "expected a number in", "范围内的数值"),
    ("model: Llama-3.1-70B\ntraffic: {peek: 1}\n", "did you mean 'peak_qps'", "是否想写 'peak_qps'"),
    ("model: Llama-3.1-70B\nmode: sometimes\n", "expected one of", "应为以下之一"),
    ("traffic: {peak_qps: 1}\n", "missing required field", "缺少必填字段"),
])
def test_validation_messages_in_both_languages(tmp_path, cli, text, en, zh):
    path = tmp_path / "w.yaml"
    path.write_text(text, encoding="utf-8")
    english = cli("plan", str(path))
    chinese = cli("--lang", "zh", "plan", str(path))
    assert english.exit_code == chinese.exit_code == 2
    assert en in english.output and "error:" in english.output
    assert zh in chinese.output and "错误" in chinese.output and "expected" not in chinese.output
def test_a_budget_is_honoured(tmp_path, cli):
    """#11 item 5: the best plan within the budget; none within it -> exit 1 with what the budget buys and what
    meeting the SLA costs."""
    base = "model: Qwen2.5-7B\nprecision: fp8\nsla: {ttft_ms: 800, tpot_ms: 50}\ntraffic: {peak_qps: 5}\n"
    short = cli("--lang", "en", "plan", write(tmp_path, base + "constraints: {capex_budget_cny: 100000}\n"))
    assert short.exit_code == 1, short.output[-800:]
    flat = " ".join(short.output.split())
    assert "fits the 100,000 CNY budget. Meeting it costs at least" in flat and "What the budget buys:" in flat
    plenty = cli("--lang", "en", "plan", "--format", "json",
                 write(tmp_path, base + "constraints: {capex_budget_cny: 5000000}\n"))
    assert plenty.exit_code == 0 and json.loads(plenty.output)["cost"]["capex_cny"] <= 5000000
