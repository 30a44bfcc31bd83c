"""Number formats: bytes per weight, which tensor-core rate a precision runs at, KV-cache format.

Conventions (documented in docs/accuracy.md):

* ``int4`` is weight-only 4-bit (AWQ/GPTQ, W4A16): weights are de-quantised to 16 bit inside the
  GEMM, so compute runs at the 16-bit rate on every GPU.
* ``fp8``/``int8`` run as W8A8 at the 8-bit rate where the GPU has it natively; otherwise as
  weight-only kernels (e.g. Marlin FP8 on Ampere) at the 16-bit rate.
* ``fp4`` (NVFP4/MXFP4) runs natively on Blackwell (and GPUs the catalog marks ``native_fp4``,
  e.g. AMD CDNA 4) at twice the FP8 rate (the catalog has no fp4 column yet); elsewhere as
  weight-only at the 16-bit rate.
* ``fp4`` is the one precision name of 4-bit float weights; which format (NVFP4: E2M1 + one FP8
  scale per 16 weights, 4.5 bits; MXFP4: E2M1 + one E8M0 scale per 32, 4.25 bits) and which
  modules are quantised is the checkpoint's, from the model's catalog ``quantization`` (see
  :func:`weight_format`); without one, NVFP4 on every weight but the embeddings.
* Default KV cache: FP8 when the weights are fp8/fp4 and the GPU has native FP8, else 16 bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PRECISIONS = ("bf16", "fp16", "fp8", "int8", "int4", "fp4")
KV_PRECISIONS = ("bf16", "fp16", "fp8", "int8")

# Bytes per stored weight, and the quantisation-scale overhead per weight.
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5}
SCALE_BYTES = {
    "bf16": 0.0, "fp16": 0.0,
    "fp8": 0.0,            # per-tensor or 128x128-block scales: negligible
    "int8": 0.0,           # per-channel scales: negligible
    "int4": 4.0 / 128,     # group 128: fp16 scale + fp16 zero point per group
    "fp4": 1.0 / 16,       # NVFP4: one fp8 scale per 16 weights
}
# Scale bytes per weight of the 4-bit float formats: NVFP4 one FP8 (E4M3) scale per 16 weights;
# MXFP4 (OCP Microscaling) one E8M0 scale byte per 32 weights, as vLLM stores gpt-oss's experts
# (``mxfp4_block = 32``, uint8 ``w13_weight_scale`` of hidden_size // 32 per row:
# vllm/model_executor/layers/quantization/mxfp4.py, Mxfp4MoEMethod.create_weights, commit
# 007d50058a06).
FP4_SCALE_BYTES = {"nvfp4": 1.0 / 16, "mxfp4": 1.0 / 32}
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}


def check_precision(precision: str) -> str:
    p = str(precision).lower()
    if p not in WEIGHT_BYTES:
        raise ValueError(f"precision '{precision}': expected one of {', '.join(PRECISIONS)}")
    return p


def bytes_per_weight(precision: str) -> float:
    """Stored bytes per quantised weight, including scales."""
    p = check_precision(precision)
    return WEIGHT_BYTES[p] + SCALE_BYTES[p]


def is_blackwell(gpu: dict[str, Any]) -> bool:
    return "blackwell" in str(gpu.get("arch", "")).lower()


def native_fp4(gpu: dict[str, Any]) -> bool:
    """FP4 tensor cores: Blackwell, or a GPU the catalog marks ``native_fp4`` (CDNA 4)."""
    return is_blackwell(gpu) or gpu.get("native_fp4") is True


@dataclass(frozen=True)
class WeightFormat:
    """How a model's weights are stored and multiplied at a precision.

    ``dense_bytes``/``expert_bytes``: bytes per weight (scales included) of the non-expert
    weights (attention, dense FFN, shared experts, routers) and of the routed experts;
    ``dense_precision``: the precision the non-expert GEMMs run at; ``expert_format``: the
    experts' storage format (``mxfp4``, ``nvfp4`` or the precision)."""

    dense_bytes: float
    expert_bytes: float
    dense_precision: str
    expert_format: str

    @property
    def split(self) -> bool:
        """Experts and the other weights are stored differently."""
        return self.dense_bytes != self.expert_bytes


def weight_format(model: dict[str, Any] | None, precision: str) -> WeightFormat:
    """The weight format of ``model`` at ``precision``.

    A model whose catalog ``quantization`` says its released checkpoint quantises only some
    modules to a 4-bit float format keeps the others in BF16 at ``fp4``: gpt-oss ships its
    routed experts in MXFP4 and its attention, routers, embeddings and lm_head in BF16
    (config.json ``quantization_config``: ``quant_method: mxfp4``, ``modules_to_not_convert``);
    vLLM's ``Mxfp4Config.get_quant_method`` quantises only ``FusedMoE`` layers and gives every
    linear layer ``UnquantizedLinearMethod`` (mxfp4.py, commit 007d50058a06). Other precisions
    (a re-quantised or de-quantised copy) store every weight at the precision."""
    p = check_precision(precision)
    b = bytes_per_weight(p)
    q = (model or {}).get("quantization") or {}
    fmt = str(q.get("format", "")).lower()
    if p != "fp4" or fmt not in FP4_SCALE_BYTES:
        return WeightFormat(b, b, p, "nvfp4" if p == "fp4" else p)
    expert = WEIGHT_BYTES["fp4"] + FP4_SCALE_BYTES[fmt]
    if q.get("modules") == "experts":
        return WeightFormat(WEIGHT_BYTES["bf16"], expert, "bf16", fmt)
    return WeightFormat(expert, expert, p, fmt)


def _tflops(gpu: dict[str, Any], key: str) -> float | None:
    v = (gpu.get("dense_tflops") or {}).get(key)
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def compute_rate(gpu: dict[str, Any], precision: str) -> tuple[float | None, str]:
    """Dense tensor TFLOPS the GEMMs of ``precision`` run at on ``gpu``, and how it was chosen."""
    p = check_precision(precision)
    t16 = _tflops(gpu, "bf16") or _tflops(gpu, "fp16")
    if p in ("bf16", "fp16"):
        return t16, f"{p} tensor rate"
    if p == "fp8":
        if gpu.get("native_fp8") and _tflops(gpu, "fp8"):
            return _tflops(gpu, "fp8"), "native FP8 (W8A8)"
        return t16, "no native FP8: weight-only FP8 kernels (Marlin), compute at 16-bit rate"
    if p == "int8":
        if _tflops(gpu, "int8"):
            return _tflops(gpu, "int8"), "INT8 tensor cores (W8A8)"
        return t16, "no INT8 tensor rate: weight-only INT8, compute at 16-bit rate"
    if p == "int4":
        return t16, "weight-only 4-bit (W4A16, AWQ/GPTQ): compute at 16-bit rate"
    # fp4
    if native_fp4(gpu):
        v = _tflops(gpu, "fp4")
        if v:
            return v, "native FP4 tensor cores"
        f8 = _tflops(gpu, "fp8")
        arch = "Blackwell" if is_blackwell(gpu) else str(gpu.get("arch", "this GPU"))
        return (2 * f8 if f8 else None), f"native FP4 on {arch} = 2 x FP8 rate"
    return t16, "no native FP4: weight-only FP4, compute at 16-bit rate"


def default_kv_precision(gpu: dict[str, Any], precision: str) -> str:
    """FP8 KV cache with fp8/fp4 weights on GPUs with native FP8, else 16 bit."""
    p = check_precision(precision)
    if p in ("fp8", "fp4") and gpu.get("native_fp8"):
        return "fp8"
    return "fp16" if p == "fp16" else "bf16"


def kv_bytes(kv_precision: str) -> float:
    k = str(kv_precision).lower()
    if k not in KV_BYTES:
        raise ValueError(f"kv_precision '{kv_precision}': expected one of "
                         f"{', '.join(KV_PRECISIONS)}")
    return KV_BYTES[k]
