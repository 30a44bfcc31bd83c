"""The SLA is checked with the statistic its target names (sla.p99) at the edge sla.confidence
names (issue 39 item 3, issue 40's sla.confidence): a mean target or the median edge admits at
least as many requests in flight per replica as the default P99 target at the p80 edge."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import serving


@pytest.fixture(scope="module")
def parts():
    cat = load_catalog()
    return cat.model("Llama-3.1-8B"), cat.gpu("L40S")


def _c(parts, **kw):
    model, gpu = parts
    return serving.max_concurrency(model, gpu, tp=1, precision="fp8", isl=1024, osl=256, ttft_ms=500,
                                   tpot_ms=40, arrival="poisson", **kw)


def test_mean_and_median_are_no_stricter_than_the_default(parts):
    default = _c(parts)
    assert default >= 1
    assert _c(parts, ttft_statistic="mean") >= default
    assert _c(parts, confidence="median") >= default
    assert _c(parts, ttft_statistic="mean", confidence="median") >= _c(parts, confidence="median")


def test_sla_ttft_names_what_it_checks():
    s = {"ttft": 100.0, "ttft_p99": 300.0}
    assert serving.sla_ttft(s, 1.5) == 300.0                       # P99 (central) above the mean's edge
    assert serving.sla_ttft(s, 1.5, "mean") == 150.0               # the mean at its p80 edge
    assert serving.sla_ttft(s, 1.5, "mean", "median") == 100.0     # the central mean
    assert serving.sla_ttft({"ttft": 250.0, "ttft_p99": 300.0}, 1.5) == 375.0  # the mean's edge is larger
    assert serving.sla_ttft({"ttft": 100.0, "ttft_p99": None}, 1.5) == 150.0   # closed loop: no P99


def test_unknown_statistic_or_confidence_is_refused(parts):
    with pytest.raises(ValueError):
        _c(parts, ttft_statistic="p95")
    with pytest.raises(ValueError):
        _c(parts, confidence="p95")
