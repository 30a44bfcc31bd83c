"""Every rule has at least one test case, and every case passes (`servewise rules test`)."""

from __future__ import annotations

import pytest

from servewise.engine.app.ruletest import prepare_workloads, run_case
from servewise.engine.lang.rulebase import load_rules
from servewise.engine.runtime.justify import settled_steps

RULES = load_rules().rules
CASES = [(spec, case) for spec in RULES for case in spec.tests]


def test_every_rule_has_a_test_case():
    assert [r.id for r in RULES if not r.tests] == []


@pytest.fixture(scope="module")
def workloads_run(rulebase):
    """Each workload of the cases planned once, as far as its cases need (as `rules test` does)."""
    prepare_workloads(rulebase, rulebase.rules)


@pytest.mark.parametrize("spec,case", CASES, ids=[f"{s.id}:{c['name']}" for s, c in CASES])
def test_rule_case(rulebase, workloads_run, spec, case):
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


def _what_a_case_sees(mem, spec, case) -> tuple:
    mine = [[x for x in rows if x["rule"] == spec.id] for rows in (mem.rejections, mem.asks, mem.warnings, settled_steps(mem))]
    return (mem.fired.get(spec.id, 0), {k: mem.values.get(k, "<unset>") for k in case["expect"].get("values") or {}},
            *mine)


def test_a_case_run_to_its_stage_sees_what_the_whole_plan_shows(rulebase):
    """`rules test` stops a workload after the last stage a case's verdict depends on
    (ruletest.needed_stage): for a case of each such stage, what the case checks (the rule's firings,
    rejections, questions, warnings and steps, and the values it expects) equals the whole plan's."""
    from servewise.engine.app.inputs import fill_defaults
    from servewise.engine.app.plan import plan_workload
    from servewise.engine.app.ruletest import FULL, needed_stage, run_workload
    from servewise.engine.lang.rulebase import RuleBase

    fresh = RuleBase(rulebase.rules, rulebase.files, rulebase.knowledge_hash)  # not cached by other tests
    by_stage = {}
    for spec, case in CASES:
        if "workload" in case and (stage := needed_stage(fresh, spec, case)) < FULL:
            by_stage.setdefault(stage, (spec, case))
    assert len(by_stage) >= 4, by_stage.keys()
    for stage, (spec, case) in sorted(by_stage.items())[-4:]:  # the latest stages: most rules cut off
        filled, defaults = fill_defaults(case["workload"])
        whole = plan_workload(filled, defaults, fresh).memory
        part, _ = run_workload(fresh, case["workload"], stage)
        assert _what_a_case_sees(part, spec, case) == _what_a_case_sees(whole, spec, case), (spec.id, case["name"])
