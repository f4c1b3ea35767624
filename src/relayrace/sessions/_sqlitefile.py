"""One SQLite file of `SQLiteSession`: its connection and worker thread, shared by the process.

The worker runs the file's jobs in the order they were queued. The session jobs found waiting
together (leases taken and given back, reads, appends, of any session on the file) run in one
transaction and are answered once that transaction commits: one commit, and so at
``synchronous=FULL`` one sync of the disk, for all of them (group commit). A job is refused,
if it is, by its first write statement, which SQLite undoes alone: the others stand, with no
savepoint per job. Appends queued next to each other are written together, one statement a
table, in one savepoint; if one of them is refused, that savepoint is undone and each is
written on its own. Statements are what this thread pays most for: each one gives up the
interpreter's lock and must take it back from the event loop. A commit that fails fails every
job of the group, and none of their effects is kept. An answer is handed to the event
loop of whoever waits for it in one callback per group, with no intermediate future.

The worker also renews the lease rows its sessions hold, every third of the shortest
``lease_ttl`` among them, for as long as they hold them: no timer runs in the event loop.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..core.exceptions import UserError
from ._snapshots import Snapshots
from ._sqlitewrites import drop_leases, touch_sessions, write_events

__all__ = ["BUSY_TIMEOUT", "SYNCHRONOUS", "Database", "Rows", "Settings", "busy",
           "check_synchronous"]

T = TypeVar("T")

BUSY_TIMEOUT = 5.0
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
"""SQLite's ``synchronous`` levels a session may choose (how often a commit syncs the disk)."""
_RETRY_INTERVAL = 0.01  # seconds between tries of a lock SQLite's busy handler cannot wait for
_GROUP = 256  # jobs in one transaction at most: a long group delays its first answer

Settings = tuple[float, str]
"""What a job needs of the connection: its busy timeout (seconds) and ``synchronous`` level."""

Rows = tuple[list[Any], tuple[Any, ...], tuple[str, str] | None,
             Callable[[], Callable[[], Any]]]
"""An append's rows, to be written together with those of the appends queued next to it: its
events' values (5 a row, as `write_events` takes them), its session row's (8, as
`touch_sessions`), the lease row it gives back (session id, owner) or None, and what records
the append as written (in the file's thread; it returns the job's finish)."""

# A job: the function, its arguments, the connection settings, its kind (_PLAIN: runs on its
# own; _READ / _WRITE: in a group's transaction), whether it runs even if its waiter gave up,
# the waiter's loop (None: a concurrent future) and future, what undoes a session's state
# when a group's commit fails, and for an append, what gives its `Rows` (or None).
_Job = tuple[Callable[..., Any], tuple[Any, ...], Settings, int, bool,
             asyncio.AbstractEventLoop | None, Any, Callable[[BaseException], None] | None,
             Callable[..., Rows | None] | None]
_PLAIN, _READ, _WRITE = 0, 1, 2

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
_RENEW = "UPDATE leases SET expires_at = ? WHERE session_id = ? AND owner = ?"


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is SQLite giving up on another connection's lock."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def check_synchronous(synchronous: object) -> str:
    """``synchronous`` as SQLite names it, or `UserError` naming the levels it may be."""
    if isinstance(synchronous, str) and synchronous.upper() in SYNCHRONOUS:
        return synchronous.upper()
    raise UserError(f"synchronous is one of SQLite's levels {', '.join(SYNCHRONOUS)} (how often "
                    f"a commit syncs the disk; NORMAL is the default); got {synchronous!r}.")


def _settle(answers: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    """In the event loop: hand a group's answers to their waiters (gone ones are skipped)."""
    for future, result, error in answers:
        if not future.cancelled():
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)


def _nothing() -> None:
    """The finish of a job that failed the transaction (never called)."""


def _wanted(job: _Job) -> bool:
    """Whether someone still waits for ``job`` (a job nobody waits for is not run)."""
    if job[5] is None:
        return bool(job[6].set_running_or_notify_cancel())
    return not job[6].cancelled()


class _Worker:
    """The file's thread: its connection, its queue of jobs and the lease rows to renew.

    Holds no reference to the `Database`, so that the database object can go (and then the
    thread ends) while the thread waits.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self._settings: Settings = (-1.0, "")
        # Lease rows held through this file: (session id, row owner) -> lease_ttl; renewed
        # together once the earliest is due (changed by the worker thread only).
        self.held: dict[tuple[str, str], float] = {}
        self._due = 0.0

    # -- the connection ------------------------------------------------------------------------

    def conn(self, settings: Settings) -> sqlite3.Connection:
        """The connection, set to ``settings`` (worker thread only)."""
        conn = self._conn
        if conn is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # Room for the joint writes' statements (one per number of rows) besides the rest.
            conn = sqlite3.connect(self.path, timeout=settings[0], isolation_level=None,
                                   check_same_thread=False, cached_statements=512)
            try:
                self._use_wal(conn, settings[0])
                conn.executescript(_TABLES)
                self._migrate(conn)
                conn.executescript(_INDEXES)
            except BaseException:
                conn.close()
                raise
            self._conn, self._settings = conn, (settings[0], "")
        if settings != self._settings:
            timeout, synchronous = settings
            if timeout != self._settings[0]:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if synchronous != self._settings[1]:
                conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._settings = settings
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
                if not busy(exc) or time.monotonic() >= deadline:
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

    # -- held leases ---------------------------------------------------------------------------

    def hold(self, session_id: str, row_owner: str, ttl: float) -> None:
        """Renew this lease row from now on (worker thread only)."""
        due = time.monotonic() + ttl / 3
        self._due = min(self._due, due) if self.held else due
        self.held[session_id, row_owner] = ttl

    def _renew(self) -> None:
        """Extend every held lease row; a busy file is tried again at the next due time."""
        now, held = time.time(), self.held
        conn = self._conn
        if conn is not None:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(_RENEW, [(now + ttl, sid, row)
                                              for (sid, row), ttl in held.items()])
                    conn.execute("COMMIT")
                finally:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # tried again when next due; the rows lapse only after lease_ttl
        self._due = time.monotonic() + min(held.values()) / 3

    # -- the thread ----------------------------------------------------------------------------

    def loop(self) -> None:
        """Run jobs until the database object goes; then close the connection."""
        jobs = self.jobs
        while True:
            wait = max(0.0, self._due - time.monotonic()) if self.held else None
            try:
                job = jobs.get(timeout=wait)
            except queue.Empty:
                self._renew()
                continue
            batch = [job]
            while job is not None and len(batch) < _GROUP:
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                batch.append(job)
            if not self._run(batch):
                break
            del batch, job  # hold nothing (and so no session) between jobs
            if self.held and time.monotonic() >= self._due:
                self._renew()
        if self._conn is not None:
            self._conn.close()

    def _run(self, batch: list[_Job | None]) -> bool:
        """Run ``batch`` in order: plain jobs alone, the others in groups; False at the end."""
        group: list[_Job] = []
        for job in batch:
            if group and (job is None or job[3] == _PLAIN or job[2] != group[0][2]):
                self._group(group)
                group = []
            if job is None:
                return False
            if job[3] != _PLAIN:
                group.append(job)
                continue
            fn, args, _, _, always, _, _, _, _ = job
            if not always and not _wanted(job):
                continue
            try:
                answer: tuple[Any, BaseException | None] = (fn(*args), None)
            except BaseException as exc:  # handed to whoever waits for the job
                answer = (None, exc)
            self._answer([(job, *answer)])
        if group:
            self._group(group)
        return True

    def _group(self, group: list[_Job]) -> None:
        """Run ``group`` in one transaction.

        No savepoint per job: a job is refused before it has written anything (SQLite undoes
        a failed statement alone, and the transaction goes on), so the others stand. A job
        that fails having written, or with the transaction gone, undoes the transaction: it
        and the jobs before it fail as if the commit had, and the rest run in a new one.
        """
        live = [job for job in group if job[4] or _wanted(job)]
        if not live:
            return
        answers: list[tuple[_Job, Any, BaseException | None]] = []
        done: list[tuple[_Job, Callable[[], Any]]] = []
        try:
            conn = self.conn(live[0][2])
            conn.execute("BEGIN IMMEDIATE" if any(j[3] == _WRITE for j in live) else "BEGIN")
        except BaseException as exc:
            self._fail(live, exc)
            return
        ran = 0  # jobs of live that ran (answered, in done, or failing the transaction)
        tried = 0  # appends from here on were tried together already
        try:
            while ran < len(live):
                job = live[ran]
                if ran >= tried and job[8] is not None:
                    tried = ran + 1
                    while tried < len(live) and live[tried][8] is not None:
                        tried += 1
                    try:
                        written = self._joint(conn, live[ran:tried]) if tried - ran > 1 \
                            else None
                    except BaseException:  # the transaction is gone: they fail with it
                        done += [(j, _nothing) for j in live[ran:tried]]
                        ran = tried
                        raise
                    if written is not None:
                        done += written
                        ran = tried
                        continue
                changes = conn.total_changes
                ran += 1
                try:
                    finish = job[0](conn, *job[1])
                except BaseException as exc:
                    if conn.total_changes != changes or not conn.in_transaction:
                        done.append((job, _nothing))  # written in part, or all undone
                        raise
                    answers.append((job, None, exc))
                    continue
                done.append((job, finish))
            conn.execute("COMMIT")
        except BaseException as exc:  # the commit failed, or a job half way: nothing is kept
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolled it back itself
            self._answer(answers)
            self._fail([job for job, _ in done], exc)
            if ran < len(live):
                self._group(live[ran:])
            return
        for job, finish in done:
            try:
                answers.append((job, finish(), None))
            except BaseException as exc:
                answers.append((job, None, exc))
        self._answer(answers)

    @staticmethod
    def _joint(conn: sqlite3.Connection, jobs: list[_Job]
               ) -> list[tuple[_Job, Callable[[], Any]]] | None:
        """Write appends queued next to each other with one statement a table (a chunk), not
        two or three each; None, nothing of them written, if they cannot all be (one is
        refused, or knows no position to write at): each is then written on its own."""
        pending: dict[Any, int] = {}  # where each session object's log ends, so far
        plans: list[Rows] = []
        for job in jobs:
            try:
                rows = job[8](pending, *job[1])  # type: ignore[misc]
            except Exception:  # written on its own, which says what is wrong
                return None
            if rows is None:
                return None
            plans.append(rows)
        conn.execute("SAVEPOINT joint")
        try:
            write_events(conn, [v for plan in plans for v in plan[0]])
            touch_sessions(conn, [v for plan in plans for v in plan[1]])
            drops = [v for plan in plans if plan[2] is not None for v in plan[2]]
            if drops:
                drop_leases(conn, drops)
        except sqlite3.Error:
            conn.execute("ROLLBACK TO joint")  # raises if the transaction is gone: all fail
            conn.execute("RELEASE joint")
            return None
        conn.execute("RELEASE joint")
        return [(job, plan[3]()) for job, plan in zip(jobs, plans, strict=True)]

    def _fail(self, jobs: list[_Job], exc: BaseException) -> None:
        """Fail ``jobs`` with ``exc``, nothing of theirs written."""
        for job in jobs:
            if job[7] is not None:
                job[7](exc)
        self._answer([(job, None, exc) for job in jobs])

    @staticmethod
    def _answer(answers: list[tuple[_Job, Any, BaseException | None]]) -> None:
        """Hand answers to their waiters: one callback per event loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        for job, result, error in answers:
            loop, future = job[5], job[6]
            if loop is None:
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)
            else:
                by_loop.setdefault(loop, []).append((future, result, error))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, items)
            except RuntimeError:  # the loop closed: nobody waits any more
                pass


class Database:
    """One file: its worker, shared by the process's sessions on it.

    The object lives while a session on the file does; then the connection closes and the
    thread ends.
    """

    _open: ClassVar[weakref.WeakValueDictionary[str, Database]] = weakref.WeakValueDictionary()
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self.worker = _Worker(path)
        self._jobs = self.worker.jobs
        self.snapshots = Snapshots()
        """The conversations this process ran on the file last (`_snapshots`)."""
        # Daemon: a process may exit with sessions alive; SQLite survives an exit mid-write.
        threading.Thread(target=self.worker.loop, daemon=True,
                         name=f"relayrace-sqlite {path}").start()
        # SimpleQueue.put is safe to call from a finalizer, which may run inside any code.
        weakref.finalize(self, self._jobs.put, None)

    @classmethod
    def get(cls, path: str | os.PathLike[str]) -> Database:
        """The file's database object (no I/O: the worker opens the file when first used)."""
        key = os.path.abspath(os.fspath(path))
        with cls._open_lock:
            db = cls._open.get(key)
            if db is None:
                db = cls._open[key] = Database(key)
            return db

    def conn(self, settings: Settings) -> sqlite3.Connection:
        """The connection, set to ``settings`` (in a job only: the worker thread's)."""
        return self.worker.conn(settings)

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` alone in the file's thread, to await; the loop goes on meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, args, (0.0, ""), _PLAIN, False, loop, future, None, None))
        return future

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the file's thread, waiting for it (for code without a loop)."""
        future: Future[T] = Future()
        self._jobs.put((fn, args, (0.0, ""), _PLAIN, False, None, future, None, None))
        return future.result()

    def grouped(self, fn: Callable[..., Callable[[], T]], args: tuple[Any, ...],
                settings: Settings, *, writes: bool, always: bool = False,
                failed: Callable[[BaseException], None] | None = None,
                rows: Callable[..., Rows | None] | None = None) -> asyncio.Future[T]:
        """``fn(connection, *args)`` in a group's transaction; its answer is what the function
        it returns gives once the transaction has committed.

        With ``always``, the job runs even if its waiter is cancelled first; ``failed`` is
        called (in the file's thread) with the error when the group's commit fails. An append
        gives ``rows``: ``rows(pending, *args)`` is its `Rows` (None: written by ``fn`` alone),
        written together with the appends queued next to it; ``pending`` maps each session
        object to where its log ends with the appends before it.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, args, settings, _WRITE if writes else _READ, always, loop, future,
                        failed, rows))
        return future
