"""`SQLiteSession`: sessions in one SQLite file, the embedded default of the CLI.

The database runs in WAL mode and every ``append`` is one transaction, so a process that dies
between turns loses nothing. Each file has one connection and one worker thread of its own,
shared by every session of the process on that file: the event loop never waits on the disk
or on another process's lock, and the file's writes are serialized. A writer waits at most
``busy_timeout`` for another process's lock, then gets `SessionStoreBusy` with nothing written.

Events carry their position in the log (``seq``, unique per session): an append extends the
log as its session object last saw it, or is refused with `SessionConflictError`. A run holds
the session's lease (a row with an owner and an expiry, renewed while the run lives), so a
second run, in this process or another, is refused or waits; a crashed holder's lease lapses.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..core.events import AgentEvent, dump_events, load_events
from ..core.exceptions import SessionConflictError, SessionStoreBusy
from .base import (
    LeaseHolder,
    LogView,
    Session,
    SessionInfo,
    lease_row_owner,
    new_session_id,
    process_tag,
)

__all__ = ["DEFAULT_DB_PATH", "SQLiteSession"]

DEFAULT_DB_PATH = Path(".relayrace") / "sessions.db"

T = TypeVar("T")

_BUSY_TIMEOUT = 5.0
_RETRY_INTERVAL = 0.01  # seconds between tries of a lock SQLite's busy handler cannot wait for
_Job = tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]

_TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT,
    parent_tool_call_id TEXT,
    path TEXT NOT NULL DEFAULT '',
    child_key TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    updated_at REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS forks (
    session_id TEXT PRIMARY KEY,
    origin_id TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""
# After the migration: an older file's events have no seq, nor its sessions an updated_at,
# until it has run. A listing walks the recent indexes in order: a page costs its own rows.
_INDEXES = """
CREATE UNIQUE INDEX IF NOT EXISTS events_seq ON events(session_id, seq);
CREATE INDEX IF NOT EXISTS sessions_recent ON sessions(parent_id, updated_at DESC, session_id);
CREATE INDEX IF NOT EXISTS sessions_owner_recent
    ON sessions(owner, parent_id, updated_at DESC, session_id);
"""

_SCHEMA_VERSION = 5
# Columns later schema versions added to tables of older files.
_ADDED_COLUMNS = (
    ("sessions", "child_key", "TEXT NOT NULL DEFAULT ''"),
    ("events", "time", "REAL NOT NULL DEFAULT 0"),
    ("events", "seq", "INTEGER NOT NULL DEFAULT 0"),
    ("sessions", "owner", "TEXT NOT NULL DEFAULT ''"),
    ("sessions", "updated_at", "REAL NOT NULL DEFAULT 0"),
)


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is SQLite giving up on another connection's lock."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _work(jobs: queue.SimpleQueue[_Job | None], box: list[sqlite3.Connection]) -> None:
    """A file's worker thread: run its jobs in order; close the connection at the end."""
    while (job := jobs.get()) is not None:
        future, fn, args = job
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever waits for the job
                future.set_exception(exc)
        del job, future, fn, args  # hold nothing (and so no session) between jobs
    for conn in box:
        conn.close()


class _Database:
    """One file: its connection, used only by its worker thread, shared by the process.

    The object lives while a session on the file does; then the connection closes and the
    thread ends.
    """

    _open: ClassVar[weakref.WeakValueDictionary[str, _Database]] = (
        weakref.WeakValueDictionary())
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self._box: list[sqlite3.Connection] = []  # opened by the worker on first use
        self._timeout = -1.0
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # Daemon: a process may exit with sessions alive; SQLite survives an exit mid-write.
        threading.Thread(target=_work, args=(self._jobs, self._box), daemon=True,
                         name=f"relayrace-sqlite {path}").start()
        # SimpleQueue.put is safe to call from a finalizer, which may run inside any code.
        weakref.finalize(self, self._jobs.put, None)

    @classmethod
    def get(cls, path: str | os.PathLike[str]) -> _Database:
        """The file's database object (no I/O: the worker opens the file when first used)."""
        key = os.path.abspath(os.fspath(path))
        with cls._open_lock:
            db = cls._open.get(key)
            if db is None:
                db = cls._open[key] = _Database(key)
            return db

    def conn(self, busy_timeout: float) -> sqlite3.Connection:
        """The connection, waiting up to ``busy_timeout`` s for locks (worker thread only)."""
        if not self._box:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None)
            try:
                self._use_wal(conn, busy_timeout)
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_TABLES)
                self._migrate(conn)
                conn.executescript(_INDEXES)
            except BaseException:
                conn.close()
                raise
            self._box.append(conn)
            self._timeout = busy_timeout
        conn = self._box[0]
        if busy_timeout != self._timeout:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            self._timeout = busy_timeout
        return conn

    @staticmethod
    def _use_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
        """Put the file in WAL mode, waiting up to ``busy_timeout`` for another connection.

        Switching a new (or rollback-journal) file writes its header under a read lock that
        must become a write lock. SQLite never waits for that upgrade (the other holder may
        be waiting for this read lock to go) and answers SQLITE_BUSY at once, so two processes
        opening a new file together would fail one of them. Here the statement starts over,
        its read lock dropped, until the other connection is done or the timeout runs out.
        """
        deadline = time.monotonic() + busy_timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(_RETRY_INTERVAL)

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        """Bring a file written by an earlier relayrace to the current schema, in place."""
        if conn.execute("PRAGMA user_version").fetchone()[0] >= _SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")  # another process may be migrating the file too
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version < _SCHEMA_VERSION:
                for table, column, declaration in _ADDED_COLUMNS:
                    names = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                    if column not in names:
                        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
                if version < 3:  # number each session's events in the order they were written
                    conn.execute("UPDATE events SET seq = n.seq FROM (SELECT id, ROW_NUMBER() OVER "
                                 "(PARTITION BY session_id ORDER BY id) AS seq FROM events) AS n "
                                 "WHERE events.id = n.id")
                if version < 5:  # each session's last activity, kept by appends from now on
                    conn.execute("UPDATE sessions SET updated_at = COALESCE((SELECT MAX(time) "
                                 "FROM events e WHERE e.session_id = sessions.session_id), "
                                 "created_at)")
                conn.execute("DROP INDEX IF EXISTS events_session")  # events_seq replaces it
                conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """Queue ``fn(*args)`` for the file's thread."""
        future: Future[T] = Future()
        self._jobs.put((future, fn, args))
        return future

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` in the file's thread, to await; the loop goes on meanwhile."""
        return asyncio.wrap_future(self.submit(fn, *args))

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the file's thread, waiting for it (for code without a loop)."""
        return self.submit(fn, *args).result()


def _info(
    row: tuple[str, str | None, str | None, str, str, float, str, float, int,
               str | None, int | None]
) -> SessionInfo:
    return SessionInfo(
        session_id=row[0],
        parent_id=row[1],
        parent_tool_call_id=row[2],
        path=row[3],
        key=row[4],
        created_at=row[5],
        owner=row[6],
        updated_at=row[7],
        event_count=row[8],
        forked_from=row[9],
        forked_at=row[10] or 0,
    )


_COLUMNS = "session_id, parent_id, parent_tool_call_id, path, child_key, created_at, owner"
_SELECT = (f"SELECT {_COLUMNS}, updated_at, (SELECT COUNT(*) FROM events e WHERE e.session_id = "
           "s.session_id), (SELECT origin_id FROM forks f WHERE f.session_id = s.session_id), "
           "(SELECT at FROM forks f WHERE f.session_id = s.session_id) FROM sessions s")
# Every batch writes its session's row: made with the first events, later its last activity
# (the latest event time, as the events say; a fork's events keep their origin's times).
_TOUCH = (f"INSERT INTO sessions ({_COLUMNS}, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT(session_id) DO UPDATE SET updated_at = "
          "MAX(sessions.updated_at, excluded.updated_at)")
_LAST = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?"
_INSERT = "INSERT INTO events (session_id, seq, kind, time, data) VALUES (?, ?, ?, ?, ?)"
# Take the lease if it is free, its holder let it lapse, or this process left it (its own
# lease is free here, so the row outlived a release that found the file locked).
_TAKE_LEASE = ("INSERT INTO leases (session_id, owner, expires_at) VALUES (?, ?, ?) "
               "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, "
               "expires_at = excluded.expires_at "
               "WHERE leases.expires_at <= ? OR leases.owner LIKE ?")

# Take over the lease of a holder that died on this machine: the row as it was read.
_TAKE_DEAD = "UPDATE leases SET owner = ?, expires_at = ? WHERE session_id = ? AND owner = ?"


def _list(conn: sqlite3.Connection, parent_id: str | None) -> list[SessionInfo]:
    where = "parent_id IS NULL" if parent_id is None else "parent_id = ?"
    args: tuple[str, ...] = () if parent_id is None else (parent_id,)
    rows = conn.execute(f"{_SELECT} WHERE {where} ORDER BY created_at", args).fetchall()
    return [_info(r) for r in rows]


def _page(conn: sqlite3.Connection, parent_id: str | None, owner: str | None, limit: int,
          offset: int) -> list[SessionInfo]:
    """A page of sessions, most recently updated first (`SQLiteStore.list_sessions`)."""
    where, args = ("parent_id IS NULL", []) if parent_id is None else ("parent_id = ?",
                                                                       [parent_id])
    if owner is not None:
        where += " AND owner = ?"
        args.append(owner)
    rows = conn.execute(f"{_SELECT} WHERE {where} ORDER BY updated_at DESC, session_id "
                        "LIMIT ? OFFSET ?", (*args, limit, offset)).fetchall()
    return [_info(r) for r in rows]


def _one(conn: sqlite3.Connection, session_id: str) -> SessionInfo | None:
    row = conn.execute(f"{_SELECT} WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else _info(row)


def _delete(conn: sqlite3.Connection, session_id: str) -> bool:
    """Delete a session, its delegated children (recursively), their events and leases."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        ids = [r[0] for r in conn.execute(
            "WITH RECURSIVE tree(id) AS (SELECT session_id FROM sessions WHERE session_id = ? "
            "UNION ALL SELECT s.session_id FROM sessions s JOIN tree ON s.parent_id = tree.id) "
            "SELECT id FROM tree", (session_id,))]
        for table in ("events", "leases", "forks", "sessions"):
            conn.executemany(f"DELETE FROM {table} WHERE session_id = ?", [(i,) for i in ids])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return bool(ids)


class SQLiteSession(Session):
    """A session stored in the SQLite file at ``path`` (created when first used).

    ``busy_timeout`` bounds how long a write waits for another process's lock (then
    `SessionStoreBusy`); ``lease_ttl`` is how long a run's lease outlives its last renewal,
    so a crashed process's run stops holding the session after that long. Creating the
    object does no I/O: the session's row is written with its first events.
    """

    def __init__(
        self,
        session_id: str | None = None,
        path: str | os.PathLike[str] = DEFAULT_DB_PATH,
        *,
        parent_id: str | None = None,
        parent_tool_call_id: str | None = None,
        agent_path: str = "",
        child_key: str = "",
        owner: str = "",
        busy_timeout: float = _BUSY_TIMEOUT,
        lease_ttl: float = 30.0,
    ) -> None:
        self.session_id = session_id or new_session_id()
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        """Seconds a write waits for another connection's lock before `SessionStoreBusy`."""
        self.lease_ttl = lease_ttl
        """Seconds a run's lease lasts past its last renewal (renewed every third of it)."""
        self._db = _Database.get(self.path)
        now = time.time()
        self.info = SessionInfo(session_id=self.session_id, parent_id=parent_id,
                                parent_tool_call_id=parent_tool_call_id, path=agent_path,
                                key=child_key, created_at=now, updated_at=now, owner=owner)
        # The worker thread alone changes these two: what this object last saw of the log
        # (None: nothing yet, so an append goes at the end), and the error that stopped a
        # batch (later batches may build on it, so they are refused until the log is read).
        self._seq: int | None = None
        self._failed: BaseException | None = None
        self._renewal: asyncio.Task[None] | None = None
        self._rows: dict[str, str] = {}  # the lease rows' owners of the leases held here

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn(self.busy_timeout)

    async def _call(self, fn: Callable[..., T], *args: Any, shield: bool = False) -> T:
        """``fn(*args)`` in the file's thread (with ``shield``, to its end even if this task is
        cancelled); SQLite giving up on another writer's lock becomes `SessionStoreBusy`."""
        future = self._db.run(fn, *args)
        try:
            return await (asyncio.shield(future) if shield else future)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            raise SessionStoreBusy(self.session_id, timeout=self.busy_timeout,
                                   store=f"the SQLite file {self.path}") from exc

    def _load_info(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(f"{_SELECT} WHERE session_id = ?", (self.session_id,)).fetchone()
        if row is not None:
            self.info = _info(row)

    # -- reading ------------------------------------------------------------------------------

    async def view(self) -> LogView:
        """The cached view, with what other objects or processes appended since folded in."""
        return await self._call(self._sync_view)

    def _sync_view(self) -> LogView:
        conn = self._conn()
        view = self._view
        if view is None or self._seq is None:
            view, seen = LogView(), 0
            self._load_info(conn)
        else:
            for batch in self._unfolded or ():
                view.fold(batch)
            seen = self._seq
        self._unfolded = None
        rows = conn.execute("SELECT data FROM events WHERE session_id = ? AND seq > ? "
                            "ORDER BY seq", (self.session_id, seen)).fetchall()
        view.fold(load_events([r[0] for r in rows]))
        self._view, self._seq, self._failed = view, view.size, None
        self.info.event_count = view.size
        return view

    async def get_events(self) -> list[AgentEvent]:
        return load_events(await self._call(self._read_events))

    def _read_events(self) -> list[str]:
        conn = self._conn()
        conn.execute("BEGIN")  # the info and the events from one snapshot
        try:
            self._load_info(conn)
            rows = conn.execute("SELECT seq, data FROM events WHERE session_id = ? ORDER BY seq",
                                (self.session_id,)).fetchall()
        finally:
            conn.execute("COMMIT")
        # What this object saw: its next append must extend exactly this log.
        last = rows[-1][0] if rows else 0
        if self._seq != last:
            self._view, self._unfolded = None, None  # rebuilt from the file when next read
        self._seq, self._failed = last, None
        return [r[1] for r in rows]

    # -- writing ------------------------------------------------------------------------------

    async def append(self, events: Sequence[AgentEvent]) -> None:
        """Append ``events`` in one transaction, right after the events this object last saw.

        Raises `SessionConflictError` if another writer appended meanwhile, `SessionStoreBusy`
        if another process kept the file locked past ``busy_timeout``; nothing is written then,
        and later appends of this object are refused until it reads the log again (a run's
        start does), since they may build on this batch.
        """
        if events:
            lines = dump_events(events)
            # Once submitted, the batch is written whole or not at all even if this task is
            # cancelled: the worker records the outcome either way.
            await self._call(self._write, events, lines, shield=True)

    def _write(self, events: Sequence[AgentEvent], lines: list[str]) -> None:
        if self._failed is not None:
            raise self._failed
        sid, seq = self.session_id, self._seq
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")  # waits for other writers here, not mid-batch
            try:
                info = self.info
                conn.execute(_TOUCH, (sid, info.parent_id, info.parent_tool_call_id, info.path,
                                      info.key, info.created_at, info.owner,
                                      max(e.time for e in events)))
                if seq is None:  # nothing read or written yet: append at the end
                    seq = conn.execute(_LAST, (sid,)).fetchone()[0]
                conn.executemany(_INSERT, [
                    (sid, seq + i, e.kind, e.time, line)  # type: ignore[attr-defined]
                    for i, (e, line) in enumerate(zip(events, lines, strict=True), 1)])
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.IntegrityError as exc:  # another writer holds these positions
            found = conn.execute(_LAST, (sid,)).fetchone()[0]
            self._failed = SessionConflictError(sid, expected=seq or 0, found=found)
            raise self._failed from exc
        except BaseException as exc:
            self._failed = exc
            raise
        self._seq = seq + len(events)
        self._folded(events)
        self.info.updated_at = events[-1].time
        self.info.event_count = self._seq

    # -- the lease ----------------------------------------------------------------------------

    def _lease_key(self) -> Hashable:
        return ("sqlite", self._db.path, self.session_id)

    async def acquire_lease(self, owner: str) -> bool:
        """Take the lease in this process, then the file's lease row (kept alive meanwhile)."""
        if not await super().acquire_lease(owner):
            return False
        try:
            taken = await self._call(self._take_lease, owner)
        except BaseException:
            await super().release_lease(owner)
            raise
        if not taken:
            await super().release_lease(owner)
            return False
        self._renewal = asyncio.create_task(self._renew(owner))
        return True

    def _take_lease(self, owner: str) -> bool:
        now = time.time()
        row_owner, sid, expires = lease_row_owner(owner, now), self.session_id, \
            now + self.lease_ttl
        conn = self._conn()
        taken = conn.execute(_TAKE_LEASE, (sid, row_owner, expires, now,
                                           process_tag() + ":%")).rowcount == 1
        if not taken:
            row = conn.execute("SELECT owner, expires_at FROM leases WHERE session_id = ?",
                               (sid,)).fetchone()
            holder = None if row is None else LeaseHolder.of(row[0], row[1])
            if holder is not None and holder.gone():  # died here: no need to let it lapse
                taken = conn.execute(_TAKE_DEAD, (row_owner, expires, sid, row[0])).rowcount == 1
            self.holder = str(holder or "held by another process")
        if taken:
            self._rows[owner] = row_owner
        return taken

    async def _renew(self, owner: str) -> None:
        """Keep ``owner``'s lease from lapsing while its run lives."""
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                await self._call(self._extend_lease, owner)
            except (SessionStoreBusy, sqlite3.Error):
                pass  # try again next time; if the lease lapses, appends still cannot clash

    def _extend_lease(self, owner: str) -> None:
        self._conn().execute(
            "UPDATE leases SET expires_at = ? WHERE session_id = ? AND owner = ?",
            (time.time() + self.lease_ttl, self.session_id, self._rows.get(owner)))

    async def release_lease(self, owner: str) -> None:
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None
        try:
            await self._call(self._drop_lease, owner)
        except SessionStoreBusy:
            pass  # the row lapses after lease_ttl; the run's outcome stands
        finally:
            await super().release_lease(owner)

    def _drop_lease(self, owner: str) -> None:
        self._conn().execute("DELETE FROM leases WHERE session_id = ? AND owner = ?",
                             (self.session_id, self._rows.pop(owner, None)))

    async def _record_fork(self) -> None:
        info = self.info
        await self._call(lambda: self._conn().execute(
            "INSERT OR REPLACE INTO forks (session_id, origin_id, at) VALUES (?, ?, ?)",
            (self.session_id, info.forked_from, info.forked_at)))

    # -- children and listing -----------------------------------------------------------------

    def child(self, *, path: str, tool_call_id: str, key: str = "") -> SQLiteSession:
        return SQLiteSession(
            f"{self.session_id}.{new_session_id()[:8]}",
            self.path,
            parent_id=self.session_id,
            parent_tool_call_id=tool_call_id,
            agent_path=path,
            child_key=key,
            owner=self.info.owner,
            busy_timeout=self.busy_timeout,
            lease_ttl=self.lease_ttl,
        )

    def open(self, session_id: str) -> SQLiteSession:
        return SQLiteSession(session_id, self.path, owner=self.info.owner,
                             busy_timeout=self.busy_timeout, lease_ttl=self.lease_ttl)

    async def children(self) -> list[SessionInfo]:
        return await self._call(lambda: _list(self._conn(), self.session_id))

    def open_child(self, info: SessionInfo) -> SQLiteSession:
        child = SQLiteSession(info.session_id, self.path, busy_timeout=self.busy_timeout,
                              lease_ttl=self.lease_ttl)
        child.info = info
        return child

    @staticmethod
    def list_sessions(
        path: str | os.PathLike[str] = DEFAULT_DB_PATH, *, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Sessions in the file at ``path``: top-level ones, or the children of ``parent_id``.

        Blocking: for code without an event loop, such as the CLI.
        """
        db = _Database.get(path)
        return db.run_sync(lambda: _list(db.conn(_BUSY_TIMEOUT), parent_id))

    @staticmethod
    def exists(session_id: str, path: str | os.PathLike[str] = DEFAULT_DB_PATH) -> bool:
        """Whether the file at ``path`` holds a session ``session_id`` (blocking, as above)."""
        db = _Database.get(path)
        row = db.run_sync(lambda: db.conn(_BUSY_TIMEOUT).execute(
            "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone())
        return row is not None
