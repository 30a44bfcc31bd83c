"""Domain functions for server sizing: how many GPUs of a model one server can take."""

from __future__ import annotations

import math

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, devices_per_card, domain_function, note_detail

DEFAULT_GPUS_PER_SERVER = 8  # HGX baseboards and 4U PCIe GPU servers hold 8 (servers.yaml: generic-4u-pcie-8gpu)


def _servers_min(spof_allowed: bool) -> int:
    """The fewest servers (and replicas) a layout has: two where a single point of failure is vetoed."""
    return 1 if spof_allowed else 2


def _surviving_layout(peak: int, per_server: int, spare: int, spof_allowed: bool, pp: int) -> tuple[int, int]:
    """(replicas installed, servers) for ``peak`` replicas of which a server holds ``per_server``.

    With a spare required and a single point of failure vetoed, N+1 is at the failure domain: GPU
    servers fail whole (board, PSU, host), so the replicas left when the fullest server fails must
    carry the peak. The fewest servers that can do it are S = ⌈peak ÷ per_server⌉ + 1 (at least 2),
    with R = peak + ⌈peak ÷ (S − 1)⌉ replicas spread evenly (the fullest holds ⌈R ÷ S⌉ ≤ R − peak).
    A replica spanning ``pp`` > 1 servers loses one replica per server failure, so N + spare is enough;
    otherwise (a spare without the veto, or none) the replicas are ``peak + spare``."""
    peak, per_server, spare, pp = max(1, int(peak)), max(1, int(per_server)), int(spare), max(1, int(pp))
    floor = _servers_min(spof_allowed)
    if pp > 1 or spare <= 0 or spof_allowed:
        replicas = max(peak + spare, floor)
        return replicas, (replicas * pp if pp > 1 else max(math.ceil(replicas / per_server), floor))
    servers = max(2, math.ceil(peak / per_server) + 1)
    replicas = peak + math.ceil(peak / (servers - 1))
    while math.ceil(replicas / servers) > per_server:  # never on this formula; a guard for the invariant
        servers += 1
        replicas = peak + math.ceil(peak / (servers - 1))
    return replicas, servers


def _priced_layout(gpu: str, peak: int, per_server: int, tp: int, spare: int, spof_allowed: bool, pp: int,
                   region: str) -> tuple[int, int]:
    """The surviving layout, or — for PCIe cards, where a spread over one more server needs fewer
    spare replicas (R = peak + ⌈peak ÷ (S − 1)⌉ falls as S grows) — the one with one more server when
    its GPUs and platforms cost less (candidate_capex, midpoints; a tie keeps the fewer servers)."""
    replicas, servers = _surviving_layout(peak, per_server, spare, spof_allowed, pp)
    if pp > 1 or spare <= 0 or spof_allowed or replicas == peak + 1:
        return replicas, servers
    try:
        if current().catalog.table("gpus").get(gpu).get("form_factor") in ("SXM", "OAM"):
            return replicas, servers  # whole boards: every GPU of a board runs as a replica anyway
    except UnknownEntry:
        return replicas, servers
    from servewise.engine.domain.fn_bom import candidate_capex

    wider = servers + 1
    more = int(peak) + math.ceil(int(peak) / (wider - 1))
    base = candidate_capex(gpu, replicas * tp, servers, math.ceil(replicas / servers) * tp, region)
    alt = candidate_capex(gpu, more * tp, wider, math.ceil(more / wider) * tp, region)
    if base is not None and alt is not None and alt < base:
        return more, wider
    return replicas, servers


@domain_function(memoise=False)
def installed_floor(peak: int, spare: int, spof_allowed: bool) -> dict[str, int]:
    """The fewest ``replicas`` and ``servers`` :func:`surviving_replicas` / :func:`surviving_servers`
    install for ``peak`` replicas, whatever a server holds: one spare replica at least when spares
    are asked for (N+1 at the server spreads ⌈peak ÷ (S − 1)⌉ ≥ 1 of them), and two servers
    when a single point of failure is vetoed (see :func:`_surviving_layout`)."""
    least = _servers_min(spof_allowed)
    return {"replicas": max(int(peak) + min(max(int(spare), 0), 1), least), "servers": least}


@domain_function
def surviving_replicas(gpu: str, peak: int, per_server: int, tp: int, spare: int, spof_allowed: bool,
                       pp: int, region: str) -> int:
    """Replicas to install so the service survives what the availability target asks (see
    :func:`_surviving_layout` and :func:`_priced_layout`): after the fullest server fails the rest
    carry the peak."""
    return _priced_layout(gpu, peak, per_server, tp, spare, spof_allowed, pp, region)[0]


@domain_function
def surviving_servers(gpu: str, peak: int, per_server: int, tp: int, spare: int, spof_allowed: bool,
                      pp: int, region: str) -> int:
    """Servers those replicas are spread over (see :func:`_priced_layout`)."""
    return _priced_layout(gpu, peak, per_server, tp, spare, spof_allowed, pp, region)[1]


@domain_function(reads=(("gpus", 0),))
def has_server(gpu: str) -> bool:
    """True when a catalog server, chassis class, baseboard or edge entry lists this GPU (facts/catalog/
    servers.yaml): without one no orderable configuration can be named, sized or priced."""
    gpus = current().catalog.table("gpus")
    for entry in current().catalog.table("servers"):
        names = list(entry.get("gpu_models") or []) + list(entry.get("max_cards_by_model") or {})
        if any(name in gpus and gpus.get(name)["id"] == gpu for name in names):
            return True
    return False


@domain_function(reads=(("gpus", 0),))
def legacy_gpu(gpu: str) -> bool:
    """True for a GPU of an architecture before Ampere (policy ``legacy_gpu_archs``: no BF16, no
    FlashAttention-2); False for other GPUs and non-NVIDIA accelerators."""
    try:
        arch = str(current().catalog.table("gpus").get(gpu).get("arch") or "")
    except UnknownEntry:
        return False
    archs = current().catalog.table("policies").get("legacy_gpu_archs")["value"]
    return any(arch.startswith(a) for a in archs)


@domain_function(reads=(("gpus", 0),))
def gpus_per_server_max(gpu: str) -> int:
    """The most GPUs (devices) of this model one catalog server takes: a server's per-card limit
    (``max_cards_by_model``, × the card's devices) or its ``gpus_max`` where it lists this GPU; 8 otherwise."""
    gpus = current().catalog.table("gpus")
    found: list[tuple[str, int]] = []
    for entry in current().catalog.table("servers"):
        if entry.get("type") == "edge-module":
            continue
        for name, count in (entry.get("max_cards_by_model") or {}).items():
            try:
                if gpus.get(name)["id"] == gpu:
                    found.append((entry["id"], int(count) * devices_per_card(gpu)))
            except UnknownEntry:
                continue
        if entry.get("max_cards_by_model"):
            continue
        for name in entry.get("gpu_models") or []:
            try:
                if gpus.get(name)["id"] == gpu and entry.get("gpus_max"):
                    found.append((entry["id"], int(entry["gpus_max"])))
            except UnknownEntry:
                continue
    if not found:
        return DEFAULT_GPUS_PER_SERVER
    best = max(found, key=lambda f: f[1])
    note_detail({"function": "gpus_per_server_max", "gpu": gpu, "server": best[0], "result": best[1]})
    return best[1]


@domain_function(memoise=False)
def gpus_within_power(limit_w: float | None, gpu_w: float, host_w: float, overhead: float) -> int:
    """GPUs one server can hold so that (GPUs × gpu_w + host_w) × overhead stays within limit_w."""
    if limit_w is None or gpu_w is None or gpu_w <= 0:
        return DEFAULT_GPUS_PER_SERVER
    return max(0, math.floor((limit_w / overhead - host_w) / gpu_w))
