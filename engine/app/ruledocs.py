"""Rules that document themselves: one rule's card (`rules show`), the rule → fact → rule
dependency graph (`rules graph`) and the generated reference pages in docs/rules/ (`rules docs`).
Everything here is derived from the loaded YAML; nothing is written by hand."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servewise.engine.lang.factdict import FactDictionary
from servewise.engine.lang.rulebase import RULES_DIR, STAGES, RuleBase, RuleSpec, guidelines


@dataclass
class RuleCard:
    id: str
    title: dict[str, str]
    stage: str
    file: str
    line: int
    for_each: str | None
    salience: int
    aliases: list[str]
    sources: list[dict[str, Any]]
    corrects: str | None
    corrects_i18n: dict[str, str] | None
    when: list[str]
    lets: dict[str, str]
    reads: list[str]
    writes: list[str]
    actions: list[str]
    tests: list[dict[str, Any]]
    because: dict[str, str]
    fires_in: list[str] = field(default_factory=list)
    constants: dict[str, dict[str, Any]] = field(default_factory=dict)  # name → {value, source, note}


def writes_of(spec: RuleSpec) -> list[str]:
    """Fact names (or item kinds) a rule writes."""
    out = list(spec.produces)
    for a in spec.actions:
        if a.kind == "propose":
            out.append(f"{a.spec['kind']}.*")
        elif a.kind == "select":
            out.append(f"{a.spec['as']}.*")
        elif a.kind == "derive":
            out.extend(k for k in a.spec if k not in out)
    return sorted(set(out))


def reads_of(spec: RuleSpec) -> list[str]:
    """Fact names a rule reads: conditions, formulas, bindings and its explanation."""
    local = set(spec.let_map)
    for a in spec.actions:
        local.update(a.locals)
    names = list(spec.names) + [n for n in spec.template_names if n not in spec.names]
    return [n for n in names if n.split(".")[0] not in local and n not in spec.produces]


def _sources(spec: RuleSpec) -> list[dict[str, Any]]:
    out = []
    known = guidelines()
    for src in spec.sources:
        ids = src.get("guideline") or []
        for gid in [ids] if isinstance(ids, str) else ids:
            g = known.get(gid, {})
            out.append({"guideline": gid, "doc": g.get("source", {}).get("doc"),
                        "section": g.get("source", {}).get("section"), "quote": g.get("quote")})
        if src.get("url"):
            out.append({"url": src["url"], "note": src.get("note")})
    return out


def _action_text(spec: RuleSpec) -> list[str]:
    out = []
    for a in spec.actions:
        if a.kind == "derive":
            out += [f"derive {k} = {v}" for k, v in a.spec.items()]
        elif a.kind == "choose":
            sets = {**(a.spec.get("set") or {}), **(a.spec.get("compute") or {})}
            out.append(f"choose {a.spec['component']}: " + ", ".join(f"{k} = {v}" for k, v in sets.items()))
        elif a.kind == "propose":
            out.append(f"propose {a.spec['kind']} over {', '.join(a.spec.get('over') or {}) or '-'}")
        elif a.kind == "select":
            keys = ", ".join(map(str, a.spec["minimize"]))
            out.append(f"select {a.spec['kind']} as {a.spec['as']} minimizing {keys}")
        else:
            args = ", ".join(f"{k}: {v}" for k, v in a.spec.items() if not k.startswith("_"))
            out.append(f"{a.kind} {args}".strip())
    return out


def card(spec: RuleSpec) -> RuleCard:
    return RuleCard(
        id=spec.id, title=spec.title, stage=spec.stage, file=spec.file, line=spec.line,
        for_each=spec.for_each, salience=spec.salience, aliases=list(spec.aliases),
        sources=_sources(spec), corrects=spec.corrects["en"] if spec.corrects else None,
        corrects_i18n=spec.corrects, when=[e.source for e in spec.when],
        lets={n: e.source for n, e in spec.lets if n not in spec.constants},
        constants=dict(spec.raw.get("constants") or {}), reads=reads_of(spec), writes=writes_of(spec),
        actions=_action_text(spec), because=dict(spec.raw.get("because") or {}),
        tests=[{"name": t["name"], "expect": t["expect"],
                "kind": "workload" if "workload" in t else "facts"} for t in spec.tests],
    )


# ---------------------------------------------------------------------------- graph
def edges(rb: RuleBase, stage: str | None = None, component: str | None = None) -> list[tuple[str, str, str]]:
    """(writer rule, fact, reader rule) for every fact one rule writes and another reads."""
    writers: dict[str, list[str]] = {}
    for spec in rb.rules:
        for w in writes_of(spec):
            writers.setdefault(w, []).append(spec.id)
    out: list[tuple[str, str, str]] = []
    for spec in rb.rules:
        for name in reads_of(spec):
            keys = [name, f"{name.split('.')[0]}.*"]
            for key in keys:
                for w in writers.get(key, []):
                    if w != spec.id:
                        out.append((w, name, spec.id))
    by_id = {r.id: r for r in rb.rules}
    if stage:
        out = [e for e in out if stage in (by_id[e[0]].stage, by_id[e[2]].stage)]
    if component:
        prefix = f"components.{component}."
        touching = {r.id for r in rb.rules if any(w.startswith(prefix) for w in writes_of(r))
                    or any(n.startswith(prefix) for n in reads_of(r))}
        out = [e for e in out if e[0] in touching or e[2] in touching]
    return sorted(set(out))


def _node(rule_id: str) -> str:
    return "r_" + re.sub(r"\W", "_", rule_id)


def graph_text(rb: RuleBase, fmt: str = "mermaid", stage: str | None = None,
               component: str | None = None) -> str:
    es = edges(rb, stage, component)
    by_id = {r.id: r for r in rb.rules}
    used = sorted({e[0] for e in es} | {e[2] for e in es}, key=lambda i: (STAGES.index(by_id[i].stage), i))
    grouped: dict[tuple[str, str], list[str]] = {}
    for w, fact, r in es:
        grouped.setdefault((w, r), []).append(fact)
    if fmt == "dot":
        lines = ["digraph rules {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
        for s in STAGES:
            members = [i for i in used if by_id[i].stage == s]
            if members:
                lines.append(f'  subgraph "cluster_{s}" {{ label="{s}";')
                lines += [f'    {_node(i)} [label="{i}"];' for i in members]
                lines.append("  }")
        for (w, r), facts in sorted(grouped.items()):
            label = ", ".join(sorted(facts)[:3]) + (" …" if len(facts) > 3 else "")
            lines.append(f'  {_node(w)} -> {_node(r)} [label="{label}", fontsize=8];')
        return "\n".join(lines + ["}"]) + "\n"
    lines = ["flowchart LR"]
    for s in STAGES:
        members = [i for i in used if by_id[i].stage == s]
        if members:
            lines.append(f"  subgraph {s}")
            lines += [f'    {_node(i)}["{i}"]' for i in members]
            lines.append("  end")
    for (w, r), facts in sorted(grouped.items()):
        label = ", ".join(sorted(facts)[:3]) + (" …" if len(facts) > 3 else "")
        lines.append(f'  {_node(w)} -->|"{label}"| {_node(r)}')
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- docs
def _rel(file: str) -> str:
    """A rule file's path relative to the repository (stable whatever the working directory)."""
    try:
        return str(Path(file).resolve().relative_to(RULES_DIR.parent))
    except ValueError:
        return file


def rule_markdown(c: RuleCard) -> list[str]:
    out = [f"### `{c.id}` — {c.title['en']}", "", f"{c.title['zh']}", ""]
    meta = f"Stage **{c.stage}**" + (f", once per `{c.for_each}`" if c.for_each else "")
    meta += f", salience {c.salience}" if c.salience else ""
    out += [meta + f" · `{_rel(c.file)}:{c.line}`" + (f" · aliases: {', '.join(c.aliases)}" if c.aliases else ""), ""]
    for s in c.sources:
        if "guideline" in s:
            out.append(f"- Source {s['guideline']} ({s['doc']}, {s['section']}): “{s['quote']}”")
        else:
            out.append(f"- Source <{s['url']}>" + (f" — {s['note']}" if s.get("note") else ""))
    if c.corrects:
        out.append(f"- Corrects: {c.corrects}")
    if c.when:
        out.append("- When: " + " **and** ".join(f"`{w}`" for w in c.when))
    for n, k in c.constants.items():
        note = f"; {k['note']}" if k.get("note") else ""
        out.append(f"- Constant `{n}` = {k['value']} ({k['source']}{note})")
    for n, e in c.lets.items():
        out.append(f"- Let `{n}` = `{e}`")
    out += [f"- Then: `{a}`" for a in c.actions]
    out.append("- Reads: " + (", ".join(f"`{r}`" for r in c.reads) or "—"))
    out.append("- Writes: " + (", ".join(f"`{w}`" for w in c.writes) or "—"))
    tests = "; ".join(t["name"] for t in c.tests)
    out.append(f"- Tests: {len(c.tests)} ({tests})" if c.tests else "- Tests: none")
    out += ["", f"> {c.because['en']}", ">", f"> {c.because['zh']}", ""]
    return out


def docs_pages(rb: RuleBase) -> dict[str, str]:
    """File name → Markdown text for docs/rules/: an index and one page per stage."""
    fd = FactDictionary(rb)
    pages: dict[str, str] = {}
    index = ["# Rule reference", "",
             "Generated by `servewise rules docs` from the YAML rules; do not edit by hand "
             "(`tests/test_rule_docs.py` fails when these pages drift from the rules).", "",
             "| stage | rules | concerns (files) |", "|---|---|---|"]
    for stage in STAGES:
        specs = [r for r in rb.rules if r.stage == stage]
        if not specs:
            continue
        files = sorted({Path(r.file).stem for r in specs})
        index.append(f"| [{stage}]({stage}.md) | {len(specs)} | {', '.join(files)} |")
        lines = [f"# Stage `{stage}`", "", f"{len(specs)} rules, in load order, grouped by file (concern).", ""]
        for file in sorted({r.file for r in specs}):
            lines += [f"## {Path(file).stem} (`{_rel(file)}`)", ""]
            for spec in [r for r in specs if r.file == file]:
                lines += rule_markdown(card(spec))
        pages[f"{stage}.md"] = "\n".join(lines).rstrip() + "\n"
    index += ["", f"Facts: {len(fd.entries)} names; list them with `servewise rules facts` "
              "(`--stage S`, `--format json`).", ""]
    pages["README.md"] = "\n".join(index)
    return pages
