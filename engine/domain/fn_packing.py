"""Packing several model pools into shared physical servers: the arithmetic only.

The judgements (which isolation level allows which kind of sharing, when a pool may take a MIG slice)
are rules (rules/bom/packing.yaml); this module holds the numbers they call and the bin packing that
``engine/app/pools.py`` runs over the pools' conclusions:

* ``mig_fit`` — the smallest MIG instance that holds one replica *as sized* (weights + KV cache for
  the requests in flight + runtime overhead within the usable share of its memory, the same headroom
  rule as the main sizing) and has the compute share the pool's load needs;
* ``pack_servers`` — first-fit decreasing of whole-GPU groups (a tensor-parallel replica stays in one
  server) and of shared GPUs (MIG slices / MPS shares, first packed onto GPUs) into servers of a
  given capacity; a pool that may not share a server gets servers of its own; a pool that must
  survive a server failure has its replicas spread, and its spare slice in a server apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, domain_function, note_detail

GIB_PER_GB = 1e9 / 2**30
# MIG geometry: (compute slices, memory share) per profile, for GPUs with 7 or 4 instances (NVIDIA
# MIG user guide, e.g. H100 80GB: 1g.10gb, 2g.20gb, 3g.40gb, 7g.80gb; A30: 1g.6gb, 2g.12gb, 4g.24gb).
_MIG_PROFILES = {7: ((1, 1 / 8), (2, 2 / 8), (3, 4 / 8), (7, 1.0)), 4: ((1, 1 / 4), (2, 2 / 4), (4, 1.0))}


def _mig_geometry(gpu: str) -> tuple[int, float, tuple[tuple[int, float], ...]] | None:
    try:
        entry = current().catalog.table("gpus").get(gpu)
    except UnknownEntry:
        return None
    slices, memory = entry.get("mig_max_instances"), entry.get("memory_gb")
    if entry.get("mig") is not True or slices not in _MIG_PROFILES or not memory:
        return None
    return int(slices), float(memory), _MIG_PROFILES[slices]


@domain_function
def mig_fit(gpu: str, weights_gib: float, overhead_gib: float, kv_gib_per_request: float,
            needed_concurrency: float, load_share: float, usable_fraction: float,
            tpot_ms: float | None = None, ttft_ms: float | None = None,
            tpot_target: float | None = None, ttft_target: float | None = None) -> dict[str, Any] | None:
    """The smallest MIG instance (smaller than the whole GPU) of ``gpu`` that holds one replica as
    sized: ``weights + overhead + kv_per_request × concurrency ≤ usable_fraction × instance memory``
    for ``needed_concurrency`` requests in flight, with a compute share ≥ ``load_share`` (the GPUs'
    worth of throughput the pool needs) and, when targets are given, the latency within them:
    ``tpot_ms`` / ``ttft_ms`` (the whole GPU at that concurrency) scaled by the instance's memory
    (bandwidth) and compute share — a first-order estimate. Returns ``{profile, share, memory_share,
    concurrency, tpot_ms, ttft_ms}`` (``concurrency``: the requests in flight the instance holds,
    re-derived from its memory), or None when no instance short of the whole GPU qualifies."""
    geo = _mig_geometry(gpu)
    if geo is None or kv_gib_per_request <= 0:
        return None
    slices, memory, profiles = geo
    for compute, mem_share in profiles:
        if compute >= slices:  # the whole GPU is not a slice
            break
        gb = math.floor(memory * mem_share + 0.5)
        room = gb * GIB_PER_GB * usable_fraction - weights_gib - overhead_gib
        holds = math.floor(room / kv_gib_per_request) if room > 0 else 0
        share = compute / slices
        tpot = tpot_ms / mem_share if tpot_ms is not None else None
        ttft = ttft_ms / share if ttft_ms is not None else None
        fast = ((tpot_target is None or tpot is None or tpot <= tpot_target)
                and (ttft_target is None or ttft is None or ttft <= ttft_target))
        if holds >= needed_concurrency and share >= load_share and fast:
            result = {"profile": f"{compute}g.{gb}gb", "share": round(share, 4), "memory_share": mem_share,
                      "concurrency": int(holds), "tpot_ms": None if tpot is None else round(tpot, 2),
                      "ttft_ms": None if ttft is None else round(ttft, 1)}
            note_detail({"function": "mig_fit", "gpu": gpu, "result": result["profile"],
                         "formula": (f"({gb} GB × {GIB_PER_GB:.4f} GiB/GB × {usable_fraction} − {weights_gib:.1f} GiB "
                                     f"weights − {overhead_gib:.1f} GiB overhead) ÷ {kv_gib_per_request:.3f} GiB "
                                     f"per request = {holds} requests ≥ {needed_concurrency:.0f} needed; compute "
                                     f"{compute}/{slices} ≥ load {load_share:.2f} GPU; TPOT ÷ {mem_share:g}, "
                                     f"TTFT ÷ {share:.3f} within the targets")})
            return result
    return None


@dataclass
class Demand:
    """One pool's GPU demand: ``groups`` whole-GPU groups of ``group_size`` GPUs (one per replica), or
    ``shares`` fractions of one GPU (MIG slices / MPS shares: ``(compute, memory)`` each)."""
    pool: str
    group_size: int = 1
    groups: int = 0
    shares: list[tuple[float, float]] = field(default_factory=list)
    share_label: str | None = None
    own_servers: bool = False
    spread: bool = False  # its replicas must not all sit in one server (a spare replica for availability)
    spare_shares: list[tuple[float, float]] = field(default_factory=list)  # a share pool's spare instances


@dataclass
class Server:
    capacity: int
    gpus: list[list[tuple[str, str]]] = field(default_factory=list)  # per GPU: (pool, what) residents

    @property
    def used(self) -> int:
        return len(self.gpus)

    def pools(self) -> list[str]:
        return sorted({p for g in self.gpus for p, _ in g})


def _shared_gpus(demands: list[Demand], spares: bool = False) -> list[list[tuple[str, str, float, float]]]:
    """First-fit decreasing of the fractional shares (or, with ``spares``, the spare instances) onto
    GPUs (compute and memory both ≤ 1)."""
    items = sorted(((d.pool, d.share_label or "share", c, m) for d in demands if not d.own_servers
                    for c, m in (d.spare_shares if spares else d.shares)),
                   key=lambda it: (-max(it[2], it[3]), it[0]))
    gpus: list[list[tuple[str, str, float, float]]] = []
    for it in items:
        for g in gpus:
            if sum(x[2] for x in g) + it[2] <= 1 + 1e-9 and sum(x[3] for x in g) + it[3] <= 1 + 1e-9:
                g.append(it)
                break
        else:
            gpus.append([it])
    return gpus


def pack_servers(demands: list[Demand], capacity: int) -> list[Server]:
    """Servers of ``capacity`` GPUs holding every demand: pools with ``own_servers`` alone, the rest
    first-fit decreasing (largest group first; a group never spans servers); then a pool that must
    ``spread`` and landed in one server moves one replica to another server (:func:`_spread`).
    Groups are placed by count (how many fit in each server), so the work grows with the servers
    made, not with the replicas times the servers."""
    servers: list[Server] = []
    for d in demands:  # dedicated servers first, in pool order
        if not d.own_servers:
            continue
        first = len(servers)
        _ffd(servers, [(d.group_size, d.groups, (d.pool, "whole GPU"))], capacity, first)
        for _ in d.shares:
            _place(servers, [[(d.pool, d.share_label or "share")]], capacity, first)
        spare_from = len(servers)
        for _ in d.spare_shares:  # a spare instance never shares the server of the one it backs up
            _place(servers, [[(d.pool, d.share_label or "share")]], capacity, spare_from)
        _spread(servers, d, capacity, first)
    start = len(servers)
    _ffd(servers, [(d.group_size, d.groups, (d.pool, "whole GPU")) for d in demands if not d.own_servers],
         capacity, start)
    for shared in _shared_gpus(demands):
        _place(servers, [[(p, w) for p, w, _, _ in shared]], capacity, start)
    spare_from = len(servers)
    for shared in _shared_gpus(demands, spares=True):  # in servers of their own: a server failure
        _place(servers, [[(p, w) for p, w, _, _ in shared]], capacity, spare_from)  # leaves one instance
    for d in demands:
        if not d.own_servers:
            _spread(servers, d, capacity, start)
    return servers


def _spread(servers: list[Server], d: Demand, capacity: int, start: int) -> None:
    """A pool whose whole-GPU replicas all sit in one server although it must ``spread`` (a server
    failure would take every replica, the spare included) moves its last replica to the first
    other server from ``start`` with room for it, else to a new server."""
    if not d.spread or d.groups < 2:
        return
    whole = [(d.pool, "whole GPU")]
    homes = [s for s in servers[start:] if whole in s.gpus]
    if len(homes) != 1:
        return
    src = homes[0]
    mine = [k for k, g in enumerate(src.gpus) if g == whole][-d.group_size:]
    for k in reversed(mine):
        del src.gpus[k]
    moved = [list(whole) for _ in range(d.group_size)]
    for s in servers[start:]:
        if s is not src and s.used + len(moved) <= capacity:
            s.gpus.extend(moved)
            return
    servers.append(Server(capacity, moved))


def _ffd(servers: list[Server], groups: list[tuple[int, int, tuple[str, str]]], capacity: int,
         new_only_from: int) -> None:
    """Whole-GPU groups ``(size, count, resident)``, largest size first (stable among equal sizes);
    a group of n GPUs takes n GPU slots in one server, in the first server from ``new_only_from``
    with room (first-fit), as many groups at once as fit there."""
    for size, count, resident in sorted((g for g in groups if g[1] > 0 and g[0] > 0), key=lambda g: -g[0]):
        left = count
        for s in servers[new_only_from:]:
            fit = min(left, (capacity - s.used) // size)
            if fit > 0:
                s.gpus.extend([resident] for _ in range(fit * size))
                left -= fit
                if not left:
                    break
        per_server = max(1, capacity // size)
        while left > 0:
            fit = min(left, per_server)
            servers.append(Server(capacity, [[resident] for _ in range(fit * size)]))
            left -= fit


def _place(servers: list[Server], gpus: list[list[tuple[str, str]]], capacity: int, start: int) -> None:
    for s in servers[start:]:
        if s.used + len(gpus) <= capacity:
            s.gpus.extend(gpus)
            return
    servers.append(Server(capacity, list(gpus)))


def gpu_share_of(server: Server, pool: str) -> float:
    """The GPUs' worth of this server a pool uses (shared GPUs split by resident count)."""
    return sum(sum(1 for p, _ in g if p == pool) / len(g) for g in server.gpus)
