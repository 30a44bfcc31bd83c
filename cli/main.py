"""The `servewise` command: thin click commands over the engine."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click

from ..engine.catalog import UnknownEntry
from ..engine.inputs import WorkloadError, workload_schema
from ..engine.plan import plan_file
from ..engine.rulebase import RuleLoadError, load_rules
from ..engine.runner import LoopError, RuleRuntimeError
from . import render
from .errors import InputError
from .i18n import default_lang


class Settings:
    def __init__(self, lang: str, rules_dirs: tuple[str, ...]):
        self.lang = lang
        self.rules_dirs = [Path(d) for d in rules_dirs]

    def rulebase(self):
        try:
            return load_rules(self.rules_dirs)
        except RuleLoadError as exc:
            for problem in exc.problems:
                click.echo(str(problem), err=True)
            raise SystemExit(2) from None


def write_output(text: str, output: str | None) -> None:
    """Write to a file atomically (or to stdout)."""
    if not output:
        click.echo(text, nl=False)
        return
    target = Path(output)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", prefix=".servewise-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--lang", type=click.Choice(["zh", "en"]), default=None,
              help="Language of the output (default: from the locale).")
@click.option("--rules-dir", "rules_dirs", multiple=True, type=click.Path(),
              help="Extra rule folder, loaded after the built-in rules (repeatable).")
@click.version_option(package_name="servewise")
@click.pass_context
def cli(ctx: click.Context, lang: str | None, rules_dirs: tuple[str, ...]) -> None:
    """servewise: configure AI inference servers from workload facts, with the reasons."""
    ctx.obj = Settings(lang or default_lang(), rules_dirs)


@cli.command()
@click.argument("workload", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["text", "json", "md", "html"]), default="text")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file.")
@click.pass_obj
def plan(settings: Settings, workload: str, fmt: str, output: str | None) -> None:
    """Plan the servers for WORKLOAD (a YAML workload file)."""
    rulebase = settings.rulebase()
    try:
        result = plan_file(workload, rulebase)
    except WorkloadError as exc:
        raise InputError(str(exc)) from None
    except UnknownEntry as exc:
        raise InputError(f"{workload}: {exc}") from None
    except (RuleRuntimeError, LoopError) as exc:
        raise InputError(f"rule base: {exc}") from None
    if fmt == "json":
        text = render.to_json(result.plan)
    elif fmt == "md":
        text = render.to_markdown(result.plan, settings.lang)
    elif fmt == "html":
        from .render_html import to_html

        text = to_html(result.plan, settings.lang)
    else:
        text = render.to_text(result.plan, settings.lang)
    write_output(text, output)
    if not result.feasible:
        sys.exit(1)


@cli.group()
def rules() -> None:
    """Work with rule files (lint, test, facts, show, graph, docs; cli/cmd_rules.py)."""


@rules.command("functions")
def rules_functions() -> None:
    """List the functions rule expressions may call, with their documentation."""
    import inspect

    from ..engine.expr import BUILTIN_FUNCTIONS
    from ..engine.functions import FUNCTIONS

    click.echo("built-in: " + ", ".join(sorted(BUILTIN_FUNCTIONS)))
    for name in sorted(FUNCTIONS):
        fn = FUNCTIONS[name]
        doc = (inspect.getdoc(fn) or "").split("\n\n")[0].replace("\n", " ")
        click.echo(f"{name}{inspect.signature(fn)}\n    {doc}")


@cli.group()
def schema() -> None:
    """Print the JSON Schemas servewise uses."""


@schema.command("plan")
def schema_plan() -> None:
    """The plan JSON schema (CONTRACTS §4), for pipelines."""
    from ..engine.rulebase import FACTS_DIR

    click.echo((FACTS_DIR / "schemas" / "plan.schema.json").read_text(encoding="utf-8"), nl=False)


@schema.command("workload")
def schema_workload() -> None:
    """The workload file schema (generated from facts/inputs.yaml)."""
    click.echo(json.dumps(workload_schema(), ensure_ascii=False, indent=2))


def _register_optional() -> None:
    """Commands that live in their own modules: perf_commands, and every ``cli/cmd_*.py``
    module's ``COMMANDS`` list of click commands."""
    import importlib
    import pkgutil

    from .perf_commands import estimate_cmd, validate_cmd

    cli.add_command(estimate_cmd)
    cli.add_command(validate_cmd)
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).resolve().parent)]), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            for command in getattr(module, "COMMANDS", []):
                cli.add_command(command)


_register_optional()


def main() -> None:
    cli(prog_name="servewise")
