"""Rules document themselves: `rules show`, `rules graph`, `rules facts` and the generated
docs/rules/ pages, which must not drift from the YAML."""

from __future__ import annotations

import json

from conftest import ROOT

from servewise.engine.app.ruledocs import docs_pages, edges
from servewise.engine.lang.rulebase import load_rules


def test_docs_pages_match_the_rules():
    pages = docs_pages(load_rules())
    stale = [name for name, text in pages.items()
             if (ROOT / "docs" / "rules" / name).read_text(encoding="utf-8") != text]
    assert not stale, f"docs/rules out of date, run `servewise rules docs`: {stale}"
    assert set(pages) == {p.name for p in (ROOT / "docs" / "rules").glob("*.md")}


def test_show_lists_sources_reads_writes_and_tests(cli):
    out = cli("rules", "show", "cpu.tier-1-2-gpus", "--format", "json")
    assert out.exit_code == 0
    card = json.loads(out.output)
    assert card["stage"] == "bom"
    assert card["sources"][0]["guideline"] == "G-CPU-003" and "5418Y" in card["sources"][0]["quote"]
    assert "chosen.per_server" in card["reads"]
    assert "components.cpu.model" in card["writes"]
    assert card["tests"][0]["name"] == "a one-GPU server needing 16 cores gets the 16-core part"
    assert "epyc_9254_memory_channels" in card["lets"]
    unknown = cli("rules", "show", "cpu.tier-1-2-gpu")
    assert unknown.exit_code == 2 and "did you mean cpu.tier-1-2-gpus" in unknown.output


def test_graph_links_writer_to_reader(cli):
    rb = load_rules()
    es = edges(rb)
    assert ("rack.servers-per-rack", "components.rack.power_kw_per_rack", "cooling.liquid-above-6kw") in es
    mermaid = cli("rules", "graph", "--component", "cooling").output
    assert mermaid.startswith("flowchart LR") and "r_cooling_liquid_above_6kw" in mermaid
    dot = cli("rules", "graph", "--format", "dot", "--stage", "facilities").output
    assert dot.startswith("digraph rules {") and "r_rack_servers_per_rack -> r_cooling_liquid_above_6kw" in dot


def test_facts_dictionary(cli):
    data = json.loads(cli("rules", "facts", "--format", "json").output)
    by_name = {e["name"]: e for e in data}
    assert by_name["model.total_params_b"]["stage"] == "input"
    assert by_name["model.total_params_b"]["writers"] == ["catalog"]
    assert by_name["traffic.peak_qps"]["unit"] == "req/s"  # from facts/inputs.yaml
    assert by_name["chosen.precision"]["stage"] == "selection"
    assert "select.cheapest-candidate" in by_name["chosen.precision"]["writers"]
    assert "power.server-draw" in by_name["facility.server_draw_w"]["writers"]
    early = {e["name"] for e in json.loads(cli("rules", "facts", "--stage", "derivations", "--format", "json").output)}
    assert "model.total_params_b" in early and "chosen.precision" not in early
