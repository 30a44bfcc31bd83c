#!/usr/bin/env python3
"""Give every rule a case where it must NOT fire, derived mechanically from a case where it fires.

A development tool (not part of the shipped engine). For each rule without a ``fires: false`` /
``warns: false`` case that has a ``facts:`` case which fires, the tool takes the last condition of
the form ``fact OP constant`` or ``fact OP fact`` (``==  !=  <  <=  >  >=  in  not in``), a bare
boolean fact, ``not fact`` or an ``or`` of these (guards such as ``x != None``, ``mode != 'edge'``,
``x > 0`` are tried last), changes that one fact so the condition is false (a boundary value, or another
value the fact takes elsewhere in the rule base), runs the rule alone over the changed facts and
keeps the case only if the rule then does not fire (and still fires on the original facts). The
case is appended after the rule's last test with line-based edits (comments and layout stay).
Re-runnable: rules that already have a must-not-fire case are skipped.

    python tools/add_negative_cases.py rules/checks rules/inputs     # edit in place
    python tools/add_negative_cases.py --dry-run rules/               # only report
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.lang.rulebase import RuleBase, RuleSpec, load_rules
from servewise.engine.runtime.runner import Origin, Runner

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MISSING = object()


def _constant(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError):
        return _MISSING


def _path(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def domain(rb: RuleBase) -> dict[str, list[Any]]:
    """Text values each fact takes somewhere in the rule base (conditions, test facts, input choices),
    so a changed fact gets a real value (``13-34B``), not an invented one."""
    from servewise.engine.lang.factdict import _inputs

    out: dict[str, list[Any]] = {}

    def add(name: str, value: Any) -> None:
        if isinstance(value, str) and value not in out.setdefault(name, []):
            out[name].append(value)

    for item in _inputs():
        for c in item.get("choices") or []:
            add(item["key"], c)
    for spec in rb.rules:
        for cond in spec.when:
            node = cond.tree.body
            if isinstance(node, ast.Compare) and _path(node.left):
                for comp in node.comparators:
                    value = _constant(comp)
                    for v in value if isinstance(value, (list, tuple)) else [value]:
                        add(_path(node.left), v)
        for case in spec.tests:
            for k, v in (case.get("facts") or {}).items():
                add(k, v)
    return out


DOMAIN: dict[str, list[Any]] = {}


def _other(name: str, avoid: list[Any]) -> Any:
    return next((v for v in sorted(DOMAIN.get(name, [])) if v not in avoid), f"not-{avoid[0]}")


def _falsify(node: ast.AST, facts: dict[str, Any]) -> dict[str, Any] | None:
    """Fact changes that make the condition ``node`` false, or None."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        out: dict[str, Any] = {}
        for operand in node.values:  # every alternative must become false
            change = _falsify(operand, facts)
            if change is None:
                return None
            out.update(change)
        return out
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and _path(node.operand):
        return {_path(node.operand): True}
    if _path(node) and _path(node) not in ("True", "False", "None"):
        return {_path(node): False}
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
        return None
    name, const = _path(node.left), _constant(node.comparators[0])
    other = _path(node.comparators[0])
    if const is _MISSING and other in facts:  # fact OP fact: compare against the other fact's value
        const = facts[other]
    if name is None or const is _MISSING or name in ("True", "False", "None"):
        return None
    value = _falsifying_value(name, node.ops[0], const)
    return None if value is _MISSING else {name: value}


def _falsifying_value(name: str, op: ast.cmpop, const: Any) -> Any:
    number = isinstance(const, (int, float)) and not isinstance(const, bool)
    if isinstance(op, (ast.NotEq, ast.IsNot)):
        return const
    if isinstance(op, ast.Eq):
        if isinstance(const, bool):
            return not const
        if number:
            return const + 1
        if isinstance(const, str):
            return _other(name, [const])
        return _MISSING
    if number and isinstance(op, (ast.Gt, ast.Lt)):
        return const
    if number and isinstance(op, ast.GtE):
        return const - 1 if isinstance(const, int) else const * 0.5
    if number and isinstance(op, ast.LtE):
        return const + 1 if isinstance(const, int) else const * 2 + 1
    if isinstance(op, ast.In) and isinstance(const, (list, tuple)) and const:
        return _other(name, list(const))
    if isinstance(op, ast.NotIn) and isinstance(const, (list, tuple)) and const:
        return const[0]
    return _MISSING


def falsifier(source: str, facts: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """Fact changes that make a condition false: ``fact OP constant`` or ``fact OP fact`` (``==  !=
    <  <=  >  >=  in  not in``), a bare boolean fact, ``not fact``, or an ``or`` of these."""
    return _falsify(ast.parse(source, mode="eval").body, facts or {})


def is_guard(source: str) -> bool:
    """Conditions that only say "there is something to work on" (tried last): ``x != None``,
    ``mode != 'edge'``, ``x > 0``, ``x >= 1``."""
    s = source.replace(" ", "")
    return s.endswith("!=None") or s == "mode!='edge'" or s.endswith(">0") or s.endswith(">=1")


def _fires(rb: RuleBase, spec: RuleSpec, facts: dict[str, Any]) -> bool:
    alone = RuleBase([spec], rb.files, rb.knowledge_hash)
    mem = Runner(alone).run({k: (v, Origin("input", f"test:{k}")) for k, v in facts.items()},
                            RunContext(load_catalog()))
    return mem.fired.get(spec.id, 0) > 0


def _has_negative(spec: RuleSpec) -> bool:
    return any((t.get("expect") or {}).get("fires") is False or (t.get("expect") or {}).get("warns") is False
               for t in spec.tests)


def negative_case(rb: RuleBase, spec: RuleSpec) -> dict[str, Any] | None:
    if _has_negative(spec):
        return None
    for case in spec.tests:
        facts = case.get("facts")
        if facts is None or (case.get("expect") or {}).get("fires") is False:
            continue
        try:
            if not _fires(rb, spec, facts):
                continue
        except Exception:  # noqa: BLE001 - a case that errors is not a base for a new one
            continue
        # prefer the rule's own test (usually last) over guards such as `chosen.id != None`
        guards = [c for c in spec.when if is_guard(c.source)]
        for cond in [c for c in reversed(spec.when) if c not in guards] + guards:
            change = falsifier(cond.source, facts)
            if change is None:
                continue
            new = {**facts, **change}
            try:
                if _fires(rb, spec, new):
                    continue
            except Exception:  # noqa: BLE001
                continue
            shown = ", ".join(f"{k}: {_flow(v).removesuffix('...').strip()}" for k, v in change.items())
            return {"name": f"does not fire with {shown} (needs {cond.source})", "facts": new,
                    "expect": {"fires": False}}
    return None


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6,
                          sort_keys=False).strip()


def add_cases(path: Path, rb: RuleBase) -> int:
    text = path.read_text(encoding="utf-8")
    root = yaml.compose(text, Loader=Loader)
    if not isinstance(root, yaml.SequenceNode):
        return 0  # not a rule file (a list of rules)
    lines = text.splitlines(keepends=True)
    specs = {s.id: s for s in rb.rules}
    inserts: list[tuple[int, list[str]]] = []
    for node in root.value:
        m = {k.value: (k, v) for k, v in node.value}
        rid = m["id"][1].value
        spec = specs.get(rid)
        if spec is None or "tests" not in m or not isinstance(m["tests"][1], yaml.SequenceNode):
            continue
        case = negative_case(rb, spec)
        if case is None:
            continue
        seq = m["tests"][1]
        if seq.flow_style or not seq.value:
            continue
        last = seq.value[-1]
        indent = " " * (last.start_mark.column - 2)
        end = last.end_mark
        at = end.line + (1 if end.column > 0 else 0)
        while at > 0 and not lines[at - 1].strip():
            at -= 1
        block = [f"{indent}- name: {_flow(case['name'])}\n",
                 f"{indent}  facts: {_flow(case['facts'])}\n",
                 f"{indent}  expect: {_flow(case['expect'])}\n"]
        inserts.append((at, block))
    for at, block in sorted(inserts, key=lambda x: x[0], reverse=True):
        lines[at:at] = block
    new = "".join(lines)
    if inserts:
        yaml.load(new, Loader=Loader)  # noqa: S506 - must still parse
        path.write_text(new, encoding="utf-8")
    return len(inserts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    rb = load_rules()
    DOMAIN.update(domain(rb))
    files: list[Path] = []
    for p in args.paths:
        files += sorted(p.rglob("*.yaml")) if p.is_dir() else ([p] if p.suffix == ".yaml" else [])
    total = 0
    for f in files:
        if args.dry_run:
            rel = str(f)
            n = sum(1 for s in rb.rules if Path(s.file).resolve() == f.resolve() and negative_case(rb, s))
            print(f"{rel}: {n} case(s) would be added")
        else:
            n = add_cases(f, rb)
            if n:
                print(f"{f}: {n} must-not-fire case(s) added")
        total += n
    print(f"{total} case(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
