"""Generate model-catalog entries from Hugging Face config.json files (a dev tool, not shipped).

    python tools/gen_model_catalog.py [CONFIG_DIR] > new-entries.yaml

One entry per base model (FP8/NVFP4/BF16 variants become aliases). Parameter counts are computed
from the architecture (never typed in): embeddings, attention (GQA/MHA, MLA, gated, linear /
Mamba mixers), dense FFNs, routed and shared experts, routers. Layers with a KV cache that grows
with the context (``kv_layers``) are counted apart from sliding-window, linear-attention and SSM
layers, whose state is bounded. What is approximated is written into each entry's source note.
Models already in facts/catalog/models.yaml are skipped (the catalog is append-only here).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT.parent.parent / "shared" / "data" / "model_configs"
SOURCE = ("github.com/ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/model_configs/"
          "{file}@095f58a51c4ca8e61b66ec108d86f223f8d559ce")
VARIANT = re.compile(r"-(FP8-Static-PerTensor|FP8|NVFP4|BF16|Instruct-FP8)$", re.I)
# Base-model ids for the names the shared data uses.
RENAME = {"Mixtral-8x22B-v0.1": "Mixtral-8x22B", "Mixtral-8x7B-v0.1": "Mixtral-8x7B",
          "Meta-Llama-3.1-8B": "Llama-3.1-8B", "Meta-Llama-3.1-70B": "Llama-3.1-70B",
          "Meta-Llama-3.1-405B": "Llama-3.1-405B", "Llama-3.1-70B-Instruct": "Llama-3.1-70B",
          "DeepSeek-R1": "DeepSeek-V3", "Llama-4-Scout-17B-16E-Instruct": "Llama-4-Scout",
          "Llama-4-Maverick-17B-128E-Instruct": "Llama-4-Maverick", "gemma-4-26B-A4B": "Gemma-4-26B-A4B",
          "Gemma-4-31B-IT": "Gemma-4-31B", "gpt-oss-120b": "gpt-oss-120b", "gpt-oss-20b": "gpt-oss-20b",
          "Llama-3_3-Nemotron-Super-49B-v1": "Llama-3.3-Nemotron-Super-49B",
          "Qwen3-Coder-480B-A35B-Instruct": "Qwen3-Coder-480B-A35B"}


def _cfg(path: Path) -> dict[str, Any]:
    c = json.loads(path.read_text(encoding="utf-8"))
    t = c.get("text_config") or c.get("language_config") or {}
    return {**c, **t}


def _g(c: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if c.get(k) is not None:
            return c[k]
    return default


def _layer_kinds(c: dict[str, Any], n: int) -> tuple[list[str], list[str]]:
    """Per layer: mixer kind (full | sliding | linear | mamba | none) and FFN kind
    (dense | moe | none)."""
    mixer = ["full"] * n
    ffn = ["dense"] * n
    pat = c.get("hybrid_override_pattern")
    blocks = c.get("layers_block_type")
    if pat or blocks:  # Nemotron-H: each block is one mixer or one FFN
        kinds = list(pat) if pat else [{"mamba": "M", "attention": "*", "moe": "E",
                                        "mlp": "-"}[b] for b in blocks]
        mixer = [{"M": "mamba", "*": "full"}.get(k, "none") for k in kinds]
        ffn = [{"E": "moe", "-": "dense"}.get(k, "none") for k in kinds]
        return mixer, ffn
    lt = c.get("layer_types")
    if lt:
        mixer = [{"full_attention": "full", "sliding_attention": "sliding",
                  "linear_attention": "linear"}.get(x, "full") for x in lt]
    hyb = c.get("hybrid_layer_pattern")  # MiMo-V2: 1 = sliding window
    if hyb:
        mixer = ["sliding" if x else "full" for x in hyb]
    lin = (c.get("linear_attn_config") or {}).get("kda_layers")  # Kimi linear (1-based)
    if lin:
        mixer = ["linear" if i + 1 in set(lin) else "full" for i in range(n)]
    e = _g(c, "n_routed_experts", "num_experts", "num_local_experts", default=0) or 0
    if e > 1:
        ffn = ["moe"] * n
        fk = c.get("first_k_dense_replace")
        freq = c.get("moe_layer_freq")
        if isinstance(freq, list):
            ffn = ["moe" if f else "dense" for f in freq][:n]
        elif fk:
            ffn = ["dense"] * fk + ["moe"] * (n - fk)
        step = c.get("interleave_moe_layer_step") or c.get("decoder_sparse_step") or 1
        if step > 1:
            ffn = ["moe" if (i + 1) % step == 0 else "dense" for i in range(n)]
        for i in c.get("mlp_only_layers") or []:
            ffn[i] = "dense"
    return mixer, ffn


def attention_params(c: dict[str, Any], kind: str, notes: set[str]) -> float:
    """Parameters of one layer's token mixer."""
    h = c["hidden_size"]
    heads = c.get("num_attention_heads") or 1
    d = c.get("head_dim") or h // heads
    kvh = c.get("num_key_value_heads") or heads
    if kind == "none":
        return 0.0
    if kind == "mamba":
        nh, hd = c.get("mamba_num_heads") or 0, c.get("mamba_head_dim") or 0
        di = nh * hd or 2 * h
        ns, ng = c.get("ssm_state_size") or 128, c.get("n_groups") or 1
        return h * (2 * di + 2 * ng * ns + nh) + di * h
    if kind == "linear":
        if c.get("linear_num_value_heads"):  # Qwen3.5 Gated DeltaNet
            nk, dk = c["linear_num_key_heads"], c["linear_key_head_dim"]
            nv, dv = c["linear_num_value_heads"], c["linear_value_head_dim"]
            return h * (2 * nk * dk + 2 * nv * dv + 2 * nv) + nv * dv * h
        la = c.get("linear_attn_config") or {}  # Kimi Delta Attention
        nh, hd = la.get("num_heads", heads), la.get("head_dim", 128)
        notes.add("KDA linear-attention layers counted as q, k, v, gate and output projections")
        return 5 * h * nh * hd
    if c.get("kv_lora_rank"):  # MLA
        ql = c.get("q_lora_rank")
        kvl = c["kv_lora_rank"]
        nope = c.get("qk_nope_head_dim", 128)
        rope = c.get("qk_rope_head_dim", 64)
        vd = c.get("v_head_dim", 128)
        q = (h * ql + ql * heads * (nope + rope)) if ql else h * heads * (nope + rope)
        p = q + h * (kvl + rope) + kvl * heads * (nope + vd) + heads * vd * h
        if c.get("index_n_heads"):  # DSA lightning indexer
            p += h * c["index_n_heads"] * c["index_head_dim"] + h * c["index_head_dim"]
        if c.get("mla_use_output_gate"):
            p += h * heads * vd
        return p
    if kind == "full" and c.get("global_head_dim"):  # Gemma 4 global layers
        d, kvh = c["global_head_dim"], c.get("num_global_key_value_heads") or kvh
    if kind == "sliding" and c.get("swa_num_key_value_heads"):  # MiMo-V2
        kvh, heads = c["swa_num_key_value_heads"], c.get("swa_num_attention_heads", heads)
    kv_mats = 1 if c.get("attention_k_eq_v") and kind == "full" else 2
    vd = c.get("v_head_dim") or d
    ql = c.get("q_lora_rank")
    q = (h * ql + ql * heads * d) if ql else h * heads * d
    if c.get("attn_output_gate"):
        q += h * heads * d
    o = heads * vd * h
    if c.get("o_lora_rank"):  # DeepSeek-V4 grouped low-rank output
        g, r = c.get("o_groups", 1), c["o_lora_rank"]
        o = heads * vd * r + g * r * h // g
        notes.add("DeepSeek-V4 compressed attention approximated as MQA with low-rank q/o")
    return q + kv_mats * h * kvh * (d if kv_mats == 1 else (d + vd) / 2) + o


def ffn_params(c: dict[str, Any], kind: str, notes: set[str]) -> tuple[float, float, float]:
    """(dense/shared params, all routed-expert params, active routed-expert params) of a layer."""
    h = c["hidden_size"]
    gated = 2 if c.get("mlp_hidden_act") == "relu2" else 3  # Nemotron-H: squared-ReLU MLPs
    if kind == "none":
        return 0.0, 0.0, 0.0
    if kind == "dense":
        inter = _g(c, "dense_intermediate_size", "intermediate_size_mlp", "intermediate_size",
                   default=4 * h)
        return gated * h * inter, 0.0, 0.0
    e = _g(c, "n_routed_experts", "num_experts", "num_local_experts")
    k = _g(c, "num_experts_per_tok", "num_experts_per_token", "top_k_experts")
    mi = _g(c, "moe_intermediate_size", "intermediate_size")
    latent = c.get("moe_latent_size") or c.get("routed_expert_hidden_size")
    width = latent or h
    expert = gated * width * mi
    shared = 0.0
    ns = _g(c, "n_shared_experts", "num_shared_experts", default=0) or 0
    if c.get("shared_expert_intermediate_size"):
        shared = 3 * h * c["shared_expert_intermediate_size"] + h
    elif c.get("moe_shared_expert_intermediate_size"):
        shared = gated * h * c["moe_shared_expert_intermediate_size"]
    elif ns:
        si = _g(c, "shared_intermediate_size", "share_expert_dim", default=mi)
        shared = ns * 3 * h * si
    if c.get("model_type", "").startswith("llama4"):
        shared = 3 * h * c["intermediate_size"]
    dense = shared + h * e  # router
    if latent:
        dense += 2 * h * latent
        notes.add(f"latent MoE: experts run at width {latent} with h x latent projections")
    if c.get("enable_moe_block"):  # Gemma 4: a dense MLP next to the experts in every layer
        dense += 3 * h * c["intermediate_size"]
    return dense, e * expert, k * expert


def compute(c: dict[str, Any]) -> dict[str, Any]:
    """Architecture fields and parameter counts of one config."""
    notes: set[str] = set()
    blocks = c.get("layers_block_type")
    n = c.get("num_hidden_layers") or (len(blocks) if blocks else
                                       len(c.get("hybrid_override_pattern") or ""))
    h = c["hidden_size"]
    vocab = c["vocab_size"]
    mixer, ffn = _layer_kinds(c, n)
    total = active = 0.0
    if c.get("block_configs"):  # Nemotron NAS: per-block attention/FFN
        heads = c["num_attention_heads"]
        d = h // heads
        mixer = []
        for b in c["block_configs"]:
            a, f = b["attention"], b["ffn"]
            if a.get("no_op"):
                mixer.append("none")
            elif a.get("replace_with_linear"):
                mixer.append("none")
                total += h * h
            else:
                mixer.append("full")
                kvh = heads // a["n_heads_in_group"]
                total += 2 * h * heads * d + 2 * h * kvh * d
            if not f.get("no_op"):
                if f.get("replace_with_linear"):
                    total += h * h
                else:
                    inter = int(2 * f["ffn_mult"] * h / 3)
                    inter = (inter + 255) // 256 * 256
                    total += 3 * h * inter
        active = total
        ffn = ["dense"] * n
        notes.add("NAS blocks: FFN width 2/3 x ffn_mult x hidden rounded up to 256")
    else:
        for mk, fk in zip(mixer, ffn, strict=True):
            a = attention_params(c, mk, notes)
            dense, experts, act = ffn_params(c, fk, notes)
            total += a + dense + experts
            active += a + dense + act
    emb = vocab * h
    head = 0 if c.get("tie_word_embeddings") else vocab * h
    total += emb + head
    active += emb + head
    e = _g(c, "n_routed_experts", "num_experts", "num_local_experts", default=0) or 0
    k = _g(c, "num_experts_per_tok", "num_experts_per_token", "top_k_experts", default=0) or 0
    heads = c.get("num_attention_heads")
    kv_layers = sum(1 for m in mixer if m == "full")
    bounded = sorted({m for m in mixer if m in ("sliding", "linear", "mamba")})
    if bounded:
        notes.add(f"{n - kv_layers} of {n} layers keep a bounded state ({', '.join(bounded)}):"
                  f" only the {kv_layers} full-attention layers are counted in KV per token and"
                  " attention FLOPs that grow with the context (sliding-window layers hold"
                  " min(context, window) tokens: sliding_layers, sliding_kv_elements; linear/SSM"
                  " state per sequence is not modelled)")
    if c.get("compress_ratios"):
        notes.add("DeepSeek-V4 compressed KV (compress_ratios) not modelled: KV per token is an"
                  " upper bound")
    mla = bool(c.get("kv_lora_rank"))
    full_d = c.get("global_head_dim") or c.get("head_dim") or (h // heads if heads else None)
    full_kvh = c.get("num_global_key_value_heads") or c.get("num_key_value_heads") or heads
    if c.get("block_configs"):
        groups = [b["attention"].get("n_heads_in_group") for b in c["block_configs"]
                  if not b["attention"].get("no_op") and b["attention"].get("n_heads_in_group")]
        full_kvh = heads // groups[0] if groups else heads
    if mla:
        atype = "MLA"
    else:
        atype = "MHA" if full_kvh == heads else ("MQA" if full_kvh == 1 else "GQA")
    out = {
        "total_params_b": round(total / 1e9, 3),
        "active_params_b": round(active / 1e9, 3) if e > 1 else None,
        "num_layers": n, "hidden_size": h, "num_attention_heads": heads,
        "num_kv_heads": full_kvh, "head_dim": full_d,
        "intermediate_size": (_g(c, "moe_intermediate_size", "intermediate_size") if e > 1
                              else c.get("intermediate_size")),
        "vocab_size": vocab,
        "max_context": c.get("max_position_embeddings"),
        "attention_type": atype,
        "kv_lora_rank": c.get("kv_lora_rank"),
        "qk_rope_head_dim": c.get("qk_rope_head_dim") if mla else None,
        "num_experts": e or None, "experts_per_token": k or None, "moe": e > 1,
    }
    if mla:
        out.update({k2: c[k2] for k2 in ("q_lora_rank", "qk_nope_head_dim", "v_head_dim")
                    if c.get(k2)})
        # DeepSeek sparse attention: the lightning indexer (engine/domain/perf/architecture.dsa)
        out.update({k2: c[k2] for k2 in ("index_n_heads", "index_head_dim", "index_topk")
                    if c.get(k2)})
    if kv_layers != n:
        out["kv_layers"] = kv_layers
    if c.get("sliding_window") and "sliding" in mixer:
        out["sliding_window"] = c["sliding_window"]
        # the sliding layers' own KV shape (engine/domain/perf/architecture.sliding): MiMo-V2
        # swa_* heads; Gemma 4 sliding layers use num_key_value_heads x head_dim (its full ones
        # the global_* values)
        s_kvh = c.get("swa_num_key_value_heads") or c.get("num_key_value_heads") or heads
        s_dk = c.get("swa_head_dim") or c.get("head_dim") or (h // heads if heads else 0)
        s_dv = c.get("swa_v_head_dim") or c.get("v_head_dim") or s_dk
        out["sliding_layers"] = sum(1 for m in mixer if m == "sliding")
        out["sliding_kv_elements"] = s_kvh * (s_dk + s_dv)
        if s_kvh != full_kvh:
            out["sliding_kv_heads"] = s_kvh
    if c.get("sinks") or c.get("model_type") == "gpt_oss":  # gpt-oss: a sink logit per head
        out["attention_sinks"] = True
    qc = c.get("quantization_config") or {}
    if qc.get("quant_method") == "mxfp4":  # experts only when attention is left unconverted
        skip = " ".join(qc.get("modules_to_not_convert") or [])
        out["quantization"] = {"format": "mxfp4",
                               "modules": "experts" if "self_attn" in skip else "all"}
    if c.get("tie_word_embeddings"):
        out["tie_word_embeddings"] = True
    if e > 1:
        out["params_active_b"] = out["active_params_b"]
    return {"fields": out, "notes": sorted(notes)}


def base_name(file: str) -> tuple[str, str]:
    org, name = file[:-len("_config.json")].split("--", 1)
    base = VARIANT.sub("", name)
    return RENAME.get(base, base), f"{org}/{name}"


FAMILIES = ("deepseek", "kimi", "glm", "qwen", "minimax", "gpt-oss", "llama", "mixtral", "gemma",
            "nemotron", "step", "mimo")


def entries(config_dir: Path, existing: set[str]) -> list[dict[str, Any]]:
    groups: dict[str, list[Path]] = {}
    for f in sorted(config_dir.glob("*_config.json")):
        groups.setdefault(base_name(f.name)[0], []).append(f)
    out = []
    for base, files in sorted(groups.items()):
        if base.lower() in existing:
            continue
        # the unquantized config when present (quantized ones describe the same architecture)
        files.sort(key=lambda f: (bool(VARIANT.search(f.name[:-len("_config.json")])), f.name))
        main = files[0]
        c = _cfg(main)
        r = compute(c)
        repos = [base_name(f.name)[1] for f in files]
        aliases = sorted({*repos, *(r2.split("/", 1)[1] for r2 in repos)} - {base})
        fam = next((f for f in FAMILIES if f in base.lower()), base.split("-")[0].lower())
        vision = "vision_config" in json.loads(main.read_text(encoding="utf-8"))
        note = ("Computed from config.json by tools/gen_model_catalog.py (attention, FFN, experts,"
                " routers, embeddings; norms and biases left out, < 0.1 %)"
                + (". Language model only: the vision tower is not counted" if vision else "")
                + "".join(f". {x}" for x in r["notes"]) + ".")
        entry = {"id": base, "aliases": aliases, "hf_repo_id": repos[0], **r["fields"],
                 "family": fam, "task": "llm", "modality": "text",
                 "sources": [{"ref": SOURCE.format(file=main.name), "status": "derived",
                              "note": note}]}
        out.append(entry)
    return out


def main(argv: list[str]) -> None:
    config_dir = Path(argv[1]) if len(argv) > 1 else DEFAULT_DIR
    cat = yaml.safe_load((ROOT / "facts" / "catalog" / "models.yaml").read_text(encoding="utf-8"))
    existing = {e["id"].lower() for e in cat}
    for e in cat:
        existing |= {a.lower() for a in e.get("aliases") or []}
    text = yaml.safe_dump(entries(config_dir, existing), sort_keys=False, allow_unicode=True,
                          width=110)
    sys.stdout.write("\n" + re.sub(r"^- id:", "\n- id:", text, flags=re.M).lstrip("\n"))


if __name__ == "__main__":
    main(sys.argv)
