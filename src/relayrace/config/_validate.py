"""Checking one document against the models: errors with file, line and key; warnings."""

from __future__ import annotations

import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from jinja2 import TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from ..agents.guardrails import guardrail_from_config
from ..core._suggest import closest
from ..core.exceptions import ConfigError
from ..core.templates import Condition, is_template
from ..teams.routing import Rule, Target
from ._yaml import Loc, SourceDocument, format_path
from .models import (
    DOCUMENT_KINDS,
    IGNORED_MARK,
    MODEL_PROVIDERS,
    UNSUPPORTED_PATTERNS,
    AgentDocument,
    AgentToolSpec,
    ExternalToolSpec,
    GuardrailsSpec,
    MCPToolSpec,
    ModelParameters,
    PrimaryModelSpec,
    SpawnAgentToolSpec,
    TeamDocument,
    WorkflowDocument,
)

__all__ = ["ConfigWarning", "ParsedDocument", "parse_document", "suggest"]

_MAX_ERRORS = 10
_jinja = ImmutableSandboxedEnvironment()


@dataclass(frozen=True, slots=True)
class ConfigWarning:
    """Something in a team definition that is read but has no effect."""

    file: str
    """The file, as the user named it."""
    line: int
    """The line (1-based)."""
    key: str
    """The key path, e.g. ``spec.memory``."""
    message: str
    """What is ignored and why."""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.key}: {self.message}"


@dataclass(slots=True)
class ParsedDocument:
    """A document that passed validation."""

    source: SourceDocument
    """Where it came from."""
    model: AgentDocument | TeamDocument | WorkflowDocument
    """Its validated content."""
    guardrails: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """``input``/``output`` rules to build."""
    rules: list[Rule] = field(default_factory=list)
    """A team's routing rules, parsed."""
    default_target: Target | None = None
    """A team's default target, parsed."""

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.model.metadata.name

    @property
    def kind(self) -> str:
        """``Agent``, ``Team`` or ``Workflow``."""
        return self.model.kind

    def where(self, loc: Loc = ()) -> str:
        """``file:line`` of ``loc``."""
        return self.source.where(loc)


def suggest(word: object, choices: Sequence[str], *, cutoff: float = 0.6) -> str:
    """``; did you mean 'x'?`` for the closest of ``choices``, or ``""``."""
    close = closest(word, choices, cutoff=cutoff)
    return f"; did you mean {close!r}?" if close else ""


# -- mapping pydantic error locations back to YAML keys ---------------------------------------


def _unwrap(tp: Any) -> tuple[Any, str | None, tuple[Any, ...] | None]:
    """``(type, discriminator, union members)`` with ``Annotated`` and ``None`` stripped."""
    discriminator: str | None = None
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp, *meta = get_args(tp)
            for m in meta:
                if isinstance(m, FieldInfo) and isinstance(m.discriminator, str):
                    discriminator = m.discriminator
            continue
        if origin is Union or origin is types.UnionType:
            members = tuple(a for a in get_args(tp) if a is not type(None))
            if len(members) == 1:
                tp = members[0]
                continue
            return tp, discriminator, members
        return tp, discriminator, None


def _fields(cls: type[BaseModel]) -> dict[str, FieldInfo]:
    return {info.alias or name: info for name, info in cls.model_fields.items()}


def _tag_values(cls: Any, discriminator: str) -> tuple[Any, ...]:
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        info = _fields(cls).get(discriminator)
        if info is not None:
            return get_args(info.annotation)
    return ()


def resolve_loc(root: type[BaseModel], loc: Loc) -> tuple[list[str | int], Any, Any]:
    """The YAML path of a pydantic error ``loc`` (union tags dropped), the model class owning
    its last key, and the annotation found there (``None`` past an unknown key)."""
    path: list[str | int] = []
    owner: Any = None
    tp: Any = root
    for part in loc:
        base, discriminator, members = _unwrap(tp)
        if members is not None and discriminator is not None and isinstance(part, str):
            tp = next((m for m in members if part in _tag_values(m, discriminator)), None)
            continue  # a union tag, not a key of the file
        path.append(part)
        if isinstance(base, type) and issubclass(base, BaseModel) and isinstance(part, str):
            owner = base
            info = _fields(base).get(part)
            tp = info.annotation if info is not None else None
        elif get_origin(base) is list and isinstance(part, int):
            tp = get_args(base)[0]
        elif get_origin(base) is dict:
            tp = get_args(base)[1]
        else:
            tp = None
    return path, owner, tp


def _describe(source: SourceDocument, cls: type[BaseModel],
              err: ErrorDetails) -> tuple[int, str]:
    """``(line, "file:line: message")`` for one pydantic error."""
    path, owner, tp = resolve_loc(cls, err["loc"])
    kind = err["type"]
    ctx = err.get("ctx") or {}
    at: Loc = path
    if kind == "extra_forbidden":
        key = path[-1]
        allowed = list(_fields(owner)) if owner is not None else []
        hint = suggest(key, allowed) or (f"; valid keys: {', '.join(allowed)}" if allowed else "")
        text = f"unknown key {format_path(path)!r}{hint}"
    elif kind == "missing":
        text = f"missing required key {format_path(path)!r}"
    elif kind in ("union_tag_invalid", "union_tag_not_found"):
        key = str(ctx.get("discriminator", "type")).strip("'")
        expected = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
        full = format_path([*path, key])
        if kind == "union_tag_not_found":
            text = f"missing required key {full!r} ({', '.join(expected)})"
        else:
            at = [*path, key]
            tag = ctx.get("tag")
            text = (f"{full}: unknown value {tag!r}"
                    f"{suggest(tag, expected) or '; valid: ' + ', '.join(expected)}")
    else:
        text = f"{format_path(path) or 'document'}: {err['msg']}"
        if kind == "literal_error":
            base, _, _ = _unwrap(tp)
            choices = [str(c) for c in get_args(base)] if get_origin(base) is Literal else []
            text += suggest(err.get("input"), choices)
        elif not isinstance(err.get("input"), dict | list):
            text += f" (got {err.get('input')!r})"
    line = source.line_of(at)
    return line, f"{source.file}:{line}: {text}"


def _validation_error(source: SourceDocument, cls: type[BaseModel], exc: ValidationError) -> str:
    found = {_describe(source, cls, e) for e in exc.errors(include_url=False)}
    lines = [m for _, m in sorted(found)]
    more = len(lines) - _MAX_ERRORS
    return "\n".join(lines[:_MAX_ERRORS] + ([f"... and {more} more"] if more > 0 else []))


# -- warnings ---------------------------------------------------------------------------------


def _ignored(model: BaseModel, path: tuple[str | int, ...]) -> Iterator[tuple[Loc, str]]:
    """Each Astromesh-only key set in ``model`` (and below), with what it was for."""
    if isinstance(model, ExternalToolSpec):
        name = f" {model.name!r}" if model.name else ""
        yield path, (f"tool{name} of type {model.type!r} is not supported by relayrace; "
                     "ignored (use type: python or type: agent)")
        return
    if isinstance(model, MCPToolSpec) and not model.runnable:
        name = f" {model.name!r}" if model.name else ""
        yield path, (f"tool{name} of type 'mcp' names no command or url; ignored (relayrace "
                     "runs an MCP server from command/args or reaches it at url)")
        return
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        if name not in model.model_fields_set:
            continue
        extra = info.json_schema_extra
        value = getattr(model, name)
        if isinstance(extra, dict) and extra.get(IGNORED_MARK):
            what = (info.description or "").split(" Astromesh key")[0].rstrip(".")
            yield (*path, key), f"not supported by relayrace; ignored ({what})"
        elif isinstance(value, BaseModel):
            yield from _ignored(value, (*path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _ignored(item, (*path, key, i))


def _warn(out: list[ConfigWarning], source: SourceDocument, loc: Loc, message: str) -> None:
    out.append(ConfigWarning(source.file, source.line_of(loc), format_path(loc),
                             message + "."))


def _check_guardrails(parsed: ParsedDocument, spec: GuardrailsSpec, errors: list[str]) -> None:
    for side in ("input", "output"):
        rules: list[dict[str, Any]] = getattr(spec, side)
        for i, rule in enumerate(rules):
            loc = ("spec", "guardrails", side, i)
            try:
                guardrail_from_config(rule)
            except ConfigError as exc:
                errors.append(f"{parsed.where(loc)}: {format_path(loc)}: {exc}")
        parsed.guardrails[side] = rules


_NOT_FOR_TRANSFERS = {
    "parameters": "a transfer takes only a reason, not arguments",
    "rate_limit": "transfers are bounded per run by spec.orchestration.max_handoffs",
    "max_turns": "a member continues the swarm's run; bound its turns with "
                 "spec.orchestration.max_iterations in the member's own document",
    "timeout_seconds": "a member continues the swarm's run; bound it with "
                       "spec.orchestration.timeout_seconds in the member's own document",
    "report": "a member answers in the conversation itself, not with a report",
    "include_history": "a member always receives the conversation (bounded by "
                       "spec.orchestration.transcript)",
}
"""Agent-tool keys that only a delegation can use, refused on swarm members, and why."""


def _check_swarm_members(parsed: ParsedDocument, doc: AgentDocument, errors: list[str]) -> None:
    for i, item in enumerate(doc.spec.tools):
        if not isinstance(item, AgentToolSpec):
            continue
        for key, why in _NOT_FOR_TRANSFERS.items():
            if key in item.model_fields_set:
                loc: Loc = ("spec", "tools", i, key)
                errors.append(
                    f"{parsed.where(loc)}: {format_path(loc)}: not available for a member of a "
                    f"swarm, which is reached by a transfer of the whole conversation: {why}. "
                    "Remove the key, or drop 'pattern: swarm' to call the agent as a tool "
                    "(a delegation), where it applies")


def _check_agent(parsed: ParsedDocument, doc: AgentDocument,
                 warnings: list[ConfigWarning], errors: list[str]) -> None:
    spec, source = doc.spec, parsed.source
    orch = spec.orchestration
    if orch.pattern in UNSUPPORTED_PATTERNS:
        _warn(warnings, source, ("spec", "orchestration", "pattern"),
              f"pattern {orch.pattern!r} is not supported by relayrace; ignored (the agent "
              "runs as 'react')")
    for key, pattern in (("max_handoffs", "swarm"), ("transcript", "swarm"),
                         ("max_steps", "plan_and_execute"), ("max_subtasks", "parallel_fan_out"),
                         ("on_error", "parallel_fan_out"), ("stages", "pipeline")):
        if orch.pattern != pattern and key in orch.model_fields_set:
            _warn(warnings, source, ("spec", "orchestration", key),
                  f"applies only to pattern {pattern!r}; ignored")
    if orch.pattern == "swarm":
        _check_swarm_members(parsed, doc, errors)
    workers = any(t.type == "agent" or (t.type == "human" and orch.pattern == "swarm")
                  for t in spec.tools)
    if (orch.pattern == "swarm" and not workers) or (
            orch.pattern == "supervisor" and not workers and not spec.specialists):
        pattern_loc: Loc = ("spec", "orchestration", "pattern")
        errors.append(f"{parsed.where(pattern_loc)}: {format_path(pattern_loc)}: pattern "
                      f"{orch.pattern!r} needs at least one tool of type 'agent' (its "
                      f"{'members' if orch.pattern == 'swarm' else 'workers'})")
    conversational = spec.memory.conversational if spec.memory is not None else None
    fallback = spec.model.fallback if spec.model is not None else None
    fallbacks: list[tuple[Loc, PrimaryModelSpec | None]] = (
        [(("spec", "model", "fallback"), fallback)] if not isinstance(fallback, list) else
        [(("spec", "model", "fallback", i), f) for i, f in enumerate(fallback)])
    fallbacks += [(("spec", "tools", i, "models", key), menu)
                  for i, t in enumerate(spec.tools) if isinstance(t, SpawnAgentToolSpec)
                  for key, menu in t.models.items()]
    for model_loc, primary in (
            (("spec", "model", "primary"), spec.model.primary if spec.model else None),
            *fallbacks,
            (("spec", "compression", "summary_model"),
             spec.compression.summary_model if spec.compression else None),
            (("spec", "memory", "conversational", "summary_model"),
             conversational.summary_model if conversational else None)):
        if primary is not None and primary.provider not in MODEL_PROVIDERS:
            provider = primary.provider
            provider_loc: Loc = (*model_loc, "provider")
            errors.append(f"{parsed.where(provider_loc)}: {format_path(provider_loc)}: unknown "
                          f"provider {provider!r}{suggest(provider, MODEL_PROVIDERS)}; valid: "
                          f"{', '.join(MODEL_PROVIDERS)}")
    if fallback is not None and spec.model is not None and spec.model.primary is None:
        errors.append(f"{parsed.where(('spec', 'model', 'fallback'))}: spec.model.fallback "
                      "needs spec.model.primary, the model asked first")
    if spec.model is not None and spec.model.primary is None and spec.model.default is None:
        errors.append(f"{parsed.where(('spec', 'model'))}: missing required key "
                      "'spec.model.primary'")
    if spec.model is not None and spec.model.primary is not None:
        params = spec.model.primary.parameters
        for key in params.model_extra or {}:
            hint = suggest(key, list(ModelParameters.model_fields), cutoff=0.8)
            if hint:
                key_loc: Loc = ("spec", "model", "primary", "parameters", key)
                errors.append(f"{parsed.where(key_loc)}: unknown key "
                              f"{format_path(key_loc)!r}{hint} (other keys pass to the "
                              "provider unchanged)")
    system = spec.prompts.system
    if is_template(system):
        try:
            _jinja.parse(system)
        except TemplateSyntaxError as exc:
            start, style = source.value_line(("spec", "prompts", "system"))
            line = start + (exc.lineno or 1) - (0 if style in ("|", ">") else 1)
            errors.append(f"{source.file}:{line}: spec.prompts.system: template syntax error: "
                          f"{exc.message}")
        except RecursionError:  # Jinja's parser recurses per nested expression
            errors.append(f"{source.where(('spec', 'prompts', 'system'))}: spec.prompts.system: "
                          "the template nests its expressions too deeply to read; flatten it")
    _check_guardrails(parsed, spec.guardrails, errors)
    if spec.chain is not None:
        _check_chain(parsed, doc, errors)


def _check_chain(parsed: ParsedDocument, doc: AgentDocument, errors: list[str]) -> None:
    """A chain's links: at most one default, never with a 'when'; conditions and inputs that
    compile."""
    assert doc.spec.chain is not None
    defaults = []
    for i, link in enumerate(doc.spec.chain.on_complete):
        loc: Loc = ("spec", "chain", "on_complete", i)
        where = f"{parsed.where(loc)}: {format_path(loc)}"
        if link.default:
            defaults.append(link.agent)
            if link.when is not None:
                errors.append(f"{where}: a default link runs when no 'when' held; it cannot "
                              "have a 'when' of its own")
        if link.when is not None:
            try:
                Condition(link.when)
            except ConfigError as exc:
                errors.append(f"{where}.when: {exc}")
        try:
            _jinja.parse(link.input)
        except TemplateSyntaxError as exc:
            errors.append(f"{where}.input: template syntax error: {exc.message}")
        except RecursionError:
            errors.append(f"{where}.input: the template nests too deeply to read")
    if len(defaults) > 1:
        loc = ("spec", "chain", "on_complete")
        errors.append(f"{parsed.where(loc)}: {format_path(loc)}: more than one default link "
                      f"({', '.join(defaults)}); keep one")


def _check_workflow(parsed: ParsedDocument, doc: WorkflowDocument, errors: list[str]) -> None:
    spec = doc.spec
    if spec.type == "loop" and spec.max_iterations is None:
        errors.append(f"{parsed.where(('spec', 'type'))}: a loop workflow needs "
                      "'spec.max_iterations'")
    for key, kind in (("max_iterations", "loop"), ("until_output_contains", "loop"),
                      ("on_error", "parallel")):
        if spec.type != kind and key in spec.model_fields_set:
            errors.append(f"{parsed.where(('spec', key))}: 'spec.{key}' applies only to "
                          f"type {kind!r}, not {spec.type!r}")


def parse_document(source: SourceDocument, warnings: list[ConfigWarning]) -> ParsedDocument:
    """Validate one document; warnings are appended, errors raise ``ConfigError``."""
    data = source.data
    if not isinstance(data, dict):
        raise ConfigError(f"{source.where()}: a document must be a mapping with apiVersion, "
                          f"kind, metadata and spec; got {type(data).__name__}.")
    kind = data.get("kind")
    if kind is None:
        raise ConfigError(f"{source.where()}: missing required key 'kind' "
                          f"({', '.join(DOCUMENT_KINDS)})")
    cls = DOCUMENT_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ConfigError(f"{source.where(('kind',))}: kind: unknown kind {kind!r}"
                          f"{suggest(kind, list(DOCUMENT_KINDS))}; valid: "
                          f"{', '.join(DOCUMENT_KINDS)}")
    try:
        model = cls.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_error(source, cls, exc)) from None
    parsed = ParsedDocument(source, model)
    errors: list[str] = []
    mine: list[ConfigWarning] = []
    for loc, message in _ignored(model, ()):
        _warn(mine, source, loc, message)
    if isinstance(model, AgentDocument):
        _check_agent(parsed, model, mine, errors)
    elif isinstance(model, TeamDocument):
        _check_guardrails(parsed, model.spec.guardrails, errors)
    else:
        _check_workflow(parsed, model, errors)
    if errors:
        raise ConfigError("\n".join(errors))
    warnings.extend(sorted(mine, key=lambda w: w.line))
    return parsed
