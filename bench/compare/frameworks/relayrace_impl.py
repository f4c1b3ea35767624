"""relayrace (this repository), installed editable into the comparison venv.

Fake model: ``relayrace.testing.FunctionModel`` with an async function of the ``ModelRequest``
returning ``text(...)``, ``tool_call(name, args)`` or a list of ``tool_call``s.
Handoffs: native ``Agent(sub_agents=[next])`` -> tool ``transfer_to_<name>``.
Agent as tool: native ``child.as_tool(name=..., description=..., report=False)`` (param ``query``).
History: ``relayrace.sessions.MemorySession``; SQLite: ``SQLiteSession(session_id, path)`` on one
file shared by all sessions.
Tracing: ON, an ``InMemoryTraceProcessor`` registered with ``add_trace_processor``.

Assumed API (the relayrace core is being written against the same spec):
  from relayrace import Agent, Runner, tool
  from relayrace.testing import FunctionModel, text, tool_call
  from relayrace.sessions import MemorySession, SQLiteSession
  from relayrace.tracing import InMemoryTraceProcessor, add_trace_processor
  request.messages: Message(role, content, tool_calls, tool_call_id); request.tools[i].name
  await Runner.run(agent, input, session=..., max_turns=...) -> result.final_output,
  result.last_agent.name
"""

from __future__ import annotations

import inspect
from typing import Any

from common import Calls, Handoff, Text

from relayrace import Agent, Runner, tool
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import FunctionModel, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor, add_trace_processor

NAME = "relayrace"
DISTS = ["relayrace"]
NOTES = {
    "tracing": "ON: InMemoryTraceProcessor via add_trace_processor",
    "fake_model": "relayrace.testing.FunctionModel (async function)",
    "handoff": "native sub_agents (tool transfer_to_<agent>)",
    "agent_tool": "native Agent.as_tool(report=False)",
    "history_memory": "relayrace.sessions.MemorySession",
    "history_sqlite": "relayrace.sessions.SQLiteSession(session_id, path), one file for all "
                      "(s4_sqlite_full: synchronous='FULL')",
}

MAX_TURNS = 10_000
TRACES = InMemoryTraceProcessor()


def setup() -> None:
    add_trace_processor(TRACES)


def extra_counts() -> dict[str, int]:
    """Proof that tracing was on: the spans the in-memory processor kept (warm-up included)."""
    if not TRACES.spans:
        raise AssertionError("relayrace tracing was meant to be on, but no span was recorded")
    return {"trace_spans": len(TRACES.spans)}


def _model(script: Any, agent: str) -> FunctionModel:
    async def respond(request) -> Any:
        messages = request.messages
        hist_len = len(messages)
        tool_tail: list[str] = []
        i = hist_len - 1
        while i >= 0 and messages[i].role == "tool":
            tool_tail.append(messages[i].content)
            i -= 1
        tool_tail.reverse()
        last = messages[-1] if messages else None
        last_user = last.content if last is not None and last.role == "user" else None
        action = await script.model(agent, hist_len, tool_tail, last_user)
        if isinstance(action, Text):
            return text(action.text)
        if isinstance(action, Calls):
            return [
                tool_call(c.name, c.args if c.query is None else {"query": c.query})
                for c in action.calls
            ]
        if isinstance(action, Handoff):
            return tool_call(f"transfer_to_{action.target}", {})
        raise TypeError(action)  # pragma: no cover

    return FunctionModel(respond)


# ------------------------------------------------------------------------------------ S1


async def build_tool_loop(script):
    @tool
    async def lookup(i: int) -> str:
        """Look up item i."""
        return script.lookup(i)

    agent = Agent("a0", instructions="Use the tool.", model=_model(script, "a0"), tools=[lookup])

    async def run():
        result = await Runner.run(agent, "hello", max_turns=MAX_TURNS)
        return result.final_output, result.last_agent.name

    return run


# ------------------------------------------------------------------------------------ S2


async def build_handoff_chain(script):
    nxt = None
    for i in range(script.n, -1, -1):
        nxt = Agent(
            f"a{i}",
            instructions=f"You are agent {i}.",
            model=_model(script, f"a{i}"),
            sub_agents=[nxt] if nxt is not None else [],
        )
    first = nxt

    async def run():
        result = await Runner.run(first, "hello", max_turns=MAX_TURNS)
        return result.final_output, result.last_agent.name

    return run


# ------------------------------------------------------------------------------------ S3


async def build_fanout(script):
    tools = []
    for j in range(script.n):
        child = Agent(f"child_{j}", instructions="Answer.", model=_model(script, f"child_{j}"))
        tools.append(child.as_tool(name=f"child_{j}", description=f"Child agent {j}.",
                                   report=False))
    parent = Agent(
        "parent", instructions="Ask the children.", model=_model(script, "parent"), tools=tools
    )

    async def run():
        result = await Runner.run(parent, "hello", max_turns=MAX_TURNS)
        return result.final_output, result.last_agent.name

    return run


# ------------------------------------------------------------------------------------ S4/S5


class _Chat:
    def __init__(self, agent: Agent, session: Any) -> None:
        self.agent = agent
        self.sess = session

    async def send(self, text_: str) -> Any:
        result = await Runner.run(self.agent, text_, session=self.sess, max_turns=MAX_TURNS)
        return result.final_output

    async def close(self) -> None:
        for name in ("aclose", "close"):
            close = getattr(self.sess, name, None)
            if close is not None:
                out = close()
                if inspect.isawaitable(out):
                    await out
                return


class _NoClose(_Chat):
    """A session of a shared store: the store closes its pool, not each session."""

    async def close(self) -> None:
        pass


class _App:
    def __init__(self, agent: Agent, store: str, db_path: str) -> None:
        self.agent = agent
        self.store = store
        self.db_path = db_path
        self._postgres: Any = None

    async def session(self, session_id: int):
        if self.store == "memory":
            return _Chat(self.agent, MemorySession())
        if self.store == "postgres":
            return _NoClose(self.agent, self.postgres().session(f"s{session_id}"))
        if self.store == "sqlite_full":  # like for like: every commit syncs the disk
            return _Chat(self.agent, SQLiteSession(f"s{session_id}", self.db_path,
                                                   synchronous="FULL"))
        return _Chat(self.agent, SQLiteSession(f"s{session_id}", self.db_path))

    def postgres(self) -> Any:
        """One store (one connection pool) for every session, as a deployment has."""
        if self._postgres is None:
            from common import postgres_url

            from relayrace.sessions.postgres import PostgresStore

            # busy_timeout=30: before issue 43 it was also the wait for a pooled connection
            # (30 s as LangGraph's psycopg pool waits); since, that wait is pool_timeout, 60 s
            # by default, and this keeps the figures comparable with older trees.
            self._postgres = PostgresStore(postgres_url(), busy_timeout=30.0)
        return self._postgres

    async def close(self) -> None:
        if self._postgres is not None:
            await self._postgres.aclose()


async def build_chat(script, store: str, db_path: str):
    agent = Agent("a0", instructions="Chat.", model=_model(script, "a0"))
    return _App(agent, store, db_path)
