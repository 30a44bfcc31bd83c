"""Accuracy regression on the shipped data (facts/data/*.csv) with the shipped calibration.

The issue's targets are median APE TPOT ≤ 10 %, TTFT ≤ 20 %, offline throughput ≤ 15 %.
Offline throughput meets its target (4.9 %). TPOT (11.6 %) and TTFT (25.8 %) do not yet
(docs/accuracy.md has the numbers and why): their target tests are strict xfails, so they start
failing, as a signal, once the model gets there; the guards below (about one point above the
achieved values) stop the model from getting worse than it is now.
"""

import pytest
from servewise.engine.perf.validate import validate

GUARD = {"tpot_ms": 0.125, "ttft_ms": 0.27, "offline_output_tokens_per_s": 0.07}
TARGET = {"tpot_ms": 0.10, "ttft_ms": 0.20, "offline_output_tokens_per_s": 0.15}


@pytest.fixture(scope="module")
def summary():
    return validate()["summary"]["overall"]


@pytest.mark.parametrize("metric", sorted(GUARD))
def test_no_regression(summary, metric):
    assert summary[metric]["median_ape"] <= GUARD[metric], summary[metric]


def test_offline_throughput_target(summary):
    assert summary["offline_output_tokens_per_s"]["median_ape"] <= TARGET[
        "offline_output_tokens_per_s"]


@pytest.mark.xfail(strict=True, reason="TPOT median APE is 11.6 % (target 10 %), see accuracy.md")
def test_tpot_target(summary):
    assert summary["tpot_ms"]["median_ape"] <= TARGET["tpot_ms"]


@pytest.mark.xfail(strict=True, reason="TTFT median APE is 25.8 % (target 20 %), see accuracy.md")
def test_ttft_target(summary):
    assert summary["ttft_ms"]["median_ape"] <= TARGET["ttft_ms"]


def test_every_measured_row_predicted():
    r = validate()
    measured = [x for x in r["rows"] if x["file"] == "measured.csv"]
    assert len(measured) == 1256
    assert not [x for x in measured if x["skipped"]]
