"""Bands per regime (perf.bands) and what validate reports of them."""

from __future__ import annotations

from servewise.engine.domain.perf.bands import ANY, load_bin, lookup
from servewise.engine.domain.perf.validate import summarise, validate


def test_load_bins():
    assert load_bin("closed", per_rank=1) == "1-4"
    assert load_bin("closed", per_rank=4) == "1-4"
    assert load_bin("closed", per_rank=5) == "5-32"
    assert load_bin("closed", per_rank=200) == "129+"
    assert load_bin("open", rho=0.3) == "rho<0.5"
    assert load_bin("open", rho=0.9) == "rho0.85+"
    assert load_bin("offline") == "max"


def _entry(backend, arrival, load, n, band):
    return {"backend": backend, "arrival": arrival, "load": load,
            "tpot_ms": {"n": n, "band": band}}


def test_lookup_falls_back_to_coarser_regimes_with_enough_rows():
    bands = {"min_rows": 30, "regimes": [
        _entry("vllm", "closed", "5-32", 10, [0.5, 2.0]),      # too few rows
        _entry("vllm", "closed", ANY, 40, [0.9, 1.2]),
        _entry(ANY, ANY, ANY, 500, [0.8, 1.3]),
    ]}
    band, used = lookup("vllm", "closed", "5-32", "tpot_ms", bands)
    assert band == [0.9, 1.2] and used == {"backend": "vllm", "arrival": "closed", "load": ANY}
    band, used = lookup("sglang", "open", "rho<0.5", "tpot_ms", bands)
    assert band == [0.8, 1.3] and used["backend"] == ANY
    assert lookup("vllm", "closed", "5-32", "ttft_ms", bands) is None


def test_validate_rows_carry_bands_and_the_summary_their_coverage(tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text(
        "model,gpu,backend,precision,isl,osl,concurrency,tp,pp,ttft_ms,tpot_ms,source\n"
        "Llama-3.1-8B,H100 SXM,vllm,fp8,1024,128,16,1,1,90,7.5,a\n"
        "Llama-3.1-8B,H100 SXM,vllm,fp8,1024,128,16,1,1,900,75,b\n", encoding="utf-8")
    r = validate([csv])
    rows = r["rows"]
    for row in rows:
        lo, hi = row["tpot_ms_band"]
        assert lo < row["tpot_ms"] < hi
        assert row["regime"] == {"backend": "vllm", "arrival": "closed", "load": "5-32"}
    inside = [e["in_band"] for e in r["errors"] if e["metric"] == "tpot_ms"]
    assert inside == [True, False]  # the second row is ten times slower than the model says
    assert r["summary"]["overall"]["tpot_ms"]["band_coverage"] == 0.5
    assert "vllm/closed/5-32" in r["summary"]["by_regime"]


def test_summary_coverage_ignores_rows_without_a_band():
    errs = [{"metric": "tpot_ms", "err": 0.1, "in_band": True, "gpu": "g", "backend": "b",
             "model": "m", "regime": "r"},
            {"metric": "tpot_ms", "err": 0.2, "in_band": None, "gpu": "g", "backend": "b",
             "model": "m", "regime": "r"}]
    assert summarise(errs)["overall"]["tpot_ms"]["band_coverage"] == 1.0
