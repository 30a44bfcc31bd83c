"""Domain functions for software settings, isolation, procurement and cost rules.

Pure functions of their arguments and the catalog; every constant is documented where defined.
"""

from __future__ import annotations

import math
from typing import Any

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, domain_function, midpoint, note_detail, policy

# Weight-quantization method per precision, as the serving frameworks name it. int4 is
# weight-only 4-bit (W4A16): AWQ or GPTQ checkpoints (G-MEM-022); int8 is a W8A8 checkpoint.
QUANT_METHOD = {
    "bf16": None, "fp16": None,
    "fp8": "fp8",
    "int8": "w8a8 int8 (compressed-tensors / SmoothQuant checkpoint)",
    "int4": "awq (or gptq), weight-only 4-bit",
    "fp4": "nvfp4",
}

# MindIE (Ascend) names its quantized weights by msModelSlim's W/A bit widths, not AWQ/GPTQ/FP8: the ATB
# models support W8A8, W8A16, W8A8SC (sparse) and per-group W4A16 (msModelSlim quantifier.py, --w_bit/--a_bit;
# https://blog.csdn.net/fuhanghang/article/details/146602378, a copy of the MindIE LLM quantization page).
MINDIE_QUANT = {
    "bf16": None, "fp16": None,
    "int8": "W8A8 (msModelSlim quantifier.py --w_bit 8 --a_bit 8)",
    "int4": "W4A16 per-group (msModelSlim quantifier.py --w_bit 4 --a_bit 16)",
}


def _memory_fraction() -> float:
    """Share of device memory a serving engine may pre-allocate for weights + KV cache (G-SW-008):
    policy vram_usable_fraction, the fraction the plan sized the replicas with."""
    return float(policy("vram_usable_fraction"))


@domain_function(memoise=False)
def quant_method(precision: str, framework: str | None = None) -> str | None:
    """Quantization method the serving framework is given for a weight precision (None for 16-bit),
    in the framework's own names (MindIE: msModelSlim W8A8 / W4A16)."""
    if framework == "MindIE":
        return MINDIE_QUANT.get(str(precision))
    return QUANT_METHOD.get(str(precision))


@domain_function(memoise=False)
def serving_framework(vendor: str | None, team_skills: Any, attention_type: str | None) -> str | None:
    """The serving framework a plan uses for an accelerator vendor (rules/bom/software.yaml explains
    and configures it): on NVIDIA TensorRT-LLM for a team that builds TensorRT engines, else SGLang
    for multi-head latent attention (DeepSeek-style MLA), else vLLM; AMD the ROCm build of vLLM;
    Huawei MindIE; None for other vendors."""
    if vendor == "nvidia":
        if "tensorrt" in (team_skills or ()):
            return "TensorRT-LLM"
        return "SGLang" if attention_type == "MLA" else "vLLM"
    return {"amd": "vLLM (ROCm)", "huawei": "MindIE"}.get(str(vendor))


def mtp_frameworks() -> tuple[str, ...]:
    """Frameworks that run a model's MTP module as speculative decoding (policy mtp_frameworks)."""
    return tuple(current().catalog.table("policies").get("mtp_frameworks")["value"])


def _launch(fw: str, model: str, tp: int, adp: int, ep: int, max_seqs: int, max_len: int,
            spec: int = 0) -> str:
    """One engine's launch command in the framework's own flags (see serving_settings); ``spec``
    draft tokens of the model's MTP module (0: off)."""
    per_rank = -(-max_seqs // adp)  # vLLM and TensorRT-LLM limit each attention-DP rank's batch
    limit = max_seqs > 0  # 0: no batch limit of the plan's (a prefill worker), the framework's default
    if fw == "TensorRT-LLM":
        config = (["enable_attention_dp: true"] if adp > 1 else []) + (
            [f"speculative_config: {{decoding_type: MTP, num_nextn_predict_layers: {spec}}}"] if spec else [])
        extra = (f" --ep_size {ep}" if adp > 1 else "") + (
            f" --config config.yml  # config.yml: {'; '.join(config)}" if config else "")
        return (f"trtllm-serve {model} --tp_size {tp} --pp_size 1"
                + (f" --max_batch_size {per_rank}" if limit else "")
                + f" --max_seq_len {max_len} --kv_cache_free_gpu_memory_fraction {_memory_fraction()}{extra}")
    if fw == "SGLang":
        dp = f" --dp {adp} --enable-dp-attention --ep-size {ep}" if adp > 1 else ""
        mtp = (f" --speculative-algorithm EAGLE --speculative-num-steps {spec} "
               f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {spec + 1}" if spec else "")
        return (f"python3 -m sglang.launch_server --model-path {model} --tp {tp}{dp} "
                + (f"--max-running-requests {max_seqs} " if limit else "")
                + f"--mem-fraction-static {_memory_fraction()} "
                f"--context-length {max_len}{mtp}")
    if fw == "MindIE":
        return (f"mindieservice_daemon  # conf/config.json: worldSize {tp}, maxBatchSize {max_seqs}, "
                f"maxSeqLen {max_len}, modelName {model}")
    dp = f" --data-parallel-size {adp} --enable-expert-parallel" if adp > 1 else ""
    mtp = (f" --speculative-config '{{\"method\": \"mtp\", \"num_speculative_tokens\": {spec}}}'"
           if spec else "")
    return (f"vllm serve {model} --tensor-parallel-size {tp // adp if adp > 1 else tp}{dp} "
            + (f"--max-num-seqs {per_rank} " if limit else "")
            + f"--gpu-memory-utilization {_memory_fraction()} "
            f"--max-model-len {max_len}{mtp}")


def _disagg_launch(fw: str, one_prefill: str, one: str, prefill: int, decode: int) -> dict[str, str]:
    """Launch lines of a disaggregated deployment (``prefill`` workers launched as ``one_prefill``,
    ``decode`` workers as ``one``) in the framework's own flags, and its router (policy
    disaggregated_frameworks cites each): SGLang ``--disaggregation-mode prefill|decode`` with the
    Mooncake transfer engine and ``sglang_router --pd-disaggregation``; vLLM engines as NVIDIA Dynamo
    workers (``python3 -m dynamo.vllm … --disaggregation-mode prefill|decode``, KV over NIXL) behind
    ``dynamo.frontend`` (vLLM itself ships only an example proxy); TensorRT-LLM's ``trtllm-serve
    disaggregated`` with its context and generation servers."""
    if fw == "SGLang":
        kv = " --disaggregation-transfer-backend mooncake --disaggregation-ib-device <RDMA NIC>"
        urls = (" ".join(f"--prefill http://prefill-{i}:30000" for i in range(1, prefill + 1)) + " "
                + " ".join(f"--decode http://decode-{i}:30000" for i in range(1, decode + 1)))
        return {"launch_prefill": f"{one_prefill} --disaggregation-mode prefill{kv}",
                "launch_decode": f"{one} --disaggregation-mode decode{kv}",
                "launch_router": ("python3 -m sglang_router.launch_router --pd-disaggregation "
                                  f"{urls} --host 0.0.0.0 --port 8000")}
    if fw == "TensorRT-LLM":
        cfg = "cache_transceiver_config: {backend: UCX}"
        return {"launch_prefill": f"{one_prefill}  # context server; config.yml also: {cfg}",
                "launch_decode": f"{one}  # generation server; config.yml also: {cfg}",
                "launch_router": (f"trtllm-serve disaggregated -c disagg.yml  # disagg.yml: "
                                  f"context_servers: {{num_instances: {prefill}, urls: [...]}}, "
                                  f"generation_servers: {{num_instances: {decode}, urls: [...]}}")}
    def dynamo(line: str, mode: str) -> str:  # the vLLM flags, run as a Dynamo worker
        return line.replace("vllm serve ", "python3 -m dynamo.vllm --model ", 1) + f" --disaggregation-mode {mode}"

    return {"launch_prefill": dynamo(one_prefill, "prefill"), "launch_decode": dynamo(one, "decode"),
            "launch_router": (f"python3 -m dynamo.frontend --http-port 8000  # NVIDIA Dynamo: routes each "
                              f"request's prefill to one of the {prefill} prefill workers and its decode to "
                              f"one of the {decode} decode workers (found through Dynamo's discovery "
                              "service); the KV cache moves over NIXL")}


@domain_function
def serving_settings(framework: str, tp: int, replicas: int, max_seqs: int, precision: str,
                     max_len: int, attention_dp: int = 1, ep: int = 1,
                     model: str | None = None, spec_tokens: int = 0, prefill_workers: int = 0,
                     decode_workers: int = 0) -> dict[str, Any]:
    """Launch settings of one serving engine replica, named as the framework's own flags, and with
    ``model`` (the served model's name) its launch line (``launch``), the weights read from
    ``/models/<model>`` on the local model store.

    ``max_seqs`` is the SLA-limited concurrency per replica (not the framework default);
    ``replicas`` independent engines are run data-parallel behind a load balancer. ``tp`` counts the
    engine's GPUs as SGLang and TensorRT-LLM do; with ``attention_dp`` > 1 attention runs
    data-parallel over that many ranks and the MoE layers ``ep``-way expert-parallel over all of
    them (SGLang ``--dp N --enable-dp-attention --ep-size N``; vLLM ``--data-parallel-size N
    --enable-expert-parallel`` with tensor-parallel-size tp ÷ N; TensorRT-LLM
    ``enable_attention_dp``, ``--ep_size``). ``max_seqs`` counts the engine's requests: SGLang
    shares max-running-requests among its DP ranks, vLLM's max-num-seqs and TensorRT-LLM's
    max_batch_size are per rank (max_seqs ÷ attention_dp, rounded up). ``spec_tokens`` > 0 runs
    the model's MTP module as speculative decoding with that many draft tokens a step (SGLang
    ``--speculative-algorithm EAGLE`` with num-steps k, topk 1, k + 1 draft tokens; vLLM
    ``--speculative-config {"method": "mtp", ...}``; TensorRT-LLM ``speculative_config:
    decoding_type MTP``). ``prefill_workers``/``decode_workers`` > 0: a disaggregated deployment —
    ``disaggregation`` and the launch lines of each pool and of the router (:func:`_disagg_launch`).
    """
    tp, replicas, max_seqs, max_len = int(tp), int(replicas), int(max_seqs), int(max_len)
    adp, ep, spec = max(1, int(attention_dp)), max(1, int(ep)), max(0, int(spec_tokens or 0))
    per_rank = -(-max_seqs // adp)
    if spec and str(framework) not in mtp_frameworks():
        spec = 0  # e.g. MindIE: no catalogued MTP support, so no flags (and no sizing with it)
    quant = QUANT_METHOD.get(str(precision))
    common: dict[str, Any] = {"data_parallel_replicas": replicas}
    if model:  # the weights as the plan stores them: on the servers' local NVMe model store
        common["launch"] = _launch(str(framework), f"/models/{model}", tp, adp, ep, max_seqs, max_len,
                                   spec)
    if int(prefill_workers or 0) > 0 and int(decode_workers or 0) > 0:
        common["disaggregation"] = {"prefill_workers": int(prefill_workers),
                                    "decode_workers": int(decode_workers)}
        if model:  # a prefill worker holds no decode batch: its batch limit is the framework's own
            prefill = _launch(str(framework), f"/models/{model}", tp, adp, ep, 0, max_len, spec)
            common.update(_disagg_launch(str(framework), prefill, common["launch"],
                                         int(prefill_workers), int(decode_workers)))
    fw = str(framework)
    if fw == "TensorRT-LLM":
        dp = {"enable_attention_dp": True, "ep_size": ep} if adp > 1 else {}
        if spec:
            dp["speculative_config"] = {"decoding_type": "MTP", "num_nextn_predict_layers": spec}
        return {"inflight_batching": True, "tp_size": tp, **dp, "max_batch_size": per_rank,
                "kv_cache_free_gpu_memory_fraction": _memory_fraction(), "max_seq_len": max_len,
                "quantization": quant, **common}
    if fw == "SGLang":
        dp = {"dp_size": adp, "enable_dp_attention": True, "ep_size": ep} if adp > 1 else {}
        if spec:
            dp.update(speculative_algorithm="EAGLE", speculative_num_steps=spec,
                      speculative_eagle_topk=1, speculative_num_draft_tokens=spec + 1)
        return {"continuous_batching": True, "tp_size": tp, **dp,  # SGLang's ServerArgs names (--tp-size)
                "max_running_requests": max_seqs, "mem_fraction_static": _memory_fraction(),
                "context_length": max_len, "quantization": quant, **common}
    if fw == "MindIE":
        return {"continuous_batching": True, "worldSize": tp, "maxBatchSize": max_seqs,
                "max_batch_size": max_seqs, "npuMemSize": -1, "maxSeqLen": max_len,
                "quantization": MINDIE_QUANT.get(str(precision)), **common}
    dp = ({"data_parallel_size": adp, "enable_expert_parallel": True} if adp > 1 else {})
    if spec:
        dp["speculative_config"] = {"method": "mtp", "num_speculative_tokens": spec}
    return {"continuous_batching": True, "tensor_parallel_size": tp // adp if adp > 1 else tp, **dp,
            "max_num_seqs": per_rank, "gpu_memory_utilization": _memory_fraction(),
            "max_model_len": max_len, "quantization": quant, "dtype": "bfloat16", **common}


# MIG geometry (NVIDIA MIG user guide): GPUs with 7 compute slices split memory into 8 slices
# (1g = 1/8, 2g = 2/8, 3g = 4/8, 4g = 4/8, 7g = 8/8); the A30 has 4 compute and 4 memory slices.
_MIG_PROFILES = {7: ((1, 1 / 8), (2, 2 / 8), (3, 4 / 8), (7, 1.0)), 4: ((1, 1 / 4), (2, 2 / 4), (4, 1.0))}


@domain_function(reads=(("gpus", 0),))
def mig_profile(gpu: str, need_gb: float) -> str | None:
    """Smallest MIG profile (e.g. ``3g.40gb``) of ``gpu`` whose memory holds ``need_gb``; None when
    the GPU has no published MIG geometry or no profile is large enough."""
    try:
        entry = current().catalog.table("gpus").get(gpu)
    except UnknownEntry:
        return None
    slices, memory = entry.get("mig_max_instances"), entry.get("memory_gb")
    if entry.get("mig") is not True or slices not in _MIG_PROFILES or not memory:
        return None
    for compute, share in _MIG_PROFILES[slices]:
        gb = math.floor(memory * share + 0.5)
        if gb >= need_gb:
            note_detail({"function": "mig_profile", "gpu": entry["id"], "need_gb": round(need_gb, 1),
                         "result": f"{compute}g.{gb}gb",
                         "formula": f"smallest profile: {compute} compute slice(s), {share:.3g} × {memory} GB"})
            return f"{compute}g.{gb}gb"
    return None


def host_families(text: str | None) -> set[str]:
    """The CPU families a system's ``cpu`` field (server-skus.yaml) names: ``2 x AMD EPYC 9004/9005``
    → {epyc}; Intel Xeon, Kunpeng likewise; both where the system ships either host."""
    low = (text or "").lower()
    return {f for f in ("epyc", "xeon", "kunpeng") if f in low}


@domain_function(reads=(("servers", 0), ("gpus", 1)))
def orderable_systems(sku: str | None, gpu: str, region: str, cpu: str | None = None) -> list[str]:
    """Named systems a buyer orders for this server class (facts/catalog/server-skus.yaml): those of
    ``sku``'s class (or sold on it too, ``class_also``) sold in ``region`` that take this GPU — listed
    with it, or, for a PCIe chassis class, any card of the class within the system's per-slot power —
    in file order; with ``cpu`` (the plan's host CPU, e.g. ``EPYC 9124``) only the systems that ship
    with a CPU of its family (a system whose host the catalog does not state is kept). An empty list
    means no catalogued SKU: the class figures still size the plan."""
    if not sku:
        return []
    table = current().catalog.table("gpus")
    try:
        gpu_id = table.get(gpu)["id"]
    except UnknownEntry:
        return []
    try:
        cls = current().catalog.table("servers").get(sku)
    except UnknownEntry:
        if sku != "edge":  # edge boxes: the class is the module itself, named by the SKUs' class "edge"
            return []
        cls = {}
    # a PCIe chassis takes the cards of its class within its slot power (OEM qualified-GPU lists are
    # longer than any catalogue copies); a baseboard system only the GPUs it is listed with
    pcie = cls.get("type") == "chassis-class"
    tdp = table.get(gpu_id).get("tdp_w") or 0
    family = host_families(cpu)
    out = []
    for entry in current().catalog.table("server-skus"):
        if sku != entry["class"] and sku not in (entry.get("class_also") or []):
            continue
        if region not in entry.get("markets", []):
            continue
        listed = any(name in table and table.get(name)["id"] == gpu_id for name in entry.get("gpu_models") or [])
        fits = pcie and (entry.get("max_gpu_power_w") is None or tdp <= entry["max_gpu_power_w"])
        hosts = host_families(entry.get("cpu"))
        if (listed or fits) and (not family or not hosts or family & hosts):
            out.append(entry["id"])
    return out


@domain_function(reads=(("gpus", 0),))
def oem_systems(gpu: str) -> list[str]:
    """Catalog OEM / certified systems (type ``system``) built for this GPU, in file order."""
    table = current().catalog.table("gpus")
    try:
        gpu_id = table.get(gpu)["id"]
    except UnknownEntry:
        return []
    out = []
    for server in current().catalog.table("servers"):
        if server.get("type") != "system":
            continue
        for name in server.get("gpu_models") or []:
            try:
                if table.get(name)["id"] == gpu_id:
                    out.append(server["id"])
                    break
            except UnknownEntry:
                continue
    return out


@domain_function
def price_mid(price_id: str) -> float | None:
    """Midpoint of a sourced price range in facts/catalog/prices.yaml (CNY), or None."""
    try:
        entry = current().catalog.table("prices").get(price_id)
    except UnknownEntry:
        return None
    return midpoint(entry)
