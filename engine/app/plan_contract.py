"""What a plan is made of (CONTRACTS §4), shared by planning one model (engine/app/plan.py) and
combining several pools (engine/app/pools.py) without either importing the other's internals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servewise.engine.lang.rulebase import guidelines
from servewise.engine.runtime.justify import settle
from servewise.engine.runtime.memory import Memory

COMPONENT_FIELDS: dict[str, tuple[str, ...]] = {
    "gpu": ("model", "count", "per_server", "precision", "tensor_parallel", "replicas",
            "vram_per_gpu_gib"),
    "servers": ("count", "form"),
    "cpu": ("model", "sockets", "cores_total"),
    "memory": ("capacity_gb", "type", "channels_populated"),
    "interconnect": ("intra_node", "pcie_lanes_per_gpu"),
    "network": ("inter_node", "switch_features"),
    "storage": ("system", "model_store", "raid", "capacity_tb"),
    "power": ("server_draw_w", "psu_total_w", "redundancy"),
    "cooling": ("type",),
    "rack": ("power_kw_per_rack", "servers_per_rack"),
    "software": ("framework", "settings"),
}
PERFORMANCE_FIELDS = ("ttft_ms", "tpot_ms", "output_tokens_per_s", "max_concurrency", "meets_sla")
COST_FIELDS = ("capex_cny", "capex_range_cny", "monthly_opex_cny", "cny_per_million_tokens", "buy_or_rent")


@dataclass
class PlanResult:
    plan: dict[str, Any]
    memory: Memory

    @property
    def feasible(self) -> bool:
        return bool(self.plan["feasible"])


def memory_feasible(mem: Memory) -> bool:
    """Whether a run's plan is feasible: its ``plan.feasible``, else whether a candidate was chosen."""
    feasible = mem.values.get("plan.feasible")
    if feasible is None:
        feasible = mem.values.get("chosen.id") is not None
    return bool(feasible)


class DeferredPlanResult(PlanResult):
    """A run whose plan document is written out when first read (``make``): a pool re-planned on
    another host GPU is read for its values, and its plan only when that host's packing wins
    (engine/app/pools.py). The same plan as written out at once (the run's memory does not
    change after it, and what the plan's steps show was taken when they fired)."""

    def __init__(self, memory: Memory, make: Callable[[], dict[str, Any]]):
        self.memory = memory
        self._make: Callable[[], dict[str, Any]] | None = make
        self._plan: dict[str, Any] | None = None

    @property  # type: ignore[override]
    def plan(self) -> dict[str, Any]:
        if self._plan is None:
            assert self._make is not None
            self._plan, self._make = self._make(), None
        return self._plan

    @property
    def feasible(self) -> bool:
        return bool(self._plan["feasible"]) if self._plan is not None else memory_feasible(self.memory)


def cite(source: dict[str, Any]) -> dict[str, Any]:
    """A rule's source with the guideline's section and verbatim quote attached."""
    out = dict(source)
    ids = source.get("guideline")
    first = ids[0] if isinstance(ids, list) else ids
    if first and first in guidelines():
        g = guidelines()[first]
        out.setdefault("doc", g["source"]["doc"])
        out.setdefault("section", g["source"]["section"])
        out.setdefault("quote", g["quote"])
    return out


def closure(mem: Memory, roots: list[int]) -> list[dict[str, Any]]:
    """The steps behind ``roots``: the roots and, recursively, the steps of their premises."""
    by_no = {s["step"]: s for s in mem.steps}
    keep: set[int] = set()
    todo = [r for r in roots if r is not None]
    while todo:
        n = todo.pop()
        if n in keep or n not in by_no:
            continue
        keep.add(n)
        for p in by_no[n]["premises"]:
            if "step" in p:
                todo.append(p["step"])
    return [settle(by_no[n]) for n in sorted(keep)]
