"""Explanation templates (``because``): parsed once at load into literal text and fields.

A field references a name and never computes: ``{name}``, ``{name:.1f}`` (a format spec), or a
*choice* that picks the words of one language from one value computed in ``let:`` (the syntax is
the ``select`` / ``plural`` subset of ICU MessageFormat)::

    {fits, select, true {16-bit fits} other {16-bit does not fit ({left} GiB short)}}
    {thumb.tier, select, <=13B {one A10G} 13-34B {one L40S} other {several H200 NVL}}
    {spines, select, 0 {} other {, joined by {spines} spine switches}}      # optional clause
    {n, plural, one {one server} other {{n} servers}}                       # English: one / other

A case's text is a template itself (fields and choices inside, nested at most
:data:`MAX_DEPTH` deep). ``select`` compares the value's key (``true``/``false`` for a boolean,
``none`` for an unset value, a whole number without its ``.0``, text as it is) with the case
keys and falls back to ``other``, which every choice must have (``other {}`` writes nothing).
``plural`` takes ``=N`` cases (exact numbers) and the plural category of the language: ``one``
for 1 in English; Chinese has only ``other``. Rendering is engine/runtime/justify.py ``render``.

The older ``{=expression}`` field still parses (a lint error in the shipped rules, a warning in a
``--rules-dir`` folder: engine/lang/rulelint.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from servewise.engine.domain.functions import FUNCTIONS
from servewise.engine.lang.expr import Expr, ExprError, compile_expr

# ``{name}``, ``{name:spec}`` or the older ``{=expression}`` / ``{=expression:spec}``
TEMPLATE_FIELD = re.compile(r"\{(=[^{}]+?|[a-zA-Z_][\w.]*)(?::([<>^]?[+-]?,?\d*(?:\.\d+)?[a-z%]?))?\}")
_CHOICE_HEAD = re.compile(r"\{([a-zA-Z_][\w.]*)\s*,\s*(select|plural)\s*,\s*")
_CASE_KEY = re.compile(r"([^\s{}]+)\s*\{")
_SPACE = re.compile(r"\s*")
_BRACE = re.compile(r"[{}]")
MAX_FORMAT_WIDTH = 64
MAX_FORMAT_PRECISION = 15
MAX_DEPTH = 4            # choices inside choices
MAX_CASES = 32           # cases of one choice
PLURAL_KEYS = ("one", "other")
_FORMAT_NUMBERS = re.compile(r"(\d*)(?:\.(\d+))?")
_HINT = "write {name}, {name:.1f}, {name:,.0f} or {name, select, a {…} other {…}}"


@dataclass(frozen=True)
class Field:
    """``{name}`` or ``{name:spec}`` (``name`` starts with ``=`` for the older ``{=expression}``)."""

    name: str
    spec: str | None = None


@dataclass(frozen=True)
class Choice:
    """``{name, select|plural, key {text} … other {text}}``: ``cases`` maps each key (``other``
    last) to the parts of its text."""

    name: str
    kind: str
    cases: tuple[tuple[str, tuple[Part, ...]], ...]

    def case(self, value: Any, lang: str) -> tuple[Part, ...]:
        """The parts of the case ``value`` selects in ``lang``."""
        keys = dict(self.cases)
        if self.kind == "plural":
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                exact = keys.get(f"={choice_key(value)}")
                if exact is not None:
                    return exact
                if lang == "en" and value == 1 and "one" in keys:
                    return keys["one"]
            return keys["other"]
        return keys.get(choice_key(value), keys["other"])


Part = tuple[str, Field | Choice | None]     # literal text, then the field after it (None: the end)


def choice_key(value: Any) -> str:
    """The key a value selects: ``true``/``false``, ``none``, ``3`` for 3.0, text as it is."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@dataclass(frozen=True)
class Template:
    """An explanation text, its parts, the names it shows (in order, choices' names first) and the
    older ``{=expression}`` fields compiled."""

    text: str
    names: tuple[str, ...]
    exprs: tuple[tuple[str, Expr], ...] = ()
    parts: tuple[Part, ...] = ()

    def expr(self, source: str) -> Expr | None:
        for src, e in self.exprs:
            if src == source:
                return e
        return None

    @property
    def choices(self) -> int:
        """How many choices the template holds (at any depth)."""
        def count(parts: tuple[Part, ...]) -> int:
            return sum(1 + sum(count(p) for _, p in node.cases)
                       for _, node in parts if isinstance(node, Choice))
        return count(self.parts)


def check_format(spec: str | None, field: str) -> None:
    """A format spec's width and precision are bounded (``{x:999999999}`` builds no huge text)."""
    if not spec:
        return
    m = _FORMAT_NUMBERS.search(spec.lstrip("<>^+-,"))
    width, prec = (m.group(1), m.group(2)) if m else ("", None)
    if width and int(width) > MAX_FORMAT_WIDTH:
        raise ExprError(f"because: format width {int(width)} in '{{{field}:{spec}}}' is larger than "
                        f"{MAX_FORMAT_WIDTH}")
    if prec and int(prec) > MAX_FORMAT_PRECISION:
        raise ExprError(f"because: format precision {int(prec)} in '{{{field}:{spec}}}' is larger "
                        f"than {MAX_FORMAT_PRECISION}")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.names: list[str] = []
        self.exprs: list[tuple[str, Expr]] = []

    def fail(self, pos: int, why: str = "malformed placeholder") -> ExprError:
        bad = self.text[pos:pos + 40]
        return ExprError(f"because: {why} '{bad}' ({_HINT})")

    def name(self, name: str) -> None:
        if name not in self.names:
            self.names.append(name)

    def parts(self, pos: int, depth: int) -> tuple[tuple[Part, ...], int]:
        """Parts from ``pos`` up to the end (depth 0) or the ``}`` closing a case (returned at it)."""
        out: list[Part] = []
        text, start = self.text, pos
        while True:
            m = _BRACE.search(text, pos)
            if m is None:
                if depth:
                    raise self.fail(len(text) - 1, "a case's text is not closed with '}' in")
                out.append((text[start:], None))
                return tuple(out), len(text)
            pos = m.start()
            if text[pos] == "}":
                if depth == 0:
                    raise self.fail(pos)
                out.append((text[start:pos], None))
                return tuple(out), pos
            node, pos = self.field(pos, depth)
            out.append((text[start:m.start()], node))
            start = pos

    def field(self, pos: int, depth: int) -> tuple[Field | Choice, int]:
        m = TEMPLATE_FIELD.match(self.text, pos)
        if m:
            name, spec = m.group(1), m.group(2)
            check_format(spec, name)
            if name.startswith("="):
                try:
                    e = compile_expr(name[1:], FUNCTIONS)
                except ExprError as exc:
                    raise ExprError(f"because: {exc}") from None
                self.exprs.append((name, e))
                for n in e.names:
                    self.name(n)
            else:
                self.name(name)
            return Field(name, spec), m.end()
        m = _CHOICE_HEAD.match(self.text, pos)
        if not m:
            raise self.fail(pos)
        if depth >= MAX_DEPTH:
            raise self.fail(pos, f"choices nested more than {MAX_DEPTH} deep at")
        name, kind = m.group(1), m.group(2)
        self.name(name)
        cases: list[tuple[str, tuple[Part, ...]]] = []
        pos = m.end()
        while True:
            pos = _SPACE.match(self.text, pos).end()
            if pos >= len(self.text):
                raise ExprError(f"because: the choice '{{{name}, {kind}, …}}' is not closed with '}}'")
            if self.text.startswith("}", pos):
                break
            k = _CASE_KEY.match(self.text, pos)
            if not k:
                raise self.fail(pos, f"expected a case 'key {{text}}' of '{name}' at")
            key = k.group(1)
            if kind == "plural" and key not in PLURAL_KEYS and not re.fullmatch(r"=-?\d+", key):
                raise self.fail(pos, f"plural case '{key}' is not =N, one or other:")
            if any(key == c for c, _ in cases):
                raise self.fail(pos, f"case '{key}' of '{name}' is given twice:")
            body, pos = self.parts(k.end(), depth + 1)
            cases.append((key, body))
            pos += 1  # the case's closing brace
            if len(cases) > MAX_CASES:
                raise self.fail(pos, f"more than {MAX_CASES} cases in")
        if not any(c == "other" for c, _ in cases):
            raise ExprError(f"because: the choice '{{{name}, {kind}, …}}' has no 'other {{…}}' case "
                            "(write other {} for an optional clause)")
        cases.sort(key=lambda c: c[0] == "other")
        return Choice(name, kind, tuple(cases)), pos + 1


def make_template(text: str) -> Template:
    """Parse a template (see the module's documentation); a brace that is not part of a field or a
    choice is an error."""
    p = _Parser(text)
    parts, _ = p.parts(0, 0)
    return Template(text, tuple(p.names), tuple(p.exprs), parts)
