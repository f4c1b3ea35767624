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
from ._sqliteschema import busy, prepare
from ._sqlitewrites import drop_leases, touch_sessions, write_events

__all__ = ["BUSY_TIMEOUT", "SYNCHRONOUS", "Database", "Rows", "Settings", "busy",
           "check_synchronous"]

T = TypeVar("T")

BUSY_TIMEOUT = 30.0
"""Seconds a write waits for another process's lock by default: past a backup's pause."""
SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
"""SQLite's ``synchronous`` levels a session may choose (how often a commit syncs the disk)."""
_SLACK = 0.25  # seconds a write may wait past its busy timeout, not to change it per group
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
# when a group's commit fails, for an append, what gives its `Rows` (or None), and when its
# wait for another connection's lock runs out (time.monotonic(): queued + busy timeout).
_Job = tuple[Callable[..., Any], tuple[Any, ...], Settings, int, bool,
             asyncio.AbstractEventLoop | None, Any, Callable[[BaseException], None] | None,
             Callable[..., Rows | None] | None, float]
_PLAIN, _READ, _WRITE = 0, 1, 2

_RENEW = "UPDATE leases SET expires_at = ? WHERE session_id = ? AND owner = ?"


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
                prepare(conn, settings[0])
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
            # A group shares one syncing level; each job keeps its own busy timeout (`_begin`).
            if group and (job is None or job[3] == _PLAIN or job[2][1] != group[0][2][1]):
                self._group(group)
                group = []
            if job is None:
                return False
            if job[3] != _PLAIN:
                group.append(job)
                continue
            fn, args, always = job[0], job[1], job[4]
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
        live = self._begin(live)
        if not live:
            return
        conn = self.conn((self._settings[0], live[0][2][1]))  # as _begin left it
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

    def _begin(self, live: list[_Job]) -> list[_Job]:
        """Begin ``live``'s transaction; the jobs it holds (none: it did not begin).

        Each job waits for another connection's lock until its own deadline (queued, plus
        its busy timeout): when a wait runs out, only the jobs whose own wait has passed fail,
        and the others go on waiting, so a group of jobs queued over a long lock (a backup's
        pause) is never failed whole for the oldest of them.
        """
        begin = "BEGIN IMMEDIATE" if any(j[3] == _WRITE for j in live) else "BEGIN"
        synchronous = live[0][2][1]
        waited = False
        while True:
            wait = max(0.0, min(j[9] for j in live) - time.monotonic())
            # At first the connection's busy timeout as it is, unless it would wait past the
            # shortest wait left by more than the slack: no statement to change it for every
            # group (a free file never waits at all).
            current = self._settings[0]
            timeout = current if not waited and 0 <= current <= wait + _SLACK else wait
            waited = True
            try:
                self.conn((timeout, synchronous)).execute(begin)
                return live
            except sqlite3.OperationalError as exc:
                if not busy(exc):
                    self._fail(live, exc)
                    return []
                now = time.monotonic()
                self._fail([j for j in live if j[9] <= now], exc)
                live = [j for j in live if j[9] > now]
                if not live:
                    return []
            except BaseException as exc:
                self._fail(live, exc)
                return []

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
        self._jobs.put((fn, args, (0.0, ""), _PLAIN, False, loop, future, None, None, 0.0))
        return future

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the file's thread, waiting for it (for code without a loop)."""
        future: Future[T] = Future()
        self._jobs.put((fn, args, (0.0, ""), _PLAIN, False, None, future, None, None, 0.0))
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
                        failed, rows, time.monotonic() + settings[0]))
        return future
