"""The fact dictionary: every name a rule may read, its type and unit, the stage that first provides
it and who writes it. Built from facts/inputs.yaml, the catalog schema (model architecture) and the
outputs of every loaded rule (derive, choose, propose, select)."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from servewise.engine.common.yamlio import safe_load
from servewise.engine.lang.rulebase import FACTS_DIR, STAGES, RuleBase, RuleSpec

INPUT_STAGE = "input"            # known before the first stage runs
ORDER = {INPUT_STAGE: -1, **{s: i for i, s in enumerate(STAGES)}}
_UNITS = (("_cny_per_kwh", "CNY/kWh"), ("_cny", "CNY"), ("_ms", "ms"), ("_gib", "GiB"),
          ("_gbs", "GB/s"), ("_gb", "GB"), ("_tb", "TB"), ("_kw", "kW"), ("_w", "W"),
          ("_qps", "requests/s"), ("_tokens", "tokens"), ("_months", "months"), ("_b", "billion"),
          ("_c", "°C"), ("_ghz", "GHz"), ("_gbps", "Gbit/s"), ("_kib_per_token", "KiB/token"))

# the model's architecture, declared as facts by the planner (engine/app/plan.py) for rules to read
MODEL_FACT_FIELDS = (
    "total_params_b", "active_params_b", "num_layers", "hidden_size", "num_attention_heads",
    "num_kv_heads", "head_dim", "intermediate_size", "vocab_size", "max_context",
    "attention_type", "kv_lora_rank", "qk_rope_head_dim", "num_experts", "experts_per_token",
    "family", "task", "moe", "mtp_layers",
)


@dataclass
class FactEntry:
    name: str
    type: str
    unit: str | None
    stage: str                       # the stage that first provides it ("input": before all stages)
    writers: list[str] = field(default_factory=list)   # rule ids, or workload / catalog / engine

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _unit(name: str) -> str | None:
    last = name.rsplit(".", 1)[-1]
    for suffix, unit in _UNITS:
        if last.endswith(suffix):
            return unit
    return None


def _type_of_value(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "list"
    return "any"


def _type_of_expr(src: Any) -> str:
    """A best guess of an expression's type from its outermost node."""
    if not isinstance(src, str):
        return _type_of_value(src)
    try:
        node = ast.parse(src.strip(), mode="eval").body
    except SyntaxError:
        return "any"
    if isinstance(node, ast.IfExp):
        node = node.body
    if isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return "boolean"
    if isinstance(node, ast.Constant):
        return _type_of_value(node.value)
    if isinstance(node, (ast.List, ast.Tuple)):
        return "list"
    if isinstance(node, ast.BinOp):
        return "number"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in ("ceil", "floor", "len", "int"):
            return "integer"
        if node.func.id in ("round", "sqrt", "log2", "float", "min", "max", "abs", "sum", "clamp"):
            return "number"
    return "any"


@lru_cache(maxsize=1)
def _inputs() -> list[dict[str, Any]]:
    return safe_load((FACTS_DIR / "inputs.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _model_fields() -> dict[str, str]:
    schema = json.loads((FACTS_DIR / "schemas" / "catalog.schema.json").read_text(encoding="utf-8"))
    props: dict[str, Any] = {}
    for part in schema["$defs"]["model"].get("allOf", []):
        props.update(part.get("properties", {}))
    out = {"id": "string", "served_name": "string"}
    for f in MODEL_FACT_FIELDS:
        t = props.get(f, {}).get("type", "any")
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), "any")
        if "enum" in props.get(f, {}):
            t = "string"
        out[f] = t
    return out


_INPUT_TYPES = {"number": "number", "integer": "integer", "boolean": "boolean", "string": "string",
                "choice": "string", "choices": "list", "model": "string", "models": "list"}
# facts the engine itself declares while planning (engine/app/plan.py, engine/app/pools.py)
ENGINE_FACTS: dict[str, str] = {}


class FactDictionary:
    """Name → :class:`FactEntry`, plus the item kinds (``candidate``) and their attributes."""

    def __init__(self, rulebase: RuleBase):
        self.entries: dict[str, FactEntry] = {}
        for item in _inputs():
            key = item["key"]
            self._add(key, _INPUT_TYPES.get(item.get("type", ""), "any"), item.get("unit"),
                      INPUT_STAGE, "workload")
        for f, t in _model_fields().items():
            self._add(f"model.{f}", t, _unit(f), INPUT_STAGE, "catalog")
        for name, t in ENGINE_FACTS.items():
            self._add(name, t, _unit(name), INPUT_STAGE, "engine")
        self.kinds: dict[str, str] = {}      # item kind → stage it is first proposed in
        for spec in sorted(rulebase.rules, key=lambda r: (ORDER[r.stage], r.load_order)):
            self._rule_outputs(spec)

    # -------------------------------------------------------------- building
    def _add(self, name: str, typ: str, unit: str | None, stage: str, writer: str) -> None:
        entry = self.entries.get(name)
        if entry is None:
            self.entries[name] = FactEntry(name, typ, unit or _unit(name), stage, [writer])
            return
        if ORDER[stage] < ORDER[entry.stage]:
            entry.stage = stage
        if entry.type == "any" and typ != "any":
            entry.type = typ
        if writer not in entry.writers:
            entry.writers.append(writer)

    def _rule_outputs(self, spec: RuleSpec) -> None:
        for a in spec.actions:
            if a.kind == "derive":
                for key, src in a.spec.items():
                    self._add(key, _type_of_expr(src), None, spec.stage, spec.id)
            elif a.kind == "choose":
                comp = a.spec["component"]
                for key, v in (a.spec.get("set") or {}).items():
                    self._add(f"components.{comp}.{key}", _type_of_value(v), None, spec.stage, spec.id)
                for key, src in (a.spec.get("compute") or {}).items():
                    self._add(f"components.{comp}.{key}", _type_of_expr(src), None, spec.stage, spec.id)
            elif a.kind == "propose":
                kind = a.spec["kind"]
                self.kinds.setdefault(kind, spec.stage)
                self._add(f"{kind}.id", "string", None, spec.stage, spec.id)
                for key, src in a.spec["attrs"].items():
                    self._add(f"{kind}.{key}", _type_of_expr(src), None, spec.stage, spec.id)
            elif a.kind == "least" and spec.for_each:
                of = self.entries.get(f"{spec.for_each}.{a.spec['of']}")
                self._add(f"{spec.for_each}.{a.spec['as']}", of.type if of else "number", None, spec.stage, spec.id)
                self._add(f"{spec.for_each}.{a.spec['as']}_id", "string", None, spec.stage, spec.id)
            elif a.kind == "select":
                kind, alias = a.spec["kind"], a.spec["as"]
                self._add(f"{alias}.id", "string", None, spec.stage, spec.id)
                for name in [n for n in self.entries if n.startswith(kind + ".")]:
                    attr = name[len(kind) + 1:]
                    self._add(f"{alias}.{attr}", self.entries[name].type, None, spec.stage, spec.id)

    # -------------------------------------------------------------- queries
    def get(self, name: str) -> FactEntry | None:
        return self.entries.get(name)

    def suggest(self, name: str) -> str | None:
        import difflib

        close = difflib.get_close_matches(name, list(self.entries), n=1, cutoff=0.75)
        return close[0] if close else None

    def listing(self, stage: str | None = None) -> list[FactEntry]:
        """Entries available in ``stage`` (all if None), sorted by name."""
        out = sorted(self.entries.values(), key=lambda e: e.name)
        if stage:
            out = [e for e in out if ORDER[e.stage] <= ORDER[stage]]
        return out


def is_item_attr(name: str, kinds: dict[str, str]) -> bool:
    return name.split(".")[0] in kinds


_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
