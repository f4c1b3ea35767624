"""What a model sees of long conversations, for the engine: tool results cut to their limit,
an agent's compression applied to a request, and an agent's memory recalled and kept.

The rules themselves are declared in ``compression`` and ``memory``; this module applies them
to a pieces. None of it rewrites the session log: cut results keep their whole text in the
event, compression writes only its summaries (``ContextCompactedEvent``), and memory lives
in a log of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..agents.compression import (
    READ_RESULT,
    SUMMARY_INSTRUCTIONS,
    Compression,
    clear_results,
    cut_result,
    message_chars,
    render_messages,
)
from ..agents.memory import Memory, memory_session_id, memory_state, recall
from ..core.events import ContextCompactedEvent, MemoryEvent, MessageEvent, ToolResultEvent
from ..core.messages import NOTE, Message, ToolCall
from ..core.usage import CHARS_PER_TOKEN, estimate_tokens
from ..models import infer_model
from ..models.interface import Model, ModelRequest, ToolDefinition
from .state import model_of

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from ..tracing import Span
    from .pieces import Pieces

__all__ = ["cut_long", "remember", "remembers", "request_messages"]

_SUMMARY_INPUT_LIMIT = 2000  # characters of one message a summary request shows
_MEMORY_LEASE_WAIT = 10.0  # seconds a run waits for another run writing the same memory
_MEMORY_SUMMARY_BUDGET = 32_000  # tokens of turns one memory summary request may show
_TURN_MESSAGES = 20  # messages one remembered turn keeps at most


def cut_long(pieces: Pieces, agent: Agent[Any], call: ToolCall, text: str,
             limit: int) -> ToolResultEvent:
    """The result event of ``call``: ``text``, longer than ``limit`` tokens, cut to it; the
    event keeps the whole text."""
    readable = READ_RESULT in pieces.toolset(agent).tools
    return pieces.tool_result(agent, call, cut_result(text, limit, call.id, readable=readable),
                            full=text)


# -- compression --------------------------------------------------------------------------------


Kind = Literal["compactable", "other", "protected"]


def _kind(pieces: Pieces, agent: Agent[Any]) -> Callable[[str], Kind]:
    """How compression treats the results of each of ``agent``'s tools (another agent's, in
    the same conversation, as any other tool's)."""
    tools = pieces.toolset(agent).tools

    def kind(name: str) -> Kind:
        t = tools.get(name)
        if t is None:
            return "other"
        return "protected" if t.protected else "compactable" if t.compactable else "other"

    return kind


def _summary_note(c: ContextCompactedEvent, readable: bool) -> Message:
    how = (f"read_result(call_id={c.archive_id!r}) reads them" if readable
           else "the session log keeps them")
    earlier = f" Earlier archives: archive-1 to {c.archive_id}." if c.start else ""
    if c.error:
        head = (f"[Messages {c.start} to {c.end} of this conversation were archived as "
                f"{c.archive_id} without a summary (the summary model failed); {how}."
                f"{earlier}]")
        body = f"\nSummary of what came before them:\n{c.summary}" if c.summary else ""
    else:
        head = (f"[Summary of this conversation before this point; its last part is archived "
                f"as {c.archive_id} (messages {c.start} to {c.end}); {how}.{earlier}]")
        body = f"\n{c.summary}"
    return Message("user", head + body, name=NOTE)


def _size(instructions: str, definitions: Sequence[ToolDefinition],
          messages: list[Message]) -> int:
    chars = len(instructions) + sum(len(d.name) + len(d.description) + len(str(d.parameters))
                                    for d in definitions)
    return estimate_tokens(chars + sum(message_chars(m) for m in messages))


async def request_messages(pieces: Pieces, agent: Agent[Any], instructions: str,
                           definitions: Sequence[ToolDefinition], parent: Span) -> list[Message]:
    """What ``agent``'s next request shows of the conversation: its memory, then its view,
    both within its compression budget."""
    recalled = None
    if agent.memory is not None:
        recalled = await _recalled(pieces, agent, agent.memory)
    view = pieces.views.view
    if agent.compression is not None:
        # The memory note counts toward the budget as part of the instructions would.
        shown = instructions if recalled is None else instructions + recalled.content
        view = await _compressed(pieces, agent, agent.compression, shown, definitions, parent)
    return view if recalled is None else [recalled, *view]


async def _compressed(pieces: Pieces, agent: Agent[Any], policy: Compression,
                      instructions: str, definitions: Sequence[ToolDefinition],
                      parent: Span) -> list[Message]:
    views = pieces.views
    view, transcript = views.view, views.transcript
    # A summary replaces a prefix of the transcript: possible where the view is the
    # transcript, message for message (redacted or not), not through a handoff's filter.
    aligned = views.filter is None and len(view) == len(transcript)
    boundary = views.run_start if aligned else max(
        0, len(view) - (len(transcript) - views.run_start))
    readable = READ_RESULT in pieces.toolset(agent).tools
    kind = _kind(pieces, agent)

    def fit(compaction: ContextCompactedEvent | None) -> tuple[list[Message], int]:
        """The view after ``compaction``, its old results cleared as far as needed; and the
        tokens still over the budget."""
        messages, protect = view, boundary
        if compaction is not None:
            messages = [_summary_note(compaction, readable), *view[compaction.end:]]
            protect = boundary - compaction.end + 1
        excess = _size(instructions, definitions, messages) - policy.max_tokens
        if excess <= 0:
            return messages, excess
        return clear_results(messages, protect, excess, kind, readable)

    compaction = views.compactions.get(agent.name) if aligned else None
    messages, excess = fit(compaction)
    if excess <= 0 or not (policy.summarize and aligned):
        return messages
    made = await _summarize(pieces, agent, policy, compaction, parent)
    return messages if made is None else fit(made)[0]


def _cut_point(pieces: Pieces, start: int, budget: int) -> int | None:
    """Where a new summary ends: the earliest turn start (a user message, so every call
    before it has its result) after which the rest of the run's past fits half the budget;
    never inside the current run."""
    transcript = pieces.views.transcript
    limit = pieces.views.run_start
    best: int | None = None
    rest = estimate_tokens(sum(message_chars(m) for m in transcript[start:]))
    for i in range(start, limit + 1):
        if i > start and i < len(transcript) and transcript[i].role == "user":
            best = i
            if rest <= budget // 2:
                break
        if i < len(transcript):
            rest -= message_chars(transcript[i]) // CHARS_PER_TOKEN
    return best


async def _summarize(pieces: Pieces, agent: Agent[Any], policy: Compression,
                     previous: ContextCompactedEvent | None,
                     parent: Span) -> ContextCompactedEvent | None:
    """Summarize the oldest turns not yet summarized, archive them, and log it."""
    start = previous.end if previous is not None else 0
    end = _cut_point(pieces, start, policy.max_tokens)
    if end is None:
        return None
    old = previous.summary if previous is not None else ""
    model = _model(pieces, agent, policy.summary_model)
    summary, error = await _summary_of(pieces, agent, model, old,
                                       pieces.views.transcript[start:end], policy.max_tokens,
                                       parent)
    views = pieces.views
    views.archives += 1
    event = ContextCompactedEvent(agent=agent.name, path=pieces.path(agent),
                                  archive_id=f"archive-{views.archives}", start=start, end=end,
                                  summary=summary if not error else old, error=error)
    views.compactions[agent.name] = event
    pieces.log.add(event)  # written with the turn's answer
    return event


def _model(pieces: Pieces, agent: Agent[Any], chosen: Model | str | None) -> Model:

    if chosen is None:
        return model_of(agent, pieces.state.model_override)
    return infer_model(chosen) if isinstance(chosen, str) else chosen


async def _summary_of(pieces: Pieces, agent: Agent[Any], model: Model, old: str,
                      messages: list[Message], budget: int, parent: Span) -> tuple[str, str]:
    """(summary, "") from ``model``, or ("", why) if it failed: compression goes on without
    it, and a memory keeps its turns."""
    text = render_messages(messages, limit=_SUMMARY_INPUT_LIMIT)
    room = budget * CHARS_PER_TOKEN
    if len(text) > room:  # the summary request stays within the budget it serves
        text = text[:room] + "\n[...]"
    prompt = (f"Summary so far:\n{old}\n\n" if old else "") + f"Conversation:\n{text}"
    request = ModelRequest(instructions=SUMMARY_INSTRUCTIONS, messages=[Message.user(prompt)],
                           tools=[], agent=agent.name)
    budget_ = pieces.state.budget
    path, local = pieces.path(agent), pieces.place.local
    gate = budget_.gate
    estimate = None if gate is None else await gate.admit(request, budget_.usage.total)
    budget_.open_request(path, local)
    span = pieces.state.trace.start("model", model.name, parent, agent=agent.name,
                                  purpose="summary")
    try:
        response = await model.request(request)
    except Exception as exc:
        budget_.close_request(estimate, path, local, None, model.name)
        pieces.state.trace.end(span, exc)
        return "", f"{type(exc).__name__}: {exc}"
    usage = response.usage
    budget_.close_request(estimate, path, local, response, model.name)
    span.attributes["input_tokens"] = usage.input_tokens
    span.attributes["output_tokens"] = usage.output_tokens
    pieces.state.trace.end(span)
    summary = response.message.content.strip()
    if not summary:
        return "", f"the model {model.name!r} returned an empty summary"
    return summary, ""


# -- memory -------------------------------------------------------------------------------------


def _memory_log(pieces: Pieces, agent: Agent[Any]) -> Any:
    return pieces.log.session.open(memory_session_id(pieces.state.memory_owner, pieces.path(agent)))


async def _recalled(pieces: Pieces, agent: Agent[Any], memory: Memory) -> Message | None:
    memories = pieces.place.memories
    if agent.name not in memories:  # read once per loop
        events = await _memory_log(pieces, agent).get_events()
        memories[agent.name] = recall(memory, events, pieces.log.session.session_id)
    return memories[agent.name]


def _turn_of(pieces: Pieces, agent: Agent[Any], memory: Memory) -> list[Message]:
    """What ``agent`` remembers of this run."""
    said = [e.message for e in pieces.log.new_events if type(e) is MessageEvent]
    if memory.store == "request":
        request = [m for m in said if m.role == "user" and m.name != NOTE]
        answer = [m for m in said if m.role == "assistant" and m.name == agent.name
                  and m.content and not m.tool_calls]
        turn = request + answer[-1:]
    else:
        turn = [Message(m.role, m.content, (), None, m.name) for m in said if m.content and (
            (m.role == "user" and m.name != NOTE) or m.role == "assistant")]
    # Bounded however long the run was: its request, and how it ended.
    return turn if len(turn) <= _TURN_MESSAGES else [turn[0], *turn[1 - _TURN_MESSAGES:]]


def remembers(entry: Agent[Any]) -> bool:
    """Whether an agent of ``entry``'s tree has memory (looked up once per tree and root, and
    kept on ``entry``)."""
    root = entry.root
    known = entry._remembers
    if known is None or known[0] is not root:
        known = entry._remembers = root, any(a.memory is not None for a in root.walk())
    return known[1]


async def remember(pieces: Pieces, parent: Span) -> None:
    """At the end of a completed run: each agent with memory that spoke in it keeps its turn
    (the ``summary`` strategy folds older turns into the summary when too many wait)."""
    spoke = {e.agent for e in pieces.log.new_events
             if type(e) is MessageEvent and e.message.role == "assistant"}
    for agent in pieces.place.entry.root.walk():
        memory = agent.memory
        if memory is None or agent.name not in spoke:
            continue
        turn = _turn_of(pieces, agent, memory)
        if not turn:
            continue
        log = _memory_log(pieces, agent)
        async with log.lease(wait=_MEMORY_LEASE_WAIT):
            await log.view()  # appends build on the log as read now (compare-and-append)
            events = await log.get_events()
            path = pieces.path(agent)
            batch: list[Any] = [MemoryEvent(agent=agent.name, path=path,
                                            session_id=pieces.log.session.session_id,
                                            messages=turn)]
            turns, summary, start = memory_state(memory, events)
            waiting = len(turns) + 1 - start
            if memory.strategy == "summary" and waiting > 2 * memory.max_turns:
                end = len(turns) + 1 - memory.max_turns
                old = summary.summary if summary is not None else ""
                folded = [m for t in [*turns, batch[0]][start:end] for m in t.messages]
                text, error = await _summary_of(
                    pieces, agent, _model(pieces, agent, memory.summary_model), old, folded,
                    _MEMORY_SUMMARY_BUDGET, parent)
                count = sum(1 for e in events if isinstance(e, ContextCompactedEvent))
                batch.append(ContextCompactedEvent(
                    agent=agent.name, path=path, archive_id=f"archive-{count + 1}",
                    start=start, end=end if not error else start,
                    summary=text if not error else old, error=error))
            await log.append(batch)
