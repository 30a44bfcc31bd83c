"""Bounding the candidates by cost (rules/filters/prune.yaml, issue #41 item 6): the engine parts
(`least`, `order_by`), the physics the floors rest on, that each floor is a lower bound of what the
full sizing computes, and that bounding never changes the choice."""

from __future__ import annotations

import textwrap

import pytest
from conftest import EXAMPLES

from servewise.engine.domain import perf
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.fn_sizing import replicas_floor
from servewise.engine.domain.functions import RunContext, reset_context, use_context
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.lang.rulebase import load_rules
from servewise.engine.runtime.runner import Origin, Runner

ITEMS = """\
- id: test.items
  title: {en: items, zh: items}
  source: {guideline: G-SLA-001}
  stage: candidates
  then:
    - propose:
        kind: thing
        over: {n: "[5, 3, 9, 1, 7]"}
        id: "'t' + text(n)"
        attrs: {n: "n", group: "'odd' if n in [1, 3] else 'big'", cost: "n * 10"}
  because: {en: "things", zh: "things"}
- id: test.sized
  title: {en: sized, zh: sized}
  source: {guideline: G-SLA-001}
  stage: filters
  for_each: thing
  salience: -10
  order_by: "thing.n"
  when: ["thing.n > 0"]
  then:
    - least: {of: done, among: [group], as: best}
    - derive: {thing.done: "thing.cost"}
  because: {en: "{thing.id}", zh: "{thing.id}"}
"""


def _run(tmp_path, text: str):
    (tmp_path / "r.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    rb = load_rules([tmp_path], builtin=False)
    return Runner(rb).run({"x.y": (1, Origin("input", "x.y"))}, RunContext(load_catalog()))


def test_order_by_fires_activations_in_ascending_order_and_least_sees_the_earlier_ones(tmp_path):
    mem = _run(tmp_path, ITEMS)
    order = [s["conclusions"][0]["fact"].split("[")[1].split("]")[0] for s in mem.steps if s["rule"] == "test.sized"]
    assert order == ["t1", "t3", "t5", "t7", "t9"], order
    items = {iid: mem.items[("thing", iid)] for _, iid in mem.item_order}
    # the least `done` among the others of the same group, as it stood when each fired
    assert items["t1"]["best"] is None and items["t3"]["best"] == 10 and items["t3"]["best_id"] == "t1"
    assert items["t5"]["best"] is None  # the first of group 'big'
    assert items["t7"]["best"] == 50 and items["t9"]["best"] == 50 and items["t9"]["best_id"] == "t5"


def test_least_needs_a_for_each_rule(tmp_path):
    bad = """\
    - id: test.bad
      title: {en: bad, zh: bad}
      source: {guideline: G-SLA-001}
      stage: filters
      then: [{least: {of: done, as: best}}]
      because: {en: "x", zh: "x"}
    """
    (tmp_path / "r.yaml").write_text(textwrap.dedent(bad), encoding="utf-8")
    with pytest.raises(Exception, match="least: compares the items of a for_each rule"):
        load_rules([tmp_path], builtin=False)


@pytest.mark.parametrize(("model", "gpu", "tp", "precision"), [
    ("Llama-3.1-8B", "L40S", 1, "bf16"), ("Llama-3.1-70B", "H200 NVL", 2, "fp8"),
    ("Qwen2.5-7B", "A10", 1, "int8"), ("Qwen3-235B-A22B", "H200 SXM", 8, "fp8"),
])
def test_a_replica_serves_no_more_at_fewer_requests_and_tpot_never_beats_the_decode_floor(model, gpu, tp, precision):
    """The facts the floors rest on: C / (t_prefill + osl x t_decode(C)) does not fall as C grows
    (so the KV capacity bounds the requests/s of any operating point), and the TTFT and TPOT the
    model estimates at C are at least t_prefill and t_decode(C) (so that expression bounds them)."""
    cat = load_catalog()
    m, g = cat.model(model), cat.gpu(gpu)
    isl, osl = 2000, 400
    setup = perf.replica_setup(m, g, Layout(tp, 1, 1, 1), precision, isl, osl)
    assert setup is not None
    cap = setup[1]
    points = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, cap} & set(range(1, cap + 1)))
    pf = perf.prefill_floor_ms(setup, isl=isl)
    rates = [c / (pf + osl * perf.decode_floor_ms(setup, isl=isl, osl=osl, concurrency=c)) for c in points]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(rates, rates[1:], strict=False)), rates
    for c in points[:6]:
        est = perf.estimate_record(m, g, tp=tp, precision=precision, isl=isl, osl=osl, concurrency=c,
                                   arrival="poisson")
        # (the estimate rounds its TPOT to 0.1 µs)
        assert est["tpot_ms"] >= perf.decode_floor_ms(setup, isl=isl, osl=osl, concurrency=c) - 1e-4
        assert est["ttft_ms"] >= perf.prefill_floor_ms(setup, isl=isl) - 1e-3


BOUNDED_EXAMPLES = ("chat-8b-small", "deepseek-v3-public-api", "offline-batch")


@pytest.fixture(scope="module")
def planned():
    from servewise.engine.app.plan import plan_file

    return {name: plan_file(EXAMPLES / f"{name}.yaml") for name in BOUNDED_EXAMPLES}


def test_every_floor_is_a_lower_bound_of_the_full_sizing(planned):
    for name, result in planned.items():
        mem = result.memory
        token = use_context(RunContext(load_catalog()))
        try:
            checked = 0
            for (kind, iid), a in mem.items.items():
                if kind != "candidate" or a.get("capex_cny") is None or a.get("cost_floor_cny") is None:
                    continue
                assert a["replicas_floor"] <= a["replicas"], (name, iid)
                assert a["cost_floor_cny"] <= a["capex_cny"] + 1e-6, (name, iid, a["cost_floor_cny"], a["capex_cny"])
                v = mem.values
                kv = replicas_floor(v["model.id"], a["gpu"], a["tp"], a["pp"], a["precision"],
                                    v["traffic.avg_input_tokens"], v["traffic.avg_output_tokens"], None,
                                    v["traffic.peak_qps"], v["traffic.peak_concurrency"], v["mode"] == "offline",
                                    a["framework"], a["ep"], a["attention_dp"], v["workload.spec_tokens"],
                                    v["workload.spec_acceptance"])
                assert kv <= a["replicas_floor"], (name, iid)  # the KV floor is the looser one
                checked += 1
        finally:
            reset_context(token)
        assert checked >= 3, name


def test_bounding_changes_no_choice_and_sizes_fewer(planned, monkeypatch):
    from servewise.engine.app.plan import plan_file

    entry = load_catalog().table("policies").get("candidate_cost_bar_ratio")
    monkeypatch.setitem(entry, "value", 1000)  # a bar nothing is above: every candidate sized in full
    for name in ("chat-8b-small", "deepseek-v3-public-api"):
        full = plan_file(EXAMPLES / f"{name}.yaml").plan
        bounded = planned[name].plan
        assert bounded["components"]["gpu"] == full["components"]["gpu"], name
        assert bounded["cost"] == full["cost"], name
        chosen = next(c for c in bounded["candidates"] if c["chosen"])
        assert chosen == next(c for c in full["candidates"] if c["chosen"]), name
        assert len(bounded["candidates"]) < len(full["candidates"]) / 2, name
        assert not any(r["rule"] == "prune.dominated" for r in full["rejected"]), name
        pruned = [r for r in bounded["rejected"] if r["rule"] == "prune.dominated"]
        assert pruned and all("Not sized in full" in r["because"] for r in pruned), name
