"""Domain functions for edge deployments: the catalog module system that carries an edge GPU."""

from __future__ import annotations

from .catalog import UnknownEntry
from .functions import current, domain_function


@domain_function
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
