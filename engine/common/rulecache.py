"""A cache of what loading the knowledge produces, shared between processes.

Reading the rule files (YAML with line numbers), validating them against the rule schema and
compiling their expressions is most of the cost of starting a process; reading the catalog's YAML
is most of the rest. This module stores such results in pickle files, each named by a key that
hashes everything the result depends on, so a stale entry is never read:

- ``rules-*``: the parsed, schema-checked rule files (key: the cache format version and the source
  of the modules that produce the data, the rule schema, every rule file's bytes);
- ``compiled-*``: the whole loaded rule base, its expressions checked and kept as marshalled code
  objects of their generated Python source (made functions again at their first evaluation), for
  engine/lang/rulebase.py (key: every rule file's path and bytes, the working folder the file names
  are shown relative to, every fact file, every engine module's source, the load options);
- ``catalog-*``: the catalog tables, for engine/domain/catalog.py (key: every catalog file's name and
  bytes, the engine's source);
- ``yaml-*``: a project data file read as YAML (:func:`cached_yaml`; key: its name and bytes).

Any change to one of these gives a new key. Entries are written atomically (engine/common/yamlio.py's
``write_bytes_atomic``), so concurrent processes read either a whole entry or none. A cache that
cannot be read or written is ignored: loading then works as without it. At most ``MAX_ENTRIES``
entries of each kind are kept (the most recently written).

Location: ``$SERVEWISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/servewise``, else ``~/.cache/servewise``.
``SERVEWISE_NO_CACHE=1`` disables it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT

CACHE_VERSION = 1
MAX_ENTRIES = 16  # older entries (other rule sets, earlier versions) are removed beyond this
_PRODUCERS = ("lang/rulebase.py", "common/yamlio.py", "common/rulecache.py")  # code whose output is cached


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
    here = PACKAGE_ROOT / "engine"
    for name in _PRODUCERS:
        h.update(name.encode() + b"\0" + (here / name).read_bytes() + b"\0")
    h.update(schema + b"\0")
    for display, builtin, data in files:
        h.update(f"{display}\0{int(builtin)}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:40]


def content_key(kind: str, parts: list[bytes]) -> str:
    """A key for an entry of ``kind`` that depends on exactly ``parts`` (bytes of files, names,
    versions), and on this module's format version and the Python version (pickles)."""
    h = hashlib.sha256(f"servewise-{kind}-v{CACHE_VERSION}\0{sys.version}\0".encode())
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:40]


def engine_sources() -> list[bytes]:
    """The source of every engine module (engine/**/*.py): what a cached result was produced by
    (read once per process: the code running does not change while it runs)."""
    return list(_engine_sources())


@functools.lru_cache(maxsize=1)
def _engine_sources() -> tuple[bytes, ...]:
    here = PACKAGE_ROOT / "engine"
    return tuple(p.relative_to(here).as_posix().encode() + b"\0" + p.read_bytes()
                 for p in sorted(here.rglob("*.py")) if "__pycache__" not in p.parts)


def cached_yaml(path: Path) -> Any:
    """A project data file (YAML) read through the cache (``yaml-*``, keyed by its name and bytes and
    the YAML reader's source), e.g. facts/guidelines.yaml, needed by every plan's citations."""
    from servewise.engine.common.yamlio import safe_load

    raw = path.read_bytes()
    key = None
    if cache_dir() is not None:
        here = PACKAGE_ROOT / "engine"
        key = content_key("yaml", [path.name.encode(), raw, (here / "common" / "yamlio.py").read_bytes()])
        hit = read(key, "yaml")
        if hit is not None:
            return hit
    data = safe_load(raw.decode("utf-8"))
    if key is not None and data is not None:
        write(key, data, "yaml")
    return data


def read(key: str, kind: str = "rules") -> Any | None:
    """The entry stored under ``key``, or None (missing, unreadable, corrupt or disabled)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(folder / f"{kind}-{key}.pickle", "rb") as fh:
            entry = pickle.load(fh)  # noqa: S301 - our own file, in the user's own cache folder
    except Exception:  # noqa: BLE001 - any unreadable entry is a cache miss
        return None
    if not isinstance(entry, dict) or entry.get("version") != CACHE_VERSION or entry.get("key") != key:
        return None
    return entry.get("data")


def write(key: str, data: Any, kind: str = "rules") -> bool:
    """Store ``data`` under ``key`` atomically; False (and nothing raised) when that is impossible."""
    from servewise.engine.common.yamlio import write_bytes_atomic

    folder = cache_dir()
    if folder is None:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        blob = pickle.dumps({"version": CACHE_VERSION, "key": key, "data": data},
                            protocol=pickle.HIGHEST_PROTOCOL)
        write_bytes_atomic(folder / f"{kind}-{key}.pickle", blob)
        _prune(folder, kind)
        return True
    except Exception:  # noqa: BLE001 - an unwritable cache must never break loading
        return False


def _prune(folder: Path, kind: str) -> None:
    entries = sorted(folder.glob(f"{kind}-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[MAX_ENTRIES:]:
        try:
            old.unlink()
        except OSError:
            pass
