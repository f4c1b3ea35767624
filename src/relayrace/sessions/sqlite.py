"""`SQLiteSession`: sessions in one SQLite file, the embedded default of the CLI.

The database runs in WAL mode and every appended batch is atomic, in one transaction (its own,
or one that commits the batches of several sessions together), so a process that dies between
turns loses nothing: an ``append`` returns once its batch is committed. Each
file has one connection and one worker thread of its own, shared by every session of the
process on that file: the event loop never waits on the disk or on another process's lock,
and the file's writes are serialized. A writer waits at most ``busy_timeout`` for another
process's lock, then gets `SessionStoreBusy` with nothing written. ``synchronous`` is SQLite's
level of syncing (``NORMAL`` by default: a commit survives the process dying, and in WAL mode
the file stays intact if the machine loses power, the last commits perhaps lost with it;
``FULL`` syncs the disk at every commit, so those survive too).

Events carry their position in the log (``seq``, unique per session): an append extends the
log as its session object last saw it, or is refused with `SessionConflictError`. A run holds
the session's lease (a row with an owner and an expiry, renewed while the run lives), so a
second run, in this process or another, is refused or waits; a crashed holder's lease lapses.
A run costs three trips to the file's thread: the lease taken together with the log's new
events, and two appends (the run's start, before the model is called, and its end, which
gives the lease row back in the same transaction).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..core.events import AgentEvent, RunFinishedEvent, dump_events, load_events
from ..core.exceptions import SessionConflictError, SessionStoreBusy
from ._sqlitefile import BUSY_TIMEOUT as _BUSY_TIMEOUT
from ._sqlitefile import Database as _Database
from ._sqlitefile import Rows as _Rows
from ._sqlitefile import Settings, check_synchronous
from ._sqlitefile import busy as _busy
from ._sqliterows import SELECT, children_of, info_of
from ._sqlitewrites import drop_leases, touch_sessions, write_events
from .base import (
    DEFAULT_DB_PATH,
    LeaseHolder,
    LogView,
    Session,
    SessionInfo,
    check_waits,
    lease_row_owner,
    new_session_id,
    process_tag,
)

__all__ = ["DEFAULT_DB_PATH", "SQLiteSession"]

T = TypeVar("T")


_LAST = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?"
# Take the lease if it is free, its holder let it lapse, or this process left it (its own
# lease is free here, so the row outlived a release that found the file locked).
_TAKE_LEASE = ("INSERT INTO leases (session_id, owner, expires_at) VALUES (?, ?, ?) "
               "ON CONFLICT(session_id) DO UPDATE SET owner = excluded.owner, "
               "expires_at = excluded.expires_at "
               "WHERE leases.expires_at <= ? OR leases.owner LIKE ?")

# Take over the lease of a holder that died on this machine: the row as it was read.
_TAKE_DEAD = "UPDATE leases SET owner = ?, expires_at = ? WHERE session_id = ? AND owner = ?"


class SQLiteSession(Session):
    """A session stored in the SQLite file at ``path`` (created when first used).

    ``busy_timeout`` bounds how long a write waits for another process's lock (then
    `SessionStoreBusy`); ``lease_ttl`` is how long a run's lease outlives its last renewal,
    so a crashed process's run stops holding the session after that long; ``synchronous`` is
    SQLite's syncing level for this session's commits (``NORMAL``, or ``FULL`` to sync the disk
    at every commit; anything else but ``OFF`` and ``EXTRA`` is `UserError`). Creating the
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
        synchronous: str = "NORMAL",
    ) -> None:
        check_waits(busy_timeout=busy_timeout, lease_ttl=lease_ttl)
        self.session_id = session_id or new_session_id()
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        """Seconds a write waits for another connection's lock before `SessionStoreBusy`."""
        self.lease_ttl = lease_ttl
        """Seconds a run's lease lasts past its last renewal (renewed every third of it)."""
        self.synchronous = check_synchronous(synchronous)
        """SQLite's ``synchronous`` level for this session's commits (``NORMAL`` or ``FULL``;
        ``OFF`` and ``EXTRA`` too)."""
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
        # The lease was just taken with the log's new events: the next view needs no trip.
        self._fresh = False
        self._rows: dict[str, str] = {}  # the lease rows' owners of the leases held here

    def _settings(self) -> Settings:
        return (self.busy_timeout, self.synchronous)

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn(self._settings())

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` alone in the file's thread."""
        try:
            return await self._db.run(fn, *args)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            raise self._store_busy() from exc

    async def _grouped(self, fn: Callable[..., Callable[[], T]], *args: Any, writes: bool,
                       always: bool = False,
                       rows: Callable[..., _Rows | None] | None = None) -> T:
        """``fn(connection, *args)`` in a transaction the file's thread may share with other
        jobs (with ``always``, to its end even if this task is cancelled; with ``rows``, an
        append written together with those queued next to it)."""
        try:
            return await self._db.grouped(fn, args, (self.busy_timeout, self.synchronous),
                                          writes=writes, always=always, failed=self._stopped,
                                          rows=rows)
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            raise self._store_busy() from exc

    def _store_busy(self) -> SessionStoreBusy:
        """SQLite giving up on another writer's lock, as relayrace says it."""
        return SessionStoreBusy(self.session_id, timeout=self.busy_timeout,
                                store=f"the SQLite file {self.path}")

    def _stopped(self, exc: BaseException) -> None:
        """A group's commit failed: what this object wrote in it may be built on no longer,
        and where its log ends is known again only once it is read whole."""
        self._failed, self._seq = exc, None

    def _load_info(self, conn: sqlite3.Connection) -> None:
        row = conn.execute(f"{SELECT} WHERE session_id = ?", (self.session_id,)).fetchone()
        if row is not None:
            self.info = info_of(row)

    # -- reading ------------------------------------------------------------------------------

    async def view(self) -> LogView:
        """The cached view, with what other objects or processes appended since folded in."""
        view = self._view
        if self._fresh and view is not None:  # read with the lease, just now
            self._fresh = False
            if self._unfolded:
                for batch in self._unfolded:
                    view.fold(batch)
                self._unfolded = None
            return view
        return await self._grouped(self._read_new, writes=False)

    def _read_new(self, conn: sqlite3.Connection) -> Callable[[], LogView]:
        """Read the events appended since this object last looked; fold them in once the
        transaction holds."""
        view, seen = self._view, self._seq
        row, kept = None, None
        if view is None:  # the process's snapshot of the log, if the file still holds it
            kept = self._db.snapshots.take(self.session_id)
            if kept is not None:
                found = conn.execute("SELECT created_at FROM sessions WHERE session_id = ?",
                                     (self.session_id,)).fetchone()
                if found is not None and found[0] == kept[1].created_at:
                    view, seen = kept[0], kept[0].size
                else:
                    kept = None
        if view is None or seen is None:  # the whole log, and the session's row
            row = conn.execute(f"{SELECT} WHERE session_id = ?", (self.session_id,)).fetchone()
            view, seen = None, 0
        rows = conn.execute("SELECT data FROM events WHERE session_id = ? AND seq > ? "
                            "ORDER BY seq", (self.session_id, seen)).fetchall()
        # Here, in the file's thread, like every change to these two: a batch of this object
        # later in the same group goes after what was just read (positions are dense).
        self._seq, self._failed = seen + len(rows), None

        def fold() -> LogView:
            folded = view
            if folded is None:
                folded = LogView()
                if row is not None:
                    self.info = info_of(row)
            elif kept is not None:
                self.info = kept[1]
            else:
                for batch in self._unfolded or ():
                    folded.fold(batch)
            self._unfolded = None
            events = load_events([r[0] for r in rows])
            folded.fold(events)
            self._view = folded
            self.info.event_count = folded.size
            if events:
                self.info.updated_at = max(self.info.updated_at, events[-1].time)
            return folded

        return fold

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
        self._seq, self._failed, self._fresh = last, None, False
        return [r[1] for r in rows]

    # -- writing ------------------------------------------------------------------------------

    async def append(self, events: Sequence[AgentEvent]) -> None:
        """Append ``events`` in one transaction, right after the events this object last saw.

        Returns once they are committed. Raises `SessionConflictError` if another writer
        appended meanwhile, `SessionStoreBusy` if another process kept the file locked past
        ``busy_timeout``; nothing is written then, and later appends of this object are
        refused until it reads the log again (a run's start does), since they may build on
        this batch.
        """
        if events:
            # The batch that ends a run gives the run's lease row back in its own transaction:
            # the run writes nothing after it (a batch refused keeps the lease, as before).
            ends = self._run_owner if type(events[-1]) is RunFinishedEvent else ""
            # Once submitted, the batch is written whole or not at all even if this task is
            # cancelled: the worker records the outcome either way.
            await self._grouped(self._write, events, dump_events(events), ends, writes=True,
                                always=True, rows=self._rows_of)

    def _rows_of(self, pending: dict[Any, int], events: Sequence[AgentEvent],
                 lines: list[str], ends: str) -> _Rows | None:
        """The batch's rows, to write with the appends queued next to it (``pending``: where
        their session objects' logs end); None to write it alone (it may be refused then)."""
        seq = pending.get(self, self._seq)
        if seq is None or self._failed is not None:
            return None
        sid = self.session_id
        row_owner = self._rows.get(ends) if ends else None
        last = pending[self] = seq + len(events)

        def record() -> Callable[[], None]:
            self._seq = last
            return self._written(events, last, ends, row_owner)

        return (_values(sid, seq, events, lines), self._session_row(events),
                None if row_owner is None else (sid, row_owner), record)

    def _session_row(self, events: Sequence[AgentEvent]) -> tuple[Any, ...]:
        """The session's row as a batch of ``events`` writes it (`touch_sessions`)."""
        info = self.info
        return (self.session_id, info.parent_id, info.parent_tool_call_id, info.path, info.key,
                info.created_at, info.owner, max(e.time for e in events))

    def _write(self, conn: sqlite3.Connection, events: Sequence[AgentEvent],
               lines: list[str], ends: str) -> Callable[[], None]:
        """The batch alone: its events (the one statement that may be refused, before
        anything else is written), its session's row, the run's lease row it gives back."""
        if self._failed is not None:
            raise self._failed
        sid, seq = self.session_id, self._seq
        try:
            if seq is None:  # nothing read or written yet: append at the end
                seq = conn.execute(_LAST, (sid,)).fetchone()[0]
            write_events(conn, _values(sid, seq, events, lines))
        except sqlite3.IntegrityError as exc:  # another writer holds these positions
            found = conn.execute(_LAST, (sid,)).fetchone()[0]
            self._failed = SessionConflictError(sid, expected=seq or 0, found=found)
            raise self._failed from exc
        except BaseException as exc:
            self._failed = exc
            raise
        touch_sessions(conn, self._session_row(events))
        row_owner = self._rows.get(ends) if ends else None
        if row_owner is not None:
            drop_leases(conn, (sid, row_owner))
        # Now, in the file's thread: a later batch of this object in the same group goes
        # after this one (if the group's commit fails, ``_stopped`` forgets it).
        self._seq = last = seq + len(events)
        return self._written(events, last, ends, row_owner)

    def _written(self, events: Sequence[AgentEvent], last: int, ends: str,
                 row_owner: str | None) -> Callable[[], None]:
        """What records a batch once its transaction has committed (in the file's thread)."""
        info = self.info

        def written() -> None:
            if row_owner is not None:  # gone with the batch: no longer renewed nor given back
                self._forget_lease(ends, row_owner)
            self._folded(events)
            info.updated_at = events[-1].time
            info.event_count = last

        return written

    # -- the lease ----------------------------------------------------------------------------

    def _lease_key(self) -> Hashable:
        return ("sqlite", self._db.path, self.session_id)

    async def acquire_lease(self, owner: str) -> bool:
        """Take the lease in this process, then the file's lease row, reading the log's new
        events in the same transaction (the row is kept alive by the file's thread)."""
        if not await super().acquire_lease(owner):
            return False
        try:
            taken: bool = await self._grouped(self._take_lease, owner, writes=True)
        except BaseException:
            # The row may be taken all the same (this task cancelled as the job ran): it goes
            # back in the file's order, after the take.
            self._db.grouped(self._drop_lease, (owner,), self._settings(), writes=True,
                             always=True).add_done_callback(_ignore)
            await super().release_lease(owner)
            raise
        if not taken:
            await super().release_lease(owner)
        return taken

    def _take_lease(self, conn: sqlite3.Connection, owner: str) -> Callable[[], bool]:
        now = time.time()
        row_owner, sid, expires = lease_row_owner(owner, now), self.session_id, \
            now + self.lease_ttl
        taken = conn.execute(_TAKE_LEASE, (sid, row_owner, expires, now,
                                           process_tag() + ":%")).rowcount == 1
        holder = ""
        if not taken:
            row = conn.execute("SELECT owner, expires_at FROM leases WHERE session_id = ?",
                               (sid,)).fetchone()
            found = None if row is None else LeaseHolder.of(row[0], row[1])
            if found is not None and found.gone():  # died here: no need to let it lapse
                taken = conn.execute(_TAKE_DEAD, (row_owner, expires, sid, row[0])).rowcount == 1
            holder = str(found or "held by another process")
        if not taken:
            def refused() -> bool:
                self.holder = holder
                return False

            return refused
        fold = self._read_new(conn)

        def held() -> bool:
            self._rows[owner] = row_owner
            self._db.worker.hold(sid, row_owner, self.lease_ttl)
            fold()
            self._fresh = True
            return True

        return held

    async def release_lease(self, owner: str) -> None:
        self._fresh = False
        self._keep_snapshot()
        try:
            # A trip only if the row was not given back with the run's end (the file's
            # thread forgot it once that batch committed, before the batch's answer).
            if owner in self._rows:
                await self._grouped(self._drop_lease, owner, writes=True, always=True)
        except SessionStoreBusy:
            pass  # the row lapses after lease_ttl; the run's outcome stands
        finally:
            await super().release_lease(owner)

    def _keep_snapshot(self) -> None:
        """Leave the process a snapshot of the log as this object's run left it, for the next
        object opened on the session (only of a log this object knows whole and exactly)."""
        view = self._view
        if view is not None and self._failed is None and self._seq is not None:
            self._catch_up(view)
            if view.size == self._seq:
                self._db.snapshots.keep(self.session_id, view, self.info)

    def _drop_lease(self, conn: sqlite3.Connection, owner: str) -> Callable[[], None]:
        row_owner = self._rows.get(owner)
        if row_owner is not None:  # no longer renewed, whether or not the row goes now
            self._forget_lease(owner, row_owner)
            drop_leases(conn, (self.session_id, row_owner))
        return _nothing

    def _forget_lease(self, owner: str, row_owner: str) -> None:
        """Stop renewing ``owner``'s lease row and holding it here (the file's thread only)."""
        self._rows.pop(owner, None)
        self._db.worker.held.pop((self.session_id, row_owner), None)

    async def _record_fork(self) -> None:
        info = self.info
        await self._call(lambda: self._conn().execute(
            "INSERT OR REPLACE INTO forks (session_id, origin_id, at) VALUES (?, ?, ?)",
            (self.session_id, info.forked_from, info.forked_at)))

    # -- children and listing -----------------------------------------------------------------

    def _like(self, session_id: str, **links: Any) -> SQLiteSession:
        """Another session of this file, with this one's settings."""
        return SQLiteSession(session_id, self.path, busy_timeout=self.busy_timeout,
                             lease_ttl=self.lease_ttl, synchronous=self.synchronous, **links)

    def child(self, *, path: str, tool_call_id: str, key: str = "") -> SQLiteSession:
        return self._like(f"{self.session_id}.{new_session_id()[:8]}",
                          parent_id=self.session_id, parent_tool_call_id=tool_call_id,
                          agent_path=path, child_key=key, owner=self.info.owner)

    def open(self, session_id: str) -> SQLiteSession:
        return self._like(session_id, owner=self.info.owner)

    async def children(self) -> list[SessionInfo]:
        return await self._call(lambda: children_of(self._conn(), self.session_id))

    def open_child(self, info: SessionInfo) -> SQLiteSession:
        child = self._like(info.session_id)
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
        return db.run_sync(lambda: children_of(db.conn(_DEFAULTS), parent_id))

    @staticmethod
    def exists(session_id: str, path: str | os.PathLike[str] = DEFAULT_DB_PATH) -> bool:
        """Whether the file at ``path`` holds a session ``session_id`` (blocking, as above)."""
        db = _Database.get(path)
        row = db.run_sync(lambda: db.conn(_DEFAULTS).execute(
            "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone())
        return row is not None


_DEFAULTS: Settings = (_BUSY_TIMEOUT, "NORMAL")


def _values(sid: str, seq: int, events: Sequence[AgentEvent], lines: list[str]) -> list[Any]:
    """A batch's event rows for `write_events`, from position ``seq + 1`` on."""
    return [v for i, (e, line) in enumerate(zip(events, lines, strict=True), 1)
            for v in (sid, seq + i, e.kind, e.time, line)]  # type: ignore[attr-defined]


def _nothing() -> None:
    """A job's answer when it has nothing to say."""


def _ignore(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a job nobody waits for (asyncio would report it unread)."""
    if not future.cancelled():
        future.exception()
