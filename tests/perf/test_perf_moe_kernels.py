"""Fused-MoE kernel rates of the performance model (calibration.moe_kernel_rates, kernels.fit_moe):
weight-only INT4 experts are read slower than FP8 ones, grouped expert GEMMs multiply at their
measured rate, and GPUs without kernel data take their class's."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate
from servewise.engine.domain.perf.calibration import load_calibration, moe_kernel_rates, profile
from servewise.engine.domain.perf.kernels import OPS_DIR, fit_moe


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def test_int4_experts_are_read_slower_than_fp8_on_every_measured_gpu():
    table = load_calibration()["moe_kernels"]["by_gpu"]
    assert {"H100 SXM", "H200 SXM", "B200", "L40S"} <= set(table)
    for gpu, e in table.items():
        assert 0.2 < e["read"]["int4"] < 1.0, gpu  # Marlin de-quantises every weight


def test_gpus_without_kernel_data_take_their_class_and_others_keep_the_old_path(cat):
    b200 = moe_kernel_rates(cat.gpu("B200"), "int4")
    b300 = moe_kernel_rates(cat.gpu("B300"), "int4")
    assert b300.read == b200.read and "B200's, same class" in b300.source
    # compute-bound: one tensor-core rate per class (H200 never multiplies slower than H100)
    assert (moe_kernel_rates(cat.gpu("H200 SXM"), "fp8").multiply
            == moe_kernel_rates(cat.gpu("H100 SXM"), "fp8").multiply)
    a100 = moe_kernel_rates(cat.gpu("A100 80GB SXM"), "int4")
    assert (a100.read, a100.multiply) == (1.0, None) and "no fused-MoE kernel data" in a100.source
    assert moe_kernel_rates(cat.gpu("H100 SXM"), "bf16").multiply is None  # BF16 is the base


def test_int4_decode_reads_experts_slower_than_the_same_bytes_would_suggest(cat):
    model, gpu = cat.model("Kimi-K2.5"), cat.gpu("B200")
    kw = {"tp": 8, "isl": 1024, "osl": 1024, "concurrency": 8, "check_memory": False}
    e = estimate(model, gpu, precision="int4", **kw)
    step = next(s for s in e.steps if s.name == "decode_memory")
    assert step.values["moe_read"] == moe_kernel_rates(gpu, "int4").read < 1.0


def test_expert_gemms_never_run_above_the_precisions_peak(cat):
    """RTX PRO 6000's INT4 rate relative to BF16 is chained through NVFP4 (1.43): weight-only
    INT4 multiplies in 16 bit, so the step model caps it at the 16-bit peak."""
    from servewise.engine.domain.perf.memory import Layout
    from servewise.engine.domain.perf.timing import StepModel

    gpu = cat.gpu("RTX PRO 6000 Blackwell Server")
    assert moe_kernel_rates(gpu, "int4").multiply > 1.0
    prof = profile(gpu, "vllm")
    sm = StepModel.build(cat.model("Qwen3-30B-A3B"), gpu, Layout(1), "int4", "bf16", prof)
    assert sm.moe_tflops == pytest.approx(sm.tflops16)
    fp4 = StepModel.build(cat.model("Qwen3-30B-A3B"), gpu, Layout(1), "fp4", "fp8", prof)
    assert sm.tflops16 < fp4.moe_tflops <= fp4.tflops  # NVFP4: measured 2.5 x BF16, below its peak


@pytest.mark.skipif(not OPS_DIR.is_dir(), reason="../shared/data/ops not present")
def test_shipped_rates_are_what_the_kernel_tables_give():
    assert fit_moe(OPS_DIR) == load_calibration()["moe_kernels"]
