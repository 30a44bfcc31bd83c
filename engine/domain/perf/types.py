"""Result types of the performance model: explanation steps, memory and performance estimates."""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.common.deferred import Deferred


def _r(x: float | None, nd: int = 4) -> float | None:
    """Round for output (keeps JSON short and deterministic)."""
    if x is None:
        return None
    if x != 0 and abs(x) < 1:  # shares and small times: significant digits, not decimals
        return float(f"{x:.{nd + 2}g}")
    return round(float(x), nd)


@dataclass(frozen=True)
class Step:
    """One explained number: ``result = formula(values)``.

    ``formula`` is ``lhs = expression`` where the expression uses only the names in ``values``,
    numbers, ``+ - / ( )``, `` x `` (times), ``^`` (power) and ``min``/``max``/``ln``/``ceil``:
    :func:`evaluate` recomputes the printed result from the printed inputs. ``note`` holds the
    prose (what the terms mean, where a constant comes from).
    """

    name: str
    formula: str
    values: dict[str, Any]
    result: float | str | bool | None
    unit: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        vals = {k: (_r(v) if isinstance(v, float) else v) for k, v in self.values.items()}
        res = _r(self.result) if isinstance(self.result, float) else self.result
        d = {"name": self.name, "formula": self.formula, "values": vals, "result": res,
             "unit": self.unit}
        if self.note:
            d["note"] = self.note
        return d


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg,
        ast.Gt: operator.gt, ast.Lt: operator.lt}
_FUNCS = {"min": min, "max": max, "ln": math.log, "exp": math.exp, "ceil": math.ceil}


def evaluate(formula: str, values: dict[str, Any]) -> float:
    """Value of a step's formula (right of the first ``=``) with ``values`` as its names."""
    expr = formula.split("=", 1)[1].strip().replace(" x ", " * ").replace("^", "**")

    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in values:
                raise KeyError(f"'{n.id}' is not a printed value")
            return values[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in _OPS:
            return _OPS[type(n.op)](ev(n.operand))
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _OPS:
            return float(_OPS[type(n.ops[0])](ev(n.left), ev(n.comparators[0])))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _FUNCS:
            return _FUNCS[n.func.id](*(ev(a) for a in n.args))
        raise ValueError(f"not allowed in a formula: {ast.dump(n)[:60]}")

    return float(ev(ast.parse(expr, mode="eval")))


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of one replica, split by use; ``per_gpu_gib`` is what the busiest GPU holds."""

    weights_gib: float            # all weights of the replica (every expert resident)
    kv_cache_gib: float           # KV cache of the tokens in flight, whole replica
    overhead_gib: float           # activations, CUDA graphs, framework, per GPU
    total_gib: float              # whole replica: weights + KV + overhead x GPUs
    per_gpu_gib: float            # one GPU: its weight shard + its KV + overhead
    budget_gib: float             # usable per GPU = memory x gpu_memory_utilization
    kv_capacity_tokens: int       # tokens of KV that fit in the budget (whole replica)
    fits: bool
    reason: str | None
    n_gpus: int
    steps: tuple[Step, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {"weights_gib": _r(self.weights_gib), "kv_cache_gib": _r(self.kv_cache_gib),
                "overhead_gib": _r(self.overhead_gib), "total_gib": _r(self.total_gib),
                "per_gpu_gib": _r(self.per_gpu_gib), "budget_gib": _r(self.budget_gib),
                "kv_capacity_tokens": self.kv_capacity_tokens, "n_gpus": self.n_gpus}


@dataclass(frozen=True)
class Estimate:
    """Performance of one replica at a steady concurrency (continuous batching)."""

    ttft_ms: float | None
    tpot_ms: float | None
    output_tokens_per_s: float | None
    fits: bool
    reason: str | None
    memory: MemoryEstimate
    band: dict[str, tuple[float, float] | None]
    calibration: dict[str, Any]
    steps: tuple[Step, ...]
    inputs: dict[str, Any]
    ttft_p99_ms: float | None = None  # open loop only: 99th percentile of TTFT
    load: dict[str, Any] | None = None  # open loop at an offered rate: utilisation, saturation

    def upper(self, metric: str) -> float | None:
        """Conservative (slow) side of the band for a latency metric."""
        b = self.band.get(metric)
        return b[1] if b else None

    def to_dict(self, deferred_steps: bool = False) -> dict[str, Any]:
        """The estimate as plain values; ``deferred_steps``: its steps as a
        :class:`~servewise.engine.common.deferred.Deferred`, written out only if shown."""
        steps = self.steps
        return {
            "ttft_ms": _r(self.ttft_ms), "ttft_p99_ms": _r(self.ttft_p99_ms),
            "tpot_ms": _r(self.tpot_ms),
            "output_tokens_per_s": _r(self.output_tokens_per_s),
            "fits": self.fits, "reason": self.reason,
            "memory": self.memory.to_dict(),
            "band": {k: ([_r(v[0]), _r(v[1])] if v else None) for k, v in self.band.items()},
            "calibration": self.calibration,
            "inputs": self.inputs,
            "steps": Deferred(lambda: [s.to_dict() for s in steps]) if deferred_steps
            else [s.to_dict() for s in steps],
        } | ({"load": self.load} if self.load is not None else {})
