#!/usr/bin/env python3
"""Turn a rule's per-language ``let:`` bindings (``x_en`` / ``x_zh``) into one language-neutral
value per decision, the words chosen in each ``because`` (#41 "logic once").

A development tool (not part of the shipped engine). A binding ``x_en`` that only the English
``because`` shows (``x_zh`` likewise) is inlined into that text: its ``a if cond else b`` become
``{cond_name, select, true {a} other {b}}`` with ``cond_name: "cond"`` bound once for both
languages (the same condition in both languages is one binding), its string pieces become the
case's words, and what it computes (``text(…)``, ``cny(…)``, a call) becomes one binding shown by
``{name}``; a fact path is shown as ``{path}``. A suffixed binding without prose (``drive_en``
shown in both languages) is renamed. Edits are line-based (comments and key order stay); the
rendered text is the same as before for every value, except where the old expression failed
(``?``). What it cannot convert (a binding another binding reads, a condition that is not a
yes/no, a multi-line value) it lists and leaves alone.

    python tools/migrate_language_pairs.py rules/checks/thumb.yaml …     # rewrite in place
    python tools/migrate_language_pairs.py --check rules/                 # exit 1 if any would change

Generated names come from the expression (tools/migrate_because.py ``base_name``); rename them
freely afterwards.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from migrate_because import Loader, _encode, _locals, _map, _unique, base_name, cli_files  # noqa: E402

LANG = re.compile(r"(.+)_(en|zh)$")
STRING_FUNCS = {"text", "cny", "joined"}
BOOL_FUNCS = {"contains", "provided", "matches_any", "has_server", "legacy_gpu"}


class Skip(Exception):
    """This binding cannot be converted mechanically (the reason is the message)."""


_TYPES: dict[str, str] = {}


def fact_type(name: str) -> str | None:
    """The type the fact dictionary gives a fact (boolean, number, integer, string, …)."""
    if not _TYPES:
        from servewise.engine.lang.factdict import FactDictionary
        from servewise.engine.lang.rulebase import load_rules

        facts = FactDictionary(load_rules())
        _TYPES.update((n, e.type) for n, e in facts.entries.items())
    return _TYPES.get(name)


def _key(node: ast.AST) -> str | None:
    """A constant usable as a `select` case key (no space or brace), as the engine keys it."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        key = str(node.value)
        return key if key and not re.search(r"[\s{}]", key) and key not in ("other", "none") else None
    return None


def _switch(test: ast.AST) -> tuple[str, str, bool] | None:
    """(path, key, equal) for a test ``path == 'key'`` / ``path != 'key'`` on a fact path, or
    (path, 'none', equal) for ``number_path == None`` / ``!= None``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
        return None
    path, right, equal = _path(test.left), test.comparators[0], isinstance(test.ops[0], ast.Eq)
    if path is None:
        return None
    if isinstance(right, ast.Constant) and right.value is None:
        return (path, "none", equal) if fact_type(path) in ("number", "integer") else None
    key = _key(right)
    return (path, key, equal) if key is not None else None


def _is_bool(node: ast.AST) -> bool:
    """True when ``node`` evaluates to True, False or None (so `select` on true/other is exact:
    None selects `other`, as a false condition does)."""
    path = _path(node)
    if path is not None and fact_type(path) == "boolean":
        return True
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    if isinstance(node, ast.BoolOp):
        return all(_is_bool(v) for v in node.values)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, bool)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in BOOL_FUNCS
    return False


def _addends(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _addends(node.left) + _addends(node.right)
    return [node]


def _stringy(node: ast.AST) -> bool:
    """``node`` builds text (so ``+`` in it concatenates)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.IfExp):
        return _stringy(node.body) or _stringy(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in STRING_FUNCS
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return any(_stringy(a) for a in _addends(node))
    return False


def _path(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _path(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


class Rule:
    """The new bindings of one rule, shared by its languages."""

    def __init__(self, lets: dict[str, str], taken: set[str]):
        self.by_src = {ast.unparse(ast.parse(str(s).strip(), mode="eval")): n for n, s in lets.items()
                       if not LANG.fullmatch(n)}
        self.taken = taken
        self.new: dict[str, str] = {}

    def bind(self, node: ast.AST, hint: str | None = None) -> str:
        src = ast.unparse(node)
        if src in self.by_src:
            return self.by_src[src]
        name = hint or base_name(src)
        m = LANG.fullmatch(name)
        if m:
            name = m.group(1)
        name = _unique(name, self.taken)
        self.taken.add(name)
        self.new[name] = src
        self.by_src[src] = name
        return name

    def text(self, node: ast.AST, lang_names: set[str]) -> str:
        """``node`` (an expression building one language's words) as template text."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "{" in node.value or "}" in node.value:
                raise Skip(f"a brace in the text {node.value!r}")
            return node.value
        if isinstance(node, ast.IfExp) and _switch(node.test):
            return self.switch(node, lang_names)
        if isinstance(node, ast.IfExp):
            if not _is_bool(node.test):
                raise Skip(f"the condition '{ast.unparse(node.test)}' is not a yes/no value")
            cond = self.bind(node.test)
            return (f"{{{cond}, select, true {{{self.text(node.body, lang_names)}}} "
                    f"other {{{self.text(node.orelse, lang_names)}}}}}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _stringy(node):
            return "".join(self.text(a, lang_names) for a in _addends(node))
        path = _path(node)
        if path is not None:
            if path.split(".")[0] in lang_names:
                raise Skip(f"it reads the per-language binding '{path}'")
            return "{" + path + "}"
        for n in ast.walk(node):
            p = _path(n)
            if p and p.split(".")[0] in lang_names:
                raise Skip(f"it reads the per-language binding '{p}'")
        return "{" + self.bind(node) + "}"


    def switch(self, node: ast.IfExp, lang_names: set[str]) -> str:
        """``a if x == 'k1' else b if x == 'k2' else c`` as ``{x, select, k1 {a} k2 {b} other {c}}``
        (``!=`` swaps the branches; ``x == None`` on a number selects ``none``)."""
        path = _switch(node.test)[0]
        cases: list[tuple[str, str]] = []
        rest: ast.AST = node
        while isinstance(rest, ast.IfExp) and (sw := _switch(rest.test)) and sw[0] == path \
                and sw[1] not in dict(cases):
            _, key, equal = sw
            hit, miss = (rest.body, rest.orelse) if equal else (rest.orelse, rest.body)
            cases.append((key, self.text(hit, lang_names)))
            if not equal:  # `x != k`: what is not k is the whole other branch
                rest = None
                other = self.text(miss, lang_names)
                break
            rest = miss
        if rest is not None:
            other = self.text(rest, lang_names)
        body = " ".join(f"{k} {{{t}}}" for k, t in cases)
        return f"{{{path}, select, {body} other {{{other}}}}}"


def _has_prose(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str) and re.search(r"[^\w.]", n.value)
               for n in ast.walk(node))


def _fields(text: str) -> set[str]:
    return set(re.findall(r"\{([a-zA-Z_][\w.]*)", text))


def convert_rule(rule: dict[str, Any], node: yaml.MappingNode, lines: list[str], name: str,
                 edits: list, report: list[str]) -> int:
    """Plan the edits of one rule; the number of per-language bindings it removes."""
    lets: dict[str, str] = {k: str(v) for k, v in (rule.get("let") or {}).items()}
    langs = {n: LANG.fullmatch(n) for n in lets if LANG.fullmatch(n)}
    if not langs:
        return 0
    m = _map(node)
    because = rule.get("because") or {}
    bnodes = _map(m["because"][1]) if "because" in m else {}
    rid = rule.get("id")
    # where each binding is read: other bindings, the because texts, anything else in the rule
    readers: dict[str, set[str]] = {n: set() for n in langs}
    for other, src in lets.items():
        for n in langs:
            if other != n and re.search(rf"\b{n}\b", src):
                readers[n].add(f"let {other}")
    for lang, text in because.items():
        for n in langs:
            if n in _fields(text):
                readers[n].add(f"because.{lang}")
    rest = json.dumps({k: v for k, v in rule.items() if k not in ("let", "because", "tests")}, ensure_ascii=False)
    for n in langs:
        if re.search(rf"\b{n}\b", rest):
            readers[n].add("then")
    taken = set(lets) | _locals(rule)
    r = Rule(lets, taken)
    new_text = dict(because)
    removed: list[str] = []
    renamed: dict[str, str] = {}
    lang_names = set(langs)
    for n, mt in langs.items():
        lang = mt.group(2)
        tree = ast.parse(lets[n].strip(), mode="eval").body
        try:
            if readers[n] == {f"because.{lang}"} and re.search(rf"\{{{n}\}}", because[lang]):
                if len(re.findall(rf"\{{{n}[}}:]", because[lang])) != 1:
                    raise Skip("it is shown more than once or with a format spec")
                words = r.text(tree, lang_names - {n})
                new_text[lang] = new_text[lang].replace("{" + n + "}", words)
                removed.append(n)
            elif not _has_prose(tree) and readers[n] and all(x.startswith("because.") for x in readers[n]):
                new = _unique(mt.group(1), taken)
                taken.add(new)
                renamed[n] = new
                for lang2 in because:
                    new_text[lang2] = re.sub(rf"\{{{n}([}}:])", "{" + new + r"\1", new_text[lang2])
            else:
                raise Skip(f"read by {', '.join(sorted(readers[n])) or 'nothing'}")
        except Skip as exc:
            report.append(f"{name}: {rid}: left {n}: {exc}")
    if not removed and not renamed:
        return 0
    # the let block: drop removed lines, rename renamed ones, add new bindings after the last removed
    let_node = m["let"][1]
    if let_node.flow_style:
        report.append(f"{name}: {rid}: `let:` is a flow mapping; convert by hand")
        return 0
    last = None
    indent = " " * let_node.value[0][0].start_mark.column
    for k, v in let_node.value:
        if k.value in removed or k.value in renamed:
            if v.start_mark.line != v.end_mark.line:
                report.append(f"{name}: {rid}: binding {k.value} spans lines; convert by hand")
                return 0
        if k.value in removed:
            edits.append(("delete", k.start_mark.line, None))
            last = k.start_mark.line
        elif k.value in renamed:
            edits.append(("span", k.start_mark.line, (k.start_mark.column, k.end_mark.column, renamed[k.value])))
    if len(removed) == len(let_node.value) and not r.new:  # nothing left to bind: drop `let:`
        edits.append(("delete", m["let"][0].start_mark.line, None))
    if r.new:
        at = last if last is not None else let_node.value[-1][0].start_mark.line
        block = "".join(f"{indent}{n}: {json.dumps(src, ensure_ascii=False)}\n" for n, src in r.new.items())
        edits.append(("insert", at, block))
    for lang, (_, v) in bnodes.items():
        if new_text.get(lang) == because.get(lang):
            continue
        if v.style != '"' or v.start_mark.line != v.end_mark.line:
            raise SystemExit(f"{name}:{v.start_mark.line + 1}: {rid}: only single-line double-quoted "
                             "because texts can be rewritten")
        raw = lines[v.start_mark.line][v.start_mark.column:v.end_mark.column]
        edits.append(("span", v.start_mark.line,
                      (v.start_mark.column, v.end_mark.column, _encode(raw, new_text[lang], []))))
    return len(removed) + len(renamed)


def migrate_text(text: str, name: str = "<text>") -> tuple[str, int, list[str]]:
    root = yaml.compose(text, Loader=Loader)
    if root is None or not isinstance(root, yaml.SequenceNode):
        return text, 0, []
    data = yaml.load(text, Loader=Loader)  # noqa: S506 - a safe loader
    lines = text.splitlines(keepends=True)
    edits: list[tuple[str, int, Any]] = []
    report: list[str] = []
    count = 0
    for node, rule in zip(root.value, data, strict=False):
        count += convert_rule(rule, node, lines, name, edits, report)
    spans: dict[int, list] = {}
    for kind, ln, new in edits:
        if kind == "span":
            spans.setdefault(ln, []).append(new)
    for ln, cuts in spans.items():
        for a, b, new in sorted(cuts, reverse=True):
            lines[ln] = lines[ln][:a] + new + lines[ln][b:]
    delete = {ln for kind, ln, _ in edits if kind == "delete"}
    insert = {ln: new for kind, ln, new in edits if kind == "insert"}
    out = []
    for i, line in enumerate(lines):
        if i in insert:
            out.append(insert[i])
        if i in delete:
            continue
        out.append(line)
    return "".join(out), count, report


def main(argv: list[str] | None = None) -> int:
    args, files = cli_files(argv, __doc__)
    changed = total = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        new, n, report = migrate_text(text, str(f))
        for line in report:
            print(line)
        if new == text:
            continue
        changed += 1
        total += n
        print(f"{f}: {n} per-language binding(s) converted")
        if not args.check:
            f.write_text(new, encoding="utf-8")
    print(f"{changed} file(s) {'would change' if args.check else 'rewritten'}, {total} binding(s)")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
