"""Instantiating checked documents: agents, swarms, teams and workflows, children first."""

from __future__ import annotations

import copy
import importlib
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..agents.agent import Agent
from ..agents.compression import Compression, read_result
from ..agents.guardrails import Guardrail, guardrail_from_config
from ..agents.handoffs import Handoff, TransferPolicy, handoff
from ..agents.human import human
from ..agents.memory import Memory
from ..agents.output import json_schema_type
from ..agents.permissions import Permissions
from ..agents.tools import RateLimit, Tool, Toolset, tool
from ..connect.mcp import MCPServer
from ..core.exceptions import ConfigError, UserError
from ..models import _LOCAL_BASE_URLS, Model, ModelSettings
from ..models.fallback import FallbackModel
from ..teams.meta_tools import spawn_agent
from ..teams.patterns import DEFAULT_STAGES, ParallelFanOut, Pipeline, PlanAndExecute, swarm
from ..teams.routing import NestedChatTarget, TerminateTarget
from ..teams.team import Team
from ..teams.workflows import Chain, ChainLink, LoopAgent, ParallelAgent, SequentialAgent
from ._validate import ConfigWarning, ParsedDocument, suggest
from ._yaml import Loc, SourceDocument, format_path
from .models import (
    PROVIDER_ALIASES,
    A2AToolSpec,
    AgentDocument,
    AgentSpec,
    AgentToolSpec,
    HumanToolSpec,
    MCPToolSpec,
    PrimaryModelSpec,
    PythonToolSpec,
    RateLimitSpec,
    SpawnAgentToolSpec,
    TeamDocument,
    WorkflowDocument,
)

__all__ = ["Builder", "import_target", "swarm_root_name"]

_LOCATED = re.compile(r"[^\n]+:\d+: ")


def swarm_root_name(name: str) -> str:
    """The name of the swarm built for the agent ``name`` (which is its first member)."""
    return f"{name}-swarm"


@contextmanager
def located(doc: ParsedDocument, loc: Loc) -> Iterator[None]:
    """Turn a ``UserError`` raised while building ``loc`` into a located ``ConfigError``."""
    try:
        yield
    except UserError as exc:
        if isinstance(exc, ConfigError) and _LOCATED.match(str(exc)):
            raise  # located already, e.g. while building another document's copy
        raise ConfigError(f"{doc.where(loc)}: {format_path(loc) or doc.name}: {exc}") from exc


def _rate(spec: RateLimitSpec | None) -> RateLimit | None:
    return RateLimit(spec.max_calls, spec.window_seconds) if spec is not None else None


def _local_file(folder: Path, module_name: str) -> Path | None:
    """The file next to the YAML that ``module_name`` would be, if there is one."""
    base = folder.joinpath(*module_name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _import_module(module_name: str, folder: Path) -> Any:
    """The module, imported as is or else from ``folder``; any failure is a ``ConfigError``."""
    try:
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise ConfigError(f"cannot import {module_name!r}: {exc}") from exc
        sys.path.insert(0, str(folder))
        try:
            return importlib.import_module(module_name)
        except ImportError as again:
            raise ConfigError(f"cannot import {module_name!r} (looked on sys.path and in "
                              f"{folder}): {again}") from again
        finally:
            sys.path.remove(str(folder))
    except ConfigError:
        raise
    except (Exception, SystemExit) as exc:  # the module itself failed, or called sys.exit()
        raise ConfigError(f"importing {module_name!r} failed: {type(exc).__name__}: "
                          f"{exc}") from exc


def import_target(source: SourceDocument, target: str) -> Any:
    """``package.module:attribute``; a module not importable as is is found next to the file
    ``source`` is in."""
    module_name, _, attribute = target.partition(":")
    folder = Path(source.path).resolve().parent
    module = _import_module(module_name, folder)
    local = _local_file(folder, module_name)
    loaded = getattr(module, "__file__", None)
    if local is not None and loaded is not None and Path(loaded).resolve() != local:
        raise ConfigError(f"{module_name!r} is already imported from {loaded}, not from "
                          f"{local} next to this file; give the module a distinct name")
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            known = [k for k in dir(value) if not k.startswith("_")]
            raise ConfigError(f"module {module_name!r} has no attribute {attribute!r}"
                              f"{suggest(part, known)}")
        value = getattr(value, part)
    return value


def _python_tool(doc: ParsedDocument, spec: PythonToolSpec) -> Tool:
    value = import_target(doc.source, spec.function)
    if isinstance(value, Tool):
        found = copy.copy(value)  # keep the shared object as its module defined it
        for key in ("name", "description", "sequential", "requires_approval",
                    "max_result_tokens", "protected", "compactable"):
            if getattr(spec, key) is not None:
                setattr(found, key, getattr(spec, key))
        if spec.confirm:  # a gate the YAML adds; it never removes the tool's own
            found.requires_approval = True
        if spec.rate_limit is not None:
            found.rate_limit = _rate(spec.rate_limit)
            found._window = None
        found._definition = None
        return found
    if not callable(value):
        raise ConfigError(f"{spec.function!r} is a {type(value).__name__}, not a relayrace "
                          "Tool or a function")
    return tool(name=spec.name, description=spec.description,
                sequential=bool(spec.sequential),
                requires_approval=bool(spec.requires_approval or spec.confirm),
                rate_limit=_rate(spec.rate_limit), max_result_tokens=spec.max_result_tokens,
                protected=bool(spec.protected), compactable=bool(spec.compactable))(value)


def _nested_chats(doc: ParsedDocument) -> list[str]:
    """The agents a team's nested chats run, each once."""
    targets = [doc.default_target, *(r.target for r in doc.rules)]
    return list(dict.fromkeys(t.agent for t in targets if isinstance(t, NestedChatTarget)))


def _guardrails(rules: list[dict[str, Any]]) -> list[Guardrail]:
    return [guardrail_from_config(rule) for rule in rules]


class Builder:
    """Builds each document's object once; ``fresh`` builds copies for a second parent."""

    def __init__(self, documents: dict[str, ParsedDocument], model: Model | str | None,
                 warnings: list[ConfigWarning], owned: set[str]) -> None:
        self.documents = documents
        self.override = model
        self.warnings = warnings
        self.owned = owned  # listed in some agent's sub_agents: never placed elsewhere
        self.built: dict[str, Agent[Any]] = {}
        self.placed: set[str] = set()
        self._models: dict[str, Model | str | None] = {}
        self._servers: dict[str, MCPServer] = {}  # one server per distinct spec, shared
        self._ready: dict[str, list[Agent[Any]]] = {}  # new sub-agents made by fresh, by name

    def build(self, name: str) -> Agent[Any]:
        """The primary object of ``name`` (its dependencies must be built already)."""
        if name not in self.built:
            self.built[name] = self._make(self.documents[name])
        return self.built[name]

    def fresh(self, name: str) -> Agent[Any]:
        """A new object for ``name``, with new children, for a place where it has a parent.

        ``name``'s primary object is built by then, so every sub-agent below it is placed
        and gets a new object too: they are made first, deepest first (in a loop, so a deep
        tree needs no deep recursion), and taken from ``_ready`` by their parents."""
        below: list[str] = []
        stack = list(self._sub_agents(name))
        while stack:
            child = stack.pop()
            below.append(child)
            stack.extend(self._sub_agents(child))
        for child in reversed(below):  # each after every sub-agent below it
            self._ready.setdefault(child, []).append(self._make(self.documents[child]))
        return self._make(self.documents[name])

    def _sub_agents(self, name: str) -> list[str]:
        model = self.documents[name].model
        return model.spec.sub_agents if isinstance(model, AgentDocument) else []

    def _member(self, name: str) -> Agent[Any]:
        """``name`` placed under a team or workflow: the primary object if still free."""
        if name in self.owned or name in self.placed:
            return self.fresh(name)
        self.placed.add(name)
        return self.build(name)

    def _make(self, doc: ParsedDocument) -> Agent[Any]:
        model = doc.model
        with located(doc, ("metadata", "name")):
            if isinstance(model, AgentDocument):
                return self._chained(doc, model, self._agent(doc, model))
            if isinstance(model, TeamDocument):
                return self._team(doc, model)
            assert isinstance(model, WorkflowDocument)
            return self._workflow(doc, model)

    # -- agents -----------------------------------------------------------------------------

    def _model(self, doc: ParsedDocument, primary: PrimaryModelSpec) -> Model | str:
        provider = PROVIDER_ALIASES.get(primary.provider, primary.provider)  # checked valid
        api_key: str | None = None
        if primary.api_key_env:
            api_key = os.environ.get(primary.api_key_env)
            if api_key is None:
                key_loc = ("spec", "model", "primary", "api_key_env")
                self.warnings.append(ConfigWarning(
                    doc.source.file, doc.source.line_of(key_loc), format_path(key_loc),
                    f"environment variable {primary.api_key_env} is not set; the model "
                    "will fail when first called."))
        if primary.endpoint is None and api_key is None:
            return f"{provider}:{primary.model}"
        extra = "anthropic" if provider == "anthropic" else "openai"
        with located(doc, ("spec", "model", "primary")):
            try:
                if provider == "anthropic":
                    from ..models.anthropic import AnthropicModel

                    return AnthropicModel(primary.model, base_url=primary.endpoint,
                                          api_key=api_key)
                from ..models.openai import OpenAIChatModel
            except ImportError as exc:
                raise ConfigError(f"provider {provider!r} needs its SDK: pip install "
                                  f"'relayrace[{extra}]' ({exc})") from exc
            base_url = primary.endpoint
            if base_url is None and provider in _LOCAL_BASE_URLS:
                base_url = os.environ.get(f"{provider.upper()}_BASE_URL",
                                          _LOCAL_BASE_URLS[provider])
            elif provider == "ollama" and base_url and urlsplit(base_url).path in ("", "/"):
                base_url = base_url.rstrip("/") + "/v1"  # Astromesh names Ollama's root URL
            return OpenAIChatModel(primary.model, base_url=base_url, api_key=api_key)

    def _model_for(self, doc: ParsedDocument, spec: AgentDocument) -> Model | str | None:
        if self.override is not None:
            return self.override
        if doc.name not in self._models:
            models = spec.spec.model
            primary = models.primary if models is not None else None
            made = self._model(doc, primary) if primary else None
            if made is not None and models is not None and models.fallback is not None:
                others = models.fallback if isinstance(models.fallback, list) else [models.fallback]
                made = FallbackModel(made, *(self._model(doc, m) for m in others))
            self._models[doc.name] = made
        return self._models[doc.name]

    @staticmethod
    def _settings(primary: PrimaryModelSpec | None) -> ModelSettings | None:
        if primary is None:
            return None
        p = primary.parameters
        settings = ModelSettings(
            temperature=p.temperature if p.temperature is not None else primary.temperature,
            top_p=p.top_p,
            max_tokens=p.max_tokens if p.max_tokens is not None else primary.max_tokens,
            timeout=p.timeout if p.timeout is not None else primary.timeout,
            parallel_tool_calls=p.parallel_tool_calls,
            deadline=p.deadline,
            strict_tools=p.strict_tools,
            text_tool_calls=p.text_tool_calls,
            extra=dict(p.model_extra or {}),
        )
        return None if settings == ModelSettings() else settings

    def _agent_tool(self, spec: AgentToolSpec) -> Tool:
        made = self.build(spec.agent).as_tool(
            name=spec.name or spec.agent, description=spec.description,
            parameters=spec.parameters, context_transform=spec.context_transform,
            rate_limit=_rate(spec.rate_limit), max_turns=spec.max_turns, report=spec.report,
            include_history=spec.include_history, timeout=spec.timeout_seconds)
        if spec.requires_approval or spec.confirm:
            made.requires_approval = True
        made.max_result_tokens = spec.max_result_tokens
        made.protected, made.compactable = spec.protected, spec.compactable
        return made

    def _agent(self, doc: ParsedDocument, model: AgentDocument) -> Agent[Any]:
        spec = model.spec
        pattern = spec.orchestration.pattern
        is_swarm = pattern == "swarm"
        tools: list[Tool | Toolset] = []
        swarm_members: list[Handoff] = []
        remote_targets: list[Agent[Any]] = []
        for i, item in enumerate(spec.tools):
            with located(doc, ("spec", "tools", i)):
                if isinstance(item, AgentToolSpec):
                    if is_swarm:  # keys a transfer cannot use are refused when validated
                        swarm_members.append(handoff(
                            self.build(item.agent), tool_name=item.name,
                            description=item.description,
                            requires_approval=item.requires_approval or item.confirm,
                            context_transform=item.context_transform))
                    else:
                        tools.append(self._agent_tool(item))
                elif isinstance(item, PythonToolSpec):
                    tools.append(self._python_tool_at(doc, i, item))
                elif isinstance(item, MCPToolSpec) and item.runnable:
                    tools.append(self._mcp_server(doc, item))
                elif isinstance(item, HumanToolSpec):  # a person: a member, or a target
                    person = human(item.name, description=item.description)
                    if is_swarm:
                        swarm_members.append(Handoff(agent=person))
                    else:
                        remote_targets.append(person)
                elif isinstance(item, A2AToolSpec):
                    remote = self._remote_agent(item)
                    if item.as_ == "handoff":
                        remote_targets.append(remote)
                    else:
                        tools.append(remote.as_tool(report=False))
        for i, item in enumerate(spec.tools):  # after the tools a spawned agent may be given
            if isinstance(item, SpawnAgentToolSpec):
                with located(doc, ("spec", "tools", i)):
                    tools.append(self._spawn_tool(doc, item, tools))
        if spec.read_result:
            tools.append(read_result)
        with located(doc, ("spec", "guardrails")):
            input_guardrails = _guardrails(doc.guardrails.get("input", []))
            output_guardrails = _guardrails(doc.guardrails.get("output", []))
        sub_agents = list(remote_targets)
        for child in spec.sub_agents:
            ready = self._ready.get(child)
            sub_agents.append(ready.pop() if ready else self.build(child)
                              if child not in self.placed else self.fresh(child))
            self.placed.add(child)
        primary = spec.model.primary if spec.model is not None else None
        orchestration = spec.orchestration
        with located(doc, ("spec",)):
            agent: Agent[Any] = Agent(
                doc.name, instructions=spec.prompts.system, description=spec.identity.description,
                model=self._model_for(doc, model), tools=tools, sub_agents=sub_agents,
                transfer_policy=TransferPolicy(to_parent=spec.transfer_policy.to_parent,
                                               to_peers=spec.transfer_policy.to_peers),
                handoff_tools=spec.handoff_tools, max_turns=orchestration.max_iterations,
                model_settings=self._settings(primary), mode=spec.mode,
                input_guardrails=input_guardrails, output_guardrails=output_guardrails,
                specialists=[self.build(s) for s in spec.specialists],
                meta_tools=spec.meta_tools,
                pattern="supervisor" if pattern == "supervisor" else "react",
                timeout=orchestration.timeout_seconds,
                max_result_tokens=spec.max_result_tokens,
                **self._context(doc, spec),
                output_type=self._output_type(doc, spec.output_schema),
                output_mode=spec.output_mode, output_retries=spec.output_retries,
                sticky=spec.sticky,
                permissions=None if spec.permissions is None else Permissions(
                    allow=spec.permissions.allowed_actions,
                    deny=spec.permissions.denied_actions),
            )
        with located(doc, ("spec", "orchestration")):
            if pattern == "plan_and_execute":
                return PlanAndExecute(agent=agent, max_steps=orchestration.max_steps)
            if pattern == "parallel_fan_out":
                return ParallelFanOut(agent=agent, max_subtasks=orchestration.max_subtasks,
                                      on_error=orchestration.on_error)
            if pattern == "pipeline":
                return Pipeline(agent=agent, stages=orchestration.stages or DEFAULT_STAGES)
        if not is_swarm:
            return agent
        transcript = orchestration.transcript
        with located(doc, ("spec", "orchestration")):
            return swarm(swarm_root_name(doc.name), [agent, *swarm_members],
                         max_handoffs=orchestration.max_handoffs or 3,
                         transcript_turns=transcript.turns if transcript else None,
                         transcript_chars=transcript.chars if transcript else None,
                         description=spec.identity.description)

    def _spawn_tool(self, doc: ParsedDocument, spec: SpawnAgentToolSpec,
                    tools: list[Tool | Toolset]) -> Tool:
        """A ``spawn_agent`` tool whose menu is ``spec.models`` and whose allowed tools are
        the agent's own, by name."""
        own = {t.name: t for t in tools if isinstance(t, Tool)}
        unknown = [n for n in spec.tools if n not in own]
        if unknown:
            raise ConfigError(f"spawn_agent may give only this agent's own tools; unknown: "
                              f"{', '.join(map(repr, unknown))}; its tools: "
                              f"{', '.join(own) or 'none'}")
        return spawn_agent(models={k: self._model(doc, m) for k, m in spec.models.items()},
                           tools=[own[n] for n in spec.tools], name=spec.name,
                           max_turns=spec.max_turns, timeout=spec.timeout_seconds)

    def _remote_agent(self, spec: A2AToolSpec) -> Agent[Any]:
        """The remote agent ``spec`` names (its card is read now when no name is given)."""
        from ..connect.a2a import RemoteAgent

        return RemoteAgent(spec.base_url, name=spec.name, description=spec.description,
                           headers=spec.headers, timeout=spec.timeout_seconds,
                           metadata={"agent": spec.agent} if spec.agent else None)

    def _mcp_server(self, doc: ParsedDocument, spec: MCPToolSpec) -> MCPServer:
        """The server ``spec`` describes; agents whose specs are the same share one."""
        cwd = None
        if spec.cwd is not None:
            cwd = str(Path(doc.source.file).parent / spec.cwd)
        key = f"{cwd}|{spec.model_dump_json()}"
        server = self._servers.get(key)
        if server is None:
            common: dict[str, Any] = {
                "name": spec.name, "include": spec.include, "exclude": spec.exclude,
                "prefix": spec.prefix, "timeout": spec.timeout_seconds,
                "requires_approval": spec.requires_approval}
            if spec.command is not None:
                server = MCPServer.stdio(spec.command, spec.args, env=spec.env or None, cwd=cwd,
                                         **common)
            else:
                assert spec.url is not None
                server = MCPServer.http(spec.url, headers=spec.headers, **common)
            self._servers[key] = server
        return server
    def _chained(self, doc: ParsedDocument, model: AgentDocument,
                 agent: Agent[Any]) -> Agent[Any]:
        """``agent`` followed by its ``spec.chain``, if it has one."""
        chain = model.spec.chain
        if chain is None:
            return agent
        links = []
        for link in chain.on_complete:
            retry = link.retry
            links.append(ChainLink(
                agent=self.build(link.agent), when=link.when, input=link.input,
                default=link.default, attempts=retry.max_attempts if retry else 1,
                retry_delay=retry.initial_delay_seconds if retry else 1.0,
                backoff=retry.backoff if retry else "fixed", timeout=link.timeout_seconds,
                on_error=link.on_error))
        with located(doc, ("spec", "chain")):
            return Chain(agent.name, agent=agent, links=links, mode=chain.mode,
                         max_depth=chain.max_depth)

    def _context(self, doc: ParsedDocument, spec: AgentSpec) -> dict[str, Any]:
        """The agent's compression and memory."""
        options: dict[str, Any] = {}
        if spec.compression is not None:
            c = spec.compression
            with located(doc, ("spec", "compression")):
                options["compression"] = Compression(
                    max_tokens=c.max_tokens, summarize=c.summarize,
                    summary_model=self._model(doc, c.summary_model) if c.summary_model else None)
        conversational = spec.memory.conversational if spec.memory is not None else None
        if conversational is not None:
            m = conversational
            with located(doc, ("spec", "memory", "conversational")):
                options["memory"] = Memory(
                    strategy=m.strategy, max_turns=m.max_turns, store=m.store,
                    summary_model=self._model(doc, m.summary_model) if m.summary_model else None)
        return options

    @staticmethod
    def _output_type(doc: ParsedDocument, schema: dict[str, Any] | str | None) -> Any:
        """``spec.output_schema`` as an ``output_type``: an imported type, or a JSON Schema."""
        if schema is None:
            return None
        with located(doc, ("spec", "output_schema")):
            if isinstance(schema, str):
                if ":" not in schema:
                    raise ConfigError(f"output_schema {schema!r} is neither a JSON Schema nor "
                                      "an import path of the form package.module:Name")
                return import_target(doc.source, schema)
            return json_schema_type(schema)

    @staticmethod
    def _python_tool_at(doc: ParsedDocument, i: int, spec: PythonToolSpec) -> Tool:
        with located(doc, ("spec", "tools", i, "function")):
            return _python_tool(doc, spec)

    # -- teams and workflows ----------------------------------------------------------------

    def _team(self, doc: ParsedDocument, model: TeamDocument) -> Agent[Any]:
        spec = model.spec
        with located(doc, ("spec", "guardrails")):
            input_guardrails = _guardrails(doc.guardrails.get("input", []))
            output_guardrails = _guardrails(doc.guardrails.get("output", []))
        with located(doc, ("spec", "agents")):
            return Team(doc.name, agents=[self._member(n) for n in spec.agents],
                        rules=doc.rules, initial=spec.initial,
                        default_target=doc.default_target or TerminateTarget("no rule matched"),
                        max_turns=spec.max_turns, description=spec.description,
                        input_guardrails=input_guardrails, output_guardrails=output_guardrails,
                        bounded=spec.bounded,
                        nested=[self._member(n) for n in _nested_chats(doc)])

    def _workflow(self, doc: ParsedDocument, model: WorkflowDocument) -> Agent[Any]:
        spec = model.spec
        steps = [self._member(n) for n in spec.steps]
        with located(doc, ("spec", "steps")):
            if spec.type == "sequential":
                return SequentialAgent(doc.name, steps=steps, description=spec.description)
            if spec.type == "parallel":
                return ParallelAgent(doc.name, branches=steps, description=spec.description,
                                     on_error=spec.on_error)
            assert spec.max_iterations is not None  # checked when parsed
            return LoopAgent(doc.name, steps=steps, max_iterations=spec.max_iterations,
                             until=spec.until_output_contains, description=spec.description)
