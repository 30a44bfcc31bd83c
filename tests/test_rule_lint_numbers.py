"""#41 one home for every assumption: lint rejects a number written in a rule expression (outside
counting and unit factors), accepts a rule's own sourced `constants:` and policies, and reports a
band set whose rules leave a gap — each proved with a small rule folder through `rules lint`."""

from __future__ import annotations

import json
import textwrap

import pytest
from conftest import EXAMPLES

from servewise.engine.lang.rulelint import band_gaps, stray_numbers

RULE = """\
- id: my.{id}
  title: {{en: t, zh: t}}
  source: {{guideline: [G-COOL-001]}}
  stage: checks
  {extra}
  when: [{when}]
  then:
    - warn: {{severity: info}}
  because: {{en: "x", zh: "x"}}
  tests:
    - name: fires
      facts: {{{facts}}}
      expect: {{fires: true}}
    - name: quiet
      facts: {{{quiet}}}
      expect: {{fires: false}}
"""


def _folder(tmp_path, *rules: dict) -> str:
    d = tmp_path / "mine"
    d.mkdir(exist_ok=True)
    text = "".join(RULE.format(**{"extra": "", "when": "", **r}) for r in rules)
    (d / "my.yaml").write_text(text, encoding="utf-8")
    return str(d)


def _findings(cli, folder: str) -> tuple[int, list[dict]]:
    result = cli("rules", "lint", folder, "--format", "json")
    return result.exit_code, [f for f in json.loads(result.output)
                              if "/mine/" in f["file"] and f["code"] != "test-coverage"]


def test_a_stray_number_fails_lint_with_its_place_and_the_homes_to_use(cli, tmp_path):
    folder = _folder(tmp_path, dict(id="hot", when='"traffic.peak_qps > 37"', facts="traffic.peak_qps: 40",
                                    quiet="traffic.peak_qps: 3"))
    code, found = _findings(cli, folder)
    assert code == 2
    (f,) = [f for f in found if f["code"] == "literal"]
    assert f["severity"] == "error" and f["line"] == 6
    assert "37" in f["message"] and "policy('name')" in f["message"] and "constants:" in f["message"]


def test_a_policy_or_a_sourced_constant_passes(cli, tmp_path):
    folder = _folder(
        tmp_path,
        dict(id="policy", when='"sla.tpot_ms > policy(\'itl_acceptable_max_ms\')"', facts="sla.tpot_ms: 80",
             quiet="sla.tpot_ms: 20"),
        dict(id="constant", extra="constants: {busy_qps: {value: 37, source: G-COOL-001}}",
             when='"traffic.peak_qps > busy_qps"', facts="traffic.peak_qps: 40", quiet="traffic.peak_qps: 3"))
    code, found = _findings(cli, folder)
    assert (code, found) == (0, [])
    assert cli("rules", "test", folder).exit_code == 0


def test_a_constant_citing_a_guideline_the_rule_does_not_cite_is_reported(cli, tmp_path):
    folder = _folder(tmp_path, dict(id="c", extra="constants: {busy_qps: {value: 37, source: G-COST-001}}",
                                    when='"traffic.peak_qps > busy_qps"', facts="traffic.peak_qps: 40",
                                    quiet="traffic.peak_qps: 3"))
    code, found = _findings(cli, folder)
    assert code == 2 and [f["code"] for f in found] == ["constant-source"]


def test_a_stray_number_in_a_rules_dir_only_warns_when_a_plan_loads_it(cli, tmp_path):
    folder = _folder(tmp_path, dict(id="hot", when='"traffic.peak_qps > 37"', facts="traffic.peak_qps: 40",
                                    quiet="traffic.peak_qps: 3"))
    result = cli("--rules-dir", folder, "plan", str(EXAMPLES / "chat-70b-online.yaml"), "--format", "json")
    assert result.exit_code == 0, result.output


BANDS = {
    "air": "band: {set: rack, over: components.rack.power_kw_per_rack, below: \"policy('air_cooling_max_kw_per_rack')\"}",
    "hybrid": "band: {set: rack, over: components.rack.power_kw_per_rack, from: \"policy('air_cooling_max_kw_per_rack')\", upto: \"policy('hybrid_cooling_max_kw_per_rack')\"}",
    "liquid": "band: {set: rack, over: components.rack.power_kw_per_rack, above: \"policy('hybrid_cooling_max_kw_per_rack')\"}",
}
FACTS = {"air": ("components.rack.power_kw_per_rack: 3", "components.rack.power_kw_per_rack: 5"),
         "hybrid": ("components.rack.power_kw_per_rack: 6", "components.rack.power_kw_per_rack: 7"),
         "liquid": ("components.rack.power_kw_per_rack: 9", "components.rack.power_kw_per_rack: 6")}


def _band_rules(tmp_path, **override: str) -> str:
    rules = []
    for name, band in BANDS.items():
        band = override.get(name, band)
        if band is None:
            continue
        fires, quiet = FACTS[name]
        rules.append(dict(id=name, extra=band, when='"mode != \'edge\'"', facts=f"mode: online, {fires}",
                          quiet=f"mode: online, {quiet}"))
    return _folder(tmp_path, *rules)


def test_a_band_set_with_written_bounds_is_a_literal_finding(cli, tmp_path):
    folder = _band_rules(tmp_path, air="band: {set: rack, over: components.rack.power_kw_per_rack, below: 4}")
    code, found = _findings(cli, folder)
    assert code == 2 and [f["code"] for f in found] == ["literal"] and "power_kw_per_rack < 4" in found[0]["message"]


def test_a_band_set_that_covers_every_value_passes_and_its_bounds_are_conditions(cli, tmp_path):
    folder = _band_rules(tmp_path)
    assert _findings(cli, folder) == (0, [])
    result = cli("rules", "test", folder)
    assert result.exit_code == 0, result.output          # 6 kW is hybrid (upto), not liquid (above)


@pytest.mark.parametrize(("override", "gap"), [
    ({"hybrid": "band: {set: rack, over: components.rack.power_kw_per_rack, above: \"policy('air_cooling_max_kw_per_rack')\", upto: \"policy('hybrid_cooling_max_kw_per_rack')\"}"},
     "[4, 4]"),
    ({"hybrid": None}, "[4, 6]"),
    ({"liquid": "band: {set: rack, over: components.rack.power_kw_per_rack, above: \"policy('hybrid_cooling_max_kw_per_rack')\", below: \"policy('liquid_rack_kw_default')\"}"},
     "from 10"),
])
def test_a_band_set_with_a_gap_fails_lint_naming_the_gap(cli, tmp_path, override, gap):
    code, found = _findings(cli, _band_rules(tmp_path, **override))
    messages = [f["message"] for f in found if f["code"] == "band-gap"]
    assert code == 2 and len(messages) == 1 and f"leaves {gap} matched by no rule" in messages[0]


def test_band_gaps_and_stray_numbers_directly():
    inf = float("inf")
    assert band_gaps([((-inf, True), (4, False)), ((4, True), (inf, True))]) == []
    assert band_gaps([((-inf, True), (4, False)), ((4, False), (inf, True))]) == ["[4, 4]"]
    assert band_gaps([((0, True), (4, True)), ((5, True), (9, False))]) == ["(4, 5)", "from 9"]
    import ast
    tree = ast.parse(textwrap.dedent("round(x * 0.9 / 1024, -3) + 2 * 1.15"), mode="eval")
    assert stray_numbers(tree) == [0.9, 1.15]
