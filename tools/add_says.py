#!/usr/bin/env python3
"""Turn a bare ``warns: true`` test case into one that checks the rule's computed result.

A development tool (not part of the shipped engine). For a rule whose ``facts:`` cases only check
``warns: true`` (or ``fires: true``), the tool runs the first such case, reads the English
explanation the rule produced and adds ``says: [...]`` with up to three of the values the rule
computed (its ``let:`` bindings first, then other fields), each with the word that follows it in
the template, e.g. ``"131.4 GiB"``. Review the numbers before committing: they become the expected
results. Re-runnable: cases that already check values, rejections or ``says`` are left alone.

    python tools/add_says.py rules/checks
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.functions import RunContext
from servewise.engine.lang.rulebase import TEMPLATE_FIELD, RuleBase, RuleSpec, load_rules
from servewise.engine.runtime.runner import Origin, Runner

Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_SAYS = 3


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6,
                          sort_keys=False).strip()


def rendered_fields(template: str, text: str) -> list[tuple[str, str, str]]:
    """(field name, rendered value, literal after it) by aligning the rendered text to the template."""
    parts = TEMPLATE_FIELD.split(template)
    # split() yields literal, field, spec, literal, field, spec, ...
    literals = parts[0::3]
    fields = parts[1::3]
    pattern = "".join(re.escape(lit) + ("(.*?)" if i < len(fields) else "") for i, lit in enumerate(literals))
    m = re.fullmatch(pattern, text, flags=re.S)
    if not m:
        return []
    return [(fields[i], m.group(i + 1), literals[i + 1]) for i in range(len(fields))]


def says_for(rb: RuleBase, spec: RuleSpec, case: dict[str, Any]) -> list[str]:
    alone = RuleBase([spec], rb.files, rb.knowledge_hash)
    mem = Runner(alone).run({k: (v, Origin("input", f"test:{k}")) for k, v in case["facts"].items()},
                            RunContext(load_catalog()))
    texts = [s["because"]["en"] for s in mem.steps if s["rule"] == spec.id]
    if not texts:
        return []
    found = rendered_fields(spec.raw["because"]["en"], texts[0])
    ranked = sorted(found, key=lambda f: (f[0].split(".")[0] not in spec.let_map, found.index(f)))
    out: list[str] = []
    for _name, value, after in ranked:
        if not re.fullmatch(r"-?\d[\d,.]*\s*[%×]?", value):
            continue  # only computed numbers, not names that contain digits
        word = re.match(r"\s?(?:[A-Za-z°/]{1,12}|[%×])(?=[\s,;.()（），；。'’]|$)", after)
        item = (value + (word.group(0) if word else "")).strip()
        if item == value and len(value) < 4:
            continue  # a bare short number would match almost any text
        if item and item not in out and sum(item in o or o in item for o in out) == 0:
            out.append(item)
        if len(out) == MAX_SAYS:
            break
    return [s for s in out if s in texts[0]]


def _bare(expect: dict[str, Any]) -> bool:
    return not (expect.get("values") or expect.get("rejected") or expect.get("asks") or expect.get("says")
                or "feasible" in expect) and expect.get("fires", True) is not False \
        and expect.get("warns", True) is not False


def add(path: Path, rb: RuleBase) -> int:
    text = path.read_text(encoding="utf-8")
    root = yaml.compose(text, Loader=Loader)
    if not isinstance(root, yaml.SequenceNode):
        return 0  # not a rule file (a list of rules)
    lines = text.splitlines(keepends=True)
    specs = {s.id: s for s in rb.rules}
    edits = []
    for node in root.value:
        m = {k.value: v for k, v in node.value}
        spec = specs.get(m["id"].value)
        if spec is None or "tests" not in m or not isinstance(m["tests"], yaml.SequenceNode):
            continue
        if any(not _bare(t.get("expect") or {}) and (t.get("expect") or {}).get("fires", True) is not False
               and (t.get("expect") or {}).get("warns", True) is not False for t in spec.tests):
            continue
        for case, cnode in zip(spec.tests, m["tests"].value, strict=False):
            expect = case.get("expect") or {}
            if "facts" not in case or not _bare(expect):
                continue
            enode = {k.value: v for k, v in cnode.value}.get("expect")
            if enode is None or not enode.flow_style or enode.start_mark.line != enode.end_mark.line:
                continue
            try:
                says = says_for(rb, spec, case)
            except Exception:  # noqa: BLE001 - skip cases that do not run alone
                continue
            if says:
                edits.append((enode.start_mark.line, enode.start_mark.column, enode.end_mark.column,
                              _flow({**expect, "says": says})))
            break
    for line, a, b, new in sorted(edits, reverse=True):
        lines[line] = lines[line][:a] + new + lines[line][b:]
    if edits:
        new_text = "".join(lines)
        yaml.load(new_text, Loader=Loader)  # noqa: S506 - must still parse
        path.write_text(new_text, encoding="utf-8")
    return len(edits)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    args = ap.parse_args(argv)
    rb = load_rules()
    total = 0
    for p in args.paths:
        for f in sorted(p.rglob("*.yaml")) if p.is_dir() else ([p] if p.suffix == ".yaml" else []):
            n = add(f, rb)
            if n:
                print(f"{f}: {n} case(s) now check the explanation's numbers")
            total += n
    print(f"{total} case(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
