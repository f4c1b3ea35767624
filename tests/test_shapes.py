"""One suite across the front-ends of each orchestration shape (docs/orchestration.md).

Each front-end (a workflow agent, an Astromesh pattern, a chain, a meta-tool the model calls,
the same in YAML) declares the options it chose in its ``shape``. For every front-end the same
scripted steps ``s1``, ``s2``, ``s3`` check that the behaviours follow those options: a failed
step stops, continues, cancels or is collected; steps run in the run's session or in child
sessions; children report or answer; the run's budget bounds every child; a child's approval
surfaces on the outer run and resumes there.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from relayrace import (
    Agent,
    DelegationEvent,
    MessageEvent,
    RelayraceError,
    Runner,
    Tool,
    ToolResultEvent,
    UsageLimits,
    tool,
)
from relayrace.config import load_team
from relayrace.sessions import MemorySession
from relayrace.teams.patterns import ParallelFanOut, Pipeline, PlanAndExecute
from relayrace.teams.routing import AgentTarget, FromSpeaker, Rule, TerminateTarget
from relayrace.teams.shapes import Shape
from relayrace.teams.team import Team
from relayrace.teams.workflows import (
    Chain,
    ChainLink,
    LoopAgent,
    ParallelAgent,
    SequentialAgent,
)
from relayrace.testing import FunctionModel, final_output, text, tool_call

EXECUTED: list[str] = []


@tool(requires_approval=True)
def wire(to: str) -> str:
    """Wire money (a person approves each call)."""
    EXECUTED.append(to)
    return f"wired to {to}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    EXECUTED.clear()


MARK = re.compile(r"\bs[1-3]\b")
STEPS = ("s1", "s2", "s3")
BRANCHES = ("s1", "s2")


@dataclass
class Script:
    """Every agent's model: steps answer ``SUMMARY: <step> ok``; the rest is configured."""

    lead_call: tuple[str, dict[str, Any]] | None = None
    fail: str | None = None
    approve: str | None = None
    waits: dict[str, asyncio.Event] = field(default_factory=dict)
    failed: asyncio.Event = field(default_factory=asyncio.Event)
    requests: int = 0
    steps_seen: list[str] = field(default_factory=list)
    offered: dict[str, set[str]] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)

    async def __call__(self, request: Any) -> Any:
        self.requests += 1
        messages = request.messages
        answered = any(m.role == "tool" for m in messages)
        if request.agent == "lead":
            assert self.lead_call is not None
            return text("lead done") if answered else tool_call(*self.lead_call, id="call_lead")
        users = [m.content for m in messages if m.role == "user"]
        task = users[-1] if users else ""
        if "Split this request" in task:
            return final_output({"subtasks": [f"do {b}" for b in BRANCHES]})
        if "Make a step-by-step plan" in task:
            return final_output({"steps": [f"do {s}" for s in STEPS]})
        if "Answer the request from these results" in task or request.agent == "root":
            return text(f"{request.agent} done")
        found = MARK.search(task)
        step = request.agent if MARK.fullmatch(request.agent) else found.group() if found else ""
        assert step, f"no step in {request.agent}: {task[:80]!r}"
        self.steps_seen.append(step)
        self.offered[step] = {getattr(t, "name", t) for t in request.tools}
        if step in self.waits:
            try:
                await self.waits[step].wait()
            except asyncio.CancelledError:
                self.cancelled.append(step)
                raise
        if step == self.fail:
            self.failed.set()
            raise RuntimeError(f"{step} broke")
        if step == self.approve and not answered:
            return tool_call("wire", {"to": "bob"}, id="call_wire")
        return text(f"SUMMARY: {step} ok")


@dataclass(frozen=True)
class Frontend:
    """A front-end: how to build it over the scripted steps, and its shape's kind."""

    id: str
    build: Callable[[FunctionModel, Sequence[Tool], Path], Agent]
    lead_call: tuple[str, dict[str, Any]] | None = None
    per_step: str = ""
    """The on_error its steps chose, where the shape says ``per_step`` (a chain's links)."""

    def shape(self, built: Agent) -> Shape:
        if self.lead_call is None:
            found: Shape = built.shape  # type: ignore[attr-defined]
            return found
        [meta] = [t for t in built.tools if t.name == self.lead_call[0]]
        return meta.shape  # type: ignore[attr-defined, no-any-return]

    def steps(self, built: Agent) -> tuple[str, ...]:
        return BRANCHES if self.shape(built).kind in ("fan_out", "debate") else STEPS


def _agents(model: FunctionModel, tools: Sequence[Tool], names: Sequence[str]) -> list[Agent]:
    return [Agent(n, instructions="Help.", model=model, tools=list(tools)) for n in names]


def _worker(model: FunctionModel, tools: Sequence[Tool]) -> Agent:
    return Agent("w", instructions="Help.", model=model, tools=list(tools))


def _lead(meta: str) -> Callable[[FunctionModel, Sequence[Tool], Path], Agent]:
    names = STEPS if meta == "pipeline" else BRANCHES

    def build(model: FunctionModel, tools: Sequence[Tool], _: Path) -> Agent:
        return Agent("lead", instructions="Lead.", model=model, meta_tools=(meta,),  # type: ignore[arg-type]
                     specialists=_agents(model, tools, names))
    return build


def _yaml(docs: Callable[[str], dict[str, str]], entry: str
          ) -> Callable[[FunctionModel, Sequence[Tool], Path], Agent]:
    def build(model: FunctionModel, tools: Sequence[Tool], folder: Path) -> Agent:
        extra = "  tools: [{type: python, function: 'test_shapes:wire'}]\n" if tools else ""
        for name, body in docs(extra).items():
            (folder / f"{name}.yaml").write_text(body)
        return load_team(folder, model=model)[entry]
    return build


def _agent_doc(name: str, extra: str, spec: str = "") -> str:
    return (f"apiVersion: astromesh/v1\nkind: Agent\nmetadata: {{name: {name}}}\nspec:\n"
            f"  prompts: {{system: Help.}}\n{extra}{spec}")


def _workflow_docs(kind: str, names: Sequence[str], more: str = ""
                   ) -> Callable[[str], dict[str, str]]:
    def docs(extra: str) -> dict[str, str]:
        found = {n: _agent_doc(n, extra) for n in names}
        found["flow"] = ("apiVersion: relayrace/v1\nkind: Workflow\nmetadata: {name: flow}\n"
                         f"spec:\n  type: {kind}\n  steps: [{', '.join(names)}]\n{more}")
        return found
    return docs


def _pattern_docs(orchestration: str) -> Callable[[str], dict[str, str]]:
    return lambda extra: {"w": _agent_doc("w", extra, f"  orchestration: {orchestration}\n")}


def _chain_docs(mode: str, names: Sequence[str], on_error: str
                ) -> Callable[[str], dict[str, str]]:
    def docs(extra: str) -> dict[str, str]:
        links = "".join(f"      - {{agent: {n}, on_error: {on_error}}}\n" for n in names)
        found = {n: _agent_doc(n, extra) for n in names}
        found["root"] = _agent_doc("root", "", f"  chain:\n    mode: {mode}\n"
                                              f"    on_complete:\n{links}")
        return found
    return docs


def _chain(mode: str, names: Sequence[str], on_error: str
           ) -> Callable[[FunctionModel, Sequence[Tool], Path], Agent]:
    return lambda model, tools, _: Chain(
        agent=Agent("root", instructions="Help.", model=model), mode=mode,  # type: ignore[arg-type]
        links=[ChainLink(agent=a, on_error=on_error)  # type: ignore[arg-type]
               for a in _agents(model, tools, names)])


def _team(model: FunctionModel, tools: Sequence[Tool], _: Path) -> Agent:
    return Team("team", agents=_agents(model, tools, STEPS), rules=[
        Rule(FromSpeaker("s1"), AgentTarget("s2")), Rule(FromSpeaker("s2"), AgentTarget("s3")),
        Rule(FromSpeaker("s3"), TerminateTarget("done"))])


FRONTENDS = [
    # the sequence shape
    Frontend("SequentialAgent", lambda m, t, _: SequentialAgent(
        "flow", steps=_agents(m, t, STEPS))),
    Frontend("yaml-workflow-sequential", _yaml(_workflow_docs("sequential", STEPS), "flow")),
    Frontend("Pipeline", lambda m, t, _: Pipeline(agent=_worker(m, t), stages=STEPS)),
    Frontend("yaml-pattern-pipeline", _yaml(_pattern_docs("{pattern: pipeline, stages: "
                                                          "[s1, s2, s3]}"), "w")),
    Frontend("agent_pipeline", _lead("pipeline"), lead_call=("agent_pipeline", {"stages": [
        {"type": s, "task": f"work on {s}"} for s in STEPS]})),
    Frontend("Chain-sequential", _chain("sequential", STEPS, "fail"), per_step="stop"),
    Frontend("yaml-chain-sequential", _yaml(_chain_docs("sequential", STEPS, "fail"), "root"),
             per_step="stop"),
    # the fan-out shape
    Frontend("ParallelAgent", lambda m, t, _: ParallelAgent(
        "flow", branches=_agents(m, t, BRANCHES))),
    Frontend("ParallelAgent-cancel", lambda m, t, _: ParallelAgent(
        "flow", branches=_agents(m, t, BRANCHES), on_error="cancel")),
    Frontend("yaml-workflow-parallel", _yaml(_workflow_docs("parallel", BRANCHES), "flow")),
    Frontend("yaml-workflow-parallel-cancel", _yaml(_workflow_docs(
        "parallel", BRANCHES, "  on_error: cancel\n"), "flow")),
    Frontend("ParallelFanOut-cancel", lambda m, t, _: ParallelFanOut(
        agent=_worker(m, t), on_error="cancel")),
    Frontend("ParallelFanOut", lambda m, t, _: ParallelFanOut(agent=_worker(m, t))),
    Frontend("yaml-pattern-parallel_fan_out",
             _yaml(_pattern_docs("{pattern: parallel_fan_out}"), "w")),
    Frontend("war_room", _lead("parallel"), lead_call=("war_room", {"agents": [
        {"type": b, "task": f"work on {b}"} for b in BRANCHES]})),
    Frontend("Chain-parallel", _chain("parallel", BRANCHES, "continue"), per_step="collect"),
    Frontend("yaml-chain-parallel", _yaml(_chain_docs("parallel", BRANCHES, "continue"),
                                          "root"), per_step="collect"),
    # the loop, plan, debate and routing shapes
    Frontend("LoopAgent", lambda m, t, _: LoopAgent(
        "flow", steps=_agents(m, t, STEPS), max_iterations=1)),
    Frontend("yaml-workflow-loop", _yaml(_workflow_docs("loop", STEPS, "  max_iterations: 1\n"),
                                         "flow")),
    Frontend("PlanAndExecute", lambda m, t, _: PlanAndExecute(agent=_worker(m, t))),
    Frontend("yaml-pattern-plan_and_execute",
             _yaml(_pattern_docs("{pattern: plan_and_execute}"), "w")),
    Frontend("debate_ensemble", _lead("debate"), lead_call=("debate_ensemble", {
        "question": "q", "participants": list(BRANCHES), "rounds": 1})),
    Frontend("Team", _team),
]


def _run(frontend: Frontend, tmp_path: Path, script: Script,
         tools: Sequence[Tool] = ()) -> tuple[Agent, Shape, FunctionModel]:
    script.lead_call = frontend.lead_call
    model = FunctionModel(script)
    built = frontend.build(model, tools, tmp_path)
    return built, frontend.shape(built), model


def _on_error(frontend: Frontend, shape: Shape) -> str:
    return frontend.per_step if shape.on_error == "per_step" else shape.on_error


def _said(session: MemorySession) -> str:
    """Everything the run's own session holds as text, delegation errors included."""
    parts = [e.message.content for e in session.events
             if isinstance(e, MessageEvent | ToolResultEvent)]
    parts += [e.error or "" for e in session.events if isinstance(e, DelegationEvent)]
    return "\n".join(parts)


ids = [f.id for f in FRONTENDS]


@pytest.mark.parametrize("frontend", FRONTENDS, ids=ids)
async def test_a_failed_step_is_handled_as_the_shape_says(frontend: Frontend,
                                                          tmp_path: Path) -> None:
    script = Script(fail="s2")
    built, shape, _ = _run(frontend, tmp_path, script)
    on_error = _on_error(frontend, shape)
    if on_error == "cancel":
        script.waits["s1"] = asyncio.Event()  # never set: only a cancellation ends it
    elif on_error == "collect":
        script.waits["s1"] = script.failed  # s1 answers once s2 has failed
    session = MemorySession()
    error: BaseException | None = None
    try:
        await asyncio.wait_for(Runner.run(built, "go", session=session), 20)
    except Exception as exc:  # a step's own error in the run's session; else a RelayraceError
        error = exc
    said = _said(session) + (str(error) if error else "")
    assert "s2 broke" in said
    if on_error in ("stop", "cancel") and shape.failure == "error":
        assert error is not None and "s2 broke" in str(error)
    else:
        assert error is None, error
    if on_error == "stop":
        assert "s3" not in script.steps_seen  # the sequence ended at s2
        if shape.failure == "tool_result":
            assert "stopped at stage 2" in said  # the model is told, and can correct
    if on_error == "continue":
        assert "s3" in script.steps_seen  # the failure was passed on
    if on_error == "cancel":
        assert script.cancelled == ["s1"]  # the other branch was cancelled
    if on_error == "collect":
        assert "s1 ok" in said and script.cancelled == []  # the other branch finished


@pytest.mark.parametrize("frontend", FRONTENDS, ids=ids)
async def test_steps_run_in_the_sessions_the_shape_says(frontend: Frontend,
                                                        tmp_path: Path) -> None:
    script = Script()
    built, shape, _ = _run(frontend, tmp_path, script)
    session = MemorySession()
    await Runner.run(built, "go", session=session)
    steps = frontend.steps(built)
    assert sorted(set(script.steps_seen)) == list(steps)
    spoke = {e.message.name for e in session.events if isinstance(e, MessageEvent)
             and e.message.role == "assistant"}
    children = [e for e in session.events if isinstance(e, DelegationEvent)]
    if shape.sessions == "child":
        assert len(children) >= len(steps) and all(c.ok for c in children)
        assert len({c.child_session_id for c in children}) == len(children)
        assert not spoke & set(steps)  # no step wrote to the run's own session
    else:
        assert children == []
        assert spoke >= set(steps)  # each step answered in the run's own session


@pytest.mark.parametrize("frontend", FRONTENDS, ids=ids)
async def test_children_report_when_the_shape_says(frontend: Frontend, tmp_path: Path) -> None:
    script = Script()
    built, shape, _ = _run(frontend, tmp_path, script)
    await Runner.run(built, "go")
    for step in frontend.steps(built):
        assert ("submit_report" in script.offered[step]) == shape.reports, step


@pytest.mark.parametrize("frontend", FRONTENDS, ids=ids)
async def test_the_runs_budget_bounds_every_child(frontend: Frontend, tmp_path: Path) -> None:
    first = Script()
    built, _, _ = _run(frontend, tmp_path, first)
    await Runner.run(built, "go")
    needed = first.requests
    bounded = Script()
    (tmp_path / "bounded").mkdir()
    built, _, _ = _run(frontend, tmp_path / "bounded", bounded)
    session = MemorySession()
    error: BaseException | None = None
    try:
        await Runner.run(built, "go", session=session,
                         usage_limits=UsageLimits(max_requests=needed - 1))
    except RelayraceError as exc:
        error = exc
    assert bounded.requests <= needed - 1
    assert "max_requests" in _said(session) + (str(error) if error else "")


@pytest.mark.parametrize("frontend", FRONTENDS, ids=ids)
async def test_a_childs_approval_surfaces_and_resumes(frontend: Frontend,
                                                      tmp_path: Path) -> None:
    script = Script(approve="s2")
    built, _, _ = _run(frontend, tmp_path, script, tools=[wire])
    session = MemorySession()
    first = await Runner.run(built, "go", session=session)
    assert first.pending is not None
    [asked] = first.pending.approvals
    assert asked.tool_name == "wire" and asked.call_id == "call_wire"
    assert EXECUTED == []
    done = await Runner.resume(first.pending, approvals={"call_wire": True})
    assert done.pending is None
    assert EXECUTED == ["bob"]  # once, in the step that asked
    assert script.steps_seen.count("s1") == 1  # no finished step ran again


def test_every_front_end_states_its_shape() -> None:
    """The documented table of docs/orchestration.md, as values."""
    table = {
        SequentialAgent: ("sequence", "shared", "stop", "error", False),
        Pipeline: ("sequence", "child", "stop", "error", False),
        LoopAgent: ("loop", "shared", "stop", "error", False),
        PlanAndExecute: ("plan", "child", "continue", "in_answer", False),
        Team: ("routing", "shared", "stop", "error", False),
    }
    for kind, values in table.items():
        s = kind.shape  # type: ignore[attr-defined]
        assert (s.kind, s.sessions, s.on_error, s.failure, s.reports) == values, kind
    doc = (Path(__file__).resolve().parent.parent / "docs" / "orchestration.md").read_text()
    for frontend in ("SequentialAgent", "ParallelAgent", "LoopAgent", "Chain", "Pipeline",
                     "ParallelFanOut", "PlanAndExecute", "agent_pipeline", "war_room",
                     "debate_ensemble", "Team", "swarm", "spawn_agent", "transfer_tool"):
        assert f"`{frontend}" in doc, frontend


# --------------------------------------------------------------------------- transfer_tool


async def test_transfer_tool_offers_a_transfer_named_as_the_handoff_tools_are() -> None:
    from relayrace.teams.patterns import transfer_tool
    from relayrace.teams.routing import TransferTo
    from relayrace.testing import ScriptedModel

    made = transfer_tool("writer")
    assert made.name == "transfer_to_writer" and "delegat" not in made.description.lower()
    value = await made.invoke(None, '{"reason": "draft it"}')  # type: ignore[arg-type]
    assert value == TransferTo("writer", "draft it")
    model = ScriptedModel(by_agent={"lead": [tool_call("transfer_to_writer", {})],
                                    "writer": [text("written")]})
    team = Team("t", agents=[Agent("lead", instructions="x", model=model, tools=[made]),
                             Agent("writer", instructions="x", model=model)],
                rules=[Rule(FromSpeaker("writer"), TerminateTarget("done"))])
    result = await Runner.run(team, "go")
    assert (result.final_output, result.last_agent.name) == ("written", "writer")


def test_route_tool_is_a_deprecated_alias_that_keeps_its_tool_name() -> None:
    from relayrace.teams.patterns import route_tool

    with pytest.warns(DeprecationWarning, match="use transfer_tool"):
        old = route_tool("writer")
    assert old.name == "delegate_writer"  # what existing scripts and prompts call


def test_parallel_agent_refuses_an_unknown_on_error() -> None:
    from relayrace import UserError

    with pytest.raises(UserError, match="'cancel' or 'collect'"):
        ParallelAgent("p", branches=[Agent("a", instructions="x")], on_error="ignore")  # type: ignore[arg-type]


def test_a_yaml_workflow_takes_on_error_only_when_parallel(tmp_path: Path) -> None:
    from relayrace import ConfigError

    for name, body in _workflow_docs("sequential", STEPS, "  on_error: cancel\n")("").items():
        (tmp_path / f"{name}.yaml").write_text(body)
    with pytest.raises(ConfigError, match="'spec.on_error' applies only to type 'parallel'"):
        load_team(tmp_path)
