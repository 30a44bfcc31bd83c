"""Read the benchmark result files people already produce into rows of the measured-data layout.

For ``servewise calibrate RESULTS…``: each result (one run of a benchmark tool) becomes one dict
with the columns of ``measured-extra.csv`` (``COLUMNS``), every value a string as a
``csv.DictReader`` gives it, ``""`` where the file does not say.

Formats (``FORMATS``) and what their files hold (field names read from the tools' source; the
commits are listed in tests/fixtures/bench/README.md):

* ``vllm-bench``: ``vllm bench serve --save-result`` (vllm/benchmarks/serve.py ``result_json``),
  one JSON object a file; ``--append-result`` appends one object a line. Holds ``model_id``,
  ``backend`` (the request API: ``vllm``, ``openai``, ``openai-chat``, …), ``max_concurrency``,
  ``request_rate`` (a number or ``"inf"``), ``completed``, ``total_input_tokens``,
  ``total_output_tokens``, ``output_throughput`` and ``mean_/median_/std_/p99_`` ``ttft_ms``,
  ``tpot_ms``, ``itl_ms``. ``--metadata KEY=VALUE`` pairs are stored as top-level keys: those
  named like a column (``gpu``, ``tp``, ``pp``, ``precision``, …) fill that column.
* ``sglang-bench``: ``python -m sglang.bench_serving --output-file F.jsonl``, one JSON object
  appended per run (a line each). Holds ``backend``, ``dataset_name``, ``request_rate``,
  ``max_concurrency``, ``random_input_len``/``random_output_len``/``random_range_ratio``,
  ``completed``, ``total_input_tokens`` and ``total_output_tokens`` (``total_input``/``total_output``
  in the refactored ``sglang.benchmark`` writer), the same latency keys as vLLM, and in newer
  versions ``server_info`` (the server's ``/get_server_info``: the ServerArgs ``model_path``,
  ``tp_size``, ``pp_size``, ``dp_size``, ``ep_size``, ``enable_dp_attention``,
  ``quantization``, ``dtype``, ``kv_cache_dtype`` and ``version``), which fills the layout.
* ``genai-perf`` (``profile_export_genai_perf.json``) and ``aiperf``
  (``profile_export_aiperf.json``): one object per metric (``{"unit", "avg", "p50", "p99", …}``:
  ``time_to_first_token``, ``inter_token_latency`` = (latency - TTFT) / (output tokens - 1),
  i.e. TPOT, ``input_sequence_length``, ``output_sequence_length``, ``output_token_throughput``,
  ``request_count``, …) and ``input_config``. genai-perf's is either its config sections
  (``model_names``, ``endpoint.{service_kind,backend,type}``, ``perf_analyzer.stimulus``,
  ``input.synthetic_tokens.mean``, ``input.output_tokens.mean``) or, before March 2025, its CLI
  arguments (``model``, ``service_kind``, ``backend``, ``concurrency``, ``request_rate``,
  ``synthetic_input_tokens_mean``, ``output_tokens_mean``); aiperf's is its UserConfig
  (``endpoint.model_names``, ``loadgen.concurrency``/``request_rate``,
  ``input.prompt.input_tokens.mean``). Both measure a server whose engine is named only where
  genai-perf drives Triton (``service_kind: triton``, ``backend: tensorrtllm|vllm``).
* ``trtllm-bench``: ``trtllm-bench … throughput|latency --report_json F``
  (tensorrt_llm/bench/dataclasses/reporting.py ``get_statistics_dict``): ``engine`` (model,
  version, dtype, quantization), ``machine.name`` (newer versions), ``world_info`` (tp/pp/ep
  size), ``request_info`` (average input/output length and requests in flight),
  ``performance`` (throughput) and, for ``--streaming`` runs, ``streaming_metrics`` (TTFT/TPOT
  averages and percentiles).
* ``measured-csv``: a CSV with the measured.csv / measured-extra.csv header; its rows as they are.

Parallelism, GPU and precision are mostly not in vLLM/SGLang/genai-perf/aiperf files: they stay
``""`` and ``missing_fields`` names them, so the command can ask for them. Bad input never
raises anything but ``ResultsFormatError`` (``str()``: ``<file>: <field path>: <expected>``).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from pathlib import Path, PurePosixPath
from typing import Any

from servewise.engine.domain.perf.data import MEASURED_COLUMNS

FORMATS = ("vllm-bench", "sglang-bench", "genai-perf", "aiperf", "trtllm-bench", "measured-csv")

# The columns of shared/data/measured-extra.csv, in its order.
COLUMNS = (
    "model",
    "hf_model",
    "gpu",
    "backend",
    "backend_version",
    "precision",
    "weight_quant",
    "isl",
    "osl",
    "concurrency",
    "request_rate",
    "tp",
    "pp",
    "attention_dp",
    "moe_tp",
    "moe_ep",
    "ttft_ms",
    "tpot_ms",
    "output_tokens_per_s_total",
    "statistic",
    "source",
    "notes",
)

# What sent a format's requests (serving.HARNESSES): trtllm-bench drives the LLM API in its own
# process (tensorrt_llm/bench: no server); the others are clients of a server (vLLM's, SGLang's,
# Triton or any OpenAI-compatible endpoint).
HARNESS_OF_FORMAT = {"vllm-bench": "openai-http", "sglang-bench": "openai-http",
                     "genai-perf": "openai-http", "aiperf": "openai-http",
                     "trtllm-bench": "in-process"}

# What a calibration run cannot do without; the command asks for those a file leaves empty.
REQUIRED_FIELDS = ("model", "gpu", "backend", "precision", "tp", "isl", "osl")

BACKENDS = ("vllm", "sglang", "trtllm")

_TOOLS = (
    "a result of vllm bench serve, sglang.bench_serving, genai-perf, aiperf or trtllm-bench "
    "(a JSON object), or a CSV with the measured.csv columns"
)


class ResultsFormatError(ValueError):
    """A result file that cannot be read: which file, which field, and what was expected there."""

    def __init__(self, path: str | Path, field: str, expected: str):
        self.path, self.field, self.expected = str(path), field, expected
        super().__init__(f"{self.path}: {field}: {expected}")

    def __reduce__(self):
        return (type(self), (self.path, self.field, self.expected))


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def detect_format(path: Path, text: str | None = None) -> str:
    """The format of a result file (one of ``FORMATS``), from its content (and name)."""
    p = Path(path)
    return _detect(p, _read_text(p) if text is None else text)


def read_results(path: str | Path, *, fmt: str | None = None) -> list[dict[str, str]]:
    """The results of one file as rows of the measured-data layout (``COLUMNS``)."""
    p = Path(path)
    text = _read_text(p)
    if fmt is None:
        fmt = _detect(p, text)
    elif fmt not in FORMATS:
        raise ResultsFormatError(p, "format", f"one of {', '.join(FORMATS)}; got {fmt!r}")
    if fmt == "measured-csv":
        return _read_measured_csv(p, text)
    records = _json_records(p, text)
    reader = _READERS[fmt]
    numbered = fmt == "sglang-bench" or len(records) > 1
    out = []
    for line, obj in records:
        prefix = f"line {line}: " if numbered and line is not None else ""
        if not isinstance(obj, dict):
            raise ResultsFormatError(
                p, prefix + "(top level)", f"a JSON object (one benchmark result); got {_kind(obj)}"
            )
        rec = reader(_Doc(p, obj, prefix))
        rec["source"] = f"{fmt}:{p.name}" + (f"#{line}" if numbered and line is not None else "")
        rec["harness"] = HARNESS_OF_FORMAT[fmt]
        out.append(rec)
    return out


def missing_fields(record: dict[str, str]) -> list[str]:
    """Which of ``REQUIRED_FIELDS`` the record leaves empty."""
    return [k for k in REQUIRED_FIELDS if not str(record.get(k) or "").strip()]


# --------------------------------------------------------------------------------------------
# Reading and recognising files
# --------------------------------------------------------------------------------------------


def _read_text(p: Path) -> str:
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ResultsFormatError(p, "(file)", f"a readable file ({exc.strerror or exc})") from None
    if p.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, ValueError) as exc:
            raise ResultsFormatError(p, "(file)", f"gzip-compressed data ({exc})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ResultsFormatError(p, "(file)", f"UTF-8 text (byte {exc.start} is not)") from None


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]


def _json_records(p: Path, text: str) -> list[tuple[int | None, Any]]:
    """The JSON values of a file: one document, or one per line (JSON Lines).

    Each comes with its line number where the file is one line a record, else None."""
    lines = _lines(text)
    if not lines:
        raise ResultsFormatError(p, "(file)", "a benchmark result (the file is empty)")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError as exc:
        error = exc
    except RecursionError:
        raise ResultsFormatError(p, "(file)", "JSON nested less deeply") from None
    else:
        return [(lines[0][0] if len(lines) == 1 else None, whole)]
    try:
        first = json.loads(lines[0][1])
    except (json.JSONDecodeError, RecursionError):
        first = None
    if not isinstance(first, dict):
        raise ResultsFormatError(p, f"line {error.lineno} column {error.colno}", f"valid JSON ({error.msg})")
    out: list[tuple[int | None, Any]] = []
    for n, ln in lines:
        try:
            out.append((n, json.loads(ln)))
        except json.JSONDecodeError as exc:
            raise ResultsFormatError(
                p, f"line {n}", f"a JSON object per line (JSON Lines); invalid JSON: {exc.msg} at column {exc.colno}"
            ) from None
        except RecursionError:
            raise ResultsFormatError(p, f"line {n}", "JSON nested less deeply") from None
    return out


def _detect(p: Path, text: str) -> str:
    lines = _lines(text)
    if not lines:
        raise ResultsFormatError(p, "(file)", "a benchmark result (the file is empty)")
    n, first = lines[0]
    if first.lstrip()[:1] not in ("{", "["):
        if "," not in first:
            raise ResultsFormatError(p, f"line {n}", _TOOLS)
        try:
            header = {h.strip() for h in next(csv.reader([first]))}
        except csv.Error as exc:
            raise ResultsFormatError(p, f"line {n}", f"a CSV header ({exc})") from None
        missing = sorted(MEASURED_COLUMNS - header)
        if missing:
            raise ResultsFormatError(
                p,
                f"line {n} (CSV header)",
                f"the columns of measured.csv (missing {', '.join(missing)}) or a JSON benchmark result",
            )
        return "measured-csv"
    records = _json_records(p, text)
    line, obj = records[0]
    fmt = _classify(obj, p.name)
    where = f"line {line}" if len(records) > 1 else "(top level)"
    if fmt is None:
        found = (
            f"; found {_kind(obj)}"
            if not isinstance(obj, dict)
            else (f"; found keys {', '.join(sorted(obj)[:8])}{', …' if len(obj) > 8 else ''}")
        )
        raise ResultsFormatError(p, where, _TOOLS + found)
    for line, obj in records[1:]:
        other = _classify(obj, p.name)
        if other != fmt:
            raise ResultsFormatError(
                p, f"line {line}", f"a {fmt} record like line {records[0][0]} (found {other or _kind(obj)})"
            )
    return fmt


def _classify(obj: Any, name: str) -> str | None:
    if not isinstance(obj, dict):
        return None
    low = name.lower()
    if "input_config" in obj:
        ic = obj["input_config"]
        if "was_cancelled" in obj or "error_summary" in obj or "aiperf" in low:
            return "aiperf"
        if "genai_perf" in low or "genai-perf" in low:
            return "genai-perf"
        if isinstance(ic, dict) and ("loadgen" in ic or "cli_command" in ic):
            return "aiperf"
        return "genai-perf"
    if "world_info" in obj or ("engine" in obj and "performance" in obj):
        return "trtllm-bench"
    if "model_id" in obj or "tokenizer_id" in obj or "endpoint_type" in obj:
        return "vllm-bench"
    if any(
        k in obj
        for k in (
            "dataset_name",
            "server_info",
            "total_output_tokens_retokenized",
            "random_input_len",
            "sharegpt_output_len",
        )
    ):
        return "sglang-bench"
    if "median_ttft_ms" in obj or "mean_ttft_ms" in obj:
        return "vllm-bench" if "num_prompts" in obj else "sglang-bench"
    return None


# --------------------------------------------------------------------------------------------
# Typed look-ups with field paths in the errors
# --------------------------------------------------------------------------------------------


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"the string {v[:40]!r}"
    if isinstance(v, (int, float)):
        return f"the number {v}"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


class _Doc:
    """One JSON object of a file: look-ups by dotted path that fail with the path in the error."""

    def __init__(self, path: Path, obj: dict[str, Any], prefix: str = ""):
        self.path, self.root, self.prefix = path, obj, prefix

    def error(self, field: str, expected: str) -> ResultsFormatError:
        return ResultsFormatError(self.path, self.prefix + field, expected)

    def value(self, field: str) -> Any:
        cur: Any = self.root
        parts = field.split(".")
        for i, key in enumerate(parts):
            if cur is None:
                return None
            if not isinstance(cur, dict):
                raise self.error(".".join(parts[:i]), f"an object; got {_kind(cur)}")
            cur = cur.get(key)
        return cur

    def has(self, field: str) -> bool:
        return self.value(field) is not None

    def obj(self, field: str, *, required: bool = False) -> dict[str, Any] | None:
        v = self.value(field)
        if v is None:
            if required:
                raise self.error(field, "an object (the file has none)")
            return None
        if not isinstance(v, dict):
            raise self.error(field, f"an object; got {_kind(v)}")
        return v

    def num(self, field: str, *, required: bool = False, what: str = "a number") -> float | None:
        v = self.value(field)
        if v is None:
            if required:
                raise self.error(field, f"{what} (the file has none)")
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(field, f"{what}; got {_kind(v)}")
        if math.isnan(v):
            if required:
                raise self.error(field, f"{what}; got NaN")
            return None
        if math.isinf(v):
            raise self.error(field, f"{what} (finite); got {v}")
        return float(v)

    def count(self, field: str, *, required: bool = False, what: str = "a count") -> int | None:
        v = self.num(field, required=required, what=what)
        if v is None:
            return None
        if v < 0 or v != int(v):
            raise self.error(field, f"{what} (a whole number, 0 or more); got {_fmt(v)}")
        return int(v)

    def text(self, field: str) -> str | None:
        v = self.value(field)
        if v is None:
            return None
        if not isinstance(v, str):
            raise self.error(field, f"a string; got {_kind(v)}")
        return v.strip() or None

    def texts(self, field: str) -> list[str]:
        """A string or a list of strings (model names)."""
        v = self.value(field)
        if v is None:
            return []
        if isinstance(v, str):
            return [v.strip()] if v.strip() else []
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return [x.strip() for x in v if x.strip()]
        raise self.error(field, f"a string or a list of strings; got {_kind(v)}")

    def flag(self, field: str) -> bool | None:
        v = self.value(field)
        if v is None:
            return None
        if not isinstance(v, bool):
            raise self.error(field, f"true or false; got {_kind(v)}")
        return v

    def rate(self, field: str) -> float | None:
        """An offered request rate: a positive number, or inf / "inf" / "trace" (None)."""
        v = self.value(field)
        if v is None or (isinstance(v, str) and v.strip().lower() in ("inf", "infinity", "trace")):
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or v <= 0:
            raise self.error(field, f'requests per second (a positive number or "inf"); got {_kind(v)}')
        return None if math.isinf(v) else float(v)


# --------------------------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return ""
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.{digits}f}".rstrip("0").rstrip(".")


def _blank() -> dict[str, str]:
    return dict.fromkeys(COLUMNS, "")


def _engine(name: str | None) -> str:
    """The serving engine a benchmark's backend / endpoint name stands for ("" if it names none)."""
    n = (name or "").strip().lower().replace("_", "-")
    if n in ("vllm", "vllm-chat"):
        return "vllm"
    if n.startswith("sglang"):
        return "sglang"
    if n in ("trt", "trtllm", "trt-llm", "tensorrt-llm", "tensorrtllm", "tensorrtllm-engine"):
        return "trtllm"
    return ""


_HF_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _is_hf_id(name: str) -> bool:
    return bool(_HF_ID.match(name)) and not name.startswith((".", "/"))


# Quantisation suffixes of checkpoint names ("Llama-3.1-8B-Instruct-FP8", "Qwen3-32B-NVFP4"): the
# model column names the base model, as measured-extra.csv does (Qwen3-32B, nvidia/Qwen3-32B-NVFP4).
_QUANT_SUFFIX = re.compile(
    r"[-_.](fp8|fp4|nvfp4|mxfp4|awq|gptq|int4|int8|w4a16|w8a8|w8a16|w4a8|dynamic|quantized|bnb|4bit|8bit)$",
    re.IGNORECASE,
)


def _base_model(name: str) -> str:
    base = name
    while _QUANT_SUFFIX.search(base):
        base = _QUANT_SUFFIX.sub("", base)
    return base or name


def _set_model(rec: dict[str, str], notes: list[str], name: str | None, tokenizer: str | None = None) -> None:
    """``model`` (the name without its organisation and quantisation suffix) and ``hf_model`` from
    a served model name, or from the tokenizer's name when the served one is no Hugging Face id
    (a path, an alias)."""
    name, tokenizer = (name or "").strip(), (tokenizer or "").strip()
    if name and _is_hf_id(name):
        rec["hf_model"], rec["model"] = name, name.split("/")[-1]
    elif tokenizer and _is_hf_id(tokenizer):
        rec["hf_model"], rec["model"] = tokenizer, tokenizer.split("/")[-1]
        if name:
            notes.append(f"model named after the tokenizer (served as '{name}')")
    elif name:
        rec["model"] = PurePosixPath(name.replace("\\", "/").rstrip("/")).name or name
        if rec["model"] != name:
            notes.append(f"model path {name}")
    base = _base_model(rec["model"])
    if base != rec["model"]:
        notes.append(f"model {base}: the checkpoint name {rec['model']} without its quantisation suffix")
        rec["model"] = base


def _precision(quant: str | None, dtype: str | None = None) -> tuple[str, str]:
    """(precision, weight_quant) of a quantisation method name (SGLang ``--quantization``,
    TensorRT-LLM ``QuantAlgo``) or, without one, of the model dtype; "" when it does not say."""
    q = (quant or "").strip().lower()
    if q and q not in ("none", "null", "no_quant", "unquant"):
        if "fp4" in q:
            p = "fp4"
        elif any(k in q for k in ("awq", "gptq", "w4a", "int4", "wna16", "marlin", "q4")):
            p = "int4"
        elif "fp8" in q:
            p = "fp8"
        elif any(k in q for k in ("int8", "w8a8", "w8a16", "q8")):
            p = "int8"
        else:
            p = ""
        return p, p
    d = (dtype or "").strip().lower().replace("torch.", "")
    p = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16"}.get(d, "")
    return p, p


def _gpu(name: str) -> str:
    """The catalog id of a GPU name such as torch reports it ("NVIDIA H100 80GB HBM3"), or ""."""
    from servewise.engine.domain.catalog import UnknownEntry, load_catalog

    base = re.sub(r"^nvidia\s+", "", name.strip(), flags=re.IGNORECASE)
    candidates = [name.strip(), base, re.sub(r"[\s-]+\d+\s*GB\b.*$", "", base, flags=re.IGNORECASE)]
    for cand in dict.fromkeys(c for c in candidates if c):
        try:
            return str(load_catalog().gpu(cand)["id"])
        except (UnknownEntry, KeyError, TypeError):
            continue
    return ""


def _latency(
    rec: dict[str, str], ttft: tuple[float | None, float | None], tpot: tuple[float | None, float | None]
) -> None:
    """TTFT/TPOT columns from (median, mean) pairs: the medians where the file has them for every
    latency it reports, else the means; ``statistic`` says which."""
    present = {col: pair for col, pair in (("ttft_ms", ttft), ("tpot_ms", tpot)) if pair != (None, None)}
    if not present:
        return
    if all(med is not None for med, _ in present.values()):
        stat = "median"
    elif all(mean is not None for _, mean in present.values()):
        stat = "mean"
    else:  # one latency has only a median, the other only a mean: TTFT's statistic is named
        stat = "median" if ttft[0] is not None else "mean"
    for col, (med, mean) in present.items():
        rec[col] = _fmt(med if (stat == "median" and med is not None) or mean is None else mean)
    rec["statistic"] = stat


def _mean_length(doc: _Doc, total: str, count: float, what: str) -> tuple[str, str | None]:
    """Mean tokens per request from a total, as a whole number (and a note if not whole)."""
    t = doc.num(total, what=f"the {what} tokens of all requests")
    if t is None:
        return "", None
    mean = t / count
    note = None if float(mean).is_integer() else f"mean {what} {_fmt(mean, 2)} tokens"
    return str(round(mean)), note


def _finish(rec: dict[str, str], notes: list[str]) -> dict[str, str]:
    rec["notes"] = "; ".join(n for n in notes if n)
    return rec


# --------------------------------------------------------------------------------------------
# vLLM and SGLang serving benchmarks (one flat JSON object a run)
# --------------------------------------------------------------------------------------------

# vllm bench serve --metadata KEY=VALUE keys that fill a column of the same name.
_METADATA_COLUMNS = (
    "gpu",
    "backend_version",
    "precision",
    "weight_quant",
    "tp",
    "pp",
    "attention_dp",
    "moe_tp",
    "moe_ep",
)


def _ttft_tpot(doc: _Doc, rec: dict[str, str]) -> None:
    ttft = (doc.num("median_ttft_ms", what="milliseconds"), doc.num("mean_ttft_ms", what="milliseconds"))
    if ttft == (None, None):
        raise doc.error(
            "median_ttft_ms",
            "a number (ms): the file has neither median_ttft_ms nor "
            "mean_ttft_ms (a generation benchmark with TTFT is needed)",
        )
    tpot = (doc.num("median_tpot_ms", what="milliseconds"), doc.num("mean_tpot_ms", what="milliseconds"))
    _latency(rec, ttft, tpot)


def _lengths_and_load(
    doc: _Doc, rec: dict[str, str], notes: list[str], totals: tuple[tuple[str, ...], tuple[str, ...]]
) -> float:
    completed = doc.num("completed", required=True, what="the number of completed requests")
    if completed <= 0:
        raise doc.error("completed", f"a positive number of completed requests; got {_fmt(completed)}")
    for col, keys, what in (("isl", totals[0], "input"), ("osl", totals[1], "output")):
        key = next((k for k in keys if doc.has(k)), keys[0])
        rec[col], note = _mean_length(doc, key, completed, what)
        notes.append(note)
    conc = doc.count("max_concurrency", what="the maximum number of requests in flight")
    rec["concurrency"] = "" if conc is None else str(conc)
    rate = doc.rate("request_rate")
    rec["request_rate"] = _fmt(rate, 4)
    rec["num_requests"] = _fmt(completed)  # the arrivals of an open-loop run (its saturated TTFT)
    if conc is None and rate is None:
        notes.append("no concurrency limit and request rate inf: all requests in flight at once")
    out = doc.num("output_throughput", what="output tokens per second")
    rec["output_tokens_per_s_total"] = _fmt(out, 2)
    return completed


def _run_notes(doc: _Doc, notes: list[str], completed: float) -> None:
    notes.append(f"{_fmt(completed)} requests completed")
    failed = doc.num("failed")
    if failed:
        notes.append(f"{_fmt(failed)} failed")
    duration = doc.num("duration")
    if duration is not None:
        notes.append(f"duration {_fmt(duration, 1)} s")
    for key, label in (
        ("p99_ttft_ms", "p99 TTFT"),
        ("p99_tpot_ms", "p99 TPOT"),
        ("mean_itl_ms", "mean ITL"),
        ("median_itl_ms", "median ITL"),
    ):
        v = doc.num(key)
        if v is not None:
            notes.append(f"{label} {_fmt(v, 2)} ms")


def _read_vllm(doc: _Doc) -> dict[str, str]:
    rec, notes = _blank(), []
    _set_model(rec, notes, doc.text("model_id"), doc.text("tokenizer_id"))
    api = doc.text("backend") or doc.text("endpoint_type")
    rec["backend"] = _engine(api)
    if api and not rec["backend"]:
        notes.append(f"request backend '{api}' (OpenAI-compatible API: the engine is not stated)")
    elif api:
        notes.append(f"engine from the request backend '{api}'")
    completed = _lengths_and_load(doc, rec, notes, (("total_input_tokens",), ("total_output_tokens",)))
    _ttft_tpot(doc, rec)
    for col in _METADATA_COLUMNS:
        v = doc.value(col)
        if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v).strip():
            rec[col] = str(v).strip()
    if rec["gpu"]:
        rec["gpu"] = _gpu(rec["gpu"]) or rec["gpu"]
    rec["precision"], rec["weight_quant"] = rec["precision"].lower(), rec["weight_quant"].lower()
    filled = [c for c in _METADATA_COLUMNS if rec[c]]
    if filled:
        notes.append(f"{', '.join(filled)} from --metadata")
    for key in ("label", "date"):
        v = doc.value(key)
        if isinstance(v, str) and v.strip():
            notes.append(f"{key} {v.strip()}")
    n = doc.num("num_prompts")
    if n is not None:
        notes.append(f"{_fmt(n)} prompts")
    _run_notes(doc, notes, completed)
    burst = doc.num("burstiness")
    if rec["request_rate"] and burst not in (None, 1.0):
        notes.append(f"burstiness {_fmt(burst, 2)} (gamma arrivals)")
    _peak_and_acceptance(doc, notes, "spec_decode_acceptance_length", "acceptance length")
    return _finish(rec, notes)


def _peak_and_acceptance(doc: _Doc, notes: list[str], acc_key: str, acc_label: str) -> None:
    """Notes of the peak requests in flight and the speculative-decoding acceptance, if stated."""
    peak = doc.num("max_concurrent_requests")
    if peak is not None:
        notes.append(f"peak {_fmt(peak)} requests in flight")
    acc = doc.num(acc_key)
    if acc is not None:
        notes.append(f"speculative decoding {acc_label} {_fmt(acc, 2)}")


def _read_sglang(doc: _Doc) -> dict[str, str]:
    rec, notes = _blank(), []
    api = doc.text("backend")
    rec["backend"] = _engine(api)
    si_field = "server_info"
    si = doc.obj(si_field)
    if si is not None and isinstance(si.get("decode"), list) and si["decode"]:
        si_field = "server_info.decode.0"
        if not isinstance(si["decode"][0], dict):
            raise doc.error(si_field, f"an object; got {_kind(si['decode'][0])}")
        si = si["decode"][0]
        notes.append("disaggregated serving: the decode worker's server args")
    if si is not None:
        _sglang_server(_Doc(doc.path, si, f"{doc.prefix}{si_field}."), rec, notes)
    elif api:
        notes.append(
            f"engine from the request backend '{api}'"
            if rec["backend"]
            else f"request backend '{api}' (the engine is not stated)"
        )
    completed = _lengths_and_load(
        doc, rec, notes, (("total_input_tokens", "total_input"), ("total_output_tokens", "total_output"))
    )
    _ttft_tpot(doc, rec)
    dataset = doc.text("dataset_name")
    if dataset:
        lengths = ""
        if dataset.startswith("random"):
            i, o = doc.num("random_input_len"), doc.num("random_output_len")
            r = doc.num("random_range_ratio")
            lengths = f" {_fmt(i)} in / {_fmt(o)} out" + (f", range ratio {_fmt(r, 2)}" if r is not None else "")
        notes.append(f"dataset {dataset}{lengths}")
    tag = doc.value("tag")
    if isinstance(tag, str) and tag.strip():
        notes.append(f"tag {tag.strip()}")
    if api and si is not None:
        notes.append(f"request backend {api}")
    if doc.value("request_rate") == "trace":
        notes.append("request times from a trace")
    _run_notes(doc, notes, completed)
    conc = doc.num("concurrency")
    if conc is not None:
        notes.append(f"mean requests in flight {_fmt(conc, 1)}")
    _peak_and_acceptance(doc, notes, "accept_length", "accept length")
    return _finish(rec, notes)


def _sglang_server(si: _Doc, rec: dict[str, str], notes: list[str]) -> None:
    """Layout, precision and version from SGLang's /get_server_info (its ServerArgs)."""
    if si.has("tp_size") or si.has("version"):
        rec["backend"] = "sglang"
    name = si.text("model_path")
    served = si.text("served_model_name")
    _set_model(rec, notes, name if name and _is_hf_id(name) else (served or name), si.text("tokenizer_path"))
    rec["backend_version"] = si.text("version") or ""
    tp = si.count("tp_size", what="the tensor-parallel size")
    pp = si.count("pp_size", what="the pipeline-parallel size")
    dp = si.count("dp_size", what="the data-parallel size") or 1
    ep = si.count("ep_size", what="the expert-parallel size") or 1
    dp_attention = bool(si.flag("enable_dp_attention"))
    if tp:
        if dp_attention and dp > 1 and tp % dp == 0:
            rec["tp"], rec["attention_dp"] = str(tp // dp), str(dp)
        else:
            rec["tp"], rec["attention_dp"] = str(tp), "1"
            if dp > 1:
                notes.append(f"dp_size {dp}: {dp} engine replicas of tp {tp}")
        rec["moe_ep"] = str(ep)
        rec["moe_tp"] = str(tp // ep) if tp % ep == 0 else ""
    if pp:
        rec["pp"] = str(pp)
    quant, dtype = si.text("quantization"), si.text("dtype")
    if quant:
        rec["precision"], rec["weight_quant"] = _precision(quant)
        notes.append(f"--quantization {quant}" + ("" if rec["precision"] else " (precision not known)"))
    elif dtype:
        notes.append(f"dtype {dtype} without --quantization (a pre-quantised checkpoint does not show here)")
    kv = si.text("kv_cache_dtype")
    if kv and kv != "auto":
        notes.append(f"KV cache {kv}")


# --------------------------------------------------------------------------------------------
# genai-perf and aiperf (one object per metric, plus input_config)
# --------------------------------------------------------------------------------------------

_TIME_UNITS = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3, "sec": 1e3}


def _metric(doc: _Doc, name: str, *, time: bool = False) -> tuple[float | None, float | None]:
    """(p50, avg) of a metric object, time metrics in ms."""
    m = doc.obj(name)
    if m is None:
        return None, None
    factor = 1.0
    if time:
        unit = doc.text(f"{name}.unit") or "ms"
        if unit.lower() not in _TIME_UNITS:
            raise doc.error(f"{name}.unit", f"a time unit (ms, us, ns or s); got {unit!r}")
        factor = _TIME_UNITS[unit.lower()]
    p50, avg = doc.num(f"{name}.p50"), doc.num(f"{name}.avg")
    if p50 is None and avg is None:
        raise doc.error(name, "an object with 'p50' or 'avg'")
    return (None if p50 is None else p50 * factor), (None if avg is None else avg * factor)


def _perf_metrics(doc: _Doc, rec: dict[str, str], notes: list[str], tool: str) -> None:
    ttft = _metric(doc, "time_to_first_token", time=True)
    if ttft == (None, None):
        raise doc.error(
            "time_to_first_token",
            f"an object with 'p50' or 'avg' (ms); the file has none (a {tool} run with --streaming is needed)",
        )
    _latency(rec, ttft, _metric(doc, "inter_token_latency", time=True))
    for col, name in (("isl", "input_sequence_length"), ("osl", "output_sequence_length")):
        p50, avg = _metric(doc, name)
        if avg is not None:
            rec[col] = str(round(avg))
            if not float(avg).is_integer():
                notes.append(f"mean {name.replace('_', ' ')} {_fmt(avg, 2)} tokens")
    _, tput = _metric(doc, "output_token_throughput")
    rec["output_tokens_per_s_total"] = _fmt(tput, 2)


def _perf_notes(doc: _Doc, notes: list[str]) -> None:
    _, count = _metric(doc, "request_count")
    if count is not None:
        notes.append(f"{_fmt(count)} requests")
    _, rps = _metric(doc, "request_throughput")
    if rps is not None:
        notes.append(f"{_fmt(rps, 2)} requests/s")
    for name, label in (("time_to_first_token", "p99 TTFT"), ("inter_token_latency", "p99 TPOT")):
        if doc.obj(name) is not None:
            p99 = doc.num(f"{name}.p99")
            unit = (doc.text(f"{name}.unit") or "ms").lower()
            if p99 is not None and unit in _TIME_UNITS:
                notes.append(f"{label} {_fmt(p99 * _TIME_UNITS[unit], 2)} ms")


def _config_lengths(rec: dict[str, str], doc: _Doc, isl_key: str, osl_key: str, notes: list[str]) -> None:
    """Configured synthetic lengths where the metrics lack the measured ones."""
    for col, key in (("isl", isl_key), ("osl", osl_key)):
        if not rec[col]:
            v = doc.num(key)
            if v is not None and v > 0:
                rec[col] = str(round(v))
                notes.append(f"{col} as configured ({key})")


def _read_genai_perf(doc: _Doc) -> dict[str, str]:
    rec, notes = _blank(), []
    ic = "input_config"
    doc.obj(ic, required=True)
    new = any(doc.has(f"{ic}.{k}") for k in ("model_names", "endpoint", "perf_analyzer"))
    if new:
        models = doc.texts(f"{ic}.model_names")
        ep = f"{ic}.endpoint"
        if doc.value(ep) is not None:
            doc.obj(ep)
        kind, backend = doc.text(f"{ep}.service_kind"), doc.text(f"{ep}.backend")
        etype, streaming = doc.text(f"{ep}.type"), doc.flag(f"{ep}.streaming")
        tokenizer = doc.text(f"{ic}.tokenizer.name")
        stim = f"{ic}.perf_analyzer.stimulus"
        if doc.value(stim) is not None:
            doc.obj(stim)
        conc, rate = doc.count(f"{stim}.concurrency", what="the concurrency"), doc.rate(f"{stim}.request_rate")
        isl_key, osl_key = f"{ic}.input.synthetic_tokens.mean", f"{ic}.input.output_tokens.mean"
    else:
        models = doc.texts(f"{ic}.model")
        kind, backend = doc.text(f"{ic}.service_kind"), doc.text(f"{ic}.backend")
        etype, streaming = doc.text(f"{ic}.endpoint_type"), doc.flag(f"{ic}.streaming")
        tokenizer = doc.text(f"{ic}.tokenizer")
        conc, rate = doc.count(f"{ic}.concurrency", what="the concurrency"), doc.rate(f"{ic}.request_rate")
        isl_key, osl_key = f"{ic}.synthetic_input_tokens_mean", f"{ic}.output_tokens_mean"
    _set_model(rec, notes, models[0] if models else None, tokenizer)
    if len(models) > 1:
        notes.append(f"{len(models)} models: {', '.join(models)}")
    if kind == "triton":
        rec["backend"] = _engine(backend)
        notes.append(f"Triton server, {backend or 'unnamed'} backend")
    elif kind == "tensorrtllm_engine":
        rec["backend"] = "trtllm"
        notes.append("TensorRT-LLM engine in process (service kind tensorrtllm_engine)")
    else:
        notes.append(f"{kind or 'unknown'} service{f', {etype} endpoint' if etype else ''}: the engine is not stated")
    rec["concurrency"] = "" if conc is None else str(conc)
    rec["request_rate"] = _fmt(rate, 4)
    _perf_metrics(doc, rec, notes, "genai-perf")
    _config_lengths(rec, doc, isl_key, osl_key, notes)
    if streaming is False:
        notes.append("not streaming")
    _perf_notes(doc, notes)
    return _finish(rec, notes)


def _read_aiperf(doc: _Doc) -> dict[str, str]:
    rec, notes = _blank(), []
    ic = "input_config"
    doc.obj(ic, required=True)
    for section in ("endpoint", "loadgen", "input", "tokenizer"):
        if doc.value(f"{ic}.{section}") is not None:
            doc.obj(f"{ic}.{section}")
    models = doc.texts(f"{ic}.endpoint.model_names")
    _set_model(rec, notes, models[0] if models else None, doc.text(f"{ic}.tokenizer.name"))
    if len(models) > 1:
        notes.append(f"{len(models)} models: {', '.join(models)}")
    etype = doc.text(f"{ic}.endpoint.type")
    notes.append(f"{etype or 'OpenAI-compatible'} endpoint: the engine is not stated")
    conc = doc.count(f"{ic}.loadgen.concurrency", what="the concurrency")
    rate = doc.rate(f"{ic}.loadgen.request_rate")
    rec["concurrency"] = "" if conc is None else str(conc)
    rec["request_rate"] = _fmt(rate, 4)
    _perf_metrics(doc, rec, notes, "aiperf")
    _config_lengths(rec, doc, f"{ic}.input.prompt.input_tokens.mean", f"{ic}.input.prompt.output_tokens.mean", notes)
    if doc.flag(f"{ic}.endpoint.streaming") is False:
        notes.append("not streaming")
    _perf_notes(doc, notes)
    _, duration = _metric(doc, "benchmark_duration")
    unit = (doc.text("benchmark_duration.unit") or "sec").lower() if doc.obj("benchmark_duration") else "sec"
    if duration is not None and unit in _TIME_UNITS:
        notes.append(f"duration {_fmt(duration * _TIME_UNITS[unit] / 1e3, 1)} s")
    if doc.flag("was_cancelled"):
        notes.append("the run was cancelled")
    return _finish(rec, notes)


# --------------------------------------------------------------------------------------------
# trtllm-bench --report_json
# --------------------------------------------------------------------------------------------


def _read_trtllm(doc: _Doc) -> dict[str, str]:
    rec, notes = _blank(), []
    doc.obj("engine", required=True)
    rec["backend"] = "trtllm"
    _set_model(rec, notes, doc.text("engine.model"))
    if not rec["model"]:
        path = doc.text("engine.model_path")
        _set_model(rec, notes, None if path in (None, "None") else path)
    rec["backend_version"] = doc.text("engine.version") or ""
    quant, dtype = doc.text("engine.quantization"), doc.text("engine.dtype")
    rec["precision"], rec["weight_quant"] = _precision(quant, dtype)
    notes.append(
        f"{doc.text('engine.backend') or 'unnamed'} backend, "
        + (f"quantization {quant}" if quant else f"dtype {dtype or 'not stated'}")
        + ("" if rec["precision"] else " (precision not known)")
    )
    kv = doc.text("engine.kv_cache_dtype")
    if kv:
        notes.append(f"KV cache {kv}")
    if doc.obj("machine") is not None:
        gpu = doc.text("machine.name")
        if gpu:
            rec["gpu"] = _gpu(gpu)
            if not rec["gpu"]:
                notes.append(f"GPU '{gpu}' is not in the catalog")
    world = "world_info"
    doc.obj(world, required=True)
    tp = doc.count(f"{world}.tp_size", required=True, what="the tensor-parallel size")
    pp = doc.count(f"{world}.pp_size", what="the pipeline-parallel size")
    ep = doc.num(f"{world}.ep_size", what="the expert-parallel size")
    rec["tp"] = str(tp)
    rec["pp"] = "" if pp is None else str(pp)
    if ep is not None and ep >= 1 and ep == int(ep):
        rec["moe_ep"] = str(int(ep))
        rec["moe_tp"] = str(tp // int(ep)) if tp and tp % int(ep) == 0 else ""
    size = doc.count(f"{world}.world_size", what="the number of GPUs")
    if size:
        notes.append(f"world size {size}")
    for key, label in (("max_batch_size", "max batch"), ("max_num_tokens", "max tokens")):
        v = doc.num(f"{world}.{key}")
        if v is not None:
            notes.append(f"{label} {_fmt(v)}")
    req = doc.obj("request_info")
    for col, key, fallback, what in (
        ("isl", "avg_input_length", "avg_isl", "input"),
        ("osl", "avg_output_length", "avg_osl", "output"),
    ):
        v = doc.num(f"request_info.{key}", what="tokens") if req is not None else None
        if v is None and doc.obj("dataset") is not None:
            v = doc.num(f"dataset.{fallback}", what="tokens")
        if v is not None:
            rec[col] = str(round(v))
            if not float(v).is_integer():
                notes.append(f"mean {what} {_fmt(v, 2)} tokens")
    inflight = doc.num("request_info.avg_num_concurrent_requests", what="requests") if req else None
    if inflight is not None and inflight > 0:
        rec["concurrency"] = str(max(1, round(inflight)))
        notes.append(
            f"concurrency = measured mean requests in flight ({_fmt(inflight, 2)}); the "
            "report does not record --concurrency"
        )
    perf = "performance"
    doc.obj(perf, required=True)
    tput = doc.num(f"{perf}.system_output_throughput_tok_s", required=True, what="output tokens per second")
    rec["output_tokens_per_s_total"] = _fmt(tput, 2)
    if doc.obj("streaming_metrics") is not None:
        sm = "streaming_metrics"
        for name in ("ttft_percentiles", "tpot_percentiles"):
            doc.obj(f"{sm}.{name}")
        ttft = (
            doc.num(f"{sm}.ttft_percentiles.p50", what="milliseconds"),
            doc.num(f"{sm}.avg_ttft_ms", what="milliseconds")
            if doc.has(f"{sm}.avg_ttft_ms")
            else doc.num(f"{sm}.ttft_percentiles.average"),
        )
        tpot = (
            doc.num(f"{sm}.tpot_percentiles.p50", what="milliseconds"),
            doc.num(f"{sm}.avg_tpot_ms", what="milliseconds")
            if doc.has(f"{sm}.avg_tpot_ms")
            else doc.num(f"{sm}.tpot_percentiles.average"),
        )
        if ttft == (None, None) and tpot == (None, None):
            raise doc.error(f"{sm}.ttft_percentiles.p50", "a number (ms): streaming_metrics has no TTFT or TPOT")
        _latency(rec, ttft, tpot)
        for name, label in (("ttft_percentiles", "p99 TTFT"), ("tpot_percentiles", "p99 TPOT")):
            v = doc.num(f"{sm}.{name}.p99")
            if v is not None:
                notes.append(f"{label} {_fmt(v, 2)} ms")
    else:
        notes.append("not streaming: no TTFT/TPOT in the report")
    n = doc.num("request_info.num_requests") if req else None
    if n is not None:
        notes.append(f"{_fmt(n)} requests")
    total = doc.num(f"{perf}.total_latency_ms")
    if total is not None:
        notes.append(f"duration {_fmt(total / 1e3, 1)} s")
    rate = doc.num(f"{world}.issue_rate")
    if rate is not None:
        notes.append(f"issue rate {_fmt(rate, 2)} requests/s")
    mode = doc.value("decoding_stats.mode") if doc.obj("decoding_stats") is not None else None
    if isinstance(mode, str) and mode:
        notes.append(f"speculative decoding {mode}")
    dataset = doc.value("dataset.dataset_path") if doc.obj("dataset") is not None else None
    if isinstance(dataset, str) and dataset not in ("", "None"):
        notes.append(f"dataset {PurePosixPath(dataset).name}")
    return _finish(rec, notes)


# --------------------------------------------------------------------------------------------
# measured.csv layout
# --------------------------------------------------------------------------------------------


def _read_measured_csv(p: Path, text: str) -> list[dict[str, str]]:
    out = []
    reader = csv.DictReader(io.StringIO(text))
    try:
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = sorted(MEASURED_COLUMNS - set(header))
        if missing:
            raise ResultsFormatError(
                p, "line 1 (CSV header)", f"the columns of measured.csv (missing {', '.join(missing)})"
            )
        for raw in reader:
            if None in raw:
                raise ResultsFormatError(
                    p, f"line {reader.line_num}", f"{len(header)} comma-separated values like the header"
                )
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items()}
            if not any(row.values()):
                continue
            rec = {c: row.get(c, "") for c in COLUMNS}
            rec.update({k: v for k, v in row.items() if k and k not in rec})
            if not rec["source"]:
                rec["source"] = f"measured-csv:{p.name}#{reader.line_num}"
            out.append(rec)
    except csv.Error as exc:
        raise ResultsFormatError(p, f"line {reader.line_num}", f"CSV ({exc})") from None
    return out


_READERS = {
    "vllm-bench": _read_vllm,
    "sglang-bench": _read_sglang,
    "genai-perf": _read_genai_perf,
    "aiperf": _read_aiperf,
    "trtllm-bench": _read_trtllm,
}
