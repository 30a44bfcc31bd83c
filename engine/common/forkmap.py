"""Map a function over a few items on the machine's cores (the pools of a several-model plan).

The calling process forks workers once everything is loaded (rules compiled, catalog read), so a
worker starts in a few milliseconds with the caller's state. The caller and its workers take items
from one queue (a pipe holding the item numbers), the caller always the first item; a worker
sends its results back pickled, through a file of its own, after its last item. The results are
the same, in the same order, as ``[fn(x) for x in items]``:

- a worker that fails on an item (any exception) stops, and the caller computes that item and
  the ones the worker did not return itself, so errors surface in the caller as they would
  without workers;
- an interrupt of the caller (Ctrl-C, or SIGTERM, SIGHUP, SIGQUIT, which cli/main.py makes one)
  kills the workers and removes their files; a worker's interrupt, terminate, hang-up and quit
  signals have their default action (it ends at once), and on Linux a worker is killed when its
  caller dies, even of SIGKILL (``prctl(PR_SET_PDEATHSIG)``);
- ``counters`` (e.g. the engine's work counters) get the workers' increments added.

Workers are used where ``fork`` exists (Linux, macOS) and more than one core is available to
this process, and no other thread runs (a fork copies only the calling thread: a lock another
thread holds would stay locked in the worker); ``SERVEWISE_WORKERS=1`` turns them off (``=N``,
N ≥ 1, caps the processes at N). A worker that cannot be forked leaves its share to the caller.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import signal
import struct
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_INDEX = struct.Struct("<I")  # one item number in the queue pipe (4 bytes: reads of it are whole)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
# what ends a worker at once (their default action) instead of a handler inherited from the caller
_WORKER_DEFAULT_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
                                if hasattr(signal, name))


def processes_available() -> int:
    """How many processes a map may use: the cores this process may run on, capped by
    ``SERVEWISE_WORKERS``; 1 where ``fork`` does not exist or other threads run."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 1  # no fork, or one that could copy a lock another thread holds
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cores = os.cpu_count() or 1
    cap = os.environ.get("SERVEWISE_WORKERS", "").strip()
    if cap.isdigit() and int(cap) >= 1:
        cores = min(cores, int(cap))
    return max(1, cores)


def fork_map(fn: Callable[[T], R], items: Sequence[T], *,
             portable: Callable[[R], Any] = lambda r: r,
             counters: Sequence[Counter] = (),
             after: Callable[[], None] | None = None) -> list[R]:
    """``[fn(x) for x in items]``, the items shared between this process and forked workers.

    ``portable(result)`` is what a worker sends back for a result (it must pickle); the caller
    keeps its own results as they are. ``after()`` is called by each worker once no item is left
    to take, before it sends its results (it may take other work meanwhile, e.g.
    engine/app/pools_board.py; it must not wait for the caller, which waits for the workers); a
    worker that failed an item does not call it, an exception in it is ignored, and its work
    counts in ``counters``.
    """
    # (the queue pipe holds every item number at once: at most 64 KiB, the smallest pipe buffer)
    n_workers = min(processes_available(), len(items)) - 1 if len(items) * _INDEX.size <= 65536 else 0
    paths: list[str] = []
    try:
        for _ in range(max(n_workers, 0)):
            fd, path = tempfile.mkstemp(prefix="servewise-worker-", suffix=".pickle")
            os.close(fd)
            paths.append(path)
    except OSError:  # no temporary folder to send results through: no workers
        n_workers = 0
        _remove(paths)
    if n_workers < 1:
        return [fn(x) for x in items]
    die_with_caller = _pdeathsig()  # looked up once, before forking
    caller = os.getpid()
    read_end, write_end = os.pipe()
    os.write(write_end, b"".join(_INDEX.pack(i) for i in range(1, len(items))))
    os.close(write_end)
    results: dict[int, R] = {}
    workers: list[tuple[int, str]] = []
    try:
        for path in paths:
            with _signals_deferred() as mask:  # a signal's exception comes once the worker is listed
                try:
                    pid = os.fork()
                except OSError:  # no more processes allowed: the caller takes what is left
                    break
                if pid == 0:  # pragma: no cover - runs in the worker (its coverage is not collected)
                    _work(fn, items, read_end, path, portable, counters, caller, die_with_caller, mask, after)
                workers.append((pid, path))
        results[0] = fn(items[0])
        for i in _take(read_end):
            results[i] = fn(items[i])
        while workers:
            pid, path = workers[0]
            _, status = os.waitpid(pid, 0)
            del workers[0]  # reaped: not to be killed (its pid may be another process's soon)
            returned, increments = _collect(path) if os.waitstatus_to_exitcode(status) == 0 else ({}, [])
            _remove([path])
            results.update(returned)
            for counter, inc in zip(counters, increments, strict=False):
                counter.update(inc)
    finally:
        os.close(read_end)
        for pid, _ in workers:  # the caller failed or was interrupted: stop the workers
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        _remove(paths)
    for i in range(len(items)):  # what a worker did not return (it failed): computed here
        if i not in results:
            results[i] = fn(items[i])
    return [results[i] for i in range(len(items))]


def _remove(paths: list[str]) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _take(read_end: int) -> Iterator[int]:
    """The item numbers this process takes from the queue, until it is empty."""
    while True:
        raw = os.read(read_end, _INDEX.size)
        if len(raw) < _INDEX.size:
            return
        yield _INDEX.unpack(raw)[0]


def _collect(path: str) -> tuple[dict[int, Any], list[Counter]]:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}, []
    if not data:
        return {}, []
    try:
        returned, increments = pickle.loads(data)
    except Exception:  # a truncated file: the caller computes those items itself
        return {}, []
    return returned, increments


@contextlib.contextmanager
def _signals_deferred() -> Iterator[set[int] | None]:
    """Block the signals of ``_WORKER_DEFAULT_SIGNALS`` meanwhile (one arriving is handled after);
    gives the signal mask to restore (None where masks do not exist)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield None
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WORKER_DEFAULT_SIGNALS)
    try:
        yield mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


@functools.lru_cache(maxsize=1)
def _pdeathsig() -> Callable[[], object] | None:
    """A call asking the kernel to SIGKILL this process when its parent dies (Linux'
    ``prctl(PR_SET_PDEATHSIG, SIGKILL)``), or None where there is no such call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _work(fn: Callable[[Any], Any], items: Sequence[Any], read_end: int, path: str,
          portable: Callable[[Any], Any], counters: Sequence[Counter], caller: int,
          die_with_caller: Callable[[], object] | None, mask: set[int] | None,
          after: Callable[[], None] | None = None) -> None:  # pragma: no cover
    """A worker's life: take items until the queue is empty or one fails, write the results,
    exit without running the caller's clean-up (``os._exit``). It dies with its caller."""
    code = 1
    try:
        for sig in _WORKER_DEFAULT_SIGNALS:  # these end a worker at once (unless the caller ignores them)
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        if die_with_caller is not None:
            die_with_caller()
        if os.getppid() != caller:  # the caller died before the request above took effect
            return
        if mask is not None:  # the caller's signal mask again (they were blocked around the fork)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        before = [Counter(c) for c in counters]
        returned: dict[int, Any] = {}
        failed = False
        for i in _take(read_end):
            try:
                returned[i] = portable(fn(items[i]))
            except Exception:
                failed = True
                break  # this item and the rest left in the queue are the caller's
        if after is not None and not failed:
            with contextlib.suppress(Exception):
                after()
        increments = [Counter({k: v - b.get(k, 0) for k, v in c.items() if v != b.get(k, 0)})
                      for c, b in zip(counters, before, strict=True)]
        with open(path, "wb") as fh:
            pickle.dump((returned, increments), fh, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)
