"""N+1 at the failure domain (issue #38): the replicas left when the fullest server fails carry the peak."""

from __future__ import annotations

import math

import pytest

from servewise.engine.domain.fn_server import _surviving_layout


@pytest.mark.parametrize("peak", range(1, 40))
@pytest.mark.parametrize("per_server", [1, 2, 3, 4, 8])
def test_the_fullest_server_can_fail(peak, per_server):
    replicas, servers = _surviving_layout(peak, per_server, 1, False, 1)
    fullest = math.ceil(replicas / servers)
    assert fullest <= per_server                   # the spread fits the servers
    assert replicas - fullest >= peak              # and survives the loss of the fullest
    assert servers == max(2, math.ceil(peak / per_server) + 1)  # with the fewest servers that can


def test_a_wider_spread_is_taken_when_it_costs_less():
    from servewise.engine.domain.catalog import load_catalog
    from servewise.engine.domain.fn_server import _priced_layout
    from servewise.engine.domain.functions import RunContext, reset_context, use_context

    token = use_context(RunContext(catalog=load_catalog()))
    try:
        pricey = _priced_layout("H200 NVL", 4, 4, 1, 1, False, 1, "cn")   # ~250k a card: 3 servers, 6 cards
        boards = _priced_layout("H200 SXM", 4, 4, 1, 1, False, 1, "cn")   # whole boards: the fewest servers
    finally:
        reset_context(token)
    assert pricey == (6, 3)
    assert boards == (8, 2)


def test_a_single_server_or_no_spare_keeps_peak_plus_spare():
    assert _surviving_layout(5, 4, 1, True, 1) == (6, 2)    # one server accepted: N+1 replicas, no spread rule
    assert _surviving_layout(5, 4, 0, True, 1) == (5, 2)    # no spare
    assert _surviving_layout(2, 1, 1, False, 2) == (3, 6)   # a replica over 2 servers: a failure takes one


def test_examples_at_three_nines_survive_a_server_loss(example_plans):
    checked = 0
    for name, ex in example_plans.items():
        plan = ex.plan
        comps = plan["components"]
        avail = comps.get("availability") or {}
        if not plan.get("feasible") or (avail.get("target_pct") or 0) < 99.9 or comps.get("packing"):
            continue
        if (comps.get("servers") or {}).get("count", 0) < 2 or not avail.get("redundant_replicas"):
            continue
        checked += 1
        assert avail["survives_server_loss"] is True, name
        assert avail["replicas_after_server_loss"] >= comps["gpu"]["replicas_for_peak"], name
        assert comps["gpu"].get("standby_gpus", 0) == 0, name  # whole-board GPUs run as replicas
    assert checked >= 15
