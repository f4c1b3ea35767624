"""`AgentLike`: what the declarations below `Agent` need to know of an agent.

They name this protocol, not ``relayrace.agents.agent``, so the declarations import downward
only; `Agent` is its one implementation.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["AgentLike"]


@runtime_checkable
class AgentLike(Protocol):
    """An agent as a tool, a handoff or a run context refers to it."""

    @property
    def name(self) -> str:
        """Its name, unique in its tree."""
        ...

    @property
    def description(self) -> str:
        """What it does, for the models that may call on it."""
        ...

    @property
    def max_result_tokens(self) -> int | None:
        """The longest tool result its model sees (``None``: no limit)."""
        ...
