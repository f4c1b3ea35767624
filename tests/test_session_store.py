"""`open_store` and the stores of memory and SQLite: listing, owners, paging, deleting.

The same behaviour on PostgreSQL is covered by the store conformance suite.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from relayrace import Agent, Runner, UserError
from relayrace.sessions import MemoryStore, SessionStore, SQLiteStore, open_store
from relayrace.testing import ScriptedModel, text, tool_call


def test_open_store_reads_paths_and_urls(tmp_path: Path) -> None:
    assert isinstance(open_store(None), SQLiteStore)
    by_path = open_store(tmp_path / "a.db")
    assert isinstance(by_path, SQLiteStore) and by_path.path == tmp_path / "a.db"
    by_url = open_store(f"sqlite:///{tmp_path}/b.db")
    assert isinstance(by_url, SQLiteStore) and by_url.path == tmp_path / "b.db"
    assert open_store(by_url.url).path == by_url.path  # its own URL names it again
    relative = open_store("sqlite:///rel/c.db")
    assert isinstance(relative, SQLiteStore) and relative.path == Path("rel/c.db")
    assert isinstance(open_store("memory://"), MemoryStore)


@pytest.mark.parametrize("url", ["mysql://x/y", "sqlite://", "sqlite:///", "", "  "])
def test_open_store_refuses_what_it_cannot_open_and_names_the_forms(url: str) -> None:
    with pytest.raises(UserError, match="sqlite:///") as caught:
        open_store(url)
    assert "postgresql://" in str(caught.value) or "three slashes" in str(caught.value)


# What turns a file of today's schema into one of schema 4: no updated_at, nor its indexes.
_SCHEMA_4 = ("DROP INDEX sessions_recent; DROP INDEX sessions_owner_recent; "
             "ALTER TABLE sessions DROP COLUMN updated_at; PRAGMA user_version = 4;")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    return MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")


async def _talk(store: SessionStore, session_id: str, *, owner: str = "") -> None:
    agent = Agent("a", instructions="x", model=ScriptedModel([text(f"hi {session_id}")]))
    await Runner.run(agent, "hello", session=store.session(session_id, owner=owner))


async def test_sessions_are_listed_newest_first_by_page_and_by_owner(store: SessionStore) -> None:
    assert await store.list_sessions() == []
    for sid, owner in [("s1", "k1"), ("s2", "k2"), ("s3", "k1")]:
        await _talk(store, sid, owner=owner)
    await _talk(store, "s1", owner="k1")  # s1 updated last
    listed = await store.list_sessions()
    assert [i.session_id for i in listed] == ["s1", "s3", "s2"]
    assert listed[0].event_count == 8 and listed[0].owner == "k1"
    assert [i.session_id for i in await store.list_sessions(owner="k1")] == ["s1", "s3"]
    assert [i.session_id for i in await store.list_sessions(owner="nobody")] == []
    assert [i.session_id for i in await store.list_sessions(limit=1, offset=1)] == ["s3"]
    assert await store.list_sessions(limit=0) == []
    with pytest.raises(UserError, match="limit >= 0"):
        await store.list_sessions(limit=-1)
    info = await store.get_info("s2")
    assert info is not None and info.owner == "k2" and info.event_count == 4
    assert await store.get_info("never") is None
    assert await store.exists("s3") and not await store.exists("never")
    assert not await store.exists(store.session(owner="k9").session_id)  # unwritten: absent


async def test_delete_takes_the_delegated_children_with_it(store: SessionStore) -> None:
    child_model = ScriptedModel([text("found it")])
    child = Agent("finder", instructions="x", model=child_model)
    parent_model = ScriptedModel([tool_call("find", {"query": "look"}), text("done")])
    parent = Agent("boss", instructions="x", model=parent_model,
                   tools=[child.as_tool(name="find", description="Finds.", report=False)])
    await Runner.run(parent, "go", session=store.session("p", owner="k"))
    await _talk(store, "other")
    children = await store.list_sessions(parent_id="p")
    assert len(children) == 1 and children[0].owner == "k"  # a child takes its parent's owner
    assert await store.delete("p")
    assert not await store.exists("p") and not await store.exists(children[0].session_id)
    assert await store.list_sessions(parent_id="p") == []
    assert [i.session_id for i in await store.list_sessions()] == ["other"]
    assert not await store.delete("p")


async def test_a_store_is_an_async_context_manager(tmp_path: Path) -> None:
    async with open_store(tmp_path / "x.db") as store:
        await _talk(store, "one")
    assert [i.session_id for i in await open_store(tmp_path / "x.db").list_sessions()] == ["one"]


async def test_listing_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "none.db")
    assert await store.list_sessions() == [] and await store.get_info("x") is None
    assert not await store.delete("x")
    assert not (tmp_path / "none.db").exists()


async def test_a_third_schema_file_gains_owners_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    await _talk(SQLiteStore(path), "old")
    conn = sqlite3.connect(path)  # make it a file of schema 3: no owner column
    conn.executescript(f"{_SCHEMA_4} ALTER TABLE sessions DROP COLUMN owner; "
                       "PRAGMA user_version = 3;")
    conn.close()
    import relayrace.sessions.sqlite as sqlite_module
    sqlite_module._Database._open.clear()  # a new process, as far as the file goes
    store = SQLiteStore(path)
    await _talk(store, "new", owner="k")
    assert {(i.session_id, i.owner) for i in await store.list_sessions()} == {
        ("old", ""), ("new", "k")}


async def test_a_fourth_schema_file_gains_each_sessions_last_activity(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    for sid in ("first", "second", "third"):
        await _talk(SQLiteStore(path), sid)
    await _talk(SQLiteStore(path), "first")  # active last
    conn = sqlite3.connect(path)
    conn.executescript(_SCHEMA_4)
    last = dict(conn.execute("SELECT session_id, MAX(time) FROM events GROUP BY session_id"))
    conn.close()
    import relayrace.sessions.sqlite as sqlite_module
    sqlite_module._Database._open.clear()  # a new process, as far as the file goes
    store = SQLiteStore(path)
    listed = await store.list_sessions()
    assert [i.session_id for i in listed] == ["first", "third", "second"]
    assert {i.session_id: i.updated_at for i in listed} == last  # backfilled from the events
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
    stored = dict(conn.execute("SELECT session_id, updated_at FROM sessions"))
    conn.close()
    assert stored == last
    await _talk(store, "second")  # an append keeps it: second is now the most recent
    assert [i.session_id for i in await store.list_sessions()] == ["second", "first", "third"]
