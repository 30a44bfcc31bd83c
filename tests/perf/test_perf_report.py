"""The accuracy report's leave-one-out helpers: coverage gaps and tables."""

from tools.perf.report import held_out_lines, lomo_backend_lines, uncovered


def test_uncovered_names_the_precision_only_the_held_out_model_has():
    # TRT-LLM's only 16-bit Hopper rows are Llama-3.1-8B's; its H200 FP8 rows share
    # precision and class with Qwen3-235B-A22B's, so only the trtllm gap is listed.
    assert uncovered("Llama-3.1-8B") == {"trtllm": ["hopper-hbm bf16"]}
    assert "sglang" in uncovered("Qwen3-32B")


def test_lomo_backend_lines_show_gaps_per_backend():
    cell = {"median_ape": 0.25, "p90_ape": 0.5, "n": 10}
    lomo = {"Llama-3.1-8B": {"by_backend": {"trtllm": {"tpot_ms": cell},
                                            "vllm": {"ttft_ms": cell}}}}
    lines = lomo_backend_lines(lomo)
    assert lines[2] == "| Llama-3.1-8B | trtllm | 25.0% (10) | – | hopper-hbm bf16 |"
    assert lines[3] == "| Llama-3.1-8B | vllm | – | 25.0% (10) | – |"


def test_held_out_lines_one_row_per_held_out_name():
    cell = {"median_ape": 0.139, "p90_ape": 0.383, "n": 365}
    lines = held_out_lines("held-out GPU", {"B200": {"overall": {"tpot_ms": cell}}})
    assert lines[0].startswith("| held-out GPU | TPOT")
    assert lines[2] == "| B200 | 13.9% / 38.3% (365) | – |"
