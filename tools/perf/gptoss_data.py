"""gpt-oss-120b serving runs from aiconfigurator's silicon sample (facts/data/measured-gptoss.csv).

    python -m tools.perf.gptoss_data [--repo PATH] [--commit SHA] [--write]

Reads ``aic-core/src/aiconfigurator_core/systems/silicon_sample.csv`` of ai-dynamo/aiconfigurator
(Apache-2.0; commit 095f58a5, the sample measured-extra.csv came from, whose gpt-oss rows it left
out) and keeps its aggregated gpt-oss-120b runs: InferenceX (InferenceMAX) runs of vLLM and
TensorRT-LLM on H100 SXM, H200 SXM and B200 (ids ``2026_03_25_...`` / ``2026_04_06_...``) and
five aiconfigurator gap-analysis runs of TensorRT-LLM on H100 (fixed 4,000/1,000 tokens). Rows
repeating another row's run (same GPU, backend, lengths, layout, concurrency and numbers: the
2026-04-06 dump repeats the 2026-03-25 one) are written once. The disaggregated GB200 rows are
left out.

Columns are measured-extra.csv's (data.py reads them) plus ``kv_precision``, the KV-cache format
of the run's recipe (InferenceX ``benchmarks/single_node/fixed_seq_len/deprecated/gptoss_fp4_*.sh``
at commit 843c6254ff69: ``kv-cache-dtype: fp8`` for vLLM on B200, ``kv_cache_config.dtype: fp8``
for TensorRT-LLM on B200, the model's BF16 elsewhere: vLLM's default ``auto`` on H100/H200 and
TensorRT-LLM's ``dtype: auto`` on H200; empty for the gap-analysis runs, whose recipe is not
public). ``precision`` is ``fp4`` for every run: the checkpoint openai/gpt-oss-120b holds its
experts in MXFP4 and everything else in BF16 (its config.json ``quantization_config``); the
source's labels (``nvfp4``, and ``fp8`` for the gap-analysis runs) stay in the notes.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys
from pathlib import Path

from servewise.engine.domain.perf.data import DATA_DIR

DEFAULT_REPO = Path("/work/.mirror/ai-dynamo+aiconfigurator/repo")
COMMIT = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
SAMPLE = "aic-core/src/aiconfigurator_core/systems/silicon_sample.csv"
OUT = DATA_DIR / "measured-gptoss.csv"
COLUMNS = ("model", "hf_model", "gpu", "backend", "backend_version", "precision", "weight_quant",
           "isl", "osl", "concurrency", "request_rate", "tp", "pp", "attention_dp", "moe_tp",
           "moe_ep", "ttft_ms", "tpot_ms", "output_tokens_per_s_total", "statistic",
           "kv_precision", "source", "notes")
GPUS = {"h100_sxm": "H100 SXM", "h200_sxm": "H200 SXM", "b200_sxm": "B200"}
# KV-cache format of the InferenceX recipes (module docstring), by (system, backend)
RECIPE_KV = {("b200_sxm", "vllm"): "fp8", ("b200_sxm", "trtllm"): "fp8",
             ("h100_sxm", "vllm"): "bf16", ("h200_sxm", "vllm"): "bf16",
             ("h200_sxm", "trtllm"): "bf16"}
RECIPES = "SemiAnalysisAI/InferenceX benchmarks/single_node/fixed_seq_len/deprecated/gptoss_fp4_{}.sh@843c6254ff69"


def _field(text: str, key: str) -> str:
    for part in text.split(";"):
        k, _, v = part.strip().partition("=")
        if k == key:
            return v.strip()
    return ""


def read_sample(repo: Path, commit: str) -> list[dict[str, str]]:
    text = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{SAMPLE}"], check=True,
                          capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def convert(sample: list[dict[str, str]], commit: str) -> tuple[list[dict[str, str]], int]:
    """The rows to write and how many repeats were dropped."""
    out: list[dict[str, str]] = []
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for r in sample:
        if "gpt-oss" not in r["model_path"].lower() or r["mode"] != "agg":
            continue
        src = r["silicon_data_source"]
        inferencex = r["id"].startswith("20")
        conc = _field(src, "silicon_concurrency") or r["batch_size"]
        ttft, tpot = float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"])
        key = (r["system"], r["backend"], r["isl"], r["osl"], r["tp_size"], r["attention_dp_size"],
               r["moe_tp_size"], r["moe_ep_size"], conc, f"{ttft:.1f}", f"{tpot:.2f}")
        if key in seen:
            repeats += 1
            continue
        seen.add(key)
        system, backend = r["system"], r["backend"]
        kv = RECIPE_KV.get((system, backend), "") if inferencex else ""
        recipe = (RECIPES.format(system.split("_")[0] + ("_trt" if backend == "trtllm" else ""))
                  if inferencex else "aiconfigurator gap-analysis run (recipe not public)")
        notes = (f"mode=agg; tp={r['tp_size']} pp={r['pp_size']} "
                 f"attn_dp={r['attention_dp_size'] or 1} moe_tp={r['moe_tp_size']} "
                 f"moe_ep={r['moe_ep_size']} batch_size(per-rank)={r['batch_size']}; "
                 f"source labels: precision={r['precision']} gemm_quant={r['gemm_quant_mode']} "
                 f"moe_quant={r['moe_quant_mode']} (the checkpoint is MXFP4 experts, BF16 "
                 f"attention); kv_precision from {recipe}; provenance: {src}; statistic of "
                 f"TTFT/TPOT not stated in file (InferenceX rows: likely medians); no throughput "
                 f"column in source")
        out.append({
            "model": "gpt-oss-120b", "hf_model": r["model_path"], "gpu": GPUS[system],
            "backend": backend, "backend_version": r["backend_version"], "precision": "fp4",
            "weight_quant": "mxfp4", "isl": r["isl"], "osl": r["osl"], "concurrency": conc,
            "request_rate": "", "tp": r["tp_size"], "pp": r["pp_size"] or "1",
            "attention_dp": r["attention_dp_size"] or "1", "moe_tp": r["moe_tp_size"] or "1",
            "moe_ep": r["moe_ep_size"] or "1", "ttft_ms": f"{ttft:.3f}", "tpot_ms": f"{tpot:.4f}",
            "output_tokens_per_s_total": "", "statistic": "median" if inferencex else "mean",
            "kv_precision": kv,
            "source": f"github.com/ai-dynamo/aiconfigurator:{SAMPLE}@{commit[:12]} id={r['id']}",
            "notes": notes})
    out.sort(key=lambda d: (d["gpu"], d["backend"], int(d["isl"]), int(d["osl"]), int(d["tp"]),
                            int(d["moe_ep"]), int(d["concurrency"]), d["source"]))
    return out, repeats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=DEFAULT_REPO)
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    rows, repeats = convert(read_sample(a.repo, a.commit), a.commit)
    print(f"{len(rows)} gpt-oss aggregated rows ({repeats} repeats dropped)")
    if a.write:
        with OUT.open("w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
