"""Accuracy regression on the shipped data (facts/data/*.csv) with the shipped calibration.

The issue's targets are median APE TPOT ≤ 10 %, TTFT ≤ 20 %, offline throughput ≤ 15 %.
All three are met on the shipped rows (TPOT 7.2 %, TTFT 19.7 %, offline 11.5 %) and asserted;
the guards below (about half a point above the achieved values) stop the model from getting
worse than it is now. Leave-one-model-out does not meet them (docs/accuracy.md).
"""

import pytest

from servewise.engine.perf.validate import validate

GUARD = {"tpot_ms": 0.075, "ttft_ms": 0.20, "offline_output_tokens_per_s": 0.12}
TARGET = {"tpot_ms": 0.10, "ttft_ms": 0.20, "offline_output_tokens_per_s": 0.15}
# per GPU (median APE, fitted rows): guards about one point above the achieved values
# (TPOT / TTFT: H100 4.8 / 15.4 %, H200 8.2 / 52.8 %, B200 14.4 / 26.4 %)
GPU_GUARD = {"H100 SXM": {"tpot_ms": 0.055, "ttft_ms": 0.16},
             "H200 SXM": {"tpot_ms": 0.09, "ttft_ms": 0.535},
             "B200": {"tpot_ms": 0.15, "ttft_ms": 0.27}}


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


def test_tpot_target(summary):
    assert summary["tpot_ms"]["median_ape"] <= TARGET["tpot_ms"]


def test_ttft_target(summary):
    assert summary["ttft_ms"]["median_ape"] <= TARGET["ttft_ms"]


def test_every_measured_row_predicted(result):
    measured = [x for x in result["rows"] if x["file"] == "measured.csv"]
    assert len(measured) == 1256
    assert not [x for x in measured if x["skipped"]]


def test_single_stream_prefill_rows_are_engine_prefills():
    """TRT-LLM v0.5 'single-stream prefill (batch 1)' rows time one in-engine prefill.

    They are compared with the prefill step (no server latency), which grows with the prompt,
    and is far below the served TTFT of the same request.
    """
    from servewise.engine.perf.data import DEFAULT_FILES, read_rows
    from servewise.engine.perf.serving import predict
    from servewise.engine.perf.validate import predict_row

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
