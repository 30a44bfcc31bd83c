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

Safety (an entry is a pickle: unpickling a planted one would run its code):

- every entry is ``HMAC-SHA256(secret, name + pickle) + pickle``; its MAC is checked before it is
  unpickled, and an entry whose MAC does not verify is a miss (and is removed). The secret is 32
  random bytes in the folder's ``key`` file, made with mode 0600 the first time it is needed (by
  whichever process comes first: it is linked into place, never overwritten);
- the folder is made with mode 0700 and used only while it is a real folder (not a symbolic link)
  owned by this user and writable by no one else, and its ``key`` file a regular file of this user
  that no one else may read or write. Otherwise, or when no folder can be found (``HOME`` empty or
  ``/``), nothing is cached: loading works as without a cache.

Location: ``$SERVEWISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/servewise``, else ``~/.cache/servewise``
(the same checks for all three). ``SERVEWISE_NO_CACHE=1`` disables it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import pickle
import secrets
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT

CACHE_VERSION = 2  # 2: entries carry a MAC (see the module docstring)
MAX_ENTRIES = 16  # older entries (other rule sets, earlier versions) are removed beyond this
_PRODUCERS = ("lang/rulebase.py", "common/yamlio.py", "common/rulecache.py")  # code whose output is cached


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is disabled."""
    if os.environ.get("SERVEWISE_NO_CACHE", "").strip() not in ("", "0"):
        return None
    if os.environ.get("SERVEWISE_CACHE_DIR"):
        return Path(os.environ["SERVEWISE_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "servewise"
    home = os.path.expanduser("~")
    if home in ("", "~") or home.rstrip("/") == "":  # no home (HOME="" or "/"): no cache, not /.cache
        return None
    return Path(home) / ".cache" / "servewise"


_KEY_FILE = "key"
_MAC = hashlib.sha256().digest_size  # bytes of an entry's MAC, before its pickle
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")


def _private(st: os.stat_result, kind: int, others: int) -> bool:
    """Whether ``st`` is of ``kind`` (S_IFDIR, S_IFREG), owned by this user, and grants none of the
    ``others`` permission bits."""
    getuid = getattr(os, "getuid", None)
    return (stat.S_IFMT(st.st_mode) == kind and (getuid is None or st.st_uid == getuid())
            and not st.st_mode & others)


def _safe_dir(create: bool) -> Path | None:
    """The cache folder if it is safe to use (module docstring), made (mode 0700) when ``create``;
    None when caching is disabled, the folder is missing (and not ``create``), unsafe or cannot be
    made."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        st = os.lstat(folder)  # lstat: a symbolic link is not a folder here
    except FileNotFoundError:
        if not create:
            return None
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(folder, 0o700)
            st = os.lstat(folder)
        except OSError:
            return None
    except OSError:
        return None
    return folder if _private(st, stat.S_IFDIR, 0o022) else None


class _Folder:
    """The safe cache folder opened once (its descriptor, where ``dir_fd`` exists), so that what is
    checked is what is read: a folder renamed or replaced meanwhile is not followed."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None
        if _DIR_FD:
            self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
            if not _private(os.fstat(self.fd), stat.S_IFDIR, 0o022):
                self.close()
                raise OSError(f"{path}: not a private folder")

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def open(self, name: str) -> int:
        if self.fd is None:
            return os.open(self.path / name, os.O_RDONLY | _NOFOLLOW)
        return os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        with contextlib.suppress(OSError):
            if self.fd is None:
                os.unlink(self.path / name)
            else:
                os.unlink(name, dir_fd=self.fd)

    def read(self, name: str, private: bool = False) -> bytes:
        """The bytes of the regular file ``name`` (not a link; if ``private``, this user's, that
        no one else may read or write); OSError when it is missing or not such a file."""
        fd = self.open(name)
        try:
            st = os.fstat(fd)
            if not (_private(st, stat.S_IFREG, 0o077) if private else stat.S_ISREG(st.st_mode)):
                raise OSError(f"{name}: not a private file")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def secret(self, create: bool) -> bytes | None:
        """The folder's MAC key (made when missing and ``create``), or None (missing, unsafe,
        malformed)."""
        for _ in range(2):
            try:
                key = self.read(_KEY_FILE, private=True)
            except FileNotFoundError:
                if not create or not _make_secret(self.path):
                    return None
                continue
            except OSError:  # a symbolic link, another user's, readable by others, unreadable
                return None
            return key if len(key) == 32 else None
        return None


def _make_secret(folder: Path) -> bool:
    """Write a new key file, whole before it appears (a private temporary file linked into place,
    so a concurrent process reads the one that won); False when impossible."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".servewise-key-")  # mode 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs is used
            os.link(tmp, folder / _KEY_FILE)
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _mac(secret: bytes, name: str, blob: bytes) -> bytes:
    return hmac.new(secret, name.encode() + b"\0" + blob, hashlib.sha256).digest()


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
    """The entry stored under ``key``, or None (missing, unreadable, corrupt, not verified, disabled
    or an unsafe folder). An entry whose MAC does not verify is removed, never unpickled."""
    path = _safe_dir(create=False)
    if path is None:
        return None
    name = f"{kind}-{key}.pickle"
    try:
        folder = _Folder(path)
    except OSError:
        return None
    try:
        raw = folder.read(name)  # who wrote it does not matter: its MAC does
        secret = folder.secret(create=False)
    except OSError:
        return None
    else:
        if secret is None:
            return None
        if len(raw) <= _MAC or not hmac.compare_digest(raw[:_MAC], _mac(secret, name, raw[_MAC:])):
            folder.unlink(name)  # planted, corrupt or made with another key
            return None
    finally:
        folder.close()
    try:
        entry = pickle.loads(raw[_MAC:])  # noqa: S301 - its MAC verified: written with this folder's key
    except Exception:  # noqa: BLE001 - any unreadable entry is a cache miss
        return None
    if not isinstance(entry, dict) or entry.get("version") != CACHE_VERSION or entry.get("key") != key:
        return None
    return entry.get("data")


def write(key: str, data: Any, kind: str = "rules") -> bool:
    """Store ``data`` under ``key`` atomically; False (and nothing raised) when that is impossible."""
    from servewise.engine.common.yamlio import write_bytes_atomic

    try:
        path = _safe_dir(create=True)
        if path is None:
            return False
        folder = _Folder(path)
        try:
            secret = folder.secret(create=True)
        finally:
            folder.close()
        if secret is None:
            return False
        name = f"{kind}-{key}.pickle"
        blob = pickle.dumps({"version": CACHE_VERSION, "key": key, "data": data},
                            protocol=pickle.HIGHEST_PROTOCOL)
        write_bytes_atomic(path / name, _mac(secret, name, blob) + blob)
        _prune(path, kind)
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
