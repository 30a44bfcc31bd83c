"""`servewise rules lint|test|facts|show|graph|docs`: tools for rule authors (attached to the
`rules` group of cli/main.py)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import click

from servewise.engine.common.messages import catalog, message
from servewise.engine.lang.rulebase import RULES_DIR, RuleBase, RuleLoadError, _display, load_rules, rule_files
from servewise.engine.lang.rulelint import Finding, lint, to_sarif

from .i18n import pick, unit_text, value_text
from .main import rules as rules_group
from .wrap import text_wrapped

COMMANDS: list[click.Command] = []   # all of these join the `rules` group, not the top level


def _split(paths: tuple[str, ...]) -> tuple[list[Path], set[str] | None]:
    """Extra folders to load (paths outside the built-in rules) and the rule files to report on."""
    if not paths:
        return [], None
    for p in paths:
        if not Path(p).exists():
            click.echo(f"{p}: rules folder or file not found", err=True)
            sys.exit(2)
    extra = []
    for p in paths:
        try:
            Path(p).resolve().relative_to(RULES_DIR)
        except ValueError:
            extra.append(Path(p))
    files = {_display(f) for f in rule_files([Path(p) for p in paths])}
    return extra, files


def finding_text(f: Finding, lang: str) -> str:
    """A lint finding as ``file:line: rule-id: message`` (English: exactly ``str(f)``, which tools
    parse); in Chinese the message through the value glossary (facts/messages/values.yaml value.lint.*)."""
    if lang == "en":
        return str(f)
    tag = "" if f.severity == "error" else message("lint.warning_tag", lang)
    return f"{f.file}:{f.line}: {f.rule}: {tag}{value_text(f.message, lang)}"


def _load(settings, extra: list[Path], semantic: bool = False) -> RuleBase:
    return load_rules(list(settings.rules_dirs) + extra, semantic=semantic)


@rules_group.command("lint")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif"]), default="text")
@click.option("--style", is_flag=True, help="Also report layout warnings (folder vs stage, id prefix vs file).")
@click.pass_obj
@text_wrapped(terminal_only=True)
def rules_lint(settings, paths: tuple[str, ...], fmt: str, style: bool) -> None:
    """Check rule files: schema, expressions, names against the fact dictionary, stages, protected
    outputs, shadowed ids, component values. Problems print as file:line: rule-id: message (exit 2).
    PATHS default to the built-in rules plus --rules-dir folders."""
    extra, files = _split(paths)
    try:
        rb = _load(settings, extra)
        findings = lint(rb, files=files)
    except RuleLoadError as exc:
        rb, findings = None, [Finding(p.file, p.line, p.rule, p.message, code="load") for p in exc.problems]
    if files is not None:
        findings = [f for f in findings if f.file in files]
    if not style:
        findings = [f for f in findings if f.code != "layout"]
    errors = [f for f in findings if f.severity == "error"]
    if fmt == "json":
        click.echo(json.dumps([asdict(f) for f in findings], ensure_ascii=False, indent=2))
    elif fmt == "sarif":
        click.echo(json.dumps(to_sarif(findings), ensure_ascii=False, indent=2))
    else:
        for f in findings:
            click.echo(finding_text(f, settings.lang))
        if errors:
            click.echo(message("lint.problems", settings.lang, n=len(errors)), err=True)
        elif rb is not None:
            warn = message("lint.warnings", settings.lang, n=len(findings)) if findings else ""
            click.echo(message("lint.ok", settings.lang, rules=len(rb.rules), files=len(rb.files), warn=warn,
                               hash=rb.knowledge_hash))
    if errors:
        sys.exit(2)


@rules_group.command("test")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("-k", "only", help="Only rules whose id contains this text (nothing matching: exit 2).")
@click.option("-v", "--verbose", is_flag=True, help="List passing cases too.")
@click.option("--coverage", is_flag=True, help="Also list rules without a case where they fire with a "
              "checked result, or without a case where they must not fire.")
@click.pass_obj
@text_wrapped(terminal_only=True)
def rules_test(settings, paths: tuple[str, ...], only: str | None, verbose: bool, coverage: bool) -> None:
    """Run the test cases written next to the rules (of PATHS, default all). A failing case shows
    why the rule did not fire: each condition with its values, the first false one marked."""
    from servewise.engine.app.ruletest import case_coverage, run_all

    extra, files = _split(paths)
    try:
        rb = _load(settings, extra, semantic=bool(extra))
    except RuleLoadError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        sys.exit(2)
    from .progress import slow

    with slow("progress.rules_test", settings.lang):
        results = run_all(rb, only, files)
    lang = settings.lang
    if not results:
        click.echo(message("rules.test.none", lang, only=f" -k {only}" if only else "",
                           paths=(" " + message("rules.test.in", lang, paths=", ".join(paths))) if paths else ""),
                   err=True)
        sys.exit(2)
    failed = [r for r in results if not r.ok]
    for r in results:
        if not r.ok:
            click.echo(message("rules.test.fail", lang, where=f"{r.file}:{r.line}", rule=r.rule, name=r.name,
                               why=value_text(r.message, lang)))
        elif verbose:
            click.echo(message("rules.test.ok", lang, rule=r.rule, name=r.name))
    rules_with_cases = len({r.rule for r in results})
    ids = {r.rule for r in results}
    tested = [s for s in rb.rules if s.id in ids]
    if coverage:
        gaps = case_coverage(tested)
        for spec, missing in gaps:
            text = value_text("no case " + " and no case ".join(missing), lang)
            click.echo(f"{spec.file}:{spec.line}: {spec.id}: {text}")
        click.echo(message("rules.test.coverage", lang, n=len(ids) - len(gaps), total=len(ids)))
    else:  # your own rules (PATHS, --rules-dir) are told what their tests lack, as a warning
        for spec, missing in case_coverage([s for s in tested if not s.builtin]):
            text = value_text("no case " + " and no case ".join(missing), lang)
            click.echo(f"{spec.file}:{spec.line}: {spec.id}: {message('lint.warning_tag', lang)}{text}")
    click.echo(message("rules.test.summary", lang, passed=len(results) - len(failed), failed=len(failed),
                       cases=len(results), rules=rules_with_cases))
    if failed:
        sys.exit(1)


FACT_STAGES = ("input", "inputs", "derivations", "candidates", "filters", "selection", "bom", "facilities", "cost",
               "checks")  # (a list of choices too wide for --help's column: named in the option's help)


@rules_group.command("facts")
@click.option("--stage", type=click.Choice(FACT_STAGES), metavar="STAGE",
              help=f"Only the facts a rule in this stage may read ({', '.join(FACT_STAGES)}).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.pass_obj
@text_wrapped
def rules_facts(settings, stage: str | None, fmt: str) -> None:
    """The fact dictionary: every name a rule may read, its type and unit, the stage that first
    provides it and who writes it (workload, catalog or rule ids)."""
    from servewise.engine.lang.factdict import FactDictionary

    fd = FactDictionary(_loaded(settings))
    entries = fd.listing(stage)
    if fmt == "json":
        click.echo(json.dumps([e.to_dict() for e in entries], ensure_ascii=False, indent=2))
        return
    lang = settings.lang

    def said(kind: str, word: str) -> str:  # a type in the reader's language
        return message(f"rules.facts.{kind}.{word}", lang) if f"rules.facts.{kind}.{word}" in catalog() else word

    for e in entries:
        unit = f" [{unit_text(e.unit, lang)}]" if e.unit else ""
        names = [message(f"rules.facts.writer.{w}", lang) if "." not in w else w for w in e.writers[:4]]
        writers = ", ".join(names) + (f" +{len(e.writers) - 4}" if len(e.writers) > 4 else "")
        click.echo(message("rules.facts.row", lang, name=e.name, type=said("type", e.type), unit=unit, stage=e.stage))
        click.echo(message("rules.facts.by", lang, writers=writers))
    click.echo(message("rules.facts.count", lang, n=len(entries)))


def _loaded(settings) -> RuleBase:
    try:
        return load_rules(settings.rules_dirs)
    except RuleLoadError as exc:
        for problem in exc.problems:
            click.echo(str(problem), err=True)
        sys.exit(2)


@rules_group.command("show")
@click.argument("rule_id")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--examples", is_flag=True, help="Also plan every example and list those the rule fires in (slow).")
@click.pass_obj
@text_wrapped
def rules_show(settings, rule_id: str, fmt: str, examples: bool) -> None:
    """One rule: title, stage, sources with quotes, conditions, bindings, reads, writes, tests."""
    from servewise.engine.app.ruledocs import card

    rb = _loaded(settings)
    try:
        spec = rb.by_id(rule_id)
    except KeyError:
        import difflib

        close = difflib.get_close_matches(rule_id, [r.id for r in rb.rules], n=3, cutoff=0.5)
        click.echo(f"unknown rule id '{rule_id}'" + (f"; did you mean {', '.join(close)}?" if close else ""),
                   err=True)
        sys.exit(2)
    c = card(spec)
    if examples:
        c.fires_in = _fires_in(rb, spec.id)
    if fmt == "json":
        click.echo(json.dumps(asdict(c), ensure_ascii=False, indent=2))
        return
    lang = settings.lang

    def m(code: str, **args: object) -> str:
        return message(f"rules.show.{code}", lang, **args)

    click.echo(f"{c.id}: {c.title.get(lang, c.title['en'])}")
    click.echo(m("stage", stage=c.stage, each=m("each", kind=c.for_each) if c.for_each else "",
                 salience=c.salience, file=c.file, line=c.line))
    if c.aliases:
        click.echo(m("aliases", ids=", ".join(c.aliases)))
    for s in c.sources:
        if "guideline" in s:
            click.echo(m("source", ids=s["guideline"], doc=s["doc"], section=s["section"], quote=s["quote"]))
        else:
            note = f" ({value_text(s['note'], lang, True)})" if s.get("note") and lang != "en" else ""
            click.echo(m("source_url", url=s["url"]) + note)
    if c.corrects:
        click.echo(m("corrects", text=pick(c.corrects_i18n, lang)))
    for w in c.when:
        click.echo(m("when", expr=w))
    for n, k in c.constants.items():
        click.echo(m("const", name=n, value=k["value"], source=k["source"]))
    for n, e in c.lets.items():
        click.echo(m("let", name=n, expr=e))
    for a in c.actions:
        click.echo(m("then", action=value_text(a, lang, True) if lang != "en" else a))
    click.echo(m("reads", names=", ".join(c.reads) or "-"))
    click.echo(m("writes", names=", ".join(c.writes) or "-"))
    click.echo(m("because", text=c.because.get(lang, c.because.get("en", ""))))
    for t in c.tests:
        click.echo(m("test", kind=m(f"kind.{t['kind']}"), name=t["name"],
                     expect=json.dumps(t["expect"], ensure_ascii=False)))
    if examples:
        click.echo(f"  fires in: {', '.join(c.fires_in) or 'no example'}")


def _fires_in(rb: RuleBase, rule_id: str) -> list[str]:
    from servewise.engine.app.plan import plan_file

    from .progress import Progress

    root = Path(__file__).resolve().parent.parent / "examples"
    out = []
    paths = sorted(root.glob("*.yaml"))
    with Progress("planning examples", len(paths)) as progress:
        for path in paths:
            progress.step(path.stem)
            result = plan_file(str(path), rb)
            if result.memory.fired.get(rule_id):
                out.append(path.stem)
    return out


@rules_group.command("graph")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid")
@click.option("--stage", help="Only edges touching rules of this stage.")
@click.option("--component", help="Only edges touching rules that read or write components.<C>.*")
@click.pass_obj
def rules_graph(settings, fmt: str, stage: str | None, component: str | None) -> None:
    """The rule → fact → rule dependency graph (Mermaid or Graphviz dot)."""
    from servewise.engine.app.ruledocs import graph_text

    click.echo(graph_text(_loaded(settings), fmt, stage, component), nl=False)


@rules_group.command("docs")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False), default="docs/rules",
              show_default=True, help="Folder to write the pages to.")
@click.option("--check", is_flag=True, help="Exit 1 if the pages differ from the rules (for CI).")
@click.pass_obj
def rules_docs(settings, out_dir: str, check: bool) -> None:
    """Generate the rule reference (one Markdown page per stage, grouped by concern)."""
    from servewise.engine.app.ruledocs import docs_pages

    pages = docs_pages(_loaded(settings))
    target = Path(out_dir)
    stale = [name for name, text in pages.items()
             if not (target / name).exists() or (target / name).read_text(encoding="utf-8") != text]
    if check:
        for name in stale:
            click.echo(f"{target / name}: out of date (run `servewise rules docs`)")
        sys.exit(1 if stale else 0)
    target.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (target / name).write_text(text, encoding="utf-8")
    click.echo(f"{len(pages)} page(s) in {target} ({len(stale)} changed)")
