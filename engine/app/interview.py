"""The guided interview (`servewise ask`): what to ask next, why, and how answers are kept.

No printing here. The command (cli/cmd_ask.py) shows questions and reads answers; this module
decides which input is still needed, parses and checks answers, explains (WHY, HOW, WHY-NOT)
and saves the answers as a workload file after every change.

Which questions are asked
  * ``model`` first (required; nothing can be planned without it);
  * every input an ``ask`` rule requests in the plan of the answers so far (``plan["asks"]``);
  * every input whose ``ask_if`` (facts/inputs.yaml) holds and that some rule reads.
Each must still be open (not answered, skipped or asked before) and relevant: its ``ask_if``, if
any, must hold (no SLA questions offline, no edge questions in a data centre); ``models`` (several
models together) is not asked: this version plans one model. Open questions are ordered by
decisiveness, :data:`PRIORITY` (facts/interview.yaml, with the reason); inputs not listed there
follow in the order of facts/inputs.yaml.
The operator may stop at any time: unanswered inputs keep their defaults.

Only the ``asks`` of a plan matter here, so the interview does not plan after each answer: an
:class:`~.askplan.AskRun` runs just the stages whose rules ask for the inputs the next question
depends on (the ``inputs`` stage for the built-in rules), and the whole plan when it is shown.
:func:`open_questions` takes either (a plan's ``asks`` or an ``AskRun``) and gives the same
questions, in the same order, with the same reasons.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.app.askplan import AskRun, ask_map, plan_of
from servewise.engine.app.inputs import (
    InputDef,
    WorkloadError,
    fill_defaults,
    flatten,
    get_path,
    has_path,
    input_def,
    input_defs,
    set_path,
    validate_workload,
)
from servewise.engine.app.plan import PlanResult
from servewise.engine.common.yamledit import CannotEdit, edit_key
from servewise.engine.common.yamlio import (
    MAX_NUMBER_CHARS,
    MAX_SCALAR_CHARS,
    YamlError,
    display_name,
    load_text,
    read_text,
    write_text_atomic,
)
from servewise.engine.domain.catalog import UnknownEntry, load_catalog
from servewise.engine.lang.expr import EvalError, ExprError, compile_expr
from servewise.engine.lang.rulebase import RuleBase


def _question_order() -> tuple[str, ...]:
    """The interview's question order, most decisive first (facts/interview.yaml, with why)."""
    from servewise.engine.common.paths import FACTS_DIR
    from servewise.engine.common.yamlio import safe_load

    data = safe_load((FACTS_DIR / "interview.yaml").read_text(encoding="utf-8")) or {}
    return tuple(str(k) for k in data.get("order") or ())


PRIORITY: tuple[str, ...] = _question_order()
NOT_ASKED = frozenset({"models"})
HEADER = "# servewise ask: interview answers; a workload file (servewise plan FILE)"
YES = frozenset({"y", "yes", "true", "on", "1", "是", "对", "要"})
NO = frozenset({"n", "no", "false", "off", "0", "否", "不", "不要"})
NONE = frozenset({"none", "null", "-", "无"})


class AnswerError(ValueError):
    """An answer cannot be used; the message says what was expected."""

    def __init__(self, message: str, cause: WorkloadError | None = None, code: str | None = None,
                 **args: Any):
        super().__init__(message)
        self.cause, self.code, self.args_ = cause, code, args

    @classmethod
    def coded(cls, code: str, **args: Any) -> AnswerError:
        """An error whose text is the message ``code`` of facts/messages (English as its str)."""
        from servewise.engine.common.messages import message
        return cls(message(code, "en", **args), code=code, **args)

    def text(self, lang: str) -> str:
        """The message in ``lang`` (validation messages come from facts/messages/inputs.yaml)."""
        from servewise.engine.common.messages import message
        if self.code is not None:
            return message(self.code, lang, **self.args_)
        if self.cause is not None and self.cause.code is not None:
            return message(self.cause.code, lang, **self.cause.args_)
        return str(self)


@dataclass
class Reason:
    """One rule behind a question: it asks for the input (``asks``) or reads it."""

    rule: str
    title: dict[str, str]
    because: dict[str, str] | None = None
    asks: bool = False


@dataclass
class Question:
    key: str
    definition: InputDef
    reasons: list[Reason] = field(default_factory=list)
    # the asking rules' reasons when they need a further rule run: computed by `why` (they come first)
    more: Callable[[], list[Reason]] | None = field(default=None, repr=False, compare=False)

    def resolve(self) -> list[Reason]:
        """Every reason, running the rules the asking ones need if not done yet."""
        if self.more is not None:
            self.reasons = self.more() + self.reasons
            self.more = None
        return self.reasons


@dataclass
class Session:
    """Answers so far (a partial workload), the questions asked in order, and those skipped."""

    answers: dict[str, Any] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)
    revisit: str | None = None
    done: bool = False

    def answered(self, key: str) -> bool:
        return has_path(self.answers, key)

    def has_model(self) -> bool:
        """The model is known: ``model``, or ``models`` (several models planned together, from an
        answers or workload file given with ``--answers``)."""
        return self.answered("model") or bool(self.answers.get("models"))

    def value(self, key: str) -> Any:
        return get_path(self.answers, key)

    def answer(self, key: str, value: Any) -> None:
        set_path(self.answers, key, value)
        self.skipped.discard(key)
        self._asked(key)

    def skip(self, key: str) -> None:
        """Take the default: the input is left out of the workload file."""
        remove_path(self.answers, key)
        self.skipped.add(key)
        self._asked(key)

    def back(self) -> str | None:
        """Revisit the previous question (its answer stays until replaced); None at the start."""
        if not self.asked:
            return None
        key = self.asked.pop()
        self.revisit = key
        self.done = False
        return key

    def _asked(self, key: str) -> None:
        if key in self.asked:
            self.asked.remove(key)
        self.asked.append(key)
        if self.revisit == key:
            self.revisit = None


def remove_path(data: dict[str, Any], key: str) -> None:
    """Delete a dotted key and any mapping left empty."""
    parts = key.split(".")
    nodes = [data]
    for part in parts[:-1]:
        nxt = nodes[-1].get(part)
        if not isinstance(nxt, dict):
            return
        nodes.append(nxt)
    nodes[-1].pop(parts[-1], None)
    for depth in range(len(parts) - 1, 0, -1):
        if not nodes[depth]:
            nodes[depth - 1].pop(parts[depth - 1], None)


def askable() -> list[InputDef]:
    return list(_askable())


@lru_cache(maxsize=1)
def _askable() -> tuple[InputDef, ...]:
    order = {k: i for i, k in enumerate(PRIORITY)}
    defs = [d for d in input_defs() if d.key not in NOT_ASKED]
    return tuple(sorted(defs, key=lambda d: (order.get(d.key, len(order)), input_defs().index(d))))


@lru_cache(maxsize=64)
def _compiled(src: str):
    return compile_expr(src)


def relevant(d: InputDef, workload: dict[str, Any]) -> bool:
    """Whether ``ask_if`` holds for the default-filled workload (no ``ask_if``: always)."""
    if not d.ask_if:
        return True
    try:
        return bool(_compiled(d.ask_if).evaluate_with(flatten(workload)))
    except (EvalError, ExprError):
        return False


def readers(key: str, rulebase: RuleBase) -> list[Reason]:
    """Rules that read this input in a condition or formula (what they try to decide: the title)."""
    found = ask_map(rulebase).readers.get(key)
    if found is None:  # not an input: scan the rules
        return [Reason(r.id, r.title) for r in rulebase.rules if key in r.names]
    return [Reason(rule, title) for rule, title in found]


class _PlanAsks:
    """The asks of a computed plan (or of none), in the interface of :class:`AskRun`."""

    def __init__(self, plan: dict[str, Any] | None):
        self.entries = (plan or {}).get("asks", [])

    def known(self, key: str) -> bool:
        return True

    def asks(self, key: str) -> list[dict[str, Any]]:
        return [a for a in self.entries if a["input"] == key]


def _ask_reasons(source: AskRun | _PlanAsks, key: str, rulebase: RuleBase) -> list[Reason]:
    out = []
    for a in source.asks(key):
        title = rulebase.by_id(a["rule"]).title if _has_rule(rulebase, a["rule"]) else {"en": a["rule"]}
        out.append(Reason(a["rule"], title, a.get("because"), asks=True))
    return out


def _question(d: InputDef, source: AskRun | _PlanAsks, rulebase: RuleBase, reads: list[Reason]) -> Question:
    if source.known(d.key):
        return Question(d.key, d, _ask_reasons(source, d.key, rulebase) + reads)
    return Question(d.key, d, reads, more=lambda: _ask_reasons(source, d.key, rulebase))


def open_questions(session: Session, plan: dict[str, Any] | AskRun | None, rulebase: RuleBase,
                   first: bool = False) -> list[Question]:
    """Every question still to ask, most decisive first (see the module docstring); ``plan`` is a
    plan (its ``asks`` are read) or an :class:`AskRun` (runs only the stages a question needs).
    ``first``: only the first question (what the interview asks next)."""
    if not session.has_model():
        return [Question("model", input_def("model"), readers("model", rulebase))]
    source = plan if isinstance(plan, AskRun) else _PlanAsks(plan)
    order = _askable()
    if first and session.revisit in {d.key for d in order}:  # `back`: asked again whatever else holds
        d = input_def(session.revisit)
        return [_question(d, source, rulebase, readers(d.key, rulebase))]
    filled, _ = fill_defaults(session.answers)
    out: list[Question] = []
    for d in order:
        key = d.key
        reads = readers(key, rulebase)
        if key == session.revisit:
            out.insert(0, _question(d, source, rulebase, reads))
            continue
        if session.answered(key) or key in session.skipped or key in session.asked:
            continue
        # the static test first: an input with `ask_if` that rules read needs no rule run
        if relevant(d, filled) and ((d.ask_if is not None and reads) or source.asks(key)):
            out.append(_question(d, source, rulebase, reads))
            if first:
                break
    return out


def _has_rule(rulebase: RuleBase, rule_id: str) -> bool:
    try:
        rulebase.by_id(rule_id)
    except KeyError:
        return False
    return True


def next_question(session: Session, plan: dict[str, Any] | AskRun | None,
                  rulebase: RuleBase) -> Question | None:
    questions = open_questions(session, plan, rulebase, first=True)
    return questions[0] if questions else None


def why(question: Question) -> list[Reason]:
    """MYCIN's WHY: the rules that ask for this input (with their reason) and those that read it."""
    seen: set[str] = set()
    out = []
    for r in sorted(question.resolve(), key=lambda r: not r.asks):
        if r.rule not in seen:
            seen.add(r.rule)
            out.append(r)
    return out


# ----- answers ---------------------------------------------------------------------------------

_SURROGATE = re.compile("[\ud800-\udfff]")
_NUMERIC = re.compile(r"[+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?")


def text_problem(text: str) -> AnswerError | None:
    """Why a typed line cannot be an answer, before it is parsed: bytes that are not UTF-8 (read
    as lone surrogates, which no file may hold) or an absurd length; None when it can be one."""
    if _SURROGATE.search(text):
        return AnswerError.coded("answer.not_utf8")
    if len(text) > MAX_SCALAR_CHARS:
        return AnswerError.coded("answer.too_long", length=f"{len(text):,}", limit=f"{MAX_SCALAR_CHARS:,}")
    return None


def _digits_checked(text: str) -> str:
    """``text``; :class:`AnswerError` when it is a number longer than any meant (int() of 5,000
    digits is slow and refused beyond 4,300 digits; YAML files have the same limit)."""
    if len(text) > MAX_NUMBER_CHARS and _NUMERIC.fullmatch(text):
        raise AnswerError.coded("answer.number_too_long", length=f"{len(text):,}", limit=MAX_NUMBER_CHARS)
    return text


def _number(text: str) -> Any:
    clean = _digits_checked(text.replace(",", "").replace("_", "").strip())
    for conv in (int, float):
        try:
            return conv(clean)
        except ValueError:
            pass
    return text


def _pick_choice(d: InputDef, text: str) -> Any:
    choices = list(d.choices or ())
    for c in choices:
        if str(c).lower() == text.lower() or any(names.get(str(c)) == text for names in d.labels.values()):
            return c
    if text.isdigit():
        _digits_checked(text)
        try:
            number = int(text)
        except ValueError:  # a digit int() does not take ('²')
            return text
        if 1 <= number <= len(choices):
            return choices[number - 1]
    return text


def parse_answer(d: InputDef, text: str) -> Any:
    """The typed value of an answer (a string the checks will reject is returned as is);
    :class:`AnswerError` for text that is no answer at all (:func:`text_problem`) or a number
    too long to mean anything."""
    problem = text_problem(text)
    if problem is not None:
        raise problem
    text = text.strip()
    if d.nullable and text.lower() in NONE:
        return None
    if d.type == "model":
        if text.startswith("{"):
            try:
                data, _ = load_text(text, "answer")
            except YamlError as exc:
                raise AnswerError(exc.message) from None
            return data
        return text
    if d.type in ("number", "integer"):
        return _number(text)
    if d.type == "boolean":
        low = text.lower()
        return True if low in YES else False if low in NO else text
    if d.type == "choice":
        return _pick_choice(d, text)
    if d.type in ("choices", "strings"):
        parts = [p.strip() for p in text.replace("，", ",").split(",") if p.strip()]
        if d.type == "choices" and len(parts) == 1 and " " in parts[0]:
            parts = parts[0].split()
        return [_pick_choice(d, p) for p in parts] if d.type == "choices" else parts
    return text


def check_answer(session: Session, key: str, value: Any) -> Any:
    """The value to store, or :class:`AnswerError` with the workload validation's message."""
    trial = copy.deepcopy(session.answers)
    set_path(trial, key, value)
    try:
        validate_partial(trial)
    except WorkloadError as exc:
        raise AnswerError(exc.message, exc) from None
    if key == "model" and isinstance(value, str):
        try:
            return load_catalog().model(value)["id"]
        except UnknownEntry as exc:
            raise AnswerError(str(exc)) from None
    return value


def validate_partial(data: Any, file: str = "<answers>") -> None:
    """Workload validation that allows a missing model (it is asked first)."""
    if isinstance(data, dict) and "model" not in data and "models" not in data:
        data = {**data, "model": "?"}
    validate_workload(data, file)


def plan_answers(session: Session, rulebase: RuleBase) -> PlanResult:
    """The plan of the answers so far, every other input at its default (needs the model)."""
    return plan_of(session.answers, rulebase)


def prepare(rulebase: RuleBase) -> None:
    """Load what answering needs before the first question: the catalog (the model's name is
    checked against it) and the rule base's question map."""
    load_catalog()
    ask_map(rulebase)


def ask_run(session: Session, rulebase: RuleBase, on_plan: Callable[[], None] | None = None) -> AskRun:
    """What the next questions need from the rules for the answers so far, computed on demand."""
    return AskRun(rulebase, session.answers, on_plan)


# ----- the running cost range ------------------------------------------------------------------

# Inputs whose answer decides the price (facts/interview.yaml, up to the task): after one of them is
# answered the interview plans the answers so far and shows the capex range they leave open.
PRICE_KEYS: frozenset[str] = frozenset(PRIORITY[:PRIORITY.index("task") + 1] if "task" in PRIORITY else PRIORITY)


@dataclass(frozen=True)
class CostMove:
    """What answering an open input the other way would do to the capex, by the rules' own figures."""

    input: str                # the input still at its default
    default: Any              # its default value
    capex_cny: float          # the plan's capex with the other answer (about)
    what: str                 # single-server | liquid-site | air-site


@dataclass(frozen=True)
class CostOutlook:
    """The capex of the plan of the answers so far and the range still open: the bill of
    materials' price range, widened by what the open decisive inputs could still change."""

    capex_cny: float
    price_range: tuple[float, float]
    moves: tuple[CostMove, ...]
    low_cny: float
    high_cny: float

    def move(self, key: str) -> CostMove | None:
        return next((m for m in self.moves if m.input == key), None)


def _concluded(plan: dict[str, Any], fact: str) -> Any:
    """The value the plan's trace last concluded for ``fact`` (None if it never did)."""
    value = None
    for step in plan.get("trace") or []:
        for c in step["conclusions"]:
            if c["fact"] == fact:
                value = c.get("value")
    return value


def cost_outlook(plan: dict[str, Any]) -> CostOutlook | None:
    """The running cost of the interview (issue 39 item 1): the capex of the plan of the answers
    so far, its price range, and the capex the rules computed for the other answer of a decisive
    input still at its default — the availability target (without N+1 at the server:
    ``components.availability.without_n1_change_pct``) and the site's cooling (cold plates'
    premium, ``facility.liquid_premium_cny``: a liquid-only site adds it to an air-cooled plan,
    an air site removes it from a liquid one). Each answer that fixes such an input removes its
    move, so the range narrows. None for an infeasible plan or one without a priced capex."""
    cost = plan.get("cost") or {}
    capex = cost.get("capex_cny")
    if not plan.get("feasible") or not capex:
        return None
    lo, hi = cost.get("capex_range_cny") or (capex, capex)
    open_inputs = set(plan.get("defaults_used") or [])
    workload = plan.get("workload") or {}
    moves: list[CostMove] = []
    availability = (plan.get("components") or {}).get("availability") or {}
    change = availability.get("without_n1_change_pct")
    if {"sla.availability", "constraints.allow_single_point_of_failure"} <= open_inputs and change:
        moves.append(CostMove("sla.availability", get_path(workload, "sla.availability"),
                              round(capex * (1 + float(change) / 100), 0), "single-server"))
    premium = _concluded(plan, "facility.liquid_premium_cny")
    if "constraints.cooling_available" in open_inputs and premium:
        liquid = ((plan.get("components") or {}).get("cooling") or {}).get("type") == "liquid"
        moves.append(CostMove("constraints.cooling_available",
                              get_path(workload, "constraints.cooling_available"),
                              round(capex - premium if liquid else capex + premium, 0),
                              "air-site" if liquid else "liquid-site"))
    scale = [m.capex_cny / capex for m in moves]  # the price range moves with the capex
    low = min([lo] + [lo * s for s in scale])
    high = max([hi] + [hi * s for s in scale])
    return CostOutlook(float(capex), (float(lo), float(hi)), tuple(moves), round(low, 0), round(high, 0))


# HOW and WHY-NOT over the plan are engine/app/explain.py's `explain` and `why_not`, shared with the
# auditor's commands (one implementation).


# ----- the answers file ------------------------------------------------------------------------

def dump_answers(session: Session) -> str:
    """The workload YAML with the interview state in leading comments (a valid workload file)."""
    ordered: dict[str, Any] = {}
    for d in input_defs():
        if session.answered(d.key):
            set_path(ordered, d.key, session.value(d.key))
    lines = [HEADER, *_state_lines(session).values()]
    body = yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True, default_flow_style=False) if ordered else ""
    return "\n".join(lines) + "\n" + body


def askable_keys() -> list[str]:
    return [d.key for d in askable()]


def save_answers(path: str | Path, session: Session) -> None:
    """Atomic write (temporary file in the same folder, then rename): never a half-written file;
    raises :class:`~.yamlio.OutputError` for a device, FIFO, folder, symbolic link or unwritable
    place."""
    write_text_atomic(path, dump_answers(session), fsync=True)


def _state_lines(session: Session) -> dict[str, str]:
    return {"asked": f"# asked: {', '.join(session.asked)}",
            "skipped": f"# skipped: {', '.join(k for k in askable_keys() if k in session.skipped)}",
            "status": f"# status: {'done' if session.done else 'open'}"}


class AnswersFile:
    """Where the interview saves its answers, written only when they changed.

    A file servewise made (or a new one) is written whole (:func:`dump_answers`). A file the
    operator wrote (``--resume`` of a workload, an example) is edited in place: the changed
    values are replaced where they are, removed keys deleted, new keys added at the end of their
    section (block or flow style, as the file writes it), and the interview state written as
    comment lines after its leading comments, so its other comments and layout stay as they were.
    When that is impossible (an anchor that is changed, and such: every edit is read back), the
    answers go to a file next to it (:attr:`moved_from` says so) and the operator's file is left
    alone."""

    def __init__(self, path: str | Path, session: Session, text: str | None = None):
        self.path = Path(path)
        self.moved_from: Path | None = None
        # edit in place only what servewise did not write itself (its own layout is dump_answers)
        self.text = text if text is not None and text != dump_answers(session) else None
        self.written = self._state(session) if text is not None else None

    def _state(self, session: Session) -> str:
        """What a write records: the answers and skipped inputs, and for servewise's own files
        also the questions' order and status (an operator's file is written for answers only)."""
        state: dict[str, Any] = {"answers": session.answers, "skipped": sorted(session.skipped)}
        if self.text is None:
            state |= {"asked": session.asked, "done": session.done}
        return json.dumps(state, sort_keys=True, default=str)

    def save(self, session: Session) -> bool:
        """Write the answers if they changed since read or last written; whether it wrote.
        Raises :class:`~.yamlio.OutputError` as :func:`save_answers`."""
        state = self._state(session)
        if state == self.written:
            return False
        if self.text is not None:
            edited = edit_answers_text(self.text, session)
            if edited is None:
                self.moved_from, self.path, self.text = self.path, sibling_answers_file(self.path), None
                state = self._state(session)
            else:
                write_text_atomic(self.path, edited, fsync=True)
                self.text, self.written = edited, state
                return True
        save_answers(self.path, session)
        self.written = state
        return True


def sibling_answers_file(path: Path) -> Path:
    """``NAME.answers.yaml`` next to ``path`` (``NAME.answers-2.yaml``... when that is not an
    answers file of servewise's own)."""
    stem = path.name.removesuffix(".yaml").removesuffix(".yml")
    for n in range(1, 100):
        candidate = path.with_name(f"{stem}.answers{'' if n == 1 else f'-{n}'}.yaml")
        try:
            first = read_text(candidate).split("\n", 1)[0]
        except YamlError:
            if not candidate.exists():
                return candidate
            continue
        if first == HEADER:
            return candidate
    return path.with_name(f"{stem}.answers.yaml")


def _with_state(text: str, session: Session) -> str:
    """The interview state as leading comment lines (:func:`load_answers` reads them there):
    replaced where they are, else added after the file's leading comments."""
    lines = text.split("\n")
    lead = 0
    while lead < len(lines) and lines[lead].startswith("#"):
        lead += 1
    todo = _state_lines(session)
    for i in range(lead):
        name = lines[i][1:].strip().split(":", 1)[0]
        if name in todo and lines[i][1:].strip().startswith(name + ":"):
            lines[i] = todo.pop(name)
    lines[lead:lead] = list(todo.values())
    return "\n".join(lines)


def edit_answers_text(text: str, session: Session) -> str | None:
    """``text`` (a workload file) with the session's answers and state written into it, changing
    only the lines of the inputs that differ; None when that cannot be done faithfully (the result
    is read back and must give exactly the answers)."""
    try:
        old, _ = load_text(text, "<answers>")
        old = old or {}
        new = text
        for d in input_defs():
            was, now = has_path(old, d.key), session.answered(d.key)
            if was != now or (now and get_path(old, d.key) != session.value(d.key)):
                new = edit_key(new, d.key, now, session.value(d.key))
        new = _with_state(new, session)
        back, _ = load_text(new, "<answers>")
    except (CannotEdit, YamlError, yaml.YAMLError, ValueError, IndexError, RecursionError):
        return None
    same = json.dumps(back or {}, sort_keys=True, default=str) == json.dumps(session.answers, sort_keys=True,
                                                                            default=str)
    if not same or (_comment(new, "asked") or []) != session.asked:
        return None
    return new


def _comment(text: str, name: str) -> list[str] | None:
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if body.startswith(name + ":"):
            return [k.strip() for k in body[len(name) + 1:].split(",") if k.strip()]
    return None


def load_answers(path: str | Path) -> Session:
    """Read an answers file (or any workload file): answers, and the interview state if recorded.

    Raises :class:`WorkloadError` (file, field, message) when it is not a valid partial workload."""
    return read_answers(path)[0]


def read_answers(path: str | Path) -> tuple[Session, str]:
    """:func:`load_answers`, and the file's text (to edit it in place: :class:`AnswersFile`)."""
    name = display_name(path)
    try:
        text = read_text(path)
        data, lines = load_text(text, name)
    except YamlError as exc:
        raise WorkloadError(exc.path, exc.line, "", exc.message) from None
    data = data or {}
    if isinstance(data, dict) and "model" not in data and "models" not in data:
        validate_workload({**data, "model": "?"}, name, lines)
    else:
        validate_workload(data, name, lines)
    keys = set(askable_keys())
    asked = [k for k in (_comment(text, "asked") or []) if k in keys]
    skipped = {k for k in (_comment(text, "skipped") or []) if k in keys}
    status = _comment(text, "status") or []
    return Session(answers=data, asked=asked, skipped=skipped, done=status == ["done"]), text
