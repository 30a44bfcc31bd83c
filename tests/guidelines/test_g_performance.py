"""Performance-model guidelines (G-GPU bandwidth/compute, G-MEM-005, G-SW-001), through `servewise estimate`."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def estimate():
    from click.testing import CliRunner

    from servewise.cli.main import cli as group

    runner, cache = CliRunner(), {}

    def _estimate(model: str, gpu: str, precision: str = "bf16", concurrency: int = 1, isl: int = 1024,
                  osl: int = 256, tp: int = 1) -> dict:
        args = ["estimate", "--model", model, "--gpu", gpu, "--tp", str(tp), "--precision", precision,
                "--isl", str(isl), "--osl", str(osl), "--concurrency", str(concurrency), "--format", "json"]
        key = tuple(args)
        if key not in cache:
            result = runner.invoke(group, args, catch_exceptions=False)
            assert result.exit_code == 0, result.output
            cache[key] = json.loads(result.output)
        return cache[key]

    return _estimate


BANDWIDTH_GBS = {"L40S": 864, "H100 SXM": 3350, "A100 80GB SXM": 2039}


@pytest.mark.parametrize("gpu", list(BANDWIDTH_GBS))
def test_g_gpu_014(estimate, gpu):
    """Decode reads all weights once per token: TPOT ≥ weight bytes ÷ memory bandwidth."""
    est = estimate("Llama-3.1-8B", gpu)
    bound_ms = est["memory"]["weights_gib"] * 2**30 / (BANDWIDTH_GBS[gpu] * 1e9) * 1000
    assert est["tpot_ms"] >= bound_ms
    assert est["tpot_ms"] <= 1.5 * bound_ms  # and it is close to the bound at one request: bandwidth-bound


def test_g_gpu_028(estimate):
    """Higher memory bandwidth means faster generation of the same model."""
    tpots = [estimate("Llama-3.1-8B", gpu)["tpot_ms"] for gpu in sorted(BANDWIDTH_GBS, key=BANDWIDTH_GBS.get)]
    assert tpots == sorted(tpots, reverse=True)


def test_g_gpu_002(estimate):
    """At small batch the GPU is bandwidth-bound: 8 requests cost little more per step than 1."""
    one, eight = estimate("Llama-3.1-8B", "L40S", concurrency=1), estimate("Llama-3.1-8B", "L40S", concurrency=8)
    assert eight["tpot_ms"] < 1.3 * one["tpot_ms"]
    assert eight["output_tokens_per_s"] > 5 * one["output_tokens_per_s"]


def test_g_mem_005(estimate):
    """If the KV cache of the requests in flight does not fit in VRAM, the configuration does not fit
    (no offload to host memory is planned)."""
    small = estimate("Llama-3.1-70B", "H100 SXM", "fp8", concurrency=4)
    big = estimate("Llama-3.1-70B", "H100 SXM", "fp8", concurrency=500, isl=4096, osl=1024)
    assert small["fits"] is True
    assert big["fits"] is False and big["tpot_ms"] is None


@pytest.mark.parametrize("concurrency", [1, 16, 64])
def test_g_sw_001(estimate, concurrency):
    """Batching reuses the weights, but the KV cache grows with the batch: VRAM = weights + batch × KV."""
    est = estimate("Llama-3.1-8B", "L40S", concurrency=concurrency)
    per_request = estimate("Llama-3.1-8B", "L40S", concurrency=1)["memory"]["kv_cache_gib"]
    assert est["memory"]["kv_cache_gib"] == pytest.approx(concurrency * per_request, rel=0.01)
    assert est["memory"]["weights_gib"] == estimate("Llama-3.1-8B", "L40S")["memory"]["weights_gib"]


def test_g_mem_016(estimate):
    """70B weights: ≥ 140 GB at 16 bit, about half at 8 bit, plus the KV cache on top."""
    bf16, fp8 = estimate("Llama-3.1-70B", "H200 SXM"), estimate("Llama-3.1-70B", "H200 SXM", "fp8")
    assert bf16["memory"]["weights_gib"] * 2**30 / 1e9 >= 140
    assert 0.5 <= fp8["memory"]["weights_gib"] / bf16["memory"]["weights_gib"] <= 0.55
    assert bf16["memory"]["total_gib"] > bf16["memory"]["weights_gib"] + bf16["memory"]["kv_cache_gib"] - 1e-6
