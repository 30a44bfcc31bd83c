"""The data-consistency checks (tools/perf/consistency.py): arithmetic of each check."""

import math

import pytest

from tools.perf.consistency import best_gemm_tflops, front, kernel_bound, load, report, slope
from tools.perf.fit_gemm import OPS_DIR
from tools.perf.residuals import records

# the GEMM tables live in ../shared/data/ops (the developers' shared data), not in the repo
needs_ops = pytest.mark.skipif(not OPS_DIR.is_dir(), reason=f"no kernel tables at {OPS_DIR}")


@needs_ops
def test_best_gemm_is_below_the_datasheet_peak():
    best = best_gemm_tflops()
    h200_fp8, shape = best[("H200 SXM", "fp8")]
    assert 1000 < h200_fp8 < 1979  # H200 dense FP8 datasheet: 1,979 TFLOPS
    assert all(v > 0 for v in shape)
    assert best[("H100 SXM", "bfloat16")][0] < 989


@needs_ops
def test_kernel_bound_rows_need_the_share_they_report():
    rows = kernel_bound(min_share=0.8)
    assert rows, "the shipped data hold rows faster than their GPU's best GEMM allows"
    for x in rows:
        assert x["need_tflops"] >= 0.8 * x["best_tflops"]
        assert x["best_tflops"] < x["datasheet_tflops"]
    assert len(kernel_bound(min_share=1.0)) <= len(rows)


def test_front_load_and_slope_summaries_are_consistent():
    recs = records()
    for x in front(recs):
        assert x["ttft_min"] <= x["ttft_med"] <= x["ttft_max"]
        assert x["prefill"] > 0
    for metric in ("tpot", "ttft"):
        for x in load(recs, metric):
            assert x["c_hi"] >= 4 * x["c_lo"] and x["measured"] > 0 and x["predicted"] > 0
    rows = slope(recs)
    assert rows
    for x in rows:
        assert x["c_hi"] >= 3 * x["c_lo"] and math.isfinite(x["measured"])
    # sorted by how much flatter the measured TPOT is than the predicted one
    gaps = [x["measured"] - x["predicted"] for x in rows]
    assert gaps == sorted(gaps)


def test_report_prints_each_section():
    text = "\n".join(report(("front", "load", "slope")))
    assert "measured TTFT at C <= 4" in text and "slope of log TPOT" in text


def test_free_weights_per_finer_group_fit_at_least_as_well():
    """Weights free per campaign (groups nested in backend x GPU class) leave less TTFT error
    than weights free per backend x GPU class, which leave no more than the shipped model."""
    pytest.importorskip("scipy")  # a developer tool: scipy comes with the fit's extras
    from tools.perf.consistency import free_weights

    recs = records()
    n_cls, coarse = free_weights(recs, ("backend", "cls"))
    n_camp, fine = free_weights(recs, ("model", "backend", "gpu", "precision", "file"))
    assert n_cls == len({(r["backend"], r["cls"]) for r in recs if r["ttft_meas"]})
    assert n_camp > n_cls and fine < coarse
