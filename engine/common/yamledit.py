"""Edit a YAML file's text in place: set or remove one dotted key, keeping every other line,
comment and the file's block or flow style (engine/app/interview.py saves an operator's workload
this way on `ask --resume`). The edits are textual, from the node marks of PyYAML's composer; a
layout they cannot handle raises :class:`CannotEdit`, and the caller reads its result back."""

from __future__ import annotations

from typing import Any

import yaml


def _compose(text: str) -> yaml.Node | None:
    return yaml.compose(text, Loader=yaml.SafeLoader)  # the Python loader: marks index characters


def _flow(value: Any) -> str:
    """``value`` as one line of flow-style YAML."""
    return yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=1 << 30,
                          sort_keys=False).strip()[1:-1]


def _end(node: yaml.Node) -> int:
    """Where the content of ``node`` ends (a block collection: where its last value ends)."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and not node.flow_style and node.value:
        last = node.value[-1]
        return _end(last[1] if isinstance(node, yaml.MappingNode) else last)
    return node.end_mark.index


def _line_start(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


def _after_line(text: str, i: int) -> int:
    """The start of the line after the one ``i`` is on (``i`` already there: ``i``)."""
    if i > 0 and text[i - 1] == "\n":
        return i
    j = text.find("\n", i)
    return len(text) if j < 0 else j + 1


def _pairs(node: yaml.Node | None) -> list[tuple[yaml.Node, yaml.Node]] | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    return [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]


def _lookup(root: yaml.Node | None, parts: list[str]) -> list[tuple[yaml.MappingNode, yaml.Node, yaml.Node]]:
    """The (mapping, key, value) nodes along ``parts``, as far as they exist."""
    chain: list[tuple[yaml.MappingNode, yaml.Node, yaml.Node]] = []
    node = root
    for part in parts:
        pairs = _pairs(node)
        found = next(((k, v) for k, v in pairs or [] if k.value == part), None)
        if found is None:
            break
        chain.append((node, *found))  # type: ignore[arg-type]
        node = found[1]
    return chain


class CannotEdit(Exception):
    """The file's layout does not allow this edit faithfully (the caller writes elsewhere)."""


def edit_key(text: str, key: str, has: bool, value: Any) -> str:
    """``text`` with the input ``key`` set to ``value`` (``has``) or removed, in block or flow
    style as the file writes that mapping; :class:`CannotEdit` when the layout does not allow it."""
    parts = key.split(".")
    root = _compose(text)
    chain = _lookup(root, parts)
    if len(chain) == len(parts) and has:  # replace the value, keep the rest of its line
        _, k, v = chain[-1]
        end = _end(v)
        tail = "\n" if end > 0 and text[end - 1] == "\n" else ""
        return text[:k.end_mark.index] + ": " + _flow(value) + tail + text[end:]
    if len(chain) == len(parts):  # delete the key, and each mapping it leaves empty
        depth = len(chain) - 1
        while depth > 0 and len(chain[depth][0].value) == 1:
            depth -= 1
        mapping, k, v = chain[depth]
        if mapping.flow_style:
            i = next(i for i, (key_node, _) in enumerate(mapping.value) if key_node is k)
            if i > 0:  # ", key: value" after the previous value
                return text[:_end(mapping.value[i - 1][1])] + text[_end(v):]
            return text[:k.start_mark.index] + text[mapping.value[1][0].start_mark.index:]
        start = _line_start(text, k.start_mark.index)
        if text[start:k.start_mark.index].strip():
            raise CannotEdit
        return text[:start] + text[_after_line(text, _end(v)):]
    if not has:
        return text
    # add the key at the end of the deepest mapping the file has on its path
    parent = chain[-1][2] if chain else root
    rest = parts[len(chain):]
    if parent is None and not chain:
        indent, at = 0, len(text)
    elif not isinstance(parent, yaml.MappingNode):
        raise CannotEdit
    elif parent.flow_style:
        flow = _flow(value)
        for p in reversed(rest[1:]):
            flow = "{" + f"{p}: {flow}" + "}"
        if parent.value:
            at = _end(parent.value[-1][1])
            return text[:at] + f", {rest[0]}: {flow}" + text[at:]
        at = parent.end_mark.index - 1
        if text[at] != "}":
            raise CannotEdit
        return text[:at] + f"{rest[0]}: {flow}" + text[at:]
    elif parent.value:
        indent, at = parent.value[0][0].start_mark.column, _after_line(text, _end(parent))
    else:
        raise CannotEdit
    block = "".join(" " * (indent + 2 * i) + f"{p}:" + (f" {_flow(value)}" if i == len(rest) - 1 else "") + "\n"
                    for i, p in enumerate(rest))
    head = text[:at] if not at or text[at - 1] == "\n" else text[:at] + "\n"
    return head + block + text[at:]
