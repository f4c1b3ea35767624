"""LangGraph (``langgraph`` + ``langchain`` v1 ``create_agent`` + ``langgraph-swarm``).

Fake model: a minimal ``langchain_core`` ``BaseChatModel`` subclass (``_agenerate`` returns an
``AIMessage`` with ``tool_calls``; ``bind_tools`` returns the model itself). LangChain's own
``GenericFakeChatModel`` has no ``bind_tools``, so ``create_agent`` cannot use it.
Agent: ``langchain.agents.create_agent`` (the current prebuilt ReAct loop on LangGraph;
``langgraph.prebuilt.create_react_agent`` is deprecated in favour of it).
Handoffs: ``langgraph_swarm.create_swarm`` + ``create_handoff_tool`` (tool ``transfer_to_<name>``,
returns ``Command(goto=..., graph=PARENT)``).
Agent as tool: LangGraph has no ``as_tool``; the documented "subagents as tools" pattern, an async
``@tool`` that ``ainvoke``s the child agent graph and returns its last message.
History: ``InMemorySaver`` checkpointer; SQLite: ``langgraph-checkpoint-sqlite``
``AsyncSqliteSaver`` on one file; both keyed by ``thread_id``.
Tracing: LangSmith tracing is off unless enabled by env; the runner unsets LANGSMITH_TRACING /
LANGCHAIN_TRACING_V2, so the callback system runs with no tracer.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

for _var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
    os.environ.pop(_var, None)

from common import Calls, Handoff, Text  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import StructuredTool, tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph_swarm import create_handoff_tool, create_swarm  # noqa: E402

NAME = "langgraph"
DISTS = [
    "langgraph", "langchain", "langchain-core", "langgraph-swarm", "langgraph-checkpoint-sqlite",
]
NOTES = {
    "tracing": "off: LangSmith tracing env vars unset (no tracer callback)",
    "fake_model": "minimal BaseChatModel subclass (_agenerate, bind_tools returns self)",
    "handoff": "langgraph-swarm create_swarm + create_handoff_tool (Command goto)",
    "agent_tool": "async @tool that ainvokes the child create_agent graph (no native as_tool)",
    "history_memory": "InMemorySaver checkpointer, thread_id per session",
    "history_sqlite": "AsyncSqliteSaver (langgraph-checkpoint-sqlite) on one file (WAL, "
                      "synchronous=FULL: SQLite's default, it sets none; same in s4_sqlite_full)",
}

CONFIG_LIMIT = {"recursion_limit": 100_000}


def setup() -> None:
    pass


class FakeChat(BaseChatModel):
    """Hands the request to the scenario script and converts its action to an AIMessage."""

    script: Any
    agent: str

    @property
    def _llm_type(self) -> str:
        return "bench-fake"

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # pragma: no cover
        raise NotImplementedError("async only")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        hist_len = len(messages)
        tool_tail: list[str] = []
        i = hist_len - 1
        while i >= 0 and isinstance(messages[i], ToolMessage):
            tool_tail.append(str(messages[i].content))
            i -= 1
        tool_tail.reverse()
        last = messages[-1] if messages else None
        last_user = last.content if isinstance(last, HumanMessage) else None
        action = await self.script.model(self.agent, hist_len, tool_tail, last_user)
        if isinstance(action, Text):
            msg = AIMessage(content=action.text)
        elif isinstance(action, Calls):
            msg = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": c.name,
                        "args": c.args if c.query is None else {"query": c.query},
                        "id": c.id,
                        "type": "tool_call",
                    }
                    for c in action.calls
                ],
            )
        elif isinstance(action, Handoff):
            msg = AIMessage(
                content="",
                tool_calls=[
                    {
                        "name": f"transfer_to_{action.target}",
                        "args": {},
                        "id": action.id,
                        "type": "tool_call",
                    }
                ],
            )
        else:  # pragma: no cover
            raise TypeError(action)
        return ChatResult(generations=[ChatGeneration(message=msg)])


def _user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


# ------------------------------------------------------------------------------------ S1


async def build_tool_loop(script):
    @tool
    async def lookup(i: int) -> str:
        """Look up item i."""
        return script.lookup(i)

    graph = create_agent(
        FakeChat(script=script, agent="a0"), tools=[lookup], system_prompt="Use the tool.",
        name="a0",
    )

    async def run():
        state = await graph.ainvoke(_user("hello"), config=CONFIG_LIMIT)
        return state["messages"][-1].content, None

    return run


# ------------------------------------------------------------------------------------ S2


async def build_handoff_chain(script):
    n = script.n
    agents = []
    for i in range(n + 1):
        tools = [create_handoff_tool(agent_name=f"a{i + 1}")] if i < n else []
        agents.append(
            create_agent(
                FakeChat(script=script, agent=f"a{i}"),
                tools=tools,
                system_prompt=f"You are agent {i}.",
                name=f"a{i}",
            )
        )
    swarm = create_swarm(agents, default_active_agent="a0").compile()

    async def run():
        state = await swarm.ainvoke(_user("hello"), config=CONFIG_LIMIT)
        return state["messages"][-1].content, state.get("active_agent")

    return run


# ------------------------------------------------------------------------------------ S3


async def build_fanout(script):
    tools = []
    for j in range(script.n):
        child = create_agent(
            FakeChat(script=script, agent=f"child_{j}"), tools=[], system_prompt="Answer.",
            name=f"child_{j}",
        )

        def make(child):
            async def call_child(query: str) -> str:
                state = await child.ainvoke(_user(query))
                return state["messages"][-1].content

            return call_child

        tools.append(
            StructuredTool.from_function(
                coroutine=make(child), name=f"child_{j}", description=f"Child agent {j}."
            )
        )
    parent = create_agent(
        FakeChat(script=script, agent="parent"), tools=tools, system_prompt="Ask the children.",
        name="parent",
    )

    async def run():
        state = await parent.ainvoke(_user("hello"), config=CONFIG_LIMIT)
        return state["messages"][-1].content, None

    return run


# ------------------------------------------------------------------------------------ S4/S5


class _Chat:
    def __init__(self, graph: Any, thread: str) -> None:
        self.graph = graph
        self.config = {"configurable": {"thread_id": thread}, **CONFIG_LIMIT}

    async def send(self, text: str) -> str:
        state = await self.graph.ainvoke(_user(text), config=self.config)
        return state["messages"][-1].content


class _App:
    def __init__(self, graph: Any, stack: contextlib.AsyncExitStack) -> None:
        self.graph = graph
        self.stack = stack

    async def session(self, session_id: int):
        return _Chat(self.graph, f"s{session_id}")

    async def close(self) -> None:
        await self.stack.aclose()


async def build_chat(script, store: str, db_path: str):
    stack = contextlib.AsyncExitStack()
    if store == "memory":
        saver = InMemorySaver()
    elif store == "postgres":
        from common import postgres_url
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        # A pool of 10, as relayrace's store has, with the settings LangGraph's docs give.
        pool = AsyncConnectionPool(postgres_url(), max_size=10, open=False, kwargs={
            "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        await pool.open()
        stack.push_async_callback(pool.close)
        saver = AsyncPostgresSaver(pool)
        await saver.setup()
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        saver = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(db_path))
        await saver.setup()  # its pragmas, read back: WAL and SQLite's default synchronous=FULL
        async with saver.conn.execute("PRAGMA synchronous") as cursor:
            level = (await cursor.fetchone())[0]
        if level != 2:
            raise AssertionError(f"LangGraph's SQLite saver runs at synchronous={level}, not FULL")
    graph = create_agent(
        FakeChat(script=script, agent="a0"), tools=[], system_prompt="Chat.", name="a0",
        checkpointer=saver,
    )
    return _App(graph, stack)
