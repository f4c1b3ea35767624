"""A run's model requests and tool calls as steps, under keys stable across attempts.

Without a ``StepRunner`` (the usual run) a step is just the call. With one (a durable run),
each request and each call of a tool that does its own work goes through it: a process that
died after a step finished, and before the session log took its outcome, leaves the outcome
with the runner, and the next attempt gets it back instead of paying for the request or
running the call again. Tools that run delegated children are not steps themselves: the
children's requests and calls are.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import Field, TypeAdapter

from ..agents.approvals import Interrupted, UserQuestion
from ..agents.tools import Tool, ToolRetry, render_tool_output
from ..core.exceptions import UsageLimitExceeded
from ..models.interface import ModelResponse
from ..teams.routing import Finish, TransferTo

if TYPE_CHECKING:
    from ..agents.context import RunContext
    from ..core.events import RunFinishedEvent
    from ..core.messages import ToolCall
    from ..sessions.base import LogView
    from ..sessions.steps import StepRunner
    from .callkey import CallKey

__all__ = ["Again", "Attempt", "AttemptEnded", "Crashed", "Finishing", "Redirected", "Retry",
           "Returned", "attempt_tool", "begin_attempt", "model_step",
           "recorded_call"]

In = TypeVar("In")
A = TypeVar("A")

# What stops a run rather than answering a call: never a step's recorded value.
_STOPS = (UserQuestion, Interrupted, UsageLimitExceeded)


@dataclass(frozen=True, slots=True)
class Returned:
    """The tool returned a value, rendered as ``text``."""

    text: str
    kind: Literal["value"] = "value"


@dataclass(frozen=True, slots=True)
class Retry:
    """The tool raised ``ToolRetry`` with the message ``text``."""

    text: str
    kind: Literal["retry"] = "retry"


@dataclass(frozen=True, slots=True)
class Crashed:
    """The tool crashed: ``text`` is ``Type: message``, ``tb`` the traceback."""

    text: str
    tb: str
    kind: Literal["error"] = "error"


@dataclass(frozen=True, slots=True)
class Redirected:
    """The tool returned a ``TransferTo``: ``text`` names the target."""

    text: str
    reason: str = ""
    kind: Literal["transfer"] = "transfer"


@dataclass(frozen=True, slots=True)
class Finishing:
    """The tool returned a ``Finish``."""

    reason: str = ""
    summary: str = ""
    scope: Literal["run", "loop"] = "run"
    kind: Literal["finish"] = "finish"


@dataclass(frozen=True, slots=True)
class Again:
    """The call stopped the run (a question, a child waiting for a person, a budget): an
    attempt that replays it calls the tool again."""

    kind: Literal["again"] = "again"


Attempt = Annotated[Returned | Retry | Crashed | Redirected | Finishing | Again,
                    Field(discriminator="kind")]
"""What one call of a tool came to, in a form a step can record (as JSON, by ``kind``)."""


class AttemptEnded(Exception):
    """An earlier attempt of this durable run ended it (the session log says how), and the
    process died before the durable-execution engine took the outcome: nothing runs again."""

    def __init__(self, ended: RunFinishedEvent) -> None:
        super().__init__(f"the run already ended ({ended.status})")
        self.ended = ended


async def begin_attempt(steps: StepRunner, log: LogView, input: In, start: A
                        ) -> tuple[In | None, A | None, str]:
    """Where this attempt of a durable run begins: if the log shows an earlier attempt began
    (its ``RunStartedEvent`` carries the run id), the run continues from the log (no input
    again, no other start agent); if that attempt ended the run, ``AttemptEnded``. Returns the
    input, the start agent and the run id to write in this attempt's ``RunStartedEvent``."""
    again = log.run_id == steps.run_id
    if again and log.ended is not None:
        raise AttemptEnded(log.ended)
    await steps.start(again)
    if again:
        return None, None, steps.run_id
    return input, start, steps.run_id




@cache
def _attempts() -> TypeAdapter[Attempt]:
    return TypeAdapter(Attempt)  # built at the first durable step, not at import


@cache
def _responses() -> TypeAdapter[ModelResponse]:
    return TypeAdapter(ModelResponse)


async def _attempt(tool: Tool, ctx: RunContext[Any], call: ToolCall) -> Attempt:
    try:
        value = await tool.invoke(ctx, call.arguments)
    except ToolRetry as exc:
        return Retry(str(exc))
    except _STOPS:
        raise
    except Exception as exc:  # a crashing tool is reported to the model, not to the caller
        return Crashed(f"{type(exc).__name__}: {exc}", traceback.format_exc())
    if isinstance(value, TransferTo):
        return Redirected(value.target, value.reason)
    if isinstance(value, Finish):
        return Finishing(value.reason, value.summary, value.scope)
    return Returned(render_tool_output(value))


async def attempt_tool(steps: StepRunner | None, tool: Tool, ctx: RunContext[Any],
                       key: CallKey) -> Attempt:
    """Call ``tool`` (a step of a durable run, when ``steps`` records them); raise what stops
    the run."""
    call = key.call
    if steps is None or tool.delegates:
        return await _attempt(tool, ctx, call)
    stopped: list[BaseException] = []

    async def live() -> str:
        try:
            done = await _attempt(tool, ctx, call)
        except _STOPS as exc:
            stopped.append(exc)
            done = Again()
        return _attempts().dump_json(done).decode()

    done = _attempts().validate_json(await steps.step(key.step_key, live))
    if stopped:
        raise stopped[0]
    if type(done) is Again:  # it stopped the run last time: it asks (or stops) again
        return await _attempt(tool, ctx, call)
    return done


def recorded_call(steps: StepRunner | None, key: CallKey) -> bool:
    """Whether an earlier attempt of this durable run recorded the outcome of the call ``key``
    names (so a call the log shows started and unanswered finished after all)."""
    return steps is not None and steps.recorded(key.step_key) is not None


async def model_step(steps: StepRunner, session_id: str, at: int, agent_name: str,
                     request: Callable[[], Awaitable[ModelResponse]]) -> ModelResponse:
    """``request()``'s response, as the durable run's step for the turn of ``agent_name`` in
    ``session_id`` whose request shows ``at`` messages."""

    async def live() -> str:
        return _responses().dump_json(await request()).decode()

    key = f"{session_id}/model/{at}/{agent_name}"
    return _responses().validate_json(await steps.step(key, live))
