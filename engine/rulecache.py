"""A cache of parsed and schema-validated rule files, shared between processes.

Reading the rule files (YAML with line numbers) and validating them against the rule schema is
most of the cost of loading the rule base on every process start. This module stores the result
for a whole set of rule files in one pickle file, named by a key that hashes:

- the cache format version and the source of the modules that produce the cached data,
- the rule schema,
- every rule file's path, built-in flag and bytes (the built-in rules and any ``--rules-dir``).

Any change to one of these gives a new key, so a stale entry is never read; expressions are
compiled again from the cached data on every load (compiled expressions are closures and cannot
be pickled). Entries are written atomically (engine/yamlio.py's ``write_bytes_atomic``), so concurrent
processes read either a whole entry or none. A cache that cannot be read or written is ignored:
loading then works as without it.

Location: ``$SERVEWISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/servewise``, else ``~/.cache/servewise``.
``SERVEWISE_NO_CACHE=1`` disables it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

CACHE_VERSION = 1
MAX_ENTRIES = 16  # older entries (other rule sets, earlier versions) are removed beyond this
_PRODUCERS = ("rulebase.py", "yamlio.py", "rulecache.py")  # code whose output is cached


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is disabled."""
    if os.environ.get("SERVEWISE_NO_CACHE", "").strip() not in ("", "0"):
        return None
    if os.environ.get("SERVEWISE_CACHE_DIR"):
        return Path(os.environ["SERVEWISE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "servewise"


def cache_key(files: list[tuple[str, bool, bytes]], schema: bytes) -> str:
    """Hash of everything the cached data depends on (see the module docstring)."""
    h = hashlib.sha256(f"servewise-rules-v{CACHE_VERSION}\0".encode())
    here = Path(__file__).resolve().parent
    for name in _PRODUCERS:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    h.update(schema + b"\0")
    for display, builtin, data in files:
        h.update(f"{display}\0{int(builtin)}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:40]


def read(key: str) -> Any | None:
    """The entry stored under ``key``, or None (missing, unreadable, corrupt or disabled)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(folder / f"rules-{key}.pickle", "rb") as fh:
            entry = pickle.load(fh)  # noqa: S301 - our own file, in the user's own cache folder
    except Exception:  # noqa: BLE001 - any unreadable entry is a cache miss
        return None
    if not isinstance(entry, dict) or entry.get("version") != CACHE_VERSION or entry.get("key") != key:
        return None
    return entry.get("data")


def write(key: str, data: Any) -> bool:
    """Store ``data`` under ``key`` atomically; False (and nothing raised) when that is impossible."""
    from .yamlio import write_bytes_atomic

    folder = cache_dir()
    if folder is None:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        blob = pickle.dumps({"version": CACHE_VERSION, "key": key, "data": data},
                            protocol=pickle.HIGHEST_PROTOCOL)
        write_bytes_atomic(folder / f"rules-{key}.pickle", blob)
        _prune(folder)
        return True
    except Exception:  # noqa: BLE001 - an unwritable cache must never break loading
        return False


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("rules-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[MAX_ENTRIES:]:
        try:
            old.unlink()
        except OSError:
            pass
