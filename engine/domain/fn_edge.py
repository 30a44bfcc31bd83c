"""Domain functions for edge deployments: the catalog module system that carries an edge GPU."""

from __future__ import annotations

from typing import Any

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, domain_function, note_detail


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


def _mode_ratios(mode: dict[str, Any], top: dict[str, Any]) -> tuple[float | None, float | None]:
    """The mode's GPU compute (enabled TPCs × maximum GPU clock) and memory-clock (EMC) ratios to
    the module's fastest mode; None where the catalog gives no figure."""
    try:
        compute = (float(mode["gpu_tpc"]) * float(mode["gpu_max_mhz"])
                   / (float(top["gpu_tpc"]) * float(top["gpu_max_mhz"])))
    except (KeyError, TypeError, ZeroDivisionError):
        compute = None
    try:
        bandwidth = float(mode["emc_max_mhz"]) / float(top["emc_max_mhz"])
    except (KeyError, TypeError, ZeroDivisionError):
        bandwidth = None
    return compute, bandwidth


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None else round(float(x), nd)


@domain_function(reads=(("gpus", 0),))
def edge_power_mode(gpu: str, boxes: int, budget_w: float | None, compute_share: float,
                    decode_share: float, ttft_ms: float | None, ttft_target_ms: float | None,
                    tpot_ms: float | None, tpot_target_ms: float | None) -> dict[str, Any]:
    """The lowest-power nvpmodel mode of an edge module (catalog ``power_modes``) that sustains
    each box's load within the power budget per box (``budget_w`` ÷ ``boxes``; None: no budget).

    ``compute_share`` and ``decode_share`` are the whole deployment's load in boxes at the fastest
    mode: compute-bound work (the detector's frames, at the planned utilisation) and the LLM's
    requests (decode-bound: the weights are read once per token). In a mode, compute-bound work
    scales with the enabled TPCs × maximum GPU clock, decoding with the maximum memory clock, so
    the load of a box is compute/boxes ÷ compute ratio + decode/boxes ÷ memory ratio (≤ 1), its
    TTFT (prefill) grows by 1 ÷ compute ratio and its TPOT by 1 ÷ memory ratio (each ≤ its target
    when one is given). An estimate from the published clocks, not a measurement in the mode.

    Returns ``modes_known`` (the module has sized modes), the chosen mode's ``id``, ``name``,
    ``power_w``, ratios, ``load``, ``ttft_ms``, ``tpot_ms`` (all None when no mode fits), the
    ``per_box_budget_w``, ``evaluated`` (every mode, fastest first) and ``lower_en`` /
    ``lower_zh`` / ``none_en`` / ``none_zh``: why the cheaper modes, or all modes, do not fit."""
    g = current().catalog.gpu(gpu)
    modes = [m for m in (g.get("power_modes") or []) if m.get("power_w") is not None]
    out: dict[str, Any] = {"modes_known": False, "id": None, "name": None, "power_w": None,
                           "compute_ratio": None, "bandwidth_ratio": None, "load": None,
                           "load_pct": None, "ttft_ms": None, "tpot_ms": None, "evaluated": [],
                           "lower_en": "", "lower_zh": "", "none_en": "", "none_zh": ""}
    n = max(1, int(boxes or 1))
    per_box = None if budget_w is None else float(budget_w) / n
    out["per_box_budget_w"] = _r(per_box, 1)
    if not modes:
        return out
    top = max(modes, key=lambda m: (float(m["power_w"]), -int(m["id"])))
    if _mode_ratios(top, top) != (1.0, 1.0):
        return out
    out["modes_known"] = True
    c_box, d_box = float(compute_share or 0.0) / n, float(decode_share or 0.0) / n
    evaluated = []
    for m in sorted(modes, key=lambda m: (-float(m["power_w"]), int(m["id"]))):
        rc, rb = _mode_ratios(m, top)
        if rc is None or rb is None:
            continue
        load = c_box / rc + d_box / rb
        ttft = None if ttft_ms is None else float(ttft_ms) / rc
        tpot = None if tpot_ms is None else float(tpot_ms) / rb
        why_en, why_zh = [], []
        if per_box is not None and float(m["power_w"]) > per_box:
            why_en.append(f"{m['power_w']:g} W > {per_box:g} W per box")
            why_zh.append(f"{m['power_w']:g} W 超过每台 {per_box:g} W")
        if load > 1.0:
            why_en.append(f"load {load * 100:.0f}% of its capacity")
            why_zh.append(f"负载为其能力的 {load * 100:.0f}%")
        if ttft is not None and ttft_target_ms is not None and ttft > float(ttft_target_ms):
            why_en.append(f"TTFT {ttft:.0f} ms > {float(ttft_target_ms):g} ms")
            why_zh.append(f"TTFT {ttft:.0f} 毫秒超过 {float(ttft_target_ms):g} 毫秒")
        if tpot is not None and tpot_target_ms is not None and tpot > float(tpot_target_ms):
            why_en.append(f"TPOT {tpot:.1f} ms > {float(tpot_target_ms):g} ms")
            why_zh.append(f"TPOT {tpot:.1f} 毫秒超过 {float(tpot_target_ms):g} 毫秒")
        evaluated.append({"id": int(m["id"]), "name": str(m["name"]), "power_w": float(m["power_w"]),
                          "compute_ratio": _r(rc, 3), "bandwidth_ratio": _r(rb, 3),
                          "load": _r(load, 3), "ttft_ms": _r(ttft, 1), "tpot_ms": _r(tpot, 2),
                          "fits": not why_en, "why_en": "; ".join(why_en), "why_zh": "；".join(why_zh)})
    out["evaluated"] = evaluated
    fitting = [e for e in evaluated if e["fits"]]
    if fitting:
        best = min(fitting, key=lambda e: (e["power_w"], e["id"]))
        out.update({"id": best["id"], "name": best["name"], "power_w": best["power_w"],
                    "compute_ratio": best["compute_ratio"], "bandwidth_ratio": best["bandwidth_ratio"],
                    "load": best["load"], "load_pct": round(best["load"] * 100, 0),
                    "ttft_ms": best["ttft_ms"], "tpot_ms": best["tpot_ms"]})
        lower = [e for e in evaluated if e["power_w"] < best["power_w"]]
        if lower:
            out["lower_en"] = "Cheaper modes do not fit: " + "; ".join(
                f"{e['name']} ({e['why_en']})" for e in lower) + "."
            out["lower_zh"] = "更低功耗的模式不满足：" + "；".join(
                f"{e['name']}（{e['why_zh']}）" for e in lower) + "。"
        else:
            out["lower_en"] = "It is the module's lowest-power mode."
            out["lower_zh"] = "这已是该模组的最低功耗模式。"
    else:
        out["none_en"] = "; ".join(f"{e['name']} ({e['why_en']})" for e in evaluated)
        out["none_zh"] = "；".join(f"{e['name']}（{e['why_zh']}）" for e in evaluated)
    note_detail({"function": "edge_power_mode", "result": out["name"],
                 "formula": "lowest power_w with compute/boxes ÷ (TPC × GPU MHz ratio) + decode/boxes ÷ "
                            "(EMC MHz ratio) ≤ 1, TTFT ÷ compute ratio and TPOT ÷ memory ratio within "
                            "their targets, power_w ≤ budget ÷ boxes",
                 "values": {"boxes": n, "per_box_budget_w": out["per_box_budget_w"],
                            "compute_share": _r(compute_share, 3), "decode_share": _r(decode_share, 3)}})
    return out


@domain_function(reads=(("gpus", 0),))
def edge_modes_within(gpu: str, watts: float | None) -> str:
    """The catalogued nvpmodel modes of ``gpu`` whose power is at most ``watts``, cheapest last, as
    'name (nvpmodel -m id, W)' joined by commas; '' when none or no modes are catalogued."""
    if watts is None:
        return ""
    modes = [m for m in (current().catalog.gpu(gpu).get("power_modes") or [])
             if m.get("power_w") is not None and float(m["power_w"]) <= float(watts)]
    modes.sort(key=lambda m: (-float(m["power_w"]), int(m["id"])))
    return ", ".join(f"{m['name']} (nvpmodel -m {m['id']}, {float(m['power_w']):g} W)" for m in modes)
