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


# #41 done-when: no assumption appears in two places. The numbers of these policies must not be
# written again in engine/ (Python reads policy(name)); the listed files hold the same number with
# another meaning, each with the reason.
ASSUMPTIONS = ["vram_usable_fraction", "server_power_headroom", "server_host_w",
               "utilisation_target", "hours_per_month", "pue_air", "ops_labour_cny_per_server_month"]
SAME_NUMBER_OTHER_MEANING = {
    ("engine/domain/perf/calibration.py", 0.9): "a fitted constant's upper bound",
    ("engine/domain/perf/calibration.py", 0.7): "NVLink efficiency of the fitted link model",
    ("engine/domain/perf/calibration.py", 1.6): "the fallback TTFT band's upper factor",
    ("engine/domain/perf/validate.py", 0.9): "a quantile (P90) and the band-coverage target",
    ("engine/domain/perf/validate.py", 0.7): "the band-coverage target's lower end",
    ("engine/domain/perf/overlay_fit.py", 0.7): "a calibration overlay's starting value",
    ("engine/domain/perf/overlay_fit.py", 400): "the fit's iteration limit",
    ("engine/domain/perf/disagg.py", 0.7): "NVLink efficiency default of the link model",
    ("engine/app/inputs.py", 400): "the longest error message shown, in characters",
    ("engine/lang/expr.py", 2000): "the longest expression source, in characters",
    ("engine/lang/rulebase.py", 2000): "the most rule files loaded",
}


def test_no_assumption_is_written_again_in_the_engine():
    import io
    import tokenize

    table = load_catalog().table("policies")
    values = {float(table.get(name)["value"]): name for name in ASSUMPTIONS}
    found = []
    for path in sorted((ROOT / "engine").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
            if tok.type != tokenize.NUMBER:
                continue
            try:
                value = float(tok.string.replace("_", ""))
            except ValueError:      # 0o700, 0x1f: file modes and masks
                continue
            if value in values and (rel, value) not in SAME_NUMBER_OTHER_MEANING \
                    and (rel, int(value)) not in SAME_NUMBER_OTHER_MEANING:
                found.append(f"{rel}:{tok.start[0]}: {tok.string} (policy {values[value]})")
    assert not found, "read policy(name) instead of writing the number:\n" + "\n".join(found)
