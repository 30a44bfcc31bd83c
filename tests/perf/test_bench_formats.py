"""Reading benchmark result files into measured-data rows (engine/domain/perf/bench_formats.py).

The fixtures in tests/fixtures/bench/ follow the schemas of the tools' source code (see the README
there): Llama-3.1-8B-Instruct on one H100, 1024 tokens in, 128 out, mostly at 16 requests in flight.
"""

from __future__ import annotations

import copy
import csv
import gzip
import json
import pickle
from pathlib import Path

import pytest

from servewise.engine.domain.perf.bench_formats import (
    COLUMNS,
    FORMATS,
    REQUIRED_FIELDS,
    ResultsFormatError,
    detect_format,
    missing_fields,
    read_results,
)
from servewise.engine.domain.perf.data import DATA_DIR

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "bench"

VLLM = "vllm-infqps-concurrency16-Llama-3.1-8B-Instruct-20250919-101530.json"
VLLM_APPEND = "llama8b-h100-rates.json"
SGLANG = "sglang_0919_llama8b.jsonl"
GENAI = "profile_export_genai_perf.json"
GENAI_OLD = "triton_trtllm_rate8_genai_perf.json"
AIPERF = "profile_export_aiperf.json"
TRTLLM = "trtllm-bench-llama8b-bf16-h100.json"
TRTLLM_FP8 = "trtllm-bench-llama8b-fp8-throughput.json"
MEASURED = "measured-llama8b.csv"

FIXTURE_FORMATS = {
    VLLM: "vllm-bench",
    VLLM_APPEND: "vllm-bench",
    SGLANG: "sglang-bench",
    GENAI: "genai-perf",
    GENAI_OLD: "genai-perf",
    AIPERF: "aiperf",
    TRTLLM: "trtllm-bench",
    TRTLLM_FP8: "trtllm-bench",
    MEASURED: "measured-csv",
}

HF = "meta-llama/Llama-3.1-8B-Instruct"


def _only(name: str) -> dict[str, str]:
    (rec,) = read_results(FIXTURES / name)
    return rec


def _sub(rec: dict[str, str], **expected: str) -> None:
    got = {k: rec[k] for k in expected}
    assert got == expected


def _write(tmp_path: Path, name: str, obj) -> Path:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return p


def _load(name: str):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def _error(path: Path, **kw) -> str:
    with pytest.raises(ResultsFormatError) as info:
        read_results(path, **kw)
    msg = str(info.value)
    assert msg.startswith(f"{path}: "), msg
    return msg


# ------------------------------------------------------------------------------------------
# The layout
# ------------------------------------------------------------------------------------------


def test_columns_are_those_of_measured_extra():
    path = DATA_DIR / "measured-extra.csv.gz"
    if not path.exists():
        pytest.skip("measured-extra.csv.gz not installed")
    with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
        header = next(csv.reader(fh))
    assert tuple(header) == COLUMNS


@pytest.mark.parametrize("name", sorted(FIXTURE_FORMATS))
def test_every_record_has_every_column_as_a_string(name):
    for rec in read_results(FIXTURES / name):
        assert set(COLUMNS) <= set(rec)
        assert all(isinstance(v, str) for v in rec.values())
        assert rec["backend"] in ("", "vllm", "sglang", "trtllm")
        assert rec["statistic"] in ("", "median", "mean")
        assert rec["source"]


@pytest.mark.parametrize("name, fmt", sorted(FIXTURE_FORMATS.items()))
def test_detect_format(name, fmt):
    path = FIXTURES / name
    assert detect_format(path) == fmt
    assert fmt in FORMATS


@pytest.mark.parametrize("name, fmt", sorted(FIXTURE_FORMATS.items()))
def test_detect_format_from_the_text_alone(name, fmt):
    # The content decides; the file name only breaks a genai-perf / aiperf tie.
    text = (FIXTURES / name).read_text(encoding="utf-8")
    assert detect_format(Path("results.txt"), text) == fmt


def test_missing_fields():
    full = dict.fromkeys(COLUMNS, "1")
    assert missing_fields(full) == []
    assert missing_fields({**full, "gpu": "", "tp": "  "}) == ["gpu", "tp"]
    assert missing_fields({}) == list(REQUIRED_FIELDS)
    assert REQUIRED_FIELDS == ("model", "gpu", "backend", "precision", "tp", "isl", "osl")


# ------------------------------------------------------------------------------------------
# Each format
# ------------------------------------------------------------------------------------------


def test_vllm_bench_serve_save_result():
    rec = _only(VLLM)
    _sub(
        rec,
        model="Llama-3.1-8B-Instruct",
        hf_model=HF,
        gpu="",
        backend="vllm",
        backend_version="",
        precision="",
        isl="1024",
        osl="128",
        concurrency="16",
        request_rate="",
        tp="",
        pp="",
        ttft_ms="91.27",
        tpot_ms="9.08",
        output_tokens_per_s_total="1618.52",
        statistic="median",
        source=f"vllm-bench:{VLLM}",
    )
    assert "320 requests completed" in rec["notes"]
    assert "p99 TTFT 218.44 ms" in rec["notes"]
    assert missing_fields(rec) == ["gpu", "precision", "tp"]


def test_vllm_append_result_with_metadata():
    recs = read_results(FIXTURES / VLLM_APPEND)
    assert [r["source"] for r in recs] == [f"vllm-bench:{VLLM_APPEND}#1", f"vllm-bench:{VLLM_APPEND}#2"]
    assert [r["request_rate"] for r in recs] == ["4", "8"]
    assert [(r["ttft_ms"], r["tpot_ms"]) for r in recs] == [("46.1", "7.39"), ("57.4", "8.06")]
    for r in recs:
        # --metadata gpu=H100 tp=1 precision=bf16; the catalog names the GPU
        _sub(r, gpu="H100 SXM", tp="1", precision="bf16", concurrency="", isl="1024", osl="128")
        assert r["backend"] == ""  # openai-chat: an OpenAI-compatible server of any engine
        assert "openai-chat" in r["notes"]
        assert missing_fields(r) == ["backend"]


def test_sglang_jsonl_every_line_is_a_run():
    old, new = read_results(FIXTURES / SGLANG)
    # line 1: the result dict without server_info (the model is not in it)
    _sub(
        old,
        model="",
        backend="sglang",
        isl="1024",
        osl="128",
        concurrency="16",
        request_rate="",
        ttft_ms="84.66",
        tpot_ms="8.69",
        output_tokens_per_s_total="1698.67",
        statistic="median",
        tp="",
        source=f"sglang-bench:{SGLANG}#1",
    )
    assert "dataset random 1024 in / 128 out" in old["notes"]
    assert missing_fields(old) == ["model", "gpu", "precision", "tp"]
    # line 2: with server_info (ServerArgs): model, layout, quantisation and version
    _sub(
        new,
        model="Llama-3.1-8B-Instruct",
        hf_model=HF,
        backend="sglang",
        backend_version="0.5.2",
        precision="fp8",
        weight_quant="fp8",
        isl="769",  # 307412 / 400: random lengths, range ratio 0.5
        osl="96",
        concurrency="",
        request_rate="8",
        tp="1",
        pp="1",
        attention_dp="1",
        moe_tp="1",
        moe_ep="1",
        ttft_ms="55.91",
        tpot_ms="7.58",
        statistic="median",
        source=f"sglang-bench:{SGLANG}#2",
    )
    assert "mean input 768.53 tokens" in new["notes"]
    assert missing_fields(new) == ["gpu"]


def test_genai_perf_config_sections():
    rec = _only(GENAI)
    _sub(
        rec,
        model="Llama-3.1-8B-Instruct",
        hf_model=HF,
        backend="",  # service kind openai; its endpoint.backend (tensorrtllm) is only a default
        isl="1024",
        osl="128",
        concurrency="16",
        request_rate="",
        ttft_ms="93.81",
        tpot_ms="9.24",
        output_tokens_per_s_total="1588.46",
        statistic="median",
        source=f"genai-perf:{GENAI}",
    )
    assert "496 requests" in rec["notes"]
    assert missing_fields(rec) == ["gpu", "backend", "precision", "tp"]


def test_genai_perf_cli_arguments_triton_tensorrt_llm():
    rec = _only(GENAI_OLD)
    _sub(
        rec,
        model="Llama-3.1-8B-Instruct",  # served as Triton's "ensemble": named after the tokenizer
        hf_model=HF,
        backend="trtllm",
        isl="1024",
        osl="128",  # the mean output length 127.98, rounded
        concurrency="",
        request_rate="8",
        ttft_ms="66.35",
        tpot_ms="7.44",
        output_tokens_per_s_total="1018.9",
        statistic="median",
    )
    assert "served as 'ensemble'" in rec["notes"]


def test_aiperf():
    rec = _only(AIPERF)
    _sub(
        rec,
        model="Llama-3.1-8B-Instruct",
        hf_model=HF,
        backend="",
        isl="1024",
        osl="128",
        concurrency="16",
        request_rate="",
        ttft_ms="89.64",
        tpot_ms="9.19",
        output_tokens_per_s_total="1602.61",
        statistic="median",
        source=f"aiperf:{AIPERF}",
    )
    assert "duration 39.9 s" in rec["notes"]


def test_trtllm_bench_streaming_report():
    rec = _only(TRTLLM)
    _sub(
        rec,
        model="Llama-3.1-8B-Instruct",
        hf_model=HF,
        gpu="H100 SXM",  # machine.name "NVIDIA H100 80GB HBM3"
        backend="trtllm",
        backend_version="1.0.0",
        precision="bf16",
        weight_quant="bf16",
        isl="1024",
        osl="128",
        concurrency="16",  # the measured mean in flight, 15.84
        tp="1",
        pp="1",
        moe_tp="1",
        moe_ep="1",
        ttft_ms="87.93",
        tpot_ms="9.01",
        output_tokens_per_s_total="1625.33",
        statistic="median",
        source=f"trtllm-bench:{TRTLLM}",
    )
    assert missing_fields(rec) == []
    assert "15.84" in rec["notes"]


def test_trtllm_bench_offline_fp8_report():
    rec = _only(TRTLLM_FP8)
    _sub(
        rec,
        model="Llama-3.1-8B-Instruct",  # nvidia/…-FP8 without its quantisation suffix
        hf_model="nvidia/Llama-3.1-8B-Instruct-FP8",
        gpu="",  # this version of the report has no machine section
        backend_version="0.21.0",
        precision="fp8",
        concurrency="498",
        ttft_ms="",
        tpot_ms="",
        statistic="",
        output_tokens_per_s_total="13892.1",
    )
    assert "not streaming" in rec["notes"]
    assert missing_fields(rec) == ["gpu"]


def test_measured_csv_rows_as_they_are():
    first, second = read_results(FIXTURES / MEASURED)
    _sub(first, model="Llama-3.1-8B", gpu="H100 SXM", tp="1", ttft_ms="92.1", tpot_ms="9.08")
    assert first["source"] == "my-lab run 2025-09-19 c16"
    assert first["request_rate"] == first["statistic"] == first["notes"] == ""  # columns it lacks
    assert second["source"] == f"measured-csv:{MEASURED}#3"
    assert second["precision"] == "fp8"


def test_measured_csv_gz_and_extra_columns(tmp_path):
    text = (FIXTURES / MEASURED).read_text(encoding="utf-8")
    lines = text.splitlines()
    lines[0] += ",request_lengths"
    lines[1:] = [ln + ",random" for ln in lines[1:]]
    p = tmp_path / "runs.csv.gz"
    p.write_bytes(gzip.compress("\n".join(lines).encode()))
    assert detect_format(p) == "measured-csv"
    recs = read_results(p)
    assert [r["request_lengths"] for r in recs] == ["random", "random"]


# ------------------------------------------------------------------------------------------
# Variants of the formats
# ------------------------------------------------------------------------------------------


def test_means_when_the_file_has_no_medians(tmp_path):
    obj = _load(VLLM)
    del obj["median_ttft_ms"], obj["median_tpot_ms"]
    rec = read_results(_write(tmp_path, "v.json", obj))[0]
    _sub(rec, ttft_ms="104.83", tpot_ms="9.14", statistic="mean")


def test_vllm_local_model_path_and_finite_rate(tmp_path):
    obj = _load(VLLM)
    obj.update(model_id="/models/Llama-3.1-8B-Instruct/", tokenizer_id="/models/Llama-3.1-8B-Instruct/")
    obj.update(request_rate=12.5, max_concurrency=None, backend="openai", endpoint_type="openai")
    rec = read_results(_write(tmp_path, "v.json", obj))[0]
    _sub(rec, model="Llama-3.1-8B-Instruct", hf_model="", backend="", request_rate="12.5", concurrency="")
    assert "model path /models/Llama-3.1-8B-Instruct/" in rec["notes"]


def test_sglang_refactored_writer_keys(tmp_path):
    # python/sglang/benchmark/metrics.py save_results: **metrics.__dict__ (total_input, total_output)
    obj = json.loads((FIXTURES / SGLANG).read_text().splitlines()[0])
    obj["total_input"], obj["total_output"] = obj.pop("total_input_tokens"), obj.pop("total_output_tokens")
    rec = read_results(_write(tmp_path, "s.jsonl", json.dumps(obj) + "\n"))[0]
    _sub(rec, isl="1024", osl="128", source="sglang-bench:s.jsonl#1")


def _sglang_with(tmp_path: Path, **server_args) -> dict[str, str]:
    obj = json.loads((FIXTURES / SGLANG).read_text().splitlines()[1])
    obj["server_info"].update(server_args)
    return read_results(_write(tmp_path, "s.jsonl", json.dumps(obj) + "\n"))[0]


def test_sglang_dp_attention_expert_parallel_layout(tmp_path):
    rec = _sglang_with(
        tmp_path,
        model_path="deepseek-ai/DeepSeek-R1",
        served_model_name="deepseek-ai/DeepSeek-R1",
        tokenizer_path="deepseek-ai/DeepSeek-R1",
        tp_size=8,
        dp_size=8,
        ep_size=8,
        enable_dp_attention=True,
        quantization=None,
        dtype="auto",
    )
    # 8 GPUs: attention data-parallel over 8 ranks of TP 1, experts over EP 8
    _sub(rec, model="DeepSeek-R1", tp="1", attention_dp="8", moe_tp="1", moe_ep="8", precision="")
    assert "without --quantization" in rec["notes"]


def test_sglang_disaggregated_server_info(tmp_path):
    obj = json.loads((FIXTURES / SGLANG).read_text().splitlines()[1])
    decode = {**obj["server_info"], "tp_size": 4}
    obj["server_info"] = {"prefill": [obj["server_info"]], "decode": [decode]}
    rec = read_results(_write(tmp_path, "s.jsonl", json.dumps(obj)))[0]
    assert rec["tp"] == "4"
    assert "decode worker" in rec["notes"]


@pytest.mark.parametrize(
    "quantization, precision",
    [
        ("modelopt_fp4", "fp4"),
        ("mxfp4", "fp4"),
        ("awq_marlin", "int4"),
        ("gptq", "int4"),
        ("w4afp8", "int4"),
        ("w8a8_fp8", "fp8"),
        ("modelopt_fp8", "fp8"),
        ("w8a8_int8", "int8"),
        ("bitsandbytes", ""),
    ],
)
def test_sglang_quantization(tmp_path, quantization, precision):
    rec = _sglang_with(tmp_path, quantization=quantization)
    assert (rec["precision"], rec["weight_quant"]) == (precision, precision)


def test_aiperf_time_units(tmp_path):
    obj = _load(AIPERF)
    ttft = obj["time_to_first_token"]
    obj["time_to_first_token"] = {k: (v * 1e6 if k != "unit" else "ns") for k, v in ttft.items()}
    rec = read_results(_write(tmp_path, "profile_export_aiperf.json", obj))[0]
    assert rec["ttft_ms"] == "89.64"


def test_trtllm_tensor_and_expert_parallel(tmp_path):
    obj = _load(TRTLLM)
    obj["world_info"].update(tp_size=8, ep_size=4, world_size=8)
    obj["engine"].update(model="deepseek-ai/DeepSeek-R1", quantization="FP8_BLOCK_SCALES")
    obj["machine"]["name"] = "NVIDIA B200"
    rec = read_results(_write(tmp_path, "r.json", obj))[0]
    _sub(rec, model="DeepSeek-R1", gpu="B200", precision="fp8", tp="8", moe_tp="2", moe_ep="4")


@pytest.mark.parametrize(
    "quant, precision", [("NVFP4", "fp4"), ("W4A16_AWQ", "int4"), ("W8A8_SQ_PER_CHANNEL", "int8"), ("FP8", "fp8")]
)
def test_trtllm_quant_algo(tmp_path, quant, precision):
    obj = _load(TRTLLM)
    obj["engine"]["quantization"] = quant
    assert read_results(_write(tmp_path, "r.json", obj))[0]["precision"] == precision


def test_format_given_explicitly():
    assert read_results(FIXTURES / GENAI, fmt="genai-perf") == read_results(FIXTURES / GENAI)


# ------------------------------------------------------------------------------------------
# Bad files: ResultsFormatError naming the file, the field and what was expected
# ------------------------------------------------------------------------------------------


def test_error_message_layout():
    err = ResultsFormatError(Path("runs/a.json"), "line 3: median_ttft_ms", "a number (ms)")
    assert str(err) == "runs/a.json: line 3: median_ttft_ms: a number (ms)"
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (str(again), again.field) == (str(err), "line 3: median_ttft_ms")


def test_invalid_json(tmp_path):
    text = (FIXTURES / GENAI).read_text()
    p = _write(tmp_path, GENAI, text[: len(text) // 2])
    msg = _error(p)
    assert "valid JSON" in msg and ": line " in msg
    with pytest.raises(ResultsFormatError, match="valid JSON"):
        detect_format(p)


def test_invalid_json_lines_names_the_line(tmp_path):
    lines = (FIXTURES / SGLANG).read_text().splitlines()
    p = _write(tmp_path, "s.jsonl", "\n".join([*lines, lines[0][:-7]]) + "\n")
    msg = _error(p)
    assert f"{p}: line 3: a JSON object per line" in msg


def test_missing_metric_in_a_json_lines_record(tmp_path):
    lines = (FIXTURES / SGLANG).read_text().splitlines()
    second = json.loads(lines[1])
    del second["median_ttft_ms"], second["mean_ttft_ms"]
    p = _write(tmp_path, "s.jsonl", "\n".join([lines[0], json.dumps(second)]))
    assert f"{p}: line 2: median_ttft_ms: a number (ms)" in _error(p)


def test_wrong_type_of_a_metric(tmp_path):
    obj = _load(VLLM)
    obj["median_ttft_ms"] = "fast"
    p = _write(tmp_path, "v.json", obj)
    assert _error(p) == f"{p}: median_ttft_ms: milliseconds; got the string 'fast'"


def test_missing_completed_requests(tmp_path):
    obj = _load(VLLM)
    del obj["completed"]
    p = _write(tmp_path, "v.json", obj)
    assert "completed: the number of completed requests (the file has none)" in _error(p)
    obj["completed"] = 0
    assert "completed: a positive number of completed requests" in _error(_write(tmp_path, "v.json", obj))


def test_genai_perf_errors(tmp_path):
    obj = _load(GENAI)
    obj["time_to_first_token"]["p50"] = [93.8]
    p = _write(tmp_path, GENAI, obj)
    assert f"{p}: time_to_first_token.p50: a number; got a list" == _error(p)
    del obj["time_to_first_token"]
    assert "time_to_first_token: an object with 'p50' or 'avg' (ms)" in _error(_write(tmp_path, GENAI, obj))
    obj = _load(GENAI)
    obj["input_config"]["perf_analyzer"]["stimulus"] = {"concurrency": "sixteen"}
    assert "input_config.perf_analyzer.stimulus.concurrency: the concurrency" in _error(_write(tmp_path, GENAI, obj))
    obj = _load(AIPERF)
    obj["inter_token_latency"]["unit"] = "fortnights"
    assert "inter_token_latency.unit: a time unit" in _error(_write(tmp_path, AIPERF, obj))


def test_trtllm_errors(tmp_path):
    obj = _load(TRTLLM)
    obj["world_info"]["tp_size"] = "one"
    p = _write(tmp_path, "r.json", obj)
    assert f"{p}: world_info.tp_size: the tensor-parallel size; got the string 'one'" == _error(p)
    obj = _load(TRTLLM)
    obj["streaming_metrics"] = [1, 2]
    assert "streaming_metrics: an object; got a list" in _error(_write(tmp_path, "r.json", obj))
    obj = _load(TRTLLM)
    del obj["performance"]
    assert "performance: an object (the file has none)" in _error(_write(tmp_path, "r.json", obj))


def test_unknown_and_unreadable_files(tmp_path):
    p = _write(tmp_path, "x.json", {"hello": 1})
    assert "(top level): a result of vllm bench serve" in _error(p)
    assert "found keys hello" in _error(p)
    p = _write(tmp_path, "x.json", [{"id": 1}])
    assert "(top level)" in _error(p)
    assert "the file is empty" in _error(_write(tmp_path, "e.json", "  \n"))
    assert "a readable file" in _error(tmp_path / "absent.json")
    assert "a readable file" in _error(tmp_path)
    b = tmp_path / "b.json"
    b.write_bytes(b"\xff\xfe\x00{")
    assert "UTF-8 text" in _error(b)
    g = tmp_path / "broken.csv.gz"
    g.write_bytes(b"not gzip")
    assert "gzip" in _error(g)
    assert "line 1" in _error(_write(tmp_path, "notes.txt", "just some words"))


def test_csv_without_the_measured_columns(tmp_path):
    p = _write(tmp_path, "m.csv", "model,gpu,ttft_ms\nA,B,1\n")
    msg = _error(p)
    assert "(CSV header): the columns of measured.csv (missing backend, concurrency" in msg
    header = (FIXTURES / MEASURED).read_text().splitlines()[0]
    p = _write(tmp_path, "m.csv", f"{header}\nLlama,{'x,' * 30}\n")
    assert ": line 2: 18 comma-separated values" in _error(p)


def test_bad_format_names_and_mismatched_formats(tmp_path):
    p = FIXTURES / VLLM
    assert "format: one of vllm-bench" in _error(p, fmt="vllm")
    assert "input_config: an object (the file has none)" in _error(p, fmt="genai-perf")
    assert "engine: an object (the file has none)" in _error(p, fmt="trtllm-bench")
    assert "line 1" in _error(p, fmt="measured-csv")


def test_mixed_json_lines(tmp_path):
    sglang = (FIXTURES / SGLANG).read_text().splitlines()[0]
    vllm = (FIXTURES / VLLM).read_text()
    p = _write(tmp_path, "mix.jsonl", f"{sglang}\n{vllm}\n")
    assert "line 2: a sglang-bench record like line 1" in _error(p)


def _mutations(obj, path=()):
    """Every value of a JSON document replaced, one at a time, by values of other types."""
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, list):
        items = list(enumerate(obj))[:2]
    else:
        return
    for key, value in items:
        for bad in ("x", -1, 0, 1.5, None, True, [], {}, float("nan"), float("inf")):
            if bad != value or type(bad) is not type(value):
                yield (*path, key), bad
        yield from _mutations(value, (*path, key))


def _replace(doc, path, value):
    doc = copy.deepcopy(doc)
    cur = doc
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value
    return doc


@pytest.mark.parametrize("name", [VLLM, GENAI, GENAI_OLD, AIPERF, TRTLLM, TRTLLM_FP8, SGLANG])
def test_no_traceback_on_any_wrong_value(tmp_path, name):
    # Each value replaced by a wrong one: the file reads, or fails with ResultsFormatError.
    text = (FIXTURES / name).read_text()
    doc = json.loads(text.splitlines()[-1] if name == SGLANG else text)
    p = tmp_path / name
    for path, bad in _mutations(doc):
        p.write_text(json.dumps(_replace(doc, path, bad)) + "\n", encoding="utf-8")
        try:
            recs = read_results(p)
        except ResultsFormatError:
            continue
        assert all(isinstance(v, str) for r in recs for v in r.values()), path
