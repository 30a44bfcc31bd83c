"""Accuracy regression on the shipped data (facts/data/, all four files) with the shipped
calibration.

Issue #13's targets (median APE, fitted on all shared data) are TPOT ≤ 8 %, TTFT ≤ 15 %,
offline throughput ≤ 12 %. Offline throughput meets its target (8.9 %) and is asserted; TPOT
(9.7 %) and TTFT (18.5 %) do not (docs/accuracy.md says why): the guards below, about half a
point above the achieved values, stop the model from getting worse than it is now.
"""

import pytest

from servewise.engine.domain.perf.validate import validate

GUARD = {"tpot_ms": 0.102, "ttft_ms": 0.19, "offline_output_tokens_per_s": 0.094}
TARGET = {"tpot_ms": 0.08, "ttft_ms": 0.15, "offline_output_tokens_per_s": 0.12}
# per GPU (median APE, fitted rows): guards about one point above the achieved values
# (TPOT / TTFT: H100 8.5 / 17.7 %, H200 14.8 / 20.2 %, B200 9.0 / 15.3 %, B300 9.7 / 29.8 %)
GPU_GUARD = {"H100 SXM": {"tpot_ms": 0.095, "ttft_ms": 0.187},
             "H200 SXM": {"tpot_ms": 0.158, "ttft_ms": 0.212},
             "B200": {"tpot_ms": 0.10, "ttft_ms": 0.163},
             "B300": {"tpot_ms": 0.107, "ttft_ms": 0.308}}


@pytest.fixture(scope="module")
def result():
    return validate()


@pytest.fixture(scope="module")
def summary(result):
    return result["summary"]["overall"]


@pytest.mark.parametrize("metric", sorted(GUARD))
def test_no_regression(summary, metric):
    assert summary[metric]["median_ape"] <= GUARD[metric], summary[metric]


@pytest.mark.parametrize("gpu", sorted(GPU_GUARD))
def test_no_regression_per_gpu(result, gpu):
    by = result["summary"]["by_gpu"][gpu]
    for metric, limit in GPU_GUARD[gpu].items():
        assert by[metric]["median_ape"] <= limit, (gpu, metric, by[metric])


def test_offline_throughput_target(summary):
    assert summary["offline_output_tokens_per_s"]["median_ape"] <= TARGET[
        "offline_output_tokens_per_s"]


def test_every_measured_row_predicted(result):
    measured = [x for x in result["rows"] if x["file"] == "measured.csv"]
    assert len(measured) == 1256
    skipped = [x for x in measured if x["skipped"]]
    # the 88 InferenceX DeepSeek-R1 TensorRT-LLM MTP runs (image 1.2.0rc6.post3) are predicted
    # with speculative decoding since issue #36: every row is predicted
    assert skipped == []


def test_single_stream_prefill_rows_are_engine_prefills():
    """TRT-LLM v0.5 'single-stream prefill (batch 1)' rows time one in-engine prefill.

    They are compared with the prefill step (no server latency), which grows with the prompt,
    and is far below the served TTFT of the same request.
    """
    from servewise.engine.domain.perf.data import DEFAULT_FILES, read_rows
    from servewise.engine.domain.perf.serving import predict
    from servewise.engine.domain.perf.validate import predict_row

    _, rows = read_rows(DEFAULT_FILES[1])
    pre = [r for r in rows if r.prefill_only and not r.skipped]
    assert len(pre) == 10
    assert not [r for r in rows if r.prefill_only and r.concurrency != 1]
    for r in pre:
        engine = predict_row(r)["ttft_ms"]
        served = predict(r.model, r.gpu, r.layout, precision=r.precision, isl=r.isl, osl=r.osl,
                         concurrency=1, backend=r.backend)[0]
        assert engine < served - 20, r  # the server adds its per-request latency
    by_len = {(r.model_name, r.gpu_name, r.isl): predict_row(r)["ttft_ms"] for r in pre}
    for (model, gpu, isl), t in by_len.items():
        if isl == 2048:
            assert t > 5 * by_len[(model, gpu, 128)]
