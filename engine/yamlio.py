"""Read YAML while remembering the line of every mapping key and list item (for error messages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

Lines = dict[tuple, int]
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml is ~10x faster when built in


def safe_load(text: str):
    """``yaml.safe_load`` with the C loader when available."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 - a safe loader


class YamlError(ValueError):
    """A YAML file could not be read; ``line`` is 1-based (0 when unknown)."""

    def __init__(self, path: str, line: int, message: str):
        self.path, self.line, self.message = path, line, message
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


def _walk(node: yaml.Node, path: tuple, lines: Lines) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _walk(item, path + (i,), lines)


def load_text(text: str, name: str) -> tuple[Any, Lines]:
    """Parse YAML text; return the data and a map from key paths to line numbers."""
    try:
        loader = Loader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise YamlError(name, mark.line + 1 if mark else 0, f"invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise YamlError(name, 0, f"invalid YAML: {exc}") from None
    lines: Lines = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def load_file(path: Path | str) -> tuple[Any, Lines]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise YamlError(str(path), 0, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise YamlError(str(path), 0, f"cannot read: {exc}") from None
    return load_text(text, str(path))


def line_of(lines: Lines, path: tuple) -> int:
    """The line of the deepest known prefix of ``path``."""
    for cut in range(len(path), -1, -1):
        if path[:cut] in lines:
            return lines[path[:cut]]
    return 0
