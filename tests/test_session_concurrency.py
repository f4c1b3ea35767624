"""One writer per session: leases, compare-and-append, and store I/O off the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, messages_of, of_type, wait_until
from relayrace import (
    Agent,
    AgentEvent,
    Message,
    MessageEvent,
    RunFinishedEvent,
    Runner,
    RunStartedEvent,
    SessionConflictError,
    SessionInUseError,
    SessionStoreBusy,
    UserError,
    tool,
)
from relayrace.sessions import MemorySession, Session, SQLiteSession
from relayrace.testing import FunctionModel, text, tool_call

PAIRS = 20


@tool
async def echo(word: str) -> str:
    """Repeat a word."""
    return word


def writer(delay: float = 0.1, on_request: Any = None) -> Agent:
    """An agent that calls ``echo`` with its input's first word, then answers with it."""

    async def fn(request: Any) -> Any:
        if on_request is not None:
            await on_request(request)
        last = request.messages[-1]
        if last.role == "user":
            return tool_call("echo", {"word": last.content.split()[0]})
        return text(f"{last.content} done")

    return Agent("root", instructions="x", model=FunctionModel(fn, delay=delay), tools=[echo])


def assert_valid_history(events: Sequence[AgentEvent]) -> int:
    """Fail unless runs follow one another whole, every call answered; return the run count.

    Each run's messages must all come from the run's own input (its first word).
    """
    runs: list[list[AgentEvent]] = []
    current: list[AgentEvent] | None = None
    for e in events:
        if isinstance(e, RunStartedEvent):
            assert current is None, "a run started inside another run"
            current = []
            runs.append(current)
        assert current is not None, f"{e.kind} outside a run"
        current.append(e)
        if isinstance(e, RunFinishedEvent):
            current = None
    assert current is None, "the last run never finished"
    assert_valid_protocol(messages_of(events))
    for run in runs:
        words = {m.content.split()[0] for m in messages_of(run) if m.content}
        assert len(words) == 1, f"one run holds two writers' messages: {words}"
    return len(runs)


# --------------------------------------------------------------------------- pairs of runs


def run_pairs(make: Any, wait: float | None) -> list[tuple[Session, list[str]]]:
    """Start two runs on each of PAIRS sessions at once, each run in its own thread and loop."""
    sessions = [make(i) for i in range(PAIRS)]
    outcomes: list[list[str]] = [[] for _ in range(PAIRS)]
    start = threading.Barrier(2 * PAIRS)

    def one(i: int, who: str) -> None:
        session = sessions[i] if isinstance(sessions[i], MemorySession) else make(i)
        start.wait()
        try:
            asyncio.run(Runner.run(writer(), f"{who} {i}", session=session,
                                   wait_for_session=wait))
            outcomes[i].append("ok")
        except SessionInUseError as exc:
            assert exc.session_id == session.session_id
            outcomes[i].append("refused")

    threads = [threading.Thread(target=one, args=(i, who))
               for i in range(PAIRS) for who in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return list(zip(sessions, outcomes, strict=True))


def makers(tmp_path: Path) -> dict[str, Any]:
    return {
        "memory": lambda i, made={}: made.setdefault(i, MemorySession(f"m{i}")),  # noqa: B006
        "sqlite": lambda i: SQLiteSession(f"s{i}", tmp_path / "pairs.db"),
    }


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_second_run_on_a_busy_session_is_refused(tmp_path: Path, store: str) -> None:
    pairs = run_pairs(makers(tmp_path)[store], wait=None)
    refused = 0
    for session, outcome in pairs:
        assert sorted(outcome) in (["ok", "ok"], ["ok", "refused"])
        refused += outcome.count("refused")
        runs = assert_valid_history(asyncio.run(session.get_events()))
        assert runs == outcome.count("ok")
    assert refused  # the runs of a pair overlap (each takes 0.2 s), so most pairs clash


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_run_asked_to_wait_for_the_session_queues(tmp_path: Path, store: str) -> None:
    for session, outcome in run_pairs(makers(tmp_path)[store], wait=10.0):
        assert outcome == ["ok", "ok"]
        assert assert_valid_history(asyncio.run(session.get_events())) == 2


PAIR_SCRIPT = """
import asyncio, sys, pathlib
sys.path.insert(0, {tests!r})
from test_session_concurrency import writer
from relayrace import Runner, SessionInUseError
from relayrace.sessions import SQLiteSession

db, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

async def one(i):
    try:
        # Slow enough that the two processes overlap even on a loaded machine.
        await Runner.run(writer(0.5), f"{{who}} {{i}}", session=SQLiteSession(f"p{{i}}", db))
        return "ok"
    except SessionInUseError:
        return "refused"

async def main():
    pathlib.Path(db + ".ready-" + who).touch()
    while not pathlib.Path(db + ".go").exists():
        await asyncio.sleep(0.005)
    print(" ".join(await asyncio.gather(*(one(i) for i in range(n)))))

asyncio.run(main())
"""


def test_runs_in_two_processes_take_turns_on_each_session(tmp_path: Path) -> None:
    db = tmp_path / "procs.db"
    script = tmp_path / "pair.py"
    script.write_text(PAIR_SCRIPT.format(tests=str(Path(__file__).parent)))
    procs = {who: subprocess.Popen([sys.executable, str(script), str(db), who, str(PAIRS)],
                                   stdout=subprocess.PIPE, text=True)
             for who in ("alice", "bob")}
    deadline = time.monotonic() + 30
    while not all(Path(f"{db}.ready-{who}").exists() for who in procs):
        assert time.monotonic() < deadline, "the writer processes did not start"
        time.sleep(0.01)
    Path(f"{db}.go").touch()
    outcomes = {who: p.communicate(timeout=60)[0].split() for who, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values())
    refused = 0
    for i in range(PAIRS):
        pair = sorted(outcomes[who][i] for who in procs)
        assert pair in (["ok", "ok"], ["ok", "refused"])
        refused += pair.count("refused")
        events = asyncio.run(SQLiteSession(f"p{i}", db).get_events())
        assert assert_valid_history(events) == pair.count("ok")
    assert refused


# --------------------------------------------------------------------------- leases


async def test_a_lease_left_by_a_crashed_process_lapses(tmp_path: Path) -> None:
    db, held = tmp_path / "crash.db", tmp_path / "held"
    script = tmp_path / "holder.py"
    script.write_text(
        "import asyncio, pathlib, sys\n"
        "from relayrace.sessions import SQLiteSession\n"
        "async def main():\n"
        "    async with SQLiteSession('c', sys.argv[1], lease_ttl=0.6).lease():\n"
        "        pathlib.Path(sys.argv[2]).touch()\n"
        "        await asyncio.sleep(60)\n"
        "asyncio.run(main())\n")
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(held)])

    def holding() -> bool:
        assert proc.poll() is None, f"the holder exited with {proc.returncode}"
        return held.exists()

    try:
        await wait_until(holding, "the holder process to take the lease", timeout=30)
        # Real time is what is tested: past twice the TTL, the live holder still renews it.
        await asyncio.sleep(1.2)
        with pytest.raises(SessionInUseError, match="'c' has a run in progress"):
            await Runner.run(writer(0), "alice", session=SQLiteSession("c", db))
    finally:
        proc.kill()  # the holder dies without releasing its lease
        proc.wait()
    result = await Runner.run(writer(0), "bob", session=SQLiteSession("c", db),
                              wait_for_session=5.0)
    assert result.final_output == "bob done"


async def test_an_expired_lease_row_does_not_hold_the_session(tmp_path: Path) -> None:
    db = tmp_path / "rows.db"
    session = SQLiteSession("r", db)
    await Runner.run(writer(0), "first", session=session)  # the file and its tables exist
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("INSERT INTO leases VALUES ('r', 'crashed', ?)", (time.time() - 1,))
    result = await Runner.run(writer(0), "second", session=session)
    assert result.final_output == "second done"
    with conn:
        conn.execute("INSERT INTO leases VALUES ('r', 'alive', ?)", (time.time() + 60,))
    conn.close()
    with pytest.raises(SessionInUseError):
        await Runner.run(writer(0), "third", session=SQLiteSession("r", db))
    assert assert_valid_history(await session.get_events()) == 2


async def test_the_lease_is_released_however_the_run_ends() -> None:
    session = MemorySession()

    async def fail(request: Any) -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await Runner.run(writer(0, on_request=fail), "crash", session=session)
    slow = writer(10)
    task = asyncio.create_task(Runner.run(slow, "slow", session=session))
    await wait_until(lambda: slow.model.requests, "the run to hold the lease and ask its model")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = await Runner.run(writer(0), "fine", session=session)
    assert result.final_output == "fine done"


async def test_wait_for_session_must_be_a_finite_number_of_seconds() -> None:
    with pytest.raises(UserError, match="wait_for_session"):
        await Runner.run(writer(0), "x", wait_for_session=-1)


# --------------------------------------------------------------------------- compare-and-append


def note(content: str) -> MessageEvent:
    return MessageEvent(agent="root", path="root", message=Message.user(content))


async def test_an_append_after_another_writers_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "cas.db"
    mine, other = SQLiteSession("x", db), SQLiteSession("x", db)
    await mine.append([note("one")])
    await mine.view()
    await other.append([note("two")])
    with pytest.raises(SessionConflictError, match="another writer") as caught:
        await mine.append([note("three"), note("four")])
    assert (caught.value.session_id, caught.value.expected, caught.value.found) == ("x", 1, 2)
    with pytest.raises(SessionConflictError):  # later batches may build on the refused one
        await mine.append([note("five")])
    assert [m.content for m in messages_of(await mine.get_events())] == ["one", "two"]
    await mine.view()  # read the log again: appends go on from it
    await mine.append([note("six")])
    assert [m.content for m in messages_of(await other.get_events())] == ["one", "two", "six"]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_reading_the_events_is_what_the_next_append_must_extend(
    store: str, tmp_path: Path
) -> None:
    if store == "memory":
        first: Any = MemorySession("z")
        second: Any = first  # one object, written behind its back through its list
        sneak = first.events.append
    else:
        first, second = SQLiteSession("z", tmp_path / "z.db"), SQLiteSession("z", tmp_path / "z.db")
        sneak = None
    await first.append([note("zero")])
    await first.get_events()
    await second.get_events()
    if sneak is not None:
        sneak(note("one"))
    else:
        await second.append([note("one")])
    with pytest.raises(SessionConflictError):  # it read a log that has grown since
        await first.append([note("two")])
    assert [m.content for m in messages_of(await first.get_events())] == ["zero", "one"]
    await first.append([note("two")])  # read again: now it extends what it saw
    assert [m.content for m in messages_of(await first.get_events())] == ["zero", "one", "two"]


async def test_a_run_that_another_writer_slips_past_ends_with_a_conflict(tmp_path: Path) -> None:
    db = tmp_path / "slip.db"
    intruder = SQLiteSession("y", db)

    async def intrude(request: Any) -> None:
        await intruder.append([note("intruder")])  # appends without holding the lease

    with pytest.raises(SessionConflictError):
        await Runner.run(writer(0, on_request=intrude), "alice", session=SQLiteSession("y", db))
    events = await SQLiteSession("y", db).get_events()
    assert [m.content for m in messages_of(events)] == ["alice", "intruder"]
    result = await Runner.run(writer(0), "bob", session=SQLiteSession("y", db))
    assert result.final_output == "bob done"
    assert_valid_protocol(messages_of(await intruder.get_events()))


async def test_a_memory_session_refuses_an_append_to_a_log_changed_behind_it() -> None:
    session = MemorySession()
    await session.append([note("one")])
    session.events.append(note("behind its back"))
    with pytest.raises(SessionConflictError):
        await session.append([note("two")])
    assert [m.content for m in (await session.view()).messages] == ["one", "behind its back"]
    await session.append([note("two")])
    assert len(session.events) == 3


# --------------------------------------------------------------------------- a locked file


HOLDER = """
import pathlib, sqlite3, sys, time
db, go, locked = sys.argv[1:]
conn = sqlite3.connect(db, isolation_level=None)
while not pathlib.Path(go).exists():
    time.sleep(0.005)
conn.execute("BEGIN IMMEDIATE")
pathlib.Path(locked).touch()
time.sleep(6)
conn.execute("COMMIT")
"""


async def test_a_file_locked_by_another_process_never_stalls_the_loop(tmp_path: Path) -> None:
    db, go, locked = tmp_path / "lock.db", tmp_path / "go", tmp_path / "locked"
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    first = SQLiteSession("a", db, busy_timeout=1.0)
    await Runner.run(writer(0), "warm", session=first)
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(go), str(locked)])
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def lock_mid_run(request: Any) -> None:
        if request.messages[-1].content == "alice":  # the input is written: lock the file
            go.touch()
            await wait_until(locked.exists, "the other process to lock the file", timeout=30,
                             every=0.005)

    ticking = asyncio.create_task(ticker())
    try:
        with pytest.raises(SessionStoreBusy, match="'a'.*busy timeout") as caught:
            await Runner.run(writer(0, on_request=lock_mid_run), "alice", session=first)
        assert caught.value.retryable and caught.value.session_id == "a"
        # A run willing to wait out the lock goes ahead once it is released.
        result = await Runner.run(writer(0), "bob", session=SQLiteSession("b", db,
                                                                          busy_timeout=8.0))
        assert result.final_output == "bob done"
    finally:
        ticking.cancel()
        go.touch()
        proc.wait(timeout=15)
    assert max(gaps) < 0.05, f"the event loop stalled for {max(gaps):.3f} s"
    # Nothing half-written: the busy run's log holds whole batches, and a later run works.
    events = await SQLiteSession("a", db).get_events()
    assert [m.content for m in messages_of(events)] == ["warm", "", "warm", "warm done",
                                                        "alice"]
    again = await Runner.run(writer(0), "carol", session=first)
    assert again.final_output == "carol done"
    assert_valid_protocol(messages_of(await first.get_events()))
    assert of_type(await first.get_events(), RunFinishedEvent)[-1].status == "completed"


async def test_a_new_file_another_process_is_writing_is_waited_for(tmp_path: Path) -> None:
    # Another process that just created the file holds its write lock as this one opens it.
    # Turning a new file to WAL needs that lock, and SQLite's busy handler does not wait for
    # it: two processes starting on a new file together used to fail one run at once.
    db = tmp_path / "new.db"
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    commit = asyncio.get_running_loop().call_later(0.5, other.execute, "COMMIT")
    try:
        result = await Runner.run(writer(0), "alice", session=SQLiteSession("n", db))
    finally:
        commit.cancel()
        other.close()
    assert result.final_output == "alice done"
    assert assert_valid_history(await SQLiteSession("n", db).get_events()) == 1


async def test_a_stream_on_a_busy_session_is_refused_or_waits() -> None:
    session = MemorySession()
    alice = writer(0.2)
    first = asyncio.create_task(Runner.run(alice, "alice", session=session))
    await wait_until(lambda: alice.model.requests, "alice's run to hold the lease")
    with pytest.raises(SessionInUseError):
        async for _ in Runner.stream(writer(0), "bob", session=session):
            pass
    stream = Runner.stream(writer(0), "carol", session=session, wait_for_session=5.0)
    kinds = [e.kind async for e in stream]
    assert (await first).final_output == "alice done"
    assert stream.result is not None and stream.result.final_output == "carol done"
    assert "run_finished" in kinds
    assert assert_valid_history(await session.get_events()) == 2


async def test_creating_a_sqlite_session_touches_no_file(tmp_path: Path) -> None:
    db = tmp_path / "later" / "s.db"
    session = SQLiteSession("lazy", db)
    child = session.child(path="root/helper", tool_call_id="c1")
    assert not db.parent.exists()
    await child.append([note("child first")])
    await Runner.run(writer(0), "parent", session=session)
    assert [i.session_id for i in SQLiteSession.list_sessions(db)] == ["lazy"]
    [info] = await session.children()
    assert info.session_id == child.session_id and info.path == "root/helper"
