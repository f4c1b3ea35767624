"""What a model sees of long conversations: result limits, compression, and ``read_result``.

Nothing here changes a session log. A result longer than its tool's ``max_result_tokens`` is
cut in the tool message (the event keeps the whole result); an agent's `Compression` changes
only the messages of a request; ``read_result`` reads what either left out back from the log.
Token counts are estimates: characters / ``usage.CHARS_PER_TOKEN``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..core._lazy import lazy_names
from ..core.events import ContextCompactedEvent, ToolResultEvent
from ..core.exceptions import UserError
from ..core.messages import NOTE, Message
from ..core.usage import CHARS_PER_TOKEN, estimate_tokens
from ..models.interface import Model
from .context import RunContext
from .tools import FunctionTool, ToolRetry

__all__ = [
    "DEFAULT_MAX_RESULT_TOKENS",
    "READ_RESULT",
    "SUMMARY_INSTRUCTIONS",
    "Compression",
    "clear_results",
    "cut_result",
    "message_chars",
    "read_result",
    "render_messages",
]

DEFAULT_MAX_RESULT_TOKENS = 8000
"""An agent's default ``max_result_tokens`` (Astromesh's)."""
READ_RESULT = "read_result"
"""The name of the built-in tool that reads cut, cleared and archived context back."""
SUMMARY_INSTRUCTIONS = (
    "You compress the early part of a conversation between a user and AI agents so that the "
    "agents can continue it without the original. Write a concise summary: the user's goals "
    "and preferences, facts established, decisions made, tool results that still matter (with "
    "their key values), and open questions. Use plain prose or short bullet points; do not "
    "invent anything.")
"""The instructions of a summary request (compression and a memory's ``summary`` strategy)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Compression:
    """Keep an agent's requests within ``max_tokens`` (estimated) on long conversations.

    When a request would be larger, what the model sees of the conversation shrinks in
    layers, oldest first, until it fits: (1) results of ``compactable`` tools are cleared,
    (2) then results of other tools, except ``protected`` ones, (3) then, if ``summarize``,
    the oldest turns are summarized by ``summary_model`` (default: the agent's model) and
    archived. A cleared result or an archive leaves a note naming it, and ``read_result``
    reads it back. Messages of the current run are never cleared nor summarized; the
    session log keeps everything.
    """

    max_tokens: int
    """The request size (instructions, messages and tools, estimated) that triggers it."""
    summarize: bool = True
    """Whether the last layer may summarize old turns (a model request)."""
    summary_model: Model | str | None = None
    """The model that summarizes; ``None``: the agent's own."""

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) \
                or self.max_tokens < 100:
            raise UserError(f"Compression(max_tokens={self.max_tokens!r}): give the request "
                            "budget in tokens, an integer of at least 100.")
        if self.summary_model is not None and not isinstance(self.summary_model, Model | str):
            raise UserError(f"Compression(summary_model={self.summary_model!r}): give a Model or "
                            "a 'provider:model' string, or None for the agent's model.")


def message_chars(m: Message) -> int:
    """A message's size as the token estimates count it."""
    return len(m.content) + sum(len(c.name) + len(c.arguments) for c in m.tool_calls)


def cut_result(text: str, limit: int, call_id: str, *, readable: bool) -> str:
    """``text`` cut to ``limit`` tokens (estimated, note included), with a note saying how
    much was left out and how to read it."""
    room = limit * CHARS_PER_TOKEN
    total = len(text)
    how = (f"read_result(call_id={call_id!r}, offset={{keep}}) reads on" if readable else
           "the whole result is kept in the session log; ask for something narrower to see "
           "other parts")
    note = (f"\n\n[Cut to {limit} tokens: {{left}} of {total} characters (about {{tokens}} "
            f"tokens) left out; {how}.]")
    keep = max(room - len(note.format(keep=total, left=total, tokens=estimate_tokens(total))), 0)
    left = total - keep
    return text[:keep] + note.format(keep=keep, left=left, tokens=estimate_tokens(left))


def clear_results(
    messages: list[Message], boundary: int, excess: int,
    kind: Callable[[str], Literal["compactable", "other", "protected"]], readable: bool,
) -> tuple[list[Message], int]:
    """Clear old tool results, before ``boundary``, oldest first, until ``excess`` tokens are
    saved: results of compactable tools first, then of other tools; never protected ones.

    Returns the messages (a copy only if something changed) and the tokens still to save. A
    cleared result keeps its message (same call id), so calls and results still pair up.
    """
    out: list[Message] | None = None
    for layer in ("compactable", "other"):
        for i in range(boundary):
            if excess <= 0:
                return (out or messages), excess
            m = (out or messages)[i]
            if m.role != "tool" or kind(m.name or "") != layer or m.content.startswith(
                    "[Result cleared"):
                continue
            how = (f"read_result(call_id={m.tool_call_id!r}) brings it back" if readable else
                   "it stays in the session log")
            note = (f"[Result cleared to save context: {estimate_tokens(len(m.content))} "
                    f"tokens; {how}.]")
            saved = estimate_tokens(len(m.content)) - estimate_tokens(len(note))
            if saved <= 0:
                continue
            if out is None:
                out = list(messages)
            out[i] = Message("tool", note, (), m.tool_call_id, m.name)
            excess -= saved
    return (out or messages), excess


def render_messages(messages: Sequence[Message], *, limit: int | None = None) -> str:
    """Messages as plain text (for a summary request, an archive, a memory), each one cut to
    ``limit`` characters if given."""
    lines = []
    for m in messages:
        who = m.name if m.role == "assistant" and m.name else (
            "note" if m.name == NOTE else m.role)
        if m.role == "tool":
            who = f"result of {m.name or 'a tool'} ({m.tool_call_id})"
        text = m.content if limit is None or len(m.content) <= limit else \
            m.content[:limit] + " [...]"
        calls = "".join(f"\n  -> calls {c.name}({c.arguments}) [{c.id}]" for c in m.tool_calls)
        lines.append(f"{who}: {text}{calls}")
    return "\n".join(lines)


def _header(name: str, start: int, end: int, total: int) -> str:
    more = (f" read_result(call_id={name!r}, offset={end}) reads on." if end < total
            else " That is the end.")
    return f"[{name}: characters {start} to {end} of {total}.{more}]\n"


async def _read_result(ctx: RunContext[Any], call_id: str, offset: int = 0) -> str:
    """Read back, from the session log, a tool result that was cut or cleared to save context,
    or an archive of summarized turns.

    Args:
        call_id: The id a note named: a tool call's id, or an archive's (e.g. archive-1).
        offset: The character to start from (a note says where the text was cut).
    """
    events = await ctx.session.get_events()
    text: str | None = None
    for e in reversed(events):  # call ids may repeat: the latest is the one a note names
        if isinstance(e, ToolResultEvent) and e.message.tool_call_id == call_id:
            text = e.full_content if e.full_content is not None else e.message.content
            break
        if isinstance(e, ContextCompactedEvent) and e.archive_id == call_id:
            messages = (await ctx.session.view()).messages[e.start:e.end]
            text = render_messages(messages)
            break
    if text is None:
        known = sorted({e.archive_id for e in events if isinstance(e, ContextCompactedEvent)}
                       | {e.message.tool_call_id or "" for e in events[-200:]
                          if isinstance(e, ToolResultEvent) and e.full_content is not None})
        raise ToolRetry(f"No tool result or archive {call_id!r} in this session's log. Use the "
                        f"call_id a note named{': one of ' + ', '.join(known) if known else ''}.")
    total = len(text)
    if not 0 <= offset < max(total, 1):
        raise ToolRetry(f"offset {offset} is outside {call_id!r}, which has {total} characters: "
                        f"give an offset from 0 to {max(total - 1, 0)}.")
    limit = ctx.agent.max_result_tokens
    if limit is None:
        return _header(call_id, offset, total, total) + text[offset:]
    # What this returns must fit the agent's limit itself, or it would be cut again.
    room = max(limit * CHARS_PER_TOKEN - len(_header(call_id, total, total, total + 1)), 1)
    end = min(offset + room, total)
    return _header(call_id, offset, end, total) + text[offset:end]


# ``read_result`` is the tool above, made when first named (see `relayrace.core._lazy`).
if TYPE_CHECKING:
    read_result: FunctionTool
__getattr__ = lazy_names(__name__, {"read_result": lambda: FunctionTool(_read_result,
                                                                         name=READ_RESULT)})
