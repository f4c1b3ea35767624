"""The four coordination meta-tools (delegate, war room, pipeline and debate) and
``spawn_agent``, which lets a model create a one-off child agent.

Each is one tool call with one result for the model; behind it, specialists run as delegated
children (see :mod:`relayrace.agents.delegation`) and their reports are folded into that result.
``war_room`` and ``agent_pipeline`` are front-ends over the fan-out and sequence shapes of
:mod:`relayrace.teams.shapes` (their options in each tool's ``shape``); a failure that stops
one is a tool result the model can correct.

``debate_ensemble`` is the front-end of the debate shape (:mod:`relayrace.teams.shapes.debate`,
where consensus is judged); ``DelegationConfig.judge`` sets its judge.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..agents.agent import Agent
from ..agents.delegation import ChildResult, run_child
from ..agents.specialists import META_TOOLS, DelegationConfig, MetaToolName
from ..agents.tools import Tool, ToolRetry, parse_arguments
from ..core.exceptions import UserError
from ..core.reports import DEFAULT_REPORT_SUFFIX
from ..models.interface import Model
from .shapes.debate import run_debate
from .shapes.fanout import fan_out
from .shapes.options import ChildPolicy, Shape, StepFailed
from .shapes.sequence import steps_as_children

if TYPE_CHECKING:
    from ..agents.context import RunContext

__all__ = ["META_TOOLS", "DelegationConfig", "MetaToolName", "SpawnAgentTool", "build_meta_tools",
           "spawn_agent"]

_TOOL_NAMES: dict[str, MetaToolName] = {
    "delegate_to_agent": "delegate", "war_room": "parallel",
    "agent_pipeline": "pipeline", "debate_ensemble": "debate",
}  # the tools' own names are accepted too


class _MetaTool(Tool):

    delegates = True
    idempotent = True  # a call run again continues its children's sessions (stable keys)
    def __init__(self, owner: str, specialists: Sequence[Agent[Any]], config: DelegationConfig):
        self.owner = owner
        self.specialists = {a.name: a for a in specialists}
        self.config = config
        self.menu = "\n".join(f"- {a.name}: {a.description or 'no description'}"
                              for a in specialists)

    def _args(self, arguments: str) -> dict[str, Any]:
        data = parse_arguments(arguments, self.name, json.dumps(self.parameters))
        missing = [k for k in self.parameters.get("required", []) if k not in data]
        if missing:
            raise ToolRetry(f"Invalid arguments for {self.name}: missing {', '.join(missing)}. "
                            f"Expected: {json.dumps(self.parameters)}")
        return data

    def _specialist(self, name: Any) -> Agent[Any]:
        agent = self.specialists.get(name) if isinstance(name, str) else None
        if agent is None:
            raise ToolRetry(f"Unknown specialist {name!r}. Valid specialists:\n{self.menu}")
        return agent

    def _tasks(self, items: Any, key: str) -> list[tuple[Agent[Any], str]]:
        if not isinstance(items, list) or not items:
            raise ToolRetry(f"{self.name} needs {key} as a non-empty list of "
                            '{"type": <specialist>, "task": <text>} objects.')
        out = []
        for i, item in enumerate(items, 1):
            if not isinstance(item, dict) or not isinstance(item.get("task"), str):
                raise ToolRetry(f"{key}[{i}] must be an object with 'type' and 'task' strings.")
            out.append((self._specialist(item.get("type")), item["task"]))
        return out

    def _children(self, *, reports: bool = True) -> ChildPolicy:
        """How its children run: with reports (but a debate's), under the config's limits."""
        cfg = self.config
        return ChildPolicy(reports=reports, report_template=cfg.report_template,
                         max_turns=cfg.child_max_turns, timeout=cfg.child_timeout,
                         max_concurrency=cfg.max_concurrency)

    async def _child(self, ctx: RunContext[Any], agent: Agent[Any], task: str, *,
                     audience: str = "", report: bool = True, suffix: str = "",
                     key: str | None = None) -> ChildResult:
        return await self._children(reports=report).run(ctx, agent, task, audience=audience,
                                                        suffix=suffix, key=key)


def _task_list_schema(description: str) -> dict[str, Any]:
    return {
        "type": "array", "minItems": 1, "description": description,
        "items": {"type": "object", "required": ["type", "task"], "properties": {
            "type": {"type": "string", "description": "A specialist's name."},
            "task": {"type": "string", "description": "What that specialist should do."}}},
    }


class DelegateTool(_MetaTool):
    """``delegate_to_agent(agent_type, task, audience)``: one child, run to completion."""

    def __init__(self, owner: str, specialists: Sequence[Agent[Any]], config: DelegationConfig):
        super().__init__(owner, specialists, config)
        self.name = "delegate_to_agent"
        self.description = ("Delegate one bounded task to a specialist, who works on it alone "
                            "and returns a structured report. Specialists:\n" + self.menu)
        self.parameters = {"type": "object", "required": ["agent_type", "task"], "properties": {
            "agent_type": {"type": "string", "enum": list(self.specialists)},
            "task": {"type": "string", "description": "The task, with everything needed."},
            "audience": {"type": "string", "description": "Who will read the report."}}}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        data = self._args(arguments)
        agent = self._specialist(data.get("agent_type"))
        result = await self._child(ctx, agent, str(data["task"]),
                                   audience=str(data.get("audience") or ""))
        if not result.ok:
            raise ToolRetry(result.render())
        return result.render()


class WarRoomTool(_MetaTool):
    """``war_room(agents)``: every child at once; results in the order given."""

    shape = Shape(kind="fan_out", sessions="child", on_error="collect", failure="in_answer",
                  reports=True)

    def __init__(self, owner: str, specialists: Sequence[Agent[Any]], config: DelegationConfig):
        super().__init__(owner, specialists, config)
        self.name = "war_room"
        self.description = ("Run several specialists at the same time on independent tasks; "
                            "returns every report, in the order given. Specialists:\n" + self.menu)
        self.parameters = {"type": "object", "required": ["agents"], "properties": {
            "agents": _task_list_schema("The specialists to run in parallel, with their tasks.")}}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        tasks = self._tasks(self._args(arguments).get("agents"), "agents")
        results = await fan_out([self._child(ctx, a, t) for a, t in tasks],
                                on_error="collect", limit=self.config.max_concurrency)
        failed = sum(not r.ok for r in results)
        lines = [f"war_room: {len(results)} specialists, {len(results) - failed} succeeded, "
                 f"{failed} failed."]
        for i, ((_, task), r) in enumerate(zip(tasks, results, strict=True), 1):
            status = "ok" if r.ok else "FAILED"
            lines.append(f"\n[{i}] {r.agent} ({status}) — task: {task}\n{r.render()}")
        return "\n".join(lines)


class PipelineTool(_MetaTool):
    """``agent_pipeline(stages)``: in order, each stage given the previous stage's report."""

    shape = Shape(kind="sequence", sessions="child", on_error="stop", failure="tool_result",
                  reports=True)

    def __init__(self, owner: str, specialists: Sequence[Agent[Any]], config: DelegationConfig):
        super().__init__(owner, specialists, config)
        self.name = "agent_pipeline"
        self.description = ("Run specialists one after another; each stage receives the "
                            "previous stage's report. Specialists:\n" + self.menu)
        self.parameters = {"type": "object", "required": ["stages"], "properties": {
            "stages": _task_list_schema("The stages, in order.")}}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        stages = self._tasks(self._args(arguments).get("stages"), "stages")

        async def stage(k: int, done: list[ChildResult]) -> ChildResult:
            agent, task = stages[k]
            if done:
                task = (f"{task}\n\nReport from the previous stage ({done[-1].agent}):\n"
                        f"{done[-1].render()}")
            return await self._child(ctx, agent, task)

        try:
            done = await steps_as_children(len(stages), stage, on_error="stop")
        except StepFailed as failed:
            so_far = "".join(f"\n\n[stage {j}] {r.agent}\n{r.render()}"
                             for j, r in enumerate(failed.done, 1))
            raise ToolRetry(f"agent_pipeline stopped at stage {failed.index + 1} of "
                            f"{len(stages)} ({failed.result.agent}): {failed.result.error}. "
                            f"Reports so far:{so_far or ' none'}") from None
        earlier = "".join(f"\n- stage {j} ({r.agent}): {r.report.summary if r.report else ''}"
                          for j, r in enumerate(done[:-1], 1))
        head = f"agent_pipeline: {len(done)} stages completed."
        if earlier:
            head += f" Earlier stages:{earlier}"
        return f"{head}\n\nFinal stage ({done[-1].agent}):\n{done[-1].render()}"


class DebateTool(_MetaTool):
    """``debate_ensemble(question, participants, rounds)``: rounds until consensus."""

    shape = Shape(kind="debate", sessions="child", on_error="collect", failure="in_answer",
                  reports=False)
    """Each round a fan-out that collects (a failed participant cannot agree that round)."""

    def __init__(self, owner: str, specialists: Sequence[Agent[Any]], config: DelegationConfig):
        super().__init__(owner, specialists, config)
        self.name = "debate_ensemble"
        if config.judge is not None and not isinstance(config.judge, Agent):
            raise UserError(f"A debate's judge must be an Agent, got {config.judge!r}.")
        self.judge: Agent[Any] | None = config.judge
        self.debaters = dict(self.specialists)
        for name, model in config.debate_models.items():
            self.debaters[name] = Agent(name, instructions="You answer questions carefully.",
                                        description=f"the model {name}", model=model)
        menu = "\n".join(f"- {n}: {a.description or 'no description'}"
                         for n, a in self.debaters.items())
        self.description = ("Ask several participants the same question; over rounds each sees "
                            "the others' answers, until they agree. Returns the consensus, a "
                            "confidence, and the dissent if they do not agree. Participants:\n"
                            + menu)
        self.parameters = {"type": "object", "required": ["question", "participants"],
                           "properties": {
            "question": {"type": "string"},
            "participants": {"type": "array", "minItems": 2,
                             "items": {"type": "string", "enum": list(self.debaters)}},
            "rounds": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3}}}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        data = self._args(arguments)
        names = data.get("participants")
        if not isinstance(names, list) or len(names) < 2:
            raise ToolRetry("debate_ensemble needs at least two participants, from: "
                            + ", ".join(self.debaters))
        if len(set(names)) != len(names):
            raise ToolRetry("Each debate participant may appear only once; got "
                            f"{', '.join(map(str, names))}.")
        unknown = [n for n in names if n not in self.debaters]
        if unknown:
            raise ToolRetry(f"Unknown participant(s) {unknown}. Valid participants: "
                            + ", ".join(self.debaters))
        rounds = data.get("rounds", 3)
        if not isinstance(rounds, int) or not 1 <= rounds <= 5:
            raise ToolRetry("rounds must be an integer from 1 to 5.")
        return await run_debate(ctx, self.debaters, names, str(data["question"]),
                                rounds=rounds, children=self._children(reports=False),
                                judge=self.judge)


_BUILDERS: dict[MetaToolName, type[_MetaTool]] = {
    "delegate": DelegateTool, "parallel": WarRoomTool,
    "pipeline": PipelineTool, "debate": DebateTool,
}


def build_meta_tools(owner: str, specialists: Sequence[Agent[Any]],
                     names: Sequence[str], config: DelegationConfig) -> list[Tool]:
    """The meta-tools ``names`` of agent ``owner`` over ``specialists``."""
    if not specialists:
        raise UserError(f"Agent {owner!r}: meta_tools need at least one specialist.")
    tools: list[Tool] = []
    for name in names:
        builder = _BUILDERS.get(_TOOL_NAMES.get(name, cast(MetaToolName, name)))
        if builder is None:
            raise UserError(f"Agent {owner!r}: unknown meta tool {name!r}; choose from "
                            f"{', '.join(META_TOOLS)} (or the tool names "
                            f"{', '.join(_TOOL_NAMES)}).")
        tools.append(builder(owner, specialists, config))
    return tools


class SpawnAgentTool(Tool):
    """``spawn_agent(instructions, task, model?, tools?)``: a one-off child agent the model
    writes itself, run as a delegated child (see :func:`spawn_agent`)."""

    delegates = True
    idempotent = True  # a call run again continues its child's session (stable keys)

    def __init__(self, *, models: Mapping[str, Model | str], tools: Sequence[Tool] = (),
                 name: str = "spawn_agent", max_turns: int | None = None,
                 timeout: float | None = None,  # noqa: ASYNC109 - the child's deadline
                 report_template: str = DEFAULT_REPORT_SUFFIX) -> None:
        if not models or not all(isinstance(k, str) and k for k in models):
            raise UserError("spawn_agent needs a menu of models: {name: model}, at least one.")
        names = [t.name for t in tools]
        if any(not isinstance(t, Tool) for t in tools) or len(set(names)) != len(names):
            raise UserError(f"spawn_agent tools must be distinct Tools, got {list(tools)!r}.")
        if max_turns is not None and max_turns < 1:
            raise UserError(f"spawn_agent max_turns must be at least 1, got {max_turns}.")
        self.models = dict(models)
        self.allowed = {t.name: t for t in tools}
        self.name = name
        self.max_turns, self.timeout, self.report_template = max_turns, timeout, report_template
        default = next(iter(self.models))
        self.description = (
            "Create a one-off helper agent with instructions you write, and run it on a task "
            "of its own; it works alone and returns a structured report. Models: "
            + ", ".join(self.models) + f" (default {default}). Tools it may be given: "
            + (", ".join(self.allowed) or "none") + ".")
        properties: dict[str, Any] = {
            "instructions": {"type": "string", "description": "The helper's system prompt."},
            "task": {"type": "string", "description": "The task, with everything needed."},
            "model": {"type": "string", "enum": list(self.models)},
        }
        if self.allowed:
            properties["tools"] = {"type": "array", "items": {
                "type": "string", "enum": list(self.allowed)}, "uniqueItems": True,
                "description": "The tools the helper may use (default: none)."}
        self.parameters = {"type": "object", "required": ["instructions", "task"],
                           "properties": properties}

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        data = parse_arguments(arguments, self.name, json.dumps(self.parameters))
        instructions, task = data.get("instructions"), data.get("task")
        if not isinstance(instructions, str) or not instructions.strip() or \
                not isinstance(task, str) or not task.strip():
            raise ToolRetry(f"{self.name} needs 'instructions' and 'task' as non-empty strings.")
        model = data.get("model", next(iter(self.models)))
        if model not in self.models:
            raise ToolRetry(f"Model {model!r} is not on the menu; choose one of: "
                            + ", ".join(self.models) + ".")
        wanted = data.get("tools", [])
        if not isinstance(wanted, list) or not all(isinstance(t, str) for t in wanted):
            raise ToolRetry(f"{self.name}: 'tools' must be a list of tool names.")
        refused = [t for t in wanted if t not in self.allowed]
        if refused:
            raise ToolRetry(f"Tool(s) {', '.join(map(repr, refused))} may not be given to a "
                            "spawned agent; allowed: " + (", ".join(self.allowed) or "none")
                            + ".")
        # A function, not a string: the model's text is never rendered as a template.
        child = Agent("spawned_agent", instructions=lambda _ctx, text=instructions: text,
                      description="a one-off agent", model=self.models[model],
                      tools=[self.allowed[t] for t in dict.fromkeys(wanted)],
                      max_turns=self.max_turns)
        result = await run_child(ctx, child, task, report_template=self.report_template,
                                 max_turns=self.max_turns, timeout=self.timeout)
        if not result.ok:
            raise ToolRetry(result.render())
        return result.render()


def spawn_agent(*, models: Mapping[str, Model | str], tools: Sequence[Tool] = (),
                name: str = "spawn_agent", max_turns: int | None = None,
                timeout: float | None = None,  # noqa: ASYNC109 - the child's deadline
                report_template: str = DEFAULT_REPORT_SUFFIX) -> SpawnAgentTool:
    """A ``spawn_agent`` tool (the Go SDK's ``NewDynamic``): the model writes a child agent's
    instructions, picks its model from ``models`` (by name; the first is the default) and its
    tools from ``tools``, and runs it on a task as a normal delegated child: its own session,
    report, trace span and usage under the run's budget and ``max_depth``. A model off the
    menu or a tool not allowed is a tool error the model can correct. ``max_turns`` and
    ``timeout`` bound each child.
    """
    return SpawnAgentTool(models=models, tools=tools, name=name, max_turns=max_turns,
                          timeout=timeout, report_template=report_template)
