"""Consistency check of the knowledge base (`servewise kb check`).

Three reports: catalog values that sources disagree on (each catalog entry's ``conflicts``), the
recomputed arithmetic of the seed articles' numeric claims (facts/claims.yaml), and guideline
coverage (which ids of facts/guidelines.yaml no rule cites, and the reason facts/coverage.yaml
gives for each; the verdict file's own problems are reported as errors, see engine/app/coverage.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servewise.engine.app import coverage as verdicts
from servewise.engine.app.pricecheck import PriceFinding, price_review
from servewise.engine.common.yamlio import safe_load
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import FUNCTIONS, RunContext, reset_context, use_context
from servewise.engine.lang.expr import EvalError, ExprError, compile_expr
from servewise.engine.lang.rulebase import FACTS_DIR, RuleBase, guidelines


@dataclass
class CatalogConflict:
    table: str
    entry: str
    field: str
    values: list[dict[str, Any]]
    chosen: Any
    reason: str
    summary_refs: list[int] = field(default_factory=list)


@dataclass
class ClaimResult:
    id: str
    guidelines: list[str]
    says: dict[str, str]
    values: dict[str, Any]
    holds: bool
    verdict: str
    conclusion: dict[str, str]
    summary_refs: list[int] = field(default_factory=list)


@dataclass
class Coverage:
    total: int
    cited: list[str]
    uncited: list[str]
    documented: dict[str, str] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=dict)  # guidelines per status of facts/coverage.yaml

    @property
    def percent(self) -> float:
        return 100.0 * len(self.cited) / self.total if self.total else 100.0

    @property
    def undocumented(self) -> list[str]:
        return [g for g in self.uncited if g not in self.documented]


@dataclass
class SummaryCoverage:
    """Which of the source errors of guidelines-summary.md §2 the checks detect."""

    items: int
    detected: dict[int, list[str]]          # item → the findings (claim ids, table/entry/field)
    not_detectable: dict[int, str]          # item → why no check can detect it
    missing: list[int]                      # neither detected nor explained

    @property
    def detected_count(self) -> int:
        return len(self.detected)


@dataclass
class Report:
    conflicts: list[CatalogConflict]
    claims: list[ClaimResult]
    coverage: Coverage
    errors: list[str]
    summary: SummaryCoverage | None = None
    seed_prices: list[dict[str, Any]] = field(default_factory=list)
    prices: list[PriceFinding] = field(default_factory=list)


def summary_map() -> dict[str, Any]:
    """facts/kb-summary.yaml: §2 items per catalog conflict, and the items no check can detect."""
    return safe_load((FACTS_DIR / "kb-summary.yaml").read_text(encoding="utf-8")) or {}


def seed_price_crosscheck(region: str = "cn") -> list[dict[str, Any]]:
    """Each seed whole-server price compared with the BOM price of the same configuration
    (GPU cards + the SKU's platform, or the SKU's whole-server price) in today's market file."""
    from servewise.engine.domain.fn_bom import candidate_capex, seed_price_check, seed_server_prices, server_sku

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
    refs = summary_map().get("conflicts") or {}
    out = []
    for name, table in sorted(load_catalog().tables.items()):
        for entry in table:
            for c in entry.get("conflicts") or []:
                key = f"{name}/{entry['id']}/{c.get('field')}"
                out.append(CatalogConflict(name, entry["id"], str(c.get("field")), c.get("values") or [],
                                           c.get("chosen"), str(c.get("reason", "")), list(refs.get(key, []))))
    return out


def summary_coverage(conflicts: list[CatalogConflict], claims: list[ClaimResult]) -> SummaryCoverage:
    """An item is detected by a claim that does not hold or a catalog conflict that names it."""
    data = summary_map()
    detected: dict[int, list[str]] = {}
    for c in conflicts:
        for n in c.summary_refs:
            detected.setdefault(n, []).append(f"{c.table}/{c.entry}.{c.field}")
    for r in claims:
        if not r.holds:
            for n in r.summary_refs:
                detected.setdefault(n, []).append(r.id)
    items = int(data.get("items", 64))
    explained = {int(k): str(v) for k, v in (data.get("not_detectable") or {}).items()}
    missing = [n for n in range(1, items + 1) if n not in detected and n not in explained]
    return SummaryCoverage(items, dict(sorted(detected.items())), explained, missing)


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
                                       claim["conclusion"], list(claim.get("summary_refs") or [])))
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
    known = set(all_ids)
    try:
        loaded = verdicts.load_verdicts()
    except verdicts.CoverageError:
        loaded = ()  # reported by check()
    documented = {v.id: f"{v.status}: {v.note}" for v in loaded if v.id not in cited and v.note}
    counts = {s: sum(v.status == s for v in loaded if v.id in known) for s in verdicts.STATUSES}
    return Coverage(len(all_ids), [g for g in all_ids if g in cited],
                    [g for g in all_ids if g not in cited], documented, counts)


def check(rulebase: RuleBase, as_of: str | None = None) -> Report:
    """The whole report; ``as_of`` (YYYY-MM) dates the price review (none without it)."""
    claims, errors = check_claims()
    try:
        errors += verdicts.check(rulebase).problems
    except verdicts.CoverageError as exc:
        errors.append(str(exc))
    conflicts = catalog_conflicts()
    known = {f"{c.table}/{c.entry}/{c.field}" for c in conflicts}
    errors += [f"facts/kb-summary.yaml: conflicts: '{k}' is not a catalog conflict"
               for k in (summary_map().get("conflicts") or {}) if k not in known]
    items = int(summary_map().get("items", 64))
    errors += [f"facts/claims.yaml: {r.id}: summary_refs {n} is not an item of §2 (1-{items})"
               for r in claims for n in r.summary_refs if not 1 <= n <= items]
    return Report(conflicts, claims, coverage(rulebase), errors, summary_coverage(conflicts, claims),
                  seed_price_crosscheck(), price_review(as_of) if as_of else [])
