"""Same-session handoff: transfer tools, transfer policies and input filters.

A handoff moves the live conversation to another agent: the target continues the same session
with the whole history, under its own instructions. Which targets an agent may reach is decided
by the agent tree (``sub_agents``) and its :class:`TransferPolicy`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, runtime_checkable

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from typing_extensions import TypeVar

from ..core.exceptions import ConfigError, UserError
from ..core.messages import Message
from ..core.templates import ContextTransform
from ..models.interface import ToolDefinition
from ._spec import AgentLike
from .tools import describe_validation_error

if TYPE_CHECKING:
    from .context import RunContext
    from .tools import Tool

__all__ = [
    "FINISH_TASK",
    "AsyncInputFilter",
    "Handoff",
    "InputFilter",
    "TransferPolicy",
    "Transferring",
    "handoff",
    "sanitize_tool_name",
]

InputFilter = Callable[[list[Message]], list[Message]]
"""Decides what a handoff's target model sees; the session keeps the full record."""
AsyncInputFilter = Callable[[list[Message]], Awaitable[list[Message]]]
"""An input filter that must wait for something (a handoff awaits it)."""
IsEnabled = Callable[["RunContext[Any]"], "bool | Awaitable[bool]"]
"""Whether a handoff is offered this turn, from the run context (awaited if async)."""
OnHandoff = Callable[["RunContext[Any]", Any], "Awaitable[None] | None"]
"""Called as a handoff happens (awaited if async) with the run context and the reason, or,
for a handoff with an ``input_type``, the validated input."""

FINISH_TASK = "finish_task"
"""The tool a ``task``-mode agent calls to return to the agent that handed it the task."""

HandoffToolsMode = Literal["per_agent", "single"]
SINGLE_TOOL_NAME = "transfer_to_agent"


@dataclass(slots=True, kw_only=True, frozen=True)
class TransferPolicy:
    """Where an agent may transfer besides its children, which are always allowed."""

    to_parent: bool = False
    """Allow a transfer back to the parent agent."""
    to_peers: bool = False
    """Allow transfers to siblings (the parent's other children)."""


@runtime_checkable
class Transferring(AgentLike, Protocol):
    """What deciding an agent's transfers reads of it (`Agent` has it all)."""

    @property
    def handoffs(self) -> Sequence[Handoff[Any]]:
        """Its children, as handoffs."""
        ...

    @property
    def transfer_policy(self) -> TransferPolicy:
        """Whether its parent and peers are targets too."""
        ...

    @property
    def tools(self) -> Sequence[Tool]:
        """Its own tools, whose names a transfer tool must not take."""
        ...

    @property
    def handoff_tools(self) -> HandoffToolsMode:
        """One transfer tool per target, or one for all."""
        ...

    @property
    def pattern(self) -> str:
        """``"supervisor"`` is offered no transfer."""
        ...

    @property
    def mode(self) -> str:
        """``"task"`` returns with the ``finish_task`` tool."""
        ...


A = TypeVar("A", bound=Transferring, default=Any)  # a bare Handoff: any agent


@dataclass(kw_only=True, eq=False)
class Handoff(Generic[A]):
    """A handoff to ``agent`` as offered to a model; build it with :func:`handoff`. ``A`` is
    the agent's type (a ``relayrace.Agent``)."""

    agent: A
    """The agent that takes over."""
    tool_name: str | None = None
    """The tool's name; ``transfer_to_<agent name>`` by default."""
    description: str | None = None
    """The tool's description; built from the target's description by default."""
    is_enabled: bool | IsEnabled = True
    """Whether the handoff is offered: a bool, or a (sync or async) function of the run
    context."""
    input_filter: InputFilter | AsyncInputFilter | None = None
    """What the target's model sees of the history (the session keeps it all)."""
    on_handoff: OnHandoff | None = None
    """Called (and awaited if async) with the run context and the reason when the handoff
    happens."""
    requires_approval: bool = False
    """Pause the run for a human decision before the transfer."""
    input_type: Any = None
    """What the model must send with the transfer (a ``BaseModel``, dataclass or
    ``TypedDict``): the transfer tool's parameters are its fields (beside ``reason``); the
    arguments are validated (a mistake goes back to the model and no transfer happens), and
    the value is given to ``on_handoff``, recorded in the ``HandoffEvent`` and shown to the
    target in the transfer's note."""
    context_transform: str | None = None
    """What the target receives in place of the reason (and input): a sandboxed Jinja2
    template over ``data`` producing a JSON object, as an agent tool's ``context_transform``
    (same sandbox and bounds). ``data`` holds ``reason`` (also as ``query``, Astromesh's
    name for what a swarm passes along, unless the ``input_type`` has a field of that name)
    and the ``input_type``'s fields. The rendered object's keys are template variables of the
    target's instructions (``{{ company }}``, or ``{{ context.company }}`` beside a mapping run
    context) while it holds the conversation, and the transfer's note shows the object; a
    template that fails on the model's arguments is a tool error the model can correct, and no
    transfer happens."""
    _adapter: TypeAdapter[Any] | None = field(default=None, init=False, repr=False)
    _schema: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _transform: ContextTransform | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # Checked here, so a wrong option fails where it is written, not mid-run.
        if not isinstance(self.agent, Transferring):
            raise UserError(f"handoff() takes the Agent that takes over, got "
                            f"{_describe_value(self.agent)}.")
        about = f"handoff({self.agent.name})"
        if not isinstance(self.is_enabled, bool) and not callable(self.is_enabled):
            raise UserError(f"{about}: is_enabled must be a bool or a function of the run "
                            f"context, got {_describe_value(self.is_enabled)}.")
        for option, value, takes in (
                ("input_filter", self.input_filter, "the list of messages"),
                ("on_handoff", self.on_handoff, "the run context and the reason")):
            if value is not None and not callable(value):
                raise UserError(f"{about}: {option} must be a function (sync or async) of "
                                f"{takes}, got {_describe_value(value)}.")
        if self.input_type is not None:
            self._adapter, self._schema = _input_schema(about, self.input_type)
        if self.context_transform is not None:
            if not isinstance(self.context_transform, str):
                raise UserError(f"{about}: context_transform must be a template text, got "
                                f"{_describe_value(self.context_transform)}.")
            self._transform = ContextTransform(self.context_transform,
                                               name=f"{about}.context_transform")

    def context(self, reason: str, value: Any) -> dict[str, Any] | None:
        """What the target receives for a transfer with ``reason`` (and ``input_type``
        ``value``): the ``context_transform``'s object, or ``None`` without one.

        Raises ``ContextTransformError`` when the template fails on these arguments.
        """
        if self._transform is None:
            return None
        data: dict[str, Any] = {"reason": reason, "query": reason}
        if self._adapter is not None and value is not None:
            data.update(self.input_data(value))  # a field named query wins over the alias
        return self._transform.render(data)

    def parameters(self) -> dict[str, Any]:
        """The transfer tool's JSON schema: the ``input_type``'s fields and ``reason``."""
        if self._schema is None:
            return {"type": "object", "properties": {"reason": REASON_SCHEMA}}
        schema = dict(self._schema)
        schema["properties"] = {**schema.get("properties", {}), "reason": REASON_SCHEMA}
        return schema

    def validate_input(self, arguments: dict[str, Any]) -> tuple[Any, str | None]:
        """(the ``input_type`` value of a transfer call's ``arguments``, None), or
        (None, what was wrong, for the model)."""
        assert self._adapter is not None
        data = {k: v for k, v in arguments.items() if k != "reason"}
        try:
            return self._adapter.validate_python(data), None
        except ValidationError as exc:
            return None, (f"Invalid arguments for the transfer to {self.agent.name}: "
                          f"{describe_validation_error(exc)}. The transfer was not made; call "
                          "it again with valid arguments.")

    def input_data(self, value: Any) -> Any:
        """``value`` (of the ``input_type``) as JSON data, as the session records it."""
        assert self._adapter is not None
        return self._adapter.dump_python(value, mode="json")

    def default_description(self) -> str:
        """The description offered to the model."""
        if self.description:
            return self.description
        about = self.agent.description or f"the {self.agent.name} agent"
        return f"Transfer the conversation to {self.agent.name}: {about}"


def handoff(
    agent: A,
    *,
    tool_name: str | None = None,
    description: str | None = None,
    is_enabled: bool | IsEnabled = True,
    input_filter: InputFilter | AsyncInputFilter | None = None,
    on_handoff: OnHandoff | None = None,
    requires_approval: bool = False,
    input_type: Any = None,
    context_transform: str | None = None,
) -> Handoff[A]:
    """Build a handoff explicitly; pass it in ``sub_agents`` in place of the bare agent.

    ``is_enabled``, ``input_filter`` and ``on_handoff`` may be sync or async functions.
    ``input_type`` makes the model send validated data with the transfer (see
    :attr:`Handoff.input_type`); ``on_handoff`` then receives that value, not the reason.
    ``context_transform`` reshapes what the target receives (see
    :attr:`Handoff.context_transform`).
    """
    return Handoff(
        agent=agent,
        tool_name=tool_name,
        description=description,
        is_enabled=is_enabled,
        input_filter=input_filter,
        on_handoff=on_handoff,
        requires_approval=requires_approval,
        input_type=input_type,
        context_transform=context_transform,
    )


def _input_schema(about: str, input_type: Any) -> tuple[TypeAdapter[Any], dict[str, Any]]:
    """A handoff's ``input_type``, ready to validate, and its (object) JSON schema."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(input_type)
        schema = adapter.json_schema()
    except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
        raise UserError(f"{about}: input_type={input_type!r} is not a type pydantic can "
                        f"validate ({exc}); use a BaseModel, a dataclass or a TypedDict.") from None
    if schema.get("type") != "object":
        raise UserError(f"{about}: input_type must have fields (a BaseModel, a dataclass or a "
                        f"TypedDict), since they become the transfer tool's parameters; "
                        f"{input_type!r} is a {schema.get('type', 'value')}.")
    if "reason" in schema.get("properties", {}):
        raise UserError(f"{about}: input_type has a field named 'reason', which the transfer "
                        "tool already has; rename the field.")
    schema.pop("title", None)
    return adapter, schema


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sanitize_tool_name(name: str, taken: set[str] | None = None) -> str:
    """A tool name of ``[A-Za-z0-9_-]``, at most 64 characters, unique within ``taken``."""
    base = _UNSAFE.sub("_", name)[:64] or "tool"
    if taken is None or base not in taken:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        candidate = base[: 64 - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


REASON_SCHEMA = {
    "type": "string",
    "description": "Why the transfer is needed, for the agent taking over.",
}


@dataclass(slots=True)
class HandoffSet:
    """The transfers one agent may make, resolved from its tree and policy."""

    by_agent: dict[str, Handoff[Any]] = field(default_factory=dict)
    """Allowed targets by agent name."""
    by_tool: dict[str, Handoff[Any] | None] = field(default_factory=dict)
    """Tool name to handoff (``None`` for the single ``transfer_to_agent`` tool)."""
    definitions: list[ToolDefinition] = field(default_factory=list)
    """Tool definitions when every handoff is enabled."""
    dynamic: bool = False
    """Whether some ``is_enabled`` is a function, so the offer changes per turn."""
    mode: HandoffToolsMode = "per_agent"
    """One tool per target, or one ``transfer_to_agent`` tool."""

    async def offered(self, ctx: RunContext[Any]) -> list[ToolDefinition]:
        """The definitions to offer this turn."""
        if not self.dynamic:
            return self.definitions
        return self.definitions_for(await self.enabled(ctx))

    def definitions_for(self, enabled: Sequence[Handoff]) -> list[ToolDefinition]:
        """The definitions that offer the handoffs ``enabled`` (of this set)."""
        if self.mode == "single":
            return _definitions(enabled, "single", set())[0]
        # The names stay those of the full set, which calls are resolved against.
        return [d for d in self.definitions if self.by_tool[d.name] in enabled]

    async def enabled(self, ctx: RunContext[Any]) -> list[Handoff[Any]]:
        """The handoffs that may be taken this turn."""
        out: list[Handoff[Any]] = []
        for h in self.by_agent.values():
            flag = _flag(h, ctx)
            if inspect.isawaitable(flag):  # only an async is_enabled costs an await
                flag = await flag
            if flag:
                out.append(h)
        return out

    @staticmethod
    async def is_offered(h: Handoff[Any], ctx: RunContext[Any]) -> bool:
        """Whether ``h`` may be taken this turn."""
        flag = _flag(h, ctx)
        return bool(await flag if inspect.isawaitable(flag) else flag)


def _flag(h: Handoff[Any], ctx: RunContext[Any]) -> bool | Awaitable[bool]:
    flag = h.is_enabled
    return flag if isinstance(flag, bool) else flag(ctx)


def _definitions(
    handoffs: Sequence[Handoff[Any]], mode: HandoffToolsMode, taken: set[str]
) -> tuple[list[ToolDefinition], dict[str, Handoff[Any] | None]]:
    if not handoffs:
        return [], {}
    if mode == "single":
        typed = [h.agent.name for h in handoffs if h.input_type is not None]
        if typed:
            raise ConfigError(f"The transfers to {', '.join(map(repr, typed))} have an "
                              "input_type, which needs a tool of its own per target: use "
                              "handoff_tools='per_agent'.")
        lines = "\n".join(f"- {h.agent.name}: {h.default_description()}" for h in handoffs)
        definition = ToolDefinition(
            name=SINGLE_TOOL_NAME,
            description="Transfer the conversation to another agent. Targets:\n" + lines,
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "enum": [h.agent.name for h in handoffs]},
                    "reason": REASON_SCHEMA,
                },
                "required": ["agent_name"],
            },
        )
        return [definition], {SINGLE_TOOL_NAME: None}
    definitions: list[ToolDefinition] = []
    by_tool: dict[str, Handoff[Any] | None] = {}
    names = set(taken)
    for h in handoffs:
        # Targets whose names sanitize alike get numbered; the agent's other tools never
        # share a name with a transfer (see _check_clashes).
        name = sanitize_tool_name(_tool_name(h), names)
        names.add(name)
        by_tool[name] = h
        definitions.append(
            ToolDefinition(
                name=name,
                description=h.default_description(),
                parameters=h.parameters(),
            )
        )
    return definitions, by_tool


def _tool_name(h: Handoff[Any]) -> str:
    return sanitize_tool_name(h.tool_name or f"transfer_to_{h.agent.name}")


def resolve_handoffs(agent: Transferring, parent: Transferring | None) -> HandoffSet:
    """The transfers ``agent`` may make placed under ``parent``: children, then parent and
    peers if its policy allows.

    Raises ``ConfigError`` when a transfer tool would have the name of another of its tools.
    """
    targets: list[Handoff[Any]] = list(agent.handoffs)
    if parent is not None:
        if agent.transfer_policy.to_parent:
            targets.append(Handoff(agent=parent))
        if agent.transfer_policy.to_peers:
            targets.extend(h for h in parent.handoffs if h.agent is not agent)
    by_agent: dict[str, Handoff[Any]] = {}
    for h in targets:
        if h.is_enabled is not False:
            by_agent.setdefault(h.agent.name, h)
    handoffs = list(by_agent.values())
    tools = {t.name: t for t in agent.tools}
    _check_clashes(agent, parent, handoffs, tools)
    definitions, by_tool = _definitions(handoffs, agent.handoff_tools, set(tools))
    return HandoffSet(
        by_agent=by_agent,
        by_tool=by_tool,
        definitions=definitions,
        dynamic=any(not isinstance(h.is_enabled, bool) for h in handoffs),
        mode=agent.handoff_tools,
    )


def _check_clashes(agent: Transferring, parent: Transferring | None,
                   handoffs: Sequence[Handoff[Any]], tools: dict[str, Tool]) -> None:
    """Reject a transfer tool named like another tool of ``agent``, another transfer's
    included: a renamed transfer would leave the model calling the other tool when it means to
    transfer."""
    if not handoffs or agent.pattern == "supervisor":  # a supervisor is offered no transfer
        return
    where = f"Agent {agent.name!r}"
    if agent.handoff_tools == "single":
        tool = tools.get(SINGLE_TOOL_NAME)
        if tool is not None:
            raise ConfigError(
                f"{where}: its {type(tool).__name__} {tool.name!r} has the name of the single "
                f"transfer tool, which reaches {', '.join(repr(h.agent.name) for h in handoffs)}"
                "; rename the tool, or use handoff_tools='per_agent'.")
        return
    transfers: dict[str, Handoff[Any]] = {}
    for h in handoffs:
        name = _tool_name(h)
        other = tools.get(name)
        first = transfers.setdefault(name, h)
        if other is not None:
            clash = f"its {type(other).__name__} {other.name!r}"
        elif first is not h and (h.tool_name or first.tool_name):
            # A name someone chose is never renamed; agent names that sanitize alike are
            # told apart with a suffix (each tool still reaches its own agent).
            clash = f"its transfer to {first.agent.name!r}"
        elif name == FINISH_TASK and agent.mode == "task":
            clash = f"the {FINISH_TASK!r} tool a task agent returns with"
        else:
            continue
        target = h.agent.name
        if h.agent is parent:
            fix = "rename the tool"
        else:
            fix = f"rename the tool, or name the transfer with handoff({target}, tool_name=...)"
        raise ConfigError(f"{where}: its transfer to {target!r} would be the tool {name!r}, "
                          f"the name of {clash}, so the model could not call both; {fix}.")


async def filter_messages(h: Handoff[Any], messages: list[Message]) -> list[Message]:
    """What ``h``'s input filter keeps of ``messages``, awaited if it is async.

    Raises ``UserError`` naming the filter when it fails or returns anything but a list of
    messages.
    """
    flt = h.input_filter
    assert flt is not None
    what = f"The input filter {_describe_value(flt)} of the handoff to {h.agent.name!r}"
    try:
        kept = flt(messages)
        if inspect.isawaitable(kept):
            kept = await kept
    except Exception as exc:
        raise UserError(f"{what} raised {type(exc).__name__}: {exc}. Fix the filter; it takes "
                        "the list of messages and returns the list the target sees.") from exc
    if not isinstance(kept, list) or not all(isinstance(m, Message) for m in kept):
        raise UserError(f"{what} returned {_describe_value(kept)}; it must return a list of "
                        "Message (the ones the target sees).")
    return kept


def _describe_value(value: Any) -> str:
    """A short name for a user's value in an error message."""
    if value is None:
        return "None"
    name = getattr(value, "__qualname__", None)
    if isinstance(name, str) and callable(value):
        return repr(name)
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"
