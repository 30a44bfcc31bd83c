"""Hypothesis strategies for workloads that the workload schema accepts (`servewise schema workload`),
built from the schema itself, so a field added to facts/inputs.yaml is generated without a change
here. Used by tests/test_valid_workloads.py (a small profile) and tests/bench/probe_workloads.py
(thousands of cases, each planned in a forked process with a time and memory budget).

Numbers are drawn across their whole range, the bounds themselves more often (the probe of issue
#42 found most failures at the edges); strings that name a model come from the catalog (every
kind of entry: LLMs, encoders, ASR, vision, diffusion), with a few unknown names.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

UNBOUNDED_INT = 10**12  # the largest integer drawn for a field without a schema maximum
UNBOUNDED_NUMBER = 1e12


@lru_cache(maxsize=1)
def catalog_model_names() -> tuple[str, ...]:
    from servewise.engine.domain.catalog import load_catalog

    catalog = load_catalog()
    names = [e["id"] for kind in ("models", "vision-models") for e in catalog.table(kind)]
    return tuple(sorted(names))


def _number(schema: dict[str, Any], integer: bool) -> st.SearchStrategy:
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    exclusive_lo = "exclusiveMinimum" in schema and "minimum" not in schema
    if integer:
        lo_i = int(lo) + (1 if exclusive_lo and float(lo).is_integer() else 0) if lo is not None else -UNBOUNDED_INT
        hi_i = int(hi) if hi is not None else UNBOUNDED_INT
        edges = [lo_i, hi_i, min(lo_i + 1, hi_i)]
        return st.one_of(st.sampled_from(edges), st.integers(lo_i, hi_i))
    lo_f = float(lo) if lo is not None else -UNBOUNDED_NUMBER
    hi_f = float(hi) if hi is not None else UNBOUNDED_NUMBER
    floats = st.floats(lo_f, hi_f, allow_nan=False, allow_infinity=False, exclude_min=exclusive_lo)
    edges = [hi_f] + ([] if exclusive_lo else [lo_f])
    ints = st.integers(int(lo_f) + 1 if exclusive_lo or lo_f != int(lo_f) else int(lo_f), int(hi_f))
    return st.one_of(st.sampled_from(edges), floats, ints.filter(lambda v: lo_f < v or not exclusive_lo))


def _string(path: str) -> st.SearchStrategy:
    if path.endswith("model") or path.endswith("name"):
        return st.sampled_from(catalog_model_names() + ("no-such-model",))
    return st.text(min_size=0, max_size=12)


def from_schema(schema: dict[str, Any], path: str = "") -> st.SearchStrategy:
    """A strategy for values ``schema`` accepts (the subset of JSON Schema the workload schema uses)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema and "type" not in schema:
            return st.one_of([from_schema(s, path) for s in schema[key]])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind in ("number", "integer"):
        return _number(schema, kind == "integer")
    if kind == "string":
        return _string(path)
    if kind == "array":
        items = from_schema(schema.get("items", {}), path)
        lo = schema.get("minItems", 0)
        hi = min(schema.get("maxItems", lo + 3), lo + 3)
        unique = schema.get("uniqueItems", False)
        return st.lists(items, min_size=lo, max_size=hi, unique_by=(lambda v: repr(v)) if unique else None)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: from_schema(v, f"{path}.{k}" if path else k) for k, v in props.items() if k in required},
            optional={k: from_schema(v, f"{path}.{k}" if path else k) for k, v in props.items()
                      if k not in required})
    return st.none()


def plausible(data: dict[str, Any]) -> dict[str, Any]:
    """A drawn workload made consistent where the schema cannot say it (what
    engine/app/inputs.py checks across fields): a custom model's KV heads divide its query heads,
    heads fit in the hidden size, experts per token within the experts, active within the total
    parameters; requests per day within a day at the peak. The probe explores plans, not the
    cross-field checks (tests/test_valid_workloads.py tests those)."""
    import math

    def model(spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec
        spec = dict(spec)
        heads = spec["num_attention_heads"]
        if "num_kv_heads" in spec:
            spec["num_kv_heads"] = math.gcd(heads, spec["num_kv_heads"])
        if "head_dim" not in spec and spec["hidden_size"] < heads:
            spec["hidden_size"] = heads
        if "experts_per_token" in spec and "num_experts" in spec:
            spec["experts_per_token"] = max(1, min(spec["experts_per_token"], spec["num_experts"] - 1))
        if spec.get("active_params_b", 0) > spec["params_b"]:
            spec["active_params_b"] = spec["params_b"]
        return spec

    out = dict(data)
    if "model" in out:
        out["model"] = model(out["model"])
    if out.get("models"):
        out["models"] = [{**e, "model": model(e["model"])} for e in out["models"]]
    traffic = out.get("traffic")
    if traffic and traffic.get("requests_per_day") is not None and not out.get("models"):
        peak = traffic.get("peak_qps", 20)
        out["traffic"] = {**traffic, "requests_per_day": min(traffic["requests_per_day"], peak * 86400)}
    return out


@lru_cache(maxsize=1)
def workload_schema() -> dict[str, Any]:
    from servewise.engine.app.inputs import workload_schema as schema

    return schema()


def workloads() -> st.SearchStrategy[dict[str, Any]]:
    """Workloads the schema accepts: `model` or `models` (the schema's top-level anyOf), any other
    group optional, each value drawn from its field's schema."""
    schema = workload_schema()
    base = from_schema({k: v for k, v in schema.items() if k not in ("anyOf", "required")})
    props = schema["properties"]

    def with_model(data: dict[str, Any], draw_one: Any) -> dict[str, Any]:
        if "model" not in data and not data.get("models"):
            data = {**data, "model": draw_one}
            data.pop("models", None)
        return data

    return st.builds(with_model, base, from_schema(props["model"], "model")).map(plausible)
