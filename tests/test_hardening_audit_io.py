"""Regression tests for issue #42 ("Hardening, second round"), items 3, 4 and parts of 7: `audit`
trusts no part of a plan file, `--rules-dir` takes only rule folders, `ask --resume` and `-o`
never lose or redirect data, and absurd answers or plan files are refused with exit 2.

One test (or parametrised case) per finding, through the CLI; each fails on the code before the fix.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

from servewise.cli.main import cli as group
from servewise.engine.app import interview as iv
from servewise.engine.app.inputs import input_def

QUICK = str(EXAMPLES / "deepseek-r1-h20.yaml")  # the example that plans fastest
PASSWD_MARK = "root:x:0:0"


def invoke(*args: str, **kw):
    return CliRunner().invoke(group, list(args), **kw)


def one_error_line(res) -> str:
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    return lines[0]


@pytest.fixture(scope="module")
def saved(example_plans):
    """chat-8b-small as `plan --format json` writes it (a dict; tamper with a copy)."""
    return json.loads(example_plans["chat-8b-small"].json_text)


def tampered(tmp_path: Path, plan: dict, how, name: str = "plan.json") -> str:
    data = json.loads(json.dumps(plan))
    how(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def with_rules_dirs(*paths: str):
    def how(plan):
        plan["rules_dirs"] = [{"path": p, "hash": "sha256:0123456789abcdef"} for p in paths]
    return how


# ------------------------------------------------- 3. audit validates the recorded workload as `plan`

@pytest.mark.parametrize("how, field", [
    (lambda p: p["workload"]["traffic"].__setitem__("peak_qps", -5), "workload.traffic.peak_qps"),  # was planned
    (lambda p: p["workload"]["traffic"].__setitem__("avg_output_tokens", 0),  # ZeroDivisionError in a rule
     "workload.traffic.avg_output_tokens"),
    (lambda p: p["workload"]["traffic"].pop("avg_input_tokens"), "workload.traffic.avg_input_tokens"),  # deleted
    (lambda p: p["workload"].pop("traffic"), "workload.traffic"),
    (lambda p: p["workload"].__setitem__("traffic", 5), "workload.traffic"),
    (lambda p: p["workload"].__setitem__("model", {"name": "x", "params_b": 1, "num_layers": 1, "hidden_size": 0,
                                                   "num_attention_heads": 0}),  # exit 3: ZeroDivisionError
     "workload.model"),
    (lambda p: (p["workload"].pop("model"), p["workload"].__setitem__("models", [{"peak_qps": 1}])),  # KeyError
     "workload.models"),
    (lambda p: (p["workload"].pop("model"), p["workload"].__setitem__("models", "abc")),  # AttributeError
     "workload.models"),
    (lambda p: p.__setitem__("defaults_used", ["no.such.input"]), "defaults_used[0]"),
])
def test_audit_refuses_an_edited_workload_naming_the_field(tmp_path, saved, how, field):
    path = tampered(tmp_path, saved, how)
    res = invoke("audit", path)
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert line.startswith(f"error: {path}: {field}"), line
    assert "rule base" not in line and "/rules/" not in line  # never blamed on a built-in rule file


def test_audit_workload_errors_are_the_plan_commands_messages_in_both_languages(tmp_path, saved):
    path = tampered(tmp_path, saved, lambda p: p["workload"]["traffic"].__setitem__("peak_qps", -5))
    en = one_error_line(invoke("audit", path))
    assert en == f"error: {path}: workload.traffic.peak_qps: expected a number in 0.001..100000 req/s, got -5"
    zh = one_error_line(invoke("--lang", "zh", "audit", path))
    assert "workload.traffic.peak_qps" in zh and re.search(r"[\u4e00-\u9fff]", zh), zh
    workload = tmp_path / "w.yaml"  # `plan` says the same of the same value in a workload file
    workload.write_text((EXAMPLES / "chat-8b-small.yaml").read_text().replace("peak_qps: 2", "peak_qps: -5"))
    planned = one_error_line(invoke("plan", str(workload)))
    assert planned.endswith("traffic.peak_qps: expected a number in 0.001..100000 req/s, got -5")


# --------------------------------------------------- 3. audit checks the recorded rule folders

@pytest.mark.parametrize("folder", ["/", "/etc", "/usr", "/proc", "/dev", "/etc/passwd", "/dev/null",
                                    str(Path.home())])
def test_audit_refuses_system_folders_and_files_quickly_without_showing_them(tmp_path, saved, folder):
    path = tampered(tmp_path, saved, with_rules_dirs(folder))
    start = time.monotonic()
    res = invoke("audit", path)
    assert time.monotonic() - start < 2  # `/` was walked for 14 s
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert line.startswith(f"error: {path}: rules_dirs[0].path: {folder}:") and "expected a folder" in line
    assert PASSWD_MARK not in res.output  # /etc/passwd was printed in an error message


def test_audit_refuses_a_fifo_and_an_empty_folder(tmp_path, saved):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder, why in ((fifo, "a FIFO"), (empty, "contains no *.yaml rule files")):
        res = invoke("audit", tampered(tmp_path, saved, with_rules_dirs(str(folder))))
        assert res.exit_code == 2 and why in one_error_line(res), res.output
    res = invoke("audit", tampered(tmp_path, saved, with_rules_dirs("")))  # "" would be the working folder
    assert res.exit_code == 2 and "no longer exists" in one_error_line(res)


def test_audit_names_a_bad_recorded_rule_file_but_never_quotes_it(tmp_path, saved):
    folder = tmp_path / "rules"
    folder.mkdir()
    (folder / "secret.yaml").write_text("password: hunter2-do-not-print\n")
    (folder / "broken.yaml").write_text("- id: [unclosed\n  token: s3cr3t-value\n")
    res = invoke("audit", tampered(tmp_path, saved, with_rules_dirs(str(folder))))
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert "secret.yaml" in line and "broken.yaml" in line and "rules lint" in line
    assert "hunter2" not in res.output and "s3cr3t" not in res.output


# ------------------------------------------------------- 3. --rules-dir: one check, every command

@pytest.mark.parametrize("command", [["plan", QUICK], ["explain", "PLAN", "gpu"], ["why-not", "PLAN", "L40S"],
                                     ["audit", "PLAN"], ["rules", "facts"], ["ask"]])
@pytest.mark.parametrize("kind", ["devnull", "fifo", "empty", "root", "file"])
def test_rules_dir_must_be_a_rule_folder_for_every_command(tmp_path, saved, command, kind):
    plan = tampered(tmp_path, saved, lambda p: None)
    target = {"devnull": "/dev/null", "fifo": str(tmp_path / "pipe"), "empty": str(tmp_path / "empty"),
              "root": "/", "file": str(tmp_path / "notes.txt")}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "empty":
        os.mkdir(target)
    elif kind == "file":
        Path(target).write_text("not rules\n")
    args = [plan if a == "PLAN" else a for a in command]
    if command == ["ask"]:
        args += ["-o", str(tmp_path / "a.yaml")]
    start = time.monotonic()
    res = invoke("--rules-dir", target, *args, input="quit\n")
    assert time.monotonic() - start < 5
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert target in line and "expected a folder of *.yaml rule files" in line, line
    assert "not rules" not in res.output
    assert not (tmp_path / "a.yaml").exists()


def test_rule_folder_check_accepts_rule_folders_and_files():
    from servewise.engine.lang.rulebase import RULES_DIR, check_rule_folder

    assert check_rule_folder(RULES_DIR) is None
    assert check_rule_folder(next(RULES_DIR.rglob("*.yaml"))) is None  # `rules lint FILE`
    assert check_rule_folder("/no/such/folder").code == "rules_dir.not_found"


def test_rule_folder_check_stops_in_a_huge_tree(tmp_path, monkeypatch):
    from servewise.engine.lang import rulebase

    monkeypatch.setattr(rulebase, "MAX_FOLDER_ENTRIES", 50)
    for i in range(60):
        (tmp_path / f"f{i}.txt").write_text("")
    problem = rulebase.check_rule_folder(tmp_path)
    assert problem is not None and problem.code == "rules_dir.too_large" and "more than 50 entries" in str(problem)


# --------------------------------------------------------- 4a. ask --resume loses nothing

def identity(path: Path) -> tuple[int, int]:
    """Inode and modification time: a rewrite (rename over the file) changes them."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def first_prompt(output: str) -> str:
    return re.findall(r"^([\w.]+)> ", output, re.M)[0]


def an_answer(key: str) -> str:
    d = input_def(key)
    if d.type in ("choice", "choices"):
        return str(d.choices[0])
    if d.type in ("number", "integer"):
        return str(int(d.minimum) + 1 if d.minimum is not None else 1)
    return {"boolean": "yes", "strings": "x"}.get(d.type, "x")


@pytest.mark.parametrize("example", ["chat-70b-online", "budget-7b-150k"])
def test_resume_and_quit_leaves_the_file_byte_identical(tmp_path, example):
    path = tmp_path / "x.yaml"
    original = (EXAMPLES / f"{example}.yaml").read_bytes()
    path.write_bytes(original)
    stamp = identity(path)
    res = invoke("ask", "--resume", str(path), input="quit\n")
    assert res.exit_code == 0, res.output
    assert path.read_bytes() == original and identity(path) == stamp  # not even rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.yaml"]


@pytest.mark.parametrize("example", ["chat-70b-online", "budget-7b-150k"])  # block and flow style
def test_resume_writes_a_changed_answer_in_place_keeping_comments(tmp_path, example):
    path = tmp_path / "x.yaml"
    original = (EXAMPLES / f"{example}.yaml").read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    key = first_prompt(invoke("ask", "--resume", str(path), input="quit\n").output)
    res = invoke("ask", "--resume", str(path), input=f"{an_answer(key)}\nquit\n")
    assert res.exit_code == 0, res.output
    new_lines = path.read_text(encoding="utf-8").splitlines()
    old_lines = original.splitlines()
    it = iter(new_lines)
    assert all(line in it for line in old_lines if line.startswith("#")), "every comment kept, in order"
    assert len([line for line in old_lines if line not in new_lines]) <= 1  # at most the edited section's line
    added = [line for line in new_lines if line not in old_lines]
    assert f"# asked: {key}" in added and len(added) <= 6, added
    session = iv.load_answers(path)
    assert session.answered(key) and session.asked == [key]
    before = iv.load_text(original, "x")[0]
    assert all(iv.get_path(before, d.key) == session.value(d.key) for d in iv.input_defs() if d.key != key)
    assert invoke("plan", str(path)).exit_code in (0, 1)


def test_resume_edits_flow_style_sections_in_place(tmp_path):
    path = tmp_path / "flow.yaml"
    original = "# all in one line\n{model: Llama-3.1-8B, mode: online, traffic: {peak_qps: 2}}\n"
    path.write_text(original, encoding="utf-8")
    key = first_prompt(invoke("ask", "--resume", str(path), input="quit\n").output)
    res = invoke("ask", "--resume", str(path), input=f"{an_answer(key)}\nquit\n")
    assert res.exit_code == 0, res.output
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# all in one line\n# asked: ") and "{model: Llama-3.1-8B, mode: online, " in text
    assert iv.load_answers(path).answered(key)


def test_resume_of_an_uneditable_layout_saves_next_to_it_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(iv, "edit_answers_text", lambda text, session: None)  # e.g. a changed anchor
    path = tmp_path / "x.yaml"
    original = (EXAMPLES / "chat-70b-online.yaml").read_text(encoding="utf-8")
    path.write_text(original, encoding="utf-8")
    key = first_prompt(invoke("ask", "--resume", str(path), input="quit\n").output)
    res = invoke("ask", "--resume", str(path), input=f"{an_answer(key)}\nquit\n")
    assert res.exit_code == 0, res.output
    assert path.read_text(encoding="utf-8") == original
    other = tmp_path / "x.answers.yaml"
    said = " ".join(res.output.split())
    assert "x.answers.yaml" in said and "left as it was" in said and f"saved in {other}" in said
    assert iv.load_answers(other).answered(key)


def test_resume_of_servewises_own_file_and_quit_does_not_rewrite_it(tmp_path):
    path = tmp_path / "a.yaml"
    assert invoke("ask", "-o", str(path), input="Llama-3.1-8B\nquit\n").exit_code == 0
    before, stamp = path.read_bytes(), identity(path)
    time.sleep(0.01)
    assert invoke("ask", "--resume", str(path), input="quit\n").exit_code == 0
    assert path.read_bytes() == before and identity(path) == stamp


@pytest.mark.parametrize("how, value", [
    (lambda s: s.answer("traffic.peak_qps", 12), "peak_qps: 12   # peak"),
    (lambda s: s.skip("sla.ttft_ms"), None),
    (lambda s: s.answer("deployment.horizon_months", 24), "deployment:\n  horizon_months: 24\n"),
    (lambda s: s.answer("constraints.vendors", ["nvidia"]), "  vendors: [nvidia]\n"),
])
def test_edit_answers_text_changes_only_what_changed(how, value):
    text = ("# mine\n\nmodel: Llama-3.1-70B   # the model\nsla:\n  ttft_ms: 1000  # first token\n"
            "traffic:\n    peak_qps: 10   # peak\nconstraints:\n  vendors:\n    - nvidia\n    - amd\n# end\n")
    session = iv.Session(answers=iv.load_text(text, "t")[0])
    how(session)
    new = iv.edit_answers_text(text, session)
    assert new is not None and iv.load_text(new, "t")[0] == session.answers
    assert new.startswith("# mine\n# asked: ") and "# the model" in new and new.endswith("# end\n")
    if value is None:
        assert "sla:" not in new and "first token" not in new
    else:
        assert value in new


def test_edit_answers_text_gives_up_on_anchors():
    text = "model: Llama-3.1-8B\nsla:\n  ttft_ms: &t 500\n  tpot_ms: *t\n"
    session = iv.Session(answers=iv.load_text(text, "t")[0])
    session.answer("sla.ttft_ms", 400)
    assert iv.edit_answers_text(text, session) is None


# ------------------------------------------------------- 4b. -o never follows a symbolic link

def test_output_refuses_a_symlink_to_a_file_elsewhere(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "precious.txt"
    target.write_text("precious\n")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    res = invoke("plan", QUICK, "--format", "json", "-o", str(link))
    assert res.exit_code == 2 and "symbolic link" in one_error_line(res)
    assert target.read_text() == "precious\n" and link.is_symlink()
    assert not [p for p in tmp_path.rglob(".servewise-*")]


def test_output_refuses_a_dangling_symlink_and_creates_nothing(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "out.json"
    link.symlink_to(elsewhere / "created.json")
    res = invoke("plan", QUICK, "-o", str(link))
    assert res.exit_code == 2 and "symbolic link" in one_error_line(res)
    assert list(elsewhere.iterdir()) == [] and link.is_symlink()


def test_output_still_writes_atomically_in_a_linked_folder(tmp_path):
    from servewise.engine.common.yamlio import write_text_atomic

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)  # a link among the folders is fine: only the last component
    write_text_atomic(tmp_path / "via" / "x.txt", "x")
    assert (real / "x.txt").read_text() == "x"


def test_ask_refuses_a_symlinked_answers_file_before_any_question(tmp_path):
    target = tmp_path / "real.yaml"
    link = tmp_path / "a.yaml"
    link.symlink_to(target)
    res = invoke("ask", "-o", str(link), input="Llama-3.1-8B\nquit\n")
    assert res.exit_code == 2 and "symbolic link" in one_error_line(res)
    assert not target.exists()


def test_rule_cache_still_writes_through_the_atomic_writer(cache):
    from servewise.engine.lang.rulebase import load_rules

    load_rules()
    entries = list(cache.glob("*.pickle"))
    assert entries and not list(cache.glob(".servewise-*"))


def test_atomic_writer_refuses_text_that_is_not_unicode(tmp_path):
    from servewise.engine.common.yamlio import OutputError, write_text_atomic

    with pytest.raises(OutputError) as info:
        write_text_atomic(tmp_path / "x.yaml", "name: \udcff\n")
    assert info.value.code == "output.not_unicode" and not (tmp_path / "x.yaml").exists()


# -------------------------------------------------------------- 7. absurd interview answers

@pytest.mark.parametrize("answer", ["9" * 5000, "1" * 65])
def test_a_choice_answered_with_thousands_of_digits_is_asked_again(tmp_path, answer):
    path = tmp_path / "a.yaml"
    res = invoke("ask", "-o", str(path), input=f"Llama-3.1-8B\n{answer}\noffline\nquit\n")
    assert res.exit_code == 0, res.output  # was exit 3 (int() digit limit)
    assert "number too long" in res.output
    assert iv.load_answers(path).value("mode") == "offline"


def test_a_number_answered_with_thousands_of_digits_is_refused():
    with pytest.raises(iv.AnswerError, match="number too long"):
        iv.parse_answer(input_def("traffic.peak_qps"), "9" * 5000)
    assert iv.parse_answer(input_def("mode"), "²") == "²"  # a digit int() refuses: left to the checks


def test_bytes_that_are_not_utf8_are_asked_again_and_never_saved(tmp_path):
    path = tmp_path / "a.yaml"
    res = invoke("ask", "-o", str(path), input=b"Llama-3.1-8B\n\xff\xfe\nonline\nquit\n")
    assert res.exit_code == 0, res.output
    assert "not UTF-8" in res.output
    raw = path.read_bytes()
    assert b"\\udc" not in raw.lower() and b"\xff" not in raw
    assert iv.load_answers(path).value("mode") == "online"
    assert invoke("ask", "--resume", str(path), input="quit\n").exit_code == 0


def test_an_answer_with_a_surrogate_is_refused_by_the_parser():
    with pytest.raises(iv.AnswerError, match="not UTF-8"):
        iv.parse_answer(input_def("constraints.gpu_models"), "H100, \udcff")


def test_an_answers_file_that_is_not_utf8_exits_2(tmp_path):
    bad = tmp_path / "pre.yaml"
    bad.write_bytes(b"model: Llama-3.1-8B\nconstraints:\n  gpu_models: [\"\xff\"]\n")
    res = invoke("ask", "--answers", str(bad), "-o", str(tmp_path / "a.yaml"), input="quit\n")
    assert res.exit_code == 2 and "not UTF-8" in one_error_line(res)
    assert not (tmp_path / "a.yaml").exists()


# ---------------------------------------------------------------- 7. plan files nested deep

def _deep(levels: int):
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("command", [["explain", "PLAN", "gpu"], ["why-not", "PLAN", "L40S"], ["audit", "PLAN"]])
@pytest.mark.parametrize("where", ["component", "trace"])
def test_a_plan_nested_400_deep_exits_2(tmp_path, saved, command, where):
    def how(plan):
        if where == "component":
            plan["components"]["gpu"]["deep"] = _deep(400)
        else:
            plan["trace"][0]["conclusions"][0]["value"] = _deep(400)
    path = tampered(tmp_path, saved, how)
    res = invoke(*[path if a == "PLAN" else a for a in command])
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert "nested more than 64 levels deep" in line and line.startswith(f"error: {path}: ")
    assert len(line) < 300


def test_the_example_plans_are_far_below_the_depth_limit(example_plans):
    from servewise.engine.app.planfile import MAX_PLAN_DEPTH, check_depth

    for example in example_plans.values():
        check_depth(example.plan, str(example.path), MAX_PLAN_DEPTH // 4)
