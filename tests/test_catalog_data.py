"""Data tests for the sourced catalog (facts/catalog/*.yaml): schema, sources, aliases."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parents[1]
CATALOG = ROOT / "facts" / "catalog"
SCHEMA = ROOT / "facts" / "schemas" / "catalog.schema.json"
GUIDELINES = ROOT / "facts" / "guidelines.yaml"  # the project copy of shared/guidelines.yaml

FILES = ["gpus", "models", "cpus", "nics", "switches", "ssds", "psus", "servers", "server-skus", "prices", "market-prices",
         "availability", "policies",
         "vision-models"]
NON_VALUE_KEYS = {"sources", "conflicts", "aliases", "alias_notes", "id"}


def norm(name: str) -> str:
    from servewise.engine.domain.catalog import normalise_name

    return normalise_name(name)


@cache
def entries(stem: str) -> list[dict]:
    return yaml.safe_load((CATALOG / f"{stem}.yaml").read_text(encoding="utf-8"))


@cache
def schema() -> dict:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


def all_entries():
    for stem in FILES:
        for e in entries(stem):
            yield stem, e


def numeric_paths(obj, prefix=""):
    """Dotted paths of numeric values (bool excluded); lists count as one path."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not prefix and k in NON_VALUE_KEYS:
                continue
            yield from numeric_paths(v, f"{prefix}{k}" if not prefix else f"{prefix}.{k}")
    elif isinstance(obj, list):
        if any(isinstance(x, (int, float)) and not isinstance(x, bool) for x in obj) or any(
            isinstance(x, (dict, list)) and list(numeric_paths(x, "x")) for x in obj
        ):
            yield prefix
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix


def covered(path: str, sources: list[dict]) -> bool:
    for s in sources:
        fields = s.get("fields")
        if not fields:
            return True
        if any(path == f or path.startswith(f + ".") for f in fields):
            return True
    return False


# ------------------------------------------------------------ schema
def test_schema_is_valid_2020_12():
    Draft202012Validator.check_schema(schema())


@pytest.mark.parametrize("stem", FILES)
def test_file_validates_against_its_schema(stem):
    s = schema()
    sub = {"$schema": s["$schema"], "$defs": s["$defs"], "$ref": f"#/$defs/{stem}_file"}
    validator = Draft202012Validator(sub)
    errors = sorted(validator.iter_errors(entries(stem)), key=lambda e: list(e.path))
    msgs = [f"{stem}[{'/'.join(map(str, e.path))}]: {e.message}" for e in errors[:20]]
    assert not errors, "\n".join(msgs)


def test_every_catalog_file_is_tested():
    assert sorted(p.stem for p in CATALOG.glob("*.yaml")) == sorted(FILES)


@pytest.fixture(scope="module")
def built():
    """The catalog as the engine builds it from the shipped files (once for this module)."""
    from servewise.engine.domain.catalog import build_catalog

    return build_catalog(CATALOG.glob("*.yaml"))


def test_catalog_loads_through_engine(built):
    cat = built
    for stem in FILES:
        assert len(cat.table(stem).entries) == len(entries(stem)), f"duplicate ids in {stem}"


# ------------------------------------------------------------ sources
def test_every_entry_has_a_source():
    for stem, e in all_entries():
        assert e.get("sources"), f"{stem}:{e['id']} has no source"


def test_every_numeric_field_is_covered_by_a_source():
    missing = []
    for stem, e in all_entries():
        for path in numeric_paths(e):
            if not covered(path, e["sources"]):
                missing.append(f"{stem}:{e['id']}:{path}")
    assert not missing, "numeric fields without a source:\n" + "\n".join(missing)


def test_source_fields_name_existing_fields():
    bad = []
    for stem, e in all_entries():
        for s in e["sources"]:
            for f in s.get("fields", []):
                head = f.split(".")[0]
                if head not in e:
                    bad.append(f"{stem}:{e['id']}: source field '{f}' not in entry")
    assert not bad, "\n".join(bad)


def test_verified_sources_are_urls_and_seed_refs_resolve():
    if not GUIDELINES.exists():
        pytest.fail("facts/guidelines.yaml is missing")
    items = yaml.safe_load(GUIDELINES.read_text(encoding="utf-8"))
    guide = {g["id"]: g["source"]["doc"] for g in items}
    bad = []

    def check_seed(ref, where):
        doc, gid = ref[len("seed:") :].split("#")
        if guide.get(gid) != doc:
            bad.append(f"{where}: {ref} does not match guidelines.yaml (doc {guide.get(gid)})")

    for stem, e in all_entries():
        where = f"{stem}:{e['id']}"
        for s in e["sources"]:
            if s["status"] == "verified":
                url = s["ref"].startswith(("http://", "https://"))
                assert url, f"{where}: verified needs a URL"
            if s["ref"].startswith("seed:"):
                check_seed(s["ref"], where)
        for c in e.get("conflicts", []):
            for v in c["values"]:
                if v["source"].startswith("seed:"):
                    check_seed(v["source"], where)
        if stem == "prices":
            src = e["source"]
            if guide.get(src["guideline"]) != src["doc"]:
                bad.append(f"{where}: source {src} does not match guidelines.yaml")
    assert not bad, "\n".join(bad)


def test_conflict_chosen_matches_the_entry_value():
    """If a conflict names an existing (dotted) field, the entry holds the chosen value."""
    bad = []
    for stem, e in all_entries():
        for c in e.get("conflicts", []):
            node, ok = e, True
            for part in c["field"].split("."):
                if isinstance(node, dict) and part in node:
                    node = node[part]
                else:
                    ok = False
                    break
            if ok and c["chosen"] is not None and node != c["chosen"]:
                got, want = node, c["chosen"]
                bad.append(f"{stem}:{e['id']}: {c['field']} = {got!r} but conflict chose {want!r}")
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------ aliases
@pytest.mark.parametrize("stem", FILES)
def test_ids_and_aliases_are_unique_within_a_file(stem):
    seen: dict[str, str] = {}
    dupes = []
    for e in entries(stem):
        for name in [e["id"], *e.get("aliases", [])]:
            key = norm(name)
            if key in seen and seen[key] != e["id"]:
                dupes.append(f"'{name}' ({e['id']}) clashes with {seen[key]}")
            seen.setdefault(key, e["id"])
    assert not dupes, "\n".join(dupes)


@pytest.mark.parametrize(
    "kind,name,expected",
    [
        ("gpus", "H200", "H200 SXM"),
        ("gpus", "h200_sxm", "H200 SXM"),
        ("gpus", "H100", "H100 SXM"),
        ("gpus", "A100", "A100 80GB SXM"),
        ("gpus", "A100 80GB", "A100 80GB SXM"),
        ("gpus", "MI300X", "AMD MI300X"),
        ("gpus", "Ascend 910B", "Huawei Ascend 910B"),
        ("gpus", "Atlas 300I Duo", "Ascend Atlas 300I Duo"),
        ("gpus", "Atlas 300V Pro", "Ascend Atlas 300V Pro"),
        ("gpus", "Atlas 200I DK", "Ascend Atlas 200I DK A2"),
        ("gpus", "Jetson AGX Orin", "NVIDIA Jetson AGX Orin 64GB"),
        ("gpus", "A6000 48G", "RTX A6000"),
        ("models", "DeepSeek-R1", "DeepSeek-V3"),
        ("models", "deepseek-ai/DeepSeek-R1", "DeepSeek-V3"),
        ("models", "Llama-3.3-70B", "Llama-3.1-70B"),
        ("models", "Qwen2.5-72B-Instruct", "Qwen2.5-72B"),
        ("models", "meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B"),
        ("models", "Qwen/Qwen3-235B-A22B-FP8", "Qwen3-235B-A22B"),
        ("models", "nvidia/Llama-3.1-8B-Instruct-FP8", "Llama-3.1-8B"),
        ("models", "Qwen2.5-14B-Instruct", "Qwen2.5-14B"),
        ("models", "Llama 4 405B", "Llama-3.1-405B"),
        ("servers", "XE9680", "Dell PowerEdge XE9680"),
        ("servers", "AS-8125GS-TNMR", "Supermicro AS-8125GS-TNMR2"),
        ("cpus", "Xeon 6900P", "Xeon 6980P"),
        ("cpus", "Kunpeng 920", "Kunpeng 920 7260"),
    ],
)
def test_aliases_resolve(built, kind, name, expected):
    cat = built
    assert cat.table(kind).get(name)["id"] == expected


def test_reference_data_names_resolve(built):
    """Every GPU/model named in the reference data (facts/data) resolves (so estimate/validate can use them)."""
    import csv

    data = ROOT / "facts" / "data"  # the project copy of shared/data
    cat = built
    missing = []
    for f in ["gpus.csv", "models.csv", "benchmarks.csv", "measured.csv"]:
        rows = list(csv.DictReader((data / f).open(encoding="utf-8")))
        for col, kind in [("gpu", "gpus"), ("model", "models")]:
            for name in {r[col] for r in rows if col in r}:
                if name not in cat.table(kind):
                    missing.append(f"{f}:{name}")
    assert not missing, missing


def test_server_gpu_models_resolve(built):
    cat = built
    for e in entries("servers"):
        for g in e["gpu_models"]:
            assert g in cat.table("gpus"), f"{e['id']}: unknown GPU {g}"


def test_price_refers_to_resolves_and_ranges_are_ordered(built):
    cat = built
    for e in entries("prices"):
        if "refers_to" in e:
            assert any(e["refers_to"] in cat.table(k) for k in ("gpus", "servers")), e["id"]
        lo, hi = e.get("min_cny"), e.get("max_cny")
        if lo is not None and hi is not None:
            assert lo <= hi, f"{e['id']}: min {lo} > max {hi}"


# ------------------------------------------------------------ known facts
def by_id(stem: str, id_: str) -> dict:
    return next(e for e in entries(stem) if e["id"] == id_)


def conflict(stem: str, id_: str, field: str) -> dict:
    e = by_id(stem, id_)
    return next(c for c in e.get("conflicts", []) if c["field"] == field)


def values(c: dict) -> set:
    return {json.dumps(v["value"]) for v in c["values"]}


@pytest.mark.parametrize(
    "stem,id_,field,expected_values,chosen",
    [
        ("gpus", "L40S", "bandwidth_gbs", {864, 2600}, 864),
        ("gpus", "L40S", "tdp_w", {350, 300}, 350),
        ("gpus", "L40S", "nvlink", {True, False}, False),
        ("gpus", "T4", "bandwidth_gbs", {300, 320}, 320),
        ("gpus", "H100 NVL", "bandwidth_gbs", {3900, 4800}, 3900),
        ("gpus", "AMD MI300X", "bandwidth_gbs", {5300, 5200}, 5300),
        ("gpus", "B200", "memory_gb", {180, 192}, 180),
        ("gpus", "H200 NVL", "tdp_w", {600, 700}, 600),
        ("gpus", "Ascend Atlas 300I Duo", "per_card.int8_tops", {280, 140}, 280),
        ("psus", "psu-headroom-policy", "headroom_factor", {1.5, 1.43}, 1.5),
        ("nics", "infiniband-ndr-400g", "cost_ratio_vs_roce", {2.5, 2.0}, 2.5),
        ("switches", "HPE Aruba CX 10000", "max_port_gbps", {400, 100}, 100),
        ("ssds", "Solidigm D7-P5520", "pcie_gen", {5, 4}, 4),
        ("servers", "Supermicro AS-8125GS-TNMR2", "gpu_vendor", {"nvidia", "amd"}, "amd"),
        ("servers", "NVIDIA DGX H200", "max_power_w", {10200, 7000}, 10200),
        ("cpus", "EPYC 9554", "cores", {64, "32-48"}, 64),
    ],
)
def test_known_conflicts_present(stem, id_, field, expected_values, chosen):
    c = conflict(stem, id_, field)
    assert {json.dumps(v) for v in expected_values} <= values(c)
    assert c["chosen"] == chosen
    assert c["reason"]


def test_internode_ratio_conflict_recorded():
    c = conflict("nics", "roce-v2-200g", "inter_node_to_intra_node_ratio")
    assert {0.25, 0.0278} <= {v["value"] for v in c["values"]}


def test_price_conflicts_and_typo():
    c = conflict("prices", "price-l40s-card-d0", "implied_card_price_cny")
    assert len(c["values"]) >= 3
    typo = by_id("prices", "price-server-1x-rtx4090")
    assert typo["corrected"] is True and typo["raw"].find("5万-4万") >= 0
    assert typo["raw_min_cny"] > typo["raw_max_cny"]
    assert typo["min_cny"] <= typo["max_cny"]
    saving = conflict("prices", "price-liquid-cooling-saving-claim", "annual_saving_cny")
    assert saving["chosen"][1] < 40000


def test_every_seed_price_guideline_is_in_prices():
    if not GUIDELINES.exists():
        pytest.fail("facts/guidelines.yaml is missing")
    guide = yaml.safe_load(GUIDELINES.read_text(encoding="utf-8"))
    cited = {e["source"]["guideline"] for e in entries("prices")}
    for e in entries("prices"):
        cited |= {s["ref"].split("#")[1] for s in e["sources"] if s["ref"].startswith("seed:")}
    wanted = {g["id"] for g in guide if g["kind"] == "price"}
    # pure principle-like 'price' items that carry no figure are allowed to be absent
    assert not (wanted - cited - {"G-COST-033"}), sorted(wanted - cited)


def test_gpu_rule_fields():
    g = {e["id"]: e for e in entries("gpus")}
    assert g["RTX 4090"]["consumer"] is True and g["RTX 4090"]["tier"] == "consumer"
    assert g["Ascend Atlas 300I Duo"]["domestic"] is True
    assert g["NVIDIA Jetson AGX Orin 64GB"]["tier"] == "edge"
    assert g["L40S"]["mig"] is False and g["L40S"]["nvlink"] is False
    assert g["L40S"]["bandwidth_gbs"] == 864
    assert g["H200 SXM"]["mig"] is True and g["H200 SXM"]["mig_max_instances"] == 7
    assert g["AMD MI300X"]["mig"] is False and g["AMD MI300X"]["partitions_max"] == 8


def test_models_moe_fields():
    for e in entries("models"):
        assert e["moe"] == bool(e.get("num_experts")), e["id"]
        if e["moe"]:
            assert e["params_active_b"] == e["active_params_b"]
