"""The residual-analysis tools (tools/perf/residuals.py, tools/perf/moe_kernels.py)."""

import math

from tools.perf.moe_kernels import interp
from tools.perf.residuals import TERMS, records, table


def test_ttft_terms_add_up_to_the_prediction():
    recs = records()
    assert len(recs) > 2000
    for r in recs:
        assert math.isclose(sum(r[t] for t in TERMS), r["ttft_pred"], rel_tol=1e-9), r
        assert 0.0 <= r["rho"]


def test_grouped_table_has_one_line_per_group():
    recs = records()
    lines = table(recs, "backend")
    assert len(lines) == 1 + len({r["backend"] for r in recs})


def test_kernel_latency_interpolates_in_log_log():
    d = {1024: 1.0, 4096: 4.0}
    assert math.isclose(interp(d, 2048), 2.0)
    assert interp(d, 512) == 1.0 and math.isclose(interp(d, 8192), 8.0)


def test_ceiling_lists_the_shipped_error_then_each_grouping():
    """The first line is the shipped model's median error; a free factor per group of the
    finest grouping (one per configuration and lengths) leaves less of it."""
    from tools.perf.residuals import CEILING_KEYS, ceiling

    lines = ceiling(records())[1:]
    assert len(lines) == 1 + len(CEILING_KEYS)
    tpot = [float(line.split()[-2].rstrip("%")) for line in lines]
    ttft = [float(line.split()[-1].rstrip("%")) for line in lines]
    assert tpot[-1] < tpot[0] and ttft[-1] < ttft[0]


def test_within_campaign_removes_each_campaigns_median():
    from collections import defaultdict

    from servewise.engine.domain.perf.validate import quantile
    from tools.perf.residuals import within_campaign

    recs = within_campaign(records(), "tpot")
    groups = defaultdict(list)
    for r in recs:
        if r["e_tpot"] is not None:
            groups[(r["model"], r["backend"], r["gpu"], r["precision"])].append(r["e_tpot"])
    assert len(groups) > 20
    for v in groups.values():
        assert abs(quantile(v, 0.5)) < 1e-9
    assert any(r["e_ttft"] is not None for r in recs)  # the other metric is left as it was
