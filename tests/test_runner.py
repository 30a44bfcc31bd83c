"""Engine behaviour: staging, justification records, content refraction and the loop guard."""

from __future__ import annotations

import textwrap

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.lang.rulebase import load_rules
from servewise.engine.runtime.justify import settled_steps
from servewise.engine.runtime.runner import LoopError, Origin, Runner


def rules(tmp_path, text):
    (tmp_path / "r.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return load_rules([tmp_path], builtin=False)


def run(rb, facts, **kw):
    return Runner(rb, **kw).run({k: (v, Origin("input", k)) for k, v in facts.items()},
                                RunContext(load_catalog()))


PING_PONG = """\
- id: test.ping
  title: {en: ping, zh: ping}
  source: {guideline: G-SLA-001}
  stage: derivations
  then: [{derive: {x.a: "x.b + 1"}}]
  because: {en: "a", zh: "a"}
- id: test.pong
  title: {en: pong, zh: pong}
  source: {guideline: G-SLA-001}
  stage: derivations
  then: [{derive: {x.b: "x.a + 1"}}]
  because: {en: "b", zh: "b"}
"""


def test_loop_guard_names_the_rules(tmp_path):
    rb = rules(tmp_path, PING_PONG)
    with pytest.raises(LoopError) as info:
        run(rb, {"x.a": 0, "x.b": 0}, max_firings=200)
    assert "test.ping" in str(info.value) and "test.pong" in str(info.value)
    assert "derivations" in str(info.value)


CHAIN = """\
- id: test.late
  title: {en: late, zh: late}
  source: {guideline: G-SLA-001}
  stage: checks
  then: [{derive: {y.late: "y.early * 2"}}]
  because: {en: "late {y.late}", zh: "late"}
- id: test.early
  title: {en: early, zh: early}
  source: {guideline: G-SLA-001}
  stage: derivations
  when: ["y.input > 1"]
  then: [{derive: {y.early: "y.input * 10"}}]
  because: {en: "early {y.early}", zh: "early"}
"""


def test_stages_order_and_justifications(tmp_path):
    rb = rules(tmp_path, CHAIN)
    mem = run(rb, {"y.input": 3})
    assert mem.values["y.late"] == 60
    early, late = settled_steps(mem)
    assert (early["rule"], late["rule"]) == ("test.early", "test.late")  # stage order, not file order
    assert early["conclusions"][0]["formula"] == "(3 × 10) = 30"
    assert early["premises"] == [{"fact": "y.input", "value": 3, "origin": {"kind": "input", "ref": "y.input"}}]
    assert late["premises"][0]["step"] == early["step"]
    assert late["because"]["en"] == "late 60"


def test_condition_false_means_no_firing(tmp_path):
    rb = rules(tmp_path, CHAIN)
    mem = run(rb, {"y.input": 1})
    assert "y.early" not in mem.values and mem.steps == []


def test_an_estimates_steps_are_written_out_only_when_shown():
    """The performance model's formula steps are a Deferred in the estimate's record (most are never
    shown) and come out as the same plain list when a step holding them is written out."""
    from servewise.engine.common.deferred import Deferred
    from servewise.engine.domain import perf
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.runtime.justify import jsonable

    cat = load_catalog()
    est = perf.estimate(cat.model("Llama-3.1-8B"), cat.gpu("H100 SXM"), tp=1, precision="bf16", isl=1024,
                        osl=256, concurrency=8)
    lazy, eager = est.to_dict(deferred_steps=True), est.to_dict()
    assert type(lazy["steps"]) is Deferred and eager["steps"]
    assert jsonable(lazy) == jsonable(eager)
    made = []
    once = Deferred(lambda: made.append(1) or [1])
    assert once.get() == once.get() == [1] and made == [1]


def test_content_key_tells_values_apart_as_json_does():
    """Content-based refraction: two firings read the same values exactly when their keys are
    equal; 1, 1.0 and True differ (as their JSON does), and values equality cannot tell apart
    (NaN, -0.0, lists) are compared as canonical JSON."""
    from servewise.engine.runtime.runner import content_key

    keys = [content_key({"a": v}) for v in (1, 1.0, True, "1", None, 2.5)]
    assert len(set(keys)) == len(keys)
    assert content_key({"a": 1, "b": "x"}) == content_key({"a": 1, "b": "x"})
    assert content_key({"a": 0.0}) != content_key({"a": -0.0})
    assert content_key({"a": float("nan")}) == content_key({"a": float("nan")})
    assert content_key({"a": [1, 2]}) == content_key({"a": [1, 2]}) != content_key({"a": [2, 1]})


def test_a_plan_makes_no_reference_cycles():
    """The cyclic collector is off while the engine runs (engine/common/gctune.py): that is only
    sound while a plan makes no reference cycles, so everything it drops goes by reference counting
    (a resolver that held itself in its closure once left ~50,000 objects per plan to the collector)."""
    import gc

    from servewise.engine.app.inputs import load_workload
    from servewise.engine.app.plan import plan_workload
    from servewise.engine.lang.rulebase import load_rules

    rb = load_rules()
    from conftest import EXAMPLES

    path = EXAMPLES / "multi-model-tenants.yaml"  # several pools, re-planned on other host GPUs
    plan_workload(*load_workload(EXAMPLES / "llama-405b-across-nodes.yaml"), rb)  # what earlier tests left goes
    while gc.collect():
        pass
    workload, defaults = load_workload(path)
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = plan_workload(workload, defaults, rb)
        gc.set_debug(gc.DEBUG_SAVEALL)
        found = gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert result.plan["feasible"] is not None
    assert found == 0, f"a plan left {found} objects in reference cycles, e.g. {[type(o).__name__ for o in garbage[:10]]}"


PROPOSAL = """\
- id: test.propose
  title: {en: propose, zh: propose}
  source: {guideline: G-SLA-001}
  stage: candidates
  then:
    - propose:
        kind: thing
        over: {g: "['A', 'B']", p: "['x', 'y']", n: "[1, 2, True]"}
        id: "g + p + text(n)"
        attrs: {size: "n * 2"}
        unless:
          - when: "n == 2"
            because: {en: "{g}{p}: {n} is two ({why})", zh: "{g}{p}：{n}"}
          - when: "g == 'B'"
            because: {en: "{g}: B is out ({label}, {n})", zh: "{g}：{label}"}
  let:
    why: "g + '/' + text(n)"
    label: "p + '!'"
  because: {en: "proposed", zh: "proposed"}
"""


def test_a_proposals_rejections_are_made_for_each_combination(tmp_path):
    """A proposal makes each rejection text once per values of the combination names the text and
    the rule's bindings it shows read (issue #41: most of a re-plan's rejections share one text):
    each rejection still reads its own combination, whichever names the condition reads, and
    values equal across types (1 and True) keep their own text."""
    rb = rules(tmp_path, PROPOSAL)
    mem = run(rb, {"model.id": "m"})
    texts = {r["option"]: r["because"]["en"] for r in mem.rejections}
    assert texts == {
        "Ax2": "Ax: 2 is two (A/2)", "Ay2": "Ay: 2 is two (A/2)",
        "Bx2": "Bx: 2 is two (B/2)", "By2": "By: 2 is two (B/2)",
        "Bx1": "B: B is out (x!, 1)", "By1": "B: B is out (y!, 1)",
        "BxTrue": "B: B is out (x!, yes)", "ByTrue": "B: B is out (y!, yes)",
    }
    assert {r["option"]: r["values"] for r in mem.rejections}["By1"] == {"g": "B", "p": "y", "n": 1}
    assert {k[1]: v["size"] for k, v in mem.items.items()} == {"Ax1": 2, "AxTrue": 2, "Ay1": 2, "AyTrue": 2}


def test_a_rejection_records_its_figures(tmp_path):
    """``reject: {figures: {name: expression}}`` records the numbers a view draws of the
    rejection (an infeasible plan's nearest-misses chart), computed with the rule's lets; one
    that fails to evaluate is None (found by the generated-workload test: an estimate of a layout
    a custom model's KV heads do not split into)."""
    rb = rules(tmp_path, """\
    - id: test.things
      title: {en: things, zh: things}
      source: {guideline: G-SLA-001}
      stage: candidates
      then:
        - propose: {kind: thing, over: {n: "[1, 4]"}, id: "'t' + text(n)", attrs: {n: "n"}}
      because: {en: "things", zh: "things"}
    - id: test.too-big
      title: {en: too big, zh: too big}
      source: {guideline: G-SLA-001}
      stage: filters
      for_each: thing
      when: ["thing.n > x.y"]
      let: {ratio: "thing.n / x.y"}
      then:
        - reject: {figures: {ratio: ratio, over: "thing.n - x.y", broken: "thing.n / (x.y - 2)"}}
      because: {en: "{thing.id} is {ratio}× the limit", zh: "{thing.id} 为上限的 {ratio} 倍"}
    """)
    mem = run(rb, {"x.y": 2})
    # a figure that cannot be computed is None (its explanation would show "—"), not an error
    assert [(r["option"], r["figures"]) for r in mem.rejections] == [("t4", {"ratio": 2.0, "over": 2, "broken": None})]
    assert mem.rejections[0]["because"]["en"] == "t4 is 2× the limit"
