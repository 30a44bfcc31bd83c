"""Regression tests for issue #15's findings: hostile or careless input never crashes servewise and
its output never destroys a file. One test (or parametrised case) per finding."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT

from servewise.cli.main import cli as group
from servewise.cli.main import hoist_global_options
from servewise.cli.main import run as run_cli
from servewise.engine.app.inputs import WorkloadError, load_workload, validate_workload
from servewise.engine.common.yamlio import YamlError, load_file, load_text
from servewise.engine.lang.rulebase import RuleLoadError, load_rules

SMALL = str(EXAMPLES / "chat-8b-small.yaml")
SMALL_TEXT = (EXAMPLES / "chat-8b-small.yaml").read_text(encoding="utf-8")
# for the tests of the CLI's plumbing (output files, stdin, exit codes, text layout), whose plan's
# content does not matter: the example that plans fastest (one GPU model, one precision)
QUICK = str(EXAMPLES / "deepseek-r1-h20.yaml")
QUICK_TEXT = (EXAMPLES / "deepseek-r1-h20.yaml").read_text(encoding="utf-8")


def invoke(*args: str, **kw):
    return CliRunner().invoke(group, list(args), **kw)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, example_plans):
    """chat-8b-small saved as `plan --format json -o` writes it (tests/test_examples.py checks that)."""
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(example_plans["chat-8b-small"].json_text, encoding="utf-8")
    return path, json.loads(path.read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------- 1. output targets

def test_output_refuses_a_device_and_leaves_it_alone():
    before = os.stat("/dev/null")
    res = invoke("plan", QUICK, "-o", "/dev/null")
    assert res.exit_code == 2 and "not a regular file" in res.output and "Traceback" not in res.output
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_output_refuses_fifo_folder_and_missing_folder(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    res = invoke("plan", QUICK, "-o", str(fifo))
    assert res.exit_code == 2 and "not a regular file" in res.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    from servewise.cli.errors import InputError
    from servewise.cli.main import write_output

    with pytest.raises(InputError, match="is a folder"):
        write_output("x", str(tmp_path))
    with pytest.raises(InputError, match="does not exist"):
        write_output("x", str(tmp_path / "no" / "such" / "x.json"))
    with pytest.raises(InputError, match="cannot write"):
        write_output("x", "/proc/version")


def test_output_respects_umask_and_keeps_a_replaced_files_mode(tmp_path):
    from servewise.engine.common.yamlio import OutputError, write_text_atomic

    old = os.umask(0o027)
    try:
        write_text_atomic(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o640
    kept = tmp_path / "kept.txt"
    kept.write_text("old")
    os.chmod(kept, 0o604)
    write_text_atomic(kept, "new")
    assert kept.read_text() == "new" and stat.S_IMODE(os.stat(kept).st_mode) == 0o604
    link = tmp_path / "link.txt"
    link.symlink_to(kept)
    with pytest.raises(OutputError, match="output.symlink"):  # #42: -o never follows a link
        write_text_atomic(link, "via link")
    assert link.is_symlink() and kept.read_text() == "new"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".servewise-")]


def test_dash_reads_the_workload_from_stdin():
    res = invoke("plan", "-", "--format", "json", input=QUICK_TEXT)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["workload"]["model"]
    bad = invoke("plan", "-", input="model: [\n")
    assert bad.exit_code == 2 and bad.output.startswith("error: <stdin>:")


def test_stdout_on_a_full_disk_is_one_line_exit_2():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([str(Path(sys.executable).parent / "servewise"), "schema", "plan"], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "No space left" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------ 2. YAML input

BOMB = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


@pytest.mark.parametrize("text, message, line", [
    ("model: Llama-3.1-70B\nmodel: Qwen2.5-7B\n", "duplicate key 'model' (first at line 1)", 2),
    ("model: Llama-3.1-8B\n1: x\n", "key '1' is not text", 2),
    ("model: Llama-3.1-8B\n2024-01-01: x\n", "key '2024-01-01' is not text", 2),
    ("model: Llama-3.1-8B\ntrue: x\n", "key 'true' is not text", 2),
    ("model: Llama-3.1-8B\nnull: x\n", "key 'null' is not text", 2),
    ("model: Llama-3.1-8B\n? [a, b]\n: x\n", "is not text", 2),
    ("model: Llama-3.1-8B\ntraffic: &a [*a]\n", "self-reference", 2),
    ("model: Llama-3.1-8B\ntraffic: {peak_qps: " + "9" * 5000 + "}\n", "number too long", 2),
    ("model: " + "x" * 30000 + "\n", "value too long", 1),
    (BOMB, "alias bomb", 0),
    ("[" * 5000 + "]" * 5000, "", 1),
])
def test_yaml_loader_rejects_hostile_documents(tmp_path, text, message, line):
    f = tmp_path / "w.yaml"
    f.write_text(text)
    start = time.monotonic()
    with pytest.raises(WorkloadError) as info:
        load_workload(f)
    assert time.monotonic() - start < 5
    assert message in str(info.value) and str(info.value).startswith(str(f))
    if line:
        assert info.value.line == line


def test_yaml_loader_limits_file_size_and_refuses_devices(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (2 << 20))
    with pytest.raises(YamlError, match="too large"):
        load_file(big)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(YamlError, match="not a regular file"):
        load_file(fifo)
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(YamlError, match="not a regular file"):
        load_file(link)
    with pytest.raises(YamlError, match="folder"):
        load_file(tmp_path)


def test_yaml_loader_keeps_merge_keys_and_shared_aliases():
    data, lines = load_text("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\nd: [*b, *b]\n", "f")
    assert data["c"] == {"x": 1, "y": 2} and data["d"] == [{"x": 1}, {"x": 1}]
    assert lines[("c", "y")] == 4


@pytest.mark.parametrize("field", [
    "sla.ttft_ms", "sla.tpot_ms", "sla.e2e_p99_ms", "sla.availability", "traffic.peak_qps",
    "constraints.rack_power_kw", "constraints.electricity_cny_per_kwh", "deployment.log_storage_tb",
    "edge.power_budget_w",
])
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_nan_and_inf_rejected_for_every_number(tmp_path, field, value):
    group_key, key = field.split(".")
    f = tmp_path / "w.yaml"
    f.write_text(f"model: Llama-3.1-8B\n{group_key}:\n  {key}: {value}\n")
    with pytest.raises(WorkloadError) as info:
        load_workload(f)
    assert info.value.path == field and "finite number" in info.value.message and info.value.line == 3


def test_nan_in_a_custom_model_and_in_data_given_in_process():
    custom = {"model": {"name": "m", "params_b": float("nan"), "num_layers": 2, "hidden_size": 64,
                        "num_attention_heads": 2}}
    with pytest.raises(WorkloadError, match="model.params_b: expected a finite number"):
        validate_workload(custom)
    with pytest.raises(WorkloadError, match="is not text"):
        validate_workload({"model": "Llama-3.1-8B", 3: "x"})


def test_zero_electricity_price_is_an_input_error_not_a_rule_error(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("model: Llama-3.1-405B\nconstraints: {electricity_cny_per_kwh: 0}\n")
    res = invoke("plan", str(f))
    assert res.exit_code == 2 and "constraints.electricity_cny_per_kwh" in res.output
    assert "rules/" not in res.output


def test_answers_file_uses_the_strict_loader(tmp_path):
    from servewise.engine.app.interview import load_answers

    f = tmp_path / "a.yaml"
    f.write_text("mode: online\nmode: offline\n")
    with pytest.raises(WorkloadError, match="duplicate key 'mode'"):
        load_answers(f)
    f.write_text(BOMB)
    with pytest.raises(WorkloadError, match="alias bomb"):
        load_answers(f)


# --------------------------------------------------------------------------------- 3. rule folders

def test_total_rule_count_and_file_count_are_capped(tmp_path, monkeypatch):
    import servewise.engine.lang.rulebase as rb

    monkeypatch.setattr(rb, "MAX_RULES", 3)
    rule = ("- id: t.r{n}\n  stage: derivations\n  title: {{en: t, zh: t}}\n  source: {{guideline: [G-GPU-001]}}\n"
            "  then: [{{derive: {{t.x{n}: 1}}}}]\n  because: {{en: x, zh: x}}\n")
    (tmp_path / "many.yaml").write_text("".join(rule.format(n=n) for n in range(4)))
    with pytest.raises(RuleLoadError, match="too many rules: more than 3"):
        load_rules([tmp_path], builtin=False)
    monkeypatch.setattr(rb, "MAX_RULES", 20_000)
    monkeypatch.setattr(rb, "MAX_RULE_FILES", 1)
    (tmp_path / "second.yaml").write_text("[]\n")
    with pytest.raises(RuleLoadError, match="too many rule files"):
        load_rules([tmp_path], builtin=False)


def test_rule_folder_with_fifo_symlink_to_device_and_oversize_file(tmp_path):
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "big.yaml").write_text("# " + "x" * (2 << 20))
    (tmp_path / "dup.yaml").write_text("- id: a\n  id: b\n")
    start = time.monotonic()
    with pytest.raises(RuleLoadError) as info:
        load_rules([tmp_path], builtin=False)
    assert time.monotonic() - start < 10
    text = "\n".join(map(str, info.value.problems))
    assert "fifo.yaml" in text and "zero.yaml" in text and "not a regular file" in text
    assert "big.yaml" in text and "too large" in text
    assert "dup.yaml:2" in text and "duplicate key 'id'" in text


def test_rule_file_alias_bomb_is_refused_quickly(tmp_path):
    (tmp_path / "bomb.yaml").write_text(BOMB)
    res = invoke("rules", "lint", str(tmp_path))
    assert res.exit_code == 2 and "alias bomb" in res.output


def test_time_budget_per_plan(monkeypatch):
    from servewise.engine.runtime import runner

    monkeypatch.setattr(runner, "TIME_BUDGET_S", 0.0)
    res = invoke("plan", QUICK)
    assert res.exit_code == 2 and "time budget" in res.output and "Traceback" not in res.output


# ----------------------------------------------------------------------------------- 4. plan files

def _tamper(plan, how):
    p = json.loads(json.dumps(plan))
    how(p)
    return p


TAMPERED = {
    "components-string": lambda p: p.update(components="x"),
    "trace-null": lambda p: p.update(trace=None),
    "step-without-fact": lambda p: p["trace"][0]["conclusions"][0].pop("fact"),
    "premise-own-step": lambda p: p["trace"][3]["premises"].append({"fact": "x", "step": p["trace"][3]["step"]}),
    "premise-missing-step": lambda p: p["trace"][3]["premises"].append({"fact": "x", "step": 999999}),
    "rejected-option-int": lambda p: p.update(rejected=[{"option": 1}]),
    "knowledge-hash-null": lambda p: p.update(knowledge_hash=None),
    "workload-list": lambda p: p.update(workload=[]),
    "warnings-string": lambda p: p.update(warnings="x"),
    "premises-null": lambda p: p["trace"][1].update(premises=None),
    "step-string": lambda p: p["trace"][1].update(step="7"),
    "feasible-string": lambda p: p.update(feasible="yes"),
    "key-with-a-newline": lambda p: p["trace"][0]["because_i18n"].update({"\n": None}),  # found by test_fuzz
}


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_tampered_plans_are_one_line_errors(saved, tmp_path, name):
    _, plan = saved
    f = tmp_path / "p.json"
    f.write_text(json.dumps(_tamper(plan, TAMPERED[name])))
    for args in (("explain", str(f), "gpu"), ("why-not", str(f), "H100"), ("audit", str(f))):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert res.output.startswith(f"error: {f}") and res.output.count("\n") == 1, res.output


def test_an_odd_key_is_quoted_in_the_error_path(saved, tmp_path):
    _, plan = saved
    f = tmp_path / "p.json"
    f.write_text(json.dumps(_tamper(plan, TAMPERED["key-with-a-newline"])))
    res = invoke("explain", str(f), "gpu")
    assert res.exit_code == 2 and 'trace[0].because_i18n["\\n"]' in res.output, res.output


def test_nan_in_a_plan_file_is_rejected(saved, tmp_path):
    _, plan = saved
    f = tmp_path / "p.json"
    f.write_text(json.dumps(plan).replace('"feasible": true', '"feasible": NaN'))
    res = invoke("explain", str(f), "gpu")
    assert res.exit_code == 2 and "NaN is not a JSON number" in res.output


def test_audit_tells_an_edited_file_from_changed_knowledge(saved, tmp_path):
    _, plan = saved
    f = tmp_path / "p.json"
    edited = json.loads(json.dumps(plan))
    edited["workload"]["traffic"]["peak_qps"] = edited["workload"]["traffic"]["peak_qps"] * 4
    f.write_text(json.dumps(edited))
    res = invoke("audit", str(f))
    assert res.exit_code == 1
    assert "recorded inputs and result do not match" in res.output and "knowledge changed" not in res.output
    data = json.loads(invoke("audit", str(f), "--format", "json").output)
    assert data["status"] == "edited" and data["old_knowledge_hash"] == data["new_knowledge_hash"]


@pytest.mark.parametrize("field, value", [
    (("components", "gpu", "count"), 99), (("components", "gpu", "count"), "eight"),
    (("performance", "meets_sla"), False), (("cost", "capex_cny"), 1.0),
])
def test_a_plan_edited_against_its_own_trace_is_refused(saved, tmp_path, field, value):
    """Issue 39 item 9: a value that its trace (or bill of materials) contradicts, or of the wrong
    type, is a one-line error naming the field path, exit 2, in explain, why-not and audit."""
    _, plan = saved
    edited = json.loads(json.dumps(plan))
    node = edited
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = value
    f = tmp_path / "tampered.json"
    f.write_text(json.dumps(edited))
    for args in (("explain", str(f), "gpu"), ("why-not", str(f), "L40S"), ("audit", str(f))):
        res = invoke(*args)
        assert res.exit_code == 2, (args, res.output)
        assert ".".join(field) in res.output and "Traceback" not in res.output
        assert len(res.output.strip().splitlines()) == 1


EXTRA = textwrap.dedent("""\
    - id: hardentest.note
      title: {en: Hardening test note, zh: 测试}
      source: {guideline: G-COOL-001}
      stage: facilities
      when: ["facility.server_draw_w > 0"]
      then:
        - warn: {severity: info}
      because: {en: "note", zh: "说明"}
    """)


def test_plan_records_rules_dir_and_audit_reuses_it(tmp_path):
    rules = tmp_path / "extra"
    rules.mkdir()
    (rules / "note.yaml").write_text(EXTRA)
    out = tmp_path / "p.json"
    assert invoke("--rules-dir", str(rules), "plan", QUICK, "--format", "json", "-o", str(out)).exit_code == 0
    plan = json.loads(out.read_text())
    assert plan["rules_dirs"][0]["path"] == str(rules) and plan["rules_dirs"][0]["hash"].startswith("sha256:")
    res = invoke("audit", str(out))
    assert res.exit_code == 0 and "identical" in res.output, res.output
    (rules / "note.yaml").write_text(EXTRA.replace('"note"', '"changed note"'))
    res = invoke("audit", str(out))
    assert res.exit_code == 1 and "knowledge changed" in res.output and "rule folders" in res.output


def test_a_relative_rules_dir_is_recorded_so_audit_works_from_another_folder(tmp_path, monkeypatch):
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "extra").mkdir(parents=True)
    elsewhere.mkdir()
    (work / "extra" / "note.yaml").write_text(EXTRA)
    monkeypatch.chdir(work)
    assert invoke("--rules-dir", "extra", "plan", QUICK, "--format", "json", "-o", "p.json").exit_code == 0
    plan = json.loads((work / "p.json").read_text())
    assert plan["rules_dirs"][0]["path"] == str(work / "extra")
    monkeypatch.chdir(elsewhere)
    res = invoke("audit", str(work / "p.json"))
    assert res.exit_code == 0 and "identical" in res.output, res.output


# ------------------------------------------------------------------------------------ 5. exit codes

def test_exit_codes_internal_error_and_debug(monkeypatch, capsys):
    import servewise.cli.main as main

    def boom(*_a, **_k):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(main, "plan_file", boom)
    assert run_cli(["plan", SMALL]) == 3
    err = capsys.readouterr().err
    assert "internal error: ZeroDivisionError" in err and "report" in err and "Traceback" not in err
    assert run_cli(["plan", SMALL, "--debug"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_exit_code_interrupted(monkeypatch, capsys):
    import servewise.cli.main as main

    def interrupt(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(main, "plan_file", interrupt)
    assert run_cli(["plan", SMALL]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_exit_codes_ok_bad_input_infeasible(capsys):
    assert run_cli(["schema", "plan"]) == 0
    assert run_cli(["plan", "/no/such/file.yaml"]) == 2
    assert run_cli(["plan", SMALL, "--format", "nope"]) == 2
    assert run_cli(["plan", str(EXAMPLES / "infeasible-target.yaml")]) == 1


def test_builtin_rule_failure_is_internal_error(monkeypatch):
    import servewise.cli.main as main
    from servewise.engine.lang.rulebase import load_rules as real
    from servewise.engine.runtime.runner import RuleRuntimeError

    spec = real().rules[0]

    def fails(*_a, **_k):
        raise RuleRuntimeError(spec, "derive failed: division by zero")

    monkeypatch.setattr(main, "plan_file", fails)
    res = invoke("plan", SMALL)
    assert res.exit_code == 3 and "bug" in res.output


def test_lang_accepted_after_the_subcommand():
    assert hoist_global_options(["ask", "--lang", "zh"]) == ["--lang", "zh", "ask"]
    assert hoist_global_options(["plan", "w.yaml", "--lang=zh", "--debug"]) == ["--lang=zh", "--debug", "plan", "w.yaml"]
    assert hoist_global_options(["plan", "--", "--lang"]) == ["plan", "--", "--lang"]
    res = invoke("schema", "plan", "--lang", "zh")
    assert res.exit_code == 0


# --------------------------------------------------------------- 7. explanations and text output

def test_text_output_wraps_to_80_columns_and_never_truncates(tmp_path):
    """--full wraps and keeps everything; the one-screen summary (the default) clips to 80
    columns and at most 40 lines, marking what it left out with "…"."""
    from servewise.cli.i18n import display_width

    for lang in ("en", "zh"):
        res = invoke("--lang", lang, "plan", QUICK, "--full")
        assert res.exit_code == 0
        lines = res.output.splitlines()
        assert max(display_width(line) for line in lines) <= 84, lang  # up to two closing CJK punctuation marks may hang over
        assert "…" not in "".join(line for line in lines if not line.startswith(("more", "更多")))
        brief = invoke("--lang", lang, "plan", QUICK)
        assert brief.exit_code == 0
        short = brief.output.splitlines()
        assert len(short) <= 40 < len(lines), lang
        assert max(display_width(line) for line in short) <= 84, lang


def test_wrap_keeps_every_character_and_aligns_continuations():
    from servewise.cli.i18n import display_width
    from servewise.cli.wrap import wrap

    text = ("  Storage       5.44 TB usable: 4 × 3.84 TB Samsung PM1743 (PCIe NVMe), RAID 10; system 2 × 480 GB\n"
            "  - 内存: 显存一半 = 4 × 80 GB ÷ 2 = 160 GB；加载 + KV = 255 GB；取较大者 255 GB，12 个通道每通道一条同容量内存\n"
            "  x " + "y" * 200 + "\n")
    out = wrap(text, 60)
    assert "".join(text.split()) == "".join(out.split())
    assert all(display_width(line) <= 62 for line in out.splitlines())
    assert out.splitlines()[1].startswith(" " * 16) and not out.splitlines()[1].startswith(" " * 17)


def test_labels_aligned_by_display_width():
    from servewise.cli.i18n import display_width, pad

    assert display_width("卡间互联") == 8 and pad("卡间互联", 13) == "卡间互联     "
    lines = invoke("--lang", "zh", "plan", QUICK).output.splitlines()
    config = lines[lines.index("配置") + 1:]
    config = config[: config.index("")]
    for line in config:
        if not line.startswith("   "):  # a label line, not a wrapped continuation
            label_end = len(line) - len(line[2:].lstrip().split("  ", 1)[1].lstrip())
            assert display_width(line[:label_end]) == 16, line


def test_explain_brief_and_full(saved):
    path, plan = saved
    brief = invoke("explain", str(path), "gpu", "--brief")
    assert brief.exit_code == 0 and len(brief.output.splitlines()) <= 25
    assert "--full" in brief.output and "None" not in brief.output
    full = invoke("explain", str(path), "gpu", "--full")
    assert len(full.output.splitlines()) > 25
    assert invoke("explain", str(path), "gpu").output == full.output  # not a terminal: full
    assert "'fp8' = fp8" not in full.output and "formula: 'fp8'" not in full.output


def test_unknown_component_lists_the_valid_ones(saved):
    path, _ = saved
    res = invoke("explain", str(path), "zzzz")
    assert res.exit_code == 2 and "components: " in res.output and "cooling" in res.output


def test_open_questions_only_list_unanswered_inputs():
    from servewise.cli.render import open_asks

    plan = {"defaults_used": ["deployment.horizon_months"],
            "asks": [{"input": "deployment.horizon_months", "rule": "r", "because": {"en": "h"}},
                     {"input": "traffic.peak_qps", "rule": "r2", "because": {"en": "q"}}]}
    assert [a["input"] for a in open_asks(plan)] == ["deployment.horizon_months"]


# ------------------------------------------------------------------------------ 6. the interview

def test_interview_after_the_plan_shares_how_and_why_not_and_can_change_an_answer(tmp_path):
    from servewise.engine.app import explain as ex
    from servewise.engine.app.inputs import load_workload
    from servewise.engine.app.plan import plan_workload

    answers = tmp_path / "a.yaml"
    answers.write_text(SMALL_TEXT)
    script = "done\n？\nhelp\nhow cooling\nwhy-not liquid\nwhy-not rent\nhow cost\nchange traffic.peak_qps\n６\nquit\n"
    res = CliRunner().invoke(group, ["ask", "--lang", "en", "--answers", str(answers), "-o", str(tmp_path / "s.yaml")],
                             input=script)
    out = res.output
    assert res.exit_code == 0, out
    assert out.count("change <input>") >= 3  # banner, then ？ (full width) and help print the commands
    assert "unknown command" not in out
    workload, defaults = load_workload(answers)
    plan = plan_workload(workload, defaults).plan
    for target in ("cooling", "cost"):
        assert f"explain {target}" in out and ex.explain(plan, target)["steps"]
    assert "why-not liquid:" in out and "why-not rent:" in out and "no rule" not in out
    assert "servewise plan — Llama-3.1-8B, online, 6 QPS" in out  # re-planned after the change
    assert "peak_qps: 6" in (tmp_path / "s.yaml").read_text()


def test_interview_accepts_full_width_and_chinese_choice_names():
    from servewise.cli.cmd_ask import normalise_input
    from servewise.engine.app import interview as iv
    from servewise.engine.app.inputs import input_def

    assert normalise_input("？") == "?" and normalise_input("ｈｏｗ　ｇｐｕ") == "how gpu"
    assert iv.parse_answer(input_def("mode"), "在线") == "online"
    assert iv.parse_answer(input_def("constraints.cooling_available"), "液冷") == "liquid"


def test_pool_label_kept_in_every_language_and_renderer():
    from servewise.cli.render import warning_text

    warn = {"rule": "r", "severity": "warning", "pool": "Qwen2.5-7B (cs)", "message": "[Qwen2.5-7B (cs)] hot",
            "message_i18n": {"en": "hot", "zh": "过热"}}
    assert warning_text(warn, "zh") == "[Qwen2.5-7B (cs)] 过热"
    assert warning_text(warn, "en") == warn["message"]
    assert warning_text({"rule": "r", "message": "plain"}, "zh") == "plain"


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "killpg"), reason="no fork or process groups")
@pytest.mark.parametrize("to", ["group", "command"])
def test_ctrl_c_during_a_several_model_plan_leaves_no_worker_and_no_file(tmp_path, to):
    """Ctrl-C (SIGINT to the foreground process group, or to the command alone) while the pools
    plan in forked workers: exit 130 with 'interrupted', no worker process and no worker file
    left, no output file."""
    import signal

    out = tmp_path / "plan.json"
    env = dict(os.environ, TMPDIR=str(tmp_path), SERVEWISE_WORKERS="2")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "servewise"), "plan",
                             str(EXAMPLES / "saas-five-tenants.yaml"), "--format", "json", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True,
                            # Ctrl-C's default action even where the suite runs with SIGINT ignored (a
                            # background job of a non-interactive shell): Python then installs no
                            # KeyboardInterrupt handler, and the command would end as if never interrupted
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(0.8)  # imports and rules take ~0.1 s; the pools ~2 s
    (os.killpg if to == "group" else os.kill)(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err.decode()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # a worker of the group still alive
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("a worker outlived the interrupted plan")
    assert not out.exists() and not list(tmp_path.glob("servewise-worker-*"))
    assert not list(tmp_path.glob("servewise-board-*"))  # nor the board of early re-plans
