"""Input filters: what a handoff's target model sees of the conversation.

A filter takes the list of messages and returns the list the target sees; the session keeps
the full record. Give one to ``handoff(agent, input_filter=...)``.
"""

from __future__ import annotations

import re

from ..core.exceptions import UserError
from ..core.messages import NOTE, Message
from .handoffs import InputFilter

__all__ = ["keep_last", "nest_history", "remove_tool_traffic"]


def remove_tool_traffic(messages: list[Message]) -> list[Message]:
    """An input filter that drops tool calls and tool results, keeping the conversation text."""
    out: list[Message] = []
    for m in messages:
        if m.role == "tool":
            continue
        if m.tool_calls:
            if m.content:
                out.append(Message.assistant(m.content, name=m.name))
            continue
        out.append(m)
    return out


def keep_last(n: int) -> InputFilter:
    """An input filter keeping the last ``n`` messages, never splitting a call from its result."""
    if n < 1:
        raise ValueError(f"keep_last needs n >= 1, got {n}")

    def _filter(messages: list[Message]) -> list[Message]:
        start = max(0, len(messages) - n)
        # A tool result must follow its call: move back to the assistant message that made it.
        while start > 0 and messages[start].role == "tool":
            start -= 1
        return messages[start:]

    return _filter


def nest_history(max_chars: int = 8000, *, line_chars: int = 500) -> InputFilter:
    """An input filter that folds the conversation before the transfer into one note, so a
    long conversation, or a turn that went through several agents, does not reach the target
    message by message.

    Kept as it is: the turn that transferred (the assistant message whose call made the
    transfer, and the results of its calls, the transfer's note included), so every tool call
    keeps its result; or, when the filter shapes a new user turn of the target, that user
    message on. Everything before goes into the note, one line per message (who spoke, text,
    tool calls and their results), each cut at ``line_chars`` except the user's current
    request, which stays whole. When one user turn passes through several handoffs, the last
    target gets one note of everything before it: a note this filter made earlier is taken
    apart into its lines, never nested twice. Beyond ``max_chars`` the oldest lines are left
    out, saying how many.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 200:
        raise UserError(f"nest_history(max_chars={max_chars!r}): give an int of at least 200.")
    if isinstance(line_chars, bool) or not isinstance(line_chars, int) or line_chars < 20:
        raise UserError(f"nest_history(line_chars={line_chars!r}): give an int of at least 20.")

    def _filter(messages: list[Message]) -> list[Message]:
        request = _last_request(messages)
        start = _kept_from(messages, request)
        if start == 0:
            return list(messages)
        lines: list[str] = []
        left_out = 0
        whole = -1  # the line of the user's current request, never cut nor left out
        for i, m in enumerate(messages[:start]):
            nested = _nested(m)
            if nested is not None:
                left_out += nested[0]
                lines.extend(nested[1])
            elif m.role != "system":
                if i == request:
                    whole = len(lines)
                lines.append(_line(m, None if i == request else line_chars))
        keep: set[int] = set()
        size = len(lines[whole]) + 1 if whole >= 0 else 0
        for i in range(len(lines) - 1, -1, -1):
            if i == whole:
                continue
            size += len(lines[i]) + 1
            if size > max_chars:
                break
            keep.add(i)
        if whole >= 0:
            keep.add(whole)
        left_out += len(lines) - len(keep)
        head = _NEST_HEAD
        head += f" ({left_out} earlier message(s) left out):" if left_out else ":"
        note = Message("user", "\n".join([head, *(lines[i] for i in sorted(keep))]), name=NOTE)
        return [note, *messages[start:]]

    return _filter


_NEST_HEAD = "The conversation so far, nested for you by the transfer"
_LEFT_OUT = re.compile(r"\((\d+) earlier message\(s\) left out\):$")


def _last_request(messages: list[Message]) -> int:
    """Where the user's last message is (-1 if there is none)."""
    return next((i for i in range(len(messages) - 1, -1, -1)
                 if messages[i].role == "user" and messages[i].name != NOTE), -1)


def _kept_from(messages: list[Message], request: int) -> int:
    """Where the part a nested history keeps as it is begins: the turn whose calls the
    messages end with the results of, else the user's last message."""
    end = len(messages)
    while end > 0 and messages[end - 1].role == "tool":
        end -= 1
    if end < len(messages) and end > 0 and messages[end - 1].role == "assistant" \
            and messages[end - 1].tool_calls:
        return end - 1
    return max(request, 0)


def _nested(m: Message) -> tuple[int, list[str]] | None:
    """A note ``nest_history`` made: (how many messages it left out, its lines)."""
    if m.role != "user" or m.name != NOTE or not m.content.startswith(_NEST_HEAD):
        return None
    head, *lines = m.content.split("\n")
    found = _LEFT_OUT.search(head)
    return (int(found.group(1)) if found else 0), lines


def _line(m: Message, limit: int | None) -> str:
    """One message of a nested history, on one line of at most ``limit`` characters."""
    if m.role == "tool":
        text = f"  -> {m.name or 'tool'} result: {m.content}"
    else:
        who = "user" if m.role == "user" and m.name != NOTE else (m.name or m.role)
        text = f"{who}: {m.content}" if m.content else f"{who}:"
        calls = ", ".join(f"{c.name}({c.arguments})" for c in m.tool_calls)
        if calls:
            text += f" [called {calls}]"
    text = " ".join(text.split())
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."
