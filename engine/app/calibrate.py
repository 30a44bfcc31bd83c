"""`servewise calibrate`: benchmark result files → measured rows → a calibration overlay.

The result files (perf.bench_formats: vllm bench serve, SGLang bench_serving, genai-perf,
aiperf, trtllm-bench, the measured.csv layout) say some of what a prediction needs; the caller
fills the rest (``given``: model, GPU, backend, precision, parallelism). A field neither gives is
:class:`CalibrateError` naming the file, the record and the field (exit 2 at the CLI).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.perf.bench_formats import ResultsFormatError, read_results
from servewise.engine.domain.perf.data import Row, read_measured, resolve_gpu, resolve_model
from servewise.engine.domain.perf.overlay import dump_overlay
from servewise.engine.domain.perf.overlay_fit import calibrate

# what a prediction needs of each record, and the option that gives it
NEEDED = {"model": "--model", "gpu": "--gpu", "backend": "--backend", "precision": "--precision",
          "tp": "--tp", "isl": "(input tokens)", "osl": "(output tokens)"}
GIVEN = ("model", "gpu", "backend", "precision", "tp", "pp", "attention_dp", "moe_tp", "moe_ep")
SUFFIXES = re.compile(r"(-(instruct|chat|it|fp8|fp4|nvfp4|awq|gptq|int4|w4a16|w8a8|dynamic))+$",
                      re.IGNORECASE)


class CalibrateError(ValueError):
    """Bad input to calibrate: one line, ``<file>: <where>: <what is expected>``."""


def catalog_name(kind: str, name: str) -> str | None:
    """The catalog name of a model or GPU as a result file writes it (a Hugging Face id such as
    ``meta-llama/Llama-3.1-8B-Instruct``, ``NVIDIA H100 80GB HBM3``), or None."""
    base = name.strip().split("/")[-1]
    tries = [name.strip(), base] + ([SUFFIXES.sub("", base)] if kind == "model" else [])
    resolve = resolve_model if kind == "model" else resolve_gpu  # catalog names and aliases
    for t in dict.fromkeys(x for x in tries if x):
        try:
            return str(resolve(t)["id"])
        except UnknownEntry:
            continue
    return None


def _fill(rec: dict[str, str], given: dict[str, Any], where: str) -> dict[str, str]:
    out = dict(rec)
    for key in GIVEN:
        value = given.get(key)
        if value is None:
            continue
        value = str(value)
        stated = (rec.get(key) or "").strip()
        if stated and key in ("model", "gpu"):
            same = catalog_name(key, stated) == catalog_name(key, value)
        else:
            same = not stated or stated.lower() == value.lower()
        if not same:
            raise CalibrateError(f"{where}: {key}: the file says '{stated}', "
                                 f"{NEEDED.get(key, '--' + key.replace('_', '-'))} says '{value}'")
        out[key] = value
    for key in ("model", "gpu"):
        if out.get(key):
            name = catalog_name(key, out[key])
            if name is None:
                raise CalibrateError(f"{where}: {key}: '{out[key]}' is not in the catalog "
                                     f"(give {NEEDED[key]} with a catalog name)")
            out[key] = name
    for key in ("pp", "attention_dp", "moe_tp", "moe_ep"):
        out[key] = out.get(key) or "1"
    missing = [k for k in NEEDED if not (out.get(k) or "").strip()]
    if missing:
        k = missing[0]
        how = f"give {NEEDED[k]}" if NEEDED[k].startswith("--") else "the file must state it"
        raise CalibrateError(f"{where}: {k}: not stated in the file ({how})")
    return out


def read_rows(paths: list[str], given: dict[str, Any]) -> tuple[list[Row], list[dict[str, str]]]:
    """The measured rows of the result files, each filled from ``given`` and checked."""
    records: list[dict[str, str]] = []
    files = []
    for path in paths:
        try:
            recs = read_results(path)
        except ResultsFormatError as exc:
            raise CalibrateError(str(exc)) from None
        if not recs:
            raise CalibrateError(f"{path}: (file): at least one benchmark result")
        for i, rec in enumerate(recs):
            records.append(_fill(rec, given, f"{path}: record {i + 1}"))
        files.append({"file": Path(path).name,
                      "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()})
    rows = read_measured(records)
    for r, rec in zip(rows, records, strict=True):
        if r.skipped:
            raise CalibrateError(f"{rec.get('source') or 'record'}: cannot be predicted: {r.skipped}")
        if not (r.ttft_ms or r.tpot_ms):
            raise CalibrateError(f"{rec.get('source') or 'record'}: ttft_ms / tpot_ms: "
                                 "a measured TTFT or TPOT")
    return rows, files


def run(paths: list[str], given: dict[str, Any], cross_validate: bool = True
        ) -> tuple[str, dict[str, Any]]:
    """The overlay file's text and the report (scopes with their errors) for ``paths``."""
    rows, files = read_rows(paths, given)
    scopes = calibrate(rows, cross_validate=cross_validate)
    meta = {"fitted_on": files, "rows": len(rows),
            "method": "robust log-error fit of the overlay constants over the shipped "
                      "calibration (engine/domain/perf/overlay_fit.py); cross_validated: "
                      "5-fold, each fold predicted by an overlay fitted on the others"}
    file_scopes = [{"gpu": s["gpu"], "backend": s["backend"], "constants": s["constants"],
                    "fitted": {"rows": s["rows"], "models": s["models"], "error": s["error"]}}
                   for s in scopes]
    return dump_overlay(file_scopes, meta), {"scopes": scopes, **meta}
