"""Normalized chat messages, the one format every model adapter reads and writes.

Provider adapters translate these to and from their wire formats, so the engine, the session
log and the test doubles never see a provider-specific shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["NOTE", "Message", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]

NOTE = "relayrace"
"""The ``name`` of user-role notes the framework adds (routing, returns, workflow steps)."""


@dataclass(slots=True)
class ToolCall:
    """One tool call requested by the model."""

    id: str
    """The provider's id for the call; the matching tool message carries it back."""
    name: str
    """The tool's name as the model wrote it (it may name no tool at all)."""
    arguments: str
    """The arguments as raw JSON text, exactly as emitted (it may be malformed)."""


@dataclass(slots=True)
class Message:
    """A chat message: system, user, assistant (text and/or tool calls) or tool result."""

    role: Role
    """Who speaks: ``system``, ``user``, ``assistant`` or ``tool``."""
    content: str = ""
    """The text; for a tool message, the tool's result rendered as text."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls of an assistant message, in the order the model emitted them."""
    tool_call_id: str | None = None
    """For a tool message: the id of the call it answers."""
    name: str | None = None
    """For an assistant message, the agent that spoke; for a tool message, the tool's name."""

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message."""
        return cls("user", content)

    @classmethod
    def assistant(
        cls, content: str = "", tool_calls: tuple[ToolCall, ...] = (), *, name: str | None = None
    ) -> Message:
        """An assistant message with text, tool calls or both."""
        return cls("assistant", content, tool_calls, None, name)

    @classmethod
    def tool(cls, tool_call_id: str, content: str, *, name: str | None = None) -> Message:
        """The result of the tool call ``tool_call_id``."""
        return cls("tool", content, (), tool_call_id, name)
