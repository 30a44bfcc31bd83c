"""Domain functions for edge deployments: the catalog module system that carries an edge GPU."""

from __future__ import annotations

from typing import Any

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, domain_function


@domain_function(reads=(("gpus", 0),))
def edge_module(gpu: str) -> str | None:
    """The catalog `servers` entry of type edge-module built around this GPU, if any."""
    table = current().catalog.table("servers")
    gpus = current().catalog.table("gpus")
    for entry in table:
        if entry.get("type") != "edge-module":
            continue
        for name in entry.get("gpu_models") or []:
            try:
                if gpus.get(name)["id"] == gpu:
                    return entry["id"]
            except UnknownEntry:
                continue
    return None


@domain_function
def edge_bom_lines(gpu: str, units: int, region: str, store_tb: float) -> list[dict[str, Any]]:
    """Bill of materials of ``units`` edge boxes: the module at its market price for ``region``
    (the catalog's dated, sourced range), and per box the carrier board, enclosure, DC supply and
    NVMe SSD, each unpriced unless the market file has a price (never invented)."""
    from servewise.engine.domain.fn_bom import _line, gpu_price, market_price

    n = max(1, int(units))
    lines = [_line(gpu, "gpu", n, gpu_price(gpu, region))]
    store_gb = max(1, int(round(float(store_tb or 0) * 1000)))
    for part, category in (("edge carrier board (industrial, wide-temperature)", "platform"),
                           ("edge enclosure (sealed, wide-temperature) with DC supply", "platform"),
                           (f"NVMe M.2 SSD ≥ {store_gb} GB", "ssd")):
        lines.append(_line(part, category, n, market_price(part, region),
                           unpriced="no sourced price for this part; quote it with the module"))
    return lines
