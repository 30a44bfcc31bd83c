"""How measured rows are read: requests in flight and parallel layout (engine/domain/perf/data.py)."""

from __future__ import annotations

import csv
import gzip
import re

from servewise.engine.domain.perf.data import DATA_DIR, read_measured
from servewise.engine.domain.perf.memory import Layout

BASE = {"model": "Qwen3-32B", "gpu": "H100 SXM", "backend": "vllm", "precision": "fp8",
        "isl": "1024", "osl": "1024", "tp": "1", "pp": "1", "attention_dp": "1", "moe_tp": "1",
        "moe_ep": "1", "ttft_ms": "100", "tpot_ms": "10"}


def _read(**cols: str):
    (row,) = read_measured([{**BASE, **cols}])
    assert not row.skipped, row.skipped
    return row


def test_per_rank_concurrency_without_an_id():
    # measured.csv's convention where no id states the total: concurrency per attention-DP rank
    assert _read(concurrency="32", attention_dp="4", moe_ep="4",
                 model="Qwen3-235B-A22B").concurrency == 128


def test_the_ids_count_is_the_total_in_flight():
    per_rank = _read(concurrency="32", attention_dp="8", moe_ep="8", model="Qwen3-235B-A22B",
                     source="silicon_sample.csv id=x_agg_1000x100_c256_tp8_ep8_1")
    total = _read(concurrency="512", attention_dp="2", moe_ep="2", model="Qwen3-235B-A22B",
                  source="aiconfigurator id=y_agg_1024x1024_c512_cfg733")
    assert (per_rank.concurrency, total.concurrency) == (256, 512)


def test_a_run_over_several_workers_counts_one_workers_requests():
    row = _read(concurrency="448", tp="2", source="id=q_agg_15000x500_c448_tp2_0_epnone_2",
                notes="mode=agg; tp=2 pp=1 attn_dp=1 batch_size(per-rank)=14; x=1")
    assert row.concurrency == 14 and row.layout == Layout(2, 1, 1, 1)
    alone = _read(concurrency="64", source="id=q_agg_1024x1024_c64_cfg1",
                  notes="batch_size(per-rank)=64")
    assert alone.concurrency == 64


def test_vllm_dp_attention_with_ep_written_n_n_1_nn_is_n_gpus():
    row = _read(model="MiniMax-M2.5", gpu="B200", tp="4", attention_dp="4", moe_tp="1",
                moe_ep="16", concurrency="512",
                source="id=2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c512_tp4_ep4_1")
    assert row.layout == Layout(1, 1, 4, 4) and row.layout.n_gpus == 4
    assert row.concurrency == 512


def test_shipped_extra_rows_read_the_stated_concurrency():
    """Every measured-extra row within one worker reads the count its notes state."""
    with gzip.open(DATA_DIR / "measured-extra.csv.gz", "rt", encoding="utf-8") as fh:
        raw = list(csv.DictReader(fh))
    rows = read_measured(raw)
    checked = 0
    for r, row in zip(raw, rows, strict=True):
        stated = re.search(r"silicon_concurrency=(\d+)", r["notes"])
        per_rank = re.search(r"batch_size\(per-rank\)=(\d+)", r["notes"])
        if row.skipped or not stated or not per_rank:
            continue
        one_worker = int(per_rank.group(1)) * int(r["attention_dp"] or 1)
        assert row.concurrency == min(int(stated.group(1)), one_worker), r["source"]
        checked += 1
    assert checked > 1200


def test_speculative_decoding_runs_are_skipped_with_the_reason():
    (mtp,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200", "backend": "trtllm",
                             "backend_version": "1.2.0rc6.post3", "tp": "8", "concurrency": "4"}])
    (plain,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200", "backend": "trtllm",
                               "backend_version": "1.2.0rc6.post2", "tp": "8",
                               "concurrency": "4"}])
    assert mtp.skipped and "speculative decoding" in mtp.skipped
    assert not plain.skipped
