"""A turn on a session opened again for it (a stateless server opens one per request) costs
about the same at 5,000 events as at 50, on SQLite and on PostgreSQL: the process keeps a
snapshot of the conversation and reads only the events appended since (issue 43, item 2). The
snapshot is never trusted over the log: what another writer appended is read, and a session
deleted and made again under the same id starts from its own log."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, Runner, tool
from relayrace.core.events import MessageEvent
from relayrace.core.messages import Message
from relayrace.sessions import MemorySession, SessionStore, SQLiteStore, open_store
from relayrace.testing import FunctionModel, text, tool_call

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import reopen  # noqa: E402 - the benchmark's filling and turns, found via bench/


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "sqlite":
        made: SessionStore = SQLiteStore(tmp_path / "s.db")
    else:
        pytest.importorskip("psycopg")
        made = open_store(request.getfixturevalue("postgres_url"))
    yield made
    await made.aclose()


def _store_module(store: SessionStore) -> Any:
    import relayrace.sessions.sqlite as sqlite_module

    if isinstance(store, SQLiteStore):
        return sqlite_module
    import relayrace.sessions.postgres as postgres_module

    return postgres_module


@pytest.fixture
def decoded(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many events each read of the store decoded, read by read."""
    module = _store_module(store)
    counts: list[int] = []
    real = module.load_events

    def counting(lines: Any) -> Any:
        counts.append(len(lines))
        return real(lines)

    monkeypatch.setattr(module, "load_events", counting)
    return counts


@tool
def look(what: str) -> str:
    """Look something up."""
    return f"found {what}"


def _agent() -> Agent[Any]:
    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "user" and last.content.startswith("look"):
            return tool_call("look", {"what": last.content})
        return text(f"seen {len(request.messages)}")
    return Agent("chat", instructions="x", tools=[look], model=FunctionModel(reply))


async def test_a_reopened_session_reads_only_what_was_appended_since(
        store: SessionStore, decoded: list[int]) -> None:
    await reopen.fill(store, "long", 2000)
    agent = _agent()
    await Runner.run(agent, "hello", session=store.session("long"))  # the process's first open
    assert decoded[0] == 2000
    decoded.clear()
    for i in range(3):
        result = await Runner.run(agent, f"hello {i}", session=store.session("long"))
        assert result.final_output == f"seen {2000 // 2 + 2 * i + 3}"  # every message seen
    assert sum(decoded) == 0, decoded


async def test_per_turn_at_5000_events_is_within_3x_of_50(store: SessionStore) -> None:
    agent = reopen._agent()
    for n in (50, 5000):
        await reopen.fill(store, f"h{n}", n)
        await reopen.turn(store, agent, f"h{n}")
    rounds: dict[int, list[float]] = {50: [], 5000: []}
    for _ in range(5):  # interleaved: the machine's speed changes alike for both
        for n in rounds:
            rounds[n].append(statistics.median(
                [await reopen.turn(store, agent, f"h{n}") for _ in range(7)]))
    short, long = min(rounds[50]), min(rounds[5000])
    assert long <= 3 * short, (rounds, long / short)


async def test_a_snapshot_gives_the_view_the_whole_log_gives(store: SessionStore) -> None:
    agent = _agent()
    for said in ["hi", "look up the weather", "thanks", "look up the news", "bye"]:
        await Runner.run(agent, said, session=store.session("c"))
    from_snapshot = await store.session("c").view()
    whole = await store.session("c").get_events()
    rebuilt = MemorySession()
    await rebuilt.append(whole)
    expected = await rebuilt.view()
    assert from_snapshot.messages == expected.messages
    assert (from_snapshot.size, from_snapshot.active, from_snapshot.run_id) == \
        (expected.size, expected.active, expected.run_id)
    assert from_snapshot.ended == expected.ended and from_snapshot.started == expected.started


async def test_what_another_writer_appended_is_read_after_the_snapshot(
        store: SessionStore) -> None:
    agent = _agent()
    await Runner.run(agent, "first", session=store.session("c"))
    other = store.session("c")
    await other.get_events()  # a writer that read the log, then appends to it
    await other.append([MessageEvent(agent="chat", message=Message("user", "from elsewhere")),
                        MessageEvent(agent="chat", message=Message("assistant", "noted"))])
    result = await Runner.run(agent, "second", session=store.session("c"))
    assert result.final_output == "seen 5"
    view = await store.session("c").view()
    assert [m.content for m in view.messages] == ["first", "seen 1", "from elsewhere", "noted",
                                                  "second", "seen 5"]


def _delete_elsewhere(store: SessionStore, session_id: str) -> None:
    """Delete a session as another process does: through a connection of its own."""
    tables = ["events", "leases", "sessions"]
    if isinstance(store, SQLiteStore):
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            for table in tables:
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
        return
    import psycopg

    with psycopg.connect(store.url, autocommit=True) as conn:
        for table in tables:
            conn.execute(f"DELETE FROM relayrace_{table} WHERE session_id = %s", (session_id,))


@pytest.mark.parametrize("where", ["here", "elsewhere"])
async def test_a_session_made_again_under_its_id_starts_from_its_own_log(
        store: SessionStore, where: str) -> None:
    agent = _agent()
    for said in ["one", "two"]:
        await Runner.run(agent, said, session=store.session("c"))
    if where == "here":
        assert await store.delete("c")
    else:
        _delete_elsewhere(store, "c")
    time.sleep(0.002)  # another created_at, whatever the clock's resolution
    result = await Runner.run(agent, "again", session=store.session("c"))
    assert result.final_output == "seen 1"
    assert [m.content for m in (await store.session("c").view()).messages] == \
        ["again", "seen 1"]
