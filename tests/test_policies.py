"""Policies (facts/catalog/policies.yaml): servewise's own assumptions, each with its reason and
source, read by name (``policy(name)``) by rules and Python alike (issue #41: one home for every
assumption). The cost assumptions have moved; the test lists the files that read them so that a
literal copy coming back there fails."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import policy

COST_POLICIES = {"hours_per_month": 730, "pue_air": 1.6, "pue_liquid": 1.2,
                 "ops_labour_cny_per_server_month": 2000, "max_writeoff_months": 36, "liquid_cooling_premium": 0.2}
# every rule file whose arithmetic uses hours a month or a year, a PUE, ops labour, the write-off or
# the liquid premium
READERS = ["rules/cost/cost.yaml", "rules/filters/cost.yaml", "rules/cost/claims.yaml", "rules/bom/monitoring.yaml",
           "rules/cost/asr.yaml", "rules/cost/encoder.yaml", "rules/facilities/cooling.yaml",
           "rules/facilities/power.yaml"]
PYTHON_READERS = ["engine/app/pools_pack.py", "engine/app/pools.py"]


def expressions(path):
    for rule in yaml.safe_load((ROOT / path).read_text(encoding="utf-8")):
        for action in rule.get("then", []):
            for value in (action.get("derive") or {}).values():
                yield rule["id"], value
        for value in (rule.get("let") or {}).values():
            yield rule["id"], value
        yield from ((rule["id"], w) for w in rule.get("when", []))


def test_each_cost_policy_has_its_value_reason_and_source():
    table = load_catalog().table("policies")
    for name, value in COST_POLICIES.items():
        entry = table.get(name)
        assert entry["value"] == value and len(entry["reason"]) > 40 and entry["sources"]


@pytest.mark.parametrize("path", READERS)
def test_cost_rules_read_the_policies_instead_of_writing_their_numbers(path):
    pattern = re.compile(r"(?<![\w.])(730|8760|1\.6|1\.2|0\.4|0\.2|2000|36)(?![\w.])")
    found = [(rid, e) for rid, e in expressions(path) if isinstance(e, str) and pattern.search(e)]
    assert not found, f"write policy('...') instead: {found}"
    assert any("policy(" in e for _, e in expressions(path) if isinstance(e, str))


@pytest.mark.parametrize("path", PYTHON_READERS)
def test_the_packer_reads_the_same_policies(path):
    source = (ROOT / path).read_text(encoding="utf-8")
    assert not re.search(r"=\s*(730|2000)\b|\b1\.6\b|\b1\.2 if\b|, 36\)", source), path


def test_an_unknown_policy_is_an_error():
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        policy("nope")
    assert policy("hours_per_month") == 730
