"""Reading case files (YAML or JSONL) into `Case` objects, with errors at ``file:line``.

YAML is read with the team loader's machinery (`relayrace.config.read_documents`), so a case
file gets the same line numbers, duplicate-key and alias checks as a team file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from relayrace import ConfigError
from relayrace.config import SourceDocument, format_path, read_documents, suggest

from . import cases as _cases
from .cases import CASE_ADAPTER, Case

__all__ = ["CaseFileError", "load_cases", "parse_case"]

_MAX_ERRORS = 5
_MAX_BYTES = 16 * 1024 * 1024
"""The largest case file read: a bigger one is refused before it is parsed."""
_MAX_DEPTH = 100
"""The deepest nesting a case may have (the team loader's bound, for YAML too)."""


class CaseFileError(ConfigError):
    """A case file cannot be read: the message names the file, the line and a fix."""


def _keys() -> list[str]:
    """Every key a case file may use, for suggestions."""
    found: set[str] = set()
    for value in vars(_cases).values():
        if isinstance(value, type) and is_dataclass(value):
            found.update(f.name for f in fields(value))
    found.difference_update(("where", "lines"))
    return sorted(found)


def _data_loc(data: Any, loc: Sequence[str | int], keyed: bool) -> list[str | int]:
    """``loc`` of a pydantic error as a key path of ``data``: union member tags dropped
    (``keyed``: the error is about its last key, missing or unknown)."""
    path: list[str | int] = []
    node = data
    for part in loc:
        inside = (isinstance(node, dict) and isinstance(part, str) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node))
        if inside:
            node = node[part]
        elif keyed and isinstance(node, dict) and isinstance(part, str) and part == loc[-1]:
            pass  # a key that is missing or unknown: still part of the path
        else:
            continue
        path.append(part)
    return path


def _messages(data: Any, exc: ValidationError, line_of: Any, file: str) -> list[str]:
    """One ``file:line: what; fix`` message per distinct problem, the most specific first."""
    found: dict[tuple[str | int, ...], tuple[int, str]] = {}
    errors = sorted(exc.errors(include_url=False), key=lambda e: -len(e["loc"]))
    for err in errors:
        keyed = err["type"] in ("unexpected_keyword_argument", "extra_forbidden", "missing",
                                "missing_argument")
        loc = tuple(_data_loc(data, err["loc"], keyed))
        if any(k[:len(loc)] == loc and len(k) > len(loc) for k in found):
            continue  # a union's other members failing higher up: the deeper one says more
        kind, where = err["type"], format_path(loc) or "case"
        if kind in ("unexpected_keyword_argument", "extra_forbidden"):
            key = loc[-1] if loc else "?"
            text = f"unknown key {where!r}{suggest(key, _keys()) or ''}"
        elif kind == "missing" or kind == "missing_argument":
            text = f"missing required key {where!r}"
        elif kind == "value_error":
            text = f"{where}: {str(err['msg']).removeprefix('Value error, ')}"
        else:
            got = err.get("input")
            shown = "" if isinstance(got, dict | list) else f" (got {got!r})"
            text = f"{where}: {err['msg']}{shown}"
        line = line_of(loc)
        found.setdefault(loc, (line, f"{file}:{line}: {text}"))
    lines = [m for _, m in sorted(found.values())]
    return lines[:_MAX_ERRORS] + ([f"... and {len(lines) - _MAX_ERRORS} more"]
                                  if len(lines) > _MAX_ERRORS else [])


def parse_case(data: Any, *, file: str = "<case>", line_of: Any = None) -> Case:
    """``data`` (one case's dict) as a `Case`; a problem raises `CaseFileError` at its line.

    ``line_of(loc)`` gives the line of a key path (default: the file's first line).
    """
    where = line_of or (lambda loc: 1)
    if not isinstance(data, dict):
        raise CaseFileError(f"{file}:{where(())}: a case is a mapping with id, input (or "
                            f"turns) and expect; got {type(data).__name__}.")
    try:
        case = CASE_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise CaseFileError("\n".join(_messages(data, exc, where, file))) from None
    case.where = f"{file}:{where(())}"
    # The keys checked against the team when the cases run: their lines, for messages then.
    case.lines = {f"approvals.{tool}": f"{file}:{where(('approvals', tool))}"
                  for tool in case.approvals}
    if case.expect.pending is not None:
        case.lines["expect.pending"] = f"{file}:{where(('expect', 'pending'))}"
    return case


def _too_deep(line: str) -> bool:
    """Whether the JSON text ``line`` nests deeper than ``_MAX_DEPTH`` (checked before
    parsing: the parser recurses per level)."""
    if line.count("[") + line.count("{") <= _MAX_DEPTH:
        return False
    depth, in_string, escaped = 0, False, False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _read_text(path: Path, display: str) -> str:
    """The file's text; refused at the line where it passes ``_MAX_BYTES``."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise CaseFileError(f"{display}: cannot read the file: {exc}") from exc
    if len(data) > _MAX_BYTES:
        line = data.count(b"\n", 0, _MAX_BYTES) + 1
        raise CaseFileError(f"{display}:{line}: the case file passes {_MAX_BYTES // 2**20} MiB "
                            "here; split it into several files.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CaseFileError(f"{display}:{line}: not UTF-8 text: {exc.reason}") from None


def _yaml_cases(path: Path, display: str) -> list[Case]:
    _read_text(path, display)  # the size bound, before the YAML parser reads it all
    documents = read_documents(path, display)
    if len(documents) != 1:
        raise CaseFileError(f"{display}: a case file holds one YAML document (a list of cases, "
                            f"or cases: [...]); found {len(documents)}.")
    doc: SourceDocument = documents[0]
    data, prefix = doc.data, tuple[str, ...]()
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"cases"})
        if unknown:
            raise CaseFileError(f"{doc.where((unknown[0],))}: unknown key {unknown[0]!r} at the "
                                f"top of a case file{suggest(unknown[0], ['cases'])}; it holds "
                                "a list of cases, or cases: [...].")
        data, prefix = data.get("cases"), ("cases",)
    if not isinstance(data, list):
        raise CaseFileError(f"{doc.where(prefix)}: a case file holds a list of cases (or "
                            "cases: [...]).")
    found, problems = [], []
    for i, item in enumerate(data):  # every case's problems at once, not one per attempt
        base = (*prefix, i)
        try:
            found.append(parse_case(item, file=display,
                                    line_of=lambda loc, base=base: doc.line_of((*base, *loc))))
        except CaseFileError as exc:
            problems.extend(str(exc).splitlines())
    _raise_all(problems)
    return found


def _jsonl_cases(path: Path, display: str) -> list[Case]:
    text = _read_text(path, display)
    found, problems = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if _too_deep(line):
            problems.append(f"{display}:{number}: nested deeper than {_MAX_DEPTH} levels; a "
                            "case is a few levels of keys and lists.")
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{display}:{number}: invalid JSON at column {exc.colno}: "
                            f"{exc.msg}; a JSONL case file holds one case object per line.")
            continue
        try:
            found.append(parse_case(data, file=display, line_of=lambda loc, n=number: n))
        except CaseFileError as exc:
            problems.extend(str(exc).splitlines())
    _raise_all(problems)
    return found


def _raise_all(problems: list[str]) -> None:
    """Every problem found, at most ``_MAX_ERRORS`` of them shown."""
    if problems:
        more = len(problems) - _MAX_ERRORS
        raise CaseFileError("\n".join(problems[:_MAX_ERRORS] + (
            [f"... and {more} more"] if more > 0 else [])))


def load_cases(path: str | Path) -> list[Case]:
    """The cases of a YAML (``.yaml``/``.yml``) or JSONL (``.jsonl``) file, ids unique."""
    path = Path(path)
    display = str(path)
    if not path.is_file():
        raise CaseFileError(f"{display}: no such case file.")
    if path.suffix == ".jsonl":
        found = _jsonl_cases(path, display)
    elif path.suffix in (".yaml", ".yml"):
        try:
            found = _yaml_cases(path, display)
        except CaseFileError:
            raise
        except ConfigError as exc:  # YAML syntax, duplicate keys, aliases
            raise CaseFileError(str(exc)) from None
    else:
        raise CaseFileError(f"{display}: a case file is YAML (.yaml, .yml) or JSONL (.jsonl).")
    if not found:
        raise CaseFileError(f"{display}: the file holds no cases.")
    seen: dict[str, str] = {}
    for case in found:
        if case.id in seen:
            raise CaseFileError(f"{case.where}: duplicate case id {case.id!r} (first at "
                                f"{seen[case.id]}); give each case its own id.")
        seen[case.id] = case.where
    return found
