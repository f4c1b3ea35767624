"""Reading YAML team files while keeping each value's line, for errors that point at it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..exceptions import ConfigError

__all__ = ["Loc", "SourceDocument", "format_path", "read_documents", "yaml_files"]

Loc = Sequence[str | int]
"""A key path inside one document, e.g. ``("spec", "tools", 0, "agent")``."""


def format_path(loc: Loc) -> str:
    """``spec.tools[0].agent`` for ``("spec", "tools", 0, "agent")``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(slots=True)
class SourceDocument:
    """One YAML document: its file, its position there, its node tree and its data."""

    file: str
    """The file as the user named it (a path relative to where they pointed)."""
    path: Path
    """The file's path."""
    index: int
    """Its position among the file's documents, from 0."""
    node: yaml.Node
    """The composed node tree, which knows each value's line."""
    data: Any
    """The plain data (dicts, lists, scalars)."""

    @property
    def line(self) -> int:
        """The line the document starts on (1-based)."""
        return self.node.start_mark.line + 1

    def line_of(self, loc: Loc) -> int:
        """The line of the deepest part of ``loc`` present in the file (1-based).

        A mapping entry is found at its key's line; a missing key at its parent's.
        """
        node = self.node
        line = node.start_mark.line
        for part in loc:
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                found = next(((k, v) for k, v in node.value
                              if isinstance(k, yaml.ScalarNode) and k.value == part), None)
                if found is None:
                    break
                line, node = found[0].start_mark.line, found[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
                    and 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line
            else:
                break
        return line + 1

    def value_line(self, loc: Loc) -> tuple[int, str | None]:
        """The first line of the value at ``loc`` and its block style (``|``, ``>``, None)."""
        node = self.node
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                node = next((v for k, v in node.value
                             if isinstance(k, yaml.ScalarNode) and k.value == part), node)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                node = node.value[part] if 0 <= part < len(node.value) else node
        style = node.style if isinstance(node, yaml.ScalarNode) else None
        return node.start_mark.line + 1, style

    def where(self, loc: Loc = ()) -> str:
        """``file:line`` of ``loc``."""
        return f"{self.file}:{self.line_of(loc)}"


def yaml_files(path: Path) -> list[Path]:
    """The YAML files of a team: ``path`` itself, or a directory's ``*.yaml``/``*.yml``, sorted."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir()
                       if p.is_file() and p.suffix in (".yaml", ".yml"))
        if not files:
            raise ConfigError(f"{path}: no *.yaml files in this directory.")
        return files
    if not path.is_file():
        raise ConfigError(f"{path}: no such file or directory.")
    return [path]


def _check_duplicate_keys(node: yaml.Node, file: str) -> None:
    stack = [node]
    seen_nodes: set[int] = set()  # aliases share nodes, and may even point at themselves
    while stack:
        current = stack.pop()
        if id(current) in seen_nodes:
            continue
        seen_nodes.add(id(current))
        if isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    line = key.start_mark.line + 1
                    if key.value in seen:
                        raise ConfigError(f"{file}:{line}: duplicate key {key.value!r} "
                                          f"(first at line {seen[key.value]}).")
                    seen[key.value] = line
                stack.append(value)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)


def _syntax_error(file: str, exc: yaml.YAMLError) -> ConfigError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        return ConfigError(f"{file}{line}: invalid YAML: {problem}{context}.")
    return ConfigError(f"{file}: invalid YAML: {exc}")


def read_documents(path: Path, display: str) -> list[SourceDocument]:
    """The non-empty documents of one YAML file; bad syntax raises ``ConfigError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{display}: cannot read the file: {exc}") from exc
    documents: list[SourceDocument] = []
    loader = yaml.SafeLoader(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_duplicate_keys(node, display)
            data = loader.construct_document(node)
            if data is not None:
                documents.append(SourceDocument(display, path, index, node, data))
            index += 1
    except yaml.YAMLError as exc:
        raise _syntax_error(display, exc) from None
    finally:
        loader.dispose()
    return documents
