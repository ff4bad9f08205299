"""A YAML file edited as text: a value set, a key or a list item added, everything else byte for byte.

Why not load and dump: a dump drops the comments, the key order, the quoting and the indentation a
Kubernetes resource or a chart's values are written with, and the diff would be the whole file. PyYAML's
composer gives every node's exact position instead, so an edit replaces one scalar's characters or inserts
lines at the indentation of their siblings. The text is composed again after each edit (the files are
small), so positions never go stale. A value written in flow style (`{...}`, `[...]` with items) or as a
block scalar where a key must be added is refused in one line rather than guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from kprobe.errors import UsageError

# One step of a path: a map's key, a list's index, or a test picking a list's item (a listener by name).
Step = str | int | Callable[[Any], bool]
_PLAIN = re.compile(r"^[A-Za-z0-9_./<>@-][A-Za-z0-9_./<>@ :-]*$")


def scalar(value: object) -> str:
    """A value as a plain YAML scalar where it reads back as itself, else double-quoted."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    import yaml

    if _PLAIN.match(text) and ": " not in text and not text.endswith(":"):
        try:
            if yaml.safe_load(text) == text:
                return text
        except yaml.YAMLError:
            pass
    return json.dumps(text)


class YamlText:
    """One YAML file's text and the document being edited (`pick` chooses it among several)."""

    def __init__(self, path: str, text: str, pick: Callable[[Any], bool] = lambda node: True) -> None:
        self.path = path
        self.text = text
        self.pick = pick

    # -- reading --------------------------------------------------------------------------------------------

    def root(self) -> Any:
        """The composed node of the document edited, from the text as it is now."""
        import yaml

        for node in yaml.compose_all(self.text, Loader=yaml.SafeLoader):
            if node is not None and self.pick(node):
                return node
        raise UsageError(f"{self.path}: the document to edit is not found")

    def find(self, path: Sequence[Step]) -> Any | None:
        """The node at the path, or None where a step is missing."""
        node = self.root()
        for step in path:
            node = _child(node, step)
            if node is None:
                return None
        return node

    def value(self, path: Sequence[Step]) -> Any:
        """The Python value at the path (None where missing)."""
        node = self.find(path)
        return None if node is None else _construct(node)

    # -- editing --------------------------------------------------------------------------------------------

    def set(self, path: Sequence[Step], value: object) -> None:
        """The scalar at the path rewritten, or the missing keys added under the deepest map that exists."""
        node = self.root()
        for i, step in enumerate(path):
            child = _child(node, step)
            if child is None:
                if not isinstance(step, str):
                    raise UsageError(f"{self.path}: {_words(path[: i + 1])} is not in the file to edit")
                nested: object = value
                for key in reversed(path[i + 1:]):
                    if not isinstance(key, str):
                        raise UsageError(f"{self.path}: {_words(path[: i + 1])} is not in the file to edit")
                    nested = {key: nested}
                self.add_keys(node, {step: nested}, path[:i])
                return
            node = child
        self._replace_scalar(node, value, path)

    def set_list(self, path: Sequence[Step], values: Sequence[object]) -> None:
        """A list of scalars written at the path: a flow list rewritten in place, a block list item by item."""
        node = self.find(path)
        if node is None:
            self.set(path, list(values))
            return
        import yaml

        if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
            self._splice(node.start_mark.index, node.end_mark.index, "[" + ", ".join(scalar(v) for v in values) + "]")
            return
        if not isinstance(node, yaml.SequenceNode):
            raise UsageError(f"{self.path}: {_words(path)} is not a list to edit")
        if node.flow_style or not node.value:
            self._splice(node.start_mark.index, node.end_mark.index, "[" + ", ".join(scalar(v) for v in values) + "]")
            return
        have = len(node.value)
        for index, item in enumerate(values[:have]):
            self._replace_scalar(self.find([*path, index]), item, [*path, index])
        if len(values) > have:
            self.append_items(path, list(values[have:]))

    def add_keys(self, mapping: Any, entries: dict[str, object], where: Sequence[Step]) -> None:
        """Keys added at the end of a block map, at its keys' indentation."""
        import yaml

        if not isinstance(mapping, yaml.MappingNode) or mapping.flow_style or not mapping.value:
            raise UsageError(f"{self.path}: {_words(where) or 'the document'} is not a block map kprobe can add "
                             f"{', '.join(entries)} to: add it by hand")
        indent = mapping.value[0][0].start_mark.column
        self._insert_after(_last_line(mapping), render(entries, indent, self.sequence_offset()))

    def append_items(self, path: Sequence[Step], items: Sequence[object]) -> None:
        """Items appended to the block list at the path, dashed as its own items are."""
        import yaml

        node = self.find(path)
        if not isinstance(node, yaml.SequenceNode) or node.flow_style or not node.value:
            raise UsageError(f"{self.path}: {_words(path)} is not a block list kprobe can append to: edit it by hand")
        first = node.value[0]
        line = self._line(first.start_mark.line)
        dash = line.rfind("-", 0, first.start_mark.column)
        if dash < 0:
            raise UsageError(f"{self.path}: {_words(path)} is not a block list kprobe can append to: edit it by hand")
        lines: list[str] = []
        offset = self.sequence_offset()
        for item in items:
            lines += render([item], dash, offset)
        self._insert_after(_last_line(node), lines)

    def sequence_offset(self) -> int:
        """How far this file indents a block list's dash under its key (0 or 2 in practice)."""
        import yaml

        def walk(node: Any) -> int | None:
            if isinstance(node, yaml.MappingNode):
                for key, child in node.value:
                    if isinstance(child, yaml.SequenceNode) and child.value and not child.flow_style:
                        line = self._line(child.value[0].start_mark.line)
                        dash = line.rfind("-", 0, child.value[0].start_mark.column)
                        if dash >= 0:
                            return dash - key.start_mark.column
                    found = walk(child)
                    if found is not None:
                        return found
            elif isinstance(node, yaml.SequenceNode):
                for child in node.value:
                    found = walk(child)
                    if found is not None:
                        return found
            return None

        found = walk(self.root())
        return found if found is not None and found >= 0 else 2

    def lines_of(self, mapping: Any, key: str) -> list[str]:
        """The lines of one key of a block map and its value, as written (to copy a block beside it)."""
        import yaml

        if not isinstance(mapping, yaml.MappingNode):
            return []
        for k, v in mapping.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                first, last = k.start_mark.line, _last_line(v)
                return [self._line(i) for i in range(first, last + 1)]
        return []

    # -- text ---------------------------------------------------------------------------------------------------

    def _line(self, number: int) -> str:
        return self.text.splitlines()[number]

    def _replace_scalar(self, node: Any, value: object, path: Sequence[Step]) -> None:
        import yaml

        if not isinstance(node, yaml.ScalarNode) or node.style in ("|", ">"):
            raise UsageError(f"{self.path}: {_words(path)} is not a one-line value to edit: edit it by hand")
        written = scalar(value)
        if node.style == "'" and "'" not in str(value):
            written = f"'{value}'"
        elif node.style == '"':
            written = json.dumps(str(value))
        self._splice(node.start_mark.index, node.end_mark.index, written)

    def _splice(self, start: int, end: int, text: str) -> None:
        self.text = self.text[:start] + text + self.text[end:]

    def _insert_after(self, line: int, lines: list[str]) -> None:
        all_lines = self.text.splitlines(keepends=True)
        ending = "\r\n" if all_lines and all_lines[0].endswith("\r\n") else "\n"
        if line < len(all_lines) and not all_lines[line].endswith(("\n", "\r")):
            all_lines[line] += ending
        all_lines[line + 1:line + 1] = [x + ending for x in lines]
        self.text = "".join(all_lines)


def render(value: object, indent: int, offset: int) -> list[str]:
    """Block YAML lines for a map or a list at `indent` columns; a list's dashes `offset` further in."""
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{key}:")
                out += render(item, indent + (2 if isinstance(item, dict) else offset), offset)
            elif isinstance(item, _Raw):
                out.append(f"{pad}{key}:")
                out += item.lines(indent)
            else:
                out.append(f"{pad}{key}: {scalar(item) if item != [] else '[]'}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                first, *rest = render(item, indent + 2, offset)
                out.append(f"{pad}- {first.lstrip()}")
                out += rest
            else:
                out.append(f"{pad}- {scalar(item)}")
    return out


class _Raw:
    """A block copied from the file under a new key: its lines re-indented to their new place."""

    def __init__(self, lines: list[str], column: int) -> None:
        self.body = lines
        self.column = column

    def lines(self, indent: int) -> list[str]:
        shift = indent - self.column
        return [(" " * shift + line) if shift >= 0 else line[-shift:] for line in self.body]


def copied(lines: list[str]) -> _Raw | None:
    """A `key:` block copied from the file (its value's lines), to place under a new key; None if empty."""
    if len(lines) < 2:
        return None
    key_column = len(lines[0]) - len(lines[0].lstrip(" "))
    return _Raw(lines[1:], key_column)


def inline(lines: list[str]) -> str | None:
    """A one-line `key: value` copied from the file: its value text, comments off."""
    if len(lines) != 1:
        return None
    value = lines[0].split(":", 1)[1].split(" #", 1)[0].strip()
    return value or None


def _child(node: Any, step: Step) -> Any | None:
    import yaml

    if isinstance(node, yaml.MappingNode) and isinstance(step, str):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == step), None)
    if isinstance(node, yaml.SequenceNode):
        if isinstance(step, int):
            return node.value[step] if 0 <= step < len(node.value) else None
        if callable(step):
            return next((item for item in node.value if step(_construct(item))), None)
    return None


def _construct(node: Any) -> Any:
    """A node's Python value, as yaml.safe_load gives it."""
    import yaml

    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def _last_line(node: Any) -> int:
    """The last line a node's own text is on (its last scalar's, for a block collection)."""
    import yaml

    if isinstance(node, yaml.MappingNode) and node.value and not node.flow_style:
        return _last_line(node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and node.value and not node.flow_style:
        return _last_line(node.value[-1])
    end = node.end_mark
    return end.line - 1 if end.column == 0 and end.line > node.start_mark.line else end.line


def _words(path: Sequence[Step]) -> str:
    out = ""
    for step in path:
        if isinstance(step, str):
            out += ("." if out else "") + step
        elif isinstance(step, int):
            out += f"[{step}]"
        else:
            out += "[...]"
    return out
