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
