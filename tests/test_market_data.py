"""Data tests for the market files (issue #10): facts/catalog/market-prices.yaml and availability.yaml.

Schema, sources, consistency (low <= high, converted prices match their original), part ids that resolve in
the catalog or are documented generic parts, dates, regions, and coverage of the GPUs the issue names.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "facts" / "catalog"
SCHEMA = ROOT / "facts" / "schemas" / "catalog.schema.json"
PRICES, AVAIL = "market-prices", "availability"
PART_TABLES = ("gpus", "servers", "cpus", "ssds", "nics", "switches", "psus")
# GPUs issue #10 item 3 requires a mainland-China price and availability fact for (catalog names)
REQUIRED_GPUS = [
    "H20", "H200 SXM", "H100 SXM", "H100 PCIe", "H100 NVL", "A100 40GB", "A100 80GB SXM", "A800", "H800", "L40S",
    "L40", "L20", "L4", "T4", "A10", "RTX 4090", "RTX 6000 Ada", "B200", "AMD MI300X", "AMD MI325X",
    "Huawei Ascend 910B", "Ascend Atlas 300I Duo", "NVIDIA Jetson AGX Orin 64GB",
]
DATE = re.compile(r"^(\d{4})(?:-(\d{2}|Q[1-4]))?")


@cache
def entries(stem: str) -> list[dict]:
    return yaml.safe_load((CATALOG / f"{stem}.yaml").read_text(encoding="utf-8"))


@cache
def schema() -> dict:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


@cache
def catalog():
    from servewise.engine.domain.catalog import build_catalog

    return build_catalog(CATALOG.glob("*.yaml"))


def generic_parts() -> set[str]:
    return set(schema()["$defs"]["generic_part"]["enum"])


def canonical(part: str) -> str | None:
    """Catalog id the part names (any part table), the generic id itself, or None."""
    for kind in PART_TABLES:
        if part in catalog().table(kind):
            return catalog().table(kind).get(part)["id"]
    return part if part in generic_parts() else None


def sortable(date: str) -> tuple[int, int]:
    """(year, month) of a 'YYYY', 'YYYY-MM', 'YYYY-MM-DD' or 'YYYY-Qn' date; a quarter counts as its last month."""
    m = DATE.match(date)
    assert m, date
    year, rest = int(m.group(1)), m.group(2)
    if rest is None:
        return year, 12
    return (year, int(rest[1]) * 3) if rest.startswith("Q") else (year, int(rest))


# ------------------------------------------------------------ schema
@pytest.mark.parametrize("stem", [PRICES, AVAIL])
def test_file_validates_against_its_schema(stem):
    s = schema()
    validator = Draft202012Validator({"$schema": s["$schema"], "$defs": s["$defs"], "$ref": f"#/$defs/{stem}_file"})
    errors = sorted(validator.iter_errors(entries(stem)), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{stem}[{'/'.join(map(str, e.path))}]: {e.message}" for e in errors[:20])


def test_schema_rejects_a_bad_entry():
    """The schema is not vacuous: a range without sources and with an unknown region fails."""
    s = schema()
    validator = Draft202012Validator({"$schema": s["$schema"], "$defs": s["$defs"], "$ref": "#/$defs/market_price"})
    good = dict(entries(PRICES)[0])
    assert not list(validator.iter_errors(good))
    bad = {**good, "region": "eu", "sources": []}
    assert {e.validator for e in validator.iter_errors(bad)} >= {"enum", "minItems"}


@pytest.mark.parametrize("stem", [PRICES, AVAIL])
def test_ids_are_unique(stem):
    ids = [e["id"] for e in entries(stem)]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


# ------------------------------------------------------------ prices
def test_price_ranges_are_ordered_and_positive():
    bad = [e["id"] for e in entries(PRICES) if not 0 < e["low_cny"] <= e["high_cny"]]
    assert not bad, bad


def test_converted_prices_match_their_original():
    bad = []
    for e in entries(PRICES):
        o = e.get("original")
        if not o:
            continue
        assert o["low"] <= o["high"], e["id"]
        for end in ("low", "high"):
            expect = o[end] * o["fx_cny_per_usd"]
            if abs(e[f"{end}_cny"] - expect) > 0.02 * expect:
                bad.append(f"{e['id']}: {end}_cny {e[f'{end}_cny']} != {o[end]} x {o['fx_cny_per_usd']}")
    assert not bad, "\n".join(bad)


def test_price_parts_resolve():
    bad = [f"{e['id']}: {e['part']}" for e in entries(PRICES) if canonical(e["part"]) is None]
    assert not bad, "unknown parts (add to the catalog or to $defs/generic_part):\n" + "\n".join(bad)


def test_every_generic_part_is_used():
    used = {e["part"] for e in entries(PRICES)} | {e["part"] for e in entries(AVAIL)}
    assert not generic_parts() - used, sorted(generic_parts() - used)


def test_price_category_matches_the_catalog_table():
    table_category = {"gpus": {"gpu"}, "servers": {"server", "platform"}, "cpus": {"cpu"}, "ssds": {"ssd"},
                      "nics": {"nic", "optics"}, "switches": {"switch"}, "psus": {"server", "platform"}}
    bad = []
    for e in entries(PRICES):
        for kind, cats in table_category.items():
            if e["part"] in catalog().table(kind):
                if e["category"] not in cats:
                    bad.append(f"{e['id']}: {e['part']} is in {kind} but category is {e['category']}")
                break
    assert not bad, "\n".join(bad)


def test_verified_prices_cite_a_readable_source_and_estimates_say_how():
    bad = []
    for e in entries(PRICES):
        refs = e["sources"]
        if e["status"] == "verified":
            if not any(s["status"] in ("verified", "seed") for s in refs):
                bad.append(f"{e['id']}: verified without a URL or seed source")
        elif not any(s["status"] == "derived" for s in refs) and "estimate" not in e["note"].lower():
            bad.append(f"{e['id']}: estimate without a derivation source or an explanation")
    assert not bad, "\n".join(bad)


def test_seed_refs_name_a_seed_price():
    """A market price citing a seed must cite a guideline that prices.yaml records as a price (catches typos)."""
    priced = {e["source"]["guideline"] for e in entries("prices")}
    bad = [f"{e['id']}: {s['ref']}" for e in entries(PRICES) for s in e["sources"]
           if s["ref"].startswith("seed:") and s["ref"].split("#")[1] not in priced]
    assert not bad, bad


def test_one_price_per_part_region_and_unit():
    seen: dict[tuple, str] = {}
    dupes = []
    for e in entries(PRICES):
        key = (canonical(e["part"]), e["region"], e["unit"])
        if key in seen:
            dupes.append(f"{e['id']} duplicates {seen[key]}")
        seen[key] = e["id"]
    assert not dupes, dupes


def test_required_gpus_have_a_cn_price_or_a_restriction():
    """Item 3: every listed GPU is priced for the seeds' market, or availability says why it cannot be bought."""
    priced = {canonical(e["part"]) for e in entries(PRICES) if e["region"] == "cn" and e["category"] == "gpu"}
    restricted = {canonical(e["part"]) for e in entries(AVAIL) if e["region"] == "cn" and e["status"] == "restricted"}
    missing = [g for g in REQUIRED_GPUS if g not in priced and g not in restricted]
    assert not missing, missing


# ------------------------------------------------------------ availability
def test_availability_parts_resolve_and_are_unique_per_region():
    seen = set()
    bad = []
    for e in entries(AVAIL):
        part = canonical(e["part"])
        if part is None:
            bad.append(f"{e['id']}: unknown part {e['part']}")
        elif (part, e["region"]) in seen:
            bad.append(f"{e['id']}: second entry for ({part}, {e['region']})")
        seen.add((part, e["region"]))
    assert not bad, "\n".join(bad)


def test_availability_dates_are_consistent():
    bad = []
    for e in entries(AVAIL):
        if sortable(e["date"]) > sortable(e["checked"]):
            bad.append(f"{e['id']}: fact dated {e['date']} after it was checked ({e['checked']})")
        history = [h["date"] for h in e.get("history", [])]
        if [sortable(d) for d in history] != sorted(sortable(d) for d in history):
            bad.append(f"{e['id']}: history not in date order")
        if history and sortable(history[-1]) > sortable(e["date"]):
            bad.append(f"{e['id']}: history newer than the entry's own date")
        lead = e.get("lead_time_weeks")
        if lead and lead[0] > lead[1]:
            bad.append(f"{e['id']}: lead time {lead}")
    assert not bad, "\n".join(bad)


def test_every_required_gpu_has_a_cn_availability_fact():
    covered = {canonical(e["part"]) for e in entries(AVAIL) if e["region"] == "cn"}
    assert not [g for g in REQUIRED_GPUS if g not in covered], [g for g in REQUIRED_GPUS if g not in covered]


def test_availability_sources_include_a_url():
    bad = [e["id"] for e in entries(AVAIL) if not any(s["ref"].startswith("http") for s in e["sources"])]
    assert not bad, bad


@pytest.mark.parametrize(
    "part,region,status",
    [
        ("H100 SXM", "cn", "restricted"),
        ("A800", "cn", "restricted"),
        ("RTX 4090", "cn", "restricted"),
        ("L20", "cn", "available"),
        ("Ascend 910B", "cn", "available"),
    ],
)
def test_known_availability_facts(part, region, status):
    match = [e for e in entries(AVAIL) if canonical(e["part"]) == canonical(part) and e["region"] == region]
    assert match and match[0]["status"] == status
