"""GEMM kernel model (tools/perf/gemm.yaml, tools/perf/gemm.py)."""

import pytest

from servewise.engine.domain.catalog import load_catalog
from tools.perf.gemm import DTYPE_BYTES, REF, curve, load_gemm, shape_factor

MEASURED = ("A100 80GB SXM", "H100 SXM", "H200 SXM", "B200", "L40S",
            "RTX PRO 6000 Blackwell Server")


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


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
    """The independent check's finding: efficiency at a small model's (or a TP-split) GEMMs does
    not carry to a large model's (Llama-3.1-8B vs 405B FFN GEMMs at TP 8, 2,048 tokens)."""
    c, _, dtype = curve(cat.gpu("H100 SXM"), "fp8")
    b = DTYPE_BYTES[dtype]
    small = shape_factor(c, 2048, 2 * 14336 / 8, 4096, b)
    large = shape_factor(c, 2048, 2 * 53248 / 8, 16384, b)
    assert small < 0.65 and large > 1.0
