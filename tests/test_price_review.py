"""The dated price review of `servewise kb check` (issue #37): stale, unpriced and unreachable prices."""

from __future__ import annotations

import copy

import pytest

from servewise.engine.app.pricecheck import month_index, price_review
from servewise.engine.domain.catalog import Catalog, Table, load_catalog
from servewise.engine.domain.fn_bom import gpu_price
from servewise.engine.domain.functions import RunContext, reset_context, use_context


def _copy(mutate) -> Catalog:
    """A copy of the built-in catalog with ``mutate(tables)`` applied (entries re-indexed)."""
    tables = {}
    for name, table in load_catalog().tables.items():
        tables[name] = [copy.deepcopy(e) for e in table]
    mutate(tables)
    out = {}
    for name, entries in tables.items():
        t = Table(name)
        for e in entries:
            t.add(e)
        out[name] = t
    return Catalog(out)


@pytest.mark.parametrize("text, expected", [
    ("2024-03", 2024 * 12 + 2), ("2026-Q3", 2026 * 12 + 8), ("2023", 2023 * 12 + 11),
    ("2026-01-10", 2026 * 12), ("undated, article 2025–2026", None), ("", None),
])
def test_month_index_reads_every_catalog_date_form(text, expected):
    assert month_index(text) == expected


def test_the_seed_card_price_of_the_h200_nvl_is_reached_and_the_card_is_priced():
    from servewise.engine.domain.fn_bom import _seed_card_price

    token = use_context(RunContext(catalog=load_catalog()))
    try:
        seed = _seed_card_price("H200 NVL")
        priced = {g: gpu_price(g, "cn") for g in ("H200 NVL", "A30")}
    finally:
        reset_context(token)
    assert seed is not None and seed["unit_price_cny"] == [280000.0, 320000.0]
    assert seed["source"].startswith("price-h200-nvl-card-d0 ")
    assert all(priced.values()), priced


def test_the_built_in_catalog_has_no_unreachable_price():
    assert [f for f in price_review("2026-12") if f.kind == "unreachable"] == []


def test_a_seed_card_price_naming_no_gpu_is_unreachable():
    def rename(tables):
        entry = next(e for e in tables["prices"] if e["id"] == "price-h200-nvl-card-d0")
        entry["refers_to"] = "H200 NVL card"   # what the lookup cannot resolve
    found = [f for f in price_review("2026-12", _copy(rename)) if f.kind == "unreachable"]
    assert [(f.table, f.entry) for f in found] == [("prices", "price-h200-nvl-card-d0")]


def test_a_second_price_for_the_same_part_and_region_is_unreachable():
    def duplicate(tables):
        first = next(e for e in tables["market-prices"] if e["id"] == "mp-l20-card-cn")
        tables["market-prices"].append({**copy.deepcopy(first), "id": "mp-l20-card-cn-2026", "date": "2026-06"})
    found = [f for f in price_review("2026-12", _copy(duplicate)) if f.kind == "unreachable"]
    assert [f.entry for f in found] == ["mp-l20-card-cn-2026"]
    assert "lookups return mp-l20-card-cn" in found[0].detail


def test_stale_prices_follow_the_review_date():
    old = {f.entry for f in price_review("2026-12") if f.kind == "stale"}
    earlier = {f.entry for f in price_review("2024-01") if f.kind == "stale"}
    assert earlier < old
    assert all(month_index(f.date) is None or month_index("2026-12") - month_index(f.date) > 12
               for f in price_review("2026-12") if f.kind == "stale")


def test_a_gpu_sold_without_a_price_is_reported():
    def unprice(tables):
        tables["market-prices"] = [e for e in tables["market-prices"] if e["part"] != "L4"]
    found = {(f.entry, f.region) for f in price_review("2026-12", _copy(unprice)) if f.kind == "unpriced"}
    assert {("L4", "cn"), ("L4", "global")} <= found


def test_kb_check_fails_on_an_unreachable_price_and_lists_the_review(cli, monkeypatch):
    result = cli("kb", "check", "--as-of", "2026-12")
    assert "Price review as of 2026-12: 0 unreachable" in result.output
    assert result.exit_code == 0, result.output[-1500:]
    bad = cli("kb", "check", "--as-of", "2026-13")
    assert bad.exit_code == 2 and "YYYY-MM" in bad.output
