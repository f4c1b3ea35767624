"""Coordination patterns built from agents: swarm, tools that route a team, and Astromesh's
``plan_and_execute``, ``parallel_fan_out`` and ``pipeline`` (front-ends over the shapes of
:mod:`relayrace.teams.shapes`, their options in each one's ``shape``).

The three Astromesh patterns wrap one agent, the worker. Each plan step, subtask or stage is
a delegated child run of the worker (its own session, ``DelegationEvent``, span and usage
under the run's budget); a plan or a split is the worker's structured output, validated, so
a plan longer than the bound is told to the model to fix. The synthesis (plan, fan-out) is
the worker answering in the run's own session, with the results before it in a note.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..agents.agent import Agent
from ..agents.context import RunContext
from ..agents.delegation import ChildResult, bounded_history
from ..agents.handoffs import Handoff, InputFilter, TransferPolicy
from ..agents.output import json_schema_type
from ..agents.tools import Tool, parse_arguments
from ..core.exceptions import ModelBehaviorError, PatternStepFailed, UserError
from ..core.messages import Message, ToolCall
from .routing import TransferTo
from .shapes.driver import Composite, Driver
from .shapes.fanout import DEFAULT_ON_ERROR, FanOutOnError, fan_out
from .shapes.options import ChildPolicy, Shape, StepFailed
from .shapes.sequence import steps_as_children

if TYPE_CHECKING:
    from ..tracing import Span

__all__ = [
    "DEFAULT_STAGES",
    "ParallelFanOut",
    "Pipeline",
    "PlanAndExecute",
    "bounded_transcript",
    "route_tool",
    "swarm",
    "transfer_tool",
]

DEFAULT_STAGES = ("analyze", "process", "synthesize")
"""A pipeline's stages when none are named (Astromesh's)."""


def bounded_transcript(*, turns: int | None = None, chars: int | None = None) -> InputFilter:
    """An input filter keeping the last ``turns`` user turns and at most ``chars`` characters.

    It never splits a tool call from its result.
    """

    def _filter(messages: list[Message]) -> list[Message]:
        start = 0
        if turns is not None:
            users = [i for i, m in enumerate(messages) if m.role == "user"]
            if len(users) > turns:
                start = users[-turns]
        if chars is not None:
            total = sum(len(m.content) for m in messages[start:])
            while start < len(messages) - 1 and total > chars:
                total -= len(messages[start].content)
                start += 1
        while start > 0 and messages[start].role == "tool":
            start -= 1
        return messages[start:]

    return _filter


def swarm(
    name: str,
    agents: Sequence[Agent[Any] | Handoff],
    *,
    max_handoffs: int = 3,
    transcript_turns: int | None = None,
    transcript_chars: int | None = None,
    description: str = "",
) -> Agent[Any]:
    """A swarm: ``agents`` hand the conversation to one another as peers.

    The first agent starts; whoever is active when a run ends is remembered by the session and
    continues the next run. After ``max_handoffs`` in one run, handoff tools are hidden and
    further transfers are refused, so the active agent must answer. With ``transcript_turns``
    or ``transcript_chars`` the receiving agent sees only that much of the conversation.
    Members are cloned with a peer transfer policy; run the returned agent. A member given as
    a :func:`~relayrace.agents.handoffs.handoff` keeps its tool name, description, approval and
    input filter for the transfers to it.
    """
    if len(agents) < 2:
        raise UserError(f"swarm {name!r} needs at least two agents.")
    bounded = (bounded_transcript(turns=transcript_turns, chars=transcript_chars)
               if transcript_turns is not None or transcript_chars is not None else None)
    peers = TransferPolicy(to_peers=True)
    members = [
        replace(a, agent=a.agent.clone(transfer_policy=peers),
                input_filter=a.input_filter or bounded) if isinstance(a, Handoff)
        else Handoff(agent=a.clone(transfer_policy=peers), input_filter=bounded)
        for a in agents
    ]
    return Agent(name, instructions="", description=description, sub_agents=members,
                 pattern="swarm", max_handoffs=max_handoffs)


class RouteTool(Tool):
    """A tool that asks a team to route to ``target`` after the turn (see ``transfer_tool``)."""

    def __init__(self, target: str, *, name: str | None = None,
                 description: str | None = None) -> None:
        self.target = target
        self.routes_to = (target,)
        self.name = name or f"transfer_to_{target}"
        self.description = description or f"Hand the conversation to {target} after this turn."
        self.parameters = {"type": "object", "properties": {
            "reason": {"type": "string", "description": f"What {target} should do, and why."}}}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        reason = parse_arguments(arguments, self.name, '{"reason": "..."}').get("reason", "")
        return TransferTo(self.target, reason if isinstance(reason, str) else str(reason))


def transfer_tool(target: str, *, name: str | None = None,
                  description: str | None = None) -> Tool:
    """A tool named ``transfer_to_<target>`` returning ``TransferTo(target, reason)``: it hands
    the conversation to ``target`` after the turn (routing by tool, for a ``Team``), like the
    ``transfer_to_<agent>`` handoff tools; it is no delegation (nothing comes back)."""
    return RouteTool(target, name=name, description=description)


def route_tool(target: str, *, name: str | None = None, description: str | None = None) -> Tool:
    """Deprecated: use ``transfer_tool``. Kept for its tool name, ``delegate_<target>``, which
    scripts and prompts written for it call; ``transfer_tool`` offers ``transfer_to_<target>``."""
    warnings.warn("route_tool is deprecated; use transfer_tool (its tool is named "
                  f"transfer_to_{target}, not delegate_{target})", DeprecationWarning,
                  stacklevel=2)
    return RouteTool(target, name=name or f"delegate_{target}",
                     description=description or f"Hand the work to {target} after this turn.")


# -- Astromesh's plan_and_execute, parallel_fan_out and pipeline ------------------------------


def _list_of_texts(key: str, most: int, description: str) -> dict[str, Any]:
    """The JSON schema of ``{key: [1 to most non-empty strings]}``: what a plan or a split
    answers with."""
    return {"type": "object", "required": [key], "additionalProperties": False,
            "properties": {key: {"type": "array", "minItems": 1, "maxItems": most,
                                 "description": description,
                                 "items": {"type": "string", "minLength": 1}}}}


def _bound(owner: str, what: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise UserError(f"{owner}: {what} must be an integer of at least {low}, got {value!r}.")
    return value


class _Pattern(Composite):
    """A pattern over one ``worker`` agent, which is not a member of a tree: it runs only as
    delegated children and as the final speaker, so it may share the pattern's name."""

    label = ""
    children = ChildPolicy()
    """Its children answer (no reports), with their own limits; the run's budget bounds all."""

    def __init__(self, name: str | None, worker: Agent[Any], description: str) -> None:
        if not isinstance(worker, Agent) or worker.is_composite:
            raise UserError(f"{type(self).__name__} needs a plain agent as its worker, not "
                            f"{worker!r}.")
        if worker.output is not None:
            raise UserError(f"{type(self).__name__}: the worker {worker.name!r} has an "
                            "output_type; the pattern's answer is text.")
        # Agent.__init__, not Composite's: the worker is no sub-agent (see the class doc).
        Agent.__init__(self, name or worker.name, instructions="",
                       description=description or worker.description)
        self.worker = worker
        self._speaker = worker.clone(tools=(), sub_agents=(), specialists=(), meta_tools=None)

    def _splitter(self, schema: dict[str, Any]) -> Agent[Any]:
        """The worker, without tools, asked for ``schema``."""
        return self.worker.clone(tools=(), sub_agents=(), specialists=(), meta_tools=None,
                                 output_type=json_schema_type(schema))

    @staticmethod
    def _request(driver: Driver) -> tuple[str, list[Message]]:
        """The request the pattern answers (the latest user message) and what came before."""
        transcript = driver.transcript
        at = next((i for i in range(len(transcript) - 1, -1, -1)
                   if transcript[i].role == "user" and transcript[i].name is None), None)
        if at is None:
            return "", []
        return transcript[at].content, bounded_history(transcript[:at])

    async def _child(self, driver: Driver, span: Span, agent: Agent[Any], task: str, key: str,
                     history: Sequence[Message] = ()) -> ChildResult:
        ctx = driver.context_for(self, span=span)
        return await self.children.run(ctx, agent, task, history=history, key=key)

    async def _answer(self, driver: Driver, span: Span, note: str) -> tuple[str, Agent[Any], str]:
        """The worker's final answer in the run's session, with ``note`` before it."""
        driver.note(self, note)
        return await driver.drive(self._speaker, span, [])

    async def _listed(self, driver: Driver, span: Span, agent: Agent[Any], task: str, key: str,
                      history: Sequence[Message], field: str, invalid: str,
                      noted: str) -> list[str]:
        """Ask ``agent`` (a child) for a list in ``field``; note it in the run as ``noted``
        (its ``{}`` the count) with the items numbered. No valid list ends the run with
        ``invalid``, and the child's error."""
        found = await self._child(driver, span, agent, task, key, history)
        if not found.ok:
            raise ModelBehaviorError(f"{invalid}: {found.error}")
        items: list[str] = found.value[field]
        driver.note(self, f"[{self.label}: {noted.format(len(items))}]\n"
                    + "\n".join(f"{i}. {s}" for i, s in enumerate(items, 1)))
        return items

    def _start(self, driver: Driver, pending: list[ToolCall]) -> None:
        if pending:  # a crash cut the synthesis short: it is asked again
            driver.answer_dangling(self, f"the {self.label} was restarted")


def _results(results: Sequence[tuple[str, ChildResult]]) -> str:
    return "\n\n".join(f"{label}\n{r.output if r.ok else f'(failed: {r.error})'}"
                        for label, r in results)


class PlanAndExecute(_Pattern):
    """Astromesh's ``plan_and_execute``: the worker makes a plan of at most ``max_steps``
    steps (validated structured output: a longer plan is sent back to be fixed), runs each
    step as a delegated child that sees the results so far, then answers from the results.

    A failed step is reported as failed to the steps after it and to the synthesis.
    """

    label = "plan_and_execute"
    shape = Shape(kind="plan", sessions="child", on_error="continue", failure="in_answer",
                  reports=False)
    """Plan-then-execute: the steps a sequence over child sessions that goes on past a failed
    step (the later steps and the synthesis see it failed)."""

    def __init__(self, name: str | None = None, *, agent: Agent[Any], max_steps: int = 6,
                 description: str = "") -> None:
        super().__init__(name, agent, description)
        self.max_steps = _bound(f"PlanAndExecute {self.name!r}", "max_steps", max_steps)
        self._planner = self._splitter(_list_of_texts(
            "steps", self.max_steps, f"The plan: at most {self.max_steps} steps, in order."))

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        self._start(driver, pending)
        request, history = self._request(driver)
        steps = await self._listed(driver, span, self._planner, (
            f"Make a step-by-step plan of at most {self.max_steps} steps to answer this "
            f"request; do not carry it out yet.\n\nRequest: {request}"), "plan", history,
            "steps", f"plan_and_execute {self.name!r}: no valid plan of at most "
            f"{self.max_steps} steps", "a plan of {} steps")
        def labelled(results: Sequence[ChildResult]) -> list[tuple[str, ChildResult]]:
            return [(f"Step {i}: {s}", r) for i, (s, r) in enumerate(zip(steps, results,
                                                                          strict=False), 1)]

        async def step(k: int, done: list[ChildResult]) -> ChildResult:
            return await self._child(driver, span, self.worker, (
                f"Carry out step {k + 1} of {len(steps)} of a plan for the request "
                f"{json.dumps(request, ensure_ascii=False)}: {steps[k]}\n\nResults of the "
                f"earlier steps:\n{_results(labelled(done)) or 'none yet'}"), f"step{k + 1}")

        done = await steps_as_children(len(steps), step, on_error="continue")
        return await self._answer(driver, span, f"[{self.label}: the steps' results]\n"
                                  f"{_results(labelled(done))}\n\nAnswer the request from "
                                  "these results.")


class ParallelFanOut(_Pattern):
    """Astromesh's ``parallel_fan_out``: the worker splits the request into at most
    ``max_subtasks`` independent subtasks, which run at once as delegated children; then it
    answers from their results.

    ``on_error="collect"`` (the default, as for every fan-out) lets the subtasks finish and
    gives the failures to the synthesis with the results; ``"cancel"`` (Astromesh's
    behaviour, a config's default) cancels the other subtasks at the first failure and raises
    ``PatternStepFailed``.
    """

    label = "parallel_fan_out"

    def __init__(self, name: str | None = None, *, agent: Agent[Any], max_subtasks: int = 4,
                 on_error: FanOutOnError = DEFAULT_ON_ERROR, description: str = "") -> None:
        super().__init__(name, agent, description)
        self.max_subtasks = _bound(f"ParallelFanOut {self.name!r}", "max_subtasks",
                                   max_subtasks)
        if on_error not in ("cancel", "collect"):
            raise UserError(f"ParallelFanOut {self.name!r}: on_error must be 'cancel' or "
                            f"'collect', not {on_error!r}.")
        self.on_error: FanOutOnError = on_error
        self.shape = Shape(kind="fan_out", sessions="child", on_error=on_error,
                           failure="error" if on_error == "cancel" else "in_answer",
                           reports=False)
        """The fan-out shape over child sessions; the synthesis in the run's session."""
        self._splitter_agent = self._splitter(_list_of_texts(
            "subtasks", self.max_subtasks, f"At most {self.max_subtasks} independent subtasks."))

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        self._start(driver, pending)
        request, history = self._request(driver)
        subtasks = await self._listed(driver, span, self._splitter_agent, (
            f"Split this request into at most {self.max_subtasks} independent subtasks that "
            f"can be worked on at the same time.\n\nRequest: {request}"), "split", history,
            "subtasks", f"parallel_fan_out {self.name!r}: no valid split into at most "
            f"{self.max_subtasks} subtasks", "{} subtasks")
        runs = [self._child(driver, span, self.worker, task, f"subtask{i}")
                for i, task in enumerate(subtasks, 1)]
        try:
            results = await fan_out(runs, on_error=self.on_error)
        except StepFailed as failed:
            raise PatternStepFailed(self.name, f"subtask {failed.index + 1} of {len(subtasks)}",
                                    failed.result.error or "no answer") from None
        labelled = [(f"Subtask {i}: {t}", r) for i, (t, r) in enumerate(zip(subtasks, results,
                                                                          strict=True), 1)]
        return await self._answer(driver, span, f"[{self.label}: the subtasks' results]\n"
                                  f"{_results(labelled)}\n\nAnswer the request from these "
                                  "results.")


class Pipeline(_Pattern):
    """Astromesh's ``pipeline``: 2 to 6 named stages in order, each a delegated child run of
    the worker on the previous stage's output (the first on the request); the last stage's
    output is the answer. A failed stage raises ``PatternStepFailed``."""

    label = "pipeline"
    shape = Shape(kind="sequence", sessions="child", on_error="stop", failure="error",
                  reports=False)
    """The sequence shape over child sessions, each stage given the previous one's answer."""

    def __init__(self, name: str | None = None, *, agent: Agent[Any],
                 stages: Sequence[str] = DEFAULT_STAGES, description: str = "") -> None:
        super().__init__(name, agent, description)
        if isinstance(stages, str) or not 2 <= len(stages) <= 6 or not all(
                isinstance(s, str) and 1 <= len(s.strip()) <= 40 for s in stages):
            raise UserError(f"Pipeline {self.name!r}: stages must be 2 to 6 names of 1 to 40 "
                            f"characters, got {stages!r}.")
        if len(set(stages)) != len(stages):
            raise UserError(f"Pipeline {self.name!r}: stage names must differ, got {stages!r}.")
        self.stages = tuple(stages)

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        self._start(driver, pending)
        request, history = self._request(driver)
        last = " (the last stage: produce the final answer)"
        n = len(self.stages)

        async def stage(k: int, done: list[ChildResult]) -> ChildResult:
            if k:
                driver.note(self, f"[{self.label}: stage {k + 1} of {n}, {self.stages[k]}]")
            return await self._child(driver, span, self.worker, (
                f"Pipeline stage {k + 1} of {n}, '{self.stages[k]}': process this input and "
                f"produce the input of the next stage{'' if k + 1 < n else last}."
                f"\n\nInput: {done[-1].output if done else request}"), f"stage{k + 1}",
                history if k == 0 else ())

        try:
            current = (await steps_as_children(n, stage, on_error="stop"))[-1].output
        except StepFailed as failed:
            raise PatternStepFailed(self.name, f"stage {self.stages[failed.index]!r} "
                                    f"({failed.index + 1} of {n})",
                                    failed.result.error or "no answer") from None
        driver.say(self._speaker, current)
        return current, self._speaker, ""
