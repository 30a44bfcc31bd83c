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

# Bounds of a custom model's dimensions: each 10-100x the largest published model's (2026:
# Llama-3.1-405B hidden 16,384 / FFN 53,248 / 128 heads; DeepSeek-V3 kv_lora_rank 512, 256
# experts, 8 per token; Kimi-K2 384 experts; vocabularies <= 262,144; contexts <= 10 M tokens,
# Llama-4-Scout), so no real architecture is refused and no product of them overflows the rules'
# arithmetic (engine/lang/expr.py MAX_NUMBER).
CUSTOM_MODEL_FIELDS: dict[str, dict[str, Any]] = {
    "name": {"type": "string", "minLength": 1, "maxLength": 200},
    "params_b": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
    "active_params_b": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
    "num_layers": {"type": "integer", "minimum": 1, "maximum": 1000},
    "hidden_size": {"type": "integer", "minimum": 1, "maximum": 1000000},
    "num_attention_heads": {"type": "integer", "minimum": 1, "maximum": 10000},
    "num_kv_heads": {"type": "integer", "minimum": 1, "maximum": 10000},
    "head_dim": {"type": "integer", "minimum": 1, "maximum": 10000},
    "intermediate_size": {"type": "integer", "minimum": 1, "maximum": 4000000},
    "vocab_size": {"type": "integer", "minimum": 1, "maximum": 10000000},
    "max_context": {"type": "integer", "minimum": 1, "maximum": 100000000},
    "attention_type": {"enum": ["MHA", "GQA", "MQA", "MLA"]},
    "kv_lora_rank": {"type": "integer", "minimum": 1, "maximum": 100000},
    "qk_rope_head_dim": {"type": "integer", "minimum": 1, "maximum": 10000},
    "num_experts": {"type": "integer", "minimum": 1, "maximum": 100000},
    "experts_per_token": {"type": "integer", "minimum": 1, "maximum": 1000},
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


input_error = _error  # for the modules that check a workload against the catalog (engine/app/plan.py)


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


# traffic fields a ``models:`` entry may give for its own pool (CONTRACTS, turn 3: per-model lengths)
POOL_TRAFFIC = ("avg_input_tokens", "avg_output_tokens", "max_context_tokens")


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
        qps = input_def("traffic.peak_qps")
        s = {"type": "array", "minItems": 1, "items": {
            "type": "object",
            "properties": {"model": _field_schema(input_def("model")),
                           "peak_qps": {"type": "number", "exclusiveMinimum": 0, "maximum": qps.maximum},
                           "tenant": {"type": "string", "maxLength": 200},
                           **{k: _field_schema(input_def(f"traffic.{k}")) for k in POOL_TRAFFIC}},
            "required": ["model"], "additionalProperties": False}}
        if d.maximum is not None:
            s["maxItems"] = int(d.maximum)
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


def _specific(err: Any) -> Any:
    """The error inside a ``nullable`` or ``models`` alternative (anyOf/oneOf) that names the field
    at fault: the one in the branch of the value's own JSON type (a list, not null), deepest first.
    A model field's alternatives (name or mapping) are described by validate_workload itself."""
    while err.validator in ("anyOf", "oneOf") and err.context:
        d = _def_at(list(err.absolute_path))
        if d is not None and d.type == "model":
            return err
        want = _json_types(err.instance)
        typed = [e for e in err.context if _branch_type(err, e) in want]
        if not typed:
            return err
        err = max(typed, key=lambda e: len(e.absolute_path))
    return err


def _json_types(value: Any) -> set[str | None]:
    """The JSON Schema types ``value`` has (None: a branch that names no type)."""
    if isinstance(value, bool):
        return {"boolean", None}
    if isinstance(value, (int, float)):
        return {"number", "integer", None}
    kinds = {dict: "object", list: "array", str: "string", type(None): "null"}
    return {kinds.get(type(value)), None}


def _branch_type(parent: Any, sub: Any) -> str | None:
    schema = parent.validator_value[sub.relative_schema_path[0]] if sub.relative_schema_path else {}
    return schema.get("type") if isinstance(schema, dict) else None


def _def_at(path_items: list) -> InputDef | None:
    """The input definition of a path in the workload (``models.2.model`` is a model field)."""
    dotted = ".".join(str(p) for p in path_items)
    if len(path_items) == 3 and path_items[0] == "models" and path_items[2] == "model":
        dotted = "model"
    elif len(path_items) == 3 and path_items[0] == "models" and path_items[2] == "peak_qps":
        dotted = "traffic.peak_qps"
    elif len(path_items) == 3 and path_items[0] == "models" and path_items[2] in POOL_TRAFFIC:
        dotted = f"traffic.{path_items[2]}"
    try:
        return input_def(dotted)
    except KeyError:
        return None


def validate_workload(data: Any, file: str = "<workload>", lines: Lines | None = None) -> None:
    """Raise :class:`WorkloadError` for the first problem (unknown key, wrong type, range)."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise _error(file, 1, "", "input.not_mapping")
    _check_plain(data, (), file, lines)
    if valid(_fast_check(), data):
        _check_custom_models(data, file, lines)
        _check_traffic(data, file, lines)
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
        err = _specific(err)
        path_items = list(err.absolute_path)
        dotted = ".".join(map(str, path_items))
        d = _def_at(path_items)
        if err.validator == "maxItems" and d is not None and d.type == "models":
            raise _error(file, line_of(lines, tuple(path_items)), dotted, "input.too_many_models",
                         max=int(d.maximum or 0), got=len(err.instance))
        if err.validator in ("oneOf", "anyOf") and d is not None and d.type == "model":
            branch = 1 if isinstance(err.instance, dict) else 0
            sub = [e for e in err.context if e.relative_schema_path[0] == branch]
            line = line_of(lines, tuple(path_items))
            if sub:
                where = list(sub[0].absolute_path)
                if len(where) > len(path_items):  # a field of a custom model: named
                    dotted, line = ".".join(map(str, where)), line_of(lines, tuple(where))
                raise _error(file, line, dotted, "input.model_expected_detail", detail=sub[0].message)
            raise _error(file, line, dotted, "input.model_expected")
        described = _describe(err, d)
        if described is None:
            raise WorkloadError(file, line_of(lines, tuple(path_items)), dotted, err.message)
        raise _error(file, line_of(lines, tuple(path_items)), dotted, described[0], **described[1])
    _check_custom_models(data, file, lines)
    _check_traffic(data, file, lines)


def _check_traffic(data: dict[str, Any], file: str, lines: Lines) -> None:
    """Requests per day cannot exceed a whole day at the peak rate (one model's traffic; with
    ``models:`` each pool has its own peak)."""
    traffic = data.get("traffic") or {}
    per_day = traffic.get("requests_per_day")
    if per_day is None or data.get("models"):
        return
    peak = traffic.get("peak_qps", input_def("traffic.peak_qps").default)
    if per_day > peak * 86400:
        where = ("traffic", "requests_per_day")
        raise _error(file, line_of(lines, where), "traffic.requests_per_day", "input.day_above_peak",
                     per_day=f"{per_day:,.0f}", peak=f"{peak:g}", most=f"{peak * 86400:,.0f}")


def _check_custom_models(data: dict[str, Any], file: str, lines: Lines) -> None:
    """What the schema cannot say of a custom model (its fields are each in range already): the
    dimensions must describe a transformer the serving engines can run."""
    specs: list[tuple[tuple, Any]] = [(("model",), data.get("model"))]
    specs += [(("models", i, "model"), e.get("model")) for i, e in enumerate(data.get("models") or [])]
    for path, spec in specs:
        if not isinstance(spec, dict):
            continue
        heads, kv = spec["num_attention_heads"], spec.get("num_kv_heads")
        problem: tuple[str, str, dict[str, Any]] | None = None
        if "head_dim" not in spec and spec["hidden_size"] < heads:
            problem = ("hidden_size", "input.custom_head_dim", {"hidden": spec["hidden_size"], "heads": heads})
        elif kv is not None and (kv > heads or heads % kv):
            problem = ("num_kv_heads", "input.custom_kv_heads", {"heads": heads, "kv": kv})
        elif spec.get("num_experts", 1) > 1 and spec.get("experts_per_token", 0) >= spec["num_experts"]:
            problem = ("experts_per_token", "input.custom_experts",
                       {"k": spec["experts_per_token"], "n": spec["num_experts"]})
        elif spec.get("active_params_b", 0) > spec["params_b"]:
            problem = ("active_params_b", "input.custom_active",
                       {"active": spec["active_params_b"], "total": spec["params_b"]})
        if problem:
            where = (*path, problem[0])
            raise _error(file, line_of(lines, where), ".".join(map(str, where)), problem[1], **problem[2])


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
