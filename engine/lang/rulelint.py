"""Semantic lint of a loaded rule base: every name a rule reads exists in the fact dictionary and is
available at the rule's stage, protected outputs and shipped rule ids are not overwritten, chosen
component values respect their schema, catalog tables are named, and (for shipped rules) explanation
templates only reference names. Each finding is ``file:line: rule-id: message``."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.schema_check import best_error, compiled, jsonschema_validator, valid
from servewise.engine.domain.functions import FUNCTIONS
from servewise.engine.lang.expr import Expr, compile_expr
from servewise.engine.lang.factdict import INPUT_STAGE, ORDER, FactDictionary
from servewise.engine.lang.rulebase import FACTS_DIR, Problem, RuleBase, RuleSpec

PROTECTED_PREFIXES = ("plan.",)
PROTECTED_NAMES = ("feasible", "plan")
CATALOG_FUNCTIONS = {"catalog": 0, "catalog_ids": 0}     # function → index of its table argument
LANGUAGE_BINDING = re.compile(r".+_(en|zh)$")
# #41 "logic once": shipped rule files that still hold per-language `let:` bindings (`x_en` /
# `x_zh`) or a computing `{=…}` template field. Their findings are warnings until they are
# converted (a mechanical follow-up: one language-neutral binding, the words chosen in each
# `because` with `{value, select, …}`); every other shipped file gets an error. Remove a file
# from this list when it is converted (tests/test_rule_lint.py fails while a listed file is clean).
PENDING_LOGIC_ONCE = (
)

# #41 policies as data: the numbers an expression may write itself. Everything else is read by
# name: a policy (facts/catalog/policies.yaml, `policy(name)`), a catalog field, or one of the
# rule's own `constants:` with its source. 0, 1, 2 and 100 are counting and percent; the rest
# convert units (bits per byte, months a year, hours, minutes and seconds a day, days a year,
# decimal and binary prefixes, bytes per GiB in GB). Digits of round() (e.g. -3) are not numbers.
ALLOWED_NUMBERS = frozenset({
    0, 1, 2, 100,
    8, 12, 24, 60, 365, 3600, 86400,
    1000, 10**6, 10**9, 10**12, 1024, 1024**2, 1024**3, 1.073741824,
})


def stray_numbers(tree: ast.AST) -> list[int | float]:
    """The numbers written in an expression outside :data:`ALLOWED_NUMBERS` (round()'s digits
    excepted), in source order."""
    digits: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "round" \
                and len(node.args) > 1:
            digits.update(id(n) for n in ast.walk(node.args[1]))
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in digits
             and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
             and n.value not in ALLOWED_NUMBERS]
    return [n.value for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    rule: str
    message: str
    severity: str = "error"          # error | warning
    code: str = "lint"

    def __str__(self) -> str:
        tag = "" if self.severity == "error" else "warning: "
        return f"{self.file}:{self.line}: {self.rule}: {tag}{self.message}"

    def problem(self) -> Problem:
        return Problem(self.file, self.line, self.rule, self.message)


@lru_cache(maxsize=1)
def component_schema() -> dict[str, Any]:
    return json.loads((FACTS_DIR / "schemas" / "components.schema.json").read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def catalog_tables() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in (FACTS_DIR / "catalog").glob("*.yaml")))


def _locals(spec: RuleSpec) -> set[str]:
    out = set(spec.let_map)
    for a in spec.actions:
        out.update(a.locals)
        if a.kind == "select":
            out.add(a.spec["kind"])
    return out


def _reads(spec: RuleSpec) -> list[tuple[tuple, str, Expr | None]]:
    """(key path in the rule, name, expression) for every name the rule reads, in file order."""
    out: list[tuple[tuple, str, Expr | None]] = []
    for name, e in spec.lets:
        out += [(("let", name), n, e) for n in e.names]
    for j, e in enumerate(spec.when):
        out += [(("when", j), n, e) for n in e.names]
    if spec.order_by is not None:
        out += [(("order_by",), n, spec.order_by) for n in spec.order_by.names]
    for k, a in enumerate(spec.actions):
        for e in a.exprs.values():
            out += [(("then", k, a.kind), n, e) for n in e.names]
        if a.kind == "least" and spec.for_each:  # attributes of the rule's items, named bare
            out += [(("then", k, a.kind), f"{spec.for_each}.{attr}", None)
                    for attr in (a.spec["of"], *(a.spec.get("among") or ()))]
        for t in (a.spec.get("_templates") or {}).values():
            out += [(("then", k, a.kind, "unless"), n, None) for n in t.names]
    for lang, t in spec.because.items():
        out += [(("because", lang), n, None) for n in t.names]
    return out


def _pending(file: str) -> bool:
    """``file`` (as shown: relative to the working folder or absolute) is in PENDING_LOGIC_ONCE."""
    shown = file.replace("\\", "/")
    return any(shown == p or shown.endswith("/" + p) for p in PENDING_LOGIC_ONCE)


class Linter:
    def __init__(self, rulebase: RuleBase, loading: bool = False):
        self.rb = rulebase
        self.loading = loading      # at plan time: a --rules-dir rule's stray number only warns
        self.facts = FactDictionary(rulebase)
        self.findings: list[Finding] = []
        self.pending: dict[str, list[tuple[RuleSpec, tuple, str]]] = {}

    def add(self, spec: RuleSpec, path: tuple, message: str, severity: str = "error",
            code: str = "lint") -> None:
        self.findings.append(Finding(spec.file, spec.line_at(*path), spec.id, message, severity, code))

    # ------------------------------------------------------------------ checks
    def run(self, files: set[str] | None = None) -> list[Finding]:
        shipped = {i: r for r in self.rb.rules if r.builtin for i in (r.id, *r.aliases)}
        for spec in self.rb.rules:
            if files is not None and spec.file not in files:
                continue  # its own findings are not asked for (the checks across rules still run)
            self.names(spec)
            self.writes(spec)
            self.components(spec)
            self.calls(spec)
            self.templates(spec)
            self.language_bindings(spec)
            self.corrects_languages(spec)
            self.tests(spec)
            self.test_coverage(spec)
            self.layout(spec)
            self.numbers(spec)
            if not spec.builtin:
                if spec.id in shipped and shipped[spec.id] is not spec:
                    other = shipped[spec.id]
                    self.add(spec, (), f"id '{spec.id}' shadows an alias of the shipped rule {other.id} "
                             f"({other.file}:{other.line})", code="shadow")
                for alias in spec.aliases:
                    if alias in shipped:
                        self.add(spec, ("aliases",), f"alias '{alias}' shadows the shipped rule "
                                 f"{shipped[alias].id} ({shipped[alias].file}:{shipped[alias].line})",
                                 code="shadow")
        self.pending_summary()
        self.bands()
        return sorted(self.findings, key=lambda f: (f.file, f.line, f.rule, f.message))

    def check_name(self, spec: RuleSpec, path: tuple, name: str, local: set[str]) -> None:
        root = name.split(".")[0]
        if root in local:
            return
        kind = spec.for_each
        entry = self.facts.get(name)
        if entry is None:
            hint = self.facts.suggest(name)
            self.add(spec, path, f"unknown fact '{name}'" + (f"; did you mean '{hint}'?" if hint else ""),
                     code="unknown-name")
            return
        if ORDER[entry.stage] > ORDER[spec.stage] and not (kind and root == kind and entry.stage == spec.stage):
            self.add(spec, path, f"'{name}' is first set in stage {entry.stage}; this rule runs in "
                     f"{spec.stage}", code="stage-order")

    @cached_property
    def fact_roots(self) -> set[str]:
        """The first parts of every fact name (computed once: a rule set may have thousands of rules)."""
        return {n.split(".")[0] for n in self.facts.entries} | set(self.facts.kinds)

    def names(self, spec: RuleSpec) -> None:
        for name, _ in spec.lets:
            if name in self.fact_roots or name == spec.for_each:
                self.add(spec, ("let", name), f"let '{name}' hides the facts '{name}.*'; choose another name",
                         code="let-shadow")
        local = _locals(spec)
        seen: set[tuple[tuple, str]] = set()
        for path, name, _ in _reads(spec):
            if (path[:2], name) in seen:
                continue
            seen.add((path[:2], name))
            if name in spec.produces:
                continue
            self.check_name(spec, path, name, local)

    def writes(self, spec: RuleSpec) -> None:
        if spec.builtin:
            return
        for k, a in enumerate(spec.actions):
            keys = list(a.spec) if a.kind == "derive" else []
            if a.kind == "select":
                keys = [f"{a.spec['as']}.id"]
            for key in keys:
                if key in PROTECTED_NAMES or key.startswith(PROTECTED_PREFIXES) or key.split(".")[0] == "feasible":
                    self.add(spec, ("then", k, a.kind), f"'{key}' is a protected output (the engine "
                             "decides feasibility; write a warning or a rejection instead)", code="protected")

    def components(self, spec: RuleSpec) -> None:
        schema = component_schema().get("properties", {})
        for k, a in enumerate(spec.actions):
            if a.kind != "choose":
                continue
            comp = a.spec["component"]
            fields = schema.get(comp, {}).get("properties", {})
            values = dict(a.spec.get("set") or {})
            for key in a.spec.get("compute") or {}:
                e = a.exprs[f"compute.{key}"]
                if not e.names and not e.functions:  # a constant formula is checked like a literal
                    values[key] = e.evaluate(lambda name: None)
            for key, value in values.items():
                sub = fields.get(key)
                if sub is None:
                    continue
                check = compiled(sub)
                err = None if valid(check, value) else best_error(jsonschema_validator(sub), value)
                if err is not None:
                    where = "set" if key in (a.spec.get("set") or {}) else "compute"
                    self.add(spec, ("then", k, "choose", where, key),
                             f"components.{comp}.{key} = {value!r}: {err.message}", code="component-value")

    def calls(self, spec: RuleSpec) -> None:
        exprs: list[tuple[tuple, Expr]] = [(("let", n), e) for n, e in spec.lets]
        exprs += [(("when", j), e) for j, e in enumerate(spec.when)]
        exprs += [(("then", k, a.kind), e) for k, a in enumerate(spec.actions) for e in a.exprs.values()]
        tables = catalog_tables()
        for path, e in exprs:
            for node in ast.walk(e.tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                    continue
                idx = CATALOG_FUNCTIONS.get(node.func.id)
                if idx is None or len(node.args) <= idx:
                    continue
                arg = node.args[idx]
                if isinstance(arg, ast.Constant) and (not isinstance(arg.value, str) or arg.value not in tables):
                    self.add(spec, path, f"{node.func.id}(): {arg.value!r} is not a catalog table "
                             f"(one of {', '.join(tables)})", code="catalog-table")

    def numbers(self, spec: RuleSpec) -> None:
        """#41 one home for every assumption: no number written in an expression outside the
        allowed counting and unit factors; a rule's own figures are `constants:` with a source."""
        exprs: list[tuple[tuple, Expr]] = [(("let", n), e) for n, e in spec.lets if n not in spec.constants]
        exprs += [(("when", j), e) for j, e in enumerate(spec.when)]
        exprs += [(("then", k, a.kind), e) for k, a in enumerate(spec.actions) for e in a.exprs.values()]
        severity = "warning" if self.loading and not spec.builtin else "error"
        for path, e in exprs:
            found = stray_numbers(e.tree)
            if found:
                shown = ", ".join(dict.fromkeys(format(v, "g") for v in found))
                self.add(spec, path, f"number(s) {shown} written in '{_short(e.source)}': read an assumption "
                         "with policy('name') (facts/catalog/policies.yaml), a product fact from the catalog, "
                         "or declare the rule's own figure under constants: with its source",
                         severity, code="literal")
        for name in spec.constants:
            src = spec.raw["constants"][name]["source"]
            if src.startswith("G-") and src not in _cited(spec):
                self.add(spec, ("constants", name), f"constant '{name}' cites {src}, which the rule's "
                         "source: does not cite", code="constant-source")

    def bands(self) -> None:
        """Rules that declare `band:` with the same set must together cover every value above the
        lowest bound: report each gap between them and an open top."""
        sets: dict[str, list[RuleSpec]] = {}
        for spec in self.rb.rules:
            if spec.band:
                sets.setdefault(spec.band["set"], []).append(spec)
        for name, specs in sorted(sets.items()):
            overs = sorted({s.band["over"] for s in specs})
            if len(overs) > 1:
                self.add(specs[0], ("band",), f"band set '{name}' is over different quantities: "
                         f"{', '.join(overs)}", code="band-gap")
                continue
            intervals = []
            for spec in specs:
                lo = self.bound(spec, "from", "above")
                hi = self.bound(spec, "upto", "below")
                if lo is None or hi is None:
                    return
                intervals.append((lo, hi, spec))
            for gap in band_gaps([(lo, hi) for lo, hi, _ in intervals]):
                spec = min(intervals, key=lambda t: (t[2].file, t[2].line))[2]
                self.add(spec, ("band",), f"band set '{name}' over {overs[0]} leaves {gap} matched by "
                         f"no rule ({', '.join(sorted(s.id for s in specs))})", code="band-gap")

    def bound(self, spec: RuleSpec, closed: str, open_: str) -> tuple[float, bool] | None:
        """A band edge as (value, included); ±inf when the rule leaves that side open."""
        key = closed if closed in spec.band else open_ if open_ in spec.band else None
        if key is None:
            return (float("-inf") if closed == "from" else float("inf"), True)
        src = str(spec.band[key])
        e = spec.let_map.get(src)
        try:
            value = (e or compile_expr(src, FUNCTIONS)).evaluate(lambda _n: None)
        except Exception:  # noqa: BLE001 - reported as a finding
            value = None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            self.add(spec, ("band", key), f"band bound {key}: '{src}' is not a number known before "
                     "the plan (a constant, a policy or a number)", code="band-gap")
            return None
        return (float(value), key == closed)

    def logic_once(self, spec: RuleSpec, path: tuple, what: str, message: str, code: str) -> None:
        """An error in a converted shipped file; a warning in a ``--rules-dir`` folder (third-party
        rules keep working while they migrate); in a shipped file still to convert, gathered into
        one warning per file (:meth:`pending_summary`)."""
        if spec.builtin and _pending(spec.file):
            self.pending.setdefault(spec.file, []).append((spec, path, what))
            return
        self.add(spec, path, message, "error" if spec.builtin else "warning", code=code)

    def pending_summary(self) -> None:
        for found in self.pending.values():
            spec, path, _ = found[0]
            names = [w for _, _, w in found]
            self.add(spec, path, f"{len(names)} per-language binding(s) or computing template field(s) "
                     f"still to convert to one value per decision: {', '.join(names)} (#41; "
                     "tools/migrate_language_pairs.py; engine/lang/rulelint.py PENDING_LOGIC_ONCE)",
                     "warning", code="logic-once-pending")

    def templates(self, spec: RuleSpec) -> None:
        """#41 logic once: a template references names and chooses words, it never computes."""
        found = [(("because", lang), f"because.{lang}", t) for lang, t in spec.because.items()]
        for k, a in enumerate(spec.actions):
            for key, t in (a.spec.get("_templates") or {}).items():
                where = (f"ranked_because.{key[1]}" if key[0] == "ranked"
                         else f"unless[{key[0]}].because.{key[1]}")
                path = (("then", k, a.kind, "ranked_because", key[1]) if key[0] == "ranked"
                        else ("then", k, a.kind, "unless", key[0], "because", key[1]))
                found.append((path, where, t))
        for path, where, t in found:
            if t.exprs:
                self.logic_once(spec, path, f"{{{t.exprs[0][0][:24]}…}} in {spec.id} {where}",
                                f"{where} computes '{{{t.exprs[0][0]}}}': bind it with `let:` and reference "
                                "the name, choosing words with {name, select, …} (tools/migrate_because.py "
                                "hoists it)", "template-expression")

    def corrects_languages(self, spec: RuleSpec) -> None:
        """A `corrects:` note is shown to the reader in the plan's language: {en, zh} (an English-only
        string is an error in the shipped rules, a warning in a ``--rules-dir`` folder)."""
        if spec.corrects and "zh" not in spec.corrects:
            self.add(spec, ("corrects",), "corrects: give the note in both languages ({en: …, zh: …}); "
                     "--lang zh shows it", "error" if spec.builtin else "warning", code="corrects-language")

    def language_bindings(self, spec: RuleSpec) -> None:
        """#41 logic once: a `let:` binding computes one language-neutral value; the words of each
        language are chosen in its `because` (``{value, select, …}``), not in `x_en` / `x_zh`."""
        for name, _ in spec.lets:
            m = LANGUAGE_BINDING.fullmatch(name)
            if m is not None:
                self.logic_once(spec, ("let", name), name,
                                f"let '{name}' is written for one language ({m.group(1)}): bind the "
                                "language-neutral value once and choose each language's words in its "
                                "`because` with {value, select, …} (docs/rule-authoring.md; "
                                "tools/migrate_language_pairs.py)", "language-binding")

    def tests(self, spec: RuleSpec) -> None:
        local = _locals(spec)
        for i, case in enumerate(spec.tests):
            for key in case.get("facts") or {}:
                if self.facts.get(key) is None and key.split(".")[0] not in local:
                    hint = self.facts.suggest(key)
                    self.add(spec, ("tests", i, "facts", key), f"test '{case['name']}': unknown fact "
                             f"'{key}'" + (f"; did you mean '{hint}'?" if hint else ""), code="unknown-name")
            for key in (case.get("expect") or {}).get("values") or {}:
                if self.facts.get(key) is None:
                    hint = self.facts.suggest(key)
                    self.add(spec, ("tests", i, "expect", "values", key), f"test '{case['name']}': "
                             f"unknown fact '{key}' in expect.values" + (f"; did you mean '{hint}'?" if hint else ""),
                             code="unknown-name")

    def test_coverage(self, spec: RuleSpec) -> None:
        """A shipped rule without a biting case is an error; a ``--rules-dir`` rule gets a warning."""
        missing = coverage_gaps(spec)
        reason = spec.raw.get("no_firing_case")
        if reason:
            self.add(spec, ("no_firing_case",), f"no firing case: {reason}", "warning", code="test-coverage")
        if missing:
            self.add(spec, ("tests",) if spec.tests else (), "no test case " + " and no case ".join(missing),
                     "error" if spec.builtin else "warning", code="test-coverage")

    def layout(self, spec: RuleSpec) -> None:
        """Style: a shipped rule lives in rules/<stage>/ and its id starts with its file's name."""
        p = Path(spec.file)
        if p.parent.name in ORDER and p.parent.name != INPUT_STAGE and p.parent.name != spec.stage:
            self.add(spec, ("stage",), f"runs in stage {spec.stage} but lives in {p.parent.name}/",
                     "warning", code="layout")
        if spec.id.split(".")[0] != p.stem:
            self.add(spec, (), f"id prefix '{spec.id.split('.')[0]}' differs from its file '{p.stem}'",
                     "warning", code="layout")


def checks_result(expect: dict[str, Any]) -> bool:
    """The case checks a concrete result: values, rejections, questions asked, explanation text or
    feasibility."""
    return bool(expect.get("values") or expect.get("rejected") or expect.get("asks") or expect.get("says")
                or "feasible" in expect)


def coverage_gaps(spec: RuleSpec) -> list[str]:
    """What ``spec``'s test cases lack: a case where it fires with a checked result (a bare
    ``fires: true`` / ``warns: true`` is not enough) and a case where it must not fire (``fires:
    false`` or ``warns: false``; not required of a rule without conditions, which fires whenever
    the facts it reads exist). Empty when both exist."""
    cases = [c.get("expect") or {} for c in spec.tests]
    missing = []
    if not spec.raw.get("no_firing_case") and not any(
            checks_result(e) and e.get("fires", True) is not False and e.get("warns", True) is not False
            for e in cases):
        missing.append("where it fires with a checked result (values, rejected, asks, says or feasible)")
    if spec.when and not any(e.get("fires") is False or e.get("warns") is False for e in cases):
        missing.append("where it must not fire (fires: false or warns: false)")
    return missing


def band_gaps(intervals: list[tuple[tuple[float, bool], tuple[float, bool]]]) -> list[str]:
    """Gaps in the union of intervals ((lo, lo_included), (hi, hi_included)), from the lowest
    bound up to +inf, as text (e.g. "(4, 6]", "above 10")."""
    def fmt(x: float) -> str:
        return format(x, "g")

    out: list[str] = []
    ordered = sorted(intervals, key=lambda t: (t[0][0], not t[0][1]))
    reach = ordered[0][1]                     # the highest (value, included) covered so far
    for lo, hi in ordered[1:]:
        touching = lo[0] < reach[0] or (lo[0] == reach[0] and (lo[1] or reach[1]))
        if not touching:
            left = "[" if not reach[1] else "("
            right = "]" if not lo[1] else ")"
            out.append(f"{left}{fmt(reach[0])}, {fmt(lo[0])}{right}")
        if hi[0] > reach[0] or (hi[0] == reach[0] and hi[1]):
            reach = hi
    if reach[0] != float("inf"):
        out.append(f"{'above' if reach[1] else 'from'} {fmt(reach[0])}")
    return out


def _short(src: str, n: int = 60) -> str:
    return src if len(src) <= n else src[: n - 1] + "…"


def _cited(spec: RuleSpec) -> set[str]:
    out: set[str] = set()
    for src in spec.sources:
        ids = src.get("guideline") or []
        out.update([ids] if isinstance(ids, str) else ids)
    return out


def lint(rulebase: RuleBase, loading: bool = False, files: set[str] | None = None) -> list[Finding]:
    """Every finding for ``rulebase`` (errors and warnings), sorted by file and line. ``loading``:
    the check made when a plan loads --rules-dir folders (their stray numbers only warn). ``files``
    (rule files as the rules show them): only these files' rules are checked one by one, the checks
    across rules run over all of them (a caller that keeps only these files' findings)."""
    return Linter(rulebase, loading).run(files)


def to_sarif(findings: list[Finding]) -> dict[str, Any]:
    """SARIF 2.1.0 for editors and CI code scanning."""
    rules = sorted({f.code for f in findings})
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "servewise rules lint", "informationUri":
                                "https://servewise.dev/docs/rule-authoring",
                                "rules": [{"id": c} for c in rules]}},
            "results": [{
                "ruleId": f.code,
                "level": "error" if f.severity == "error" else "warning",
                "message": {"text": f"{f.rule}: {f.message}"},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": f.file},
                    "region": {"startLine": max(1, f.line)}}}],
            } for f in findings],
        }],
    }
