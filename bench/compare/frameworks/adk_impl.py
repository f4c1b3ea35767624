"""Google Agent Development Kit (``google-adk``).

Fake model: a minimal ``google.adk.models.BaseLlm`` subclass whose ``generate_content_async``
yields one ``LlmResponse`` (text part or ``function_call`` parts).
Agents: ``LlmAgent`` run by ``google.adk.runners.Runner``; ``RunConfig(max_llm_calls=...)``
raised above ADK's default of 500 so S1 at 500 turns may run.
Handoffs: native ``sub_agents`` + the ``transfer_to_agent(agent_name=...)`` tool; each agent has
the next as its only sub-agent.
Agent as tool: native ``google.adk.tools.agent_tool.AgentTool`` (parameter ``request``).
History: ``InMemorySessionService``; SQLite: ``DatabaseSessionService(db_url="sqlite+aiosqlite:///
<file>")`` (the ``google-adk[db]`` extra, SQLAlchemy async engine) with sqlite3's busy timeout and
SQLAlchemy's pool timeout raised to 300 s: with their defaults (5 s, 30 s) 1,000 concurrent
sessions fail with "database is locked" / "QueuePool limit of size 5 overflow 10 reached".
ADK's other SQLite store, ``SqliteSessionService(db_path)`` (one aiosqlite connection per
operation, no settings), fails with "database is locked" already at 100 concurrent sessions; set
``BENCH_ADK_SQLITE=sqlite_session_service`` to measure it instead.
Tracing: ADK always creates OpenTelemetry spans through the OTel API, but no SDK tracer provider
or exporter is configured, so they are non-recording no-ops and nothing leaves the process.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from typing import Any

os.environ.setdefault("ADK_DISABLE_TELEMETRY", "1")  # harmless if the version ignores it

from common import Calls, Handoff, Text  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.run_config import RunConfig  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.tools.agent_tool import AgentTool  # noqa: E402
from google.genai import types  # noqa: E402

try:  # the capability declaration API exists in recent versions only
    from google.adk.models._capabilities import LlmCapabilities  # noqa: E402
except ImportError:  # pragma: no cover
    LlmCapabilities = None

NAME = "google-adk"
DISTS = ["google-adk", "google-genai"]
NOTES = {
    "tracing": "OTel API spans only, no tracer provider/exporter configured (non-recording)",
    "fake_model": "minimal google.adk.models.BaseLlm subclass (generate_content_async)",
    "handoff": "native sub_agents + transfer_to_agent",
    "agent_tool": "native AgentTool",
    "history_memory": "InMemorySessionService",
    "history_sqlite": "DatabaseSessionService(sqlite+aiosqlite:///file), busy timeout and "
    "pool_timeout raised to 300 s (defaults fail at 1,000 concurrent sessions)",
}

APP = "bench"
USER = "u"
RUN_CONFIG = RunConfig(max_llm_calls=1_000_000)
SQLITE_BUSY_TIMEOUT = float(os.environ.get("BENCH_ADK_SQLITE_TIMEOUT", "300"))
USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=1, candidates_token_count=1, total_token_count=2
)


def setup() -> None:
    pass


class FakeLlm(BaseLlm):
    """Hands the request to the scenario script and converts its action to an LlmResponse."""

    script: Any = None
    agent: str = ""

    if LlmCapabilities is not None:

        @property
        def capabilities(self):  # declare, so ADK does not fall back to name-based detection
            return LlmCapabilities(output_schema_and_tools=False)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents
        hist_len = len(contents)
        tool_tail: list[str] = []
        last_user = None
        i = hist_len - 1
        while i >= 0:
            parts = contents[i].parts or ()
            responses = [p.function_response for p in parts if p.function_response is not None]
            if not responses:
                break
            for r in reversed(responses):
                resp = r.response or {}
                tool_tail.append(str(resp.get("result", resp)))
            i -= 1
        tool_tail.reverse()
        if not tool_tail and contents:
            last = contents[-1]
            if last.role == "user" and last.parts:
                last_user = "".join(p.text for p in last.parts if p.text)
        action = await self.script.model(self.agent, hist_len, tool_tail, last_user)
        if isinstance(action, Text):
            parts_out = [types.Part(text=action.text)]
        elif isinstance(action, Calls):
            parts_out = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=c.id,
                        name=c.name,
                        args=c.args if c.query is None else {"request": c.query},
                    )
                )
                for c in action.calls
            ]
        elif isinstance(action, Handoff):
            parts_out = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=action.id, name="transfer_to_agent", args={"agent_name": action.target}
                    )
                )
            ]
        else:  # pragma: no cover
            raise TypeError(action)
        content = types.Content(role="model", parts=parts_out)
        yield LlmResponse(content=content, usage_metadata=USAGE)


def _fake(script: Any, agent: str) -> FakeLlm:
    return FakeLlm(model="bench-fake", script=script, agent=agent)


def _msg(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


async def _run(runner: Runner, session_id: str, text: str) -> tuple[str | None, str | None]:
    final = None
    author = None
    async for event in runner.run_async(
        user_id=USER, session_id=session_id, new_message=_msg(text), run_config=RUN_CONFIG
    ):
        if event.content and event.content.parts and event.author != "user":
            author = event.author
            texts = [p.text for p in event.content.parts if p.text]
            if texts and event.is_final_response():
                final = "".join(texts)
    return final, author


async def _one_shot(agent: LlmAgent):
    service = InMemorySessionService()
    runner = Runner(agent=agent, app_name=APP, session_service=service)

    async def run():
        session = await service.create_session(app_name=APP, user_id=USER)
        return await _run(runner, session.id, "hello")

    return run


# ------------------------------------------------------------------------------------ S1


async def build_tool_loop(script):
    async def lookup(i: int) -> str:
        """Look up item i."""
        return script.lookup(i)

    agent = LlmAgent(name="a0", model=_fake(script, "a0"), instruction="Use the tool.",
                     tools=[lookup])
    return await _one_shot(agent)


# ------------------------------------------------------------------------------------ S2


async def build_handoff_chain(script):
    nxt = None
    for i in range(script.n, -1, -1):
        agent = LlmAgent(
            name=f"a{i}",
            model=_fake(script, f"a{i}"),
            instruction=f"You are agent {i}.",
            description=f"Agent {i}.",
            sub_agents=[nxt] if nxt is not None else [],
        )
        nxt = agent
    return await _one_shot(nxt)


# ------------------------------------------------------------------------------------ S3


async def build_fanout(script):
    tools = []
    for j in range(script.n):
        child = LlmAgent(
            name=f"child_{j}", model=_fake(script, f"child_{j}"), instruction="Answer.",
            description=f"Child agent {j}.",
        )
        tools.append(AgentTool(agent=child))
    parent = LlmAgent(name="parent", model=_fake(script, "parent"),
                      instruction="Ask the children.", tools=tools)
    return await _one_shot(parent)


# ------------------------------------------------------------------------------------ S4/S5


class _Chat:
    def __init__(self, runner: Runner, session_id: str) -> None:
        self.runner = runner
        self.session_id = session_id

    async def send(self, text: str) -> str | None:
        final, _ = await _run(self.runner, self.session_id, text)
        return final


class _App:
    def __init__(self, runner: Runner, service: Any) -> None:
        self.runner = runner
        self.service = service

    async def session(self, session_id: int):
        session = await self.service.create_session(
            app_name=APP, user_id=USER, session_id=f"s{session_id}"
        )
        return _Chat(self.runner, session.id)

    async def close(self) -> None:
        close = getattr(self.service, "close", None)
        if close is not None:
            await close()


async def build_chat(script, store: str, db_path: str):
    if store == "memory":
        service = InMemorySessionService()
    elif store == "sqlite_full":
        from frameworks import NotSupported

        raise NotSupported("the like-for-like SQLite cell is measured against LangGraph")
    elif store == "postgres":
        from frameworks import NotSupported

        raise NotSupported("not measured on PostgreSQL (bench/durable.py compares LangGraph and "
                           "the OpenAI Agents SDK there, as issue 18 asks)")
    else:
        if os.environ.get("BENCH_ADK_SQLITE") == "sqlite_session_service":
            from google.adk.sessions.sqlite_session_service import SqliteSessionService

            service = SqliteSessionService(db_path=db_path)
        else:
            from google.adk.sessions import DatabaseSessionService

            # sqlite3's default 5 s busy timeout fails ("database is locked") with hundreds of
            # concurrent sessions; a longer one is the ordinary SQLAlchemy/sqlite3 setting.
            service = DatabaseSessionService(
                db_url=f"sqlite+aiosqlite:///{db_path}",
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT},
                pool_timeout=SQLITE_BUSY_TIMEOUT,
            )
    agent = LlmAgent(name="a0", model=_fake(script, "a0"), instruction="Chat.")
    return _App(Runner(agent=agent, app_name=APP, session_service=service), service)
