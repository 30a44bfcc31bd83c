"""Recipes of measured disaggregated runs from InferenceX's config history
(engine/domain/perf/disagg_recipes.py over facts/data/inferencex-disagg-recipes.csv)."""

from __future__ import annotations

import csv
import re

from servewise.engine.domain.perf.data import DATA_DIR
from servewise.engine.domain.perf.disagg_recipes import (
    RECIPES_FILE,
    Worker,
    load_entries,
    notes_workers,
    recipe_for,
)

COLUMNS = ["key", "image", "model_prefix", "precision", "runner", "framework", "isl", "osl", "concurrency",
           "spec_decoding", "draft_tokens", "prefill_workers", "prefill_tp", "prefill_ep", "prefill_dp_attn",
           "decode_workers", "decode_tp", "decode_ep", "decode_dp_attn", "config_file", "first_commit",
           "first_date", "last_commit", "last_date"]

_SOURCE = "github.com/ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/systems/silicon_sample.csv@095f58a51c4c"
_TAIL = ("statistic of TTFT/TPOT not stated in file (AIC compares vs its predictions; InferenceMAX-derived "
         "'db-dump' rows are likely medians/means from InferenceMAX DB); no throughput column in source")

# Two rows of /work/shared/data/measured-disagg.csv: the same run (same TTFT/TPOT), once from the
# InferenceMAX DB dump (workers as run) and once from a source file (workers=1, split guessed).
DB_DUMP = {
    "model": "DeepSeek-R1", "hf_model": "deepseek-ai/DeepSeek-R1", "gpu": "GB300", "backend": "trtllm",
    "backend_version": "0.8.1.post2", "precision": "fp8", "weight_quant": "fp8", "isl": "1024", "osl": "8192",
    "concurrency": "36", "request_rate": "", "tp": "8", "pp": "1", "attention_dp": "1", "moe_tp": "1",
    "moe_ep": "8", "ttft_ms": "10433.12", "tpot_ms": "11.263", "output_tokens_per_s_total": "",
    "statistic": "median", "source": f"{_SOURCE} id=dsr1_gb300_trtllm_fp8_disagg_1024x8192_c36_cfg392",
    "notes": "id prefix dsr1_ but source model_path=deepseek-ai/DeepSeek-V3; mode=disagg; prefill: workers=1 "
             "tp=1 pp=1 attn_dp=4 moe_tp=1 moe_ep=4 bs=1; decode: workers=4 tp=8 pp=1 attn_dp=1 moe_tp=1 "
             "moe_ep=8 bs=9 (tp/pp/ep columns = decode worker); gemm_quant=fp8 moe_quant=fp8; gpu_count "
             "derived = sum(workers*tp*pp*attn_dp); provenance: db-dump/2026-04-27; config_id=392; "
             "silicon_concurrency=36; measured=2026-02-07T00:00:00.000Z; workflow_run_id=265; "
             f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2; {_TAIL}",
}
SOURCE_FILE = {
    **DB_DUMP, "moe_tp": "2", "moe_ep": "4",
    "source": f"{_SOURCE} id=2026_03_25_deepseek_r1_gb300_trtllm_fp8_disagg_1024x8192_c36_tp4_0_ep4_0_951",
    "notes": "mode=disagg; prefill: workers=1 tp=4 pp=1 attn_dp=1 moe_tp=1 moe_ep=4 bs=; decode: workers=1 tp=8 "
             "pp=1 attn_dp=1 moe_tp=2 moe_ep=4 bs= (tp/pp/ep columns = decode worker); gemm_quant=fp8 "
             "moe_quant=fp8; gpu_count derived = sum(workers*tp*pp*attn_dp); provenance: "
             "source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency=36; "
             "measured=2026-02-07T19:53:37Z; wip=False; "
             f"image=nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2; {_TAIL}",
}


def _rows() -> list[dict[str, str]]:
    with RECIPES_FILE.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_recipes_file_has_the_documented_columns_and_is_sorted():
    assert RECIPES_FILE == DATA_DIR / "inferencex-disagg-recipes.csv"
    with RECIPES_FILE.open(encoding="utf-8", newline="") as fh:
        assert next(csv.reader(fh)) == COLUMNS
    rows = _rows()
    assert len(rows) > 1000

    def order(r: dict[str, str]) -> tuple:
        num = {"isl", "osl", "concurrency", "prefill_workers", "prefill_tp", "prefill_ep", "decode_workers",
               "decode_tp", "decode_ep"}
        rest = [c for c in COLUMNS[1:] if c not in ("isl", "osl", "concurrency") and c not in COLUMNS[-3:]]
        head = (r["key"], int(r["isl"]), int(r["osl"]), int(r["concurrency"]))
        draft = int(r["draft_tokens"]) if r["draft_tokens"] else -1
        return head + tuple(draft if c == "draft_tokens" else int(r[c]) if c in num else r[c] for c in rest)

    assert [order(r) for r in rows] == sorted(order(r) for r in rows)
    section = (DATA_DIR / "README.md").read_text(encoding="utf-8").split("## inferencex-disagg-recipes.csv")[1]
    for column in COLUMNS:
        pool, _, field = column.partition("_")
        assert f"`{column}`" in section or (
            pool in ("prefill", "decode") and "`prefill_*`, `decode_*`" in section and f"`{field}`" in section), column


def test_the_recipes_file_cells_are_well_formed():
    for r in _rows():
        assert re.fullmatch(r"[0-9a-f]{12}", r["first_commit"]) and re.fullmatch(r"[0-9a-f]{12}", r["last_commit"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", r["first_date"]) and r["first_date"] <= r["last_date"]
        assert r["prefill_dp_attn"] in ("true", "false") and r["decode_dp_attn"] in ("true", "false")
        assert r["draft_tokens"] == "" or (r["spec_decoding"] != "none" and int(r["draft_tokens"]) > 0)
        assert all(int(r[c]) > 0 for c in ("isl", "osl", "concurrency", "prefill_workers", "decode_tp"))


def test_a_db_dump_row_gets_the_workers_and_layout_its_notes_state():
    recipe, why = recipe_for(DB_DUMP)
    assert recipe is not None, why
    assert why.startswith("matched dsr1-fp8-gb300-dynamo-trt@")
    assert recipe.key == "dsr1-fp8-gb300-dynamo-trt" and re.fullmatch(r"[0-9a-f]{12}", recipe.commit)
    # 1 context worker DEP4 (attention DP 4, EP 4), 4 generation workers TEP8 (attention TP 8, EP 8)
    assert recipe.prefill == Worker(workers=1, tp=1, attention_dp=4, ep=4)
    assert recipe.decode == Worker(workers=4, tp=8, attention_dp=1, ep=8)
    assert notes_workers(DB_DUMP) == (recipe.prefill, recipe.decode)
    assert (recipe.prefill.gpus, recipe.decode.gpus) == (4, 8)
    assert recipe.draft_tokens is None


def test_its_source_file_twin_gets_the_same_recipe_despite_its_notes():
    twin, why = recipe_for(SOURCE_FILE)
    recipe, _ = recipe_for(DB_DUMP)
    assert twin is not None, why
    assert (twin.prefill, twin.decode, twin.draft_tokens) == (recipe.prefill, recipe.decode, recipe.draft_tokens)
    stated = notes_workers(SOURCE_FILE)
    assert stated is not None and stated[1].workers == 1  # what the source file says, not how it ran


def test_a_concurrency_no_entry_has_gives_none_with_the_reason():
    row = {**DB_DUMP, "concurrency": "37",
           "notes": DB_DUMP["notes"].replace("silicon_concurrency=36", "silicon_concurrency=37")}
    recipe, why = recipe_for(row)
    assert recipe is None
    assert why.startswith("no entry at concurrency 37") and "1024/8192" in why


def test_other_mismatches_give_none_with_their_reason():
    assert recipe_for({**DB_DUMP, "model": "Llama-3.1-8B", "hf_model": "meta-llama/Llama-3.1-8B"}) == (
        None, "no entry for Llama-3.1-8B fp8 GB300 trtllm")
    stale = {**DB_DUMP, "notes": DB_DUMP["notes"].replace("measured=2026-02-07", "measured=2025-06-01")}
    recipe, why = recipe_for(stale)
    assert recipe is None and why.startswith("no entry active on 2025-06-01")
    other_image = {**DB_DUMP, "notes": DB_DUMP["notes"].replace("runtime:0.8.1.post2", "runtime:9.9")}
    recipe, why = recipe_for(other_image)
    assert recipe is None and why.startswith("no entry with image nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:9.9")


def test_the_entries_are_loaded_once():
    assert load_entries() is load_entries()
