"""pydantic-ai (``pydantic-ai-slim``).

Fake model: the framework's own ``pydantic_ai.models.function.FunctionModel`` with an async
function (a sync one would run in a thread). Each response carries a ``RequestUsage`` so that
FunctionModel skips its per-call token estimate over the whole history (a test-double cost, not
a framework one).
Handoffs: pydantic-ai has NO built-in handoff. What stands in for it is the documented
output-function hand-off ("output functions or programmatic hand-off when control should move
elsewhere"): agent i's ``output_type`` is an output function ``transfer_to_a{i+1}`` which runs
agent i+1 with ``message_history=ctx.messages[:-1]`` and returns its output, so the chain nests
ten runs.
Agent as tool: documented agent delegation, a tool that ``await child.run(query,
usage=ctx.usage)`` and returns ``result.output``.
History: ``message_history=result.all_messages()``; there is no SQLite session store -> n/a.
Tracing: instrumentation off (``Agent.instrument_all`` default False; logfire not installed).
"""

from __future__ import annotations

from typing import Any

from common import Calls, Handoff, Text
from pydantic_ai import Agent, RunContext, Tool, ToolOutput
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from frameworks import NotSupported

NAME = "pydantic-ai"
DISTS = ["pydantic-ai-slim"]
NOTES = {
    "tracing": "off: no instrumentation (Agent.instrument_all default False, logfire absent)",
    "fake_model": "pydantic_ai.models.function.FunctionModel (async function)",
    "handoff": "NO native handoff; stand-in: documented output-function hand-off "
    "(output_type=[ToolOutput(fn)] where fn runs the next agent with ctx.messages[:-1])",
    "agent_tool": "documented agent delegation: tool awaiting child.run(query, usage=ctx.usage)",
    "history_memory": "message_history=result.all_messages()",
    "history_sqlite": "n/a: pydantic-ai has no SQLite-backed session store",
}

LIMITS = UsageLimits(request_limit=None, tool_calls_limit=None)


def setup() -> None:
    pass


def _model(script: Any, agent: str) -> FunctionModel:
    async def respond(messages: list, info: AgentInfo) -> ModelResponse:
        hist_len = len(messages)
        tool_tail: list[str] = []
        last_user = None
        last = messages[-1] if messages else None
        if isinstance(last, ModelRequest):
            parts = last.parts
            i = len(parts) - 1
            while i >= 0 and isinstance(parts[i], ToolReturnPart):
                tool_tail.append(str(parts[i].content))
                i -= 1
            tool_tail.reverse()
            if parts and isinstance(parts[-1], UserPromptPart):
                content = parts[-1].content
                last_user = content if isinstance(content, str) else "".join(map(str, content))
        action = await script.model(agent, hist_len, tool_tail, last_user)
        if isinstance(action, Text):
            out: list[Any] = [TextPart(action.text)]
        elif isinstance(action, Calls):
            out = [
                ToolCallPart(
                    c.name, c.args if c.query is None else {"query": c.query}, tool_call_id=c.id
                )
                for c in action.calls
            ]
        elif isinstance(action, Handoff):
            name = next(t.name for t in info.output_tools if t.name.endswith(action.target))
            out = [ToolCallPart(name, {}, tool_call_id=action.id)]
        else:  # pragma: no cover
            raise TypeError(action)
        return ModelResponse(parts=out, usage=RequestUsage(input_tokens=1, output_tokens=1))

    return FunctionModel(respond, model_name=f"fake-{agent}")


# ------------------------------------------------------------------------------------ S1


async def build_tool_loop(script):
    async def lookup(i: int) -> str:
        """Look up item i."""
        return script.lookup(i)

    agent = Agent(_model(script, "a0"), instructions="Use the tool.", tools=[lookup], name="a0")

    async def run():
        result = await agent.run("hello", usage_limits=LIMITS)
        return result.output, None

    return run


# ------------------------------------------------------------------------------------ S2


async def build_handoff_chain(script):
    n = script.n
    nxt: Agent | None = None
    for i in range(n, -1, -1):
        if nxt is None:
            agent = Agent(_model(script, f"a{i}"), instructions=f"You are agent {i}.", name=f"a{i}")
        else:

            def make(target: Agent):
                async def transfer(ctx: RunContext) -> str:
                    """Hand the conversation over to the next agent."""
                    result = await target.run(
                        message_history=ctx.messages[:-1], usage=ctx.usage, usage_limits=LIMITS
                    )
                    return result.output

                return transfer

            agent = Agent(
                _model(script, f"a{i}"),
                instructions=f"You are agent {i}.",
                name=f"a{i}",
                output_type=[ToolOutput(make(nxt), name=f"transfer_to_a{i + 1}")],
            )
        nxt = agent
    first = nxt

    async def run():
        result = await first.run("hello", usage_limits=LIMITS)
        return result.output, None

    return run


# ------------------------------------------------------------------------------------ S3


async def build_fanout(script):
    tools = []
    for j in range(script.n):
        child = Agent(_model(script, f"child_{j}"), instructions="Answer.", name=f"child_{j}")

        def make(child: Agent):
            async def call_child(ctx: RunContext, query: str) -> str:
                result = await child.run(query, usage=ctx.usage, usage_limits=LIMITS)
                return result.output

            return call_child

        tools.append(Tool(make(child), name=f"child_{j}", description=f"Child agent {j}."))
    parent = Agent(
        _model(script, "parent"), instructions="Ask the children.", tools=tools, name="parent"
    )

    async def run():
        result = await parent.run("hello", usage_limits=LIMITS)
        return result.output, None

    return run


# ------------------------------------------------------------------------------------ S4/S5


class _Chat:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.history: list[Any] = []

    async def send(self, text: str) -> str:
        result = await self.agent.run(text, message_history=self.history, usage_limits=LIMITS)
        self.history = result.all_messages()
        return result.output


class _App:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    async def session(self, session_id: int):
        return _Chat(self.agent)

    async def close(self) -> None:
        pass


async def build_chat(script, store: str, db_path: str):
    if store != "memory":
        raise NotSupported(f"pydantic-ai has no {store} session store")
    return _App(Agent(_model(script, "a0"), instructions="Chat.", name="a0"))
