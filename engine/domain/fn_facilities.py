"""Domain functions for the server bill of materials and facilities rules (rules/bom, rules/facilities).

Pure look-ups and unit conversions over the catalog; thresholds come from the rules that call them.
"""

from __future__ import annotations

from math import ceil
from typing import Any

from servewise.engine.domain.catalog import UnknownEntry
from servewise.engine.domain.functions import current, domain_function, note_detail

# PCIe signalling rate per lane (GT/s) by generation, and the 128b/130b line code of Gen3+ (PCI-SIG base specs).
PCIE_GT_PER_LANE = {3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
PCIE_ENCODING = 128 / 130


@domain_function
def pcie_gbs(gen: Any, lanes: Any) -> float | None:
    """Usable PCIe bandwidth per direction in GB/s: lanes × GT/s × 128/130 ÷ 8 (Gen4 x16 ≈ 31.5, Gen5 x16 ≈ 63)."""
    if gen is None or lanes is None or int(gen) not in PCIE_GT_PER_LANE:
        return None
    return round(int(lanes) * PCIE_GT_PER_LANE[int(gen)] * PCIE_ENCODING / 8, 1)


def _entry(kind: str, name: str) -> dict[str, Any] | None:
    try:
        return current().catalog.table(kind).get(name)
    except UnknownEntry:
        return None


@domain_function(reads=((None, 1),))
def catalog_key(kind: str, entry: str, field_name: str, key: str) -> Any:
    """One key of a mapping-valued catalog field, e.g. ``max_cards_by_model`` of a server."""
    found = _entry(kind, entry)
    value = (found or {}).get(field_name)
    return value.get(key) if isinstance(value, dict) else None


@domain_function
def first_ssd(min_pcie_gen: float, min_seq_read_gbs: float, min_random_read_kiops: float,
              domestic: bool = False) -> str | None:
    """The first model-store SSD of the catalog (file order) that meets all three thresholds, or None;
    with ``domestic`` only drives marked ``domestic: true`` (a 信创 bill of materials)."""
    for entry in current().catalog.table("ssds"):
        if entry.get("role") != "model-store" or (domestic and entry.get("domestic") is not True):
            continue
        gen, seq, iops = entry.get("pcie_gen"), entry.get("seq_read_gbs"), entry.get("random_read_kiops")
        if None in (gen, seq, iops):
            continue
        if gen >= min_pcie_gen and seq >= min_seq_read_gbs and iops >= min_random_read_kiops:
            note_detail({"function": "first_ssd", "result": entry["id"],
                         "values": {"pcie_gen": gen, "seq_read_gbs": seq, "random_read_kiops": iops}})
            return entry["id"]
    return None


def _capacities(ssd: str) -> list[float]:
    return sorted(float(c) for c in ((_entry("ssds", ssd) or {}).get("capacities_tb") or []))


@domain_function(reads=(("ssds", 0),))
def raid10_drives(ssd: str, usable_tb: float, min_drives: int = 4) -> int:
    """Drives in a RAID 10 array of ``ssd`` giving ``usable_tb``: at least ``min_drives``, an even number,
    more only when even the largest catalog capacity is too small (usable = drives × size ÷ 2)."""
    caps = _capacities(ssd)
    if not caps:
        return int(min_drives)
    need = 2 * ceil(float(usable_tb) / caps[-1])
    need += need % 2
    return int(max(min_drives, need))


@domain_function(reads=(("ssds", 0),))
def raid10_drive_tb(ssd: str, usable_tb: float, drives: int) -> float | None:
    """Smallest catalog capacity of ``ssd`` whose RAID 10 of ``drives`` reaches ``usable_tb`` (else the largest)."""
    caps = _capacities(ssd)
    for size in caps:
        if size * int(drives) / 2 >= float(usable_tb):
            return size
    return caps[-1] if caps else None


def _gpu_id(name: str) -> str | None:
    found = _entry("gpus", name)
    return found["id"] if found else None


@domain_function(reads=(("gpus", 0),))
def reference_system(gpu: str, gpus_per_server: int) -> str | None:
    """A catalog OEM system built around this GPU with exactly this many GPUs and a sourced maximum power."""
    target = _gpu_id(gpu)
    for entry in current().catalog.table("servers"):
        if entry.get("type") != "system" or entry.get("max_power_w") is None:
            continue
        if entry.get("gpus_max") != int(gpus_per_server):
            continue
        if any(_gpu_id(name) == target for name in entry.get("gpu_models") or []):
            return entry["id"]
    return None


@domain_function(reads=(("gpus", 0),))
def seed_psu_row(gpu: str, gpus_per_server: int) -> str | None:
    """The PSU row of the seed's power table (psus.yaml, kind configuration) for ``N x GPU``, or None.
    The seed's 'H200' rows match both H200 SXM and H200 NVL."""
    target = _gpu_id(gpu) or str(gpu)
    for entry in current().catalog.table("psus"):
        if entry.get("kind") != "configuration" or not entry.get("for_config"):
            continue
        count, _, rest = str(entry["for_config"]).partition(" x ")
        name = rest.split(" (")[0].strip()
        if not count.isdigit() or int(count) != int(gpus_per_server):
            continue
        if target == name or target.startswith(name + " ") or _gpu_id(name) == target:
            return entry["id"]
    return None
