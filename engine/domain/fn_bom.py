"""Domain functions for the bill of materials: which server SKU holds a GPU, and what the parts cost.

Generic mechanics only: the server SKUs, their pricing basis (``pricing`` in servers.yaml) and the
dated market prices (market-prices.yaml) are catalog data. Every line carries a price range
``[low, high]`` in CNY, its source and date; the expected price is the midpoint of the range
(``ESTIMATOR``). A part without a sourced price is listed with ``unit_price_cny: null`` and an
``unpriced`` reason, never with an invented number.
"""

from __future__ import annotations

from typing import Any

from servewise.engine.common.limits import check_text
from servewise.engine.domain.catalog import UnknownEntry, normalise_name
from servewise.engine.domain.functions import cards_for, current, devices_per_card, domain_function, note_detail

ESTIMATOR = "midpoint of each line's sourced [low, high] range"
BOARD_FORMS = ("SXM", "OAM")  # GPUs that come only on 4- or 8-GPU baseboards
SKU_TYPES = ("baseboard", "system", "chassis-class", "edge-module")
_TYPE_ORDER = {"baseboard": 0, "chassis-class": 1, "system": 2, "edge-module": 3}
_TABLES = ("gpus", "servers", "cpus", "ssds", "nics", "switches")


def _gpu_id(name: str) -> str | None:
    try:
        return current().catalog.gpu(name)["id"]
    except UnknownEntry:
        return None


def _capacity(entry: dict[str, Any], gpu: str) -> int | None:
    """GPUs (devices) of this model the server entry takes (its per-card limit × the card's devices,
    or gpus_max), None if not listed."""
    for name, count in (entry.get("max_cards_by_model") or {}).items():
        if _gpu_id(name) == gpu:
            return int(count) * devices_per_card(gpu)
    if entry.get("max_cards_by_model"):
        return None
    if any(_gpu_id(n) == gpu for n in entry.get("gpu_models") or []) and entry.get("gpus_max"):
        return int(entry["gpus_max"])
    return None


def _skus(gpu: str) -> list[tuple[dict[str, Any], int]]:
    """Server SKUs (baseboards, systems, chassis classes) that take this GPU, with their capacity,
    in preference order: OEM-neutral baseboards and chassis classes before named systems, smaller first.
    Remembered per run (a function of the GPU and the catalog); each caller gets its own list."""
    cache = current().cache
    found = cache.get(("skus", gpu))
    if found is None:
        found = cache[("skus", gpu)] = _find_skus(gpu)
    return list(found)


def _find_skus(gpu: str) -> list[tuple[dict[str, Any], int]]:
    out = []
    for entry in current().catalog.table("servers"):
        if entry.get("type") not in SKU_TYPES:
            continue
        cap = _capacity(entry, gpu)
        if cap:
            out.append((entry, cap))
    return sorted(out, key=lambda ec: (_TYPE_ORDER[ec[0]["type"]], ec[1]))


def _on_board(gpu: str) -> bool:
    try:
        return current().catalog.gpu(gpu).get("form_factor") in BOARD_FORMS
    except UnknownEntry:
        return False


def _board_fits(gpu: str, size: int, power_cap: int, limit_w: float | None) -> bool:
    """A whole board of ``size`` GPUs fits the GPU count the site allows and, where a comparable OEM
    system has a sourced maximum power (e.g. DGX H100/H200 10.2 kW), that maximum fits ``limit_w``."""
    if size > power_cap:
        return False
    if limit_w is None:
        return True
    from servewise.engine.domain.fn_facilities import reference_system
    ref = reference_system(gpu, size)
    ref_w = current().catalog.table("servers").get(ref).get("max_power_w") if ref else None
    return ref_w is None or ref_w <= limit_w


@domain_function(reads=(("gpus", 0),))
def server_capacity(gpu: str, power_cap: int, limit_w: float | None = None) -> int:
    """Most GPUs of this model one orderable server holds within ``power_cap`` GPUs (and ``limit_w``
    watts): for SXM/OAM the largest whole board that fits (0 if none does); for PCIe cards the
    largest chassis, capped."""
    sizes = [cap for _, cap in _skus(gpu)]
    if not sizes:
        return min(8, int(power_cap))
    if _on_board(gpu):
        fitting = [s for s in sizes if _board_fits(gpu, s, power_cap, limit_w)]
        return max(fitting) if fitting else 0
    return min(max(sizes), int(power_cap))


@domain_function(reads=(("gpus", 0),))
def smallest_board(gpu: str) -> int | None:
    """GPUs on the smallest orderable board of an SXM/OAM GPU (None for PCIe cards)."""
    if not _on_board(gpu):
        return None
    sizes = [cap for _, cap in _skus(gpu)]
    return min(sizes) if sizes else None


@domain_function(reads=(("gpus", 0),))
def server_gpus(gpu: str, needed: int, power_cap: int, limit_w: float | None = None) -> int:
    """GPUs installed per server: PCIe cards as needed; SXM/OAM a whole board — the smallest board
    that holds ``needed`` within ``power_cap`` (and ``limit_w``), else the largest that fits (never a
    partial board)."""
    needed = int(needed)
    if not _on_board(gpu):
        return needed
    sizes = sorted({cap for _, cap in _skus(gpu) if _board_fits(gpu, cap, power_cap, limit_w)})
    for size in sizes:
        if size >= needed:
            return size
    return sizes[-1] if sizes else needed


@domain_function(reads=(("gpus", 0),))
def server_sku(gpu: str, per_server: int) -> str | None:
    """The catalog server SKU (id) for ``per_server`` GPUs of this model: the first SKU in preference
    order whose capacity holds them (a baseboard's capacity must equal the GPUs fitted)."""
    for entry, cap in _skus(gpu):
        if cap < per_server:
            continue
        if entry["type"] in ("baseboard", "system") and _on_board(gpu) and cap != per_server:
            continue
        note_detail({"function": "server_sku", "gpu": gpu, "per_server": per_server,
                     "result": entry["id"], "capacity": cap})
        return entry["id"]
    return None


# ------------------------------------------------------------------------------------------- prices

def _canonical(part: str) -> str:
    """Catalog id a part name resolves to (through aliases), else its normalised name."""
    cat = current().catalog
    for kind in _TABLES:
        table = cat.table(kind)
        if part in table:
            return f"{kind}:{table.get(part)['id']}"
    return normalise_name(part)


def _price_index() -> dict[tuple[str, str], tuple[dict[str, Any], str | None]]:
    """(part key, region) → (market entry, the covered name it was reached through or None). An
    entry's own part wins over another entry's ``covers`` (the part-class → price mapping)."""
    ctx = current()
    if "market_index" not in ctx.cache:
        index: dict[tuple[str, str], tuple[dict[str, Any], str | None]] = {}
        entries = list(ctx.catalog.table("market-prices"))
        for entry in entries:
            key = (_canonical(str(entry.get("part", ""))), str(entry.get("region", "")))
            index.setdefault(key, (entry, None))
        for entry in entries:
            for name in entry.get("covers") or []:
                index.setdefault((_canonical(str(name)), str(entry.get("region", ""))), (entry, str(name)))
        ctx.cache["market_index"] = index
    return ctx.cache["market_index"]


def _market_line(entry: dict[str, Any], fallback_region: bool, via: str | None = None,
                 size_tb: float | None = None) -> dict[str, Any]:
    refs = [s.get("ref") for s in entry.get("sources") or [] if s.get("ref")]
    note = f"{entry['id']} ({entry.get('status', 'estimate')}"
    note += ", price of the other market: none sourced for this one)" if fallback_region else ")"
    if via:
        note += f", priced as {entry['part']}"
    low, high = float(entry["low_cny"]), float(entry["high_cny"])
    if entry.get("per_tb") or entry.get("per_gb"):
        unit = "TB" if entry.get("per_tb") else "GB"
        note += f" × {size_tb:g} {unit}"
        low, high = round(low * float(size_tb or 0), 0), round(high * float(size_tb or 0), 0)
    return {"unit_price_cny": [low, high],
            "source": note + (": " + refs[0] if refs else ""), "date": str(entry.get("date", "")),
            "status": entry.get("status", "estimate")}


@domain_function
def market_price(part: str, region: str, size_tb: float | None = None) -> dict[str, Any] | None:
    """Dated market price of a part for a region (market-prices.yaml), directly or through an
    entry's ``covers`` (part class → price entry): ``{unit_price_cny: [low, high], source, date,
    status}``; the other region's price, marked, when this one has none. A per-TB (``per_tb``) or
    per-GB (``per_gb``) entry needs the part's size in that unit (``size_tb``) and is None without it."""
    index = _price_index()
    key = _canonical(part)
    for reg, fallback in ((region, False), ("global" if region == "cn" else "cn", True)):
        found = index.get((key, reg))
        if not found:
            continue
        entry, via = found
        if entry.get("low_cny") is None or entry.get("high_cny") is None:
            continue
        if (entry.get("per_tb") or entry.get("per_gb")) and not size_tb:
            continue
        return _market_line(entry, fallback, via, size_tb)
    return None


def _seed_card_price(gpu: str) -> dict[str, Any] | None:
    for entry in current().catalog.table("prices"):
        if entry.get("kind") == "gpu-card" and _gpu_id(str(entry.get("refers_to") or entry.get("gpu") or "")) == gpu \
                and entry.get("min_cny") is not None:
            lo, hi = float(entry["min_cny"]), float(entry.get("max_cny") or entry["min_cny"])
            return {"unit_price_cny": [lo, hi], "source": f"{entry['id']} (seed card price)",
                    "date": str(entry.get("date", "")), "status": "seed"}
    return None


def gpu_price(gpu: str, region: str) -> dict[str, Any] | None:
    """Price of one GPU card/module: the market file, else the seeds' card price."""
    return market_price(gpu, region) or _seed_card_price(gpu)


def _line(part: str, category: str, qty: float, price: dict[str, Any] | None,
          unpriced: str | None = None, included_in: str | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {"part": part, "category": category, "qty": int(round(qty))}
    if included_in:
        line.update({"unit_price_cny": [0.0, 0.0], "source": f"included in {included_in}", "date": "",
                     "included_in": included_in})
    elif price:
        line.update({k: price[k] for k in ("unit_price_cny", "source", "date")})
    else:
        line.update({"unit_price_cny": None, "source": f"unpriced: {unpriced or 'no sourced price'}",
                     "date": ""})
    return line


def _pricing(sku: str | None) -> dict[str, Any]:
    if not sku:
        return {}
    try:
        return current().catalog.table("servers").get(sku).get("pricing") or {}
    except UnknownEntry:
        return {}


def _platform(sku: str | None, region: str) -> tuple[str, dict[str, Any] | None, list[str]]:
    """The SKU's GPU-less platform part, its price (market, else the SKU's marked estimate) and
    the categories it includes."""
    pricing = _pricing(sku)
    part = pricing.get("platform_part") or (f"{sku} platform (no GPUs)" if sku else "server platform")
    price = market_price(part, region)
    est = pricing.get("platform_estimate")
    if price is None and est:
        price = {"unit_price_cny": [float(est["low_cny"]), float(est["high_cny"])],
                 "source": f"estimate in servers.yaml ({sku}): {est.get('note', '')}",
                 "date": str(est.get("date", "")), "status": "estimate"}
    return part, price, list(pricing.get("platform_includes") or [])


def _complete(sku: str | None, gpu: str, per_server: int, region: str) -> tuple[str, dict[str, Any]] | None:
    """A whole-server price (GPUs included) for the SKU when it is fully populated: preferred for named
    systems, used for boards whose platform has no price of its own."""
    pricing = _pricing(sku)
    part = pricing.get("complete_part")
    if not part or not sku:
        return None
    entry = current().catalog.table("servers").get(sku)
    if (_capacity(entry, _gpu_id(gpu) or gpu) or 0) != int(per_server):
        return None
    price = market_price(part, region)
    if price is None:
        return None
    _, platform, _ = _platform(sku, region)
    if entry.get("type") == "system" or platform is None:
        return part, price
    return None


@domain_function
def candidate_capex(gpu: str, gpus: int, servers: int, per_server: int, region: str,
                    which: str = "mid") -> float | None:
    """First-order purchase cost used to rank candidates: GPUs + server platforms (the lines that
    differ between candidates) + the host parts a bare platform leaves out, ``which`` = low | mid |
    high; None when the GPU has no price. A platform that does not include the CPUs or the memory
    gets, per server, the policy's reference host CPU in the sockets it ships and half of its GPUs'
    memory (at least the policy's minimum) in DDR5 at the market's per-GB price — the sizes the BOM
    rules buy, so a cheaper barebone never wins by leaving its host out of the comparison."""
    idx = {"low": 0, "high": 1}
    pick = (lambda r: r[idx[which]]) if which in idx else (lambda r: (r[0] + r[1]) / 2)
    sku = server_sku(gpu, per_server)
    whole = _complete(sku, gpu, per_server, region)
    if whole:
        return servers * pick(whole[1]["unit_price_cny"])
    price = gpu_price(gpu, region)
    if price is None:
        return None
    _, platform, includes = _platform(sku, region)
    total = cards_for(gpu, gpus) * pick(price["unit_price_cny"])
    if platform:
        total += servers * pick(platform["unit_price_cny"])
        total += servers * _host_parts(sku, gpu, per_server, region, includes, pick)
    return total


def _host_parts(sku: str | None, gpu: str, per_server: int, region: str, includes: list[str],
                pick: Any) -> float:
    """What a server's CPUs and memory add when its platform price leaves them out (see candidate_capex)."""
    policies = current().catalog.table("policies")
    extra = 0.0
    if "cpu" not in includes:
        sockets = int(current().catalog.table("servers").get(sku).get("cpu_sockets_min") or 1) if sku else 1
        cpu = market_price(str(policies.get("candidate_host_cpu")["value"]), region)
        extra += sockets * pick(cpu["unit_price_cny"]) if cpu else 0.0
    if "memory" not in includes:
        memory_gb = float(current().catalog.gpu(gpu).get("memory_gb") or 0) if _gpu_id(gpu) else 0.0
        need = max(per_server * memory_gb / 2, float(policies.get("candidate_host_memory_min_gb")["value"]))
        per_gb = market_price("DDR5 RDIMM per GB", region, 1.0)
        extra += need * pick(per_gb["unit_price_cny"]) if per_gb else 0.0
    return extra


BOM_ARGS = ("gpu", "gpus", "servers", "sku", "region", "cpu", "sockets", "mem_type", "dimm_gb", "dimms", "data_ssd",
            "data_ssds", "system_ssds", "nic", "nics", "switch", "switches", "cooling", "data_ssd_tb",
            "spine", "spines", "dac_links", "aoc_links", "uplinks", "front_nic", "front_switches",
            "front_links", "tp", "replicas")


def nvlink_bridge(gpu: str, tp: int) -> str | None:
    """The NVLink bridge a tensor-parallel group of ``tp`` PCIe cards needs for the link the
    performance model gives it (catalog ``nvlink_bridge_gpus``: the cards one bridge joins), e.g.
    ``NVLink bridge 2-way (H200 NVL)``; None for one card, cards without a bridge, or a group wider
    than one bridge (it all-reduces over PCIe: rules/bom/interconnect.yaml)."""
    try:
        joins = current().catalog.table("gpus").get(gpu).get("nvlink_bridge_gpus")
    except UnknownEntry:
        return None
    if not joins or tp < 2 or tp > int(joins):
        return None
    return f"NVLink bridge {tp}-way ({gpu})"


def network_lines(region: str, nic: str | None, switch: str | None, switches: int, spine: str | None,
                  spines: int, dac_links: int, aoc_links: int, uplinks: int) -> list[dict[str, Any]]:
    """The switches and cables of a network (a plan's, or the shared servers' of a several-model
    plan): the leaf ``switch``es, the ``spine``s joining their groups, and for a ``nic`` the copper
    links inside a group's racks, the optical cables across racks and the 100G uplinks."""
    lines: list[dict[str, Any]] = []

    def add(part: str | None, category: str, qty: int) -> None:
        if part and qty:
            lines.append(_line(part, category, qty, market_price(part, region),
                               unpriced=f"no sourced {region} price for {part} in market-prices.yaml "
                                        "(its part or a price class covering it)"))

    add(switch, "switch", switches)
    add(spine, "switch", spines)
    if nic:
        add(f"{nic} optics/cable", "optics", int(dac_links))
        add(f"{nic} cross-rack cable", "optics", aoc_links)
        add("100g uplink cable", "optics", uplinks)
    return lines


@domain_function
def bom_lines(*args: Any) -> list[dict[str, Any]]:
    """Bill of materials of the chosen configuration, from the parts and counts named in ``BOM_ARGS``
    order (per-server counts for sockets, DIMMs, drives and NICs; totals for GPUs and switches)."""
    spec = dict(zip(BOM_ARGS, args + (None,) * (len(BOM_ARGS) - len(args)), strict=True))
    region = str(spec.get("region") or "cn")
    servers = int(spec.get("servers") or 0)
    sku = spec.get("sku")
    lines: list[dict[str, Any]] = []
    gpu = str(spec["gpu"])
    per_server = int(spec["gpus"]) // max(servers, 1)
    part, platform, includes = _platform(sku, region)
    whole = _complete(sku, gpu, per_server, region)
    if whole:
        lines.append(_line(whole[0], "server", servers, whole[1]))
        card = gpu_price(gpu, region)
        per = devices_per_card(gpu)
        lines.append(_line(gpu if per == 1 else f"{gpu} card ({per} devices each)", "gpu",
                           cards_for(gpu, int(spec["gpus"])), None, included_in=whole[0]))
        if card:
            lines[-1]["alone_cny"] = list(card["unit_price_cny"])
        inc: str | None = whole[0]
        includes = includes or ["cpu", "memory", "ssd-system", "nic-frontend"]
    else:
        price = gpu_price(gpu, region)
        per = devices_per_card(gpu)
        card = gpu if per == 1 else f"{gpu} card ({per} devices each)"
        lines.append(_line(card, "gpu", cards_for(gpu, int(spec["gpus"])), price,
                           unpriced=f"no sourced {region} price for {gpu} (market-prices.yaml, seeds)"))
        pline = _line(part, "platform", servers, platform,
                      unpriced=f"no sourced price for the {sku or 'server'} platform without GPUs")
        lines.append(pline)
        inc = pline["part"] if platform else None

    def add(part_name: str | None, category: str, qty: float, lookup: str | None = None,
            size_tb: float | None = None) -> None:
        if not part_name or not qty:
            return
        if category in includes and inc:
            line = _line(part_name, category, qty, None, included_in=inc)
            own = market_price(lookup or part_name, region, size_tb)
            if own:  # shown for the buyer's negotiation, not added (the platform price covers it)
                line["source"] += " (bought alone: {:,.0f}-{:,.0f} CNY each, {})".format(
                    *own["unit_price_cny"], own["source"].split(":")[0])
                line["alone_cny"] = list(own["unit_price_cny"])
            lines.append(line)
            return
        lines.append(_line(part_name, category, qty, market_price(lookup or part_name, region, size_tb),
                           unpriced=f"no sourced {region} price for {lookup or part_name} in market-prices.yaml "
                                    "(its part or a price class covering it)"))

    add(spec.get("cpu"), "cpu", servers * int(spec.get("sockets") or 0))
    if spec.get("dimm_gb"):
        add(f"{spec.get('mem_type') or 'DDR5 RDIMM'} {int(spec['dimm_gb'])}GB", "memory",
            servers * int(spec.get("dimms") or 0), size_tb=float(spec["dimm_gb"]))
    ssd_tb = float(spec["data_ssd_tb"]) if spec.get("data_ssd_tb") else None
    add(f"{spec['data_ssd']} {ssd_tb:g} TB" if spec.get("data_ssd") and ssd_tb else spec.get("data_ssd"), "ssd",
        servers * int(spec.get("data_ssds") or 0), lookup=spec.get("data_ssd"), size_tb=ssd_tb)
    add("system-ssd-480gb", "ssd-system", servers * int(spec.get("system_ssds") or 0))
    nic = spec.get("nic")
    add(nic, "nic-frontend" if nic and str(nic).startswith("ethernet") else "nic",
        servers * int(spec.get("nics") or 0))
    cabled = bool(spec.get("nic") and spec.get("nics") and (spec.get("switch") or spec.get("front_nic")))
    # the cabling as laid out (copper in a rack, optical across), else one cable per NIC port
    dac = spec["dac_links"] if spec.get("dac_links") is not None else servers * int(spec.get("nics") or 0)
    lines += network_lines(region, spec.get("nic") if cabled else None, spec.get("switch"),
                           int(spec.get("switches") or 0), spec.get("spine"), int(spec.get("spines") or 0),
                           dac, int(spec.get("aoc_links") or 0), int(spec.get("uplinks") or 0))
    if spec.get("front_nic"):  # a fabric plan's front-end Ethernet (clients, model files, management)
        front = str(spec["front_nic"])
        add(front, "nic-frontend", servers)
        add("ToR Ethernet switch (any vendor)", "switch", int(spec.get("front_switches") or 0))
        add(f"{front} cross-rack cable", "optics", int(spec.get("front_links") or 0))
    bridge = nvlink_bridge(gpu, int(spec.get("tp") or 1))
    if bridge:  # a PCIe card's NVLink: one bridge set per tensor-parallel group, bought with the cards
        add(bridge, "interconnect", int(spec.get("replicas") or 0))
    if spec.get("cooling") == "liquid":
        base = [ln for ln in lines if ln["category"] in ("gpu", "platform", "server") and ln["unit_price_cny"]]
        per_server = [sum(ln["qty"] * ln["unit_price_cny"][i] for ln in base) / max(servers, 1)
                      for i in (0, 1)]
        lines.append({"part": "liquid cooling premium (cold plates, manifolds; per server)",
                      "category": "cooling", "qty": servers,
                      "unit_price_cny": [round(per_server[0] * 0.15, 0), round(per_server[1] * 0.25, 0)],
                      "source": "price-liquid-cooling-premium: +15-25% of the GPU and platform price (seed G-COOL-004)",
                      "date": ""})
    note_detail({"function": "bom_lines", "metric": f"capex estimator: {ESTIMATOR}",
                 "steps": [{"name": f"{ln['qty']} × {ln['part']}", "formula": "unit price",
                            "result": ("unpriced" if not ln["unit_price_cny"] else
                                       "{:,.0f}-{:,.0f} CNY".format(*ln["unit_price_cny"]))
                            + f" — {ln['source']}" + (f" ({ln['date']})" if ln["date"] else "")}
                           for ln in lines]})
    return lines


@domain_function
def platform_shortfalls(lines: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Priced lines (platforms, whole servers) whose low price is below the low prices of the parts
    the BOM says they include, bought alone (issue #37: a platform never costs less than its parts):
    ``{part, price_cny, parts_cny, parts}`` per such line, totals over its quantity."""
    out: list[dict[str, Any]] = []
    for ln in lines or []:
        rng = ln.get("unit_price_cny")
        if ln["category"] not in ("platform", "server") or not rng:
            continue
        inside = [x for x in lines or [] if x.get("included_in") == ln["part"] and x.get("alone_cny")]
        parts = sum(x["qty"] * float(x["alone_cny"][0]) for x in inside)
        price = ln["qty"] * float(rng[0])
        if inside and price < parts:
            out.append({"part": ln["part"], "price_cny": round(price, 0), "parts_cny": round(parts, 0),
                        "parts": [f"{x['qty']} × {x['part']}" for x in inside]})
    return out


@domain_function
def bom_total(lines: list[dict[str, Any]], which: str = "mid") -> float:
    """Σ qty × unit price over the priced lines: ``low``, ``high`` or ``mid`` (the midpoint)."""
    total = 0.0
    for ln in lines or []:
        rng = ln.get("unit_price_cny")
        if not rng:
            continue
        unit = rng[0] if which == "low" else rng[1] if which == "high" else (rng[0] + rng[1]) / 2
        total += ln["qty"] * unit
    return round(total, 0)


@domain_function
def bom_unpriced(lines: list[dict[str, Any]]) -> list[str]:
    """Parts of the BOM without a sourced price (they are not in the capex)."""
    return [ln["part"] for ln in lines or [] if not ln.get("unit_price_cny")]


@domain_function
def bom_category_total(lines: list[dict[str, Any]], categories: list[str], which: str = "mid") -> float:
    """Σ of the lines in these categories (e.g. the GPU + platform share of the capex)."""
    return bom_total([ln for ln in lines or [] if ln["category"] in categories], which)


@domain_function(reads=(("gpus", 0),))
def gpu_unit_price(gpu: str, region: str, which: str = "mid") -> float | None:
    """Price of one GPU for a region (low | mid | high of its sourced range), None when unpriced."""
    price = gpu_price(gpu, region)
    if price is None:
        return None
    lo, hi = price["unit_price_cny"]
    return lo if which == "low" else hi if which == "high" else (lo + hi) / 2


@domain_function(reads=(("gpus", 0),))
def cost_floor(gpu: str, replicas: int, gpus_per_replica: int, spare: int, spof_allowed: bool,
               region: str) -> float:
    """The least a configuration of ``replicas`` replicas of ``gpus_per_replica`` GPUs can cost:
    the fewest replicas and servers the availability target installs for them
    (fn_server.installed_floor) at the least any catalogued way of buying them costs
    (:func:`capex_floor`); 0 when nothing is priced (the candidate is then never bounded out)."""
    from servewise.engine.domain.fn_server import installed_floor

    least = installed_floor(replicas, spare, spof_allowed)
    value = capex_floor(gpu, least["replicas"] * int(gpus_per_replica), region, least["servers"]) or 0.0
    note_detail({"function": "cost_floor", "result": value,
                 "formula": f"{least['replicas']} replicas installed × {gpus_per_replica} GPU(s) in at least "
                            f"{least['servers']} server(s), bought the least costly catalogued way"})
    return value


@domain_function(reads=(("gpus", 0),))
def capex_floor(gpu: str, gpus: int, region: str, servers_min: int = 1) -> float | None:
    """The least :func:`candidate_capex` can be for at least ``gpus`` GPUs of this model, whatever
    servers hold them: for each server SKU that takes it (capacity c) at least ``ceil(gpus / c)``
    servers (and ``servers_min``), bought whole at the SKU's complete price, or as the cards plus
    each server's platform and the least host parts it leaves out (one GPU's share of memory); the
    lowest of these. More GPUs, more servers or fuller ones only cost more. None when nothing is
    priced."""
    card, ways = _floor_prices(gpu, region)
    cards = cards_for(gpu, int(gpus)) * card if card is not None else None
    options: list[float] = []
    for cap, whole, platform in ways:
        servers = max(-(-int(gpus) // cap), int(servers_min))
        if whole is not None:
            options.append(servers * whole)
        if cards is not None:
            options.append(cards + servers * platform)
    if not options and cards is not None:
        options.append(cards)
    return min(options) if options else None


@domain_function(reads=(("gpus", 0),))
def gpu_floor_price(gpu: str, region: str) -> float | None:
    """The least any configuration of this GPU pays per GPU at the midpoint prices
    :func:`candidate_capex` ranks with: the card's price over the devices on it, or a whole
    server's price over the GPUs it holds (a platform and host parts only add). A replica of n GPUs
    costs at least n times this, however its servers are shared. None when nothing is priced."""
    card, ways = _floor_prices(gpu, region)
    floors = [card / devices_per_card(gpu)] if card is not None else []
    floors += [whole / cap for cap, whole, _ in ways if whole is not None]
    return min(floors) if floors else None


def _floor_prices(gpu: str, region: str) -> tuple[float | None, list[tuple[int, float | None, float]]]:
    """What :func:`capex_floor` adds up, once per GPU and market (midpoints): the card's price, and
    per server SKU taking it (capacity, its whole-system price or None, its platform with the least
    host parts, 0 for a priceless platform)."""
    cache = current().cache
    key = ("floor_prices", gpu, region)
    if key not in cache:
        gid = _gpu_id(gpu) or gpu
        price = gpu_price(gpu, region)

        def mid(r: list[float]) -> float:
            return (r[0] + r[1]) / 2

        ways = []
        for entry, cap in _skus(gid):
            whole = _complete(entry["id"], gid, cap, region)
            _, platform, includes = _platform(entry["id"], region)
            ways.append((cap, mid(whole[1]["unit_price_cny"]) if whole else None,
                         mid(platform["unit_price_cny"]) + _host_parts(entry["id"], gid, 1, region, includes, mid)
                         if platform else 0.0))
        cache[key] = (mid(price["unit_price_cny"]) if price else None, ways)
    return cache[key]


@domain_function(reads=(("gpus", 0),))
def gpu_price_source(gpu: str, region: str) -> str | None:
    """Where the GPU's price comes from (market entry id and status, or the seed price id)."""
    price = gpu_price(gpu, region)
    return price["source"] if price else None


@domain_function(reads=(("servers", 0),))
def server_label(sku: str | None, gpu: str, per_server: int, gpus: int | None = None,
                 servers: int | None = None) -> str:
    """How a plan names its server: the SKU, its form and the GPUs fitted of its capacity.

    With the plan's ``gpus`` and ``servers``, a last server holding fewer GPUs than the others
    (14 GPUs in two 8-slot servers: 8 and 6) is named, so the order lists what each server
    gets."""
    last = None
    if gpus is not None and servers is not None and servers > 1:
        rest = int(gpus) - (int(servers) - 1) * int(per_server)
        last = rest if 0 < rest < per_server else None
    tail = f"; the last server {last}" if last is not None else ""
    if not sku:
        return f"{per_server}-GPU PCIe server (no catalog SKU holds {gpu}){tail}"
    entry = current().catalog.table("servers").get(sku)
    cap = _capacity(entry, _gpu_id(gpu) or gpu) or entry.get("gpus_max")
    per = devices_per_card(gpu)
    if per > 1:  # cards of several devices: slots hold cards, the plan counts devices
        return (f"{entry['id']} ({entry.get('form')}; {cards_for(gpu, per_server)} of {int(cap) // per} card slots "
                f"fitted, {per_server} devices{tail})")
    kind = "GPUs on the board" if entry.get("type") == "baseboard" else "GPU slots"
    return f"{entry['id']} ({entry.get('form')}; {per_server} of {cap} {kind} fitted{tail})"


# ------------------------------------------------------------------------------------- availability

def _availability(part: str, region: str) -> dict[str, Any] | None:
    key = _canonical(part)
    for entry in current().catalog.table("availability"):
        if entry.get("region") == region and _canonical(str(entry.get("part", ""))) == key:
            return entry
    return None


@domain_function
def availability_status(part: str, region: str) -> str:
    """available | limited | restricted | discontinued for a part in a region (availability.yaml);
    'available' for global parts without an entry (the file's convention), else 'unknown'."""
    entry = _availability(part, region)
    if entry:
        return str(entry["status"])
    return "available" if region == "global" else "unknown"


@domain_function
def availability_fact(part: str, region: str) -> dict[str, str]:
    """The dated availability fact of a part in a region, with its entry id, for warnings: one
    value in both languages (``{"en": …, "zh": …}``; a sentence shows the reader's)."""
    from servewise.engine.common.messages import both, message

    entry = _availability(part, region)
    if not entry:
        return both("availability.none", part=part, region=region)
    lead = entry.get("lead_time_weeks")
    out = {}
    for lang, key, stop in (("en", "fact", "."), ("zh", "fact_zh", "。")):
        fact = " ".join(str(entry.get(key) or entry["fact"]).split()).rstrip(stop)
        lead_text = message("availability.lead", lang, lo=lead[0], hi=lead[1]) if lead else ""
        out[lang] = message("availability.fact", lang, status=message(f"availability.{entry['status']}", lang),
                            date=entry["date"], id=entry["id"], fact=fact, lead=lead_text)
    return out


@domain_function(memoise=False)
def cny(value: float | None) -> str:
    """A CNY amount as plans print it: thousands separators, no decimals ('—' when unknown)."""
    return "—" if value is None else f"{float(value):,.0f}"


# ------------------------------------------------------------------------------- seed cross-checks

def seed_server_prices(gpu: str, per_server: int) -> list[dict[str, Any]]:
    """The seeds' whole-server prices (prices.yaml, kind server, new) for ``per_server`` × this GPU."""
    out = []
    for entry in current().catalog.table("prices"):
        if entry.get("kind") != "server" or "used" in str(entry.get("unit", "")):
            continue
        if _gpu_id(str(entry.get("gpu") or entry.get("refers_to") or "")) != _gpu_id(gpu):
            continue
        count = entry.get("gpu_count")
        counts = count if isinstance(count, list) else [count]
        if int(per_server) in [int(c) for c in counts if c is not None] and entry.get("min_cny") is not None:
            out.append(entry)
    return out


@domain_function
def seed_price_check(gpu: str, per_server: int, low: float, high: float) -> str | None:
    """How the BOM's per-server price [low, high] compares with the seeds' whole-server prices for
    the same configuration; None when no seed prices it. Ranges that do not overlap are named."""
    found = seed_server_prices(gpu, per_server)
    if not found:
        return None
    parts = []
    for entry in found:
        lo = float(entry["min_cny"])
        hi = float(entry.get("max_cny") or lo)
        if high < lo:
            verdict = "the BOM is below it" + _why_apart(entry, gpu, per_server, above=False)
        elif low > hi:
            verdict = "the BOM is above it" + _why_apart(entry, gpu, per_server, above=True)
        else:
            verdict = "the ranges overlap"
        parts.append(f"{entry['id']} {lo:,.0f}-{hi:,.0f} CNY: {verdict}")
    return f"{per_server} × {gpu} per server, BOM {low:,.0f}-{high:,.0f} CNY vs " + "; ".join(parts)


def _why_apart(seed: dict[str, Any], gpu: str, per_server: int, above: bool) -> str:
    """Why a seed's whole-server price and the BOM do not overlap: the dates and status of the two
    figures, and (BOM above) whether the seed's server price is below its own cards' seed price."""
    market = market_price(gpu, "cn") or _seed_card_price(gpu)
    why = []
    if market:
        why.append(f"the BOM's {gpu} price is {market.get('status', 'estimate')} ({market.get('date') or 'undated'}), "
                   f"the seed's server price {seed.get('date') or 'undated'}")
    card = _seed_card_price(gpu)
    if above and card and per_server * card["unit_price_cny"][0] > float(seed.get("max_cny") or seed["min_cny"]):
        why.append(f"{per_server} × the seeds' own card price ({card['unit_price_cny'][0]:,.0f}) already exceeds it")
    if not above and market and market.get("status") == "estimate":
        why.append("the BOM's card price is an estimate; use the seed figure as a check on it")
    return " (" + "; ".join(why) + ")" if why else ""


@domain_function
def foreign_parts(lines: list[dict[str, Any]] | None) -> list[str]:
    """BOM parts bought separately (not included in a server price) whose catalog entry is marked
    ``domestic: false`` — what a domestic-compliance (信创) bill of materials must still replace."""
    cat = current().catalog
    out: list[str] = []
    for ln in lines or []:
        if str(ln.get("source", "")).startswith("included in"):
            continue
        name = str(ln["part"])
        for kind in ("gpus", "servers", "cpus", "ssds", "nics", "switches"):
            table = cat.table(kind)
            entry = None
            for probe in (name, " ".join(name.split()[:-2]) if name.endswith(" TB") else name):
                if probe in table:
                    entry = table.get(probe)
                    break
            if entry is not None:
                if entry.get("domestic") is False and name not in out:
                    out.append(name)
                break
    return out


def _joined_size(items: Any = None, sep: Any = ", ", *_rest: Any) -> None:
    """``joined(items, sep)`` repeats ``sep`` between the items: a text of a million characters
    between 20,000 items is 20 GB, so the separators' total length is checked before joining
    (the items' texts are bounded by the items' own size; the result is measured as it returns)."""
    if not isinstance(sep, str):
        raise ValueError(f"joined(): the separator must be text, got {type(sep).__name__}")
    if isinstance(items, (list, tuple)) and len(items) > 1:
        check_text(len(sep) * (len(items) - 1), "joined()")


@domain_function(memoise=False, size_check=_joined_size)
def joined(items: list[Any] | None, sep: str = ", ") -> str:
    """The items of a list as one text, ``sep`` between them ('' for an empty list)."""
    return sep.join(str(i) for i in items or [])
