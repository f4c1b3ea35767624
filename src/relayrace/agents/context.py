"""`RunContext`: what a tool (or a dynamic instruction) knows about the run it serves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol

from typing_extensions import TypeVar

from ..core.exceptions import UserError
from ._spec import AgentLike
from .pending import UserQuestion

if TYPE_CHECKING:
    from ..core.messages import Message
    from ..core.usage import RunUsage
    from ..sessions import Session
    from ..tracing import Span
    from .children import ChildOptions, ChildResult

__all__ = ["ChildRunner", "RunContext", "TContext"]

TContext = TypeVar("TContext", default=Any)
"""The type of a run's context object (``Any`` where nothing says)."""
A_contra = TypeVar("A_contra", bound=AgentLike, contravariant=True, default=Any)


class ChildRunner(Protocol[A_contra]):
    """How delegating tools (agent tools, meta-tools, parallel workflows) start child runs.

    The engine implements it; declarations reach the engine only through it.
    """

    async def run_child(self, ctx: RunContext[Any], agent: A_contra, task: str,
                        options: ChildOptions) -> ChildResult:
        """Run ``agent`` on ``task`` as a delegated child of the agent ``ctx`` serves."""
        ...


@dataclass(slots=True, kw_only=True)
class RunContext(Generic[TContext]):
    """Handed to tools that declare a parameter of this type; it is hidden from the schema."""

    context: TContext
    """The object passed as ``Runner.run(..., context=...)``, shared by the whole tree."""
    agent: AgentLike
    """The agent whose model called the tool (a ``relayrace.Agent``)."""
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
    """The trace span of the tool call being served; delegated children nest under it. With
    no trace processor registered, spans are not made: it is ``relayrace.tracing.UNSEEN``, a
    shared placeholder that keeps nothing written on it."""
    children: ChildRunner
    """Starts delegated child runs of the agent served (see ``relayrace.agents.delegation``)."""
    answers: Sequence[str] = ()
    """What a person answered to this call's questions so far, in order (see ``ask_user``)."""
    _asked: int = field(default=0, init=False, repr=False)

    def ask_user(self, question: str, *, choices: Sequence[str] | None = None) -> str:
        """Ask the person behind the run ``question`` and return the answer.

        The first time, the run stops: ``RunResult.pending.questions`` lists the question (on
        the outer run, with its path, when asked inside a delegated child), and
        ``Runner.resume(pending, answers={id: text})`` runs this tool call again from its
        start, where this call returns the answer. So the tool's code before ``ask_user`` runs
        again: make what it changes elsewhere happen after the answer. ``choices``, if given,
        are the only answers accepted. Works in sync and async tools; let the exception it
        raises to stop the run propagate.
        """
        if not self.tool_call_id:
            raise UserError("ask_user works inside a tool call only: a tool asks, the run "
                            "stops, and the answer comes back to that call.")
        if not isinstance(question, str) or not question.strip():
            raise UserError(f"ask_user needs a question, got {question!r}.")
        options = None if choices is None else list(choices)
        if options is not None and (isinstance(choices, str) or not options or
                                    not all(isinstance(c, str) for c in options)):
            raise UserError(f"ask_user's choices are a non-empty list of strings, got "
                            f"{choices!r}.")
        number, self._asked = self._asked, self._asked + 1
        if number < len(self.answers):
            return self.answers[number]
        raise UserQuestion(question, options, number, list(self.answers))
