"""Read and validate a saved plan (``servewise plan --format json``) before the auditor's tools use it.

A plan file may have been edited by hand or tampered with: it must be strict JSON (no NaN or
Infinity), match ``servewise schema plan``, and its trace links must point backwards at existing
steps. Errors name the file and the JSON path, in one line.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.common.schema_check import Check, best_error, compiled, jsonschema_validator, valid
from servewise.engine.common.yamlio import YamlError, read_text

SCHEMA_FILE = PACKAGE_ROOT / "facts" / "schemas" / "plan.schema.json"
MAX_PLAN_BYTES = 64 << 20  # the largest example plan is about 1 MB
MAX_PLAN_DEPTH = 64  # nesting of objects and arrays; a plan written by servewise is about 11 deep


class PlanFileError(ValueError):
    """An unusable plan file; ``where`` is the JSON path (``trace[3].premises[0].step``) or ''."""

    def __init__(self, file: str, where: str, message: str):
        self.file, self.where, self.message = file, where, message
        super().__init__(f"{file}: {where}: {message}" if where else f"{file}: {message}")


@lru_cache(maxsize=1)
def _plan_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _fast_check() -> Check | None:
    return compiled(_plan_schema())


@lru_cache(maxsize=1)
def plan_validator() -> Any:
    """jsonschema's validator of plan files: what describes an invalid one."""
    return jsonschema_validator(_plan_schema())


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _json_path(parts: Any) -> str:
    """``trace[3].premises[0].step``; a key that is not a plain name is quoted as JSON
    (``because_i18n["\\n"]``), so the path stays on one line and says which key it was."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and _PLAIN_KEY.match(p):
            out += f".{p}" if out else p
        else:
            quoted = json.dumps(p, ensure_ascii=False)
            out += "[" + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in quoted) + "]"
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_plan(text: str, file: str) -> dict[str, Any]:
    """Parse and validate plan JSON text; raise :class:`PlanFileError`."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise PlanFileError(file, f"line {exc.lineno}", f"not a plan JSON file: {exc.msg}") from None
    except RecursionError:
        raise PlanFileError(file, "", "not a plan JSON file: nested too deeply") from None
    except ValueError as exc:
        raise PlanFileError(file, "", f"not a plan JSON file: {exc}") from None
    check_depth(data, file)
    validate_plan(data, file)
    return data


def check_depth(data: Any, file: str, limit: int = MAX_PLAN_DEPTH) -> None:
    """Raise :class:`PlanFileError` (naming the JSON path) when objects and arrays are nested more
    than ``limit`` deep: the auditor's tools (schema check, explain, audit's re-run and comparison)
    walk a plan recursively and would fail with a RecursionError far below Python's limit.
    Level by level, containers only (~6 ms for a 1.4 MB plan)."""
    level, depth = ([data] if isinstance(data, (dict, list)) else []), 0
    while level:
        depth += 1
        if depth > limit:
            raise PlanFileError(file, _too_deep_path(data, limit), _too_deep_message(limit))
        level = [v for node in level for v in (node.values() if isinstance(node, dict) else node)
                 if isinstance(v, (dict, list))]


def _too_deep_message(limit: int) -> str:
    from servewise.engine.common.messages import message

    return message("plan.too_deep", "en", limit=limit)


def _too_deep_path(data: Any, limit: int) -> str:
    """The JSON path (its first parts) of a container nested more than ``limit`` deep."""
    stack: list[tuple[Any, tuple]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        if len(path) >= limit:
            return _json_path(path[:8]) + ("..." if len(path) > 8 else "")
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((v, (*path, k)) for k, v in items if isinstance(v, (dict, list)))
    return "(top level)"


def validate_plan(data: Any, file: str = "<plan>") -> None:
    """Raise :class:`PlanFileError` unless ``data`` is a plan the auditor's tools can use."""
    if not isinstance(data, dict) or "trace" not in data or "knowledge_hash" not in data:
        raise PlanFileError(file, "", "not a servewise plan (make one with servewise plan W.yaml --format json)")
    try:
        error = None if valid(_fast_check(), data) else best_error(plan_validator(), data)
    except RecursionError:
        raise PlanFileError(file, "", "nested too deeply") from None
    if error is not None:
        where = _json_path(error.absolute_path) or "(top level)"
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
        raise PlanFileError(file, where, f"{message} (see servewise schema plan)")
    seen: set[int] = set()
    for i, step in enumerate(data["trace"]):
        n = step["step"]
        if n in seen:
            raise PlanFileError(file, f"trace[{i}].step", f"step {n} appears twice")
        seen.add(n)
        for j, premise in enumerate(step["premises"]):
            if "step" in premise and (premise["step"] == n or premise["step"] not in seen):
                raise PlanFileError(file, f"trace[{i}].premises[{j}].step",
                                    f"points at step {premise['step']}, which is not an earlier step of the trace")
    check_agrees_with_trace(data, file)


CHECKED_SECTIONS = ("components", "performance", "cost")


def check_agrees_with_trace(data: dict[str, Any], file: str = "<plan>") -> None:
    """Raise :class:`PlanFileError` when a value of the plan's components, performance or cost
    differs from what its own trace concluded for it (the last step that set the fact), or the
    capex from its bill of materials (Σ qty × midpoint): the file was edited after it was made,
    so its explanation no longer explains it. Plans of several models combine their pools'
    values outside the trace; for them only the bill of materials is checked."""
    if not data.get("pools"):
        last: dict[str, tuple[int, Any]] = {}
        for step in data["trace"]:
            for c in step["conclusions"]:
                last[c["fact"]] = (step["step"], c.get("value"))
        for section in CHECKED_SECTIONS:
            for name, value in _leaves(data.get(section) or {}, section):
                if name in last and last[name][1] != value:
                    step, concluded = last[name]
                    raise PlanFileError(file, name, f"{_show(value)} but trace step {step} concluded "
                                        f"{_show(concluded)}: the file was edited after it was made")
    capex = (data.get("cost") or {}).get("capex_cny")
    priced = [ln for ln in data.get("bom") or [] if ln.get("unit_price_cny")]
    if capex is not None and priced:
        total = sum(ln["qty"] * (ln["unit_price_cny"][0] + ln["unit_price_cny"][1]) / 2 for ln in priced)
        if abs(total - capex) > max(1.0, 1e-6 * abs(capex)):
            raise PlanFileError(file, "cost.capex_cny", f"{_show(capex)} but the bill of materials adds up to "
                                f"{_show(round(total, 1))}: the file was edited after it was made")


def _leaves(section: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
    """``components.gpu.count``-style names of a section's fields (components: one level down)."""
    if prefix != "components":
        return [(f"{prefix}.{k}", v) for k, v in section.items()]
    return [(f"{prefix}.{comp}.{k}", v) for comp, fields in section.items() if isinstance(fields, dict)
            for k, v in fields.items()]


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)
    return text if len(text) <= 60 else text[:57] + "..."


def load_plan_file(path: str | Path) -> dict[str, Any]:
    """Read a plan file (a regular file, or ``-`` for stdin) and validate it."""
    try:
        text = read_text(path, MAX_PLAN_BYTES)
    except YamlError as exc:
        raise PlanFileError(str(path), "", exc.message) from None
    return parse_plan(text, "<stdin>" if str(path) == "-" else str(path))


def recorded_workload(plan: dict[str, Any], file: str) -> tuple[dict[str, Any], list[str]]:
    """The workload a plan records and its ``defaults_used``, validated as `servewise plan`
    validates a workload file (:func:`~servewise.engine.app.inputs.validate_workload`, the same
    messages) before `audit` re-plans it; raise
    :class:`~servewise.engine.app.inputs.WorkloadError` naming the plan file and the field path
    (``workload.traffic.peak_qps``, ``defaults_used[2]``).

    A plan records the workload with every default filled in, so an input missing from it means
    the file was edited (or written by another version): refused too, as planning it would leave
    the input unset and a rule would fail on it."""
    from servewise.engine.app.inputs import WorkloadError, has_path, input_defs, validate_workload
    from servewise.engine.common.messages import message

    workload = plan["workload"]
    try:
        validate_workload(workload, file)
    except WorkloadError as exc:
        raise in_plan_file(exc, file) from None
    keys = [d.key for d in input_defs()]
    for key in keys:
        if key in ("model", "models"):  # one of them (validated above); a one-model plan lacks `models`
            continue
        if not has_path(workload, key):
            raise WorkloadError(file, 0, f"workload.{key}", message("audit.workload_missing", "en"),
                                "audit.workload_missing")
    defaults = plan.get("defaults_used", [])
    for i, key in enumerate(defaults):
        if key not in keys:
            raise WorkloadError(file, 0, f"defaults_used[{i}]", message("audit.default_unknown", "en", key=key),
                                "audit.default_unknown", key=key)
    return workload, list(defaults)


def in_plan_file(exc: Any, file: str) -> Any:
    """A WorkloadError about a plan's recorded workload, as one about the plan file: ``file``,
    and the field path under ``workload.`` (its message and translations unchanged)."""
    from servewise.engine.app.inputs import WorkloadError

    path = f"workload.{exc.path}" if exc.path else "workload"
    return WorkloadError(file, 0, path, exc.message, exc.code, **exc.args_)
