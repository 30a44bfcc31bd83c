"""Speed work must not change what is planned, and planning work must not creep up unnoticed.

- Every example's plan JSON is byte-identical to the digest stored in tests/plans/digests.json.
  After an intended plan change (rules, catalog, version), refresh it with
      SERVEWISE_UPDATE_PLANS=1 .venv/bin/python -m pytest tests/test_plan_work.py
- The optimised matcher and the rule cache give the same plan as experta's stock matcher and an
  uncached load.
- The engine work per example (rule firings, agenda activations, Rete condition tests) may grow
  by at most 10 % over tests/plans/work-baseline.json. A deliberate increase needs a new baseline
  with a note saying why:
      SERVEWISE_UPDATE_WORK_BASELINE="why the work grew" .venv/bin/python -m pytest tests/test_plan_work.py
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from collections import Counter

import pytest
from conftest import EXAMPLES, ROOT

PLANS = ROOT / "tests" / "plans"
DIGESTS = PLANS / "digests.json"
BASELINE = PLANS / "work-baseline.json"
ALLOWED_GROWTH = 1.10
EXAMPLE_NAMES = [p.stem for p in sorted(EXAMPLES.glob("*.yaml"))]


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_plans_are_byte_identical_to_the_stored_digests(example_plans):
    stored = json.loads(DIGESTS.read_text(encoding="utf-8"))
    now = {name: digest(ex.json_text) for name, ex in example_plans.items()}
    if os.environ.get("SERVEWISE_UPDATE_PLANS"):
        stored["plans"] = now
        DIGESTS.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    changed = sorted(n for n in now if stored["plans"].get(n) != now[n])
    missing = sorted(set(stored["plans"]) - set(now))
    assert not changed and not missing, (
        f"plan JSON changed for {changed or missing}; if intended, refresh with SERVEWISE_UPDATE_PLANS=1")


def test_work_does_not_grow_over_the_baseline(example_plans):
    if os.environ.get("SERVEWISE_UPDATE_WORK_BASELINE"):
        BASELINE.write_text(json.dumps({
            "note": os.environ["SERVEWISE_UPDATE_WORK_BASELINE"],
            "updated": datetime.date.today().isoformat(),
            "allowed_growth": ALLOWED_GROWTH,
            "examples": {n: ex.work for n, ex in example_plans.items()},
        }, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    base = json.loads(BASELINE.read_text(encoding="utf-8"))
    assert base.get("note", "").strip(), "the work baseline must say why it was (re)recorded"
    over = work_over_baseline(base, {n: ex.work for n, ex in example_plans.items()})
    assert not over, ("planning work grew more than 10 % over tests/plans/work-baseline.json: "
                      + "; ".join(over) + " (if intended, re-record it with a note, see the module docstring)")


def work_over_baseline(base: dict, now: dict[str, dict[str, int]]) -> list[str]:
    """Each example and counter whose work exceeds the baseline by more than the allowed growth
    (an example or counter the baseline lacks counts as grown from nothing)."""
    over = []
    for name, work in now.items():
        recorded = base["examples"].get(name)
        if recorded is None:
            over.append(f"{name}: no work baseline")
            continue
        for metric, value in work.items():
            limit = recorded.get(metric, 0) * ALLOWED_GROWTH
            if value > limit:
                over.append(f"{name}: {metric} {value} > {limit:.0f}")
    return over


def test_the_work_guard_bites():
    """11 % more activations on one example fails the guard; 10 % does not; every counter counts."""
    base = json.loads(BASELINE.read_text(encoding="utf-8"))
    now = {n: dict(w) for n, w in base["examples"].items()}
    assert work_over_baseline(base, now) == []
    name = "chat-70b-online"
    for metric in ("firings", "activations", "condition_tests"):
        grown = {n: dict(w) for n, w in now.items()}
        grown[name][metric] = int(base["examples"][name][metric] * 1.11) + 1
        assert [o.split(":")[0] for o in work_over_baseline(base, grown)] == [name], metric
        grown[name][metric] = int(base["examples"][name][metric] * 1.10)
        assert work_over_baseline(base, grown) == [], metric
    assert work_over_baseline(base, {**now, "new-example": {"firings": 1}}) == ["new-example: no work baseline"]


def test_work_counters_count_something(example_plans):
    work = example_plans["chat-70b-online"].work
    assert work["firings"] > 0 and work["activations"] >= work["firings"] and work["condition_tests"] > 0


@pytest.mark.parametrize("name", ["chat-8b-small", "deepseek-v3-online"])
def test_skipping_item_revisions_plans_as_walking_every_one(example_plans, name, monkeypatch):
    """The direct matcher skips an item revision for a rule whose test reads none of the changed
    attributes and failed on the earlier revision; walking every revision plans the same, with the
    same engine work, in more walks (a decoder with many candidates, and an MoE model)."""
    from servewise.cli.render import to_json
    from servewise.engine.app.plan import plan_file
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.runtime.compiler import WORK
    from servewise.engine.runtime.experta_compat import DirectMatcher

    monkeypatch.setattr(DirectMatcher, "skip_revisions", False)
    before, walks = Counter(WORK), DirectMatcher.walks
    result = plan_file(EXAMPLES / f"{name}.yaml", load_rules())
    assert to_json(result.plan) == example_plans[name].json_text
    work = {k: v for k, v in sorted((Counter(WORK) - before).items())}
    assert work == example_plans[name].work
    every = DirectMatcher.walks - walks
    monkeypatch.setattr(DirectMatcher, "skip_revisions", True)
    walks = DirectMatcher.walks
    plan_file(EXAMPLES / f"{name}.yaml", load_rules())
    assert DirectMatcher.walks - walks < every * 0.8


@pytest.mark.parametrize("name", ["chat-70b-online", "infeasible-target"])
@pytest.mark.parametrize("matcher", ["ReteMatcher", "IndexedReteMatcher"])
def test_rete_matchers_and_uncached_rules_give_the_same_plan(example_plans, name, matcher, monkeypatch):
    """experta's stock Rete network and the tuned one plan as the direct matcher does."""
    from servewise.cli.render import to_json
    from servewise.engine.app.plan import plan_file
    from servewise.engine.lang.rulebase import load_rules
    from servewise.engine.runtime import experta_compat, runner

    assert runner.MATCHER is experta_compat.DirectMatcher
    rete = experta_compat.experta.matchers.ReteMatcher if matcher == "ReteMatcher" else \
        experta_compat.IndexedReteMatcher
    monkeypatch.setattr(runner, "MATCHER", rete)
    monkeypatch.setenv("SERVEWISE_NO_CACHE", "1")
    result = plan_file(EXAMPLES / f"{name}.yaml", load_rules())
    assert to_json(result.plan) == example_plans[name].json_text
