"""`servewise kb check` (conflicting sources, recomputed claims, guideline coverage) and `kb coverage`."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict
from datetime import date

import click

from servewise.engine.app.kbcheck import check
from servewise.engine.app.pricecheck import month_index
from servewise.engine.common.messages import catalog, message

from .i18n import display_width, pick, value_text
from .wrap import text_wrapped


def _num(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


@click.group()
def kb() -> None:
    """Check the knowledge base."""


@kb.command("check")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--min-coverage", type=float, default=95.0, show_default=True,
              help="Fail (exit 1) below this percentage of guideline ids cited by rules.")
@click.option("--as-of", "as_of", metavar="YYYY-MM", default=None,
              help="Date the price review is made at (default: this month).")
@click.pass_obj
@text_wrapped
def kb_check(settings, fmt: str, min_coverage: float, as_of: str | None) -> None:
    """Conflicting catalog values, the arithmetic of numeric claims, guideline coverage, and the
    dated price review (a price no lookup reaches fails; missing and stale ones are listed)."""
    as_of = as_of or date.today().strftime("%Y-%m")
    if month_index(as_of) is None or not re.fullmatch(r"\d{4}-\d{2}", as_of):
        raise click.BadParameter(f"expected YYYY-MM, not {as_of!r}", param_hint="--as-of")
    from .progress import slow

    with slow("progress.kb_check", settings.lang):
        report = check(settings.rulebase(), as_of)
    cov = report.coverage
    if fmt == "json":
        data = asdict(report)
        data["coverage"] |= {"percent": round(cov.percent, 1), "undocumented": cov.undocumented}
        data["summary"] |= {"detected_count": report.summary.detected_count}
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True, default=str))
    else:
        lang = settings.lang
        click.echo(message("kb.conflicts", lang, n=len(report.conflicts)))
        for c in report.conflicts:
            vals = message("kb.vs", lang).join(_num(v.get("value")) for v in c.values)
            click.echo(message("kb.conflict", lang, where=f"{c.table}/{c.entry}.{c.field}", values=vals,
                               chosen=_num(c.chosen), reason=c.reason))
        bad = [r for r in report.claims if not r.holds]
        click.echo("\n" + message("kb.claims", lang, n=len(report.claims), bad=len(bad)))
        for r in report.claims:
            nums = ", ".join(f"{k}={_num(v)}" for k, v in r.values.items())
            refs = f" §2 #{', #'.join(map(str, r.summary_refs))}" if r.summary_refs else ""
            click.echo(f"  [{r.verdict}] {r.id} ({', '.join(r.guidelines)}){refs}: {pick(r.says, lang)}")
            click.echo(f"      {nums}")
            click.echo(f"      → {pick(r.conclusion, lang)}")
        sm = report.summary
        click.echo("\n" + message("kb.summary", lang, detected=sm.detected_count, items=sm.items,
                                   undetectable=len(sm.not_detectable), missing=len(sm.missing)))
        for n, why in sm.not_detectable.items():
            click.echo(message("kb.not_detectable", lang, n=n, why=why))
        for n in sm.missing:
            click.echo(message("kb.not_detected", lang, n=n))
        click.echo("\n" + message("kb.seed", lang, n=len(report.seed_prices)))
        for sp in report.seed_prices:
            click.echo(message("kb.seed_row", lang, check=sp["check"], sku=sp["sku"], region=sp["region"]))
        _price_text(report.prices, as_of, lang)
        click.echo("\n" + message("kb.coverage", lang, cited=len(cov.cited), total=cov.total,
                                   pct=f"{cov.percent:.1f}"))
        click.echo(message("kb.completeness", lang, items=", ".join(
            f"{_verdict(s, lang)} {n}" for s, n in cov.verdicts.items())))
        for gid in cov.uncited:
            note = cov.documented.get(gid)
            click.echo(f"  {gid}: " + (message("kb.not_rule", lang, note=note) if note
                                       else message("kb.not_cited", lang)))
        for err in report.errors:
            click.echo(f"error: {err}", err=True)
    if report.errors:
        sys.exit(2)
    if cov.percent < min_coverage or cov.undocumented or _price_failures(report.prices):
        sys.exit(1)


def _price_failures(findings) -> list:
    """Findings that fail the check: a price entry no lookup reaches (a catalog bug); unpriced and
    stale prices are listed for review."""
    return [f for f in findings if f.kind == "unreachable"]


def _verdict(name: str, lang: str) -> str:
    code = f"kb.verdict.{name}"
    return message(code, lang) if code in catalog() else name


def _price_text(findings, as_of: str, lang: str = "en") -> None:
    heads = {k: message(f"kb.price.{k}", lang) for k in ("unreachable", "unpriced", "stale")}
    click.echo("\n" + message("kb.prices", lang, date=as_of, items=", ".join(
        f"{sum(f.kind == k for f in findings)} {message(f'kb.price.kind.{k}', lang)}" for k in heads)))
    for kind, head in heads.items():
        rows = [f for f in findings if f.kind == kind]
        if rows:
            click.echo(f"  {head} ({len(rows)}):")
        for f in rows:
            where = f" [{f.region}]" if f.region else ""
            when = f" ({f.date})" if f.date else ""
            click.echo(f"    {f.table}/{f.entry}{where}{when}: {f.detail}")


STATUS_TEXT = {
    "encoded": {"en": "condition and conclusion implemented by rules", "zh": "条件与结论均由规则实现"},
    "partial": {"en": "implemented in part (what is missing is listed)", "zh": "部分实现（列出缺失部分）"},
    "catalog": {"en": "carried as catalog values", "zh": "作为目录数值收录"},
    "explanation": {"en": "text only: shown with the plan's numbers, decides nothing",
                    "zh": "仅文字说明：以方案数据展示，不参与决策"},
    "set-aside": {"en": "deliberately not applied (wrong, inconsistent or unverifiable)",
                  "zh": "有意不采用（错误、矛盾或无法核实）"},
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _coverage_markdown(report, cov) -> str:
    counts = report.counts
    lines = [
        "# Knowledge coverage",
        "",
        "Generated by `servewise kb coverage` (do not edit by hand) from the completeness verdicts in",
        "`facts/coverage.yaml`: for every guideline of `facts/guidelines.yaml` (the four seed articles),",
        "whether the rule base implements it, the rules that carry it and the tests that prove it",
        "(`servewise kb coverage --format json` gives the same as data).",
        "",
        f"**{len(cov.cited)} of {cov.total} guideline ids are cited by rules ({cov.percent:.1f}%).** "
        "Citation is not encoding; the status says how much of each is implemented.",
        "",
        "| status | guidelines | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| {s} | {n} | {STATUS_TEXT[s]['en']} |" for s, n in counts.items()]
    lines += ["", f"Tests named after guideline ids (tests/guidelines/): "
              f"{sum(bool(e.tests) for e in report.entries)} guidelines, "
              f"{sum(bool(e.tests) for e in report.by_status('encoded'))} of the {counts['encoded']} encoded.", ""]
    if cov.uncited:
        lines += ["## Not cited by any rule", "", "| id | reason |", "|---|---|"]
        lines += [f"| {g} | {_cell(cov.documented.get(g, 'NOT DOCUMENTED'))} |" for g in cov.uncited]
        lines.append("")
    lines += ["## Partly encoded: what is missing", "", "| id | missing | rules |", "|---|---|---|"]
    for e in report.by_status("partial"):
        lines.append(f"| {e.id} | {_cell(e.note)} | {', '.join(f'`{r}`' for r in e.rules) or '—'} |")
    lines += ["", "## Guidelines, their status, rules and tests", "",
              "| id | kind | status | guideline (English) | rules / catalog entries | note | tests |",
              "|---|---|---|---|---|---|---|"]
    for e in report.entries:
        en = e.guideline if len(e.guideline) <= 140 else e.guideline[:139] + "…"
        carriers = [f"`{r}`" for r in e.rules] + [f"catalog `{c}`" for c in e.catalog]
        tests = ", ".join(f"`{t.partition('::')[2]}`" for t in e.tests) or "—"
        lines.append(f"| {e.id} | {e.kind} | {e.status} | {_cell(en)} | {', '.join(carriers) or '—'} | "
                     f"{_cell(e.note) or '—'} | {tests} |")
    return "\n".join(lines)


def _coverage_text(report, lang: str) -> str:
    zh = lang == "zh"
    lines = [("知识覆盖：" if zh else "Knowledge coverage: ") + f"{len(report.entries)} "
             + ("条准则" if zh else "guidelines")]
    for s, n in report.counts.items():
        label = _verdict(s, lang)
        lines.append(f"  {label}{' ' * (12 - display_width(label))} {n:>4}  {pick(STATUS_TEXT[s], lang)}")
    partial = report.by_status("partial")
    lines.append("")
    lines.append(f"部分实现（{len(partial)}）：" if zh else f"Partly encoded ({len(partial)}):")
    for e in partial:
        lines.append(f"  {e.id}: {value_text(e.note, lang)}")
        if e.rules:
            lines.append(("    规则：" if zh else "    rules: ") + ", ".join(e.rules))
    tested = sum(bool(e.tests) for e in report.entries)
    lines.append("")
    lines.append(f"有测试的准则：{tested}（tests/guidelines/）" if zh
                  else f"Guidelines with a test named after them: {tested} (tests/guidelines/)")
    return "\n".join(lines)


@kb.command("coverage")
@click.option("--format", "fmt", type=click.Choice(["markdown", "text", "json"]), default="markdown",
              show_default=True, help="markdown is docs/knowledge-coverage.md.")
@click.pass_obj
@text_wrapped
def kb_coverage(settings, fmt: str) -> None:
    """Completeness verdict per guideline (facts/coverage.yaml): status, rules, catalog entries, tests.

    Exit 1 when the verdict file is stale (an id without verdict, an unknown rule or catalog entry,
    an encoded id no rule cites, a test link that does not resolve); exit 2 when it is malformed.
    """
    from servewise.engine.app.coverage import CoverageError
    from servewise.engine.app.coverage import check as coverage_check

    rb = settings.rulebase()
    try:
        report = coverage_check(rb)
    except CoverageError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if fmt == "json":
        click.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2, sort_keys=True))
    elif fmt == "text":
        click.echo(_coverage_text(report, settings.lang))
    else:
        click.echo(_coverage_markdown(report, check(rb).coverage))
    for problem in report.problems:
        click.echo(f"error: {problem}", err=True)
    if report.problems:
        sys.exit(1)


COMMANDS = [kb]
