"""Issue #36 item 3: disaggregated prefill/decode serving in the performance model."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from servewise.cli.main import cli
from servewise.engine.domain.catalog import load_catalog
from servewise.engine.domain.perf.disagg import Pool, estimate_disagg, kv_link, occupancy_fixed_point, predict_disagg
from servewise.engine.domain.perf.memory import Layout
from servewise.engine.domain.perf.serving import predict_state
from servewise.engine.domain.perf.types import evaluate


@pytest.fixture(scope="module")
def r1_gb200():
    cat = load_catalog()
    return cat.model("DeepSeek-R1"), cat.gpu("GB200")


def _run(r1_gb200, workers_p=1, workers_d=4, c=48.0, isl=1024, osl=1024, **kw):
    m, g = r1_gb200
    return predict_disagg(m, Pool(g, Layout(4, 1, 4, 1), workers_p),
                          Pool(g, Layout(8, 1, 8, 1), workers_d), precision="fp4", isl=isl,
                          osl=osl, concurrency=c, backend="trtllm", **kw)


def test_decode_pool_runs_without_prefill_interference(r1_gb200):
    """The same decode engine at the same batch: aggregated TPOT carries the prefills landing on
    its steps, the disaggregated decode worker's does not."""
    m, g = r1_gb200
    s = _run(r1_gb200, c=64.0, workers_d=1)
    c_rank = s["c_decode_rank"]
    _, tpot_agg, _, st = predict_state(m, g, Layout(8, 1, 8, 1), precision="fp4", isl=1024,
                                       osl=1024, concurrency=c_rank, backend="trtllm")
    assert st["interference"] > 0
    assert s["tpot"] < tpot_agg
    assert s["step"] == pytest.approx(st["dec"]["total"], rel=1e-9)


def _counted(g):
    calls = []

    def excess(c: float) -> float:
        calls.append(c)
        return min(max(g(c), 1.0), 64.0) - c
    return excess, calls


@pytest.mark.parametrize("slope", [0.0, 0.3, 0.9, 0.99])
def test_the_decode_occupancy_is_the_fixed_point_in_a_few_steps(slope):
    """g(c) = 2 + slope x c: the root 2 / (1 - slope), found to 1e-10 in a few evaluations where
    the plain iteration c -> g(c) needs hundreds at slope 0.99 (and stopped at 60, unconverged)."""
    excess, calls = _counted(lambda c: 2 + slope * c)
    c = occupancy_fixed_point(excess, 64.0)
    root = min(2 / (1 - slope), 64.0)
    assert c == pytest.approx(root, rel=1e-9)
    assert len(calls) <= 8


def test_the_lowest_fixed_point_is_found_and_the_edges_hold():
    # g(c) = 1.5 + (c - 1)^2 / 8 rises faster than c later: roots 5 -/+ sqrt(12) (1.54 and
    # 8.46); the loop settles on the lower one (the iteration from one sequence never passes it)
    excess, _ = _counted(lambda c: 1.5 + (c - 1) ** 2 / 8)
    assert occupancy_fixed_point(excess, 64.0) == pytest.approx(5 - 12 ** 0.5, rel=1e-9)
    assert occupancy_fixed_point(_counted(lambda c: 0.2 * c)[0], 64.0) == 1.0  # one sequence
    assert occupancy_fixed_point(_counted(lambda c: 10 + c)[0], 64.0) == 64.0  # the batch cap


def test_littles_law_holds_in_a_closed_loop(r1_gb200):
    s = _run(r1_gb200, c=96.0)
    assert s["lam"] * s["life"] == pytest.approx(96.0, rel=1e-6)
    assert s["output_tokens_per_s"] == pytest.approx(s["lam"] * 1e3 * 1024)


def test_more_prefill_workers_shorten_the_prefill_queue(r1_gb200):
    one = _run(r1_gb200, workers_p=1, workers_d=8, c=512.0, isl=8192, osl=1024)
    three = _run(r1_gb200, workers_p=3, workers_d=8, c=512.0, isl=8192, osl=1024)
    assert one["rho_prefill"] > three["rho_prefill"]
    assert one["wait"] > three["wait"]
    assert three["output_tokens_per_s"] > one["output_tokens_per_s"]


def test_kv_cache_moves_over_nvlink_inside_an_nvl72_rack_and_the_nic_across_boards(r1_gb200):
    m, g = r1_gb200
    b300 = load_catalog().gpu("B300")
    consts = {"nvlink_eta": 0.7, "nic_gbs": 50.0, "nic_eta": 0.8, "latency_ms": 0.05}
    assert kv_link(Pool(g, Layout(4, 1, 4, 1)), Pool(g, Layout(8, 1, 8, 1), 4), consts)[0] == "nvlink"
    kind, gbs = kv_link(Pool(b300, Layout(8, 1, 8, 1)), Pool(b300, Layout(8, 1, 8, 1)), consts)
    assert (kind, gbs) == ("network", 40.0)


def test_a_draft_speeds_up_the_decode_pool(r1_gb200):
    from servewise.engine.domain.perf.calibration import load_calibration
    from servewise.engine.domain.perf.speculative import speculation

    m, _ = r1_gb200
    plain = _run(r1_gb200, c=16.0)
    spec = _run(r1_gb200, c=16.0, speculative=speculation(m, 3, None, load_calibration()))
    assert spec["tpot"] < plain["tpot"]


def test_every_printed_formula_recomputes_its_result(r1_gb200):
    m, g = r1_gb200
    d = estimate_disagg(m, Pool(g, Layout(1, 1, 4, 4), 1), Pool(g, Layout(8, 1, 8, 1), 4),
                        precision="fp4", isl=8192, osl=1024, concurrency=60.0, backend="trtllm")
    assert [s["name"] for s in d["steps"]][-1] == "throughput"
    for s in d["steps"]:
        assert evaluate(s["formula"], s["values"]) == pytest.approx(s["result"], rel=1e-3), s["name"]
    assert d["pools"]["decode"]["gpus"] == 32 and d["pools"]["prefill"]["gpus"] == 4
    lo, hi = d["band"]["tpot_ms"]
    assert lo < d["tpot_ms"] < hi


def test_closed_loop_or_rate_not_both(r1_gb200):
    with pytest.raises(ValueError, match="either concurrency"):
        _run(r1_gb200, request_rate=5.0)


def test_estimate_cli_disaggregated_json_and_bad_input():
    runner = CliRunner()
    args = ["estimate", "--model", "DeepSeek-R1", "--gpu", "GB200", "--tp", "8", "--ep", "8",
            "--precision", "fp4", "--isl", "1024", "--osl", "1024", "--concurrency", "48",
            "--backend", "trtllm", "--prefill-workers", "1", "--decode-workers", "4",
            "--prefill-tp", "4", "--prefill-ep", "4"]
    res = runner.invoke(cli, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["mode"] == "disaggregated" and d["pools"]["decode"]["workers"] == 4
    text = runner.invoke(cli, args)
    assert text.exit_code == 0 and "prefill: 1 worker(s) x 4 GB200" in text.output
    bad = runner.invoke(cli, ["estimate", "--model", "DeepSeek-R1", "--gpu", "GB200", "--tp", "8",
                              "--precision", "fp4", "--isl", "1024", "--osl", "64",
                              "--concurrency", "4", "--prefill-tp", "4"])
    assert bad.exit_code == 2 and "--prefill-tp: applies to disaggregated" in bad.output
