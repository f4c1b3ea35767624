"""Reading YAML team files while keeping each value's line, for errors that point at it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.exceptions import ConfigError

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


MAX_DEPTH = 100
"""The deepest nesting of lists and mappings a team file may have, aliases expanded."""
MAX_ALIAS_VALUES = 100_000
"""The most values aliases may add to one document when expanded (a "billion laughs")."""
MAX_ALIAS_CHARS = 1_000_000
"""The most characters aliases may add to one document when expanded (a long text repeated)."""


class _BoundedLoader(yaml.SafeLoader):
    """A safe loader refusing deep nesting, and values it cannot build, as located YAML errors."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def fetch_flow_collection_start(self, token_class: type[yaml.Token]) -> None:
        if self.flow_level >= MAX_DEPTH:  # the scanner reads ahead through every open bracket
            raise yaml.scanner.ScannerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                            self.get_mark())
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self._depth += 1  # the composer recurses per level: stop before Python's own limit
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels",
                    self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # e.g. a 5,000-digit integer, a 13th month
            problem = (f"the integer {_clip(node.value)!r} is too long to read; quote it to "
                       "keep it as text" if node.tag == "tag:yaml.org,2002:int"
                       else f"cannot read the value {_clip(node.value)!r}: {exc}")
            raise yaml.constructor.ConstructorError(None, None, problem,
                                                    node.start_mark) from exc


def _clip(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_expansion(root: yaml.Node, file: str) -> None:
    """Refuse a document whose aliases expand too far or too deep, or contain themselves.

    Aliases share nodes, so the node tree stays small while the data it stands for, as every
    later step walks it, can grow exponentially. Sizes are counted per shared node, once.
    """
    # id(node) -> (values, depth, characters) when expanded
    expanded: dict[int, tuple[int, int, int]] = {}
    written = 0  # characters of the scalars as written, each shared node once
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        if leaving:
            kids = [expanded[id(k)] for k in _children(node)]
            size = 1 + sum(k[0] for k in kids)
            depth = 1 + max((k[1] for k in kids), default=0)
            own = len(node.value) if isinstance(node, yaml.ScalarNode) else 0
            written += own
            chars = own + sum(k[2] for k in kids)
            open_nodes.discard(key)
            expanded[key] = (size, depth, chars)
            line = node.start_mark.line + 1
            if size - len(expanded) > MAX_ALIAS_VALUES:
                raise ConfigError(
                    f"{file}:{line}: aliases expand this value to more than "
                    f"{MAX_ALIAS_VALUES} values; write the values out, or nest fewer aliases.")
            if chars - written > MAX_ALIAS_CHARS:
                raise ConfigError(
                    f"{file}:{line}: aliases expand this value by more than "
                    f"{MAX_ALIAS_CHARS} characters; write it out, or repeat it less.")
            if depth > MAX_DEPTH:
                raise ConfigError(f"{file}:{line}: aliases nest this value deeper than "
                                  f"{MAX_DEPTH} levels; write it flatter.")
            continue
        if key in expanded:
            continue
        if key in open_nodes:
            raise ConfigError(f"{file}:{node.start_mark.line + 1}: an alias refers to a value "
                              "that contains it; a team file cannot hold a value inside itself.")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node))


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
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)  # checks the characters already
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_expansion(node, display)
            _check_duplicate_keys(node, display)
            data = loader.construct_document(node)
            if data is not None:
                documents.append(SourceDocument(display, path, index, node, data))
            index += 1
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow, e.g. NUL
        line = text.count("\n", 0, exc.position) + 1
        character = f"#x{exc.character:04x}" if isinstance(exc.character, int) else exc.character
        raise ConfigError(f"{display}:{line}: invalid YAML: character {character} is not "
                          f"allowed ({exc.reason}); remove it or quote it as an escape in a "
                          "double-quoted string.") from None
    except yaml.YAMLError as exc:
        raise _syntax_error(display, exc) from None
    finally:
        if loader is not None:
            loader.dispose()
    return documents
