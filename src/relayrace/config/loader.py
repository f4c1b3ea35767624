"""`load_team`: YAML documents to agents, teams and workflows, checked before anything is built.

The steps, each failing with a ``ConfigError`` that names the file, the line and the key:
read the YAML (syntax, duplicate keys), validate each document against the models (unknown
keys, with a suggestion; Astromesh keys relayrace ignores become warnings), check names
(duplicates, undefined or wrong-kind references, an agent under two parents, routing rules),
find reference cycles by depth-first search, and only then build, children first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..agents.agent import Agent
from ..core.exceptions import CircularReferenceError, ConfigError, UserError
from ..models import Model
from ..teams.routing import (
    AgentTarget,
    FromSpeaker,
    NestedChatTarget,
    RoundRobin,
    TerminateTarget,
    check_rules,
    rule_from_dict,
    target_from_dict,
)
from ._build import Builder, import_target
from ._validate import ConfigWarning, ParsedDocument, parse_document, suggest
from ._yaml import Loc, SourceDocument, format_path, read_documents, yaml_files
from .graph import TeamGraph, build_graph
from .models import AgentDocument, AgentToolSpec, TeamDocument

__all__ = ["ConfigWarning", "DocumentInfo", "LoadedTeam", "load_team"]

Kind = Literal["Agent", "Team", "Workflow"]


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """Where a runnable was defined."""

    name: str
    """``metadata.name``."""
    kind: Kind
    """``Agent``, ``Team`` or ``Workflow``."""
    file: str
    """The file, as the user named it."""
    line: int
    """The line the document starts on."""
    api_version: str
    """``relayrace/v1`` or ``astromesh/v1``."""
    description: str = ""
    """``metadata.description`` or the spec's description."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """``metadata.labels``."""


class LoadedTeam(Mapping[str, Agent[Any]]):
    """The runnables of a YAML team by name: agents, swarms, teams and workflows.

    An agent with ``pattern: swarm`` is a swarm whose first member is that agent. ``warnings``
    lists what was read but ignored; ``documents`` where each name was defined; ``graph``
    what :func:`~relayrace.config.graph.to_mermaid` draws.
    """

    def __init__(self, path: Path, runnables: dict[str, Agent[Any]],
                 documents: list[DocumentInfo], warnings: list[ConfigWarning],
                 graph: TeamGraph, referenced: set[str]) -> None:
        self.path = path
        """The file or directory loaded."""
        self.documents = documents
        """Each document, in file order."""
        self.warnings = warnings
        """Keys read but ignored (unsupported Astromesh features), in file order."""
        self.graph = graph
        """Nodes and edges for drawing the team."""
        self._runnables = runnables
        self._referenced = referenced

    def __getitem__(self, name: str) -> Agent[Any]:
        return self._runnables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._runnables)

    def __len__(self) -> int:
        return len(self._runnables)

    def __repr__(self) -> str:
        return f"LoadedTeam({str(self.path)!r}, {list(self._runnables)})"

    @property
    def entry_points(self) -> list[str]:
        """The names no other document refers to: the runnables meant to be run."""
        return [d.name for d in self.documents if d.name not in self._referenced]


# -- references -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Ref:
    loc: Loc
    name: str
    agent_only: bool


def _references(doc: ParsedDocument) -> list[_Ref]:
    model = doc.model
    refs: list[_Ref] = []
    if isinstance(model, AgentDocument):
        spec = model.spec
        for i, t in enumerate(spec.tools):
            if isinstance(t, AgentToolSpec):
                refs.append(_Ref(("spec", "tools", i, "agent"), t.agent, True))
        refs += [_Ref(("spec", "sub_agents", i), n, True) for i, n in enumerate(spec.sub_agents)]
        refs += [_Ref(("spec", "specialists", i), n, True)
                 for i, n in enumerate(spec.specialists)]
        if spec.chain is not None:
            refs += [_Ref(("spec", "chain", "on_complete", i, "agent"), link.agent, True)
                     for i, link in enumerate(spec.chain.on_complete)]
    elif isinstance(model, TeamDocument):
        refs += [_Ref(("spec", "agents", i), n, True) for i, n in enumerate(model.spec.agents)]
    else:
        refs += [_Ref(("spec", "steps", i), n, False) for i, n in enumerate(model.spec.steps)]
    return refs


def _is_swarm(doc: ParsedDocument) -> bool:
    model = doc.model
    return isinstance(model, AgentDocument) and model.spec.orchestration.pattern == "swarm"


def _index(parsed: Sequence[ParsedDocument], errors: list[str]) -> dict[str, ParsedDocument]:
    by_name: dict[str, ParsedDocument] = {}
    for doc in parsed:
        first = by_name.get(doc.name)
        if first is not None:
            loc = ("metadata", "name")
            errors.append(f"{doc.where(loc)}: metadata.name: duplicate name {doc.name!r}; "
                          f"already defined at {first.where(loc)}")
            continue
        by_name[doc.name] = doc
    return by_name


def _raw_name(source: SourceDocument) -> str | None:
    """The ``metadata.name`` of a document that did not validate, if it has one to read."""
    data = source.data
    meta = data.get("metadata") if isinstance(data, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else None


def _check_references(parsed: Sequence[ParsedDocument], by_name: dict[str, ParsedDocument],
                      errors: list[str], invalid: set[str]) -> None:
    """Each reference names a document of the right kind (a name of a document that did not
    validate, ``invalid``, is not said to be undefined: its own errors are listed)."""
    agents = [n for n, d in by_name.items() if d.kind == "Agent"] + sorted(invalid)
    for doc in parsed:
        seen: dict[tuple[str, str], Loc] = {}
        for ref in _references(doc):
            where, path = doc.where(ref.loc), format_path(ref.loc)
            target = by_name.get(ref.name)
            if target is None and ref.name in invalid:
                pass
            elif target is None:
                what = "agent" if ref.agent_only else "agent, team or workflow"
                hint = suggest(ref.name, agents if ref.agent_only else [*by_name, *invalid])
                errors.append(f"{where}: {path}: undefined {what} {ref.name!r}{hint}")
            elif ref.agent_only and target.kind != "Agent":
                errors.append(f"{where}: {path}: {ref.name!r} is a {target.kind} "
                              f"({target.where()}); only an Agent can be used here")
            elif ref.loc[1] in ("sub_agents", "agents") and _is_swarm(target):
                errors.append(f"{where}: {path}: {ref.name!r} is a swarm (pattern: swarm, "
                              f"{target.where()}); a sub-agent or team member must be a single "
                              "agent. Use it as a tool (type: agent) or a workflow step")
            group = (str(ref.loc[1]), ref.name)
            if group in seen:
                errors.append(f"{where}: {path}: {ref.name!r} is listed twice in "
                              f"spec.{ref.loc[1]} (also {format_path(seen[group])})")
            seen[group] = ref.loc


def _check_parents(parsed: Sequence[ParsedDocument], errors: list[str]) -> set[str]:
    """An agent is a sub-agent of at most one parent; returns the agents that have one."""
    parents: dict[str, tuple[ParsedDocument, Loc]] = {}
    for doc in parsed:
        if not isinstance(doc.model, AgentDocument):
            continue
        for i, child in enumerate(doc.model.spec.sub_agents):
            loc: Loc = ("spec", "sub_agents", i)
            first = parents.get(child)
            if first is not None and first[0] is not doc:
                errors.append(
                    f"{doc.where(loc)}: {format_path(loc)}: agent {child!r} is already a "
                    f"sub-agent of {first[0].name!r} ({first[0].where(first[1])}) and cannot "
                    f"also be one of {doc.name!r}: an agent has at most one parent. Give the "
                    "second parent its own agent, or use an agent tool (type: agent) instead.")
            parents.setdefault(child, (doc, loc))
    return set(parents)


def _check_rules(doc: ParsedDocument, model: TeamDocument, by_name: dict[str, ParsedDocument],
                 errors: list[str]) -> None:
    spec = model.spec
    members = spec.agents
    problems: list[str] = []

    def member(name: str, loc: Loc) -> None:
        if name in members:
            return
        where, path = doc.where(loc), format_path(loc)
        if name in by_name:
            problems.append(f"{where}: {path}: {name!r} is not a member of team {doc.name!r} "
                            f"(spec.agents: {', '.join(members)})")
        else:
            problems.append(f"{where}: {path}: undefined agent {name!r}"
                            f"{suggest(name, members)}")

    if spec.initial is not None:
        member(spec.initial, ("spec", "initial"))
    for i, data in enumerate(spec.rules):
        loc: Loc = ("spec", "rules", i)
        try:
            rule = rule_from_dict(data)
        except ConfigError as exc:
            problems.append(f"{doc.where(loc)}: {format_path(loc)}: {exc}")
            continue
        doc.rules.append(rule)
        if isinstance(rule.condition, FromSpeaker):
            member(rule.condition.agent, (*loc, "when", "from_speaker"))
        target, at = rule.target, (*loc, "then")
        if isinstance(target, NestedChatTarget):
            if target.agent not in by_name:
                problems.append(f"{doc.where(at)}: {format_path((*at, 'nested_chat'))}: "
                                f"undefined agent {target.agent!r}"
                                f"{suggest(target.agent, list(by_name))}")
            target, at = target.then, (*at, "nested_chat", "then")
        if isinstance(target, AgentTarget):
            member(target.agent, (*at, "agent"))
        elif isinstance(target, RoundRobin):
            for j, name in enumerate(target.agents):
                member(name, (*at, "round_robin", j))
    if spec.default_target is not None:
        loc = ("spec", "default_target")
        try:
            doc.default_target = target_from_dict(spec.default_target)
        except ConfigError as exc:
            problems.append(f"{doc.where(loc)}: {format_path(loc)}: {exc}")
        else:
            if isinstance(doc.default_target, AgentTarget):
                member(doc.default_target.agent, (*loc, "agent"))
    if not problems:
        try:
            check_rules(members, doc.rules, spec.initial or members[0],
                        doc.default_target or TerminateTarget("no rule matched"),
                        bounded=spec.bounded)
        except ConfigError as exc:
            problems.append(f"{doc.where(('spec', 'rules'))}: team {doc.name!r}: {exc}")
    errors.extend(problems)


# -- cycles -----------------------------------------------------------------------------------


def _dependency_order(parsed: Sequence[ParsedDocument],
                      by_name: dict[str, ParsedDocument]) -> list[str]:
    """Every name after those it refers to; a cycle raises ``CircularReferenceError``."""
    edges = {d.name: list(dict.fromkeys(r.name for r in _references(d))) for d in parsed}
    state: dict[str, int] = {}  # absent: unvisited, 1: on the path, 2: done
    order: list[str] = []
    for doc in parsed:
        if doc.name in state:
            continue
        # A depth-first walk with its own stack (a deep team needs no deep recursion): each
        # entry is a name on the path and the index of its next reference to follow.
        state[doc.name] = 1
        path: list[str] = [doc.name]
        todo: list[int] = [0]
        while path:
            name, i = path[-1], todo[-1]
            if i == len(edges[name]):
                path.pop()
                todo.pop()
                state[name] = 2
                order.append(name)
                continue
            todo[-1] = i + 1
            nxt = edges[name][i]
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                error = CircularReferenceError(cycle)
                error.add_note("Defined at: " + ", ".join(
                    f"{n} ({by_name[n].where()})" for n in cycle[:-1]))
                raise error
            if nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(0)
    return order


# -- loading ----------------------------------------------------------------------------------


def _info(doc: ParsedDocument) -> DocumentInfo:
    model = doc.model
    meta = model.metadata
    if isinstance(model, AgentDocument):
        about = model.spec.identity.description
    else:
        about = model.spec.description
    return DocumentInfo(doc.name, model.kind, doc.source.file, doc.source.line,
                        model.api_version, meta.description or about, dict(meta.labels))


def _check_functions(sources: Sequence[SourceDocument], errors: list[str]) -> None:
    """Every ``type: python`` tool's function imports: found before anything is built, and
    read from the data, so that one run reports them with the other problems, a document's
    own validation errors included."""
    for source in sources:
        data = source.data
        spec = data.get("spec") if isinstance(data, dict) else None
        tools = spec.get("tools") if isinstance(spec, dict) else None
        for i, item in enumerate(tools if isinstance(tools, list) else ()):
            if not isinstance(item, dict) or item.get("type") != "python" or \
                    not isinstance(function := item.get("function"), str):
                continue
            loc: Loc = ("spec", "tools", i, "function")
            try:
                import_target(source, function)
            except UserError as exc:
                errors.append(f"{source.where(loc)}: {format_path(loc)}: {exc}")


_LOCATED = re.compile(r"(.+?):(\d+): ")


def _raise(errors: list[str]) -> None:
    """Raise every problem found, in file and line order, and how many there are."""
    if not errors:
        return
    problems: list[list[str]] = []  # a problem's lines: its file:line one, then any more
    for line in "\n".join(errors).splitlines():
        if _LOCATED.match(line) or not problems:
            problems.append([line])
        else:
            problems[-1].append(line)

    def key(problem: list[str]) -> tuple[str, int]:
        found = _LOCATED.match(problem[0])
        return (found.group(1), int(found.group(2))) if found else ("", 0)

    found = sorted({"\n".join(p): p for p in problems}.values(), key=key)
    raise ConfigError("\n".join("\n".join(p) for p in found) +
                      (f"\n({len(found)} problems)" if len(found) > 1 else ""))


def load_team(path: str | Path, *, model: Model | str | None = None) -> LoadedTeam:
    """Load a team from a directory of ``*.yaml`` files (sorted) or one multi-document file.

    ``model`` replaces every agent's model (e.g. a test model for offline runs; a remote
    ``a2a`` agent keeps its own). Nothing is contacted while loading but the agent card of an
    ``a2a`` tool that gives no name. Raises ``ConfigError`` naming the file, line and key of
    every problem found (unknown keys, undefined references, functions that do not import,
    ...; in file and line order, with their count), or ``CircularReferenceError`` showing a
    reference cycle.
    """
    root = Path(path)
    warnings: list[ConfigWarning] = []
    parsed: list[ParsedDocument] = []
    errors: list[str] = []
    invalid: set[str] = set()
    sources: list[SourceDocument] = []
    for file in yaml_files(root):
        for source in read_documents(file, str(file)):
            sources.append(source)
            try:
                parsed.append(parse_document(source, warnings))
            except ConfigError as exc:
                errors.append(str(exc))
                invalid.add(_raw_name(source) or "")
    if not parsed and not errors:
        raise ConfigError(f"{root}: no documents found.")
    # Every check runs on the documents that validated, so one load reports every problem.
    by_name = _index(parsed, errors)
    _check_references(parsed, by_name, errors, invalid)
    owned = _check_parents(parsed, errors)
    for doc in parsed:
        if isinstance(doc.model, TeamDocument):
            _check_rules(doc, doc.model, by_name, errors)
    _check_functions(sources, errors)
    _raise(errors)
    order = _dependency_order(parsed, by_name)
    builder = Builder(by_name, model, warnings, owned)
    for name in order:
        builder.build(name)
    runnables = {d.name: builder.built[d.name] for d in parsed}
    referenced = {r.name for d in parsed for r in _references(d)}
    return LoadedTeam(root, runnables, [_info(d) for d in parsed], warnings,
                      build_graph(parsed), referenced)
