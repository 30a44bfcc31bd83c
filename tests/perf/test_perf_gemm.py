"""GEMM kernel model (facts/gemm.yaml, engine/domain/perf/gemm.py) and its use in prefill."""

from dataclasses import replace

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import default_kv_precision
from servewise.engine.domain.perf.calibration import profile
from servewise.engine.domain.perf.gemm import DTYPE_BYTES, REF, curve, load_gemm, shape_factor
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.timing import StepModel

MEASURED = ("A100 80GB SXM", "H100 SXM", "H200 SXM", "B200", "L40S",
            "RTX PRO 6000 Blackwell Server")


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def _sm(cat, model, gpu, precision="bf16", tp=1):
    g = cat.gpu(gpu)
    return StepModel.build(cat.model(model), g, Layout(tp=tp), precision,
                           default_kv_precision(g, precision), profile(g, "vllm"))


def test_file_has_source_and_fit_errors():
    g = load_gemm()
    assert "aiconfigurator" in g["meta"]["source"]
    for gpu in MEASURED:
        entry = g["by_gpu"][gpu]
        assert "bfloat16" in entry
        for dtype, c in entry.items():
            err = c["table_error"]
            assert err["rows"] > 1000, (gpu, dtype)
            assert err["median_ape"] <= 0.15, (gpu, dtype, err)


def test_shape_factor_is_one_at_reference_and_grows_with_m(cat):
    c, note, dtype = curve(cat.gpu("H100 SXM"), "bf16")
    assert note == "measured H100 SXM bfloat16" and dtype == "bfloat16"
    b = DTYPE_BYTES[dtype]
    assert shape_factor(c, REF, REF, REF, b) == pytest.approx(1.0)
    s = [shape_factor(c, m, 4096, 4096, b) for m in (16, 128, 512, 2048, 8192)]
    assert s == sorted(s) and s[0] < 0.2 < s[-1]


def test_transfer_rule_for_gpus_without_kernel_data(cat):
    _, note, _ = curve(cat.gpu("B300"), "bf16")
    assert note.startswith("B200 bfloat16 curve")
    c, note, dtype = curve(cat.gpu("GB200"), "fp8")
    assert note.startswith("B200 fp8 curve") and "x 1.11" in note
    assert c[6] == 5000  # its own datasheet FP8 peak
    # a dtype not measured on a GPU: its bfloat16 curve, sizes scaled by the peak ratio
    _, note, dtype = curve(cat.gpu("L40S"), "fp8")
    assert dtype == "bfloat16" and note.startswith("L40S bfloat16 curve")
    # weight-only FP8 on Ampere runs 16-bit kernels
    _, note, dtype = curve(cat.gpu("A100 80GB SXM"), "fp8")
    assert note == "measured A100 80GB SXM bfloat16"


def test_larger_gemms_run_closer_to_peak(cat):
    """The issue's finding: prefill efficiency of small models does not carry to large GEMMs."""
    small = _sm(cat, "Llama-3.1-8B", "H100 SXM", "fp8", tp=8).gemm_shape(2048)
    large = _sm(cat, "Llama-3.1-405B", "H100 SXM", "fp8", tp=8).gemm_shape(2048)
    assert small < 0.6 < large


def test_no_kernel_constants_means_factor_one(cat):
    sm = replace(_sm(cat, "Llama-3.1-8B", "H100 SXM"), gemm_curve=None)
    assert sm.gemm_shape(512) == 1.0
    pf = sm.prefill(512)
    assert pf["s_dense"] == 1.0


def test_prefill_gemm_m_counts_the_step(cat):
    sm = _sm(cat, "Llama-3.1-8B", "H100 SXM")
    assert sm.prefill(512)["gemm_m"] == 512
    assert sm.prefill(512, step_tokens=700)["gemm_m"] == 700
    assert sm.prefill(4096, step_tokens=5000)["gemm_m"] == 2048  # vLLM prefill chunk
