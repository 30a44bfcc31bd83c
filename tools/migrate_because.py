#!/usr/bin/env python3
"""Hoist every ``{=expression}`` of a rule's ``because`` templates into a ``let:`` binding.

A development tool (not part of the shipped engine). Re-runnable: a file without ``{=…}`` is left
alone, and a rule that already has ``let:`` bindings reuses a binding whose expression is the same
and appends new ones after the existing block. The English and Chinese templates share one binding
per identical expression. Edits are line-based, so comments, key order and the quoting of every
other line stay as they are.

    python tools/migrate_because.py rules/            # rewrite in place, print a summary
    python tools/migrate_because.py --check rules/    # exit 1 if any file would change

Names are generated from the expression (function names, last segments of fact paths, short
string and number constants): ``weights_gib(model.id, 'bf16')`` becomes ``weights_gib_bf16``,
``catalog('cpus', 'EPYC 9254', 'cores')`` becomes ``epyc_9254_cores``; an expression that builds
prose gets ``_en`` or ``_zh``. Clashes get ``_2``, ``_3``…; rename freely afterwards.
"""

from __future__ import annotations

import argparse
import ast
import json
import keyword
import re
import sys
from functools import partial
from pathlib import Path
from typing import Any

import yaml

# the same field syntax the engine parses (engine/lang/rulebase.py TEMPLATE_FIELD)
FIELD = re.compile(r"\{(=[^{}]+?|[a-zA-Z_][\w.]*)(?::([<>^]?[+-]?,?\d*(?:\.\d+)?[a-z%]?))?\}")
SKIP_FUNCS = {"text", "round", "int", "float", "catalog", "contains", "ceil", "floor", "abs"}
RESERVED_ROOTS = {
    "model", "chosen", "candidate", "traffic", "sla", "components", "performance", "cost",
    "facility", "bom", "plan", "workload", "thumb", "constraints", "deployment", "edge", "mode",
    "task", "precision", "feasible", "site", "pools", "pool", "tenants", "inputs",
}
MAX_NAME = 40
CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _tokens(node: ast.AST, out: list[tuple[str, str]]) -> None:
    """(kind, token) pairs in source order: kind is name | num | prose."""
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, str):
            if re.fullmatch(r"[A-Za-z0-9 ._-]{1,24}", v) and _slug(v):
                out.append(("name", _slug(v)))
            elif v.strip():
                out.append(("prose", "zh" if CJK.search(v) else "en"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(("num", _slug(str(v).replace(".", "p"))))
        return
    if isinstance(node, (ast.Name, ast.Attribute)):
        parts = ast.unparse(node).split(".")
        if parts[-1] != "id":
            out.append(("name", _slug(parts[-1])))
        return
    if isinstance(node, ast.Call):
        fname = ast.unparse(node.func)
        args = node.args
        if fname == "catalog":
            args = args[1:]
        elif fname not in SKIP_FUNCS:
            out.append(("name", _slug(fname)))
        for a in args:
            _tokens(a, out)
        return
    for child in ast.iter_child_nodes(node):
        _tokens(child, out)


def base_name(src: str) -> str:
    """A readable identifier for an expression (not yet unique)."""
    try:
        tree = ast.parse(src.strip(), mode="eval")
    except SyntaxError:
        return "value"
    toks: list[tuple[str, str]] = []
    _tokens(tree.body, toks)
    names = [t for k, t in toks if k == "name"]
    keep_nums = len(dict.fromkeys(names)) <= 2
    words: list[str] = []
    for kind, tok in toks:
        if kind == "name" or (kind == "num" and keep_nums):
            if tok and tok not in words:
                words.append(tok)
    name = ""
    for w in words:
        if name and len(name) + 1 + len(w) > MAX_NAME:
            break
        name = f"{name}_{w}" if name else w
    name = name[:MAX_NAME].strip("_") or "value"
    prose = [t for k, t in toks if k == "prose"]
    if prose:
        name += "_" + ("zh" if "zh" in prose else "en")
    if not name[0].isalpha():
        name = "n" + name
    return name


def _unique(name: str, taken: set[str]) -> str:
    if keyword.iskeyword(name) or name in RESERVED_ROOTS or name in ("true", "false", "none"):
        name += "_v"
    out, i = name, 2
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    return out


def _map(node: yaml.Node) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    return {k.value: (k, v) for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}


def _scalars(rule: yaml.MappingNode) -> list[yaml.ScalarNode]:
    """The because scalars of a rule and of its propose ``unless`` entries, in file order."""
    out: list[yaml.ScalarNode] = []
    m = _map(rule)
    if "because" in m:
        out += [v for _, v in _map(m["because"][1]).values() if isinstance(v, yaml.ScalarNode)]
    if "then" in m and isinstance(m["then"][1], yaml.SequenceNode):
        for action in m["then"][1].value:
            prop = _map(action).get("propose")
            unless = _map(prop[1]).get("unless") if prop else None
            if unless and isinstance(unless[1], yaml.SequenceNode):
                for u in unless[1].value:
                    b = _map(u).get("because")
                    if b:
                        out += [v for _, v in _map(b[1]).values() if isinstance(v, yaml.ScalarNode)]
    return out


def _locals(rule: dict[str, Any]) -> set[str]:
    names = {rule.get("for_each") or ""}
    for a in rule.get("then") or []:
        for kind, spec in (a or {}).items():
            if kind == "propose":
                names |= set(spec.get("over") or {}) | {spec.get("kind", "")}
            if kind == "select":
                names |= {spec.get("kind", ""), spec.get("as", "")}
    return names - {""}


def _encode(raw: str, value: str, replaced: list[tuple[str, str]]) -> str:
    """The YAML scalar text for ``value``: the original text with the fields replaced when that
    round-trips exactly, otherwise a JSON (= YAML double-quoted) string."""
    new = raw
    for old, repl in replaced:
        new = new.replace(old, repl, 1)
    try:
        if yaml.load(new, Loader=Loader) == value:  # noqa: S506 - a safe loader
            return new
    except yaml.YAMLError:
        pass
    return json.dumps(value, ensure_ascii=False)


def _hoist(mt: re.Match, by_expr: dict[str, str], taken: set[str], new_lets: dict[str, str],
           replaced: list[tuple[str, str]]) -> str:
    """The replacement of one template field: ``{=expr:spec}`` becomes ``{name:spec}``."""
    fld, spec = mt.group(1), mt.group(2)
    if not fld.startswith("="):
        return mt.group(0)
    src = fld[1:].strip()
    if src not in by_expr:
        n = _unique(base_name(src), taken)
        taken.add(n)
        by_expr[src] = n
        new_lets[n] = src
    out = "{" + by_expr[src] + (f":{spec}" if spec else "") + "}"
    replaced.append((mt.group(0), out))
    return out


def migrate_text(text: str, name: str = "<text>") -> tuple[str, int]:
    """Return the rewritten text and the number of ``{=…}`` fields hoisted."""
    root = yaml.compose(text, Loader=Loader)
    if root is None or not isinstance(root, yaml.SequenceNode):
        return text, 0
    data = yaml.load(text, Loader=Loader)  # noqa: S506 - a safe loader
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []     # line, start col, end col, new text
    inserts: list[tuple[int, list[str]]] = []       # insert before line index
    count = 0
    for rule_node, rule in zip(root.value, data, strict=False):
        scalars = [s for s in _scalars(rule_node) if "{=" in s.value]
        if not scalars:
            continue
        m = _map(rule_node)
        lets: dict[str, str] = dict(rule.get("let") or {})
        by_expr = {str(src).strip(): n for n, src in lets.items()}
        taken = set(lets) | _locals(rule)
        new_lets: dict[str, str] = {}
        for s in scalars:
            if s.style != '"' or s.start_mark.line != s.end_mark.line:
                raise SystemExit(f"{name}:{s.start_mark.line + 1}: {rule.get('id')}: only single-line "
                                 "double-quoted because texts can be rewritten; convert it by hand")
            replaced: list[tuple[str, str]] = []
            value = FIELD.sub(partial(_hoist, by_expr=by_expr, taken=taken, new_lets=new_lets,
                                          replaced=replaced), s.value)
            count += len(replaced)
            line = s.start_mark.line
            raw = lines[line][s.start_mark.column:s.end_mark.column]
            edits.append((line, s.start_mark.column, s.end_mark.column, _encode(raw, value, replaced)))
        if not new_lets:
            continue
        if "let" in m:
            let_node = m["let"][1]
            if let_node.flow_style or not let_node.value:
                raise SystemExit(f"{name}:{let_node.start_mark.line + 1}: {rule.get('id')}: write "
                                 "`let:` as a block mapping so new bindings can be appended")
            indent = " " * let_node.value[0][0].start_mark.column
            end = let_node.value[-1][1].end_mark
            last = end.line + (1 if end.column > 0 else 0)
            at, block = last, []
        else:
            key = m["because"][0]
            indent = " " * (key.start_mark.column + 2)
            at, block = key.start_mark.line, [" " * key.start_mark.column + "let:\n"]
        block += [f"{indent}{n}: {json.dumps(src, ensure_ascii=False)}\n" for n, src in new_lets.items()]
        inserts.append((at, block))
    for line, a, b, new in sorted(edits, reverse=True):
        lines[line] = lines[line][:a] + new + lines[line][b:]
    for at, block in sorted(inserts, key=lambda x: x[0], reverse=True):
        lines[at:at] = block
    return "".join(lines), count


def _verify(old: str, new: str, name: str) -> None:
    """The rewritten file must render the same: every hoisted field now names a binding whose
    expression is the one it replaced."""
    before = yaml.load(old, Loader=Loader)  # noqa: S506
    after = yaml.load(new, Loader=Loader)  # noqa: S506
    for r0, r1 in zip(before, after, strict=True):
        for k in r0:
            if k not in ("because", "let", "then"):
                assert r0[k] == r1[k], f"{name}: {r0.get('id')}: {k} changed"
        for lang, text in (r0.get("because") or {}).items():
            expect = FIELD.sub(_canonical, text)
            new_lets = {k: v for k, v in (r1.get("let") or {}).items() if k not in (r0.get("let") or {})}
            got = FIELD.sub(partial(_inline, lets=new_lets), r1["because"][lang])
            assert expect == got, f"{name}: {r0.get('id')}: because.{lang} differs after migration"


def _canonical(mt: re.Match) -> str:
    if not mt.group(1).startswith("="):
        return mt.group(0)
    return "{=" + mt.group(1)[1:].strip() + (f":{mt.group(2)}" if mt.group(2) else "") + "}"


def _inline(mt: re.Match, lets: dict[str, Any]) -> str:
    if mt.group(1) not in lets:
        return mt.group(0)
    return "{=" + str(lets[mt.group(1)]).strip() + (f":{mt.group(2)}" if mt.group(2) else "") + "}"


def cli_files(argv: list[str] | None, doc: str) -> tuple[argparse.Namespace, list[Path]]:
    """The migration tools' command line: rule files or folders, and ``--check``."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--check", action="store_true", help="only report files that would change")
    args = ap.parse_args(argv)
    files: list[Path] = []
    for p in args.paths:
        files += sorted(p.rglob("*.yaml")) if p.is_dir() else [p]
    return args, files


def main(argv: list[str] | None = None) -> int:
    args, files = cli_files(argv, __doc__)
    changed = total = 0
    for f in files:
        text = f.read_text(encoding="utf-8")
        if "{=" not in text:
            continue
        new, n = migrate_text(text, str(f))
        if new == text:
            continue
        _verify(text, new, str(f))
        changed += 1
        total += n
        print(f"{f}: {n} field(s) hoisted into let:")
        if not args.check:
            f.write_text(new, encoding="utf-8")
    print(f"{changed} file(s) {'would change' if args.check else 'rewritten'}, {total} field(s)")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
