"""The dated price review of `servewise kb check` (issue #37).

Three findings over the catalog's prices:

* **stale** — a market price (facts/catalog/market-prices.yaml) or a server's platform estimate
  (servers.yaml ``pricing.platform_estimate``) older than the policy ``price_max_age_months``;
* **unpriced** — a GPU or server platform that no price lookup reaches in a market where it is
  sold (availability not ``restricted`` or ``discontinued``), so no plan can ever choose it;
* **unreachable** — a price entry that the lookups can never return: a market price shadowed by
  another entry for the same part and region, or a seed card price (prices.yaml ``kind: gpu-card``)
  that the seed fallback does not find for the GPU it ``refers_to``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from servewise.engine.domain.catalog import Catalog, UnknownEntry, load_catalog
from servewise.engine.domain.functions import RunContext, reset_context, use_context

REGIONS = ("cn", "global")
NOT_SOLD = frozenset({"restricted", "discontinued"})
_DATE = re.compile(r"^(\d{4})(?:-(?:(\d{2})|Q([1-4])))?")


@dataclass(frozen=True)
class PriceFinding:
    kind: str        # stale | unpriced | unreachable
    table: str       # market-prices | servers | prices | gpus
    entry: str       # the entry id (a GPU or server id for unpriced)
    region: str
    date: str
    detail: str


def month_index(date: str) -> int | None:
    """Months since year 0 of a catalog date ('2024-03', '2026-Q3', '2023', '2026-01-10'); a
    quarter counts as its last month and a bare year as December (a date is never aged early)."""
    m = _DATE.match(str(date or "").strip())
    if not m:
        return None
    year, month, quarter = int(m.group(1)), m.group(2), m.group(3)
    mon = int(month) if month else 3 * int(quarter) if quarter else 12
    return year * 12 + mon - 1 if 1 <= mon <= 12 else None


def _age(date: str, as_of: int) -> int | None:
    idx = month_index(date)
    return None if idx is None else as_of - idx


def _stale(cat: Catalog, as_of: int, max_age: int) -> list[PriceFinding]:
    out: list[PriceFinding] = []
    for e in cat.table("market-prices"):
        age = _age(str(e.get("date", "")), as_of)
        if age is None or age > max_age:
            out.append(PriceFinding("stale", "market-prices", e["id"], str(e.get("region", "")),
                                    str(e.get("date", "")),
                                    f"{e['part']}: " + ("undated" if age is None else f"{age} months old")))
    for s in cat.table("servers"):
        est = (s.get("pricing") or {}).get("platform_estimate") or {}
        if not est:
            continue
        age = _age(str(est.get("date", "")), as_of)
        if age is None or age > max_age:
            out.append(PriceFinding("stale", "servers", s["id"], "", str(est.get("date", "")),
                                    "platform estimate " + ("undated" if age is None else f"{age} months old")))
    return out


def _unpriced(cat: Catalog) -> list[PriceFinding]:
    from servewise.engine.domain.fn_bom import _gpu_id, _platform, availability_status, gpu_price, market_price

    out: list[PriceFinding] = []
    for g in cat.table("gpus"):
        for region in REGIONS:
            status = availability_status(g["id"], region)
            if status in NOT_SOLD or gpu_price(g["id"], region):
                continue
            out.append(PriceFinding("unpriced", "gpus", g["id"], region, "",
                                    f"sold in {region} ({status}) but no price reaches it"))
    for s in cat.table("servers"):
        if s.get("type") not in ("system", "baseboard", "chassis-class"):
            continue
        gpus = [g for g in (_gpu_id(str(n)) for n in s.get("gpu_models") or []) if g]
        complete = (s.get("pricing") or {}).get("complete_part")
        for region in REGIONS:
            if gpus and all(availability_status(g, region) in NOT_SOLD for g in gpus):
                continue
            if _platform(s["id"], region)[1] is None and not (complete and market_price(complete, region)):
                out.append(PriceFinding("unpriced", "servers", s["id"], region, "",
                                        "no platform price (market or estimate) or whole-system price reaches it"))
    return out


def _unreachable(cat: Catalog) -> list[PriceFinding]:
    from servewise.engine.domain.fn_bom import _canonical, _gpu_id, _price_index, _seed_card_price

    out: list[PriceFinding] = []
    index = _price_index()
    for e in cat.table("market-prices"):
        found = index.get((_canonical(str(e.get("part", ""))), str(e.get("region", ""))))
        if not found or found[0] is not e:
            by = found[0]["id"] if found else "nothing"
            out.append(PriceFinding("unreachable", "market-prices", e["id"], str(e.get("region", "")),
                                    str(e.get("date", "")), f"{e['part']}: lookups return {by}"))
    for e in cat.table("prices"):
        if e.get("kind") != "gpu-card":
            continue
        name = str(e.get("refers_to") or e.get("gpu") or "")
        gpu = _gpu_id(name)
        hit = _seed_card_price(gpu) if gpu else None
        if not hit or not str(hit["source"]).startswith(f"{e['id']} "):
            out.append(PriceFinding("unreachable", "prices", e["id"], "", str(e.get("date", "")),
                                    f"seed card price of {name!r}: " + ("no catalog GPU of that name" if not gpu
                                                                         else "the seed fallback does not find it")))
    return out


def price_review(as_of: str, catalog: Catalog | None = None) -> list[PriceFinding]:
    """Stale, unpriced and unreachable prices as of ``as_of`` (YYYY-MM), sorted by kind and id."""
    cat = catalog or load_catalog()
    now = month_index(as_of)
    if now is None:
        raise ValueError(f"as_of must be YYYY-MM, not {as_of!r}")
    token = use_context(RunContext(catalog=cat))
    try:
        max_age = int(cat.table("policies").get("price_max_age_months")["value"])
        findings = _stale(cat, now, max_age) + _unpriced(cat) + _unreachable(cat)
    except UnknownEntry as exc:
        raise ValueError(f"price review: {exc}") from None
    finally:
        reset_context(token)
    order = {"unreachable": 0, "unpriced": 1, "stale": 2}
    return sorted(findings, key=lambda f: (order[f.kind], f.table, f.entry, f.region))
