"""`servewise ask` as a person uses it: a real pseudo-terminal (pexpect) driving the console script.

The questions asked depend on the rule base (rules request inputs), so the answers are given by
the field key each prompt shows (``traffic.peak_qps> ``), not by position."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

from servewise.engine.app.inputs import get_path, input_defs
from servewise.engine.app.plan import plan_file

pexpect = pytest.importorskip("pexpect")

EXAMPLE = EXAMPLES / "chat-70b-online.yaml"
SERVEWISE = Path(sys.executable).parent / "servewise"
PROMPT = re.compile(r"\n([a-z][a-z0-9_.]*)> ")
TIMEOUT = 90
pytestmark = [pytest.mark.skipif(not SERVEWISE.exists(), reason="console script not installed next to python"),
              pytest.mark.slow]


def spawn(cwd: Path, *args: str, color: bool = False, lang: str = "en_US.UTF-8"):
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "LC_ALL", "LC_MESSAGES")}
    env.update(LANG=lang, TERM="xterm", COLUMNS="200", PYTHONHASHSEED="0")
    if not color:
        env["NO_COLOR"] = "1"
    # Ctrl-C's default action even where the suite runs with SIGINT ignored (a background job of a
    # non-interactive shell): the ignored disposition would be inherited and the interview never interrupted
    return pexpect.spawn(str(SERVEWISE), ["ask", *args], cwd=str(cwd), env=env, encoding="utf-8",
                         timeout=TIMEOUT, dimensions=(50, 200),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def prompt(child) -> str:
    """Wait for the next prompt; return its field key ('servewise' after the plan)."""
    child.expect(PROMPT)
    return child.match.group(1)


def example_answers() -> dict[str, str]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    return {d.key: str(get_path(data, d.key)) for d in input_defs() if get_path(data, d.key) is not None}


def finish(child, answers: dict[str, str], asked: list[str]) -> None:
    """Answer every question from ``answers`` (skip the others) until the plan's prompt."""
    while (key := prompt(child)) != "servewise":
        assert key not in asked, f"{key} asked twice"
        asked.append(key)
        child.sendline(answers.get(key, "skip"))


def saved(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def test_full_interview_ends_in_the_plan_of_the_example(tmp_path):
    answers = example_answers()
    child = spawn(tmp_path)
    asked: list[str] = []
    assert prompt(child) == "model"
    asked.append("model")
    child.sendline("?")  # WHY for the model
    child.expect("Nothing can be planned without the model")
    assert prompt(child) == "model"
    child.sendline(answers["model"])
    key = prompt(child)
    assert key == "mode", "the most decisive open question follows the model"
    asked.append(key)
    child.sendline("why")
    child.expect("interview.ask-mode")
    child.expect("decides the whole approach")
    assert prompt(child) == "mode"
    child.sendline(answers["mode"])
    key = prompt(child)
    assert key == "traffic.peak_qps"
    asked.append(key)
    child.sendline("lots")  # a bad answer: explained, asked again
    child.expect(re.escape("expected a number in 0.001..100000 req/s, got 'lots'"))
    assert prompt(child) == "traffic.peak_qps"
    child.sendline("0")
    child.expect("got 0")
    assert prompt(child) == "traffic.peak_qps"
    child.sendline(answers["traffic.peak_qps"])
    key = prompt(child)
    asked.append(key)
    child.sendline("back")  # revisits the previous answer, shown as the current one
    child.expect(re.escape(f"current answer: {answers['traffic.peak_qps']}"))
    assert prompt(child) == "traffic.peak_qps"
    child.sendline("")  # Enter keeps it
    asked.remove(key)
    finish(child, answers, asked)
    text = child.before
    assert "servewise plan — Llama-3.1-70B, online, 10 QPS" in text
    assert "Configuration" in text and "\x1b[" not in text, "NO_COLOR: plain text"

    child.sendline("how gpu")
    child.expect("explain gpu — ")
    child.expect("select.gpu-component: ")  # the brief path gives each step's reason
    assert prompt(child) == "servewise"
    plan = plan_file(tmp_path / "servewise-answers.yaml").plan
    rejected_gpu = next(r["option"].split(" | ")[0] for r in plan["rejected"] if " | " in r["option"])
    child.sendline(f"why-not {rejected_gpu}")
    child.expect(re.escape(f"why-not {rejected_gpu}: "))
    assert prompt(child) == "servewise"
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    path = tmp_path / "servewise-answers.yaml"
    data = saved(path)
    example = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    for d in input_defs():  # every saved answer is the example's; the rest are the defaults
        if get_path(data, d.key) is not None:
            assert get_path(data, d.key) == get_path(example, d.key), d.key
        elif get_path(example, d.key) is not None:
            assert get_path(example, d.key) == d.default, f"{d.key} was not asked and is not a default"
    ours, theirs = plan, plan_file(EXAMPLE).plan
    assert set(ours["defaults_used"]) - set(theirs["defaults_used"]) <= {
        d.key for d in input_defs() if get_path(example, d.key) == d.default}
    for part in ("workload", "components", "performance", "cost", "feasible", "rejected", "warnings"):
        assert json.dumps(ours[part], sort_keys=True) == json.dumps(theirs[part], sort_keys=True), part
    assert "# status: done" in path.read_text(encoding="utf-8")


def test_skip_takes_the_default_and_done_plans_at_once(tmp_path):
    child = spawn(tmp_path, "-o", "mine.yaml")
    assert prompt(child) == "model"
    child.sendline("")
    child.expect("an answer is required")
    assert prompt(child) == "model"
    child.sendline("Llama-3.1-8B")
    assert prompt(child) == "mode"
    child.sendline("skip")
    key = prompt(child)
    assert key != "mode"
    child.sendline("done")  # finish early: the rest at defaults
    child.expect("servewise plan — Llama-3.1-8B, online, 20 QPS")
    assert prompt(child) == "servewise"
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    text = (tmp_path / "mine.yaml").read_text(encoding="utf-8")
    assert saved(tmp_path / "mine.yaml") == {"model": "Llama-3.1-8B"}
    assert "# skipped: mode" in text
    assert child.exitstatus == (0 if plan_file(tmp_path / "mine.yaml").feasible else 1)


def test_interrupt_keeps_the_answers_and_resume_continues(tmp_path):
    child = spawn(tmp_path)
    assert prompt(child) == "model"
    child.sendline("Llama-3.1-70B")
    assert prompt(child) == "mode"
    child.sendline("online")
    assert prompt(child) == "traffic.peak_qps"
    child.sendline("10")
    after = prompt(child)
    time.sleep(0.3)  # let the prompt's readline start before the signal
    child.sendintr()  # Ctrl-C
    if child.expect(["Interrupted. 3 answer", pexpect.TIMEOUT], timeout=20) == 1:
        child.sendintr()  # a rare lost first ^C on a loaded machine: press it again, as a person would
        child.expect("Interrupted. 3 answer")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130
    path = tmp_path / "servewise-answers.yaml"
    assert saved(path) == {"model": "Llama-3.1-70B", "mode": "online", "traffic": {"peak_qps": 10}}
    assert not [p for p in tmp_path.iterdir() if p.name != path.name], "no temporary file left"

    again = spawn(tmp_path)  # starting over would overwrite the answers: refused
    again.expect("already exists: continue it with --resume")
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus == 2

    child = spawn(tmp_path, "--resume", path.name)
    child.expect("Resuming")
    assert prompt(child) == after, "continues where it stopped"
    child.sendline("back")
    assert prompt(child) == "traffic.peak_qps", "back works across the resume"
    child.sendline("12")
    assert prompt(child) == after
    child.sendline("quit")
    child.expect("Stopped. 3 answer")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert saved(path)["traffic"]["peak_qps"] == 12


def test_answers_prefill_and_chinese(tmp_path):
    pre = tmp_path / "pre.yaml"
    pre.write_text("model: Llama-3.1-8B\nmode: offline\n", encoding="utf-8")
    child = spawn(tmp_path, "--answers", str(pre), "-o", "out.yaml", lang="zh_CN.UTF-8", color=True)
    key = prompt_colored(child)
    assert key not in ("model", "mode") and not key.startswith("sla."), "pre-filled, and no SLA offline"
    assert "\x1b[" in child.before, "colour on a TTY without NO_COLOR"
    assert re.search(r"[\u4e00-\u9fff]", child.before), "questions in Chinese"
    child.sendline("?")
    child.expect("为什么问这个问题")
    child.sendline("quit")
    child.expect("已停止")
    child.expect(pexpect.EOF)
    child.close()
    assert saved(tmp_path / "out.yaml") == {"model": "Llama-3.1-8B", "mode": "offline"}


def prompt_colored(child) -> str:
    child.expect(re.compile(r"\n(?:\x1b\[[0-9;]*m)*([a-z][a-z0-9_.]*)> "))
    return child.match.group(1)


def _site_interview(tmp_path: Path, cooling: str, rack_kw: str) -> tuple[list[str], str, dict[str, str]]:
    """Llama-3.1-70B at 10 QPS: the site answered, every other question skipped; the order asked,
    the plan's saved answers file planned, and what was shown before each prompt."""
    child = spawn(tmp_path)
    assert prompt(child) == "model"
    child.sendline("Llama-3.1-70B")
    given = {"mode": "online", "traffic.peak_qps": "10", "deployment.region": "cn",
             "constraints.cooling_available": cooling, "constraints.rack_power_kw": rack_kw}
    asked: list[str] = []
    shown: dict[str, str] = {}
    while (key := prompt(child)) != "servewise":
        shown[key] = child.before
        asked.append(key)
        child.sendline(given.get(key, "skip"))
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    plan = plan_file(tmp_path / "servewise-answers.yaml").plan
    return asked, json.dumps(plan["components"]["rack"], sort_keys=True), shown


def test_the_interview_asks_market_site_and_budget_first_and_the_site_changes_the_plan(tmp_path):
    """Issue 39: market, site and budget before request lengths and logs; a different site
    answer ends in a different plan."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    asked, rack_air, shown = _site_interview(tmp_path / "a", "air", "6")
    first = ["deployment.region", "constraints.cooling_available", "constraints.rack_power_kw",
             "constraints.capex_budget_cny"]
    later = [k for k in ("traffic.avg_input_tokens", "deployment.log_bytes_per_request") if k in asked]
    assert all(k in asked for k in first) and later
    assert max(asked.index(k) for k in first) < min(asked.index(k) for k in later)
    _, rack_liquid, _ = _site_interview(tmp_path / "b", "liquid", "40")
    assert rack_air != rack_liquid
    # the running cost range: shown once the load is known, narrowed when the site is answered, and
    # the cooling question says what its default costs
    assert "Capex with the answers so far:" in shown["deployment.region"]
    assert "cost: the default gives" in shown["constraints.cooling_available"]
    after_site = shown[asked[asked.index("constraints.cooling_available") + 1]]
    assert "Range the open answers still leave:" in after_site and "(was " in after_site


def test_the_chinese_interview_has_no_english_sentence(tmp_path):
    """Issue 39 item 7: every question, its facts line (units included), the WHY text and the plan
    it ends in, in Chinese; only the commands one types (how, why-not, change, help, quit) stay."""
    from zh_check import english_runs

    child = spawn(tmp_path, lang="zh_CN.UTF-8")
    given = {"model": "Llama-3.1-70B", "mode": "online", "traffic.peak_qps": "10"}
    shown, n = [], 0
    while (key := prompt(child)) != "servewise":
        shown.append(child.before)
        n += 1
        if n == 3:
            child.sendline("?")
            assert prompt(child) == key
            shown.append(child.before)
        child.sendline(given.get(key, "skip"))
    shown.append(child.before)
    child.sendline("quit")
    child.expect(pexpect.EOF)
    child.close()
    text = "\n".join(shown)
    assert n >= 10 and "元/百万输出 token" in text
    assert not english_runs(text, ("可输入：how",)), english_runs(text, ("可输入：how",))[:5]
