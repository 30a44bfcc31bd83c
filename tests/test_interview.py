"""The interview's logic (engine/app/interview.py): which question next, why, answers, the saved file."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import EXAMPLES

from servewise.engine.app import interview as iv
from servewise.engine.app.inputs import WorkloadError, fill_defaults, input_def, load_workload, validate_workload
from servewise.engine.app.plan import plan_file, plan_workload

EXAMPLE = EXAMPLES / "chat-70b-online.yaml"


def plan_of(answers, rulebase):
    return iv.plan_answers(iv.Session(answers=copy.deepcopy(answers)), rulebase).plan


def keys(questions):
    return [q.key for q in questions]


def test_model_is_asked_first_and_alone(rulebase):
    questions = iv.open_questions(iv.Session(), None, rulebase)
    assert keys(questions) == ["model"]
    assert questions[0].reasons, "WHY for the model lists the rules that read model.*"


def test_after_the_model_the_decisive_questions_come_in_priority_order(rulebase):
    session = iv.Session(answers={"model": "Llama-3.1-70B"})
    questions = iv.open_questions(session, plan_of(session.answers, rulebase), rulebase)
    got = keys(questions)
    assert got[0] == "mode"
    expected = ["mode", "traffic.peak_qps", "sla.ttft_ms", "sla.tpot_ms", "traffic.avg_input_tokens",
                "traffic.avg_output_tokens", "traffic.max_context_tokens"]
    assert [k for k in got if k in expected] == expected
    assert len(got) == len(set(got))
    rank = {k: i for i, k in enumerate(iv.PRIORITY)}
    assert [rank[k] for k in got] == sorted(rank[k] for k in got)
    assert "models" not in got and "model" not in got


def test_rule_asks_carry_the_rule_and_its_reason(rulebase):
    session = iv.Session(answers={"model": "Llama-3.1-70B"})
    questions = {q.key: q for q in iv.open_questions(session, plan_of(session.answers, rulebase), rulebase)}
    reasons = iv.why(questions["traffic.peak_qps"])
    assert reasons[0].asks and reasons[0].rule == "interview.ask-peak-qps"
    assert "20 requests/s" in reasons[0].because["en"]
    assert reasons[0].title["zh"]
    assert any(not r.asks for r in reasons), "rules reading the input are listed too"
    assert len({r.rule for r in reasons}) == len(reasons)


def test_given_inputs_are_not_asked(rulebase):
    workload, _ = load_workload(EXAMPLE)
    answers = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    session = iv.Session(answers=answers)
    got = keys(iv.open_questions(session, plan_of(answers, rulebase), rulebase))
    for key in ("model", "mode", "traffic.peak_qps", "sla.ttft_ms", "sla.tpot_ms", "deployment.horizon_months"):
        assert key not in got


def test_no_sla_questions_offline_and_no_edge_questions_in_a_data_centre(rulebase):
    offline = iv.Session(answers={"model": "Llama-3.1-8B", "mode": "offline"})
    got = keys(iv.open_questions(offline, plan_of(offline.answers, rulebase), rulebase))
    assert not [k for k in got if k.startswith("sla.")]
    assert not [k for k in got if k.startswith("edge.")]
    online = iv.Session(answers={"model": "Llama-3.1-8B", "mode": "online"})
    got = keys(iv.open_questions(online, plan_of(online.answers, rulebase), rulebase))
    assert "sla.ttft_ms" in got and not [k for k in got if k.startswith("edge.")]


def test_ask_if_is_evaluated_on_the_default_filled_answers():
    online, _ = fill_defaults({"model": "x"})
    edge, _ = fill_defaults({"model": "x", "mode": "edge"})
    assert iv.relevant(input_def("constraints.rack_power_kw"), online)
    assert not iv.relevant(input_def("constraints.rack_power_kw"), edge)
    assert iv.relevant(input_def("edge.power_budget_w"), edge)
    assert not iv.relevant(input_def("edge.power_budget_w"), online)
    assert iv.relevant(input_def("precision"), online)  # no ask_if: always relevant


def test_rack_power_is_asked_by_a_rule_when_the_plan_exceeds_a_rack(rulebase):
    answers = {"model": "Llama-3.1-70B", "traffic": {"peak_qps": 60}}
    workload, defaults = fill_defaults(answers)
    result = plan_workload(workload, defaults, rulebase)
    assert result.memory.fired.get("interview.ask-rack-power"), "our rule fires (the plan needs > 10 kW)"
    q = next(q for q in iv.open_questions(iv.Session(answers=answers), result.plan, rulebase)
             if q.key == "constraints.rack_power_kw")
    asking = iv.why(q)[0]
    assert asking.asks and asking.because["en"] and asking.rule in {a["rule"] for a in result.plan["asks"]}
    small = {"model": "Llama-3.1-8B", "traffic": {"peak_qps": 1}}
    workload, defaults = fill_defaults(small)
    assert not plan_workload(workload, defaults, rulebase).memory.fired.get("interview.ask-rack-power")


@pytest.mark.parametrize("key, text, fragment", [
    ("traffic.peak_qps", "lots", "expected a number in 0.001..100000 req/s, got 'lots'"),
    ("traffic.peak_qps", "-3", "got -3"), ("traffic.avg_input_tokens", "1.5", "expected an integer"),
    ("precision", "fp9", "expected one of auto"), ("sla.p99", "maybe", "expected true or false"),
    ("constraints.vendors", "nvidia, intel", "'intel'"),
])
def test_bad_answers_get_the_workload_validation_message(key, text, fragment):
    session = iv.Session(answers={"model": "Llama-3.1-8B"})
    value = iv.parse_answer(input_def(key), text)
    with pytest.raises(iv.AnswerError) as err:
        iv.check_answer(session, key, value)
    trial = {"model": "Llama-3.1-8B"}
    iv.set_path(trial, key, value)
    with pytest.raises(WorkloadError) as direct:
        validate_workload(trial)
    assert str(err.value) == direct.value.message
    assert fragment in str(err.value)


def test_answers_are_typed_and_normalised():
    session = iv.Session(answers={"model": "Llama-3.1-8B"})
    parse = lambda k, t: iv.check_answer(session, k, iv.parse_answer(input_def(k), t))  # noqa: E731
    assert parse("traffic.peak_qps", "10") == 10 and isinstance(parse("traffic.peak_qps", "10"), int)
    assert parse("traffic.peak_qps", "2.5") == 2.5
    assert parse("traffic.avg_input_tokens", "1,024") == 1024
    assert parse("mode", "OFFLINE") == "offline"
    assert parse("mode", "2") == "offline"
    assert parse("sla.p99", "no") is False and parse("sla.p99", "是") is True
    assert parse("constraints.vendors", "nvidia huawei") == ["nvidia", "huawei"]
    assert parse("constraints.gpu_models", "H100 SXM, L40S") == ["H100 SXM", "L40S"]
    assert parse("sla.e2e_p99_ms", "none") is None
    assert iv.check_answer(iv.Session(), "model", "llama-3.1-70b") == "Llama-3.1-70B"


def test_unknown_model_suggests_close_names():
    with pytest.raises(iv.AnswerError, match="did you mean"):
        iv.check_answer(iv.Session(), "model", "Llama-3.1-70")


def test_skip_back_and_revisit(rulebase):
    session = iv.Session()
    session.answer("model", "Llama-3.1-70B")
    session.answer("mode", "online")
    session.skip("traffic.peak_qps")
    assert not session.answered("traffic.peak_qps") and "traffic.peak_qps" in session.skipped
    plan = plan_of(session.answers, rulebase)
    assert "traffic.peak_qps" not in keys(iv.open_questions(session, plan, rulebase))
    assert session.back() == "traffic.peak_qps"
    assert iv.next_question(session, plan, rulebase).key == "traffic.peak_qps"
    session.answer("traffic.peak_qps", 10)
    assert session.revisit is None and session.asked[-1] == "traffic.peak_qps"
    assert "traffic.peak_qps" not in session.skipped
    assert session.back() == "traffic.peak_qps" and session.back() == "mode"
    assert iv.next_question(session, plan, rulebase).key == "mode"
    assert session.value("mode") == "online", "an answer stays until it is replaced"
    assert iv.Session().back() is None


def test_remove_path_drops_empty_sections():
    data = {"model": "m", "sla": {"ttft_ms": 1}}
    iv.remove_path(data, "sla.ttft_ms")
    assert data == {"model": "m"}
    iv.remove_path(data, "traffic.peak_qps")  # absent: no error
    assert data == {"model": "m"}


def test_saved_file_is_a_workload_with_the_interview_state(tmp_path):
    session = iv.Session()
    session.answer("model", "Llama-3.1-70B")
    session.answer("traffic.peak_qps", 10)
    session.skip("mode")
    target = tmp_path / "answers.yaml"
    iv.save_answers(target, session)
    assert [p.name for p in tmp_path.iterdir()] == ["answers.yaml"], "no temporary file left behind"
    workload, defaults = load_workload(target)  # a valid workload file as it is
    assert workload["traffic"]["peak_qps"] == 10 and "mode" in defaults
    back = iv.load_answers(target)
    assert back.answers == {"model": "Llama-3.1-70B", "traffic": {"peak_qps": 10}}
    assert back.asked == ["model", "traffic.peak_qps", "mode"] and back.skipped == {"mode"}
    assert not back.done


def test_partial_and_bad_answer_files(tmp_path):
    partial = tmp_path / "p.yaml"
    partial.write_text("traffic: {peak_qps: 5}\n", encoding="utf-8")
    session = iv.load_answers(partial)
    assert session.answers == {"traffic": {"peak_qps": 5}} and session.asked == []
    bad = tmp_path / "b.yaml"
    bad.write_text("model: Llama-3.1-8B\ntraffic: {peak_qps: fast}\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match="traffic.peak_qps"):
        iv.load_answers(bad)
    with pytest.raises(WorkloadError, match="file not found"):
        iv.load_answers(tmp_path / "missing.yaml")


def test_saved_answers_plan_like_the_example(tmp_path, rulebase):
    answers = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    session = iv.Session()
    for d in iv.askable():
        if iv.has_path(answers, d.key):
            session.answer(d.key, iv.get_path(answers, d.key))
    target = tmp_path / "a.yaml"
    iv.save_answers(target, session)
    assert plan_file(target, rulebase).plan == plan_file(EXAMPLE, rulebase).plan


def test_latency_segments_are_asked_with_an_end_to_end_target(rulebase):
    """G-SLA-007: network, pre- and post-processing budgets are asked once an end-to-end target is given."""
    plain = iv.Session(answers={"model": "Llama-3.1-8B", "mode": "online"})
    got = keys(iv.open_questions(plain, plan_of(plain.answers, rulebase), rulebase))
    assert "sla.network_ms" not in got
    e2e = iv.Session(answers={"model": "Llama-3.1-8B", "mode": "online", "sla": {"e2e_p99_ms": 6000}})
    got = keys(iv.open_questions(e2e, plan_of(e2e.answers, rulebase), rulebase))
    assert [k for k in got if k in ("sla.network_ms", "sla.preprocess_ms", "sla.postprocess_ms")] == [
        "sla.network_ms", "sla.preprocess_ms", "sla.postprocess_ms"]


def test_a_several_model_workload_is_not_asked_for_a_model_again(rulebase):
    """Issue 39: `ask --answers` with a `models:` workload asks what is still open, not `model`."""
    answers = yaml.safe_load((EXAMPLES / "multi-model-tenants.yaml").read_text(encoding="utf-8"))
    session = iv.Session(answers=answers)
    assert session.has_model()
    got = keys(iv.open_questions(session, plan_of(answers, rulebase), rulebase))
    assert "model" not in got and "models" not in got


def test_market_site_and_budget_come_before_lengths_and_logs(rulebase):
    session = iv.Session(answers={"model": "Llama-3.1-70B"})
    got = keys(iv.open_questions(session, plan_of(session.answers, rulebase), rulebase))
    first = ["deployment.region", "constraints.cooling_available", "constraints.rack_power_kw",
             "constraints.capex_budget_cny", "sla.availability"]
    later = ["traffic.avg_input_tokens", "traffic.avg_output_tokens", "deployment.log_bytes_per_request"]
    assert all(k in got for k in first + later), got
    assert max(got.index(k) for k in first) < min(got.index(k) for k in later)


def test_the_running_cost_range_narrows_as_price_deciding_answers_come(example_plans):
    """Issue 39 item 1: the capex of the answers so far with its price range, widened by what the
    rules computed for the other answer of each decisive input still at its default (availability:
    the plan without N+1; site cooling: the cold plates' premium); a given answer removes its
    move."""
    import copy

    plan = example_plans["chat-70b-online"].plan
    out = iv.cost_outlook(plan)
    assert out is not None and out.capex_cny == plan["cost"]["capex_cny"]
    assert out.price_range == tuple(plan["cost"]["capex_range_cny"])
    single = out.move("sla.availability")
    pct = plan["components"]["availability"]["without_n1_change_pct"]
    assert single.what == "single-server" and single.capex_cny == round(out.capex_cny * (1 + pct / 100))
    liquid = out.move("constraints.cooling_available")
    premium = next(c["value"] for s in plan["trace"] for c in s["conclusions"]
                   if c["fact"] == "facility.liquid_premium_cny")
    assert liquid.what == "liquid-site" and liquid.capex_cny == out.capex_cny + premium
    assert out.low_cny < out.price_range[0] and out.high_cny > out.price_range[1]
    answered = copy.deepcopy(plan)  # the same plan, both inputs answered: only the price range is left
    answered["defaults_used"] = [d for d in plan["defaults_used"]
                                 if d not in ("sla.availability", "constraints.cooling_available")]
    narrow = iv.cost_outlook(answered)
    assert narrow.moves == () and (narrow.low_cny, narrow.high_cny) == out.price_range
    assert iv.cost_outlook(example_plans["infeasible-target"].plan) is None
    assert {"deployment.region", "constraints.cooling_available", "constraints.capex_budget_cny",
            "sla.availability"} <= iv.PRICE_KEYS and "deployment.log_bytes_per_request" not in iv.PRICE_KEYS
