"""Workflow agents: `SequentialAgent`, `ParallelAgent` and `LoopAgent` (ADK's names), and
`Chain` (Astromesh's ``spec.chain``): front-ends over the sequence, fan-out and loop shapes of
:mod:`relayrace.teams.shapes`, each choosing its options visibly in its ``shape`` attribute.

They compose any agents (plain, supervisor, swarm, teams, other workflows) and are agents
themselves, so they run with ``Runner.run``, work as tools (``as_tool``) and nest. Steps run in
the same session, one after another; parallel branches run as delegated children on the latest
request, and their answers come back as one message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..agents.agent import Agent
from ..agents.delegation import ChildResult, bounded_history
from ..core.exceptions import PatternStepFailed, UserError
from ..core.messages import ToolCall
from ..core.templates import Condition, render_instructions
from .shapes.driver import Composite, Driver, SpeakerTurn
from .shapes.fanout import DEFAULT_ON_ERROR, FanOutOnError, fan_out
from .shapes.loop import run_loop
from .shapes.options import ChildPolicy, Shape, StepFailed
from .shapes.sequence import steps_as_children, steps_in_session

if TYPE_CHECKING:
    from ..agents.context import RunContext
    from ..tracing import Span

__all__ = ["Chain", "ChainLink", "Composite", "Driver", "LoopAgent", "ParallelAgent",
           "SequentialAgent", "SpeakerTurn"]


class SequentialAgent(Composite):
    """Runs ``steps`` one after another in the same session; the last answer is the output.

    As a handoff target, control returns to the agent that transferred once the steps are
    done. By default that agent goes on in the same run and answers (it sees what the steps
    wrote). ``ends_turn=True`` (ADK's behaviour) ends the run with the last step's answer
    instead, one model call less; the agent that transferred answers the next user turn. A
    workflow that ended with no answer in text (a loop left through a tool) lets that agent
    answer either way.
    """

    handoff_target = True
    shape = Shape(kind="sequence", sessions="shared", on_error="stop", failure="error",
                  reports=False)
    """The sequence shape in the run's own session: a step's error ends the run."""

    def __init__(self, name: str, *, steps: Sequence[Agent[Any]], description: str = "",
                 max_turns: int | None = None, ends_turn: bool = False) -> None:
        super().__init__(name, members=steps, description=description, max_turns=max_turns)
        self.ends_turn = ends_turn

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        return await steps_in_session(driver, self, self.sub_agents, span, self.name, pending)


class ParallelAgent(Composite):
    """Runs ``branches`` at once on the latest request, each as a delegated child that sees
    the conversation before it; their answers form one message.

    ``on_error="collect"`` (the default) lets every branch finish, a failed one named as
    failed in the message; ``"cancel"`` cancels the other branches at the first failure and
    raises ``PatternStepFailed``. ``ends_turn``: as for ``SequentialAgent``.
    """

    handoff_target = True

    def __init__(self, name: str, *, branches: Sequence[Agent[Any]], description: str = "",
                 max_concurrency: int | None = None, ends_turn: bool = False,
                 on_error: FanOutOnError = DEFAULT_ON_ERROR) -> None:
        if on_error not in ("cancel", "collect"):
            raise UserError(f"ParallelAgent {name!r}: on_error must be 'cancel' or 'collect', "
                            f"not {on_error!r}.")
        super().__init__(name, members=branches, description=description)
        self.max_concurrency = max_concurrency
        self.ends_turn = ends_turn
        self.on_error: FanOutOnError = on_error
        self.shape = Shape(kind="fan_out", sessions="child", on_error=on_error,
                           failure="in_answer" if on_error == "collect" else "error",
                           reports=False)
        """The fan-out shape over child sessions, answers rather than reports."""

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        if pending:  # branches restart: close the calls a crash left open
            driver.answer_dangling(self, "the parallel step was restarted")
        users = [m for m in driver.transcript if m.role == "user" and m.name is None]
        task = users[-1].content if users else ""
        history = bounded_history(driver.transcript[:-1]) if users else []
        ctx = driver.context_for(self, span=span)
        children = ChildPolicy(max_concurrency=self.max_concurrency)
        try:
            results = await fan_out([children.run(ctx, a, task, history=history)
                                     for a in self.sub_agents], on_error=self.on_error,
                                    limit=self.max_concurrency)
        except StepFailed as failed:
            raise PatternStepFailed(self.name, f"branch {failed.result.agent!r}",
                                    failed.result.error or "no answer") from None
        text = "\n\n".join(f"### {r.agent}\n{r.render()}" for r in results)
        driver.say(self, text)
        return text, self, ""


class LoopAgent(Composite):
    """Repeats ``steps`` until ``until`` holds for the latest answer, or ``max_iterations``.

    ``until`` is a function of the answer, or a string the answer must contain. A step's
    tool returning ``Finish(scope="loop")`` leaves the loop; control goes on after it.
    ``ends_turn``: as for ``SequentialAgent``.
    """

    handoff_target = True
    shape = Shape(kind="loop", sessions="shared", on_error="stop", failure="error",
                  reports=False)
    """The loop shape: a sequence in the run's own session, repeated."""

    def __init__(self, name: str, *, steps: Sequence[Agent[Any]], max_iterations: int,
                 until: str | Callable[[str], bool] | None = None, description: str = "",
                 max_turns: int | None = None, ends_turn: bool = False) -> None:
        if max_iterations < 1:
            raise UserError(f"LoopAgent {name!r}: max_iterations must be at least 1.")
        if until is not None and not isinstance(until, str) and not callable(until):
            raise UserError(f"LoopAgent {name!r}: until must be a string the answer contains, "
                            f"or a function of the answer; got {until!r}.")
        super().__init__(name, members=steps, description=description, max_turns=max_turns)
        self.max_iterations = max_iterations
        self.ends_turn = ends_turn
        self.until: Callable[[str], bool] | None = (
            (lambda out, marker=until: marker in out) if isinstance(until, str) else until)

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        return await run_loop(driver, self, self.sub_agents, span, pending,
                              max_iterations=self.max_iterations, until=self.until)


# -- chains (Astromesh's spec.chain) ----------------------------------------------------------

DEFAULT_LINK_INPUT = "{{ output.answer }}"


@dataclass(slots=True, kw_only=True, frozen=True)
class ChainLink:
    """One agent a ``Chain`` triggers once its agent has answered.

    ``when`` is a condition over ``output`` (``output.answer``, the answer's text;
    ``output.data``, its structured output when the agent has an ``output_type``), e.g.
    ``"output.data.score > 7"`` (``{{ }}`` around it optional); a ``default`` link runs when
    no link with a ``when`` ran. ``input`` is the Jinja template of the link's task. The link
    runs as a delegated child, tried ``attempts`` times (waiting ``retry_delay`` seconds,
    doubled each time with ``backoff="exponential"``), each try bounded by ``timeout``. When
    every try fails, ``on_error="fail"`` ends the run with ``PatternStepFailed``;
    ``"continue"`` notes the failure and goes on. A link's agent may be a ``Chain`` itself.
    """

    agent: Agent[Any]
    when: str | None = None
    input: str = DEFAULT_LINK_INPUT
    default: bool = False
    attempts: int = 1
    retry_delay: float = 1.0
    backoff: Literal["fixed", "exponential"] = "fixed"
    timeout: float | None = None
    on_error: Literal["fail", "continue"] = "fail"


class Chain(Composite):
    """Astromesh's ``spec.chain``: ``agent`` answers in the run's session, then the ``links``
    whose conditions hold run as delegated children on inputs made from its output, one after
    another (``mode="sequential"``: the sequence shape) or at once (``"parallel"``: the fan-out
    shape, collecting). Each link's answer is added to the conversation as a note; the run's
    answer stays the agent's. A failed link with ``on_error="fail"`` ends the run with
    ``PatternStepFailed``; in sequence, the links after it do not run.

    Nested chains are bounded by ``max_depth`` (the chains on any path, this one included)
    and may not loop; both are checked here, when the chain is built.
    """

    def __init__(self, name: str | None = None, *, agent: Agent[Any],
                 links: Sequence[ChainLink], mode: Literal["sequential", "parallel"] = "sequential",
                 max_depth: int = 5, description: str = "") -> None:
        label = f"Chain {name or getattr(agent, 'name', '')!r}"
        if not isinstance(agent, Agent):
            raise UserError(f"{label}: agent must be an Agent, not {agent!r}.")
        if mode not in ("sequential", "parallel"):
            raise UserError(f"{label}: mode must be 'sequential' or 'parallel', not {mode!r}.")
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
            raise UserError(f"{label}: max_depth must be an integer of at least 1.")
        if not links:
            raise UserError(f"{label} needs at least one link.")
        if sum(link.default for link in links) > 1:
            raise UserError(f"{label} has more than one default link.")
        self._conditions: dict[int, Condition] = {}
        for i, link in enumerate(links):
            where = f"{label}, link {i} ({getattr(link.agent, 'name', link.agent)!r})"
            if not isinstance(link, ChainLink) or not isinstance(link.agent, Agent):
                raise UserError(f"{label}: links must be ChainLink(agent=...), not {link!r}.")
            if link.default and link.when is not None:
                raise UserError(f"{where}: a default link runs when no 'when' held; it cannot "
                                "have a 'when' of its own.")
            if link.attempts < 1 or link.retry_delay < 0:
                raise UserError(f"{where}: attempts must be at least 1 and retry_delay >= 0.")
            if link.on_error not in ("fail", "continue") or link.backoff not in (
                    "fixed", "exponential"):
                raise UserError(f"{where}: on_error is 'fail' or 'continue'; backoff is "
                                "'fixed' or 'exponential'.")
            if link.when is not None:
                self._conditions[i] = Condition(link.when)
        # Agent.__init__, not Composite's: the agent and the links are no sub-agents.
        Agent.__init__(self, name or agent.name, instructions="",
                       description=description or agent.description)
        self.agent = agent
        self.links = tuple(links)
        self.link_mode: Literal["sequential", "parallel"] = mode
        """How the links run: one after another, or at once."""
        self.max_depth = max_depth
        self.shape = Shape(kind="sequence" if mode == "sequential" else "fan_out",
                           sessions="child", on_error="per_step", failure="error",
                           reports=False)
        """The links: a sequence (``"stop"`` at a failed ``on_error="fail"`` link) or a
        fan-out that collects, over child sessions; then a failed ``"fail"`` link ends the
        run with ``PatternStepFailed``."""
        _check_nesting(self, [self.name], max_depth)

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        final, last, reason = await driver.drive(self.agent, span, pending)
        if driver.stopped:
            return final, last, reason
        data = json.loads(final) if last.output is not None else None
        variables = {"output": {"answer": final, "data": data}}
        matched = [i for i, link in enumerate(self.links) if not link.default
                   and (link.when is None or self._conditions[i].holds(variables))]
        default = next((i for i, link in enumerate(self.links) if link.default), None)
        if default is not None and not any(self.links[i].when is not None for i in matched):
            matched.append(default)
        ctx = driver.context_for(self, span=span)
        if self.link_mode == "parallel":
            results = await fan_out([self._run_link(ctx, i, variables) for i in matched],
                                    on_error="collect")
        else:
            try:
                results = await steps_as_children(
                    len(matched), lambda k, _done: self._run_link(ctx, matched[k], variables),
                    on_error=["stop" if self.links[i].on_error == "fail" else "continue"
                              for i in matched])
            except StepFailed as failed:  # the links after it do not run
                results = [*failed.done, failed.result]
        for i, result in zip(matched, results, strict=False):  # a stopped sequence ran fewer
            link = self.links[i]
            if result.ok:
                driver.note(self, f"[chain {self.name}: {link.agent.name} answered]\n"
                                  f"{result.output}")
            elif link.on_error == "continue":
                driver.note(self, f"[chain {self.name}: {link.agent.name} failed and the chain "
                                  f"went on: {result.error}]")
            else:
                raise PatternStepFailed(self.name, f"link {link.agent.name!r}",
                                        result.error or "no answer")
        return final, last, reason

    async def _run_link(self, ctx: RunContext[Any], i: int,
                        variables: dict[str, Any]) -> ChildResult:
        link = self.links[i]
        task = render_instructions(link.input, variables)
        delay = link.retry_delay
        for attempt in range(1, link.attempts + 1):
            result = await ChildPolicy(timeout=link.timeout).run(ctx, link.agent, task,
                                                               key=f"link{i}.try{attempt}")
            if result.ok or attempt == link.attempts:
                return result
            await asyncio.sleep(delay)
            if link.backoff == "exponential":
                delay *= 2
        raise AssertionError("unreachable: the last attempt returns")


def _check_nesting(chain: Chain, path: list[str], max_depth: int) -> None:
    """Refuse a chain whose nested chains loop or go deeper than ``max_depth`` (depth first,
    with a stack of its own rather than recursion)."""
    stack: list[tuple[Chain, list[str]]] = [(chain, path[:-1])]
    while stack:
        current, above = stack.pop()
        if current.name in above:
            raise UserError(f"Chain {path[0]!r}: a cycle on the path "
                            f"{' -> '.join([*above, current.name])}.")
        here = [*above, current.name]
        if len(here) > max_depth:
            raise UserError(f"Chain {path[0]!r}: deeper than max_depth={max_depth} on the "
                            f"path {' -> '.join(here)}.")
        stack.extend((link.agent, here) for link in reversed(current.links)
                     if isinstance(link.agent, Chain))
