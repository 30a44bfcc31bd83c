"""Fused-MoE kernel rates of the performance model (calibration.moe_kernel_rates, kernels.fit_moe):
weight-only INT4 experts are read slower than FP8 ones, grouped expert GEMMs multiply at their
measured rate, and GPUs without kernel data take their class's."""

from __future__ import annotations

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate
from servewise.engine.domain.perf.calibration import load_calibration, moe_kernel_rates, profile
from tools.perf.kernels import OPS_DIR, fit_moe


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


def test_route_bytes_recover_the_activation_traffic_no_slice_shares():
    """A synthetic table, latency = slices' work / moe_tp + launch floor + routed elements x
    12 bytes at 4,000 GB/s: the fit returns the 12 bytes, whatever the slice work and floor."""
    from tools.perf.kernels import route_bytes

    bw, per_elem = 4000.0, 12.0
    tab = {}
    for h, i, k, e in ((4096, 1536, 8, 128), (7168, 2048, 8, 256)):
        for tp in (1, 2, 4, 8):
            lat = {}
            for t in (1024, 2048, 4096, 8192):
                work = 6 * t * k * h * i / 400e12 * 1e3  # ms at 400 TFLOPS
                lat[t] = work / tp + 0.05 + t * k * h * per_elem / (bw * 1e9) * 1e3
            tab[("fp8_block", (h, i, k, e, tp, 1))] = lat
    assert route_bytes(tab, "fp8_block", bw) == pytest.approx(per_elem, rel=1e-3)
    assert route_bytes(tab, "nvfp4", bw) is None  # no such kernel measured


def test_routing_traffic_does_not_shrink_with_tensor_parallel_experts(cat):
    """The measured fused-MoE kernels permute every (token, expert) pair on each MoE-TP rank:
    that part of a prefill is the same at TP 1 and TP 8, an EP rank does its 1/ep share, and a
    dense model has none."""
    from servewise.engine.domain.perf.memory import Layout
    from servewise.engine.domain.perf.timing import StepModel

    gpu, model = cat.gpu("B200"), cat.model("MiniMax-M2.5")
    prof = profile(gpu, "vllm")
    sms = {lay: StepModel.build(model, gpu, lay, "fp8", "fp8", prof)
           for lay in (Layout(1), Layout(8), Layout(8, ep=8))}
    one, tp8, ep8 = (sm.route_ms(8192) for sm in sms.values())
    assert one > 0 and tp8 == pytest.approx(one) and ep8 == pytest.approx(one / 8)
    route = moe_kernel_rates(gpu, "fp8").route
    assert sms[Layout(1)].moe_route_bytes == route > 0
    # 62 MoE layers x 8,192 tokens x top-8 x hidden 3,072 x the bytes, at 8,000 GB/s
    assert one == pytest.approx(62 * 8192 * 8 * 3072 * route / 8000e9 * 1e3)
    dense = StepModel.build(cat.model("Llama-3.1-8B"), gpu, Layout(1), "fp8", "fp8", prof)
    assert dense.route_ms(8192) == 0.0
    b300 = moe_kernel_rates(cat.gpu("B300"), "fp8")
    assert b300.route == route  # same class, nearest bandwidth: B200's
