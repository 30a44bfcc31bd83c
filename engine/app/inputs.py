"""Workload inputs: definitions (facts/inputs.yaml), the generated JSON Schema, validation with
field paths and suggestions, and default filling."""

from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.common.schema_check import Check, compiled, jsonschema_validator, valid
from servewise.engine.common.yamlio import Lines, YamlError, line_of, load_file

INPUTS_FILE = PACKAGE_ROOT / "facts" / "inputs.yaml"

CUSTOM_MODEL_FIELDS: dict[str, dict[str, Any]] = {
    "name": {"type": "string"},
    "params_b": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
    "active_params_b": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
    "num_layers": {"type": "integer", "minimum": 1, "maximum": 1000},
    "hidden_size": {"type": "integer", "minimum": 1, "maximum": 1000000},
    "num_attention_heads": {"type": "integer", "minimum": 1, "maximum": 10000},
    "num_kv_heads": {"type": "integer", "minimum": 1, "maximum": 10000},
    "head_dim": {"type": "integer", "minimum": 1, "maximum": 10000},
    "intermediate_size": {"type": "integer", "minimum": 1},
    "vocab_size": {"type": "integer", "minimum": 1},
    "max_context": {"type": "integer", "minimum": 1},
    "attention_type": {"enum": ["MHA", "GQA", "MQA", "MLA"]},
    "kv_lora_rank": {"type": "integer", "minimum": 1},
    "qk_rope_head_dim": {"type": "integer", "minimum": 1},
    "num_experts": {"type": "integer", "minimum": 1},
    "experts_per_token": {"type": "integer", "minimum": 1},
}


class WorkloadError(ValueError):
    """A workload file is invalid. ``path`` is the dotted field path."""

    def __init__(self, file: str, line: int, path: str, message: str, code: str | None = None,
                 **args: Any):
        path, message = shown(path, 120), shown(message, 400)  # always one readable line
        self.file, self.line, self.path, self.message = file, line, path, message
        self.code, self.args_ = code, args
        super().__init__(self._where(message))

    def _where(self, text: str) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {text}"

    def text(self, lang: str = "en") -> str:
        """The one-line message in ``lang`` (facts/messages/inputs.yaml); English if it has no code."""
        if self.code is None or lang == "en":
            return str(self)
        from servewise.engine.common.messages import message
        return self._where(shown(message(self.code, lang, **self.args_), 400))


def _error(file: str, line: int, path: str, code: str, **args: Any) -> WorkloadError:
    """A WorkloadError whose English text comes from the same catalog entry as its translations."""
    from servewise.engine.common.messages import message
    return WorkloadError(file, line, path, message(code, "en", **args), code, **args)


@dataclass(frozen=True)
class InputDef:
    key: str
    type: str
    default: Any
    nullable: bool
    required: bool
    unit: str | None
    choices: tuple | None
    minimum: float | None
    maximum: float | None
    question: dict[str, str]
    help: dict[str, str]
    ask_if: str | None
    labels: dict[str, dict[str, str]] = field(default_factory=dict, hash=False, compare=False)


@lru_cache(maxsize=1)
def input_defs() -> tuple[InputDef, ...]:
    from servewise.engine.common.rulecache import cached_yaml

    raw = cached_yaml(INPUTS_FILE)  # every plan reads it: through the cache (engine/common/rulecache.py)
    return tuple(
        InputDef(
            key=d["key"], type=d["type"], default=d.get("default"),
            nullable=bool(d.get("nullable", False)), required=bool(d.get("required", False)),
            unit=d.get("unit"), choices=tuple(d["choices"]) if "choices" in d else None,
            minimum=d.get("min"), maximum=d.get("max"), question=d["question"],
            help=d.get("help", {}), ask_if=d.get("ask_if"), labels=d.get("labels") or {},
        )
        for d in raw
    )


def input_def(key: str) -> InputDef:
    for d in input_defs():
        if d.key == key:
            return d
    raise KeyError(key)


def _field_schema(d: InputDef) -> dict[str, Any]:
    s: dict[str, Any]
    if d.type == "model":
        s = {"oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "object", "properties": CUSTOM_MODEL_FIELDS,
             "required": ["name", "params_b", "num_layers", "hidden_size", "num_attention_heads"],
             "additionalProperties": False},
        ]}
    elif d.type == "models":
        s = {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "properties": {"model": _field_schema(input_def("model")),
                           "peak_qps": {"type": "number", "exclusiveMinimum": 0},
                           "tenant": {"type": "string"}},
            "required": ["model"], "additionalProperties": False}}
    elif d.type == "choice":
        s = {"enum": list(d.choices or ())}
    elif d.type == "choices":
        s = {"type": "array", "items": {"enum": list(d.choices or ())}, "uniqueItems": True}
    elif d.type == "strings":
        s = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    elif d.type in ("number", "integer"):
        s = {"type": d.type}
        if d.minimum is not None:
            s["minimum"] = d.minimum
        if d.maximum is not None:
            s["maximum"] = d.maximum
    elif d.type == "boolean":
        s = {"type": "boolean"}
    else:
        s = {"type": "string"}
    if d.unit:
        s["description"] = f"unit: {d.unit}"
    if d.nullable:
        s = {"anyOf": [s, {"type": "null"}]}
    if d.default is not None:
        s["default"] = d.default
    return s


@lru_cache(maxsize=1)
def workload_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of the workload file, generated from facts/inputs.yaml."""
    root: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "servewise workload", "type": "object", "properties": {},
        "additionalProperties": False,
        "anyOf": [{"required": ["model"]}, {"required": ["models"]}],
    }
    for d in input_defs():
        node = root
        parts = d.key.split(".")
        for part in parts[:-1]:
            node = node["properties"].setdefault(
                part, {"type": "object", "properties": {}, "additionalProperties": False})
        node["properties"][parts[-1]] = _field_schema(d)
    return root


@lru_cache(maxsize=1)
def _validator() -> Any:
    return jsonschema_validator(workload_schema())  # describes an invalid workload


@lru_cache(maxsize=1)
def _fast_check() -> Check | None:
    return compiled(workload_schema())


def _known_keys(schema: dict[str, Any], path: list) -> list[str]:
    node = schema
    for part in path:
        node = node.get("properties", {}).get(part, {})
        if "items" in node:
            node = node["items"]
    return sorted(node.get("properties", {}))


def _describe(error: Any, d: InputDef | None) -> tuple[str, dict[str, Any]] | None:
    """The message code and arguments for a type or range error of a known field (None: generic)."""
    got = repr(error.instance)
    if d is None:
        return None
    if d.type in ("number", "integer"):
        rng = f"{d.minimum}..{d.maximum}" if d.minimum is not None else "any"
        code = "input.expected_integer" if d.type == "integer" else "input.expected_number"
        return code + ("_or_null" if d.nullable else ""), {
            "range": rng, "unit": f" {d.unit}" if d.unit else "", "got": got}
    if d.type == "choice":
        return "input.expected_choice", {"choices": ", ".join(map(str, d.choices or ())), "got": got}
    if d.type == "choices":
        return "input.expected_list", {"choices": ", ".join(map(str, d.choices or ())), "got": got}
    if d.type == "boolean":
        return "input.expected_bool", {"got": got}
    return None


def shown(text: str, limit: int = 40) -> str:
    """A user's key as printed in a one-line message: control characters escaped, long text cut."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _check_plain(node: Any, path: tuple, file: str, lines: Lines) -> None:
    """Keys are text and numbers finite everywhere (NaN passes every JSON Schema range check)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if not isinstance(key, str):
                dotted = ".".join(map(str, path))
                raise _error(file, line_of(lines, path), dotted, "input.key_not_text", key=repr(key))
            _check_plain(value, (*path, key), file, lines)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_plain(value, (*path, i), file, lines)
    elif isinstance(node, float) and not math.isfinite(node):
        raise _error(file, line_of(lines, path), ".".join(map(str, path)), "input.not_finite", got=repr(node))


def validate_workload(data: Any, file: str = "<workload>", lines: Lines | None = None) -> None:
    """Raise :class:`WorkloadError` for the first problem (unknown key, wrong type, range)."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise _error(file, 1, "", "input.not_mapping")
    _check_plain(data, (), file, lines)
    if valid(_fast_check(), data):
        return
    schema = workload_schema()
    validator = _validator()
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    # unknown keys first: a typo explains every other error
    for err in errors:
        if err.validator == "additionalProperties":
            known = _known_keys(schema, [p for p in err.absolute_path if isinstance(p, str)])
            extra = sorted(set(err.instance) - set(known))
            bad = extra[0]
            path = ".".join(map(shown, map(str, [*err.absolute_path, bad])))
            close = difflib.get_close_matches(bad, known, n=1, cutoff=0.5)
            line = line_of(lines, (*err.absolute_path, bad))
            if close:
                raise _error(file, line, path, "input.unknown_key", key=shown(bad), close=close[0])
            raise _error(file, line, path, "input.unknown_key_list", key=shown(bad), known=", ".join(known))
    if errors:
        err = errors[0]
        if err.validator == "anyOf" and not err.absolute_path:
            raise _error(file, 1, "model", "input.missing_model")
        path_items = list(err.absolute_path)
        dotted = ".".join(map(str, path_items))
        try:
            d = input_def(dotted)
        except KeyError:
            d = None
        if err.validator in ("oneOf", "anyOf") and d is not None and d.type == "model":
            branch = 1 if isinstance(err.instance, dict) else 0
            sub = [e for e in err.context if e.relative_schema_path[0] == branch]
            line = line_of(lines, tuple(path_items))
            if sub:
                raise _error(file, line, dotted, "input.model_expected_detail", detail=sub[0].message)
            raise _error(file, line, dotted, "input.model_expected")
        described = _describe(err, d)
        if described is None:
            raise WorkloadError(file, line_of(lines, tuple(path_items)), dotted, err.message)
        raise _error(file, line_of(lines, tuple(path_items)), dotted, described[0], **described[1])


def set_path(data: dict[str, Any], key: str, value: Any) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def get_path(data: dict[str, Any], key: str, default: Any = None) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def has_path(data: dict[str, Any], key: str) -> bool:
    sentinel = object()
    return get_path(data, key, sentinel) is not sentinel


def fill_defaults(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The workload with every default filled in, and the list of defaulted keys."""
    out = copy.deepcopy(data)
    used: list[str] = []
    for d in input_defs():
        if d.key in ("model", "models"):
            if d.key == "models" and not has_path(out, "models"):
                set_path(out, "models", None)
            continue
        if not has_path(out, d.key):
            default = list(d.default) if isinstance(d.default, list) else d.default
            set_path(out, d.key, default)
            used.append(d.key)
    return out, used


def flatten(workload: dict[str, Any]) -> dict[str, Any]:
    """Input facts keyed by dotted path (one per defined input)."""
    return {d.key: get_path(workload, d.key) for d in input_defs()}


def load_workload(path: str | Path) -> tuple[dict[str, Any], list[str]]:
    """Read, validate and default-fill a workload file."""
    try:
        data, lines = load_file(path)
    except YamlError as exc:
        raise WorkloadError(exc.path, exc.line, "", exc.message) from None
    validate_workload(data, str(path), lines)
    return fill_defaults(data)
