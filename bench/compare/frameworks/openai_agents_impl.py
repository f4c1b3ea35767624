"""OpenAI Agents SDK (``openai-agents``).

Fake model: a minimal ``agents.models.interface.Model`` subclass whose ``get_response`` returns a
``ModelResponse`` of ``ResponseFunctionToolCall`` / ``ResponseOutputMessage`` items. (The SDK's
own ``agents.testing.ScriptedModel`` deep-copies the whole input on every call to record it,
which would bill O(history) copying to the framework, so it is not used.)
Handoffs: native (``Agent(handoffs=[next])`` -> tool ``transfer_to_<name>``).
Agent as tool: native ``Agent.as_tool`` (parameter ``input``).
History: in memory, the SDK's documented manual way (``result.to_input_list()`` + the next user
message); SQLite: the SDK's ``SQLiteSession(session_id, db_path)`` on one file.
Tracing: disabled (``set_tracing_disabled(True)``); its default processor exports to OpenAI.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from common import Calls, Handoff, Text
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from frameworks import NotSupported

NAME = "openai-agents"
DISTS = ["openai-agents", "openai"]
NOTES = {
    "tracing": "off: set_tracing_disabled(True) (default exporter would send traces to OpenAI)",
    "fake_model": "minimal agents.models.interface.Model subclass (get_response/stream_response)",
    "handoff": "native handoffs=[...] (tool transfer_to_<agent>)",
    "agent_tool": "native Agent.as_tool()",
    "history_memory": "manual: result.to_input_list() + next user message (documented)",
    "history_sqlite": "agents.SQLiteSession(session_id, db_path=<file>), one file for all",
}

MAX_TURNS = 10_000


def setup() -> None:
    set_tracing_disabled(True)


def _usage() -> Usage:
    return Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2)


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content or ():
        t = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        if t:
            parts.append(t)
    return "".join(parts)


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


class FakeModel(Model):
    """Hands the request to the scenario script and converts its action to response items."""

    def __init__(self, script: Any, agent: str) -> None:
        self.script = script
        self.agent = agent

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
        **kwargs,
    ) -> ModelResponse:
        if isinstance(input, str):
            hist_len, tool_tail, last_user = 1, [], input
        else:
            hist_len = len(input)
            tool_tail = []
            i = hist_len - 1
            while i >= 0 and _get(input[i], "type") == "function_call_output":
                tool_tail.append(str(_get(input[i], "output")))
                i -= 1
            tool_tail.reverse()
            last = input[-1] if input else None
            last_user = (
                _text_of(_get(last, "content"))
                if last is not None and _get(last, "role") == "user"
                else None
            )
        action = await self.script.model(self.agent, hist_len, tool_tail, last_user)
        if isinstance(action, Text):
            output: list[Any] = [_message(action.text)]
        elif isinstance(action, Calls):
            output = []
            for c in action.calls:
                args = c.args if c.query is None else {"input": c.query}
                output.append(
                    ResponseFunctionToolCall(
                        id=c.id,
                        call_id=c.id,
                        type="function_call",
                        name=c.name,
                        arguments=_json(args),
                        status="completed",
                    )
                )
        elif isinstance(action, Handoff):
            name = next(h.tool_name for h in handoffs if h.agent_name == action.target)
            output = [
                ResponseFunctionToolCall(
                    id=action.id,
                    call_id=action.id,
                    type="function_call",
                    name=name,
                    arguments="{}",
                    status="completed",
                )
            ]
        else:  # pragma: no cover
            raise TypeError(action)
        return ModelResponse(output=output, usage=_usage(), response_id=None)

    async def stream_response(self, *args, **kwargs):  # pragma: no cover - not used
        raise NotImplementedError
        yield


def _json(args: dict[str, Any]) -> str:
    import json

    return json.dumps(args)


# ------------------------------------------------------------------------------------ S1


async def build_tool_loop(script):
    @function_tool
    async def lookup(i: int) -> str:
        """Look up item i."""
        return script.lookup(i)

    agent = Agent(
        name="a0", instructions="Use the tool.", model=FakeModel(script, "a0"), tools=[lookup]
    )

    async def run():
        result = await Runner.run(agent, "hello", max_turns=MAX_TURNS)
        return result.final_output, result.last_agent.name

    return run


# ------------------------------------------------------------------------------------ S2


async def build_handoff_chain(script):
    n = script.n
    agents: list[Agent] = []
    nxt = None
    for i in range(n, -1, -1):
        agent = Agent(
            name=f"a{i}",
            instructions=f"You are agent {i}.",
            model=FakeModel(script, f"a{i}"),
            handoffs=[nxt] if nxt is not None else [],
        )
        agents.append(agent)
        nxt = agent
    first = nxt

    async def run():
        result = await Runner.run(first, "hello", max_turns=MAX_TURNS)
        return result.final_output, result.last_agent.name

    return run


# ------------------------------------------------------------------------------------ S3


async def build_fanout(script):
    tools = []
    for j in range(script.n):
        child = Agent(
            name=f"child_{j}", instructions="Answer.", model=FakeModel(script, f"child_{j}")
        )
        tools.append(child.as_tool(tool_name=f"child_{j}", tool_description=f"Child agent {j}."))
    parent = Agent(
        name="parent", instructions="Ask the children.", model=FakeModel(script, "parent"),
        tools=tools,
    )

    async def run():
        result = await Runner.run(parent, "hello", max_turns=MAX_TURNS)
        return result.final_output, result.last_agent.name

    return run


# ------------------------------------------------------------------------------------ S4/S5


class _MemoryChat:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.history: list[Any] = []

    async def send(self, text: str) -> str:
        self.history.append({"role": "user", "content": text})
        result = await Runner.run(self.agent, self.history, max_turns=MAX_TURNS)
        self.history = result.to_input_list()
        return result.final_output


class _SQLiteChat:
    def __init__(self, agent: Agent, session: Any) -> None:
        self.agent = agent
        self.sess = session

    async def send(self, text: str) -> str:
        result = await Runner.run(self.agent, text, session=self.sess, max_turns=MAX_TURNS)
        return result.final_output

    async def close(self) -> None:
        self.sess.close()


class _SharedChat(_SQLiteChat):
    """A session on the shared engine: the app disposes of the engine."""

    async def close(self) -> None:
        pass


class _App:
    def __init__(self, agent: Agent, store: str, db_path: str) -> None:
        self.agent = agent
        self.store = store
        self.db_path = db_path
        self._engine: Any = None
        self._engine_lock = asyncio.Lock()

    async def session(self, session_id: int):
        if self.store == "memory":
            return _MemoryChat(self.agent)
        if self.store == "postgres":
            from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

            return _SharedChat(self.agent, SQLAlchemySession(
                f"s{session_id}", engine=await self.engine(), create_tables=False))
        from agents import SQLiteSession

        return _SQLiteChat(self.agent, SQLiteSession(f"s{session_id}", db_path=self.db_path))

    async def engine(self) -> Any:
        """One SQLAlchemy engine (pool of 10) for every session, its tables made once (all
        sessions start at once: the first makes them, the others wait)."""
        async with self._engine_lock:
            if self._engine is None:
                from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
                from common import postgres_url
                from sqlalchemy.ext.asyncio import create_async_engine

                url = postgres_url().replace("postgresql://", "postgresql+psycopg://", 1)
                engine = create_async_engine(url, pool_size=10, max_overflow=0,
                                             pool_timeout=300)
                # The SDK makes its tables on a session's first use when asked: once, here.
                await SQLAlchemySession("setup", engine=engine,
                                        create_tables=True)._ensure_tables()
                self._engine = engine
        return self._engine

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()


async def build_chat(script, store: str, db_path: str):
    if store == "sqlite_full":
        raise NotSupported("the like-for-like SQLite cell is measured against LangGraph")
    agent = Agent(name="a0", instructions="Chat.", model=FakeModel(script, "a0"))
    return _App(agent, store, db_path)
