"""Issue #36 item 2: speculative decoding in the step model, validated on measured MTP runs."""

from __future__ import annotations

import statistics

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.calibration import load_calibration
from servewise.engine.domain.perf.data import DEFAULT_FILES, read_rows
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.serving import predict
from servewise.engine.domain.perf.speculative import Speculation, speculation
from servewise.engine.domain.perf.validate import predict_row


def test_a_step_emits_one_plus_the_expected_accepted_prefix():
    assert Speculation(1, 0.0).tokens_per_step == 1.0
    assert Speculation(3, 1.0).tokens_per_step == 4.0
    assert Speculation(3, 0.5).tokens_per_step == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    with pytest.raises(ValueError):
        Speculation(0, 0.5)
    with pytest.raises(ValueError):
        Speculation(2, 1.5)


def test_a_model_without_a_measured_acceptance_gets_none_unless_given():
    cat = load_catalog()
    llama = cat.model("Llama-3.1-8B")
    with pytest.raises(ValueError, match="no measured speculative acceptance"):
        speculation(llama, 3, None, load_calibration())
    assert speculation(llama, 3, 0.6, load_calibration()).acceptance == 0.6
    v3 = speculation(cat.model("DeepSeek-V3"), 1, None, load_calibration())
    assert v3.acceptance == load_calibration()["speculative"]["families"]["deepseek"]["acceptance"]
    assert "InferenceX" in v3.source


def test_speculation_lowers_tpot_when_decode_is_memory_bound():
    cat = load_catalog()
    model, gpu = cat.model("DeepSeek-V3"), cat.gpu("B200")
    kw = dict(precision="fp8", isl=1024, osl=1024, concurrency=4, backend="trtllm")
    _, plain, _ = predict(model, gpu, Layout(8, 1, 8, 1), **kw)
    _, spec, _ = predict(model, gpu, Layout(8, 1, 8, 1), speculative=Speculation(3, 0.7), **kw)
    _, none_kept, _ = predict(model, gpu, Layout(8, 1, 8, 1), speculative=Speculation(3, 0.0), **kw)
    assert spec < 0.7 * plain  # 2.5 tokens a step; the verify of 4 positions reads more experts
    assert none_kept > plain  # nothing accepted: the draft and the wider verify only cost


def test_measured_mtp_runs_are_predicted_within_15_percent():
    f = next(p for p in DEFAULT_FILES if str(p).endswith("measured.csv"))
    _, rows = read_rows(f)
    spec = [r for r in rows if r.speculative_tokens and not r.skipped and r.tpot_ms]
    assert len(spec) == 88 and {r.speculative_tokens for r in spec} == {1, 3}
    errs = [abs(predict_row(r)["tpot_ms"] - r.tpot_ms) / r.tpot_ms for r in spec]
    assert statistics.median(errs) <= 0.15


def test_estimate_takes_speculative_tokens_through_the_cli(cli):
    args = ["estimate", "--model", "DeepSeek-R1", "--gpu", "B200", "--tp", "8", "--ep", "8",
            "--precision", "fp8", "--isl", "1024", "--osl", "8192", "--concurrency", "4",
            "--backend", "trtllm", "--format", "json"]
    import json

    plain = json.loads(cli(*args).output)
    res = cli(*args, "--speculative-tokens", "3")
    spec = json.loads(res.output)
    assert spec["tpot_ms"] < 0.75 * plain["tpot_ms"] and spec["inputs"]["speculative"]["tokens"] == 3
    assert any(s["name"] == "speculative_tpot" for s in spec["steps"])
    bad = cli(*args[:-2], "--speculative-tokens", "3", "--model", "Llama-3.1-8B", "--tp", "1", "--ep", "1")
    assert bad.exit_code == 2 and "no measured speculative acceptance" in bad.output
    lone = cli(*args, "--acceptance", "0.6")
    assert lone.exit_code == 2 and "--acceptance: applies with --speculative-tokens" in lone.output
