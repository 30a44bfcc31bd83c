"""Every model and GPU the shipped data names is in the catalog; embedding estimates; model
entries generated from config.json files cover every shared config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from servewise.cli.perf_commands import estimate_cmd
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate, estimate_embedding
from servewise.engine.domain.perf.data import DEFAULT_FILES, read_rows

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = next((p / "shared" / "data" / "model_configs" for p in (ROOT.parent, ROOT.parent.parent)
                if (p / "shared" / "data" / "model_configs").is_dir()), ROOT / "missing")


def test_no_shipped_row_is_skipped_for_an_unknown_name():
    for f in DEFAULT_FILES:
        _, rows = read_rows(f)
        unknown = [r.index for r in rows if r.skipped and "unknown" in r.skipped]
        assert not unknown, (f.name, unknown[:5])


@pytest.mark.skipif(not CONFIGS.is_dir(), reason="../shared/data/model_configs not present")
def test_every_shared_config_resolves_to_a_catalog_model():
    """By its repo id or, for a quantized variant of a model already catalogued, by the base
    name tools/gen_model_catalog.py maps it to."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen", ROOT / "tools" / "gen_model_catalog.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    cat = load_catalog()
    missing = []
    for f in sorted(CONFIGS.glob("*_config.json")):
        base, repo = gen.base_name(f.name)
        for name in (repo, base):
            try:
                cat.model(name)
                break
            except Exception:  # noqa: BLE001 - UnknownEntry: try the next name
                continue
        else:
            missing.append(repo)
    assert not missing


def test_generated_entries_match_published_sizes():
    """Counts computed from config.json land on the published totals (billions)."""
    cat = load_catalog()
    for name, total, active in (("Kimi-K2.5", 1040, 32), ("GLM-5", 744, 40),
                                ("MiniMax-M2.5", 230, 10), ("Qwen3.5-397B-A17B", 397, 17),
                                ("Mixtral-8x22B", 141, 39), ("Llama-4-Scout", 109, 17)):
        m = cat.model(name)
        assert m["total_params_b"] == pytest.approx(total, rel=0.03), name
        assert m["active_params_b"] == pytest.approx(active, rel=0.12), name


def test_hybrid_models_count_only_full_attention_kv():
    cat = load_catalog()
    q = cat.model("Qwen3.5-397B-A17B")
    assert q["kv_layers"] == 15 and q["num_layers"] == 60
    g = cat.gpu("H200 SXM")
    full = estimate(q, g, tp=8, precision="fp8", isl=8192, osl=1024, concurrency=64)
    dense_kv = estimate({**q, "kv_layers": None}, g, tp=8, precision="fp8", isl=8192,
                        osl=1024, concurrency=64)
    assert full.memory.kv_cache_gib == pytest.approx(dense_kv.memory.kv_cache_gib / 4, rel=1e-6)


def test_embedding_estimate_is_prefill_only():
    cat = load_catalog()
    m, g = cat.model("bge-m3"), cat.gpu("L4")
    one = estimate_embedding(m, g, precision="fp16", isl=512, concurrency=1)
    many = estimate_embedding(m, g, precision="fp16", isl=512, concurrency=32)
    assert one.tpot_ms is None and one.output_tokens_per_s is None
    rps = {s.name: s.result for s in many.steps}["requests_per_s"]
    rps1 = {s.name: s.result for s in one.steps}["requests_per_s"]
    assert rps > rps1 and many.ttft_ms > one.ttft_ms
    # compute-bound: tokens/s below the GPU's 16-bit peak over 2 x parameters per token
    tok_s = {s.name: s.result for s in many.steps}["input_tokens_per_s"]
    assert tok_s < 121e12 / (2 * 0.3e9)


def test_estimate_cli_embedding_and_osl_required():
    r = CliRunner().invoke(estimate_cmd, ["--task", "embedding", "--model", "bge-m3", "--gpu",
                                          "L4", "--tp", "1", "--precision", "fp16", "--isl",
                                          "512", "--concurrency", "16", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["inputs"]["task"] == "embedding" and d["tpot_ms"] is None and d["ttft_ms"] > 0
    r = CliRunner().invoke(estimate_cmd, ["--model", "bge-m3", "--gpu", "L4", "--tp", "1",
                                          "--precision", "fp16", "--isl", "512",
                                          "--concurrency", "16"])
    assert r.exit_code == 2 and "--osl" in r.output
