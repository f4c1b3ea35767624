"""Stores wait, and do not give up at their defaults (issue 43, item 1): a thousand conversations
on PostgreSQL's default pool of ten finish on a loaded host, a thousand on one SQLite file
finish, and a SQLite file locked by another process for 6 s (a backup's pause) fails none of 20
runs waiting for it. A wait that does run out fails only the runs whose own wait ran out, with
an error naming the setting to raise, and leaves their sessions valid."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, messages_of, wait_until
from relayrace import Agent, Runner, SessionStoreBusy, UserError
from relayrace.core.events import RunFinishedEvent
from relayrace.sessions import SQLiteSession, SQLiteStore
from relayrace.testing import FunctionModel, text

HOLDER = """
import pathlib, sqlite3, sys, time
db, seconds, locked = sys.argv[1], float(sys.argv[2]), sys.argv[3]
conn = sqlite3.connect(db, isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
pathlib.Path(locked).touch()
time.sleep(seconds)
conn.execute("COMMIT")
"""

BUSY_LOOP = "while True: pass"


def _chat() -> Agent[Any]:
    return Agent("chat", instructions="x", model=FunctionModel(
        lambda request: text(f"reply {len(request.messages)}"), record=False))


async def _locked(tmp_path: Path, db: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Another process holding ``db``'s write lock for ``seconds`` from now."""
    script, locked = tmp_path / "holder.py", tmp_path / "locked"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), str(db), str(seconds), str(locked)])
    await wait_until(locked.exists, "the other process to lock the file", timeout=30)
    return proc


async def test_a_6_s_lock_by_another_process_fails_none_of_20_runs_at_the_defaults(
        tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SQLiteStore(db)
    agent = _chat()
    await Runner.run(agent, "warm", session=store.session("warm"))
    proc = await _locked(tmp_path, db, 6.0)
    started = time.monotonic()
    try:
        results = await asyncio.gather(*(Runner.run(agent, f"hi {n}", session=store.session(
            f"s{n}")) for n in range(20)), return_exceptions=True)
    finally:
        proc.wait(timeout=30)
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert time.monotonic() - started >= 5.0  # they did wait for the lock
    assert all(r.final_output == "reply 1" for r in results)  # type: ignore[union-attr]


async def test_a_wait_that_runs_out_fails_only_the_runs_whose_own_wait_ran_out(
        tmp_path: Path) -> None:
    """Runs of one file with a 1 s busy timeout and with the default one wait together for a
    3 s lock: the short ones fail, naming busy_timeout, and leave their sessions valid; none
    of the others fails with them."""
    db = tmp_path / "s.db"
    agent = _chat()
    short = [SQLiteSession(f"short{n}", db, busy_timeout=1.0) for n in range(10)]
    patient = [SQLiteSession(f"patient{n}", db) for n in range(10)]
    for session in short:  # each holds a conversation already
        await Runner.run(agent, "before", session=session)
    proc = await _locked(tmp_path, db, 3.0)
    try:
        results = await asyncio.gather(
            *(Runner.run(agent, "during", session=s) for pair in zip(short, patient,
                                                                     strict=True)
              for s in pair), return_exceptions=True)
    finally:
        proc.wait(timeout=30)
    failed = results[0::2]
    assert all(isinstance(r, SessionStoreBusy) for r in failed), failed
    assert all(not isinstance(r, BaseException) for r in results[1::2]), results[1::2]
    error = failed[0]
    assert isinstance(error, SessionStoreBusy) and error.setting == "busy_timeout"
    assert "raise the store's busy_timeout" in str(error) and error.retryable
    for session in short:  # valid: whole turns only, and the next run goes on from them
        again = await Runner.run(agent, "after", session=session)
        events = await session.get_events()
        assert_valid_protocol(messages_of(events))
        assert [m.content for m in messages_of(events) if m.role == "user"][0] == "before"
        assert isinstance(events[-1], RunFinishedEvent) and again.final_output.startswith(
            "reply")


async def test_1000_sessions_on_one_sqlite_file_finish_at_the_defaults(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    agent = _chat()

    async def conversation(n: int) -> None:
        session = store.session(f"c{n}")
        for turn in range(3):
            result = await Runner.run(agent, f"turn {turn}", session=session)
            assert result.final_output == f"reply {2 * turn + 1}"

    results = await asyncio.gather(*(conversation(n) for n in range(1000)),
                                   return_exceptions=True)
    assert [r for r in results if r is not None] == []


@pytest.fixture
def busy_neighbours() -> Iterator[None]:
    """A loaded host: CPU-bound processes beside the test, as on a busy server."""
    procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(3)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


async def test_1000_concurrent_sessions_on_the_default_postgres_pool_finish_on_a_loaded_host(
        postgres_url: str, busy_neighbours: None) -> None:
    from relayrace.sessions.postgres import PostgresStore

    store = PostgresStore(postgres_url)  # the defaults: a pool of 10
    agent = _chat()
    await Runner.run(agent, "warm", session=store.session("warm"))

    async def conversation(n: int) -> None:
        session = store.session(f"c{n}")
        for turn in range(3):
            result = await Runner.run(agent, f"turn {turn}", session=session)
            assert result.final_output == f"reply {2 * turn + 1}"

    try:
        results = await asyncio.gather(*(conversation(n) for n in range(1000)),
                                       return_exceptions=True)
    finally:
        await store.aclose()
    failures = [r for r in results if r is not None]
    assert failures == [], f"{len(failures)} of 1,000 failed, the first: {failures[:1]}"


@pytest.mark.parametrize(("option", "value"), [("busy_timeout", -1), ("lease_ttl", 0),
                                               ("busy_timeout", "5"), ("lease_ttl", True)])
def test_a_store_refuses_waits_that_are_not_seconds_by_name(
        tmp_path: Path, option: str, value: Any) -> None:
    with pytest.raises(UserError, match=f"^{option} is a number of seconds"):
        SQLiteStore(tmp_path / "s.db", **{option: value})
    with pytest.raises(UserError, match=f"^{option} is a number of seconds"):
        SQLiteSession("s", tmp_path / "s.db", **{option: value})


def test_a_postgres_store_refuses_a_pool_wait_or_size_that_is_not_one_by_name() -> None:
    pytest.importorskip("psycopg")
    from relayrace.sessions.postgres import PostgresStore

    url = "postgresql://u@localhost/db"
    with pytest.raises(UserError, match="^pool_timeout is a number of seconds >= 0"):
        PostgresStore(url, pool_timeout=float("inf"))
    with pytest.raises(UserError, match="^pool_size counts connections"):
        PostgresStore(url, pool_size=0)
    with pytest.raises(TypeError, match="pool_timout"):  # an option it does not have, by name
        PostgresStore(url, pool_timout=5)  # type: ignore[call-arg]
