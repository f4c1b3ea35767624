"""`RunContext`: what a tool (or a dynamic instruction) knows about the run it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .agent import Agent
    from .delegation import ChildOptions, ChildResult
    from .messages import Message
    from .sessions import Session
    from .tracing import Span
    from .usage import RunUsage

__all__ = ["ChildRunner", "RunContext", "TContext"]

TContext = TypeVar("TContext", default=Any)
"""The type of a run's context object (``Any`` where nothing says)."""


class ChildRunner(Protocol):
    """How delegating tools (agent tools, meta-tools, parallel workflows) start child runs.

    The engine implements it; declarations reach the engine only through it.
    """

    async def run_child(self, ctx: RunContext[Any], agent: Agent[Any], task: str,
                        options: ChildOptions) -> ChildResult:
        """Run ``agent`` on ``task`` as a delegated child of the agent ``ctx`` serves."""
        ...


@dataclass(slots=True, kw_only=True)
class RunContext(Generic[TContext]):
    """Handed to tools that declare a parameter of this type; it is hidden from the schema."""

    context: TContext
    """The object passed as ``Runner.run(..., context=...)``, shared by the whole tree."""
    agent: Agent[Any]
    """The agent whose model called the tool."""
    path: str
    """That agent's delegation path, e.g. ``coordinator/researcher``."""
    session: Session
    """The session the agent runs in."""
    usage: RunUsage
    """The usage of the whole run so far, children included."""
    tool_call_id: str = ""
    """The id of the tool call being served ("" outside a tool call)."""
    call_key: str = ""
    """A key for the tool call being served that is the same whenever this call runs, in any
    process, and differs for every other call, even one with the same id: pass it as the
    idempotency key of what the tool changes elsewhere (a payment, an email)."""
    messages: Sequence[Message] = ()
    """The conversation so far, as the calling agent's model sees it."""
    depth: int = 0
    """How deeply delegated the agent is: 0 for the top-level run, 1 for its children."""
    span: Span | None = None
    """The trace span of the tool call being served; delegated children nest under it."""
    children: ChildRunner
    """Starts delegated child runs of the agent served (see ``relayrace.delegation``)."""
