"""Issue #40: validate measures the largest open-loop rate meeting P99 limits (MLPerf Server-style
rows: ``request_rate`` with ``p99_ttft_limit_ms`` / ``p99_tpot_limit_ms`` and ``replicas``)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from servewise.cli.main import cli
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.data import read_measured
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.serving import max_rate_meeting
from servewise.engine.domain.perf.validate import errors, predict_row, summarise

CAT = load_catalog()


def _row(**cols: str) -> dict[str, str]:
    base = {"model": "Llama-3.1-70B", "gpu": "H100 SXM", "backend": "trtllm", "precision": "fp8",
            "isl": "300", "osl": "270", "request_rate": "10", "tp": "2", "pp": "1",
            "p99_ttft_limit_ms": "2000", "p99_tpot_limit_ms": "200", "harness": "in-process"}
    return {**base, **cols}


def test_max_rate_row_is_predicted_per_replica_and_by_its_limits():
    one, four, tight, plain = read_measured([
        _row(), _row(replicas="4"), _row(p99_tpot_limit_ms="30"),
        _row(p99_ttft_limit_ms="", p99_tpot_limit_ms="", ttft_ms="500")])
    assert one.max_rate_run and four.replicas == 4 and not plain.max_rate_run
    p1, p4, pt = predict_row(one), predict_row(four), predict_row(tight)
    # the same engine's rate, four times over four replicas sharing the Poisson stream
    assert p4["max_request_rate"] == pytest.approx(4 * p1["max_request_rate"])
    # a tighter TPOT limit admits a smaller batch: a lower rate
    assert 0 < pt["max_request_rate"] < p1["max_request_rate"]
    # the value is serving.max_rate_meeting's at the central estimate
    direct = max_rate_meeting(CAT.model("Llama-3.1-70B"), CAT.gpu("H100 SXM"), Layout(2, 1, 1, 1),
                              precision="fp8", isl=300, osl=270, ttft_ms=2000, tpot_ms=200,
                              backend="trtllm", confidence="median", harness="in-process")
    assert p1["max_request_rate"] == pytest.approx(direct["requests_per_s"])
    assert "limited by" in p1["note"]


def test_max_rate_share_within_tolerance_is_summarised():
    rows = read_measured([_row(request_rate=str(r)) for r in (1, 10, 1000)])
    preds = [predict_row(r) for r in rows]
    pred = preds[0]["max_request_rate"]
    errs = errors(rows, preds)
    rate = [e for e in errs if e["metric"] == "max_request_rate"]
    assert [e["meas"] for e in rate] == [1, 10, 1000]
    within = sum(abs(pred - m) / m <= 0.25 for m in (1, 10, 1000))
    s = summarise(errs, by=())["max_rate"]
    assert s["n"] == 3 and s["share_within"] == pytest.approx(round(within / 3, 4))
    assert s["met"] is (within / 3 >= 0.75)


def test_validate_cli_reports_the_max_rate_share(tmp_path):
    row = _row(concurrency="", ttft_ms="", tpot_ms="")  # the measured layout's columns, empty
    p = tmp_path / "server.csv"
    p.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n", encoding="utf-8")
    out = CliRunner().invoke(cli, ["validate", "--data", str(p)])
    assert out.exit_code == 0, out.output
    assert "open-loop runs at P99 limits: largest rate meeting them" in out.output
    js = CliRunner().invoke(cli, ["validate", "--data", str(p), "--format", "json"])
    d = json.loads(js.output)
    assert d["rows"][0]["max_request_rate"] > 0 and d["summary"]["max_rate"]["n"] == 1
