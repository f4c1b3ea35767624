"""The state of one loop, split by lifetime and owner (the loop itself is in ``_engine``).

| piece | lives for | holds |
|---|---|---|
| `RunState` (``_state``) | the run tree | context, trace, budget, stream, decisions |
| `Place` | the loop | where it sits: entry agent, path prefix, depth, parent span |
| `EventLog` | the loop | the events it recorded, what the session holds of them |
| `Views` | the loop | the conversation and what each agent sees of it |
| `Calls` | a batch of tool calls | calls in flight, results held, what a crash left unknown |
| `Transfers` | the run | handoff hops and limits, the task-mode return stack |
| `Scope` | a team's turn | the team's guardrails and routing inputs |
| `Control` | the run | turn counts, how the run ends |
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..core.events import HandoffEvent, MessageEvent, ToolResultEvent
from ..core.exceptions import HandoffError, HandoffLoopError, MaxHandoffsExceeded, MaxTurnsExceeded
from ..core.usage import Usage

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..agents.guardrails import Guardrail
    from ..agents.handoffs import Handoff
    from ..agents.tools import Tool
    from ..core.events import AgentEvent, ContextCompactedEvent, ToolStartedEvent
    from ..core.messages import Message
    from ..sessions.base import Session
    from ..tracing import Span
    from .state import Toolset

__all__ = ["Calls", "Control", "EventLog", "Place", "Scope", "Transfers", "Views"]

DEFAULT_MAX_TURNS = 25


class Place:
    """Where a loop sits in the run tree; fixed when the loop is made."""

    __slots__ = ("depth", "entry", "extra_tools", "local", "memories", "parent_span", "prefix",
                 "suffix", "toolsets", "variables")

    def __init__(self, entry: Agent[Any], prefix: str, parent_span: Span | None, depth: int,
                 suffix: str, variables: dict[str, Any] | None,
                 extra_tools: tuple[Tool, ...] = ()) -> None:
        self.entry = entry
        """The agent (or team, or workflow) the loop runs."""
        self.prefix = prefix
        """The delegation path above it ("" at the top)."""
        self.parent_span = parent_span
        """The span a delegated loop nests under."""
        self.depth = depth
        """0 at the top, 1 for a child, ..."""
        self.suffix = suffix
        """Text added to every agent's instructions (a child's report request)."""
        self.variables = variables
        """Template variables for the instructions (a child's context transform)."""
        self.extra_tools = extra_tools
        """Tools every agent of the loop is offered besides its own (a child's
        ``submit_report``)."""
        self.toolsets: dict[str, Toolset] = {}
        """Agent name -> what it is offered (``_state.toolset_of``), looked up once per loop."""
        self.memories: dict[str, Message | None] = {}
        """Agent name -> what it recalls of its memory, read once per loop."""
        self.local: Usage | None = Usage() if depth else None
        """What a delegated loop used, its children included (the run's total says it at the
        top)."""


# What a durable run's log may take later: a model's answer, a step tool's result and what the
# engine derives from them alone (transfers, notes), all of which a later attempt gets back
# from the steps' records.
_HELD = frozenset({MessageEvent, ToolResultEvent, HandoffEvent})


class EventLog:
    """The events a loop recorded, and how many of them its session holds."""

    __slots__ = ("add", "hold", "logged", "new_events", "session", "written")

    def __init__(self, session: Session, emit: Callable[[AgentEvent], None] | None,
                 hold: bool = False) -> None:
        self.session = session
        """The session the loop writes."""
        self.new_events: list[AgentEvent] = []
        """Every event of this loop's run, in order."""
        # Record an event for the next session batch, the result and the stream. Unless the
        # run streams, that is the list's own append (no Python call per event).
        self.add: Callable[[AgentEvent], None] = self.new_events.append
        if emit is not None:
            def add(event: AgentEvent) -> None:
                self.new_events.append(event)
                emit(event)

            self.add = add
        self.written = 0
        """How many of ``new_events`` the session holds."""
        self.logged: set[int] = set()
        """Results already recorded as their calls finished (persistent logs), by id(event)."""
        self.hold = hold
        """Whether batches wait for one that must be on record (a durable run without a
        person's decisions, whose steps record every answer and step tool result): see
        ``flush``."""

    def unwritten(self) -> list[AgentEvent]:
        """The events the session does not hold yet, now counted as written."""
        events, start = self.new_events, self.written
        self.written = len(events)
        return events[start:]

    async def flush(self, *, now: bool = False) -> None:
        """Write the pending events to the session in one batch.

        In a durable run (``hold``) the batch waits, unless ``now``, while it holds only what
        a later attempt gets back from the steps' records (``_HELD``): it goes with the next
        batch that must be on record first (a run's start, a tool call about to start, a
        run's end). Batches written together are one append, so each stays atomic.
        """
        if self.hold and not now and all(type(e) in _HELD
                                         for e in self.new_events[self.written:]):
            return
        batch = self.unwritten()
        if batch:
            await self.session.append(batch)


class Views:
    """The conversation, and what the active agent sees of it (filters, redactions)."""

    __slots__ = ("archives", "checked", "compactions", "filter", "note", "redact",
                 "resumed_filter", "run_start", "transcript", "view")

    def __init__(self) -> None:
        self.transcript: list[Message] = []
        """The whole conversation of the loop's session."""
        self.view: list[Message] = self.transcript
        """What the active agent's model sees."""
        self.filter: Handoff | None = None
        """The handoff whose input filter shapes the view."""
        self.resumed_filter: Handoff | None = None
        """The handoff (with a filter) that made the remembered agent active, for its next
        run."""
        self.checked: dict[str, int] = {}
        """Per agent: the transcript prefix its input guardrails saw."""
        self.redact: dict[str, dict[int, Message]] = {}
        """Per agent: what it sees redacted, by id of the original message."""
        self.note: Message | None = None
        """The result of the last transfer call (kept visible beside a filter)."""
        self.run_start = 0
        """Where this run's messages begin in the transcript (compression keeps them)."""
        self.compactions: dict[str, ContextCompactedEvent] = {}
        """Per agent: the compression summary it sees in place of the oldest messages."""
        self.archives = 0
        """Archives the session holds (the next one is numbered after them)."""

    def push(self, message: Message) -> None:
        """Append a message to the conversation (and to the active agent's own view)."""
        self.transcript.append(message)
        if self.view is not self.transcript:
            self.view.append(message)

    def show(self, agent: str, view: list[Message] | None = None,
             source: Handoff | None = None) -> None:
        """What ``agent``, active from now on, sees: all (redacted for it), or ``view``, what
        the input filter of ``source`` kept of it (``Pieces.filtered_view``)."""
        if view is None:
            redact = self.redact.get(agent)
            transcript = self.transcript
            view = [redact.get(id(m), m) for m in transcript] if redact else transcript
        self.view, self.filter = view, source

    def remember(self, source: Handoff | None) -> None:
        """The handoff whose filter the agent a resumed run starts with still sees through."""
        self.resumed_filter = source

    def take_remembered(self) -> Handoff | None:
        """That handoff, once: it applies to the agent the run starts with only."""
        source, self.resumed_filter = self.resumed_filter, None
        return source

    def keep_note(self, note: Message) -> None:
        """The result of the transfer that made the active agent active."""
        self.note = note


class Calls:
    """Tool calls in flight, results held, and what a crash left unknown."""

    __slots__ = ("asked", "batch_at", "child_counts", "held", "resumed", "running", "unknown")

    def __init__(self) -> None:
        self.running: set[str] = set()
        """Calls started and not yet finished."""
        self.held: dict[str, ToolResultEvent] | None = None
        """Results of calls that finished in a turn the run's end interrupted."""
        self.unknown: dict[str, ToolStartedEvent] = {}
        """Calls an earlier process started whose outcome is unknown (first batch only)."""
        self.asked: set[str] = set()
        """Of those, the ones a person was asked to approve again since."""
        self.resumed: frozenset[str] = frozenset()
        """The current batch's calls that started in an earlier process."""
        self.batch_at = 0
        """Where the current batch's calls were made: the assistant message's index in the
        transcript, the same in every process that runs the batch (call ids may repeat)."""
        self.child_counts: dict[str, int] = {}
        """Delegated children started per tool call."""

    def number_child(self, call_id: str) -> int:
        """The next child of the call ``call_id``: 0, 1, ... (stable when the call runs again)."""
        n = self.child_counts.get(call_id, 0)
        self.child_counts[call_id] = n + 1
        return n

    def resume(self, started: dict[str, ToolStartedEvent], asked: set[str]) -> None:
        """A resumed run: these calls started in an earlier process and have no result."""
        self.unknown, self.asked = dict(started), set(asked)

    def hold(self, results: Sequence[ToolResultEvent | None]) -> None:
        """Keep finished results of a turn the run's end interrupts, to be logged in their
        calls' places (a later call may finish before an earlier one is cut short)."""
        for ev in results:
            if ev is not None:
                if self.held is None:
                    self.held = {}
                self.held[ev.message.tool_call_id or ""] = ev

    def begin_batch(self, transcript: Sequence[Message]
                    ) -> tuple[dict[str, ToolStartedEvent], set[str]]:
        """A batch of calls starts: note where its calls were made, and hand over (once) the
        calls of it an earlier process started, with those a person was asked about again."""
        at = len(transcript) - 1
        while at > 0 and transcript[at].role != "assistant":
            at -= 1
        self.batch_at = at
        unknown, asked = self.unknown, self.asked
        if unknown:  # the first batch of a resumed run
            self.unknown, self.asked = {}, set()
            self.resumed = frozenset(unknown)
        elif self.resumed:
            self.resumed = frozenset()
        return unknown, asked


class Transfers:
    """Handoffs made in the run: hops, limits, and the task-mode return stack."""

    __slots__ = ("count", "given", "hops", "limit", "passed", "returns", "swarm_limit")

    def __init__(self, limit: int | None, swarm_limit: bool) -> None:
        self.hops: list[str] = []
        """Agents passed through by handoffs since the last real work (loop detection)."""
        self.passed: set[str] = set()
        """The same agents as a set: a hop to a new agent costs the same at any depth."""
        self.count = 0
        """Handoffs made."""
        self.limit = limit
        """``max_handoffs``, if any."""
        self.swarm_limit = swarm_limit
        """Whether the limit is a swarm's (refuse and answer) rather than an error."""
        self.returns: list[str] = []
        """Callers that ``task``/``single_turn`` agents owe a return to, innermost last."""
        self.given: tuple[str, dict[str, Any]] | None = None
        """(the active agent, the template variables the transfer to it gave): what a
        handoff's ``context_transform`` made, for as long as that agent holds the
        conversation."""

    def check(self, agent: str, target: str) -> tuple[str | None, HandoffError | None]:
        """Why a transfer from ``agent`` to ``target`` must not happen (a limit, or a cycle
        with no work between), and the error that ends the run if it must: (None, None) if it
        may. The hop is counted toward cycle detection either way."""
        limit = self.limit
        if limit is not None and self.count >= limit:
            if self.swarm_limit:  # a swarm's hop limit: refuse, and let the agent answer
                return (f"this swarm allows {limit} handoffs per run; answer the user "
                        "yourself."), None
            return f"this run already made {limit} handoffs.", MaxHandoffsExceeded(limit)
        hops, passed = self.hops, self.passed
        if not hops:
            hops.append(agent)
            passed.add(agent)
        hops.append(target)
        # A loop: the last hops repeat the ones before them (A B A B, A B C A B C, ...), which
        # needs the target to be there before.
        if target in passed:
            for k in range(2, len(hops) // 2 + 1):
                if hops[-k:] == hops[-2 * k:-k]:
                    return ("handoff loop detected (control went round the same agents with "
                            "no work done)."), HandoffLoopError(hops[-2 * k:])
        passed.add(target)
        return None, None

    def made(self) -> None:
        """Count a transfer that happened."""
        self.count += 1

    def used_up(self) -> bool:
        """Whether a swarm's hop limit hides the transfer tools now."""
        return self.swarm_limit and self.limit is not None and self.count >= self.limit

    def resume(self, returns: Sequence[str]) -> None:
        """A resumed run: the callers task agents still owe a return to."""
        self.returns = list(returns)

    @contextmanager
    def swarm(self, limit: int | None) -> Iterator[None]:
        """A swarm inside a workflow or team: its hop limit holds while it runs, only."""
        saved = self.swarm_limit, self.limit, self.count
        self.swarm_limit, self.limit, self.count = True, limit, 0
        try:
            yield
        finally:
            self.swarm_limit, self.limit, self.count = saved

    def worked(self) -> None:
        """Real work happened (not only routing): the hops so far are no cycle."""
        self.hops.clear()
        self.passed.clear()


class Scope:
    """What a team adds to its members' turns."""

    __slots__ = ("called", "start_member", "team_input", "team_mode", "team_output")

    def __init__(self) -> None:
        self.team_mode = False
        """Whether a team routes typed TransferTo requests (elsewhere they transfer)."""
        self.called: set[str] = set()
        """Tools called in the current speaker's turn, for routing rules."""
        self.team_input: tuple[Guardrail, ...] = ()
        """The team's input guardrails, for every member."""
        self.team_output: tuple[Guardrail, ...] = ()
        """The team's output guardrails, for every member."""
        self.start_member: Agent[Any] | None = None
        """Where the entry team starts (``start_agent``)."""

    def speaker_turn(self, team: bool) -> None:
        """An agent's turns begin; in a team, what it calls is noted afresh for the rules."""
        self.team_mode = team
        if team:
            self.called = set()

    def enter_team(self, input_guardrails: tuple[Guardrail, ...],
                   output_guardrails: tuple[Guardrail, ...]
                   ) -> tuple[tuple[Guardrail, ...], tuple[Guardrail, ...]]:
        """A team's guardrails apply to its members; returns what ``leave_team`` restores."""
        saved = self.team_input, self.team_output
        self.team_input, self.team_output = input_guardrails, output_guardrails
        return saved

    def leave_team(self, saved: tuple[tuple[Guardrail, ...], tuple[Guardrail, ...]]) -> None:
        """The team's run ended: the guardrails around it apply again."""
        self.team_input, self.team_output = saved

    def start_at(self, member: Agent[Any]) -> None:
        """The entry team's run starts with ``member``."""
        self.start_member = member

    def take_start_member(self) -> Agent[Any] | None:
        """That member, once."""
        member, self.start_member = self.start_member, None
        return member


class Control:
    """How far the run has gone and how it ends."""

    __slots__ = ("agent_turns", "blocked", "finished", "leaving_loop", "loops", "max_turns",
                 "output_failures", "resuming", "turns")

    def __init__(self, max_turns: int) -> None:
        self.turns = 0
        """Model turns taken."""
        self.max_turns = max_turns
        """The run's turn limit."""
        self.agent_turns: dict[str, int] | None = None
        """Turns of agents with their own ``max_turns``."""
        self.resuming = False
        """Whether the run continues the log (``input=None``)."""
        self.blocked: str | None = None
        """A guardrail's answer that ends the run."""
        self.finished = False
        """A tool returned Finish: the run ends, workflows included."""
        self.output_failures = 0
        """Structured outputs the model gave that failed validation."""
        self.loops = 0
        """How many ``LoopAgent`` runs enclose the active agent."""
        self.leaving_loop = False
        """A tool returned ``Finish(scope="loop")``: the innermost loop ends, not the run."""

    def block(self, answer: str) -> None:
        """A guardrail blocked: the run ends with ``answer``."""
        self.blocked = answer

    def finish(self) -> None:
        """A tool returned Finish: the run ends, workflows included."""
        self.finished = True

    def begin(self, *, resuming: bool) -> None:
        """The run starts: with new input, or continuing the log."""
        self.resuming = resuming

    def count_turn(self, agent: str, own_limit: int | None) -> None:
        """Count a model turn of ``agent``; raise past its own ``max_turns`` (the run's limit
        is checked before the turn)."""
        if own_limit is not None:
            counts = self.agent_turns
            if counts is None:
                counts = self.agent_turns = {}
            n = counts.get(agent, 0)
            if n >= own_limit:
                raise MaxTurnsExceeded(own_limit, agent)
            counts[agent] = n + 1
        self.turns += 1
