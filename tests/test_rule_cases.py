"""Every rule has at least one test case, and every case passes (`servewise rules test`)."""

from __future__ import annotations

import pytest

from servewise.engine.rulebase import load_rules
from servewise.engine.ruletest import run_case

RULES = load_rules().rules
CASES = [(spec, case) for spec in RULES for case in spec.tests]


def test_every_rule_has_a_test_case():
    assert [r.id for r in RULES if not r.tests] == []


@pytest.mark.parametrize("spec,case", CASES, ids=[f"{s.id}:{c['name']}" for s, c in CASES])
def test_rule_case(rulebase, spec, case):
    result = run_case(rulebase, spec, case)
    assert result.ok, result.message


def test_a_facts_case_may_supply_items_for_a_for_each_rule(tmp_path):
    (tmp_path / "probe.yaml").write_text(
        "- id: probe.small-gpu\n  title: {en: t, zh: t}\n  source: {guideline: [G-GPU-001]}\n"
        "  stage: filters\n  for_each: candidate\n  when: ['candidate.memory_gb < 40']\n"
        "  then: [{reject: {}}]\n  because: {en: small, zh: small}\n  tests: []\n", encoding="utf-8")
    rb = load_rules([tmp_path], builtin=False)
    spec = rb.rules[0]
    case = {"name": "one small, one large", "facts": {},
            "items": {"candidate": {"a": {"gpu": "L4", "memory_gb": 24}, "b": {"gpu": "H100 SXM", "memory_gb": 80}}},
            "expect": {"rejected": ["a"]}}
    assert run_case(rb, spec, case).ok
    case["expect"] = {"rejected": ["b"]}
    assert not run_case(rb, spec, case).ok
