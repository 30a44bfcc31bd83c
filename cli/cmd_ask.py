"""`servewise ask`: the guided interview in a plain terminal (the logic is engine/app/interview.py)."""

from __future__ import annotations

import gc
import json
import os
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from servewise.engine.app import interview as iv
from servewise.engine.app.inputs import WorkloadError
from servewise.engine.common.messages import message
from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.runtime.runner import LoopError, RuleRuntimeError

from .brief import to_brief
from .errors import InputError
from .i18n import pick, unit_text
from .wrap import output_width, wrap

T = TypeVar("T")
DEFAULT_SAVE = "servewise-answers.yaml"
S: dict[str, dict[str, str]] = {
    "intro": {"en": "servewise interview: every answer is saved to {file} at once.\n"
                    "At any prompt: ? or why (which rule needs this), back, skip (take the default),\n"
                    "done (plan now, the rest at defaults), quit (stop; resume later).",
              "zh": "servewise 问答：每个回答都会立即保存到 {file}。\n任意提示符下可输入：? 或 why（哪条规则需要它）、"
                    "back（返回上一题）、skip（用默认值）、\ndone（立即规划，其余用默认值）、quit（停止，可稍后继续）。"},
    "resumed": {"en": "Resuming {file}: {n} answer(s) so far.", "zh": "继续 {file}：已有 {n} 个回答。"},
    "planning": {"en": "planning…", "zh": "规划中…"},
    "unit": {"en": "unit", "zh": "单位"},
    "integer": {"en": "integer", "zh": "整数"},
    "number": {"en": "number", "zh": "数字"},
    "allowed": {"en": "allowed", "zh": "允许值"},
    "default": {"en": "default", "zh": "默认"},
    "current": {"en": "current answer", "zh": "当前回答"},
    "required": {"en": "required", "zh": "必填"},
    "list": {"en": "a comma-separated list of", "zh": "逗号分隔的列表，取值"},
    "names": {"en": "a comma-separated list of names", "zh": "逗号分隔的名称列表"},
    "yesno": {"en": "yes or no", "zh": "yes 或 no（是/否）"},
    "model_hint": {"en": "a catalog name, or a custom-model mapping in braces",
                   "zh": "模型目录中的名称，或用花括号写的自定义模型映射"},
    "none_ok": {"en": "'none' for no value", "zh": "输入 none 表示不设"},
    "needs_answer": {"en": "an answer is required here (or quit)", "zh": "此处必须回答（或输入 quit 退出）"},
    "bad": {"en": "not accepted: {msg}", "zh": "无法接受：{msg}"},
    "why_head": {"en": "Why this question ({key}):", "zh": "为什么问这个问题（{key}）："},
    "why_asks": {"en": "rule {rule} ({title}) asks for it:", "zh": "规则 {rule}（{title}）需要它："},
    "why_reads": {"en": "It is also read by, deciding:", "zh": "以下规则也读取它，用于决定："},
    "why_model": {"en": "Nothing can be planned without the model: its size and architecture drive every rule.",
                  "zh": "没有模型就无法规划：模型的规模和结构决定了所有规则。"},
    "why_none": {"en": "No rule asks for it directly; it was revisited with back.",
                 "zh": "没有规则直接需要它；这是用 back 返回的问题。"},
    "more": {"en": "… and {n} more", "zh": "……另有 {n} 条"},
    "at_start": {"en": "this is the first question", "zh": "这已经是第一个问题"},
    "quit": {"en": "Stopped. {n} answer(s) saved in {file}; continue with: servewise ask --resume {file}",
             "zh": "已停止。{n} 个回答已保存到 {file}；继续：servewise ask --resume {file}"},
    "interrupted": {"en": "Interrupted. {n} answer(s) saved in {file}; continue with: servewise ask --resume {file}",
                    "zh": "已中断。{n} 个回答已保存到 {file}；继续：servewise ask --resume {file}"},
    "finished": {"en": "All questions answered ({file}); `servewise plan {file}` gives this plan "
                       "(`--full`: all of it).",
                 "zh": "问题已全部回答（{file}）；`servewise plan {file}` 会得到同样的方案（`--full` 显示全部）。"},
    "after": {"en": "Ask: how <component> ({components}) · why-not <option> (e.g. {example}) · "
                    "change <input> (answer again, re-plan) · help · quit",
              "zh": "可输入：how <组件>（{components}）· why-not <选项>（如 {example}）· "
                    "change <输入项>（重新回答并重新规划）· help · quit"},
    "change_unknown": {"en": "no input '{key}'; inputs: {keys}", "zh": "没有输入项 '{key}'；可选：{keys}"},
    "how_head": {"en": "How {comp} was chosen:", "zh": "{comp} 是如何选出的："},
    "how_none": {"en": "no rule set the component '{comp}'; components: {components}",
                 "zh": "没有规则设定组件 '{comp}'；可选组件：{components}"},
    "based_on": {"en": "based on:", "zh": "依据："},
    "whynot_none": {"en": "'{option}' was not rejected by any rule in this plan (options rejected: {examples})",
                    "zh": "本方案中没有规则排除 '{option}'（被排除的选项：{examples}）"},
    "whynot_chosen": {"en": "'{option}' is part of the chosen configuration.",
                      "zh": "'{option}' 就是所选配置的一部分。"},
    "unknown_cmd": {"en": "unknown command; use how <component>, why-not <option>, change <input>, help or quit",
                    "zh": "未知命令；请使用 how <组件>、why-not <选项>、change <输入项>、help 或 quit"},
    "exists": {"en": "{file} already exists: continue it with --resume {file}, or save elsewhere with -o FILE",
               "zh": "{file} 已存在：用 --resume {file} 继续，或用 -o FILE 另存"},
}
COMMANDS_BACK = {"back", "b", "返回"}
COMMANDS_SKIP = {"skip", "s", "跳过"}
COMMANDS_QUIT = {"quit", "q", "exit", "退出"}
COMMANDS_WHY = {"?", "why", "为什么"}
COMMANDS_DONE = {"done", "plan", "完成"}
COMMANDS_HOW = {"how", "explain", "如何", "怎么"}
COMMANDS_WHY_NOT = {"why-not", "whynot", "why_not", "为什么不"}
COMMANDS_CHANGE = {"change", "set", "修改", "改"}
COMMANDS_HELP = {"help", "h", "帮助"}


class Stop(Exception):
    """The operator typed quit (or the input ended)."""


class Finish(Exception):
    """The operator typed done: plan now, every unanswered input at its default."""


class Terminal:
    """Plain-terminal output: prompts flushed at once, colour only on a TTY without NO_COLOR."""

    def __init__(self, lang: str):
        self.lang = lang
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        try:  # bytes that are not UTF-8 arrive as lone surrogates (refused by read), never as a crash
            sys.stdin.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass

    def s(self, name: str, **kw: Any) -> str:
        return pick(S[name], self.lang).format(**kw)

    def say(self, text: str = "", style: dict[str, Any] | None = None) -> None:
        click.echo(click.style(text, **style) if (style and self.color) else text, color=self.color)

    def read(self, prompt: str, meanwhile: Callable[[], None] | None = None) -> str:
        """One line from stdin; EOF means quit. ``meanwhile`` runs once the prompt is shown, while
        the operator reads it and types (the terminal keeps what is typed)."""
        shown = click.style(prompt, bold=True) if self.color else prompt
        sys.stdout.write(shown)
        sys.stdout.flush()
        if meanwhile is not None:
            meanwhile()
        while True:
            line = sys.stdin.readline()
            if not line:
                raise Stop
            problem = iv.text_problem(line)
            if problem is None or problem.code != "answer.not_utf8":
                return normalise_input(line)
            self.say(self.s("bad", msg=problem.text(self.lang)), {"fg": "red"})  # asked again, never kept
            sys.stdout.write(shown)
            sys.stdout.flush()


def normalise_input(text: str) -> str:
    """Full-width forms typed with a Chinese input method (？, ｈｏｗ, １０, ，) as their ASCII
    equivalents (NFKC), trimmed."""
    return unicodedata.normalize("NFKC", text).strip()


def _fmt(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def describe(term: Terminal, q: iv.Question, session: iv.Session) -> list[str]:
    """The facts line of a question: type, unit, range or choices, default, current answer."""
    d = q.definition
    parts: list[str] = []
    if d.type == "model":
        parts.append(term.s("model_hint"))
    elif d.type in ("number", "integer"):
        unit = f" {unit_text(d.unit, term.lang)}" if d.unit else ""
        kind = term.s("integer" if d.type == "integer" else "number")
        rng = f", {_num(d.minimum)} … {_num(d.maximum)}" if d.minimum is not None and d.maximum is not None else ""
        parts.append(f"{kind}{rng}{unit}")
    elif d.type == "choice":
        names = d.labels.get(term.lang, {})
        parts.append(f"{term.s('allowed')}: " + " | ".join(
            f"{i}) {c}" + (f" {names[c]}" if c in names else "") for i, c in enumerate(d.choices or (), 1)))
    elif d.type == "choices":
        parts.append(f"{term.s('list')} {', '.join(d.choices or ())}")
    elif d.type == "strings":
        parts.append(term.s("names"))
    elif d.type == "boolean":
        parts.append(term.s("yesno"))
    if d.nullable and d.type != "model":
        parts.append(term.s("none_ok"))
    parts.append(term.s("required") if d.required else f"{term.s('default')}: {_fmt(d.default)}")
    if session.answered(q.key):
        parts.append(f"{term.s('current')}: {_fmt(session.value(q.key))}")
    return parts


def _cny(x: float) -> str:
    return f"{x:,.0f}"


def cost_move_text(move: iv.CostMove, lang: str) -> str:
    """One open input's effect on the capex, as the interview shows it."""
    return message(f"ask.cost.move.{move.what}", lang, input=move.input, default=_fmt(move.default),
                   capex=_cny(move.capex_cny))


def show_why(term: Terminal, q: iv.Question) -> None:
    term.say(term.s("why_head", key=q.key), {"bold": True})
    reasons = iv.why(q)
    asks = [r for r in reasons if r.asks]
    reads = [r for r in reasons if not r.asks]
    if q.key == "model":
        term.say("  " + term.s("why_model"))
    for r in asks:
        term.say("  " + term.s("why_asks", rule=r.rule, title=pick(r.title, term.lang)))
        term.say("    " + pick(r.because, term.lang))
    if reads:
        term.say("  " + term.s("why_reads"))
        for r in reads[:8]:
            term.say(f"    - {r.rule}: {pick(r.title, term.lang)}")
        if len(reads) > 8:
            term.say("    " + term.s("more", n=len(reads) - 8))
    if not reasons and q.key != "model":
        term.say("  " + term.s("why_none"))


class Interview:
    """Ask the open questions until none is left (or the operator stops)."""

    def __init__(self, term: Terminal, session: iv.Session, save: iv.AnswersFile | Path, rulebase):
        self.term, self.session, self.rulebase = term, session, rulebase
        self.file = save if isinstance(save, iv.AnswersFile) else iv.AnswersFile(save, session)
        self._moved_told = False
        self._run_key: str | None = None
        self._run: iv.AskRun | None = None
        self.prepared = False
        self.outlook: iv.CostOutlook | None = None  # the running cost range (after a price-deciding answer)

    def prepare(self) -> None:
        """Once, while the first prompt waits for the operator: load what checking an answer
        needs (engine: the catalog, ~0.2 s), then keep the collector from walking the rules and
        the catalog, which live as long as the process (a full collection pass over them took
        ~0.15 s in the middle of an answer)."""
        if not self.prepared:
            self.prepared = True
            iv.prepare(self.rulebase)
            gc.freeze()

    @property
    def save(self) -> Path:
        """The file the answers are saved in (next to a resumed file whose layout cannot be kept)."""
        return self.file.path

    def persist(self) -> None:
        """Save the answers if they changed (iv.AnswersFile: a resumed file of the operator's is
        edited in place, keeping its comments; nothing is written when nothing changed)."""
        from servewise.engine.common.messages import message
        from servewise.engine.common.yamlio import OutputError

        try:
            self.file.save(self.session)
        except OutputError as exc:
            raise InputError(message(exc.code, self.term.lang, **exc.fields)) from None
        if self.file.moved_from is not None and not self._moved_told:
            self._moved_told = True
            self.term.say(message("ask.layout_elsewhere", self.term.lang, file=self.file.moved_from,
                                  other=self.file.path), {"fg": "yellow"})

    def asks(self) -> iv.AskRun | None:
        """What the rules ask for the answers so far (the stages a question needs are run on
        demand; the whole plan only when shown): one per set of answers."""
        if not self.session.has_model():
            return None
        key = json.dumps(self.session.answers, sort_keys=True, default=str)
        if key != self._run_key or self._run is None:
            self._run = iv.ask_run(self.session, self.rulebase,
                                   on_plan=lambda: self.term.say(self.term.s("planning"), {"dim": True}))
            self._run_key = key
        return self._run

    def checked(self, compute: Callable[[], T]) -> T:
        """``compute()``, which may run rules: a bad workload or rule base is one clear line."""
        try:
            return compute()
        except (WorkloadError, UnknownEntry) as exc:
            raise InputError(f"{self.save}: {exc}") from None
        except (RuleRuntimeError, LoopError) as exc:
            raise InputError(f"rule base: {exc}") from None

    def plan(self) -> dict[str, Any] | None:
        run = self.asks()
        return None if run is None else self.checked(run.plan).plan

    def run(self) -> dict[str, Any]:
        while True:
            q = self.checked(lambda: iv.next_question(self.session, self.asks(), self.rulebase))
            if q is None:
                break
            try:
                self.ask(q)
            except Finish:
                break
            if q.key in iv.PRICE_KEYS and self.session.has_model() and q.key != "model":
                self.show_outlook()
        plan = self.plan()
        assert plan is not None
        return plan

    def show_outlook(self) -> None:
        """The capex of the answers so far and the range the open price-deciding answers leave
        (engine/app/interview.py cost_outlook), and how it moved since the last one; nothing when
        the answer changed neither."""
        plan = self.plan()
        new = iv.cost_outlook(plan) if plan is not None else None
        if new is None:
            return
        before, self.outlook = self.outlook, new
        if before is not None and (before.capex_cny, before.low_cny, before.high_cny) == (
                new.capex_cny, new.low_cny, new.high_cny):
            return
        lang = self.term.lang
        was = (message("ask.cost.was", lang, lo=_cny(before.low_cny), hi=_cny(before.high_cny))
               if before is not None and (before.low_cny, before.high_cny) != (new.low_cny, new.high_cny) else "")
        width = output_width()
        self.term.say(wrap(message("ask.cost.head", lang, capex=_cny(new.capex_cny), lo=_cny(new.price_range[0]),
                                   hi=_cny(new.price_range[1])), width), {"fg": "cyan"})
        self.term.say(wrap(message("ask.cost.range", lang, lo=_cny(new.low_cny), hi=_cny(new.high_cny), was=was),
                           width), {"fg": "cyan"})
        if before is None or [m.input for m in before.moves] != [m.input for m in new.moves]:
            for m in new.moves:
                self.term.say(wrap("    " + cost_move_text(m, lang), width), {"dim": True})

    def ask(self, q: iv.Question) -> None:
        term, d = self.term, q.definition
        term.say("")
        term.say(f"({len(self.session.asked) + 1}) {pick(d.question, term.lang)}  [{q.key}]", {"bold": True})
        if d.help:
            term.say("    " + pick(d.help, term.lang), {"dim": True})
        term.say("    " + " · ".join(describe(term, q, self.session)))
        move = self.outlook.move(q.key) if self.outlook is not None else None
        if move is not None:  # what the default costs and what the other answer would
            term.say(wrap("    " + message("ask.cost.question", term.lang, capex=_cny(self.outlook.capex_cny),
                                            other=cost_move_text(move, term.lang)), output_width()), {"fg": "cyan"})
        while True:
            text = term.read(f"{q.key}> ", self.prepare)
            low = text.lower()
            if low in COMMANDS_QUIT:
                raise Stop
            if low in COMMANDS_DONE:
                if not self.session.has_model():
                    term.say(term.s("needs_answer"), {"fg": "red"})
                    continue
                raise Finish
            if low in COMMANDS_WHY:
                self.checked(lambda: show_why(term, q))
                continue
            if low in COMMANDS_BACK:
                if self.session.back() is None:
                    term.say(term.s("at_start"), {"fg": "yellow"})
                    continue
                self.persist()
                return
            if low in COMMANDS_SKIP or (not text and not self.session.answered(q.key)):
                if d.required:
                    term.say(term.s("needs_answer"), {"fg": "red"})
                    continue
                self.session.skip(q.key)
                self.persist()
                return
            try:
                value = self.session.value(q.key) if not text else iv.parse_answer(d, text)
                value = iv.check_answer(self.session, q.key, value)
            except iv.AnswerError as exc:
                term.say(term.s("bad", msg=exc.text(term.lang)), {"fg": "red"})
                continue
            self.session.answer(q.key, value)
            self.persist()
            return


def show_how(term: Terminal, plan: dict[str, Any], target: str, rules: dict[str, Any] | None = None) -> None:
    """HOW: the same explanation as `servewise explain PLAN.json TARGET --brief`."""
    from servewise.engine.app import explain as ex

    from .cmd_audit import render_explain_brief

    try:
        result = ex.explain(plan, target, rules)
    except ex.ExplainError as exc:
        term.say(str(exc), {"fg": "yellow"})
        return
    term.say(render_explain_brief(result, plan, term.lang, output_width()).rstrip("\n"))


def show_why_not(term: Terminal, plan: dict[str, Any], option: str, rules: dict[str, Any] | None = None) -> None:
    """WHY-NOT: the same answer as `servewise why-not PLAN.json OPTION`."""
    from servewise.engine.app import explain as ex
    from servewise.engine.domain.catalog import load_catalog

    from .cmd_audit import render_why_not

    gpus = dict(load_catalog().table("gpus").index)
    try:
        result = ex.why_not(plan, option, rules, gpus)
    except ex.ExplainError as exc:
        term.say(str(exc), {"fg": "yellow"})
        return
    term.say(wrap(render_why_not(result, term.lang), output_width()).rstrip("\n"))


def after_plan(term: Terminal, runner: Interview, plan: dict[str, Any]) -> dict[str, Any]:
    """HOW, WHY-NOT and changing an answer over the finished plan until quit (or end of input);
    returns the latest plan."""
    from servewise.engine.app import explain as ex

    rules = ex.rule_index(runner.rulebase)
    first = next((r["option"].split(" | ")[0] for r in plan["rejected"]), "air")
    help_line = term.s("after", components=", ".join(plan["components"]), example=first)
    term.say(help_line)
    while True:
        try:
            text = term.read("servewise> ")
        except Stop:
            return plan
        verb, _, arg = text.partition(" ")
        verb, arg = verb.lower(), arg.strip()
        if verb in COMMANDS_QUIT:
            return plan
        if verb in COMMANDS_HOW and arg:
            show_how(term, plan, arg, rules)
        elif verb in COMMANDS_WHY_NOT and arg:
            show_why_not(term, plan, arg, rules)
        elif verb in COMMANDS_CHANGE and arg:
            key = next((d.key for d in iv.askable() if d.key == arg or d.key.endswith("." + arg)), None)
            if key is None:
                term.say(term.s("change_unknown", key=arg, keys=", ".join(d.key for d in iv.askable())))
                continue
            try:
                runner.ask(iv.Question(key, iv.input_def(key), iv.readers(key, runner.rulebase)))
            except Finish:
                pass
            new = runner.plan()
            if new is not None and new is not plan:
                plan = new
                term.say("")
                click.echo(to_brief(plan, term.lang, output_width()), nl=False)
        elif text.lower() in COMMANDS_HELP or text in COMMANDS_WHY:
            term.say(help_line)
        elif text:
            term.say(term.s("unknown_cmd"))


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _start(answers: str | None, resume: str | None, save: str | None,
           lang: str) -> tuple[iv.Session, iv.AnswersFile, bool]:
    """The session and where it is saved. A resumed file (or ``--answers F -o F``) is written
    only when an answer changes, in place (its comments kept); a symbolic link, device or
    folder as the answers file is refused before any question (exit 2)."""
    from servewise.engine.common.messages import message
    from servewise.engine.common.yamlio import OutputError, check_output

    if answers and resume:
        raise InputError("use --resume FILE to continue an interview or --answers FILE to pre-fill one, not both")
    source = resume or answers
    target = Path(save or resume or DEFAULT_SAVE)
    try:
        if not resume and target.exists() and not (answers and _same_file(answers, target)):
            raise InputError(pick(S["exists"], lang).format(file=target))
        session, text = iv.read_answers(source) if source else (iv.Session(), None)
    except WorkloadError as exc:
        raise InputError(exc.text(lang)) from None
    try:
        check_output(target)
    except OutputError as exc:
        raise InputError(message(exc.code, lang, **exc.fields)) from None
    if not resume:
        session.asked, session.skipped, session.done = [], set(), False  # pre-filled answers are not asked
    in_place = source is not None and source != "-" and _same_file(source, target)
    return session, iv.AnswersFile(target, session, text if in_place else None), bool(resume)


@click.command("ask")
@click.option("--answers", type=click.Path(dir_okay=False), help="Pre-fill answers from this workload file.")
@click.option("--resume", type=click.Path(dir_okay=False), help="Continue the interview saved in this file.")
@click.option("-o", "--save", type=click.Path(dir_okay=False),
              help=f"Save the answers here (default ./{DEFAULT_SAVE}; with --resume, the resumed file).")
@click.pass_obj
def ask(settings, answers: str | None, resume: str | None, save: str | None) -> None:
    """Guided interview: asks what the rules still need, saves every answer, ends in a plan."""
    term = Terminal(settings.lang)
    session, target, resumed = _start(answers, resume, save, settings.lang)
    rulebase = settings.rulebase()
    if resumed:
        term.say(term.s("resumed", file=target.path, n=_count(session)))
    term.say(term.s("intro", file=target.path))
    runner = Interview(term, session, target, rulebase)
    runner.persist()  # a new file at once; a resumed one only when an answer changes
    try:
        plan = runner.run()
    except Stop:
        runner.persist()
        term.say(term.s("quit", n=_count(session), file=runner.save))
        return
    except KeyboardInterrupt:
        runner.persist()
        term.say("")
        term.say(term.s("interrupted", n=_count(session), file=runner.save))
        sys.exit(130)
    session.done = True
    runner.persist()
    term.say("")
    click.echo(to_brief(plan, term.lang, output_width()), nl=False)
    term.say(term.s("finished", file=runner.save))
    try:
        plan = after_plan(term, runner, plan)
    except KeyboardInterrupt:
        term.say("")
    except Stop:
        pass
    runner.persist()
    if not plan["feasible"]:
        sys.exit(1)


def _count(session: iv.Session) -> int:
    return sum(1 for k in iv.askable_keys() if session.answered(k))


COMMANDS = [ask]
