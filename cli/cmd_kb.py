"""`servewise kb check`: conflicting sources, recomputed claims, guideline coverage."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from ..engine.kbcheck import check
from .i18n import pick


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
@click.pass_obj
def kb_check(settings, fmt: str, min_coverage: float) -> None:
    """Conflicting catalog values, the arithmetic of numeric claims, and guideline coverage."""
    report = check(settings.rulebase())
    cov = report.coverage
    if fmt == "json":
        data = asdict(report)
        data["coverage"] |= {"percent": round(cov.percent, 1), "undocumented": cov.undocumented}
        click.echo(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True, default=str))
    else:
        lang = settings.lang
        click.echo(f"Conflicting catalog values ({len(report.conflicts)})")
        for c in report.conflicts:
            vals = " vs ".join(_num(v.get("value")) for v in c.values)
            click.echo(f"  {c.table}/{c.entry}.{c.field}: {vals} → uses {_num(c.chosen)}: {c.reason}")
        bad = [r for r in report.claims if not r.holds]
        click.echo(f"\nNumeric claims recomputed ({len(report.claims)}; {len(bad)} do not hold)")
        for r in report.claims:
            nums = ", ".join(f"{k}={_num(v)}" for k, v in r.values.items())
            click.echo(f"  [{r.verdict}] {r.id} ({', '.join(r.guidelines)}): {pick(r.says, lang)}")
            click.echo(f"      {nums}")
            click.echo(f"      → {pick(r.conclusion, lang)}")
        click.echo(f"\nGuideline coverage: {len(cov.cited)}/{cov.total} ids cited by rules "
                   f"({cov.percent:.1f}%)")
        for gid in cov.uncited:
            note = cov.documented.get(gid)
            click.echo(f"  {gid}: " + (f"not a rule — {note}" if note else "NOT CITED and not documented"))
        for err in report.errors:
            click.echo(f"error: {err}", err=True)
    if report.errors:
        sys.exit(2)
    if cov.percent < min_coverage or cov.undocumented:
        sys.exit(1)


COMMANDS = [kb]
