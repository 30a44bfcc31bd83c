"""Calibration overlays (perf.overlay, perf.overlay_fit): the file, its scope, the fit."""

from __future__ import annotations

import dataclasses

import pytest

from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf import estimate
from servewise.engine.domain.perf.calibration import active_overlay, profile, using_overlay
from servewise.engine.domain.perf.data import read_measured
from servewise.engine.domain.perf.overlay import Overlay, OverlayError, Scope, dump_overlay, parse_overlay
from servewise.engine.domain.perf.overlay_fit import calibrate, errors, fit_scope, nelder_mead

GOOD = {"format": "servewise-calibration-overlay", "version": 1,
        "scopes": [{"gpu": "H100 SXM", "backend": "vllm",
                    "constants": {"t_request_ms": 60.0, "eta_bw_scale": 0.85}}]}


def _bad(**change):
    data = {**GOOD, **change}
    with pytest.raises(OverlayError) as exc:
        parse_overlay(data, "o.yaml")
    return str(exc.value)


def test_bad_files_name_the_field():
    assert _bad(format="x").startswith("o.yaml: format:")
    assert "version" in _bad(version=2)
    assert "scopes:" in _bad(scopes=[])
    bad_const = [{"gpu": "H100 SXM", "backend": "vllm", "constants": {"eta_bw": 0.5}}]
    assert "scopes[0].constants.eta_bw: one of" in _bad(scopes=bad_const)
    out_of_range = [{"gpu": "H100 SXM", "backend": "vllm", "constants": {"eta_bw_scale": 99}}]
    assert "scopes[0].constants.eta_bw_scale: a number in" in _bad(scopes=out_of_range)
    assert "scopes[0].backend" in _bad(scopes=[{"gpu": "H100 SXM", "backend": "tgi", "constants": {}}])


def test_round_trip_through_the_file_text():
    import yaml

    text = dump_overlay(GOOD["scopes"], {"rows": 3})
    assert text.startswith("# servewise calibration overlay")
    ov = parse_overlay(yaml.safe_load(text))
    assert ov.scopes[0].constants == {"eta_bw_scale": 0.85, "t_request_ms": 60.0}


def test_overlay_changes_only_its_gpu_and_backend():
    cat = load_catalog()
    h100, h200 = cat.gpu("H100 SXM"), cat.gpu("H200 SXM")
    ov = parse_overlay(GOOD)
    base = profile(h100, "vllm")
    with using_overlay(ov):
        assert active_overlay() is ov
        p = profile(h100, "vllm")
        assert p.t_request_ms == 60.0
        assert p.eta_bw == pytest.approx(base.eta_bw * 0.85)
        assert profile(h200, "vllm") == profile(h200, "vllm") and profile(h200, "vllm").t_request_ms != 60.0
        assert profile(h100, "sglang").t_request_ms == profile(h100, "sglang").t_request_ms
        assert profile(h100, "sglang") == dataclasses.replace(profile(h100, "sglang"))
    assert active_overlay() is None
    assert profile(h100, "vllm") == base


def test_overlay_moves_the_estimate_the_way_its_constants_say():
    cat = load_catalog()
    m, g = cat.model("Llama-3.1-8B"), cat.gpu("H100 SXM")
    kw = dict(tp=1, precision="fp8", isl=1024, osl=128, concurrency=16)
    before = estimate(m, g, **kw)
    with using_overlay(parse_overlay(GOOD)):
        after = estimate(m, g, **kw)
    assert after.tpot_ms > before.tpot_ms  # 15 % less bandwidth: slower decode steps
    assert after.ttft_ms > before.ttft_ms  # a larger fixed request cost


def test_nelder_mead_finds_a_minimum():
    x = nelder_mead(lambda v: (v[0] - 1.5) ** 2 + (v[1] + 0.5) ** 2 + 3, [0.0, 0.0])
    assert x[0] == pytest.approx(1.5, abs=1e-2) and x[1] == pytest.approx(-0.5, abs=1e-2)


def _synthetic_rows(truth: Scope) -> list:
    """Rows 'measured' on a server that behaves like the shipped model with ``truth`` applied."""
    recs = []
    for isl, osl, c in ((1024, 128, 1), (1024, 128, 8), (2048, 256, 32), (4096, 512, 64),
                        (512, 256, 128), (1024, 1024, 16), (8192, 128, 4)):
        recs.append({"model": "Llama-3.1-8B", "gpu": "H100 SXM", "backend": "vllm",
                     "precision": "fp8", "isl": str(isl), "osl": str(osl), "concurrency": str(c),
                     "tp": "1", "pp": "1", "attention_dp": "1", "moe_tp": "1", "moe_ep": "1",
                     "ttft_ms": "1", "tpot_ms": "1", "source": "synthetic"})
    rows = read_measured(recs)
    from servewise.engine.domain.perf.validate import predict_row

    with using_overlay(Overlay((truth,))):
        preds = [predict_row(r) for r in rows]
    for r, p in zip(rows, preds, strict=True):
        r.ttft_ms, r.tpot_ms = p["ttft_ms"], p["tpot_ms"]
    return rows


def test_fit_recovers_a_known_server():
    truth = Scope("H100 SXM", "vllm", {"t_request_ms": 70.0, "eta_bw_scale": 0.8})
    rows = _synthetic_rows(truth)
    before = errors(rows, None)
    fitted = fit_scope(rows, "H100 SXM", "vllm")
    after = errors(rows, fitted)
    med = lambda xs: sorted(abs(x) for x in xs)[len(xs) // 2]  # noqa: E731
    assert med(before["tpot_ms"]) > 0.06 and med(before["ttft_ms"]) > 0.1
    assert med(after["tpot_ms"]) < 0.03 and med(after["ttft_ms"]) < 0.05
    assert fitted.constants["eta_bw_scale"] == pytest.approx(0.8, rel=0.08)
    assert fitted.constants["t_request_ms"] == pytest.approx(70.0, rel=0.2)


def test_calibrate_reports_shipped_fitted_and_cross_validated_errors():
    rows = _synthetic_rows(Scope("H100 SXM", "vllm", {"t_request_ms": 70.0}))
    (entry,) = calibrate(rows)
    assert entry["gpu"] == "H100 SXM" and entry["backend"] == "vllm" and entry["rows"] == 7
    err = entry["error"]
    assert set(err) == {"shipped", "fitted", "cross_validated"}
    assert err["fitted"]["ttft_ms"]["median_ape"] < err["shipped"]["ttft_ms"]["median_ape"]
    assert err["cross_validated"]["ttft_ms"]["n"] == 7


def test_fit_leaves_what_the_rows_do_not_measure():
    rows = _synthetic_rows(Scope("H100 SXM", "vllm", {"eta_bw_scale": 0.9}))
    for r in rows:
        r.ttft_ms = None  # TPOT only: the request cost is not informed
    sc = fit_scope(rows, "H100 SXM", "vllm")
    assert "t_request_ms" not in sc.constants and "eta_bw_scale" in sc.constants
