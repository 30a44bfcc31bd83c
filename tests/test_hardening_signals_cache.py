"""Issue #42 (hardening, second round), items 5 and 6: SIGTERM, SIGHUP and SIGQUIT end a command
as Ctrl-C does (message, exit 128 + n, no worker and no worker file left; `ask` keeps the answers);
a worker dies with its caller; the rule cache never unpickles what it did not write itself, and
only in a private folder."""

from __future__ import annotations

import os
import pickle
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

from servewise.engine.common import rulecache

SERVEWISE = str(Path(sys.executable).parent / "servewise")
SIGNALS = [pytest.param(getattr(signal, name), id=name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT")
           if hasattr(signal, name)]
needs_proc = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self"),
                                reason="needs fork and /proc")


# -- processes (through /proc: no psutil) ---------------------------------------------------------

def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def _children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None and st[1] == pid and st[0] != "Z":
                found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")  # a zombie (not reaped by init here) has ended


def _wait_gone(pids: set[int], seconds: float = 5.0) -> set[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    return {p for p in pids if _alive(p)}


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _spawn(args: list[str], tmp_path: Path, **kw) -> subprocess.Popen:
    """``args`` in a process whose termination signals have their default action whatever this one
    inherited (a shell's background job ignores SIGQUIT), its temporary files in ``tmp_path``, the
    workers the machine allows."""
    env = dict(os.environ, TMPDIR=str(tmp_path), LANG="en_US.UTF-8")
    env.pop("SERVEWISE_WORKERS", None)
    env.pop("LC_ALL", None)
    reset = ("import os, signal, sys\n"
             "for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT): signal.signal(s, signal.SIG_DFL)\n"
             "os.execv(sys.argv[1], sys.argv[1:])\n")
    return subprocess.Popen([sys.executable, "-c", reset, *args], env=env, **kw)


def _signal(proc: subprocess.Popen, signum: int, timeout: float) -> tuple[bytes, bytes]:
    """Send ``signum`` and collect what the process printed as it ended."""
    os.kill(proc.pid, signum)
    return proc.communicate(timeout=timeout)


def _reap(proc: subprocess.Popen) -> None:
    """Whatever happened, leave no process behind."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


# -- item 5: signals ------------------------------------------------------------------------------

@pytest.mark.slow
@needs_proc
@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2, reason="one core: no worker")
@pytest.mark.parametrize("signum", SIGNALS)
def test_a_termination_signal_during_a_several_model_plan_ends_it_like_ctrl_c(tmp_path, signum):
    proc = _spawn([SERVEWISE, "plan", str(EXAMPLES / "multi-model-tenants.yaml")], tmp_path, cwd=ROOT,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while not (workers and list(tmp_path.glob("servewise-worker-*"))):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no worker was forked (exit {proc.returncode})")
            workers = _children(proc.pid)
            time.sleep(0.02)
        out, err = _signal(proc, signum, 60)
    finally:
        _reap(proc)
    left = _wait_gone(workers)
    _kill(left)
    text = err.decode()
    assert proc.returncode == 128 + signum, (proc.returncode, text)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines == [f"interrupted ({signal.Signals(signum).name})"], text
    assert "Traceback" not in text and out == b""
    assert not left, "a worker outlived its plan"
    assert not list(tmp_path.glob("servewise-worker-*"))


@pytest.mark.slow
@needs_proc
@pytest.mark.parametrize("signum", [s for s in SIGNALS if s.id != "SIGQUIT"])
def test_a_termination_signal_during_ask_keeps_the_answers_as_ctrl_c_does(tmp_path, signum):
    saved = tmp_path / "answers.yaml"
    proc = _spawn([SERVEWISE, "ask", "--lang", "en", "-o", str(saved)], tmp_path, cwd=tmp_path,
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"Llama-3.1-8B\n")
        proc.stdin.flush()
        shown = b""
        deadline = time.monotonic() + 60
        while b"mode> " not in shown:  # the model was answered: the second question waits
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"no second question: {shown.decode()[-300:]}")
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                shown += os.read(proc.stdout.fileno(), 65536)
        out, err = _signal(proc, signum, 30)
    finally:
        _reap(proc)
    assert proc.returncode == 128 + signum, err.decode()
    assert f"Interrupted. 1 answer(s) saved in {saved}" in out.decode()
    assert "Traceback" not in err.decode()
    assert "model: Llama-3.1-8B" in saved.read_text(encoding="utf-8")


WORKER_SCRIPT = """
import os, sys, time
from servewise.engine.common import forkmap
forkmap.processes_available = lambda: 2
caller = os.getpid()
def fn(x):
    if os.getpid() != caller:
        print(os.getpid(), flush=True)  # the worker took an item
    time.sleep(120)
    return x
forkmap.fork_map(fn, [0, 1])
"""


@needs_proc
def test_a_worker_dies_with_its_caller_even_of_sigkill(tmp_path):
    proc = _spawn([sys.executable, "-c", WORKER_SCRIPT], tmp_path, stdout=subprocess.PIPE)
    worker = None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no worker started"
        worker = int(proc.stdout.readline())
        assert _alive(worker)
        proc.kill()  # SIGKILL: the caller runs no clean-up at all
        proc.wait(timeout=10)
        assert not _wait_gone({worker}), "the worker outlived its SIGKILLed caller"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        if worker is not None:
            _kill({worker})


def test_the_cli_signal_handlers_last_as_long_as_the_command(monkeypatch):
    """run() installs them for the command only (where they have their default action) and puts
    back what was there."""
    from servewise.cli import main as cli_main

    before = {s: signal.getsignal(s) for s in cli_main.TERMINATION_SIGNALS}
    seen = {}

    def probe(args):
        seen.update({s: signal.getsignal(s) for s in cli_main.TERMINATION_SIGNALS})
        return 0

    monkeypatch.setattr(cli_main, "_run", probe)
    assert cli_main.run(["--version"]) == 0
    for s in cli_main.TERMINATION_SIGNALS:
        assert seen[s] is (cli_main._on_termination if before[s] is signal.SIG_DFL else before[s])
    assert {s: signal.getsignal(s) for s in cli_main.TERMINATION_SIGNALS} == before


# -- item 6: the rule cache -----------------------------------------------------------------------

class _Exploit:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


KEY = "0123456789abcdef0123456789abcdef01234567"


def _entry(folder: Path) -> Path:
    return folder / f"yaml-{KEY}.pickle"


def test_a_planted_pickle_is_never_unpickled(cache, tmp_path):
    assert rulecache.write("f" * 40, {"real": 1}, "yaml")  # the folder and its key exist
    marker = tmp_path / "pwned"
    planted = pickle.dumps(_Exploit(marker))
    for blob in (planted, b"\0" * 32 + planted, os.urandom(32) + planted):
        _entry(cache).write_bytes(blob)
        assert rulecache.read(KEY, "yaml") is None
        assert not marker.exists(), "a planted pickle ran its code"
        assert not _entry(cache).exists(), "an entry that does not verify is removed"


def test_an_entry_with_a_wrong_mac_or_forged_content_is_ignored(cache):
    assert rulecache.write(KEY, {"x": 1}, "yaml")
    assert rulecache.read(KEY, "yaml") == {"x": 1}
    good = _entry(cache).read_bytes()
    forged = pickle.dumps({"version": rulecache.CACHE_VERSION, "key": KEY, "data": {"x": "forged"}})
    for blob in (bytes([good[0] ^ 1]) + good[1:],  # the MAC changed
                 good[:-1] + bytes([good[-1] ^ 1]),  # the content changed
                 good[:32] + forged,  # another pickle under a real MAC
                 forged):  # a well-formed entry of the old format, no MAC
        _entry(cache).write_bytes(blob)
        assert rulecache.read(KEY, "yaml") is None
        assert not _entry(cache).exists()
    # an entry verified under another name is not accepted under this one
    assert rulecache.write("f" * 40, {"x": "other"}, "yaml")
    _entry(cache).write_bytes((cache / f"yaml-{'f' * 40}.pickle").read_bytes())
    assert rulecache.read(KEY, "yaml") is None


def test_the_cache_folder_and_its_key_are_private(cache):
    assert not cache.exists()
    assert rulecache.write(KEY, [1, 2], "yaml")
    assert stat.S_IMODE(cache.lstat().st_mode) == 0o700
    key = cache / "key"
    assert stat.S_IMODE(key.lstat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert sorted(p.name for p in cache.iterdir()) == sorted(["key", _entry(cache).name])
    key.chmod(0o644)  # a key others may read could sign their entries: not used
    assert rulecache.read(KEY, "yaml") is None
    assert not rulecache.write(KEY, [1, 2], "yaml")


def test_no_home_means_no_cache_and_no_slash_cache(monkeypatch, tmp_path):
    for name in ("SERVEWISE_CACHE_DIR", "XDG_CACHE_HOME", "SERVEWISE_NO_CACHE"):
        monkeypatch.delenv(name, raising=False)
    existed = os.path.lexists("/.cache")
    for home in ("", "/"):
        monkeypatch.setenv("HOME", home)
        assert rulecache.cache_dir() is None
        assert not rulecache.write(KEY, 1, "yaml") and rulecache.read(KEY, "yaml") is None
        data = tmp_path / "d.yaml"
        data.write_text("a: 1\n", encoding="utf-8")
        assert rulecache.cached_yaml(data) == {"a": 1}
    assert os.path.lexists("/.cache") == existed


@pytest.mark.parametrize("problem", ["group-writable", "world-writable", "foreign-owned", "symlink", "file"])
def test_an_unsafe_cache_dir_is_refused(cache, tmp_path, monkeypatch, problem):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    if problem == "group-writable":
        cache.mkdir(mode=0o700)
        cache.chmod(0o770)
    elif problem == "world-writable":
        cache.mkdir(mode=0o700)
        cache.chmod(0o703)
    elif problem == "foreign-owned":
        cache.mkdir(mode=0o700)
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)  # the folder is now someone else's
    elif problem == "symlink":
        cache.symlink_to(real, target_is_directory=True)
    else:
        cache.write_text("", encoding="utf-8")
    assert not rulecache.write(KEY, {"x": 1}, "yaml")
    assert rulecache.read(KEY, "yaml") is None
    assert not list(real.iterdir())
    if cache.is_dir() and not cache.is_symlink():
        assert not list(cache.iterdir())


def test_a_foreign_key_file_is_refused(cache, monkeypatch):
    assert rulecache.write(KEY, {"x": 1}, "yaml")
    if os.getuid() != 0:
        pytest.skip("changing a file's owner needs root")
    os.chown(cache / "key", 65534, -1)
    assert rulecache.read(KEY, "yaml") is None
    assert not rulecache.write(KEY, {"x": 1}, "yaml")
