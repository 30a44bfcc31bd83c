"""Per-model request lengths inside ``models:`` (CONTRACTS, turn 3): each pool is sized with its own."""

from __future__ import annotations

import json


def _workload(tmp_path, extra: str) -> str:
    p = tmp_path / "w.yaml"
    p.write_text("models:\n"
                 f"  - {{model: Qwen2.5-7B, peak_qps: 2{extra}}}\n"
                 "  - {model: Llama-3.2-3B, peak_qps: 2}\n", encoding="utf-8")
    return str(p)


def test_each_pool_is_sized_with_its_own_lengths(cli, tmp_path):
    long = json.loads(cli("plan", _workload(tmp_path, ", avg_input_tokens: 6000, avg_output_tokens: 64"),
                          "--format", "json").output)
    text = json.dumps(long["pools"][0])
    assert "--random-input-len 6000 --random-output-len 64" in text
    assert "--random-input-len 6000" not in json.dumps(long["pools"][1])  # the other pool keeps the defaults
    assert long["workload"]["models"][0]["avg_input_tokens"] == 6000


def test_a_bad_per_model_length_names_its_path(cli, tmp_path):
    r = cli("plan", _workload(tmp_path, ", avg_output_tokens: -5"))
    assert r.exit_code == 2 and "models.0.avg_output_tokens" in r.output
