"""`Agent`: a model, instructions and tools, placed in a tree of agents it can hand off to."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypedDict, overload

from typing_extensions import TypeVar, Unpack

from ..core.exceptions import UnknownOptionError, UserError
from ..core.reports import DEFAULT_REPORT_SUFFIX
from ..core.templates import is_template, render_instructions
from ..models import infer_model
from ..models.interface import Model, ModelSettings, OutputMode
from .compression import DEFAULT_MAX_RESULT_TOKENS, Compression
from .context import RunContext, TContext
from .delegation import AgentTool, OutputExtractor
from .handoffs import (
    FINISH_TASK,
    Handoff,
    HandoffSet,
    HandoffToolsMode,
    TransferPolicy,
    resolve_handoffs,
)
from .memory import Memory
from .output import DEFAULT_OUTPUT_RETRIES, OUTPUT_TOOL, OutputSpec
from .permissions import Permissions
from .specialists import META_TOOLS, DelegationConfig, MetaToolName, meta_tools_for
from .tools import Tool, Toolset

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .guardrails import Guardrail
    from .handoffs import InputFilter
    from .tools import RateLimit

__all__ = ["Agent", "AgentOptions", "Instructions", "TOutput"]

TOutput = TypeVar("TOutput", default=Any)
"""What an agent's final answer is: its ``output_type``, ``str`` when it has none. (The default
is ``Any``, so that ``Agent[Ctx]`` stands for any agent, whatever it answers with.)"""

Instructions = str | Callable[[RunContext[Any]], "str | Awaitable[str]"]
"""A Jinja2 template rendered with the run's context variables, or a function returning text."""

AgentMode = Literal["chat", "task", "single_turn"]
Pattern = Literal["react", "supervisor", "swarm"]


def _check_context(name: str, compression: object, memory: object) -> None:
    """Refuse context options of the wrong kind, naming the agent."""
    if compression is not None and not isinstance(compression, Compression):
        raise UserError(f"Agent {name!r}: compression takes a Compression(max_tokens=...), not "
                        f"{type(compression).__name__}.")
    if memory is not None and not isinstance(memory, Memory):
        raise UserError(f"Agent {name!r}: memory takes a Memory(strategy=...), not "
                        f"{type(memory).__name__}.")


class AgentOptions(TypedDict, total=False):
    """The options of `Agent` besides ``name``, ``instructions`` and ``output_type``: declared
    here once, with their defaults in ``_DEFAULTS``; ``Agent(...)`` and ``clone`` take them by
    name (see the class doc for what each does)."""

    description: str
    model: Model | str | None
    tools: Sequence[Tool | Toolset]
    sub_agents: Sequence[Agent[Any] | Handoff[Agent[Any]]]
    transfer_policy: TransferPolicy
    handoff_tools: HandoffToolsMode
    max_turns: int | None
    model_settings: ModelSettings | None
    mode: AgentMode
    input_guardrails: Sequence[Guardrail]
    output_guardrails: Sequence[Guardrail]
    specialists: Sequence[Agent[Any]]
    meta_tools: Sequence[MetaToolName] | None
    delegation: DelegationConfig | None
    pattern: Pattern
    max_handoffs: int | None
    timeout: float | None
    max_result_tokens: int | None
    compression: Compression | None
    memory: Memory | None
    permissions: Permissions | None
    sticky: bool
    output_mode: OutputMode | None
    output_retries: int


_DEFAULTS: AgentOptions = {
    "description": "", "model": None, "tools": (), "sub_agents": (),
    "transfer_policy": TransferPolicy(), "handoff_tools": "per_agent", "max_turns": None,
    "model_settings": None, "mode": "chat", "input_guardrails": (), "output_guardrails": (),
    "specialists": (), "meta_tools": None, "delegation": None, "pattern": "react",
    "max_handoffs": None, "timeout": None, "max_result_tokens": DEFAULT_MAX_RESULT_TOKENS,
    "compression": None, "memory": None, "permissions": None, "sticky": False,
    "output_mode": None, "output_retries": DEFAULT_OUTPUT_RETRIES,
}


class Agent(Generic[TContext, TOutput]):
    """An agent: instructions, a model, tools, and the agents it may hand the conversation to.

    ``sub_agents`` (agents, or :func:`handoff` objects wrapping them) make a tree: an agent has
    at most one parent. Children are always transfer targets; the parent and the siblings are
    targets when ``transfer_policy`` allows. ``handoff_tools="per_agent"`` offers one
    ``transfer_to_<name>`` tool per target, ``"single"`` one ``transfer_to_agent`` tool.
    ``max_turns`` is the run's turn limit when the run starts with this agent (unless the run
    sets one), and the most model turns this agent may take in a run when a handoff brings
    it in. ``max_result_tokens`` (default 8,000, ``None`` for no limit) cuts longer tool results
    in what the model sees; ``compression`` keeps long conversations within a request budget;
    ``memory`` remembers the agent's conversations with a user across sessions (see
    ``docs/context.md``). ``permissions`` limits which of its tools it may call. An agent that can
    transfer nowhere (no sub-agents, parent and peers not allowed) hands the next user turn back
    to its parent after it answers, unless ``sticky=True``.

    ``output_type`` (anything pydantic's ``TypeAdapter`` takes) makes the final answer a
    validated value of that type, asked for in ``output_mode`` (by default, as the model
    prefers); see ``relayrace.agents.output``. ``Agent[Ctx, T]`` says so to a type checker, and
    ``Runner.run`` returns a ``RunResult[T]``.
    """

    is_composite: ClassVar[bool] = False
    """Whether this agent is a workflow made of other agents (it calls no model itself)."""
    remote: ClassVar[bool] = False
    """Whether the agent runs elsewhere (a `RemoteAgent`): its model is the remote agent, so
    a run's ``model=`` does not replace it."""
    is_human: ClassVar[bool] = False
    """Whether a person takes this agent's turns (a `HumanAgent`): the run stops for them."""
    handoff_target: ClassVar[bool] = True
    """Whether a handoff may bring control to it (a team or a pattern cannot be; a workflow
    can, and returns control to the agent that transferred once its steps are done)."""

    @overload
    def __init__(self: Agent[TContext, str], name: str, *, instructions: Instructions,
                 output_type: None = None, **options: Unpack[AgentOptions]) -> None: ...

    @overload
    def __init__(self: Agent[TContext, TOutput], name: str, *, instructions: Instructions,
                 output_type: type[TOutput], **options: Unpack[AgentOptions]) -> None: ...

    def __init__(self, name: str, *, instructions: Instructions, output_type: Any = None,
                 **options: Unpack[AgentOptions]) -> None:
        unknown = sorted(set(options) - set(_DEFAULTS))
        if unknown:
            raise UnknownOptionError(f"Agent {name!r}: unknown option(s) {unknown}; the options "
                                     f"are instructions, output_type and "
                                     f"{', '.join(_DEFAULTS)}.")
        o: AgentOptions = {**_DEFAULTS, **options}
        tools, specialists, meta_tools = o["tools"], o["specialists"], o["meta_tools"]
        sub_agents, handoff_tools, mode = o["sub_agents"], o["handoff_tools"], o["mode"]
        pattern, max_turns, timeout = o["pattern"], o["max_turns"], o["timeout"]
        max_handoffs, max_result_tokens = o["max_handoffs"], o["max_result_tokens"]
        compression, memory, permissions = o["compression"], o["memory"], o["permissions"]
        output_mode, output_retries = o["output_mode"], o["output_retries"]
        if not name or not name.strip():
            raise UserError("An agent needs a non-empty name.")
        if handoff_tools not in ("per_agent", "single"):
            raise UserError(
                f"Agent {name!r}: handoff_tools={handoff_tools!r}; use 'per_agent' or 'single'."
            )
        if mode not in ("chat", "task", "single_turn"):
            raise UserError(f"Agent {name!r}: mode={mode!r}; use 'chat', 'task' or 'single_turn'.")
        if pattern not in ("react", "supervisor", "swarm"):
            raise UserError(f"Agent {name!r}: pattern={pattern!r}; use 'react', 'supervisor' "
                            "or 'swarm'.")
        if max_turns is not None and max_turns < 1:
            raise UserError(f"Agent {name!r}: max_turns must be at least 1, got {max_turns}.")
        self._user_tools = tuple(tools)  # without the meta-tools, which clone() rebuilds
        self.specialists: tuple[Agent[Any], ...] = tuple(specialists)
        self.meta_tools: tuple[MetaToolName, ...] = tuple(meta_tools or ())
        self.delegation = o["delegation"]
        if specialists or meta_tools:
            if meta_tools is None:
                self.meta_tools = META_TOOLS
            tools = [*tools, *meta_tools_for(name, self.specialists, self.meta_tools,
                                               self.delegation or DelegationConfig())]
        self.toolsets: tuple[Toolset, ...] = tuple(t for t in tools if isinstance(t, Toolset))
        """Groups of tools listed when a run needs them (MCP servers), offered beside ``tools``."""
        plain: list[Tool] = []
        for t in tools:
            if isinstance(t, Toolset):
                continue
            if isinstance(t, Agent):
                raise UserError(f"Agent {name!r}: {t.name!r} is an agent, not a tool; offer it "
                                f"with {t.name}.as_tool(), or put it in sub_agents for handoffs.")
            if not isinstance(t, Tool):
                raise UserError(
                    f"Agent {name!r}: {t!r} is not a Tool; decorate functions with @tool "
                    "(or pass a Toolset, such as an MCPServer)."
                )
            plain.append(t)
        for s in sub_agents:
            if not isinstance(s, Agent | Handoff):
                raise UserError(f"Agent {name!r}: sub_agents takes agents (or handoff(agent)), "
                                f"not {type(s).__name__} {s!r}.")
        if timeout is not None and timeout <= 0:
            raise UserError(f"Agent {name!r}: timeout must be positive, got {timeout}.")
        if max_handoffs is not None and max_handoffs < 0:
            raise UserError(f"Agent {name!r}: max_handoffs must be >= 0, got {max_handoffs}.")
        if max_result_tokens is not None and (isinstance(max_result_tokens, bool) or not
                                              isinstance(max_result_tokens, int)
                                              or max_result_tokens < 1):
            raise UserError(f"Agent {name!r}: max_result_tokens must be an integer of at least "
                            f"1 (or None for no limit), got {max_result_tokens!r}.")
        _check_context(name, compression, memory)
        if permissions is not None and not isinstance(permissions, Permissions):
            raise UserError(f"Agent {name!r}: permissions takes Permissions(allow=[...], "
                            f"deny=[...]), not {type(permissions).__name__}.")
        names = [t.name for t in plain]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UserError(f"Agent {name!r} has several tools named {sorted(dup)}.")
        self.output_type: Any = output_type
        """The type of the final answer (``None``: text)."""
        self.output_mode: OutputMode | None = output_mode
        """How the model is asked for it (``None``: as the model prefers)."""
        self.output_retries = output_retries
        """How many times the model may give an invalid output again."""
        self.output: OutputSpec | None = None
        """``output_type`` ready to ask for and validate; ``None`` for a text answer."""
        if output_type is not None and output_type is not str:
            self.output = OutputSpec(output_type, mode=output_mode, retries=output_retries,
                                     agent=name)
            if OUTPUT_TOOL in names:
                raise UserError(f"Agent {name!r} has an output_type, which is given through "
                                f"a tool named {OUTPUT_TOOL!r}; rename its own tool.")
        if mode == "task" and FINISH_TASK in names:
            raise UserError(f"Agent {name!r} works in task mode, which offers {FINISH_TASK!r} "
                            f"to return control; rename its own tool {FINISH_TASK!r}.")
        self.name = name
        self.instructions = instructions
        self.description = o["description"]
        self.model = o["model"]
        self.tools: tuple[Tool, ...] = tuple(plain)
        self.transfer_policy = o["transfer_policy"]
        self.handoff_tools: HandoffToolsMode = handoff_tools
        self.max_turns = max_turns
        self.model_settings = o["model_settings"]
        self.mode: AgentMode = mode
        self.pattern: Pattern = pattern
        self.max_handoffs = max_handoffs
        self.timeout = timeout
        self.max_result_tokens = max_result_tokens
        """The longest tool result the model sees, in estimated tokens (a tool may set its
        own); ``None``: no limit."""
        self.compression = compression
        """How requests stay within a token budget on long conversations, if at all."""
        self.memory = memory
        """How the agent remembers its conversations with a user across sessions, if at all."""
        self.permissions = permissions
        """Which of its tools it may call (see ``relayrace.Permissions``); ``None``: all."""
        self.sticky = o["sticky"]
        """Keep the conversation after answering even when it can transfer nowhere (by
        default the next user turn then starts with its parent)."""
        self.input_guardrails: tuple[Guardrail, ...] = tuple(o["input_guardrails"])
        self.output_guardrails: tuple[Guardrail, ...] = tuple(o["output_guardrails"])
        self.parent: Agent[Any] | None = None
        self.handoffs: tuple[Handoff[Agent[Any]], ...] = tuple(
            s if isinstance(s, Handoff) else Handoff(agent=s) for s in sub_agents
        )
        self._templated = isinstance(instructions, str) and is_template(instructions)
        self._handoff_cache: HandoffSet | None = None
        # What the engine derived from this agent, kept with it (not in maps keyed by agents,
        # whose values would keep every agent ever run alive): its tools as offered, and
        # whether its tree has memory (with the root that was looked at).
        self._toolset: Any = None
        self._remembers: tuple[Agent[Any], bool] | None = None
        for h in self.handoffs:
            child = h.agent
            if child is self:
                raise UserError(f"Agent {name!r} cannot be its own sub-agent.")
            if child.parent is not None:
                raise UserError(
                    f"Agent {child.name!r} already has parent {child.parent.name!r} and cannot "
                    f"also be a sub-agent of {name!r}; an agent has at most one parent. "
                    "Use agent.clone() to place a copy under a second parent."
                )
        largest, rest = _check_unique_names(self)
        if pattern == "supervisor" and not any(t.delegates for t in self.tools):
            raise UserError(f"Agent {name!r} uses the supervisor pattern but has no workers; "
                            "give it agent tools (worker.as_tool()) or specialists.")
        if pattern == "swarm" and not self.handoffs:
            raise UserError(f"Agent {name!r} uses the swarm pattern but has no members; build "
                            "swarms with relayrace.teams.patterns.swarm(name, agents).")
        if not self.is_composite:
            for h in self.handoffs:
                if not h.agent.handoff_target or h.agent.pattern == "swarm":
                    raise UserError(
                        f"{h.agent.name!r} is a team, pattern or swarm and cannot be a handoff "
                        f"target of {name!r}; offer it as a tool ({h.agent.name}.as_tool()) or "
                        "make it a step of a workflow.")
        self._answers: tuple[str, Any] | None = _check_output_types(self)
        """The tree's first chat agent and what it answers with (see _check_output_types)."""
        # The transfers of this agent and of each child placed here, checked (for clashing
        # tool names) before any link is made: a failed construction changes no child.
        own = resolve_handoffs(self, None)
        placed = [resolve_handoffs(h.agent, self) for h in self.handoffs]
        for h, transfers in zip(self.handoffs, placed, strict=True):
            h.agent.parent = self
            h.agent._handoff_cache = transfers  # resolved where it now sits: runs start warm
            h.agent._names = None  # a placed child is never placed again: its set moves up
        self._handoff_cache = own  # until a parent places this agent
        largest |= rest  # the largest child's set (or a new one) becomes this tree's
        self._names: set[str] | None = largest

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"

    @property
    def sub_agents(self) -> tuple[Agent[Any], ...]:
        """The child agents."""
        return tuple(h.agent for h in self.handoffs)

    @property
    def root(self) -> Agent[Any]:
        """The top of this agent's tree."""
        agent: Agent[Any] = self
        while agent.parent is not None:
            agent = agent.parent
        return agent

    def walk(self) -> Iterator[Agent[Any]]:
        """This agent and every agent below it, depth first (each before its children, the
        children in order). A loop over a stack, not recursion: a tree of any depth walks in
        time linear in its size."""
        stack: list[Agent[Any]] = [self]
        while stack:
            agent = stack.pop()
            yield agent
            stack.extend(h.agent for h in reversed(agent.handoffs))

    def find_agent(self, name: str) -> Agent[Any] | None:
        """The agent called ``name`` anywhere in this agent's tree, or ``None``."""
        for agent in self.root.walk():
            if agent.name == name:
                return agent
        return None

    def clone(self, **changes: Any) -> Agent[TContext, TOutput]:
        """A copy with ``changes`` applied; its sub-agents are cloned too, and it has no parent."""
        copies: dict[int, Agent[Any]] = {}
        if "sub_agents" not in changes:
            # Every agent below, children before parents (a reversed walk), so that each is
            # built with its copied children in a loop: a tree of any depth clones.
            for agent in reversed(list(self.walk())[1:]):
                own_clone = type(agent).clone is not Agent.clone  # (a person's copy)
                copies[id(agent)] = agent.clone() if own_clone else agent._copy({}, copies)
        return self._copy(changes, copies)

    def _copy(self, changes: dict[str, Any], copies: dict[int, Agent[Any]]
              ) -> Agent[TContext, TOutput]:
        """This agent with ``changes``, its children being their ``copies`` (by ``id``)."""
        options: dict[str, Any] = {k: getattr(self, k) for k in _DEFAULTS}
        options.update(instructions=self.instructions, output_type=self.output_type,
                       tools=self._user_tools,
                       meta_tools=self.meta_tools if self.specialists else None)
        if "sub_agents" not in changes:
            options["sub_agents"] = [
                Handoff(
                    agent=copies.pop(id(h.agent)),
                    tool_name=h.tool_name,
                    description=h.description,
                    is_enabled=h.is_enabled,
                    input_filter=h.input_filter,
                    on_handoff=h.on_handoff,
                    requires_approval=h.requires_approval,
                )
                for h in self.handoffs
            ]
        options.update(changes)
        made: Agent[TContext, TOutput] = Agent(
            changes.get("name", self.name), **{k: v for k, v in options.items() if k != "name"})
        return made

    def as_tool(
        self,
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: dict[str, Any] | type[BaseModel] | None = None,
        context_transform: str | None = None,
        rate_limit: RateLimit | None = None,
        max_turns: int | None = None,
        report: bool = True,
        include_history: bool | InputFilter = False,
        timeout: float | None = None,
        report_template: str | None = None,
        output_extractor: OutputExtractor | None = None,
        is_enabled: bool | Callable[[RunContext[Any]], bool | Awaitable[bool]] = True,
    ) -> AgentTool[Agent[Any]]:
        """This agent as a tool: each call runs it to completion in a fresh child session.

        ``parameters`` (a JSON Schema dict or a pydantic model; default ``{"query": string}``)
        are validated, and ``context_transform`` (a sandboxed Jinja2 template over ``data``,
        the call's arguments) makes template variables for this agent's instructions. With
        ``report=True`` the child ends with a structured ``<handoff>`` report, which is all
        the caller's model receives. ``include_history`` passes a bounded part of the caller's
        conversation (or what a filter keeps); by default the child sees only its task.
        ``report_template`` replaces the Jinja2 text that asks for the report (it receives
        ``audience``; see ``relayrace.core.reports.DEFAULT_REPORT_SUFFIX``). ``output_extractor``
        (sync or async) turns the child's ``ChildResult`` into the tool result (a typed
        child's value is its ``value``); ``is_enabled`` (a bool, or a sync or async function of
        the run context, asked each turn) decides whether the tool is offered.
        """
        return AgentTool(
            self, name=name, description=description, parameters=parameters,
            context_transform=context_transform, rate_limit=rate_limit, max_turns=max_turns,
            report=report, include_history=include_history, timeout=timeout,
            report_template=report_template or DEFAULT_REPORT_SUFFIX,
            output_extractor=output_extractor, is_enabled=is_enabled,
        )

    def resolved_model(self) -> Model | None:
        """This agent's model, a ``"provider:model"`` string resolved into a `Model` once."""
        model = self.model
        if type(model) is str:
            model = self.model = infer_model(model)
        return model  # type: ignore[return-value]

    def handoff_set(self) -> HandoffSet:
        """The transfers this agent may make (computed once; trees are fixed once built)."""
        if self._handoff_cache is None:
            self._handoff_cache = resolve_handoffs(self, self.parent)
        return self._handoff_cache

    async def render_instructions(
        self, ctx: RunContext[Any], extra: Mapping[str, Any] | None = None
    ) -> str:
        """The system prompt for this turn; ``extra`` adds template variables (a context
        transform's object), under ``context`` too unless the run context is an object."""
        source = self.instructions
        if not isinstance(source, str):
            result = source(ctx)
            return await result if inspect.isawaitable(result) else result
        if not self._templated:
            return source
        context = ctx.context
        variables: dict[str, Any] = dict(context) if isinstance(context, Mapping) else {}
        if extra and (context is None or isinstance(context, Mapping)):
            # Astromesh hands a transform's object to the target as its `context`.
            context = {**variables, **extra}
        variables.setdefault("context", context)
        variables.setdefault("agent_name", self.name)
        if extra:
            variables.update(extra)
        return render_instructions(source, variables)


def _check_unique_names(agent: Agent[Any, Any]) -> tuple[set[str], set[str]]:
    """Refuse a name that is twice in ``agent``'s tree (transfers would be ambiguous); return
    the largest child's set of names and the tree's other names, which together are the
    tree's. Each child keeps its subtree's names, and only those outside the largest child's
    set are looked at, so building a tree costs O(n log n) at most (a chain O(n)), not a walk
    of every subtree at each level. Nothing is changed here: the sets are joined once the
    agent is built."""
    sets = [h.agent._names if h.agent._names is not None else {a.name for a in h.agent.walk()}
            for h in agent.handoffs]
    at = max(range(len(sets)), key=lambda i: len(sets[i]), default=-1)
    largest = sets[at] if sets else set()
    rest = {agent.name}
    clash = agent.name in largest
    for i, names in enumerate(sets):
        if i == at or clash:
            continue
        clash = not rest.isdisjoint(names) or not largest.isdisjoint(names)
        rest |= names
    if clash:  # name the first repeated agent in walk order
        walked: set[str] = set()
        for other in agent.walk():
            if other.name in walked:
                raise UserError(f"Two agents named {other.name!r} in the tree of "
                                f"{agent.name!r}; names must be unique within a tree so "
                                "transfers are unambiguous.")
            walked.add(other.name)
    return largest, rest


def _check_output_types(agent: Agent[Any, Any]) -> tuple[str, Any] | None:
    """Refuse a tree where the run's final answer could come from a chat agent that answers
    with another type than ``agent``: ``Runner.run(agent)`` would then not return what
    ``Agent[..., T]`` promises.

    Returns the name of the tree's first chat agent in walk order and the type it answers
    with (``None``: text), or ``None`` when no agent in the tree chats. Once a tree passes,
    every chat agent below its top answers alike, so that first one stands for the whole
    subtree when a parent checks it: no subtree is walked again."""
    mine = _answer(agent)
    first = (agent.name, mine) if agent.mode == "chat" else None
    for h in agent.handoffs:
        below = h.agent._answers
        if below is None:
            continue
        name, theirs = below
        if theirs != mine:
            said = "text" if mine is None else repr(mine)
            told = "text" if theirs is None else repr(theirs)
            raise UserError(
                f"Agent {agent.name!r} answers with {said}, but {name!r} in its tree answers "
                f"with {told}; a handoff to it would end the run with an answer of another "
                f"type. Give both the same output_type, or make {name!r} mode='task' (it "
                "returns control to its caller).")
        first = first or below
    return first


def _answer(agent: Agent[Any, Any]) -> Any:
    """What ``agent`` answers with: its ``output_type``, or ``None`` for text (``str`` too)."""
    return None if agent.output is None else agent.output_type
