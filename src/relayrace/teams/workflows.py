"""Workflow agents: `SequentialAgent`, `ParallelAgent` and `LoopAgent`.

They compose any agents (plain, supervisor, swarm, teams, other workflows) and are agents
themselves, so they run with ``Runner.run``, work as tools (``as_tool``) and nest. Steps run in
the same session, one after another; parallel branches run as delegated children on the latest
request, and their answers come back as one message.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..agents.agent import Agent
from ..agents.delegation import ChildResult, bounded_history, run_child, run_children
from ..core.exceptions import PatternStepFailed, UserError
from ..core.messages import NOTE, Message, ToolCall
from ..core.templates import Condition, render_instructions
from .routing import Finish, TransferTo

if TYPE_CHECKING:
    from ..agents.context import RunContext
    from ..agents.guardrails import Guardrail
    from ..tracing import Span

__all__ = ["Chain", "ChainLink", "Composite", "Driver", "LoopAgent", "ParallelAgent",
           "SequentialAgent", "SpeakerTurn"]


@dataclass(slots=True, frozen=True)
class SpeakerTurn:
    """How one team member's turn ended (``Driver.speak``)."""

    final: str
    """Its last text."""
    last: Agent[Any]
    """The agent that gave it (a transfer may have moved on from the member)."""
    signal: TransferTo | Finish | None
    """A tool's typed routing request, if one was made."""
    called: frozenset[str]
    """The tools called during the turn, for routing rules."""


class Driver(Protocol):
    """What workflow agents and teams ask of the engine while they run their members.

    The engine implements it; a composite agent changes run state only through it.
    """

    @property
    def transcript(self) -> Sequence[Message]:
        """The session's conversation so far."""
        ...

    @property
    def resuming(self) -> bool:
        """Whether the run continues an interrupted one (``input=None``)."""
        ...

    @property
    def stopped(self) -> bool:
        """Whether the run must end now (a ``Finish``, or a guardrail's block)."""
        ...

    @property
    def blocked(self) -> str | None:
        """A guardrail's answer that ended the run, if one did."""
        ...

    @property
    def context(self) -> Any:
        """The run's context object."""
        ...

    def path(self, agent: Agent[Any]) -> str:
        """The delegation path of ``agent`` in this run."""
        ...

    async def drive(self, agent: Agent[Any], span: Span,
                    pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        """Run ``agent`` (or a workflow) to a final answer: (text, last agent, reason)."""
        ...

    async def speak(self, agent: Agent[Any], span: Span,
                    pending: list[ToolCall]) -> SpeakerTurn:
        """Run one team member's turn; a typed ``TransferTo`` ends it for the team to route."""
        ...

    def note(self, agent: Agent[Any], text: str) -> None:
        """Add a framework note to the conversation."""
        ...

    def say(self, agent: Agent[Any], text: str) -> None:
        """Add ``agent``'s answer to the conversation."""
        ...

    def route(self, speaker: Agent[Any], to: Agent[Any], why: str) -> None:
        """Record that a team passes the conversation from ``speaker`` to ``to``."""
        ...

    def finish(self) -> None:
        """End the run after this member (a tool returned ``Finish``)."""
        ...

    def loop_scope(self) -> AbstractContextManager[None]:
        """While a ``LoopAgent`` runs: a step's ``Finish(scope="loop")`` ends it, only it."""
        ...

    @property
    def leaving_loop(self) -> bool:
        """Whether a step left the innermost loop (``Finish(scope="loop")``)."""
        ...

    def team_scope(self, input_guardrails: tuple[Guardrail, ...],
                   output_guardrails: tuple[Guardrail, ...]) -> AbstractContextManager[None]:
        """Apply a team's guardrails to every member while the team runs."""
        ...

    def take_start_member(self) -> Agent[Any] | None:
        """The member ``start_agent`` named for this team's run, once."""
        ...

    def answer_dangling(self, agent: Agent[Any], why: str) -> None:
        """Give every unanswered tool call a result, so the session stays valid."""
        ...

    def context_for(self, agent: Agent[Any], *, span: Span | None = None) -> RunContext[Any]:
        """A run context for ``agent``."""
        ...


class Composite(Agent[Any], ABC):
    """An agent made of other agents; it calls no model itself."""

    is_composite = True
    handoff_target = False
    ends_turn = False
    """As a handoff target: whether its answer ends the run (see ``SequentialAgent``)."""

    def __init__(self, name: str, *, members: Sequence[Agent[Any]], description: str = "",
                 max_turns: int | None = None) -> None:
        if not members:
            raise UserError(f"{type(self).__name__} {name!r} needs at least one agent.")
        super().__init__(name, instructions="", description=description, sub_agents=members,
                         max_turns=max_turns)

    @abstractmethod
    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        """Run to a final answer: (text, last agent, reason the run ended, or "")."""



def _resume_index(driver: Driver, steps: Sequence[Agent[Any]], label: str,
                  pending: list[ToolCall]) -> int:
    """Where a resumed workflow stopped: the step whose agent's calls await, or else the
    last step this workflow announced (a step waiting inside a delegated child)."""
    if pending:
        last = next((m for m in reversed(driver.transcript) if m.role == "assistant"), None)
        for i, step in enumerate(steps):
            if last is not None and last.name and any(a.name == last.name for a in step.walk()):
                return i
    marker = f"[{label}: step "
    for m in reversed(driver.transcript):
        if m.role == "user" and m.name == NOTE and m.content.startswith(marker):
            number = m.content[len(marker):].split(" ", 1)[0]
            return int(number) - 1 if number.isdigit() else 0
        if m.role == "user" and m.name != NOTE:
            break  # the workflow's current run started here
    return 0


async def _run_steps(driver: Driver, owner: Agent[Any], steps: Sequence[Agent[Any]],
                     span: Span, label: str,
                     pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
    final, last, reason = "", owner, ""
    first = _resume_index(driver, steps, label, pending) if driver.resuming else 0
    for i in range(first, len(steps)):
        step = steps[i]
        if i > first:
            driver.note(step, f"[{label}: step {i + 1} of {len(steps)}, {step.name} continues]")
        final, last, reason = await driver.drive(step, span, pending if i == first else [])
        if driver.stopped or driver.leaving_loop:
            # A Finish or a guardrail's block ends every enclosing workflow; leaving a loop
            # ends the workflows inside the loop.
            return final, last, reason
    return final, last, reason


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

    def __init__(self, name: str, *, steps: Sequence[Agent[Any]], description: str = "",
                 max_turns: int | None = None, ends_turn: bool = False) -> None:
        super().__init__(name, members=steps, description=description, max_turns=max_turns)
        self.ends_turn = ends_turn

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        return await _run_steps(driver, self, self.sub_agents, span, self.name, pending)


class ParallelAgent(Composite):
    """Runs ``branches`` at once on the latest request; their answers form one message.

    ``ends_turn``: as for ``SequentialAgent``.
    """

    handoff_target = True

    def __init__(self, name: str, *, branches: Sequence[Agent[Any]], description: str = "",
                 max_concurrency: int | None = None, ends_turn: bool = False) -> None:
        super().__init__(name, members=branches, description=description)
        self.max_concurrency = max_concurrency
        self.ends_turn = ends_turn

    async def run_composite(self, driver: Driver, span: Span,
                            pending: list[ToolCall]) -> tuple[str, Agent[Any], str]:
        if pending:  # branches restart: close the calls a crash left open
            driver.answer_dangling(self, "the parallel step was restarted")
        users = [m for m in driver.transcript if m.role == "user" and m.name is None]
        task = users[-1].content if users else ""
        history = bounded_history(driver.transcript[:-1]) if users else []
        ctx = driver.context_for(self, span=span)
        results = await run_children(
            [run_child(ctx, a, task, report=False, history=history) for a in self.sub_agents],
            self.max_concurrency)
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
        final, last = "", self.sub_agents[0]
        with driver.loop_scope():
            for i in range(self.max_iterations):
                if i:
                    driver.note(self, f"[{self.name}: iteration {i + 1} of "
                                      f"{self.max_iterations}]")
                final, last, reason = await _run_steps(driver, self, self.sub_agents, span,
                                                       self.name, pending if i == 0 else [])
                if driver.stopped or driver.leaving_loop:  # a step left the loop: go on after it
                    return final, last, reason
                if self.until is not None and self.until(final):
                    return final, last, "until"
        return final, last, "max_iterations"


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
    another (``mode="sequential"``) or at once (``"parallel"``). Each link's answer is added
    to the conversation as a note; the run's answer stays the agent's.

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
        runs = [self._run_link(ctx, i, variables) for i in matched]
        results = await run_children(runs) if self.link_mode == "parallel" else [
            await run for run in runs]
        for i, result in zip(matched, results, strict=True):
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
            result = await run_child(ctx, link.agent, task, report=False, timeout=link.timeout,
                                     key=f"link{i}.try{attempt}")
            if result.ok or attempt == link.attempts:
                return result
            await asyncio.sleep(delay)
            if link.backoff == "exponential":
                delay *= 2
        raise AssertionError("unreachable: the last attempt returns")


def _check_nesting(chain: Chain, path: list[str], max_depth: int) -> None:
    """Refuse a chain whose nested chains loop or go deeper than ``max_depth``."""
    if len(path) > max_depth:
        raise UserError(f"Chain {path[0]!r}: deeper than max_depth={max_depth} on the path "
                        f"{' -> '.join(path)}.")
    for link in chain.links:
        nested = link.agent
        if not isinstance(nested, Chain):
            continue
        if nested.name in path:
            raise UserError(f"Chain {path[0]!r}: a cycle on the path "
                            f"{' -> '.join([*path, nested.name])}.")
        _check_nesting(nested, [*path, nested.name], max_depth)
