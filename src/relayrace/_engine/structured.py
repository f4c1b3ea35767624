"""Structured output in the loop: what a turn asks for, and the answer checked.

A turn's offer asks for the active agent's ``output_type`` in the mode its model takes
(``offer_of``, ``prompted``); ``model_turn`` streams the value validated so far
(``Partials``); ``take_turn`` checks the answer (``check_output``). An invalid output is
told to the model (a tool result for the final-output tool, a note for a text answer), which
tries again, ``output_retries`` times at most; then the run ends with `OutputValidationError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..agents.output import OUTPUT_TOOL, OutputSpec
from ..core.events import OutputEvent
from ..core.exceptions import OutputValidationError
from ..core.messages import Message, ToolCall
from ..models.interface import Model, OutputMode
from .guarding import guard_text

if TYPE_CHECKING:
    from ..agents.agent import Agent
    from .pieces import Pieces
    from .state import Emit

__all__ = ["Partials", "check_output", "mode_of", "prompted"]

_TEXT_IN_TOOL_MODE = (f"Give your final answer by calling the {OUTPUT_TOOL} tool; a text "
                      "answer is not accepted.")


def mode_of(spec: OutputSpec, model: Model) -> OutputMode:
    """The output mode of a turn: the agent's, or else its model's."""
    return spec.mode or model.output_mode


def prompted(spec: OutputSpec, instructions: str) -> str:
    """The instructions of a turn that asks for ``spec`` in ``prompted`` mode."""
    return f"{instructions}\n\n{spec.prompt()}" if instructions else spec.prompt()


class Partials:
    """Streams the value a structured answer holds so far (its text in native and prompted
    mode, its output tool's arguments in tool mode), each new one once."""

    __slots__ = ("_emit", "_last", "_prompted", "_spec", "_text", "agent", "path")

    def __init__(self, emit: Emit, agent: Agent[Any], path: str, spec: OutputSpec,
                 mode: OutputMode) -> None:
        self._emit, self.agent, self.path, self._spec = emit, agent, path, spec
        self._prompted = mode == "prompted"
        self._text: list[str] = []
        self._last: Any = None

    def feed(self, delta: str) -> None:
        """Take a text delta; emit the value if it grew."""
        self._text.append(delta)
        value = self._spec.partial("".join(self._text), self._prompted)
        if value is not None and value != self._last:
            self._last = value
            self._emit(OutputEvent(agent=self.agent.name, path=self.path, output=value))


def check_output(pieces: Pieces, agent: Agent[Any], spec: OutputSpec, model: Model,
                 message: Message) -> tuple[str | None, tuple[ToolCall, ...]]:
    """Check a turn's answer against ``spec``: ``(final JSON, ())`` when it gave a valid
    output (every call of the turn answered); else ``(None, calls still to run)``, the model
    told what was wrong when it gave an invalid one. Raise `OutputValidationError` once
    ``output_retries`` are used up."""
    calls = message.tool_calls
    mode = mode_of(spec, model)
    if mode != "tool":
        if calls:  # not done yet
            return None, calls
        checked = spec.check(message.content, prompted=mode == "prompted")
        if checked.error:
            _failed(pieces, agent, spec, message.content, checked.error)
            pieces.note(agent, f"Your final answer is not valid: {checked.error}. Answer again "
                             "with JSON that matches the schema.")
            return None, ()
        return _accepted(pieces, agent, checked.value, checked.text), ()
    if not calls:
        _failed(pieces, agent, spec, message.content, "no call of " + OUTPUT_TOOL)
        pieces.note(agent, _TEXT_IN_TOOL_MODE)
        return None, ()
    given = [c for c in calls if c.name == OUTPUT_TOOL]
    if not given:
        return None, calls
    raw = given[0].arguments
    if agent.output_guardrails or pieces.scope.team_output:  # the answer leaves the agent here
        raw = guard_text(pieces, agent, raw)
        blocked = pieces.control.blocked
        if blocked is not None:
            _answer_all(pieces, agent, calls, None, "Not executed: a guardrail blocked the "
                                                  "final output.")
            return blocked, ()
    checked = spec.check(raw)
    if checked.error:
        # Only this call is answered here: the turn's other calls run as usual.
        result = pieces.tool_result(agent, given[0], f"Invalid final output: {checked.error}. "
                                  f"Call {OUTPUT_TOOL} again with arguments that match its "
                                  "schema.", is_error=True)
        pieces.push(result.message)
        pieces.log.add(result)
        _failed(pieces, agent, spec, given[0].arguments, checked.error)
        return None, tuple(c for c in calls if c is not given[0])
    _answer_all(pieces, agent, calls, given[0], "Not executed: the final output ended the turn.")
    return _accepted(pieces, agent, checked.value, checked.text), ()


def _answer_all(pieces: Pieces, agent: Agent[Any], calls: tuple[ToolCall, ...],
                accepted: ToolCall | None, others: str) -> None:
    """Answer every call of a turn that ends: ``accepted`` as the final output, the rest with
    ``others``."""
    for call in calls:
        text = "Final output accepted." if call is accepted else others
        result = pieces.tool_result(agent, call, text, is_error=call is not accepted)
        pieces.push(result.message)
        pieces.log.add(result)


def _accepted(pieces: Pieces, agent: Agent[Any], value: Any, text: str) -> str:
    emit = pieces.state.emit
    if emit is not None:
        emit(OutputEvent(agent=agent.name, path=pieces.path(agent), output=value, partial=False))
    return text


def _failed(pieces: Pieces, agent: Agent[Any], spec: OutputSpec, raw: str, error: str) -> None:
    control = pieces.control
    control.output_failures += 1
    if control.output_failures > spec.retries:
        raise OutputValidationError(agent.name, spec.name, control.output_failures, raw, error)
