"""A SQLite file's thread: trips per run, jobs waiting together committed as one transaction
(each in a savepoint of its own), and the ``synchronous`` level a session chooses."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, Runner, SessionConflictError, UserError
from relayrace.core.events import MessageEvent
from relayrace.core.messages import Message
from relayrace.sessions import SQLiteSession, SQLiteStore, _sqlitefile
from relayrace.testing import FunctionModel, text

AGENT = Agent("a", instructions="x", model=FunctionModel(lambda request: text("ok")))


class Counts:
    """Trips to the file's thread, and the statements its connection ran (each row of an
    ``executemany`` is one)."""

    def __init__(self) -> None:
        self.trips = 0
        self.statements: list[str] = []

    def statement(self, sql: str) -> None:
        self.statements.append(sql.partition(" ")[0])

    @property
    def begins(self) -> int:
        return self.statements.count("BEGIN")

    def take(self) -> tuple[int, list[str]]:
        """The trips and statements since the last call."""
        taken = (self.trips, self.statements)
        self.trips, self.statements = 0, []
        return taken


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    seen = Counts()
    for name in ("run", "grouped"):
        original = getattr(_sqlitefile.Database, name)

        def counted(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            seen.trips += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(_sqlitefile.Database, name, counted)
    yield seen


async def _traced(session: SQLiteSession, counts: Counts) -> None:
    """Count the statements of the session's file from now on (its connection opened)."""
    conn: sqlite3.Connection = await session._call(session._conn)
    conn.set_trace_callback(counts.statement)
    counts.take()


async def test_a_run_on_a_sqlite_session_makes_three_trips_and_gives_its_lease_back(
        tmp_path: Path, counts: Counts) -> None:
    path = tmp_path / "db.sqlite"

    def leases() -> list[tuple[str]]:
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT session_id FROM leases").fetchall()

    held: list[list[tuple[str]]] = []

    def reply(request: Any) -> Any:
        held.append(leases())  # the run holds its lease while the model answers
        if request.messages[-1].content == "fail":
            raise RuntimeError("the model failed")
        return text("ok")

    agent = Agent("a", instructions="x", model=FunctionModel(reply))
    session = SQLiteSession("s", path)
    await _traced(session, counts)
    for turn in range(3):
        result = await Runner.run(agent, f"turn {turn}", session=session)
        assert result.final_output == "ok"
        # The lease taken with the log's new events (the first run reads the session's row
        # too), the run's start, and its end with the lease row given back in the same
        # transaction; a batch's events are one statement, then its session's row. One run
        # alone has nothing to share its transactions with.
        assert counts.take() == (3, [
            "BEGIN", "INSERT", *["SELECT"] * (2 if turn == 0 else 1), "COMMIT",
            "BEGIN", "INSERT", "INSERT", "COMMIT",
            "BEGIN", "INSERT", "INSERT", "DELETE", "COMMIT"])
    with pytest.raises(RuntimeError):  # a failed run's end gives the lease back too
        await Runner.run(agent, "fail", session=session)
    trips, statements = counts.take()
    assert trips == 3 and statements[-2:] == ["DELETE", "COMMIT"]
    assert held == [[("s",)]] * 4 and leases() == []
    assert len(await session.get_events()) == 3 * 4 + 3  # the failed run: no answer
    # Another process's run gets the session at once.
    other = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", textwrap.dedent(f"""
        import asyncio
        from relayrace import Agent, Runner
        from relayrace.sessions import SQLiteSession
        from relayrace.testing import FunctionModel, text
        agent = Agent("a", instructions="x", model=FunctionModel(lambda r: text("there")))
        print(asyncio.run(Runner.run(agent, "hi", session=SQLiteSession(
            "s", {str(path)!r}, busy_timeout=0.0))).final_output)
        """)], capture_output=True, text=True, timeout=120)
    assert other.stdout.strip() == "there", other.stderr
    assert leases() == []


def _hold(db: _sqlitefile.Database) -> threading.Event:
    """Keep the file's thread busy until the returned event is set."""
    gate, holding = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        gate.wait()

    db.worker.jobs.put((hold, (), (0.0, ""), 0, True, None, _Done(), None, None))
    holding.wait()  # the thread runs it: the jobs queued from now on wait together
    return gate


class _Done:
    """The future of a job nobody waits for."""

    def set_result(self, result: object) -> None:
        pass

    def set_exception(self, error: BaseException) -> None:
        raise error


async def _queued(db: _sqlitefile.Database, jobs: int) -> None:
    while db.worker.jobs.qsize() < jobs:
        await asyncio.sleep(0.001)


async def test_runs_waiting_together_share_their_transactions(tmp_path: Path,
                                                              counts: Counts) -> None:
    path = tmp_path / "db.sqlite"
    sessions = [SQLiteSession(f"s{i}", path) for i in range(20)]
    await _traced(sessions[0], counts)
    db = _sqlitefile.Database.get(path)
    gate = _hold(db)
    runs = [asyncio.create_task(Runner.run(AGENT, "hi", session=s)) for s in sessions]
    await _queued(db, 20)  # every run's lease
    gate.set()
    for result in await asyncio.gather(*runs):
        assert result.final_output == "ok"
    # The twenty leases were taken in one transaction, with no savepoint each: at most
    # 2 x 20 + 1 transactions in all, not 3 x 20.
    assert counts.statements[:62] == ["BEGIN", *["INSERT", "SELECT", "SELECT"] * 20, "COMMIT"]
    assert counts.begins <= 2 * 20 + 1
    for s in sessions:
        assert len(await SQLiteSession(s.session_id, path).get_events()) == 4
    with sqlite3.connect(path) as conn:  # each given back with its run's end
        assert conn.execute("SELECT * FROM leases").fetchall() == []


async def test_appends_queued_together_are_written_with_one_statement_a_table(
        tmp_path: Path, counts: Counts) -> None:
    path = tmp_path / "db.sqlite"
    sessions = [SQLiteSession(f"s{i}", path) for i in range(10)]
    for s in sessions:
        await s.view()
    await _traced(sessions[0], counts)
    db = _sqlitefile.Database.get(path)
    gate = _hold(db)
    writes = [asyncio.create_task(s.append([MessageEvent(agent="a", message=Message.user(
        f"{s.session_id} one")), MessageEvent(agent="a", message=Message.user("two"))]))
        for s in sessions]
    await _queued(db, 10)
    again = asyncio.create_task(sessions[0].append([MessageEvent(
        agent="a", message=Message.user("three"))]))  # after its first batch, in the same group
    await _queued(db, 11)
    gate.set()
    await asyncio.gather(*writes, again)
    # Eleven batches of ten sessions: one statement for their events, one for their rows
    # (each made), instead of two each.
    assert counts.take() == (11, ["BEGIN", "SAVEPOINT", "INSERT", "INSERT", "RELEASE",
                                  "COMMIT"])
    for s in sessions:
        stored = await SQLiteSession(s.session_id, path).get_events()
        assert [e.message.content for e in stored] == [  # type: ignore[attr-defined]
            f"{s.session_id} one", "two", *(["three"] if s is sessions[0] else [])]
        assert (await s.view()).size == len(stored)
    infos = {i.session_id: i.event_count for i in SQLiteSession.list_sessions(path)}
    assert infos == {s.session_id: 3 if s is sessions[0] else 2 for s in sessions}


async def test_a_refused_batch_in_a_shared_transaction_leaves_the_others_written(
        tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    first, second, other = (SQLiteSession("x", path), SQLiteSession("x", path),
                            SQLiteSession("y", path))
    for s in (first, second, other):
        await s.view()

    def events(text_: str) -> list[MessageEvent]:
        return [MessageEvent(agent="a", message=Message.user(text_))]

    db = _sqlitefile.Database.get(path)
    gate = _hold(db)
    writes = [asyncio.create_task(s.append(events(name)))
              for s, name in ((first, "one"), (second, "two"), (other, "three"))]
    await _queued(db, 3)
    gate.set()
    done = await asyncio.gather(*writes, return_exceptions=True)
    assert done[0] is None and done[2] is None
    assert isinstance(done[1], SessionConflictError)  # x's position 1 was taken just before
    fresh = SQLiteSession("x", path)
    assert [e.message.content for e in await fresh.get_events()] == ["one"]
    assert [e.message.content for e in await SQLiteSession("y", path).get_events()] == ["three"]


async def test_a_job_failing_after_it_wrote_undoes_its_transaction_and_the_rest_run_anew(
        tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    before, after = SQLiteSession("before", path), SQLiteSession("after", path)
    for s in (before, after):
        await s.view()

    def half(conn: sqlite3.Connection) -> Any:
        conn.execute("INSERT INTO leases VALUES ('half', 'x', 0)")
        raise RuntimeError("failed half way")

    db = _sqlitefile.Database.get(path)
    gate = _hold(db)
    first = asyncio.create_task(before.append([MessageEvent(agent="a",
                                                            message=Message.user("one"))]))
    await _queued(db, 1)
    broken = asyncio.ensure_future(db.grouped(half, (), before._settings(), writes=True))
    third = asyncio.create_task(after.append([MessageEvent(agent="a",
                                                           message=Message.user("two"))]))
    await _queued(db, 3)
    gate.set()
    done = await asyncio.gather(first, broken, third, return_exceptions=True)
    # The batch before it went with the transaction; the one after was written in a new one.
    assert [type(d) for d in done] == [RuntimeError, RuntimeError, type(None)]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT session_id FROM events").fetchall() == [("after",)]
        assert conn.execute("SELECT * FROM leases").fetchall() == []
    with pytest.raises(RuntimeError):  # it may not build on a batch that is not there
        await before.append([MessageEvent(agent="a", message=Message.user("again"))])
    assert await before.get_events() == []
    await before.append([MessageEvent(agent="a", message=Message.user("again"))])
    assert [e.message.content for e in await SQLiteSession("before", path).get_events()] == [
        "again"]  # type: ignore[attr-defined]


async def test_a_session_chooses_sqlites_synchronous_level(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"

    async def level(session: SQLiteSession) -> int:
        await Runner.run(AGENT, "hi", session=session)
        found: int = await session._call(
            lambda: session._conn().execute("PRAGMA synchronous").fetchone()[0])
        return found

    assert await level(SQLiteSession("n", path)) == 1  # NORMAL
    full = SQLiteSession("f", path, synchronous="full")
    assert full.synchronous == "FULL" and await level(full) == 2
    assert full.child(path="a/b", tool_call_id="c").synchronous == "FULL"
    assert SQLiteStore(path, synchronous="FULL").session("g").synchronous == "FULL"
    for wrong in ("fast", 2, None):
        with pytest.raises(UserError, match="synchronous is one of SQLite's levels OFF, "
                                            "NORMAL, FULL, EXTRA"):
            SQLiteSession("w", path, synchronous=wrong)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="got 'fast'"):
        SQLiteStore(path, synchronous="fast")


async def test_appends_of_one_session_object_grouped_together_go_one_after_another(
        tmp_path: Path) -> None:
    # An eval run records each finished case in its own session this way: many appends of
    # one object at once, which the file's thread may commit as one group.
    session = SQLiteSession("log", tmp_path / "s.db")
    await session.append([MessageEvent(agent="a", path="a", message=Message("user", "start"))])
    await asyncio.gather(*(
        session.append([MessageEvent(agent="a", path="a", message=Message("user", f"m{i}"))])
        for i in range(12)))
    contents = [e.message.content for e in await session.get_events()]  # type: ignore[attr-defined]
    assert contents[0] == "start" and sorted(contents[1:]) == sorted(f"m{i}" for i in range(12))
    assert (await session.view()).size == 13
    assert (await SQLiteSession("log", tmp_path / "s.db").view()).size == 13
