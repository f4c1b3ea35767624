"""What one turn offers the model, as one value built once per turn.

`offer_of` evaluates every ``is_enabled`` gate (a tool's, a handoff's) once, and the turn's
flags (``finish_task``, a swarm's spent hops), into an `Offer`. The model request carries its
definitions, and the turn's calls are checked against the same value: a gate that changes its
mind between the request and the call cannot offer a tool and then refuse its call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents.handoffs import FINISH_TASK
from ..models.interface import ToolDefinition

if TYPE_CHECKING:
    from ..agents.context import RunContext
    from ..agents.handoffs import Handoff
    from ..agents.output import OutputSpec
    from ..models.interface import Model, OutputMode, OutputSchema
    from .state import Toolset

__all__ = ["Offer", "offer_of", "output_tool"]


@dataclass(frozen=True, slots=True)
class Offer:
    """What the active agent is offered in one turn; never changed once made."""

    toolset: Toolset
    """What the agent has (its tools, a loop's extra tools, MCP-listed ones, its handoffs);
    the refusals of calls outside the offer name what it says."""
    definitions: Sequence[ToolDefinition]
    """The tool definitions the model request carries (the output tool included)."""
    off: frozenset[str]
    """Tools whose ``is_enabled`` said no this turn: a call to one is refused."""
    handoffs: tuple[Handoff, ...]
    """The handoffs that may be taken this turn."""
    finish_task: bool
    """Whether ``finish_task`` is offered (a task agent that owes a return)."""
    refuse_handoffs: bool
    """Whether a swarm's spent hops refuse transfer calls."""
    output: OutputSchema | None = None
    """What the request asks the answer to be (``None``: text)."""
    output_mode: OutputMode | None = None
    """How the agent's ``output_type`` is asked for (``None``: it has none)."""


def _plain(ts: Toolset) -> Offer:
    """The offer of a turn that takes ``ts`` as it is, made once per toolset."""
    offer = ts.plain
    if type(offer) is not Offer:
        offer = ts.plain = Offer(ts, ts.definitions, frozenset(), ts.enabled, False, False)
    return offer


def finish_task_definition() -> dict[str, Any]:
    """The parameters of ``finish_task``, offered to an agent working in ``task`` mode."""
    return {"type": "object", "required": ["result"], "properties": {
        "result": {"type": "string", "description": "What you did and found, for the caller."}}}


_FINISH_TASK = ToolDefinition(
    name=FINISH_TASK, parameters=finish_task_definition(),
    description="Return control, and your result, to the agent that gave you this task. Call "
                "it when the task is done.")


def output_tool(spec: OutputSpec) -> ToolDefinition:
    """The tool through which a turn in ``tool`` mode gives ``spec``'s value."""
    from ..agents.output import OUTPUT_TOOL

    return ToolDefinition(name=OUTPUT_TOOL, parameters=spec.schema,
                          description="Give your final answer: call this once, when you are "
                                      "done.")


async def offer_of(ts: Toolset, *, finish_task: bool, refuse_handoffs: bool,
                   hide_handoffs: bool, context: Callable[[], RunContext[Any]],
                   spec: OutputSpec | None = None, model: Model | None = None) -> Offer:
    """The offer of one turn of ``ts.agent``: its gates asked once, with ``context()``.

    ``hide_handoffs``: no transfer is offered (a swarm's spent hops, a single-turn agent that
    owes a return); ``refuse_handoffs``: a call to one is refused too.
    """
    handoffs = ts.handoffs
    if not (handoffs.dynamic or finish_task or hide_handoffs or ts.gated or spec is not None
            or refuse_handoffs):
        # The common case: the offer is what the agent has.
        return _plain(ts)
    ctx = context() if ts.gated or handoffs.dynamic else None
    off: set[str] = set()
    for name, t in ts.gated.items():
        assert callable(t.is_enabled) and ctx is not None
        flag = t.is_enabled(ctx)
        if inspect.isawaitable(flag):
            flag = await flag
        if not flag:
            off.add(name)
    enabled = ts.enabled
    if handoffs.dynamic:
        assert ctx is not None
        enabled = tuple(await handoffs.enabled(ctx))
    definitions: Sequence[ToolDefinition] = ts.definitions
    if off or handoffs.dynamic or finish_task or hide_handoffs or spec is not None:
        by_tool = handoffs.by_tool
        definitions = [d for d in ts.definitions if d.name not in by_tool and d.name not in off]
        if not hide_handoffs:
            definitions.extend(handoffs.definitions_for(enabled) if handoffs.dynamic
                               else handoffs.definitions)
        if finish_task:
            definitions.append(_FINISH_TASK)
    output = mode = None
    if spec is not None:
        assert model is not None
        mode = spec.mode or model.output_mode
        if mode == "tool":
            definitions = [*definitions, output_tool(spec)]
        output = spec.request(mode)
    return Offer(ts, definitions, frozenset(off), enabled, finish_task, refuse_handoffs, output,
                 mode)
