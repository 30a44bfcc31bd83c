"""Read YAML safely while remembering the line of every mapping key and list item (for error messages).

User files (workloads, answers, rule files) go through :func:`load_file` / :func:`load_text`, which
reject what a careless or hostile file can do to a plain ``yaml.safe_load``: duplicate keys (the last
one would silently win), non-string keys, alias bombs ("billion laughs") and self-referencing
anchors, oversize scalars and files, and non-regular files (FIFOs, devices) that would hang or never
end. Every error is a :class:`YamlError` with ``file:line``.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

Lines = dict[tuple, int]
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml is ~10x faster when built in

MAX_FILE_BYTES = 1 << 20  # 1 MiB: the largest built-in rule file is ~60 kB, a workload ~1 kB
MAX_NODES = 200_000  # nodes after alias expansion (an alias bomb expands to billions)
MAX_DEPTH = 64  # nesting of mappings and lists
MAX_SCALAR_CHARS = 20_000  # one string value
MAX_NUMBER_CHARS = 64  # one number literal (int('9' * 5000) is slow, and such numbers are never meant)
STR_TAG = "tag:yaml.org,2002:str"
MERGE_TAG = "tag:yaml.org,2002:merge"
NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
STDIN = "-"


def safe_load(text: str):
    """``yaml.safe_load`` with the C loader when available (for the project's own files)."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 - a safe loader


class YamlError(ValueError):
    """A YAML file could not be read; ``line`` is 1-based (0 when unknown)."""

    def __init__(self, path: str, line: int, message: str):
        self.path, self.line, self.message = path, line, message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


def _key_text(node: yaml.Node) -> str:
    value = node.value if isinstance(node, yaml.ScalarNode) else f"<{node.id}>"
    return value if len(value) <= 40 else value[:37] + "..."


class _Checker:
    """Walk the node graph once, expanding aliases, within budgets; record key and item lines."""

    def __init__(self, name: str):
        self.name, self.nodes, self.lines = name, 0, {}

    def fail(self, node: yaml.Node, message: str) -> YamlError:
        return YamlError(self.name, node.start_mark.line + 1, message)

    def walk(self, node: yaml.Node, path: tuple, active: frozenset[int]) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(node, f"too large after expanding aliases (more than {MAX_NODES} values); "
                                  "an alias bomb?")
        if id(node) in active:
            raise self.fail(node, "an alias refers to a node that contains it (self-reference)")
        if len(path) > MAX_DEPTH:
            raise self.fail(node, f"nested more than {MAX_DEPTH} levels deep")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.ScalarNode):
            limit = MAX_NUMBER_CHARS if node.tag in NUMBER_TAGS else MAX_SCALAR_CHARS
            if len(node.value) > limit:
                kind = "number" if node.tag in NUMBER_TAGS else "value"
                raise self.fail(node, f"{kind} too long ({len(node.value)} characters, at most {limit})")
            return
        inner = active | {id(node)}
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                if key_node.tag == MERGE_TAG:
                    self.walk(value_node, path, inner)
                    continue
                if not (isinstance(key_node, yaml.ScalarNode) and key_node.tag == STR_TAG):
                    shown = _key_text(key_node)
                    raise self.fail(key_node, f"key '{shown}' is not text; quote it (\"{shown}\": ...)")
                key = key_node.value
                if key in seen:
                    raise self.fail(key_node, f"duplicate key '{_key_text(key_node)}' "
                                              f"(first at line {seen[key]})")
                seen[key] = key_node.start_mark.line + 1
                self.lines[path + (key,)] = key_node.start_mark.line + 1
                self.walk(value_node, path + (key,), inner)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.lines[path + (i,)] = item.start_mark.line + 1
                self.walk(item, path + (i,), inner)


def load_text(text: str, name: str) -> tuple[Any, Lines]:
    """Parse YAML text strictly; return the data and a map from key paths to line numbers."""
    if len(text) > MAX_FILE_BYTES:
        raise YamlError(name, 0, f"too large ({len(text)} characters, at most {MAX_FILE_BYTES})")
    try:
        loader = Loader(text)
        try:
            node = loader.get_single_node()
            checker = _Checker(name)
            if node is not None:
                checker.walk(node, (), frozenset())
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except YamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise YamlError(name, mark.line + 1 if mark else 0, f"invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(name, 0, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise YamlError(name, 0, "invalid YAML: nested too deeply") from None
    except ValueError as exc:  # e.g. a timestamp out of range
        raise YamlError(name, 0, f"invalid YAML value: {exc}") from None
    return data, checker.lines


def read_text(path: Path | str, limit: int = MAX_FILE_BYTES) -> str:
    """Read a regular file (or stdin for ``-``) as UTF-8, at most ``limit`` bytes.

    FIFOs, devices, directories and files over the limit are refused: reading them would hang,
    never end or exhaust memory."""
    name = str(path)
    try:
        if name == STDIN:
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            st = os.stat(path)  # follows symlinks: a link to /dev/zero is judged by its target
            if stat.S_ISDIR(st.st_mode):
                raise YamlError(name, 0, "is a folder, not a file")
            if not stat.S_ISREG(st.st_mode):
                raise YamlError(name, 0, "not a regular file (a device, FIFO or socket); refusing to read it")
            if st.st_size > limit:
                raise YamlError(name, 0, f"too large ({st.st_size} bytes, at most {limit})")
            with open(path, "rb") as fh:
                raw = fh.read(limit + 1)
    except FileNotFoundError:
        raise YamlError(name, 0, "file not found") from None
    except OSError as exc:
        raise YamlError(name, 0, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise YamlError(name, 0, f"too large (more than {limit} bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlError(name, 0, f"not UTF-8 text (byte {exc.start})") from None


class OutputError(OSError):
    """An output target that must not or cannot be written; ``code`` is a message code of
    ``facts/messages/cli.yaml`` (``output.*``) and ``fields`` its placeholders."""

    def __init__(self, code: str, **fields: str):
        self.code, self.fields = code, fields
        super().__init__(f"{code}: {fields}")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(output: Path | str, text: str, fsync: bool = False) -> None:
    """Write ``text`` to a new path or over an existing regular file, atomically (temporary file in
    the same folder, then rename over the path itself).

    A symbolic link as the final component is refused, never followed (O_NOFOLLOW semantics: the
    link could point into another folder, or dangle where a file would be created); a device,
    FIFO, folder or unwritable place raises :class:`OutputError` too and is never replaced. Text
    that is not valid Unicode (lone surrogates) is refused before anything is written. A new file
    gets the umask's permissions, a replaced file keeps its own."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise OutputError("output.not_unicode", path=str(output), position=str(exc.start)) from None
    write_bytes_atomic(output, data, fsync)


def check_output(output: Path | str) -> os.stat_result | None:
    """Raise :class:`OutputError` unless ``output`` may be written by :func:`write_bytes_atomic`:
    a regular file (not a symbolic link) or a new name in an existing folder. Returns the
    ``lstat`` of the existing file, None for a new one (a command checks its output this way
    before doing the work, the writer again when writing)."""
    name = str(output)
    try:
        st = os.lstat(output)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError("output.cannot_write", path=name, reason=str(exc.strerror or exc)) from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise OutputError("output.symlink", path=name)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError("output.is_dir", path=name)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OutputError("output.not_regular", path=name)
    folder = Path(output).parent
    if not folder.is_dir():
        raise OutputError("output.no_dir", path=name, folder=str(folder))
    return st


def write_bytes_atomic(output: Path | str, data: bytes, fsync: bool = False) -> None:
    """As :func:`write_text_atomic`, for bytes: the project's one atomic writer. The path is used
    as given (not resolved): the temporary file is made in its folder and renamed over its last
    component, which ``rename(2)`` replaces itself, never a link's target."""
    st = check_output(output)
    folder = Path(output).parent
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".servewise-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, output)
    except OSError as exc:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise OutputError("output.cannot_write", path=str(output), reason=str(exc.strerror or exc)) from None
    except BaseException:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def display_name(path: Path | str) -> str:
    return "<stdin>" if str(path) == STDIN else str(path)


def load_file(path: Path | str) -> tuple[Any, Lines]:
    """Read and parse a YAML file strictly (``-`` is stdin)."""
    name = display_name(path)
    try:
        text = read_text(path)
    except YamlError as exc:
        raise YamlError(name, exc.line, exc.message) from None
    return load_text(text, name)


def line_of(lines: Lines, path: tuple) -> int:
    """The line of the deepest known prefix of ``path``."""
    for cut in range(len(path), -1, -1):
        if path[:cut] in lines:
            return lines[path[:cut]]
    return 0
