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
    cols = {"model": "MiniMax-M2.5", "gpu": "B200", "tp": "2", "attention_dp": "2", "moe_tp": "1",
            "moe_ep": "4", "concurrency": "512"}
    row = _read(**cols, source="id=2026_04_06_minimax_m2_5_b200_sxm_vllm_fp8_agg_1024x1024_c512_tp2_ep2_1",
                notes="mode=agg; gpu_count derived = sum(workers*tp*pp*attn_dp); x=1")
    assert row.layout == Layout(1, 1, 2, 2) and row.layout.n_gpus == 2
    assert row.concurrency == 512
    own = _read(**cols)  # a file without that derivation: tp 2 x attention DP 2 = 4 GPUs
    assert own.layout.n_gpus == 4 and own.concurrency == 1024


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
    assert checked > 1100


def test_speculative_runs_are_predicted_with_their_draft_length_or_skipped_with_the_reason():
    ix = {"source": "id=2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x8192_c4_tp8_ep1_68"}
    (mtp,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200", "backend": "trtllm",
                             "backend_version": "1.2.0rc6.post3", "tp": "8", "concurrency": "4",
                             **ix}])
    (own,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200", "backend": "trtllm",
                             "backend_version": "1.2.0rc6.post3", "tp": "8", "concurrency": "4"}])
    assert not own.skipped  # the evidence is InferenceX's configuration, not the version
    (plain,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200", "backend": "trtllm",
                               "backend_version": "1.2.0rc6.post2", "tp": "8",
                               "concurrency": "4"}])
    assert not mtp.skipped and mtp.speculative_tokens == 3  # MTP=3 without attention DP (the recipe)
    assert not plain.skipped and plain.speculative_tokens == 0
    (mtp_dp,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200", "backend": "trtllm",
                                "backend_version": "1.2.0rc6.post3", "tp": "1", "attention_dp": "8",
                                "moe_ep": "8", "concurrency": "64", **ix}])
    assert mtp_dp.speculative_tokens == 1  # MTP=1 with attention DP
    qwen = {**BASE, "model": "Qwen3.5-397B-A17B", "gpu": "B200", "backend": "sglang",
            "concurrency": "4", "moe_ep": "1", **ix}
    (mtp_layout,) = read_measured([{**qwen, "tp": "4"}])
    (mtp_image,) = read_measured([{**qwen, "gpu": "B300", "tp": "4",
                                   "notes": "provenance: db-dump/x; image=lmsysorg/sglang:v0.5.9-cu130; x=1"}])
    (plain_image,) = read_measured([{**qwen, "gpu": "B300", "tp": "4",
                                     "notes": "provenance: db-dump/x; image=lmsysorg/sglang:v0.5.9-cu130-amd64"}])
    (plain_layout,) = read_measured([{**qwen, "tp": "8"}])
    assert "qwen3.5-fp8-b200-sglang-mtp" in (mtp_layout.skipped or "")
    assert "qwen3.5-fp8-b200-sglang-mtp" in (mtp_image.skipped or "")
    assert not plain_image.skipped and not plain_layout.skipped


def test_inferencex_rows_read_their_mean_lengths():
    """InferenceX draws lengths uniformly from [floor(0.8 L), L]: the mean of 1024 is 922."""
    dated = _read(source="id=2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x8192_c4_tp8_ep1_68",
                  isl="1024", osl="8192", concurrency="4")
    dump = _read(notes="mode=agg; provenance: db-dump/2026-04-27; config_id=733", isl="8192",
                 osl="1024", concurrency="4")
    other = _read(source="id=qwen_qwen3_32b_h100_sxm_vllm_agg_1024x1024_c8_tp2_epnone_1",
                  isl="1024", osl="1024", concurrency="8")
    assert (dated.isl, dated.osl) == (922, 7372)
    assert (dump.isl, dump.osl) == (7372, 922)
    assert (other.isl, other.osl) == (1024, 1024)


def test_fit_penalises_a_newer_gpu_slower_than_an_older_one():
    """tools.perf.fit's ordering residuals: zero when B200's rates are at least H200's, the log
    shortfall of each rate (bandwidth, 16-bit, 8-bit GEMM) when they are not."""
    import math

    from servewise.engine.domain.catalog import load_catalog
    from tools.perf.fit import _order_shortfall

    cat = load_catalog()
    b200, h200 = cat.gpu("B200"), cat.gpu("H200 SXM")
    ok = {"blackwell-hbm": {"eta_bw": 0.8, "eta_flops": 0.5, "eta_lowp": 0.8},
          "hopper-hbm": {"eta_bw": 0.9, "eta_flops": 0.5, "eta_lowp": 0.8}}
    assert _order_shortfall(ok, "blackwell-hbm", b200, "hopper-hbm", h200) == [0.0, 0.0, 0.0]
    slow = {**ok, "blackwell-hbm": {"eta_bw": 0.5, "eta_flops": 0.2, "eta_lowp": 0.5}}
    bw, t16, t8 = _order_shortfall(slow, "blackwell-hbm", b200, "hopper-hbm", h200)
    assert math.isclose(bw, math.log(4800 * 0.9 / (8000 * 0.5)))
    assert math.isclose(t16, math.log(989.4 * 0.5 / (2250 * 0.2)))
    assert math.isclose(t8, math.log(1978.9 * 0.5 * 0.8 / (4500 * 0.2 * 0.5)))
    faster_bw = {**slow, "blackwell-hbm": {**slow["blackwell-hbm"], "eta_bw": 0.6}}
    assert _order_shortfall(faster_bw, "blackwell-hbm", b200, "hopper-hbm", h200)[0] == 0.0


def test_gap_analysis_rows_are_inferencex_runs():
    row = _read(notes="mode=agg; provenance: source_file=kimi-k2.5-gap-analysis.csv; x=1",
                isl="1024", osl="8192", concurrency="4")
    assert (row.isl, row.osl) == (922, 7372)


def test_a_non_numeric_count_is_named_in_the_skip():
    (row,) = read_measured([{**BASE, "concurrency": "ten"}])
    assert row.skipped == "not a number: concurrency 'ten'"
    (row,) = read_measured([{**BASE, "concurrency": ""}])
    assert row.skipped == "isl, osl or concurrency/request_rate missing"


def _sglang(**cols: str):
    return _read(**{"model": "DeepSeek-R1", "gpu": "B200", "backend": "sglang",
                    "precision": "fp4", "tp": "8", "moe_ep": "8",
                    "source": "id=2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_x", **cols})


def test_inferencex_sglang_recipes_set_the_scheduler_receive_interval():
    """dsr1_fp*_b200.sh: 30 decode steps between receives from CONC 16, else 10; FP8 TP 4: 10."""
    assert [_sglang(concurrency=c).recv_interval for c in ("8", "16", "64")] == [10, 30, 30]
    assert _sglang(concurrency="64", precision="fp8", tp="4", moe_ep="1").recv_interval == 10
    # a tp x ep column (16 for tp 4 / ep 4) is matched as the TP it is read as
    tp4 = _sglang(concurrency="64", precision="fp8", tp="16", moe_tp="4", moe_ep="4")
    assert tp4.layout.tp == 4 and tp4.recv_interval == 10
    assert _sglang(concurrency="64", gpu="H200 SXM", precision="fp8").recv_interval == 1
    assert _sglang(concurrency="64", backend="vllm").recv_interval == 1
    assert _sglang(concurrency="64", source="a user's own run").recv_interval == 1  # not InferenceX


def test_the_receive_interval_follows_the_recipe_of_the_run_date():
    """qwen3.5_fp8_b200.sh set it from 2026-03-17 to 2026-04-14; an undated row that repeats a
    dated run's numbers takes that run's date."""
    q = {**BASE, "model": "Qwen3.5-397B-A17B", "gpu": "B200", "backend": "sglang", "precision": "fp8",
         "tp": "8", "moe_ep": "1", "concurrency": "32", "source": "x",
         "ttft_ms": "661.9", "tpot_ms": "18.855"}
    before, during, twin = read_measured([
        {**q, "notes": "provenance: db-dump; measured=2026-03-03T00:00:00Z"},
        {**q, "ttft_ms": "700", "notes": "provenance: db-dump; measured=2026-03-24T00:52:21Z"},
        {**q, "ttft_ms": "700.2", "tpot_ms": "18.86", "notes": "provenance: db-dump"}])
    assert (before.recv_interval, during.recv_interval, twin.recv_interval) == (1, 30, 30)


def test_a_stated_receive_interval_is_used_and_a_bad_one_named():
    assert _read(backend="sglang", concurrency="8", scheduler_recv_interval="20").recv_interval == 20
    assert _sglang(concurrency="8", scheduler_recv_interval="1").recv_interval == 1
    (bad,) = read_measured([{**BASE, "concurrency": "8", "scheduler_recv_interval": "often"}])
    assert bad.skipped and "scheduler_recv_interval 'often'" in bad.skipped


def test_request_lengths_fixed_unless_random_or_inferencex():
    """InferenceX draws each length from [0.8 L, L] (its rows are read as random lengths); other
    rows are fixed unless their request_lengths column says random; a bad value is named."""
    assert _read(concurrency="8").lengths == "fixed"
    assert _sglang(concurrency="8").lengths == "random"
    assert _read(concurrency="8", request_lengths="Random").lengths == "random"
    (bad,) = read_measured([{**BASE, "concurrency": "8", "request_lengths": "mixed"}])
    assert bad.skipped and "request_lengths 'mixed'" in bad.skipped


def _dsr1(**cols: str):
    (row,) = read_measured([{**BASE, "model": "DeepSeek-R1", "gpu": "B200",
                             "source": "id=2026_04_06_deepseek_r1_b200_sxm_x", **cols}])
    return row


def test_inferencex_gb200_runs_are_disaggregated_and_skipped():
    """runners/launch_gb200-nv.sh ran Dynamo prefill/decode deployments; TP = all their GPUs."""
    row = _dsr1(gpu="GB200", backend="trtllm", precision="fp4", tp="36", moe_tp="36",
                concurrency="32")
    assert row.skipped and row.skipped.startswith("disaggregated serving")
    own = _dsr1(gpu="GB200", backend="trtllm", precision="fp4", tp="2", concurrency="8",
                source="id=qwen3_32b_gb200_trtllm_agg_c8", model="Qwen3-32B")
    assert not own.skipped  # aiconfigurator's own aggregated GB200 runs are kept


def test_first_sglang_recipe_ran_ep_over_tp_and_its_ttft_is_left_out():
    """dsr1_fp4_b200_docker.sh passed --enable-ep-moe (ep_size = tp_size); no client warm-up."""
    row = _dsr1(backend="sglang", precision="fp4", tp="4", moe_tp="4", moe_ep="1",
                concurrency="32", isl="8192", osl="1024", backend_version="")
    assert (row.layout.tp, row.layout.ep, row.layout.attention_dp) == (4, 4, 1)
    assert row.ttft_ms is None and row.tpot_ms == 10 and "no warm-up" in (row.unused or "")
    later = _dsr1(backend="sglang", precision="fp4", tp="4", moe_tp="4", moe_ep="1",
                  concurrency="32", backend_version="0.5.9")
    assert later.layout.ep == 1 and later.ttft_ms == 100 and later.unused is None
    own = _dsr1(backend="sglang", precision="fp4", tp="4", moe_tp="4", moe_ep="1",
                concurrency="32", source="a user's own run")
    assert own.layout.ep == 1 and own.ttft_ms == 100


def test_first_trtllm_recipes_chose_ep_and_attention_dp_by_concurrency():
    """dsr1_fp4_b200_trt_slurm.sh / dsr1_fp8_h200_trt_slurm.sh (Sep - Nov 2025)."""
    def lay(**cols: str) -> tuple[int, int, int]:
        r = _dsr1(backend="trtllm", moe_ep="1", backend_version="", **cols)
        assert r.ttft_ms == 100 and r.unused is None  # TensorRT-LLM rows keep their TTFT
        return r.layout.tp, r.layout.ep, r.layout.attention_dp
    fp4 = {"precision": "fp4", "tp": "4", "moe_tp": "4"}
    assert lay(**fp4, concurrency="16") == (4, 1, 1)
    assert lay(**fp4, concurrency="64") == (4, 4, 1)
    assert lay(**fp4, concurrency="256") == (1, 4, 4)
    assert lay(**fp4, concurrency="64", isl="8192") == (1, 4, 4)
    h200 = {"gpu": "H200 SXM", "precision": "fp8", "tp": "8", "moe_tp": "8"}
    assert lay(**h200, concurrency="4") == (8, 8, 1)
    assert lay(**h200, concurrency="64", isl="8192") == (1, 8, 8)
    assert lay(**h200, concurrency="64") == (8, 8, 1)


def test_shipped_gb200_inferencex_rows_are_the_disaggregated_ones():
    """The 55 GB200 rows of InferenceX (Nov 2025, 'TP' up to 72) are skipped as disaggregated;
    aiconfigurator's own aggregated GB200 runs are read."""
    with gzip.open(DATA_DIR / "measured-extra.csv.gz", "rt", encoding="utf-8") as fh:
        raw = list(csv.DictReader(fh))
    rows = read_measured(raw)
    gb200 = [(r, row) for r, row in zip(raw, rows, strict=True) if r["gpu"] == "GB200"]
    disagg = [r for r, row in gb200 if (row.skipped or "").startswith("disaggregated")]
    assert len(disagg) == 55
    assert all(re.search(r"measured=2025-11", r["notes"]) for r in disagg)
    others = [row for r, row in gb200 if not re.search(r"measured=2025-11", r["notes"])]
    assert others and not any((row.skipped or "").startswith("disaggregated") for row in others)


def test_a_layout_column_that_is_not_a_number_is_named_in_the_skip():
    (row,) = read_measured([{**BASE, "concurrency": "8", "tp": "x"}])
    assert row.skipped == "not a number: tp 'x'"
    assert not _read(concurrency="8", moe_ep="0", moe_tp="").skipped  # empty or 0: the default
