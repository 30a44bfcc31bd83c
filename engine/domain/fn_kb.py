"""Domain functions for knowledge-base checks: price ranges by catalog id."""

from __future__ import annotations

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, domain_function


def _price(entry_id: str) -> dict:
    try:
        return current().catalog.table("prices").get(entry_id)
    except UnknownEntry:
        raise ValueError(f"no price entry '{entry_id}' in facts/catalog/prices.yaml") from None


@domain_function
def price_min(entry_id: str) -> float:
    """Lower bound (CNY) of a price entry; its upper bound when no lower bound is given."""
    e = _price(entry_id)
    return float(e["min_cny"] if e.get("min_cny") is not None else e["max_cny"])


@domain_function
def price_max(entry_id: str) -> float:
    """Upper bound (CNY) of a price entry; its lower bound when no upper bound is given."""
    e = _price(entry_id)
    return float(e["max_cny"] if e.get("max_cny") is not None else e["min_cny"])
