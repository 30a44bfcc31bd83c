"""`servewise calibrate RESULTS… -o OVERLAY` (CONTRACTS, turn 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from servewise.cli.errors import current_lang
from servewise.cli.i18n import value_text
from servewise.cli.perf_commands import BadInput
from servewise.engine.common.messages import message
from servewise.engine.domain.perf import PRECISIONS
from servewise.engine.domain.perf.calibration import BACKENDS


def _pct(x: Any, lang: str = "en") -> str:
    return message("cal.na", lang) if x is None else f"{100 * float(x):.1f} %"


def report_text(report: dict[str, Any], out: str, lang: str = "en") -> str:
    """The calibration report in ``lang`` (facts/messages/commands.yaml cal.*)."""
    def t(code: str, **args: Any) -> str:
        return message(f"cal.{code}", lang, **args)

    sep = "，" if lang == "zh" else ", "
    lines = [t("written", out=out, rows=report["rows"], files=", ".join(f["file"] for f in report["fitted_on"]))]
    for s in report["scopes"]:
        lines.append(t("scope", gpu=s["gpu"], backend=s["backend"], rows=s["rows"], models=", ".join(s["models"])))
        consts = s["constants"] or {}
        if not consts:
            lines.append(t("nothing"))
        for k, v in consts.items():
            lines.append(f"  {k} = {v:g}")
        err = s["error"]
        for metric, label in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT")):
            cells = [t("cell", name=t(key), pct=_pct((err.get(key) or {}).get(metric, {}).get("median_ape"), lang))
                     for key in ("shipped", "fitted", "cross_validated") if (err.get(key) or {}).get(metric)]
            if cells:
                lines.append(t("median", label=label, cells=sep.join(cells)))
    lines.append(t("use", out=out))
    return "\n".join(lines)


@click.command("calibrate")
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The overlay file to write (YAML).")
@click.option("--model", default=None, help="Model catalog name, where the files do not say it.")
@click.option("--gpu", default=None, help="GPU catalog name, where the files do not say it.")
@click.option("--backend", type=click.Choice(BACKENDS, case_sensitive=False), default=None,
              help="The serving engine measured, where the files do not say it.")
@click.option("--precision", type=click.Choice(PRECISIONS, case_sensitive=False), default=None,
              help="Weight precision served, where the files do not say it.")
@click.option("--tp", type=click.IntRange(min=1), default=None, help="Tensor parallel size.")
@click.option("--pp", type=click.IntRange(min=1), default=None, help="Pipeline parallel size.")
@click.option("--attention-dp", type=click.IntRange(min=1), default=None,
              help="Attention data-parallel ranks.")
@click.option("--ep", type=click.IntRange(min=1), default=None, help="Expert parallel size.")
@click.option("--no-cross-validate", is_flag=True,
              help="Skip the cross-validated error (faster on many rows).")
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text",
              show_default=True, help="The report on standard output.")
def calibrate_cmd(results: tuple[str, ...], output: str, model: str | None, gpu: str | None,
                  backend: str | None, precision: str | None, tp: int | None, pp: int | None,
                  attention_dp: int | None, ep: int | None, no_cross_validate: bool,
                  fmt: str) -> None:
    """Fit a calibration overlay to your own benchmark RESULTS (vllm bench serve --save-result
    JSON, SGLang bench_serving JSONL, genai-perf / aiperf JSON exports, trtllm-bench
    --report_json, or CSV in the measured.csv layout). What a file does not say (GPU,
    parallelism, precision...) comes from the options; without it the command stops (exit 2)."""
    from servewise.engine.app.calibrate import CalibrateError, run

    for p in results:
        if not Path(p).is_file():
            raise BadInput(value_text(f"{p}: (file): not found (expected a benchmark result file)", current_lang()))
    given = {"model": model, "gpu": gpu, "backend": backend and backend.lower(),
             "precision": precision and precision.lower(), "tp": tp, "pp": pp,
             "attention_dp": attention_dp, "moe_ep": ep}
    from servewise.cli.progress import slow

    try:
        with slow("progress.calibrate", current_lang()):
            text, report = run(list(results), given, cross_validate=not no_cross_validate)
    except CalibrateError as exc:
        raise BadInput(value_text(str(exc), current_lang())) from None
    tmp = Path(output).with_name(Path(output).name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(output)  # whole or not at all (an interrupt leaves the old file)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BadInput(value_text(f"{output}: (file): a writable path ({exc.strerror})", current_lang())) from None
    click.echo(json.dumps(report, indent=1, ensure_ascii=False) if fmt == "json"
               else report_text(report, output, current_lang()))


COMMANDS = [calibrate_cmd]
