"""`servewise kb check` finds the seed articles' inconsistencies and reports coverage."""

from __future__ import annotations

import json

import pytest

from servewise.engine.app.kbcheck import catalog_conflicts, check_claims


@pytest.fixture(scope="module")
def claims():
    results, errors = check_claims()
    assert errors == []
    return {r.id: r for r in results}


@pytest.mark.parametrize("claim_id", [
    "claim.l40s-bandwidth", "claim.internode-quarter", "claim.4xl40s-vs-h200-tco",
    "claim.liquid-cooling-saving", "claim.psu-headroom",
])
def test_required_inconsistencies_are_found(claims, claim_id):
    assert claims[claim_id].holds is False
    assert claims[claim_id].verdict != "OK"


def test_recomputed_numbers(claims):
    assert claims["claim.internode-quarter"].values["quarter_gbps"] == 1800
    assert round(claims["claim.liquid-cooling-saving"].values["saving_cny_per_year"]) == 19622
    assert round(claims["claim.psu-headroom"].values["ratio_4xh200"], 2) == 1.43
    tco = claims["claim.4xl40s-vs-h200-tco"].values
    assert 1.1 < tco["capex_ratio_low"] < 1.2 and 1.6 < tco["capex_ratio_high"] < 1.8


def test_a_consistent_claim_holds(claims):
    assert claims["claim.storage-example"].holds is True


def test_catalog_conflicts_include_l40s_bandwidth():
    found = {(c.table, c.entry, c.field): c for c in catalog_conflicts()}
    l40s = found[("gpus", "L40S", "bandwidth_gbs")]
    assert l40s.chosen == 864
    assert 2600 in [v.get("value") for v in l40s.values]


def test_cli_json(cli):
    result = cli("kb", "check", "--format", "json", "--min-coverage", "0")
    data = json.loads(result.output)
    assert {"conflicts", "claims", "coverage", "errors"} <= set(data)
    assert data["coverage"]["total"] == 243


def test_coverage_doc_is_current(cli):
    from conftest import ROOT

    generated = cli("kb", "coverage").output
    assert (ROOT / "docs" / "knowledge-coverage.md").read_text(encoding="utf-8") == generated, (
        "regenerate with: servewise kb coverage > docs/knowledge-coverage.md")


def test_coverage_meets_the_bar(cli):
    result = cli("kb", "check")
    assert result.exit_code == 0, result.output[-2000:]
    assert "ids cited by rules" in result.output


def test_kb_check_detects_the_summary_source_errors(cli):
    """Issue #12: ≥ 60 of the 64 source errors of guidelines-summary.md §2 are detected by a claim
    that does not hold or a catalog conflict; the rest are explained; each finding names its items."""
    import json as _json

    data = _json.loads(cli("kb", "check", "--format", "json").output)
    summary = data["summary"]
    assert data["errors"] == []
    assert summary["detected_count"] >= 60
    assert summary["missing"] == []
    assert summary["detected_count"] + len(summary["not_detectable"]) == summary["items"] == 64
    assert all(1 <= n <= 64 for c in data["claims"] + data["conflicts"] for n in c["summary_refs"])
    by_id = {c["id"]: c for c in data["claims"]}
    assert by_id["claim.eagle-stream-channels"]["holds"] is False
    assert by_id["claim.eagle-stream-channels"]["values"]["eagle_stream_channels"] == 8
    assert by_id["claim.eagle-stream-channels"]["summary_refs"] == [14]
