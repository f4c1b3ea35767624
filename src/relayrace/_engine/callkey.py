"""A tool call's identity across attempts and processes, as one value.

A model may reuse a call id in a later turn, and a resumed run answers a call again in another
process. What stays the same is the session, the batch's place in its conversation (the index
of the assistant message that made the call) and the call itself: `CallKey` holds those, and
every key the engine writes for a call (its run context's, its durable step's, its children's,
the decision a person gives on it) is spelled from it, here only.
"""

from __future__ import annotations

from typing import NamedTuple

from ..core.messages import ToolCall

__all__ = ["CallKey", "Request", "child_key", "request_of"]

Request = tuple[str, str, str, str]
"""(session id, call id, tool name, arguments): the request a person's decision or answer
binds to (a later call with the same id but other arguments asks again)."""


class CallKey(NamedTuple):
    """One tool call of one batch of one session (a tuple: immutable, and made on every call
    at a tuple's cost)."""

    session_id: str
    batch_at: int
    """The assistant message's index in the session's conversation."""
    call: ToolCall

    @property
    def context_key(self) -> str:
        """``RunContext.call_key``: what a tool keys its own records by (question ids too)."""
        return f"{self.session_id}:{self.batch_at}:{self.call.id}"

    @property
    def step_key(self) -> str:
        """The key of the call's durable step (the tool's name is for people reading it)."""
        call = self.call
        return f"{self.session_id}/tool/{self.batch_at}/{call.id}/{call.name}"

    @property
    def request(self) -> Request:
        """What a person's decision or answer on the call binds to."""
        return request_of(self.session_id, self.call)


def child_key(batch_at: int, key: str) -> str:
    """The key of a child a call of the batch at ``batch_at`` delegates to, ``key`` naming it
    among the call's children (with the call's id, it finds the child again on a resume)."""
    return f"{batch_at}:{key}"


def request_of(session_id: str, call: ToolCall) -> Request:
    """`CallKey.request` for a call known by its session and itself (a pending request)."""
    return session_id, call.id, call.name, call.arguments
