"""The interview without a plan per answer (engine/app/askplan.py) asks exactly what it asked with one.

Scripted interviews replay an example's answers (``skip`` for what it leaves at the default, a
``back`` and a changed answer on the way) twice: through the old path, a whole plan after every
change of the answers, and through :class:`AskRun`, which runs only the stages a question needs.
Both must give the same questions in the same order, the same WHY, the same answers file and a
byte-identical final plan."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import yaml
from conftest import EXAMPLES

from servewise.cli.cmd_ask import _fmt
from servewise.engine.app import interview as iv
from servewise.engine.app.askplan import AskRun, ask_map
from servewise.engine.app.inputs import get_path, input_defs
from servewise.engine.lang.rulebase import STAGES, RuleBase

# different question paths: online with a rack-power question, offline, edge video, an encoder, ASR
SCRIPTED = ["chat-70b-online", "offline-batch", "edge-video", "embedding-500qps", "asr-whisper-100-streams"]


def given(example: str) -> dict[str, str]:
    data = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text(encoding="utf-8"))
    return {d.key: _fmt(get_path(data, d.key)) for d in input_defs() if get_path(data, d.key) is not None}


class OldPath:
    """A whole plan after every change of the answers (the interview before #14)."""

    def __init__(self, rulebase: RuleBase):
        self.rulebase, self.plans = rulebase, {}

    def source(self, session: iv.Session) -> dict | None:
        if not session.answered("model"):
            return None
        key = json.dumps(session.answers, sort_keys=True, default=str)
        if key not in self.plans:
            self.plans[key] = iv.plan_answers(session, self.rulebase).plan
        return self.plans[key]

    def final(self, session: iv.Session) -> dict:
        return self.source(session)


class NewPath:
    """One AskRun per set of answers, as cli/cmd_ask.py keeps it."""

    def __init__(self, rulebase: RuleBase):
        self.rulebase, self.runs = rulebase, {}

    def source(self, session: iv.Session) -> AskRun | None:
        if not session.answered("model"):
            return None
        key = json.dumps(session.answers, sort_keys=True, default=str)
        if key not in self.runs:
            self.runs[key] = iv.ask_run(session, self.rulebase)
        return self.runs[key]

    def final(self, session: iv.Session) -> dict:
        return self.source(session).plan().plan


def interview(path, answers: dict[str, str], rulebase: RuleBase, change: tuple[str, str] | None):
    """Drive one interview; return the question keys, their WHY, the answers file and the plan.

    The operator answers from ``answers`` (``skip`` otherwise), asks WHY at every question,
    goes ``back`` once after the third question, and answers ``change`` (key, text) instead of
    the example's value the first time that question comes."""
    session = iv.Session()
    seen: list[str] = []
    whys: list[list[iv.Reason]] = []
    went_back = changed = False
    for _ in range(200):
        q = iv.next_question(session, path.source(session), rulebase)
        if q is None:
            break
        seen.append(q.key)
        whys.append(iv.why(q))
        if len(seen) == 4 and not went_back:
            went_back = True
            session.back()
            continue
        if change and q.key == change[0] and not changed:
            changed, text = True, change[1]
        else:
            text = answers.get(q.key)
        if text is None:
            session.skip(q.key)
            continue
        value = iv.check_answer(session, q.key, iv.parse_answer(q.definition, text))
        session.answer(q.key, value)
    else:
        pytest.fail("the interview did not end")
    session.done = True
    return seen, whys, iv.dump_answers(session), path.final(session)


@pytest.mark.slow
@pytest.mark.parametrize("example", SCRIPTED)
def test_scripted_interviews_ask_the_same_as_with_a_plan_per_answer(example, rulebase):
    answers = given(example)
    change = ("traffic.peak_qps", "60") if "traffic.peak_qps" in answers else None
    old_path, new_path = OldPath(rulebase), NewPath(rulebase)
    old = interview(old_path, answers, rulebase, change)
    new = interview(new_path, answers, rulebase, change)
    assert new[0] == old[0], "same questions in the same order"
    assert new[1] == old[1], "same WHY (asking rules with their reasons, then the rules reading the input)"
    assert new[2] == old[2], "same answers file"
    assert json.dumps(new[3], sort_keys=True) == json.dumps(old[3], sort_keys=True), "byte-identical plan"
    # less work: whole plans only for the final plan and for the WHY of a question asked by a
    # late-stage rule (the rack power), not one per set of answers
    full = [r for r in new_path.runs.values() if r._plan is not None]
    assert len(full) < len(old_path.plans)


def test_an_interview_runs_only_the_inputs_stage_until_the_plan_is_shown(rulebase):
    answers = given("chat-70b-online")
    path = NewPath(rulebase)
    session = iv.Session()
    asked = []
    while (q := iv.next_question(session, path.source(session), rulebase)) is not None:
        asked.append(q.key)
        text = answers.get(q.key)
        if text is None:
            session.skip(q.key)
        else:
            session.answer(q.key, iv.check_answer(session, q.key, iv.parse_answer(q.definition, text)))
    assert asked[:2] == ["model", "mode"] and "constraints.rack_power_kw" in asked
    assert path.runs and all(r._plan is None for r in path.runs.values()), "no whole plan for a question"
    assert {r._through for r in path.runs.values()} <= {-1, STAGES.index("inputs")}


def test_why_of_a_question_asked_by_a_late_rule_runs_its_stages_on_demand(rulebase):
    answers = {"model": "Llama-3.1-70B", "traffic": {"peak_qps": 60}}
    session = iv.Session(answers=copy.deepcopy(answers))
    run = iv.ask_run(session, rulebase)
    q = next(q for q in iv.open_questions(session, run, rulebase) if q.key == "constraints.rack_power_kw")
    assert q.more is not None and run._plan is None, "decided without the facilities and checks stages"
    plan = iv.plan_answers(session, rulebase).plan
    reference = next(q for q in iv.open_questions(session, plan, rulebase) if q.key == "constraints.rack_power_kw")
    assert iv.why(q) == iv.why(reference)
    assert iv.why(q)[0].asks and iv.why(q)[0].because["en"]


def test_ask_map_lists_the_asking_rules_and_their_latest_stage(rulebase):
    m = ask_map(rulebase)
    assert m is ask_map(rulebase), "built once per rule base"
    assert m.askers["mode"] == ("interview.ask-mode", "sla.ask-mode")
    assert m.last_stage["traffic.peak_qps"] == STAGES.index("inputs")
    assert m.last_stage["constraints.rack_power_kw"] == STAGES.index("checks")
    assert [r.rule for r in iv.readers("traffic.peak_qps", rulebase)] == [
        r.id for r in rulebase.rules if "traffic.peak_qps" in r.names]


def test_an_input_asked_in_a_later_stage_runs_the_stages_up_to_it(rulebase):
    """A rule base where a `cost` rule asks for the peak: the question waits for that stage."""
    base = rulebase.by_id("interview.ask-peak-qps")
    late = dataclasses.replace(base, id="test.ask-peak-late", stage="cost",
                               load_order=len(rulebase.rules))
    rb = RuleBase(rulebase.rules + [late], rulebase.files, rulebase.knowledge_hash + "+test")
    assert ask_map(rb).last_stage["traffic.peak_qps"] == STAGES.index("cost")
    session = iv.Session(answers={"model": "Llama-3.1-8B", "mode": "online"})
    run = iv.ask_run(session, rb)
    assert iv.next_question(session, run, rb).key == "traffic.peak_qps"
    assert run._through == STAGES.index("cost") and run._plan is None
    plan = iv.plan_answers(session, rb).plan
    assert run.asks("traffic.peak_qps") == [a for a in plan["asks"] if a["input"] == "traffic.peak_qps"]
