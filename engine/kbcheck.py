"""Consistency check of the knowledge base (`servewise kb check`).

Three reports: catalog values that sources disagree on (each catalog entry's ``conflicts``), the
recomputed arithmetic of the seed articles' numeric claims (facts/claims.yaml), and guideline
coverage (which ids of facts/guidelines.yaml no rule cites, and whether each is documented in
facts/coverage-notes.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalog import load_catalog
from .expr import EvalError, ExprError, compile_expr
from .functions import FUNCTIONS, RunContext, reset_context, use_context
from .rulebase import FACTS_DIR, RuleBase, guidelines
from .yamlio import safe_load


@dataclass
class CatalogConflict:
    table: str
    entry: str
    field: str
    values: list[dict[str, Any]]
    chosen: Any
    reason: str


@dataclass
class ClaimResult:
    id: str
    guidelines: list[str]
    says: dict[str, str]
    values: dict[str, Any]
    holds: bool
    verdict: str
    conclusion: dict[str, str]


@dataclass
class Coverage:
    total: int
    cited: list[str]
    uncited: list[str]
    documented: dict[str, str] = field(default_factory=dict)

    @property
    def percent(self) -> float:
        return 100.0 * len(self.cited) / self.total if self.total else 100.0

    @property
    def undocumented(self) -> list[str]:
        return [g for g in self.uncited if g not in self.documented]


@dataclass
class Report:
    conflicts: list[CatalogConflict]
    claims: list[ClaimResult]
    coverage: Coverage
    errors: list[str]
    seed_prices: list[dict[str, Any]] = field(default_factory=list)


def seed_price_crosscheck(region: str = "cn") -> list[dict[str, Any]]:
    """Each seed whole-server price compared with the BOM price of the same configuration
    (GPU cards + the SKU's platform, or the SKU's whole-server price) in today's market file."""
    from .fn_bom import candidate_capex, seed_price_check, seed_server_prices, server_sku

    catalog = load_catalog()
    token = use_context(RunContext(catalog=catalog))
    out: list[dict[str, Any]] = []
    try:
        seen: set[tuple[str, int]] = set()
        for entry in catalog.table("prices"):
            gpu = entry.get("gpu") or entry.get("refers_to")
            if entry.get("kind") != "server" or not gpu or "used" in str(entry.get("unit", "")):
                continue
            entry = {**entry, "gpu": gpu}
            counts = entry["gpu_count"] if isinstance(entry.get("gpu_count"), list) else [entry.get("gpu_count")]
            for count in counts:
                if not count or (entry["gpu"], int(count)) in seen:
                    continue
                seen.add((entry["gpu"], int(count)))
                if not seed_server_prices(entry["gpu"], int(count)):
                    continue
                low = candidate_capex(entry["gpu"], int(count), 1, int(count), region, "low")
                high = candidate_capex(entry["gpu"], int(count), 1, int(count), region, "high")
                text = seed_price_check(entry["gpu"], int(count), low, high) if low is not None else None
                out.append({"gpu": entry["gpu"], "gpus": int(count), "sku": server_sku(entry["gpu"], int(count)),
                            "region": region, "bom_cny": [low, high],
                            "check": text or f"no {region} market price for {entry['gpu']}"})
    finally:
        reset_context(token)
    return out


def catalog_conflicts() -> list[CatalogConflict]:
    out = []
    for name, table in sorted(load_catalog().tables.items()):
        for entry in table:
            for c in entry.get("conflicts") or []:
                out.append(CatalogConflict(name, entry["id"], str(c.get("field")), c.get("values") or [],
                                           c.get("chosen"), str(c.get("reason", ""))))
    return out


def check_claims() -> tuple[list[ClaimResult], list[str]]:
    claims = safe_load((FACTS_DIR / "claims.yaml").read_text(encoding="utf-8")) or []
    results, errors = [], []
    token = use_context(RunContext(load_catalog()))
    try:
        for claim in claims:
            values: dict[str, Any] = {}
            try:
                for name, src in claim["values"].items():
                    values[name] = compile_expr(src, FUNCTIONS).evaluate_with(values)
                holds = bool(compile_expr(claim["holds"], FUNCTIONS).evaluate_with(values))
            except (ExprError, EvalError, ValueError) as exc:
                errors.append(f"facts/claims.yaml: {claim.get('id')}: {exc}")
                continue
            ids = claim["guideline"] if isinstance(claim["guideline"], list) else [claim["guideline"]]
            unknown = [g for g in ids if g not in guidelines()]
            if unknown:
                errors.append(f"facts/claims.yaml: {claim['id']}: unknown guideline ids {unknown}")
            results.append(ClaimResult(claim["id"], ids, claim["says"], values, holds,
                                       "OK" if holds else claim.get("verdict_if_not", "INCONSISTENT"),
                                       claim["conclusion"]))
    finally:
        reset_context(token)
    return results, errors


def coverage(rulebase: RuleBase) -> Coverage:
    cited: set[str] = set()
    for rule in rulebase.rules:
        for src in rule.sources:
            ids = src.get("guideline") or []
            cited.update([ids] if isinstance(ids, str) else ids)
    all_ids = sorted(guidelines())
    notes_file = FACTS_DIR / "coverage-notes.yaml"
    notes = safe_load(notes_file.read_text(encoding="utf-8")) if notes_file.exists() else []
    documented = {n["id"]: n["reason"] for n in notes or []}
    return Coverage(len(all_ids), [g for g in all_ids if g in cited],
                    [g for g in all_ids if g not in cited], documented)


def check(rulebase: RuleBase) -> Report:
    claims, errors = check_claims()
    return Report(catalog_conflicts(), claims, coverage(rulebase), errors, seed_price_crosscheck())
