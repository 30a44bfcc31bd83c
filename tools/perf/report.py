"""Write docs/accuracy.md and docs/img/accuracy.png (needs the ``fit`` and ``docs`` extras).

    python -m tools.perf.report [--no-lomo]

Validates the shipped calibration against the shipped data, runs the leave-one-out refits
(fit on three measured models, predict the fourth; fit without one measured GPU, predict it)
and plots predicted vs measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.domain.perf.calibration import gpu_class, load_calibration
from servewise.engine.domain.perf.data import DEFAULT_FILES
from servewise.engine.domain.perf.validate import TARGETS, errors, summarise, validate
from tools.perf.fit import fit, is_model, usable_rows
from tools.perf.ordering import BACKENDS as ORDER_BACKENDS
from tools.perf.ordering import DENSE_GRID, ISL, OSL, PAIRS, PRECISION, violations

ROOT = PACKAGE_ROOT
DOC = ROOT / "docs" / "accuracy.md"
IMG = ROOT / "docs" / "img" / "accuracy.png"
# time-boxed (2 shared CPU cores): four models of different kinds (dense 8B, MLA MoE, GQA MoE,
# hybrid linear-attention MoE) and the GPU with the most rows
HELD_OUT = ("Llama-3.1-8B", "DeepSeek-R1", "MiniMax-M2.5", "Qwen3.5-397B-A17B")
HELD_OUT_GPUS = ("B200",)
LOMO_NFEV = 30  # iterations of each held-out refit (from the round start values): time-boxed;
# 10 until session 27, when the SGLang held-out refits were found not converged at 10 (Qwen3.5
# TPOT 24.1 % at 10, 12.6 % at 30 iterations: docs/accuracy-attempts.md)
LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "output_tokens_per_s": "throughput (online)",
          "offline_output_tokens_per_s": "throughput (offline)"}


METHOD = """## Method

One model (`servewise.engine.domain.perf`), used by `estimate`, `validate` and the rules.

**Memory.** Weights = (shared + routed-expert parameters) × bytes of the precision (+ quantisation
scales: int4 group-128 scale and zero point, NVFP4 one FP8 scale per 16) + embedding and lm_head
at 16 bit. MoE: every expert is resident; one expert over all layers is
`(total − active) / (E − k)`. KV per token: `2 × layers × kv_heads × head_dim × bytes` (GQA/MHA),
`(kv_lora_rank + qk_rope_head_dim) × layers × bytes` (MLA, replicated on every TP rank). KV
default: FP8 with fp8/fp4 weights on GPUs with native FP8, else 16 bit. Per GPU: weight shard
(attention/dense ÷ tp, experts ÷ GPUs of the stage, layers ÷ pp) + KV of its sequences +
1.5 GiB + activation workspace (8192 tokens) ≤ memory × `gpu_memory_utilization`.

**Decode step.** `t_decode(B) = bytes / (bw × η_bw) + gemm_flops / (peak_w × η_flops × η_lowp)
+ attention_flops / (peak_kv × η_flops [× η_lowp]) + t_comm + t_step + layers × (t_layer
[+ t_moe_layer]) + B × t_seq`: GEMMs run at the weights' rate (native FP8/FP4 at `η_lowp` of the
16-bit efficiency), attention at the FP8 rate over an FP8 KV cache on GPUs with native FP8
(FP8 FlashAttention/FMHA), else at the 16-bit rate; MoE layers add `t_moe_layer` (routing,
grouped-GEMM launches); bytes = dense weights ÷ tp + the experts the step's tokens route to
+ KV of every sequence at its mean context `isl + osl/2`. **MoE as printed**: a GPU holds `E/ep`
routed experts (each a `1/moe_tp` slice); the `T = B × dp` tokens of the step each pick `k` of
`E`, so the expected number a GPU reads per layer is `E/ep × (1 − (1 − k/E)^T)` (uniform
routing) and the bytes are that share of its expert weights (expert bytes and FLOPs ÷ η_moe).
The explanation prints exactly this (`experts_touched` step); every printed formula is an
expression of its printed values and `tests/perf/test_formulas_as_printed.py` recomputes each
step of every example plan and of a sample of validate rows. No backend is modelled as reading
every expert: vLLM's fused-MoE kernels (ops/h100_sxm_moe_perf, Mixtral 8x7B shape) take 27 % of
their 16-token latency at one token, where 2 of 8 experts (25 %) are read, and scale with the
touched share up to saturation; the former fitted floor f0 (1.0 for vLLM on Hopper: it made
Mixtral decode 3–4× too slow at one request) is removed. The FlashInfer per-tensor FP8 MoE path
on Hopper is ~4× slower than the Triton block-FP8 one at every token count (same tables); that
is an efficiency (η_moe), not a read of all experts. **Measured fused-MoE kernel rates**
(`moe_kernels` in the calibration file, `python -m tools.perf.kernels`, from
the same tables; session 29): weight-only INT4 experts (Marlin W4A16, which de-quantises every
weight) are read at `moe_read` of the FP8 kernels' efficiency per byte (H100 0.70, H200 0.64,
B200 0.44, L40S 0.33, RTX PRO 6000 0.84; the median over the shapes measured in both dtypes at
1–4 tokens), and the grouped expert GEMMs of prefill run at the BF16 peak × the kernels' rate
relative to BF16 (block-scaled FP8 1.6 × on Hopper but 0.78 × on B200, NVFP4 1.8 × on B200,
per-tensor FP8 1.4–1.5 × on L40S / RTX PRO 6000; 2,048–8,192 tokens; the median over a class's
measured GPUs; never above the precision's own peak: W4A16 multiplies in 16 bit) instead of the
precision's peak × η_lowp. **Routing traffic** (session 32): the same tables show a part of
each fused-MoE call that MoE tensor parallelism does not divide. Per shape and token count
(≥ 1,024 tokens, EP 1, three or more TP sizes) latency is a line in `1 / moe_tp`; its
intercept rises with `tokens × top-k × hidden` by `route` bytes per element at the GPU's
datasheet bandwidth (Theil-Sen slope over shapes and token counts: block FP8 10.6 H100, 13.6
H200, 7.5 B200; NVFP4 7.0 B200, 9.1 RTX PRO 6000; BF16 6.3–11.0). This is the permutation,
scatter and gather of every (token, expert) pair's activations, which each of the `moe_tp`
ranks does in full. Every step adds `moe_layers × T × k × hidden / ep × route / bw` to its
compute, with `T` the tokens routed (prefill `isl × dp`, decode `B × dp`). At 8,192 tokens
this is 20–60 % of the kernel's time at MoE TP 8 (NVFP4 on B200: 0.23 of 0.30 ms for
MiniMax-M2.5's shape). A GPU without kernel data takes the read and route rates of its class's
measured GPU nearest in bandwidth; a class without one keeps the precision's peak × η_lowp and
no route term. Reading and computing are
added (at served batch sizes they overlap little; the max() of a roofline fitted worse).
`t_seq` is the per-sequence engine cost (sampling, detokenisation, scheduling in Python): it is
what keeps SGLang Llama-3.1-8B at ~30 ms TPOT with 512 sequences on eight H200 although the
bytes take ~2 ms.

**Prefill.** `t_prefill = (isl × 2 × active_without_lm_head ÷ tp + 2 × lm_head ÷ tp) /
(peak_w × η_flops × η_lowp) + isl × attention(isl/2) / (peak_kv × η_flops) + t_comm
+ ceil(isl / chunk) × t_chunk`: logits are computed for the last prompt token only; the
attention term grows with the context; `t_chunk` is the cost of each prefill chunk as its own
engine step (chunk = 2048 tokens vLLM, 8192 SGLang/TRT-LLM). With attention data parallel
(dp > 1) the ranks prefill in lockstep (their MoE layers are one step), so the experts of a GPU
see dp × isl tokens.

**Communication.** Two all-reduces per layer over the TP group, ring volume
`2(tp−1)/tp × B × hidden × 2 B` over the link (`link_gbs`/2 per direction, PCIe by generation)
at an efficiency and latency fitted from measured vLLM custom all-reduce kernels per link kind
and GPU count (table above; NVLink ≈ 0.7–0.9 and 5 µs, PCIe 0.75 at 2 GPUs falling to 0.27 at
8), the GPU's own values where it was measured; a PCIe card whose NVLink is only a bridge
(catalog `nvlink_bridge_gpus`: pairs for the A100/H100 PCIe, H100 NVL, A30 and RTX A6000, up to
4 for the H200 NVL) all-reduces over PCIe when the TP group is wider than the bridged cards
(session 25: A100 80GB PCIe offline throughput error 33.5 → 15.4 %); MoE dispatch/combine across the stage when
experts span more GPUs than TP.

**Serving (closed-loop benchmark).** With C requests in flight per attention rank, each request
lives `TTFT + (osl − 1) × TPOT`, so `λ = C / lifetime`. In closed form (no iteration):

* `TPOT = t_decode(C) + κ × (C − 1) × t_prefill / osl`: while one request decodes its osl tokens
  the C − 1 others each prefill once; a share κ of that time lands on the decode steps. SGLang
  runs each prefill as a step of its own (no mixed chunks by default), so in a closed loop of
  fixed-length requests, which start and finish together and stay in step, few prefills land on
  decode steps: there κ is `interference_lockstep` (0.17 fitted), while random lengths and
  open-loop traffic take `interference` (1.5). vLLM and TensorRT-LLM mix prefill chunks into
  decode steps and have one κ (session 33).
* `TTFT = t_client + isl × t_in_token + t_prefill + k_step × t_decode + φ × (C − 1)/2 ×
  t_prefill + ψ × (osl − 1) × TPOT / (C − 1)`: the harness's fixed client cost per request
  (`t_client`: through the engine's OpenAI-compatible HTTP server, the `openai-http` harness of
  every fitted TTFT row, it is the backend's fitted `t_request`; an in-process load generator,
  trtllm-bench or MLPerf LoadGen, pays policy `harness_in_process_client_ms`, 0); a cost per prompt token before
  the engine sees it (tokenisation, the token list through the server's IPC, the HTTP body: CPU
  work, the same on every GPU and for every model size); the own prefill; admission at step
  boundaries; the share φ of the arrival burst left in the average (benchmark clients start all C
  requests at once and run a small multiple of C requests, so the first round's
  `(C − 1)/2 × t_prefill` wait is averaged with the steady state); the share ψ of requests that
  find the batch full and wait for the next completion (one every `(osl − 1) × TPOT / (C − 1)`).
  The last term is why measured TRT-LLM TTFT *falls* with C at low C and grows with osl
  (Llama-3.1-8B H100, isl 1024, C 8: 191 / 318 / 550 ms for osl 128 / 256 / 512).
  With attention data parallel (dp > 1) a new request also waits `dp_wait × t_decode`: the
  ranks must prefill in the same step, and TRT-LLM's attention-DP balancing holds context
  requests up to `timeout_iters` (default 50) iterations until every rank has one
  (`AttentionDpConfig`). Without this term the 68 attention-DP rows were under-predicted 2–6×
  (median predicted/measured TTFT 0.27 TRT-LLM B200, 0.16 TRT-LLM H200, 0.54 vLLM H200).
* Throughput = `λ × osl × dp`.

**Serving (open loop, production traffic).** Requests arrive as a Poisson process at rate λ per
attention rank (given, or the rate that keeps C in flight: `λ = C / (TTFT(λ) + (osl − 1) ×
TPOT)`, Little's law, solved by bisection). TPOT as above. A request's prefill occupies the
engine for `S = t_prefill + isl/chunk × t_decode` (its chunks share steps with the running
decodes), prefills are served in arrival order: an M/D/1 queue with `ρ = λ × S`, mean wait
`W = ρ S / (2 (1 − ρ))` (Pollaczek–Khinchine) and the P99 from the exponential tail of the
M/G/1 wait, `P(W > t) ≈ ρ exp(−ρ t / W)`, i.e. `W_p99 = W/ρ × ln(ρ/0.01)`. `TTFT = t_client +
isl × t_in_token + t_decode/2 × busy + W + t_prefill + κ × n_chunks × t_decode`, with `busy =
1 − exp(−C)` the chance an arrival finds a step running; the P99 uses a whole decode step and
`W_p99` (against a simulation of the M/D/1 queue at ρ 0.57, S 167 ms, the formula gives a
P99 wait of 772 ms where the simulation gives 675 ms: about 15 % conservative, which is the
safe side for sizing). The closed-loop terms k_step, φ, ψ and dp_wait describe benchmark clients that start
all requests together and are not used. **Sizing** (rules `perf.candidate-max-concurrency`,
`perf.candidate-operating-point`): online candidates are sized open loop, with TTFT checked as
the larger of the queue's P99 and the upper band of the mean; offline jobs stay closed loop
(the batch queue keeps the engine full). **Saturation**: the largest sustainable rate is the most
of `min(C / lifetime(C), ρ_max / S(C))` over batch sizes up to the batch cap (KV cache or the
backend's sequence limit); above it TPOT stays at the full batch's step and TTFT grows with the
overload's duration t by `(λ / λ_max − 1) × t` beyond the last steady state's (the fluid limit
of the queue, checked against a simulation): a run of N requests at λ has mean TTFT + `(λ/λ_max
− 1) × N/λ / 2` and P99 + `0.99 × (λ/λ_max − 1) × N/λ` (`serving.saturated_ttft`).

**Embedding (`estimate --task embedding`).** An encoder pass: C requests of isl tokens in one
batch step, GEMMs over C × isl tokens without an LM head, bidirectional attention over the
whole input; latency = t_client + isl × t_in_token + the step; requests/s = C / step.

**Models.** The catalog covers every model of ../shared/data/model_configs: 48 entries generated
by `tools/gen_model_catalog.py`, parameter counts computed from config.json (GQA/MHA, MLA with
its ranks and DSA indexer, gated attention, Gated-DeltaNet / KDA linear attention, Mamba-2,
dense and squared-ReLU FFNs, routed/shared/latent experts, routers, embeddings; within 1–3 % of
the published totals). Hybrid models carry `kv_layers`, the layers whose KV cache grows with the
context: sliding-window, linear-attention and SSM layers keep a bounded state per sequence,
which is not modelled (KV and attention FLOPs count only the full-attention layers).
DeepSeek-V4's compressed KV is not modelled (its KV is an upper bound); Gemma 4's K=V global
layers are counted with separate K and V (KV over-stated up to 2×). DeepSeek sparse attention
(DSA: DeepSeek-V3.2, GLM-5.x; `architecture.dsa`, session 30): the MLA reads and attends to
the indexer's top-k tokens only (`index_topk`, 2,048); every cached token also keeps an FP8
index key with its scale (`index_head_dim` + 4 bytes per layer), read in every decode step; the
indexer's scores (2 × `index_n_heads` × `index_head_dim` FLOPs per cached token) and its
projections run whole on every TP rank (SGLang's `ReplicatedLinear`); a decode step pays the
logits and top-k kernels' launch floors (21 µs per layer, measured on H200 in SGLang's stage
profile) and a prefill the top-k over the scores (16 bytes per query-key pair at the
decode bandwidth). A prompt longer than the top-k prefills in FlashMLA's sparse kernel (session
31): absorbed MLA (2 × 576 + 2 × 512 FLOPs per head and attended token) over each token's
min(position, top-k) tokens, with the query heads on a GPU padded to 64 on Hopper and 128 on
Blackwell (SGLang `_forward_flashmla_sparse`, vLLM `FlashMLASparseImpl`: GLM-5's 8 heads per GPU
at TP 8 run as 128 on a B200), at the kernel's published BF16 rate (640 TFLOPS on H800, 1,450 on
B200: 0.647 / 0.644 of the BF16 peak) instead of the fitted η_flops; a prompt within the top-k
prefills with dense MHA (SGLang's `SGLANG_NSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD` = top-k),
except GLM-5 on Blackwell (its 256-wide values do not fit the dense kernel there). Approximated:
the indexer's projection, norm, rotary and quantisation kernels add no launch floor of their own.

Checked alternatives: an M/D/1 queue on the prefill share `ρ = λ × t_prefill` (fits no better:
ρ is small in these runs, the waiting is burst and admission, not random arrivals); a pure burst
model (TTFT = (C + 1)/2 × t_prefill, fits SGLang Qwen3-32B but over-predicts TRT-LLM by 3–5×);
TTFT floor per layer instead of per request (no better); an overlap share of decode memory and
compute time (`t_mem + t_cmp − ω × min(t_mem, t_cmp)`, ω fitted 0.6–1.0: TPOT 7.0 % vs 7.2 %,
TTFT 19.8 % vs 19.7 %, not worth a constant); the η_bw cap raised from 0.92 to 0.99 (most
profiles then sit at 0.99, i.e. some decode time is still over-counted elsewhere; 0.92, about
the best measured share of HBM peak, is kept as the physical cap).

**Calibration.** One joint fit per backend over all GPU classes it was measured on, by robust
least squares on log(predicted/measured) (TPOT, TTFT and throughput weight 1 each) with a Cauchy
loss (scale 0.1: noisy repeats and overloaded-queue rows pull little, and the median error is
what is judged) and a prior in log space on the efficiencies, centred on published figures:
η_bw 0.75 (weight 0.3) and η_flops 0.6 (weight 1) from the decode 74–77 % of peak bandwidth and
prefill 54–69 % of peak FLOPS computed from benchmarks.csv; η_lowp 0.85 (weight 1), a judgement
from a [cuBLASLt FP8 GEMM report](https://gitea.d-robotics.cc/han.zhao/test_gpu_scripts/raw/commit/7ec2da18bc66f5199b97863ea8e4dea01dd801f0/reports_cublaslt_fp8_crosscheck_20260524.md)
(8192³ E4M3: ~1,610 TFLOPS, 81 % of Hopper's 1,979, about the share large BF16 GEMMs reach of
theirs) less the activation quantisation of served FP8 layers;
η_moe 0.7 (weight 0.3, no external figure). The prior decides where the rows do not, e.g. the
16-bit vs 8-bit split on a backend that has rows of one precision only (see Known limits).
Sixteen constants per (class, backend):

* engine costs **shared by all classes of a backend** (the same scheduler, server and kernel
  launches run on Hopper and Blackwell): t_step, t_layer (≤ 60 µs), t_moe_layer, t_seq,
  t_chunk, κ, t_request, t_in_token, k_step, φ;
* hardware efficiencies per class: η_bw, η_flops, η_moe; η_lowp is held (session 29) at the
  class's measured GEMM kernels' FP8 / BF16 efficiency ratio on an 8192³ GEMM
  (tools/perf/gemm.yaml: Hopper 0.793, the median of H100 0.741 and H200 0.845; Blackwell HBM
  0.730; Blackwell GDDR 0.944) for every backend, fitted only on Ada (no FP8 GEMM table); fitted,
  it traded with η_moe and η_flops and sat at its 1.0 bound for Hopper SGLang and Blackwell
  vLLM. A class without rows of its own does not borrow another architecture's kernel ratio
  (Ascend INT8, Turing INT8 and MI300X FP8 are not Hopper FP8): it takes the prior 0.85;
* waits per class that also absorb each class's benchmark campaign: ψ, dp_wait.

How the model got here (medians TPOT / TTFT / offline throughput on the shipped rows):
a Cauchy loss instead of soft-L1 (11.6 / 25.8 % → 10.5 / 22.2 %); f0 (9.5 / 22.8 %); TTFT
weight 0.7 (9.8 / 22.0 / 4.5 %); lockstep attention-DP prefill (9.8 / 21.5 %); dp_wait
(9.8 / 20.3 / 4.0 %); η_lowp (7.5 / 19.8 / 11.4 %: the FP8 rows of every backend ran their
GEMMs well below twice the BF16 efficiency, which had been absorbed by κ and t_seq; the offline
TRT-LLM FP8 rows ran nearer it, hence the offline loss); logits for the last prompt token only
and attention at the KV precision's rate (7.5 / 19.7 / 11.0 %). Fitting every (class, backend)
separately met all three targets (TPOT 6.9–7.5 %, TTFT 19.7–20.0 %), but the Blackwell
engine costs, fitted on DeepSeek-R1 rows alone, then made B200 decode dense models slower than
H200 in 16–26 of 54 checked configurations (Llama-3.1-8B / Qwen3-32B / Llama-3.1-70B × three
backends × tp 1, 4 × C 1, 16, 64). Sharing the step costs per backend gives 0 of 54 for TPOT
at 7.7 / 20.4 / 11.3 %, but B200 TTFT still came out above H200's in 23 of 54 (its campaign's
per-request latency and burst share); sharing t_request and k_step as well gives 7.7 /
20.0 / 12.1 % with 17 of 54, and sharing φ too gives 0 of 54 for TPOT and TTFT at
7.7 / 20.8 / 10.9 % (13.5 % offline once the single-stream prefill rows are read as engine
prefills, see below). The last was chosen: a plan must not buy the wrong GPU for a point of
TTFT (`tests/perf/test_perf_timing.py::test_faster_gpu_serves_dense_models_faster`, and the
table above). The per-prompt-token frontend cost t_in_token (shared per backend) then gave
7.2 / 19.7 / 11.5 % with the ordering intact: it is fitted at 13–14 µs per token for TRT-LLM
and SGLang and 40 µs for vLLM (1,000 tokens: 13–40 ms), and it let vLLM's prefill efficiency
rise from an implausible 26 % of peak to 50 %: the isl-proportional part of TTFT does not scale
with model size, so it is not GPU compute. It also absorbs any other prompt-length cost outside
the prefill FLOPs, so read it as an upper bound of the frontend's cost.
No per-model or per-row constants. Measured groups: Hopper and Blackwell (HBM) × vLLM, SGLang,
TRT-LLM; Ampere HBM, Ada GDDR and Blackwell GDDR × TRT-LLM from offline throughput only (A100,
L40S, RTX PRO 6000 perf-overview rows). Since issue #13 the refit starts from the shipped
constants, runs at most 30 iterations and uses at most 120 rows per (class, backend, model),
evenly spaced (the two CPU cores of the build machine); the history below predates it.
Classes without rows (Turing, CDNA, Ascend, …) inherit Hopper's constants with their own bandwidth and FLOPS, and their
band is the Hopper band squared (`band ** 2`). A backend without rows on a measured class takes
the backend's ratio from Hopper, each constant clipped to its fit bounds (vLLM on B200: B200
TRT-LLM × vLLM/TRT-LLM on Hopper; unclipped, a refit can push e.g. f0 or η_bw past 1). The
band of an estimate is the [p10, p90] of measured/predicted
on the rows of its profile; SLA checks use the upper side.

## Reading of the data

* Requests in flight are the source id's `c<N>` where the id states one. measured.csv
  `concurrency` is per attention-DP rank (rows with `attention_dp` > 1 say 32 where the id says
  `c256` with attention_dp 8); measured-extra.csv's is the total (id, `silicon_concurrency` and
  `batch_size(per-rank)` × attn_dp agree on all 97 of its attention-DP rows). Without an id:
  concurrency × attention_dp. A run spread over several workers (notes' `batch_size(per-rank)` ×
  attn_dp below the count: Qwen3-32B NVFP4 c448 at tp 2 with batch 14) counts one worker's.
* vLLM runs with attention DP and expert-parallel MoE written tp N, attention_dp N, moe_ep N × N
  (ids `tp4_ep4`, `tp2_ep2`) used N GPUs: read as N GPUs, attention DP N, EP N.
* Speculative decoding: InferenceX ran DeepSeek-R1's TensorRT-LLM MTP configurations in image
  1.2.0rc6.post3 and the plain ones in 1.2.0rc6.post2, and Qwen3.5-397B FP8's SGLang MTP
  configuration at tp 4 / ep 1 in image v0.5.9-cu130 (the plain one at tp 8 and tp 4 / ep 4)
  (its nvidia-master.yaml, Feb–Apr 2026); these 88 + 75 rows are skipped with that reason (the
  model has no speculative-decoding term).
* InferenceX rows (date-stamped ids, `provenance: db-dump`, the `-gap-analysis.csv` files whose
  rows repeat those) are read at their mean lengths: its
  client draws each length uniformly from [floor(0.8 L), L] (RANDOM_RANGE_RATIO 0.8), so 1,024 →
  922 and 8,192 → 7,372 tokens.
* SGLang's scheduler receive interval: InferenceX's SGLang launch scripts set
  `--scheduler-recv-interval` (new requests are taken only every N decode steps): DeepSeek-R1 on
  B200/B300 30 from CONC 16, else 10 (FP8 at TP 4: 10), Qwen3.5-397B on B200/B300 the same from
  the script dates given in data.py (RECV_INTERVAL_RULES; image-less rows take the date of the
  dated run whose numbers they repeat); 386 rows. Their closed-loop TTFT adds (N − 1)/2 decode
  steps and the prefills of the requests taken in the same receive. The step at CONC 16 is in
  the data (DeepSeek-R1 FP4 B200 tp 8 / ep 8, 1k/1k: 189, 204, 320, 481 ms at C 4, 8, 16, 32).
* InferenceX's GB200 runs (Nov 2025, "TP" 12–72) were multi-node Dynamo deployments with separate
  prefill and decode workers (runners/launch_gb200-nv.sh, submit_disagg.sh; the TP column counts
  all their GPUs): these 55 rows are skipped as disaggregated serving (session 28).
* InferenceX's first DeepSeek-R1 recipes (Sep – early Nov 2025; rows with moe_ep 1 and no backend
  version) chose EP and attention DP in their scripts: SGLang FP4 B200 passed `--enable-ep-moe`
  (EP = TP), TensorRT-LLM FP4 B200 and FP8 H200 set EP = TP and attention DP by concurrency; 71
  rows are read so. Their client had no warm-up (added 2026-01-21): the 36 SGLang rows' TTFT (up
  to 9 s at C 8, 2.1 s at C 32) is not compared, their TPOT is (validate prints the reason).
* GPUs of a run = max(tp × attention_dp, moe_tp × moe_ep); where attention is narrower than the
  MoE group (vLLM Qwen3-235B rows with tp 1, moe_tp 2) the extra GPUs run attention data-parallel.
* 120 DeepSeek-R1 rows with tp × attention_dp of 16 or 64 are single-node runs whose id says
  `tp4_ep4`/`tp8_ep8` and whose numbers equal the rows labelled tp 8, moe_ep 8: the column holds
  tp × ep. They are read as `moe_ep` GPUs with expert-parallel MoE.
* benchmarks.csv `single-stream prefill (batch 1)` rows (TRT-LLM v0.5 gptSessionBenchmark: one
  prefill inside the engine, static batching, no server) are compared with the prefill as one
  engine step (compute + communication + the step's kernel costs), not with a served TTFT;
  read as served requests they were over-predicted 2–7× by the server's per-request latency.
* benchmarks.csv: model names with a parenthesis use the base architecture (Llama-3.3-70B =
  Llama-3.1-70B); offline rows (`max (offline)`) run at the KV capacity capped by the backend's
  maximum batch (vLLM/SGLang 1024, TRT-LLM 2048); rows without numeric lengths or from
  llama.cpp/MLC (no profile) are skipped with the reason.

## Known limits (issue #13 refit on all shared data)

* **Targets.** Fitted on all shared data the model reaches TPOT 8.9 %, TTFT 18.1 % and offline
  throughput 8.7 % median APE (targets 8 / 15 / 12 %; session 33, with the measured fused-MoE
  kernel rates, their routing traffic, the kernel-held η_lowp and SGLang's interference split
  by request lengths): the offline target is met,
  TPOT and TTFT are not. A free correction factor per (model, backend, GPU) would leave 7.2 / 15.4 %
  (`python -m tools.perf.residuals --ceiling`): the rest is how predictions respond to
  precision, layout, lengths and load within a campaign. The 2026 rows are other
  campaigns (aiconfigurator's sample: MiniMax-M2.5, Kimi-K2.5, GLM-5, Qwen3.5-397B on
  B200/B300/H200 with vLLM and SGLang) fitted with the same per-backend engine constants as the
  2025 rows; by model the largest TPOT errors are Qwen3-235B (16 %: vLLM 0.12 with
  attention DP on H200, 40–60 % too fast), DeepSeek-R1 (14 %) and GLM-5 (12 %).
* **What the data allow** (`python -m tools.perf.consistency`, session 34).
  - Five vLLM Llama-3.1-8B rows on H200 need 81–107 % of the fastest FP8 GEMM measured on
    that GPU.
  - Two campaigns keep TPOT flat while the load grows 4–18 ×: SGLang Llama-3.1-8B on H200, and
    vLLM Qwen3-235B on H200, whose fused-MoE kernel in ops/ takes 3 × longer at 16 tokens than
    at 4.
  - Campaigns of one backend on one GPU class differ by 1.3–3.4 × in their TTFT at four
    requests.
  - Free weights of the three TTFT terms per (backend, GPU class) reach 16.6 %, per backend and
    GPU 14.8 %, per campaign 9.4 %.

  The TTFT target needs constants set by the campaign, which no column of the data records.
  The host request path fitted per GPU class reached 16.9 % but was not kept: it trades against
  the prefill efficiency that GPUs without data inherit (docs/accuracy-attempts.md,
  session 34).
* **Constants at a bound.** Not met either (32 class entries within 6 % of a bound, not counting the held
  η_lowp and dp_wait): t_layer sits at its 60 µs cap (TRT-LLM, vLLM), t_chunk at its floor
  (TRT-LLM), t_step at its floor (vLLM, SGLang), k_step at its floor (SGLang); η_bw at its 0.92
  cap for Hopper and for Blackwell vLLM; η_moe at 1.0 on Blackwell and for SGLang (session 33:
  its expert reads at the bandwidth roofline, with uniform routing assumed); the admission
  share at its floor on the classes whose rows do not see it. A class with no attention-DP rows
  keeps dp_wait at its start value 1 (session 28; it drifted to a bound before). The fit is
  under-determined for these terms (they trade against each other); they are kept bounded
  rather than freed to unphysical values.
* **GB200 rows.** InferenceX's GB200 runs are disaggregated and skipped (session 28); what
  remains are aiconfigurator's aggregated TRT-LLM runs (3 latency rows and the offline ones).
  The two TRT-LLM Qwen3-32B fp4 rows with 448 in flight were 32 workers of
  14 requests each (read so since session 26), not one two-GPU server.
* **Open loop.** No shipped row ran at a fixed request rate, so the open-loop TTFT is checked
  against a queue simulation only, not against measurements.
* **Leave-one-out is time-boxed** (four models, one GPU, 30 iterations from round start
  values per refit): its errors include the shorter refit, not only the transfer.

## Known limits of the previous calibration (measured.csv and benchmarks.csv only; numbers below are from that fit)

* **Run-to-run noise in the data.** measured.csv holds repeated configurations whose TTFT differs
  by 1.2–2× (DeepSeek-R1 B200 SGLang fp8 1024/1024 C 8: 227 and 364 ms; C 16: 402 and 586 ms),
  and step changes no model of the hardware can follow (DeepSeek-R1 nvfp4 SGLang tp 4: 890 ms at
  C 16, 7,100 ms at C 32; C 512 rows with 120–160 s TTFT, i.e. an overloaded queue). Within the
  same configuration TPOT repeats differ by up to 30 % (B200 TRT-LLM nvfp4 1024/8192 C 64: 9.7
  and 16.3 ms).
* **Different benchmark settings per model.** The rows come from different campaigns: the
  TRT-LLM Llama-3.1-8B rows show the admission wait (TTFT ∝ osl at low C), the TRT-LLM
  Qwen3-235B rows of the same backend version do not (TTFT 173 ms for osl 128, 256 and 512);
  the H200 SGLang/vLLM Llama-3.1-8B and Qwen3-235B rows are SLA-sweep points (C chosen so that
  TPOT ≈ 30–55 ms). One set of backend constants cannot follow both, which is what the
  leave-one-model-out errors show (table above): with one of the four models held out, TPOT
  and TTFT errors are two to three times the fitted ones.
* **H200 is the weakest GPU for TTFT (53 %) and why it is not given its own constants.**
  Its rows are those SLA sweeps with other backend versions (SGLang 0.5.6, TRT-LLM 1.1 on
  DeepSeek-R1 only, vLLM 0.12). Its TPOT error fell from 20 % to 12 % once the vLLM fused-MoE
  expert-read floor f0 was fitted (vLLM Qwen3-235B FP8 TPOT 27 % → 7 %), and to 9 % with η_lowp;
  its TTFT error hardly moved: SGLang Llama-3.1-8B TTFT is over-predicted 2.3× and TRT-LLM
  DeepSeek-R1 under-predicted 0.7× by the same Hopper constants that fit H100 (17 %). A class of its own
  (`hopper-hbm3e`, split from H100's HBM3 by memory technology) was tried: the fitted medians
  then meet both targets (TPOT 9.2 %, TTFT 18.1 %; leave-one-model-out mixed: 19–27 % / 38–57 %)
  but the H200 profiles absorb those campaigns, not the hardware: Llama-3.1-70B fp8 tp 4 C 16
  came out slower on H200 than on H100 with SGLang (16.7 vs 12.1 ms) and TRT-LLM (21.4 vs
  15.2 ms), which would make plans pick the wrong GPU. The split was rejected; Hopper is one
  class, and H200 differs from H100 only by its bandwidth, memory and link
  (`tests/perf/test_perf_timing.py::test_h200_never_slower_than_h100` checks five models × three
  backends so this cannot regress).
* **Prefill interference as the extra compute of a mixed step** (the prefill GEMMs of a chunked
  step partly hidden under the decode step's weight read, `κ × (others × t_prefill/osl −
  min(others × t_prefill_compute/osl, t_mem))`) was tried and rejected: TPOT 9.7 % vs 9.5 %,
  TTFT 22.6 % vs 22.8 %, offline throughput 9.5 % vs 4.8 %, B200 and H200 TPOT worse. TRT-LLM
  Llama-3.1-8B TPOT stays over-predicted by 6–30 % (most at osl 128, C > 64).
* **B200 is fitted on MoE rows only** (DeepSeek-R1; TRT-LLM also a few Llama-3.1-70B/405B and
  Qwen3-235B offline rows). Its TPOT error (14 %) is the largest of the measured GPUs because
  it shares the engine costs fitted mostly on Hopper rows (see Calibration); its per-class
  constants are efficiencies and serving behaviour only. No dense-model B200 rows exist to check
  its dense estimates directly; they follow from its bandwidth and FLOPS.
* **Offline throughput** is under-predicted by 10–20 % (TRT-LLM perf-overview FP8/FP4 rows;
  large batched prefills reach a higher low-precision efficiency than the online campaigns'
  η_lowp, and TRT-LLM v0.5's single-stream FP8 prefill rows pull it lower still). Median 11.5 %.
* **Four models.** Leave-one-model-out removes a quarter of the data and, for DeepSeek-R1, the only
  B200 rows and the only MLA model; the held-out model is then predicted from constants fitted
  on different architectures (dense vs MoE, GQA vs MLA), so the per-backend overheads (t_layer,
  t_seq, η_moe) transfer poorly. Sharing the engine costs per backend and η_lowp brought the
  held-out TPOT errors from 17–31 % to 13–27 % (TTFT 38–52 %; 33–49 % before; sharing φ,
  which the GPU ordering needs, costs Qwen3-235B-A22B held out 34 → 41 %). Centring the
  efficiency prior on the published figures above instead of round start values (η_flops 0.5,
  η_lowp 0.75, weight 0.3) brought them to 13–23 % and 38–48 % (Llama-3.1-8B 26.7 → 22.6 %
  TPOT, 52.2 → 47.7 % TTFT; Qwen3-32B 14.3 → 15.0 %, Qwen3-235B-A22B 41.4 → 42.9 % TTFT) with
  the fitted errors unchanged (TPOT 7.2 %, TTFT 19.7 → 19.8 %, offline 11.5 → 11.0 %).
* **Leave-one-GPU-out mixes the GPU with the campaign.** The H100 and H200 rows share no
  (model, backend) pair: H100 has the TRT-LLM 1.0, SGLang 0.5.1 and vLLM Qwen3-32B campaigns,
  H200 the SGLang 0.5.6 / vLLM 0.12 SLA sweeps and TRT-LLM 1.1 DeepSeek-R1. Without one of them,
  Hopper is fitted on the other's campaigns, hence 19–38 % TPOT on the held-out Hopper GPU.
  B200, predicted from Hopper's efficiencies with its own bandwidth and FLOPS, has 13.7 % TPOT
  error, about what its own fitted constants reach (14.1 %): the hardware part transfers, the
  campaign part does not.
* **Precision is tied to the model within a backend.** On TRT-LLM/Hopper the only 16-bit rows are
  Llama-3.1-8B's (the other models are FP8); on SGLang/Hopper the only 16-bit rows are
  Qwen3-32B's; vLLM's FP8 rows are Llama-3.1-8B's and Qwen3-235B-A22B's. Holding such a model out
  leaves the backend without that precision, and the split of the GEMM efficiency between η_flops
  (16 bit) and η_lowp (8/4 bit) is then set by the prior instead of the data: TRT-LLM/Hopper with
  Llama-3.1-8B held out fits η_flops 0.80 and η_lowp 0.88 instead of 0.90 and 0.57, and
  over-predicts Llama-3.1-8B's TPOT at short outputs, where prefill interference dominates
  (18 % median on its TRT-LLM rows; 23 % with the earlier round-value prior, which gave 0.69
  and 1.0). The per-backend leave-one-model-out table lists these gaps.
* **Partial pooling across backends was tried and rejected** (measured with the earlier
  round-value prior). A pooled fit of all backends ran first, then each backend's fit was pulled
  towards it in log space:
  * pulling every constant (weight 0.3) made held-out TPOT worse (Llama-3.1-8B 34 %, Qwen3-32B
    19 %);
  * pulling η_flops and η_lowp (weight 3) brought held-out TPOT to 16 / 12 / 18 / 12 % (the four
    models in table order) but held-out TTFT to 51 / 41 / 49 / 45 %, and the fitted TTFT to
    20.7 % (target missed);
  * η_lowp alone (weight 3): TPOT 26 / 12 / 18 / 12 %, TTFT 50 / 39 / 53 / 43 %;
  * η_flops and η_lowp with weight 1: TPOT 21 / 17 / 18 / 12 %, TTFT 49 / 39 / 50 / 45 %.
  No variant improves both metrics, and each doubles the fit time. Fixing η_lowp at 0.85
  instead of fitting it: held-out TPOT 22 / 17 / 19 / 13 %, TTFT 47 / 34 / 47 / 38 %, but the
  fitted TPOT 8.5 % and TTFT 20.4 % (target missed); rejected too. The prior centred there
  (weight 1, with η_flops 0.6) keeps the fitted targets, which is what is shipped; a prior of
  η_flops 0.7 gave about the same (held-out TPOT 24 / 15 / 18 / 13 %, weight 3 likewise).
* Some rows are faster than the hardware allows without prefix caching (e.g. vLLM Llama-3.1-8B
  FP8, 112 requests of 1000 tokens with 72 ms TTFT would need > 1.5 PFLOP/s of prefill on one
  H200); the model does not follow them.
* No latency rows for PCIe/GDDR GPUs (only TRT-LLM offline throughput), none for AMD or Ascend:
  those estimates rest on spec sheets plus inherited or throughput-fitted constants and carry
  the widened band. GPUs without kernel data take their link kind's all-reduce constants.
* Operator-level GEMM/attention/MoE efficiency curves from ops/ were examined but not shipped:
  large-m BF16 GEMMs reach 0.75–0.85 of peak on H100 for every LLM shape, and below m ≈ 300
  the kernels are memory-bound, which the decode model already charges as bytes ÷ bandwidth;
  a saturating GEMM curve on top of that double-counted the memory time. Only the all-reduce
  constants and the MoE read rule come from the kernel tables.
* Pipeline parallelism is modelled without micro-batch overlap (conservative latency).
"""


def _p(x: float) -> str:
    return f"{100 * x:.1f}%"


def _cell(ms: dict[str, Any], metric: str, p90: bool = True) -> str:
    """``median / p90 (n)`` of one metric of a summary group, or a dash."""
    if metric not in ms:
        return "–"
    e = ms[metric]
    return f"{_p(e['median_ape'])}" + (f" / {_p(e['p90_ape'])}" if p90 else "") + f" ({e['n']})"


def table(summary: dict[str, Any], group: str | None) -> list[str]:
    metrics = ["tpot_ms", "ttft_ms", "offline_output_tokens_per_s", "output_tokens_per_s"]
    head = "| " + (group or "all") + " | " + " | ".join(
        f"{LABELS[m]} median / p90 (n)" for m in metrics) + " |"
    lines = [head, "|" + "---|" * (len(metrics) + 1)]
    items = {"all": summary["overall"]} if group is None else summary[f"by_{group}"]
    for name, ms in items.items():
        lines.append(f"| {name} | " + " | ".join(_cell(ms, m) for m in metrics) + " |")
    return lines


def _held_out(job: tuple[str, str]) -> tuple[str, str, dict[str, Any]]:
    """Refit without one model (``("model", name)``) or GPU (``("gpu", name)``), predict it."""
    kind, name = job
    cal = fit(DEFAULT_FILES, exclude_models=[name] if kind == "model" else [],
              exclude_gpus=[name] if kind == "gpu" else [], warm=False, max_nfev=LOMO_NFEV)
    r = validate(DEFAULT_FILES, calibration=cal)
    held = [e for e in r["errors"] if e[kind] == name]
    return kind, name, summarise(held, by=("gpu", "backend"))


def uncovered(model: str) -> dict[str, list[str]]:
    """Per backend, the (GPU class, precision) of ``model``'s rows that no other model has."""
    rows = usable_rows(DEFAULT_FILES)

    def key(r: Any) -> tuple[str, str, str]:
        return r.backend, gpu_class(r.gpu), r.precision

    others = {key(r) for r in rows if not is_model(r, [model])}
    out: dict[str, set[str]] = {}
    for r in rows:
        if is_model(r, [model]) and key(r) not in others:
            out.setdefault(r.backend, set()).add(f"{gpu_class(r.gpu)} {r.precision}")
    return {b: sorted(v) for b, v in sorted(out.items())}


def lomo_backend_lines(lomo: dict[str, Any]) -> list[str]:
    """Leave-one-model-out errors per backend, with what the other models' rows do not cover."""
    lines = ["| held-out model | backend | TPOT median (n) | TTFT median (n) | its GPU class and "
             "precision that no other model has on this backend |", "|---|---|---|---|---|"]
    for model, sm in lomo.items():
        gaps = uncovered(model)
        for be, ms in sm["by_backend"].items():
            cells = [_cell(ms, m, p90=False) for m in ("tpot_ms", "ttft_ms")]
            lines.append(f"| {model} | {be} | " + " | ".join(cells) + " | "
                         + (", ".join(gaps.get(be, [])) or "–") + " |")
    return lines


def leave_one_out(workers: int = 1) -> dict[str, dict[str, Any]]:
    """Refit without each measured model and each measured GPU, then predict the held-out rows.

    Returns ``{"model": {name: summary}, "gpu": {name: summary}}``; runs in parallel with a
    progress line per refit on stderr.
    """
    jobs = [("model", m) for m in HELD_OUT] + [("gpu", g) for g in HELD_OUT_GPUS]
    out: dict[str, dict[str, Any]] = {"model": {}, "gpu": {}}
    results = (map(_held_out, jobs) if workers <= 1
               else ProcessPoolExecutor(max_workers=workers).map(_held_out, jobs))
    for i, (kind, name, summary) in enumerate(results, 1):
        print(f"leave-one-out {i}/{len(jobs)}: {kind} {name} done", file=sys.stderr)
        out[kind][name] = summary
    return out


def ordering_lines() -> list[str]:
    """The GPU-ordering check of tools.perf.ordering, as a Markdown table."""
    models = sorted({m for m, _, _ in DENSE_GRID})
    tps = sorted({tp for _, tp, _ in DENSE_GRID})
    cs = sorted({c for _, _, c in DENSE_GRID})
    lines = ["## GPU ordering on dense models", "",
             f"Estimates of {', '.join(models)} at {PRECISION}, isl {ISL}, osl {OSL}, tp "
             f"{' / '.join(map(str, tps))}, {' / '.join(map(str, cs))} requests in flight, with "
             f"{', '.join(ORDER_BACKENDS)} (`tools.perf.ordering`): configurations "
             "where the faster GPU comes out slower.", "",
             "| faster GPU | slower GPU | configurations | TPOT inverted | TTFT inverted |",
             "|---|---|---|---|---|"]
    for fast, slow in PAIRS:
        v = violations((fast, slow))
        lines.append(f"| {fast} | {slow} | {v['n']} | {len(v['tpot_ms'])} | "
                     f"{len(v['ttft_ms'])} |")
    return lines + [""]


def plot(errs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("tpot_ms", "TPOT (ms)"), ("ttft_ms", "TTFT (ms)"),
              ("offline_output_tokens_per_s", "offline output tokens/s")]
    gpus = sorted({e["gpu"] for e in errs})
    colours = dict(zip(gpus, plt.cm.tab10.colors, strict=False))
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    for ax, (metric, label) in zip(axes, panels, strict=True):
        sel = [e for e in errs if e["metric"] == metric]
        for g in gpus:
            pts = [e for e in sel if e["gpu"] == g]
            if pts:
                ax.scatter([e["meas"] for e in pts], [e["pred"] for e in pts], s=9, alpha=0.6,
                           color=colours[g], label=f"{g} ({len(pts)})")
        if sel:
            lo = min(min(e["meas"], e["pred"]) for e in sel) * 0.8
            hi = max(max(e["meas"], e["pred"]) for e in sel) * 1.25
            ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
            for f in (0.8, 1.25):
                ax.plot([lo, hi], [lo * f, hi * f], "k:", lw=0.6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"measured {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.set_title(f"{label}: predicted vs measured")
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
    fig.suptitle("servewise performance model vs measured serving runs (dotted: ±25%)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def held_out_lines(label: str, summaries: dict[str, Any]) -> list[str]:
    """One row per held-out model or GPU: TPOT and TTFT median / p90 error."""
    lines = [f"| {label} | TPOT median / p90 (n) | TTFT median / p90 (n) |", "|---|---|---|"]
    for name, sm in summaries.items():
        cells = [_cell(sm["overall"], m) for m in ("tpot_ms", "ttft_ms")]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


CONC_BUCKETS = ((1, 1), (2, 8), (9, 32), (33, 128), (129, 10**9))


def concurrency_lines(errs: list[dict[str, Any]]) -> list[str]:
    """Median APE by requests in flight (closed-loop rows with a stated concurrency)."""
    lines = ["## Error by concurrency", "",
             "| requests in flight | TPOT median / p90 (n) | TTFT median / p90 (n) |",
             "|---|---|---|"]
    for lo, hi in CONC_BUCKETS:
        sel = [e for e in errs if e.get("concurrency") and lo <= e["concurrency"] <= hi]
        sm = summarise(sel, by=())["overall"]
        label = f"{lo}" if lo == hi else (f"{lo}–{hi}" if hi < 10**9 else f"> {lo - 1}")
        lines.append(f"| {label} | {_cell(sm, 'tpot_ms')} | {_cell(sm, 'ttft_ms')} |")
    return lines + [""]


def arrival_lines(errs: list[dict[str, Any]]) -> list[str]:
    """Closed loop vs open loop: which rows ran which way and their errors."""
    lines = ["## Closed loop vs open loop", "",
             "| arrival process | TPOT median / p90 (n) | TTFT median / p90 (n) |",
             "|---|---|---|"]
    for arr in ("closed", "poisson"):
        sm = summarise([e for e in errs if e.get("arrival") == arr], by=())["overall"]
        lines.append(f"| {arr} | {_cell(sm, 'tpot_ms')} | {_cell(sm, 'ttft_ms')} |")
        if arr != "closed":
            continue
        for lengths in ("fixed", "random"):
            sel = [e for e in errs if e.get("arrival") == arr and e.get("lengths") == lengths]
            sm = summarise(sel, by=())["overall"]
            lines.append(f"| closed, {lengths} request lengths | {_cell(sm, 'tpot_ms')} | "
                         f"{_cell(sm, 'ttft_ms')} |")
    lines += ["", "Every latency row of the shipped data is a closed-loop run (a benchmark client "
              "with a fixed number of requests in flight, started together): no row has a "
              "`request_rate`, so the open-loop model (Poisson arrivals, M/D/1 prefill queue, "
              "mean and P99 TTFT; see Method) is not validated on measured data here. `validate`"
              " predicts a row with a `request_rate` column open loop, and its `statistic` "
              "column (`mean`, `median`, `p99`) selects the mean or the queue's P99 TTFT. "
              "Closed loops differ by their client's request lengths: fixed (aiconfigurator's "
              "runs, TensorRT-LLM's tables) or random (InferenceX draws each length from [0.8 L, "
              "L]; a `request_lengths` column says so for other rows); see κ in Method.", ""]
    return lines + max_rate_lines(errs)


def max_rate_lines(errs: list[dict[str, Any]]) -> list[str]:
    """Issue #40's open-loop target: the largest Poisson rate meeting P99 limits within ±25 % on at
    least three quarters of such runs, measured on the rows that state it (validate's
    ``max_request_rate``), with the campaigns of the fit named (leave-one-campaign-out)."""
    from servewise.engine.domain.perf.validate import MAX_RATE_SHARE_TARGET, MAX_RATE_TOLERANCE

    rate = [e for e in errs if e["metric"] == "max_request_rate"]
    fitted = {(e["model"], e["backend"], e["gpu"]) for e in errs
              if e["metric"] in ("ttft_ms", "tpot_ms")}
    lines = ["### The largest open-loop rate meeting P99 limits (issue #40)", "",
             "A maximum-rate row (optional columns of the measured layout: `p99_ttft_limit_ms`, "
             "`p99_tpot_limit_ms`, `replicas`) gives the highest Poisson rate whose P99 TTFT / TPOT "
             "met the limits, as MLPerf Inference's Server scenario reports it (`target_qps` of a "
             "VALID run, `ttft_latency` / `tpot_latency` its limits in `mlperf_log_summary.txt`). "
             "`validate` predicts it with `serving.max_rate_meeting` at the central estimate (the "
             "queue's P99 TTFT, the batch's TPOT against the P99 TPOT limit) times the replicas, "
             "and counts the rows within "
             f"±{100 * MAX_RATE_TOLERANCE:.0f} % (target: at least {100 * MAX_RATE_SHARE_TARGET:.0f} % "
             "of them). Such a row has no TTFT or TPOT, so no fit reads it: it is held out as long "
             "as no closed-loop row of its campaign (model, backend, GPU) is in the fit.", ""]
    if not rate:
        lines += ["**Not measured on the shipped data: it has no such row.** The only open-loop "
                  "rows of ../shared/data are two vLLM runs of Llama-3.1-405B on 8 × MI300X "
                  "(benchmarks.csv: ShareGPT lengths, offered 16 and 1,000 requests/s, achieved "
                  "throughput only, no latency limit), which `validate` skips (lengths not "
                  "numeric). The share is reported here as soon as a data file with such rows is "
                  "validated (`servewise validate --data FILE` prints it).", ""]
        return lines
    n_ok = sum(abs(e["err"]) <= MAX_RATE_TOLERANCE for e in rate)
    loco = [e for e in rate if (e["model"], e["backend"], e["gpu"]) not in fitted]
    lines += ["| rows | within ±25 % | median APE | median signed | of them campaign not in the fit "
              "(within ±25 %) |", "|---|---|---|---|---|"]
    med = summarise(rate, by=())["overall"]["max_request_rate"]
    k_ok = sum(abs(e["err"]) <= MAX_RATE_TOLERANCE for e in loco)
    lines.append(f"| {len(rate)} | {_p(n_ok / len(rate))} | {_p(med['median_ape'])} | "
                 f"{100 * med['median_signed']:+.0f} % | {len(loco)} "
                 f"({_p(k_ok / len(loco)) if loco else '–'}) |")
    return lines + [""]


def links_lines() -> list[str]:
    """The all-reduce constants fitted from kernel data."""
    links = load_calibration().get("links") or {}
    lines = ["## All-reduce constants from kernel data", "",
             "Fitted from vLLM custom all-reduce latencies (`../shared/data/ops`, "
             "`python -m tools.perf.kernels`): latency of the smallest message and "
             "efficiency = bus bandwidth of the largest over the link's one-direction bandwidth "
             "(NVLink `link_gbs`/2, PCIe by generation). GPUs without kernel data use the "
             "median of their link kind.", "",
             "| GPU / link | GPUs | latency µs | efficiency |", "|---|---|---|---|"]
    rows = [(k, v.get("by_gpus") or {}) for k, v in links.items()
            if k != "by_gpu" and isinstance(v, dict)]
    rows += [(g, v.get("by_gpus") or {}) for g, v in (links.get("by_gpu") or {}).items()]
    for name, table in rows:
        for n, c in sorted(table.items()):
            lines.append(f"| {name} | {n} | {c['latency_us']} | {c['eta']} |")
    return lines + [""]


ATTEMPTS_FILE = PACKAGE_ROOT / "docs" / "accuracy-attempts.md"


def held_out_band_lines() -> list[str]:
    """Held-out errors and the 80 % bands per regime, from facts/calibration-bands.yaml."""
    from servewise.engine.domain.perf.bands import load_bands

    b = load_bands()
    if not b:
        return []
    m = b["meta"]
    over = m.get("held_out_median_ape") or {}
    lines = ["## Held-out errors and 80 % bands (issue #40)", "",
             f"Grouped {m.get('folds')}-fold cross-validation by campaign ({m.get('campaigns')} "
             f"campaigns of (file, model, backend, GPU, precision), {m.get('rows')} rows): each "
             "fold's rows predicted by a calibration refitted without them (cold start, "
             f"{m.get('max_nfev')} iterations; `python -m tools.perf.bands`, "
             "facts/calibration-bands.yaml). Median APE held out: "
             + ", ".join(f"{LABELS.get(k, k)} {_p(v)}" for k, v in sorted(over.items())
                         if isinstance(v, (int, float)))
             + ". The band of an estimate is its central value times the regime's [p10, p90] "
               "of measured / predicted; coverage is the share of rows inside a band computed "
               "from the other folds only (0.7–0.9 is the target).", "",
             "| backend | arrival | load | TTFT: n, band, coverage | TPOT: n, band, coverage | "
             "throughput: n, band, coverage |", "|---|---|---|---|---|---|"]
    for e in b.get("regimes") or []:
        cells = []
        for k in ("ttft_ms", "tpot_ms", "output_tokens_per_s"):
            x = e.get(k)
            cells.append("–" if not x else f"{x['n']}, [{x['band'][0]:.2f}, {x['band'][1]:.2f}], "
                         + (_p(x["coverage_cv"]) if x.get("coverage_cv") is not None else "–"))
        lines.append(f"| {e['backend']} | {e['arrival']} | {e['load']} | " + " | ".join(cells) + " |")
    return lines


def disagg_lines() -> list[str]:
    """The disaggregated runs (facts/data/measured-disagg.csv.gz) against perf.disagg: targets of
    issue #36 (>= 90 % of rows predicted, TPOT <= 15 %, TTFT <= 30 % median APE), in sample, held
    out by campaign and by model, per campaign."""
    from tools.perf.disagg_fit import summary

    d = summary()
    share = d["predicted"] / d["rows"] if d["rows"] else 0.0

    def cell(x: dict[str, Any], m: str) -> str:
        v = x.get(m)
        return "–" if not v else f"{_p(v['median_ape'])} (n={v['n']})"

    lines = ["## Disaggregated serving (issue #36)", "",
             f"`servewise validate --data facts/data/measured-disagg.csv.gz`: {d['predicted']} of "
             f"{d['rows']} rows predicted ({_p(share)}; target ≥ 90 %) by the two-pool model "
             "(engine/domain/perf/disagg.py), each with the layouts of the InferenceX recipe that "
             "ran it where one matches (facts/data/inferencex-disagg-recipes.csv), else its notes' "
             "layouts; the decode ranks' batch limit is the recipe's TensorRT-LLM `max_batch_size` "
             "where its name states one, and a closed loop with more clients than the pools hold "
             "waits for a slot (Little's law). Two constants are fitted on these rows, the "
             "disaggregated request path's fixed cost and the arrival-burst share, per backend "
             "with at least 10 rows and pooled over all rows for the others "
             "(`python -m tools.perf.disagg_fit`); everything else is the aggregated calibration, "
             "and the MTP acceptance the one fitted on aggregated runs. Held out "
             "(`python -m tools.perf.disagg_fit --check` asserts these levels; about 40 s, so not "
             "in `make test`, which checks the in-sample level): each campaign's "
             "(or model's) rows predicted with the two constants refitted without them; without "
             "DeepSeek-R1 (690 of the rows) they are fitted on the 29 Kimi-K2.5 and Qwen3-32B rows.",
             "",
             "| | TTFT median APE (target ≤ 30 %) | TPOT median APE (target ≤ 15 %) |",
             "|---|---|---|"]
    for label, key in (("in sample", "in_sample"),
                       ("leave one campaign out", "leave_one_campaign_out"),
                       ("leave one model out", "leave_one_model_out")):
        lines.append(f"| {label} | {cell(d[key], 'ttft_ms')} | {cell(d[key], 'tpot_ms')} |")
    lines += ["", "| campaign (model / GPU / backend / precision) | TTFT | TPOT |", "|---|---|---|"]
    for k, v in d["campaigns"].items():
        lines.append(f"| {k} | {cell(v, 'ttft_ms')} | {cell(v, 'tpot_ms')} |")
    if d["skipped"]:
        lines += ["", "Rows not predicted, and why:", ""]
        lines += [f"- {why}: {n}" for why, n in d["skipped_detail"].items()]
    return lines


# The GPUs of 2026 (issue #40 item 4): how the calibration covers them.
GPUS_2026 = ("B300", "GB300", "RTX PRO 6000 Blackwell Server", "AMD MI355X")


def held_out_model_lines(r: dict[str, Any]) -> list[str]:
    """gpt-oss (facts/data/measured-gptoss.csv, never in the fit: data.HELD_OUT_FILES) against
    the shipped calibration, by GPU and backend; and how the calibration covers the GPUs of 2026
    (their class, what it was fitted on, the band widening, their rows' error in ``r``)."""
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.perf.calibration import BACKENDS, profile
    from servewise.engine.domain.perf.data import HELD_OUT_FILES
    from servewise.engine.domain.perf.serving import widening
    from servewise.engine.domain.perf.validate import quantile

    g = validate(HELD_OUT_FILES)
    errs = g["errors"]

    def cell(sel: list[dict[str, Any]], m: str) -> str:
        x = [e for e in sel if e["metric"] == m]
        if not x:
            return "–"
        ape = _p(quantile([abs(e["err"]) for e in x], 0.5))
        signed = quantile([e["err"] for e in x], 0.5)
        cover = sum(1 for e in x if e["in_band"]) / len(x)
        return f"{ape} ({signed * 100:+.0f} %, band {cover * 100:.0f} %, n={len(x)})"

    lines = ["## A model family the calibration never saw: gpt-oss (issue #40 item 4)", "",
             "`servewise validate --data facts/data/measured-gptoss.csv`: "
             f"{len(g['rows'])} aggregated gpt-oss-120b runs (InferenceX's vLLM and TensorRT-LLM "
             "runs on H100/H200/B200 and five aiconfigurator gap-analysis runs, from "
             "aiconfigurator's silicon sample 095f58a5; `python -m tools.perf.gptoss_data`), "
             "predicted with the shipped calibration, which was fitted without them "
             "(data.HELD_OUT_FILES are not in the fit's files): leave-one-model-out by "
             "construction, nothing fitted on gpt-oss. The model reads the architecture from the "
             "catalog: 18 full-attention layers whose KV grows with the context, 18 sliding-window "
             "layers (128 tokens) whose KV and attention stop at the window, attention sinks "
             "(2 FLOPs per head and token), MXFP4 experts (4.25 bits) with BF16 attention and "
             "lm_head, multiplied at the native FP4 kernels' rate on Blackwell and at the BF16 "
             "rate after de-quantisation on Hopper; each run's KV format is its recipe's. Cells: "
             "median APE (median signed error, share inside the 80 % band, n).", "",
             "| GPU | backend | TPOT | TTFT |", "|---|---|---|---|",
             f"| all | all | {cell(errs, 'tpot_ms')} | {cell(errs, 'ttft_ms')} |"]
    for gpu in sorted({e["gpu"] for e in errs}):
        sel = [e for e in errs if e["gpu"] == gpu]
        lines.append(f"| {gpu} | all | {cell(sel, 'tpot_ms')} | {cell(sel, 'ttft_ms')} |")
        for be in sorted({e["backend"] for e in sel}):
            sub = [e for e in sel if e["backend"] == be]
            lines.append(f"| {gpu} | {be} | {cell(sub, 'tpot_ms')} | {cell(sub, 'ttft_ms')} |")
    lines += ["", "Issue #40 asks for 15 % TPOT on these rows: not met (blocked). Where the error "
              "comes from is in docs/accuracy-attempts.md (session 40, and the per-layer cost after "
              "vLLM's measured MXFP4 fused-MoE kernels in the helper session after it): after the "
              "measured MoE kernel, gpt-oss leaves 0-41 µs per layer on B200 where the fitted "
              "models leave 38-115, and 31-73 on Hopper against 25-121, while the per-layer engine "
              "cost is one constant per backend (`python -m tools.perf.gptoss_kernels`).", "",
              "### The GPUs of 2026 in the calibration", "",
              "| GPU | class | calibration per backend | band widening "
              "TTFT / TPOT | its rows in the shipped data (median APE, n) |",
              "|---|---|---|---|---|"]
    cat = load_catalog()
    by_gpu = r["summary"].get("by_gpu") or {}
    for name in GPUS_2026:
        gpu = cat.gpu(name)
        profs = [profile(gpu, be) for be in BACKENDS]
        parts = [("fitted" if pr.measured else "borrowed") + ": " + pr.source for pr in profs]
        how = parts[0] + " (every backend)" if len(set(parts)) == 1 else " / ".join(
            f"{be}: {part}" for be, part in zip(BACKENDS, parts, strict=True))
        wid = " / ".join(f"{widening(profs[0], m):.2f}" for m in ("ttft_ms", "tpot_ms"))
        own = by_gpu.get(str(gpu.get("id"))) or {}
        rows = ", ".join(f"{LABELS.get(m, m)} {_p(v['median_ape'])} (n={v['n']})"
                         for m, v in sorted(own.items())) or "none (aggregated)"
        lines.append(f"| {gpu.get('id')} | {gpu_class(gpu)} | {how} | {wid} (vllm) | {rows} |")
    lines += ["", "GB300 has no aggregated rows: its measured runs are the disaggregated ones "
              "above (a class constant set shared with B200/B300/GB200). RTX PRO 6000's only "
              "rows are TensorRT-LLM offline throughput; its vLLM/SGLang profiles are ratio "
              "transfers. MI355X has no rows at all (InferenceX's MI355X runs are not in the "
              "shared data): it borrows Hopper's efficiencies with its own bandwidth and FLOPS "
              "and the assumed widening of a class without rows (the measured "
              "leave-one-class-out exponents are NVIDIA's only)."]
    return lines


def splice_disagg(text: str) -> str:
    """``text`` (docs/accuracy.md) with its disaggregated section (to the next ``## `` heading)
    rendered afresh, the rest as it was."""
    head = "## Disaggregated serving (issue #36)"
    start = text.index(head)
    end = text.index("\n## ", start + len(head)) + 1
    return text[:start] + "\n".join(disagg_lines() + ["", ""]) + text[end:]


def attempts() -> str:
    """The hand-kept log of model changes tried (docs/accuracy-attempts.md), if any."""
    return ATTEMPTS_FILE.read_text(encoding="utf-8").rstrip() if ATTEMPTS_FILE.exists() else ""


def render(r: dict[str, Any], held: dict[str, dict[str, Any]] | None) -> str:
    s = r["summary"]
    cal = load_calibration()
    meta = cal.get("meta", {})
    t = s["targets"]
    lines = ["# Accuracy of the performance model", "",
             "Generated by `python -m tools.perf.report` from the shipped data "
             "(`facts/data/`: measured.csv, benchmarks.csv, measured-extra.csv.gz, "
             "benchmarks-extra.csv.gz = all of ../shared/data except the disaggregated runs) "
             "and the shipped "
             f"calibration (`facts/calibration.yaml`, fitted {meta.get('date', '?')}, data hash "
             f"{meta.get('data_sha256_16', '?')}). Reproduce the numbers with "
             "`servewise validate`.", "",
             "![predicted vs measured](img/accuracy.png)", "",
             "## Targets", "",
             "| metric | target (median APE, unseen campaigns) | held out (leave-campaign-out) | met "
             "| in sample: median | in sample: p90 |",
             "|---|---|---|---|---|---|"]
    from servewise.engine.domain.perf.bands import load_bands

    held_ape = (load_bands().get("meta") or {}).get("held_out_median_ape") or {}
    for m, tt in t.items():
        o = s["overall"][m]
        h = held_ape.get(m)
        met = "–" if h is None else ("yes" if h <= tt["target_median_ape"] else "**no**")
        lines.append(f"| {LABELS.get(m, m)} | ≤ {_p(tt['target_median_ape'])} | "
                     f"{'–' if h is None else _p(h)} | {met} | {_p(o['median_ape'])} | {_p(o['p90_ape'])} |")
    lines += ["", "APE = |predicted − measured| / measured, per row, here with the shipped "
              "calibration (in sample: it was fitted on these rows). The targets are issue #40's "
              "for campaigns the calibration never saw; the held-out errors are in the next "
              "section. Offline throughput comes from the `max (offline)` rows of the benchmark "
              "files.", ""] + held_out_band_lines() + [""] + disagg_lines() + [""]
    lines += held_out_model_lines(r) + ["", attempts(),
              "", "## Error tables (fitted calibration, all rows)", ""]
    for group in (None, "gpu", "backend", "model"):
        lines += table(s, group) + [""]
    if held:
        lines += ["## Leave-one-model-out", "",
                  "The calibration is refitted without the rows of one model (all files) and "
                  "used to predict them. Time-boxed: each held-out refit starts from round "
                  f"values (not the shipped constants, which saw the held-out rows) and runs "
                  f"{LOMO_NFEV} iterations, on the same thinned rows as the shipped fit; the "
                  "fitted errors above come from the full refit, so part of the gap is the "
                  "shorter refit.", ""]
        lines += held_out_lines("held-out model", held["model"])
        lines += ["", "Per backend. The last column lists the held-out model's GPU class and "
                  "precision combinations of which the refit has no row of that backend at all. "
                  "A missing precision leaves the split of the GEMM efficiency between η_flops "
                  "(16 bit) and η_lowp (8/4 bit) to the prior.", ""]
        lines += lomo_backend_lines(held["model"]) + [""]
        lines += ["## Leave-one-GPU-out", "",
                  "The calibration is refitted without the rows of one GPU and used to predict "
                  "them, as for a GPU with no measured rows of its own: without B200, Blackwell "
                  "is fitted on the B300 and GB200 rows, and B200 differs from them by its "
                  "bandwidth, memory, FLOPS and measured all-reduce constants.", ""]
        lines += held_out_lines("held-out GPU", held["gpu"]) + [""]
    lines += arrival_lines(r["errors"]) + concurrency_lines(r["errors"]) + links_lines()
    lines += ordering_lines()
    lines += [METHOD]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-lomo", action="store_true",
                    help="skip the leave-one-model-out and leave-one-GPU-out refits")
    ap.add_argument("--held-out-json", default=None,
                    help="read the held-out summaries from this file when it exists, else "
                         "compute them and write them there (re-render without refitting)")
    ap.add_argument("--disagg-only", action="store_true",
                    help="rewrite only the disaggregated section "
                         "of the existing document")
    a = ap.parse_args(argv)
    if a.disagg_only:
        DOC.write_text(splice_disagg(DOC.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the disaggregated section of {DOC}")
        return
    r = validate(DEFAULT_FILES)
    plot(r["errors"], IMG)
    held = None
    cache = Path(a.held_out_json) if a.held_out_json else None
    if cache and cache.exists():
        held = json.loads(cache.read_text(encoding="utf-8"))
    elif not a.no_lomo:
        held = leave_one_out()
        if cache:
            cache.write_text(json.dumps(held), encoding="utf-8")
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(render(r, held), encoding="utf-8")
    print(f"wrote {DOC} and {IMG}")


__all__ = ["TARGETS", "errors", "main", "render"]

if __name__ == "__main__":
    main()
