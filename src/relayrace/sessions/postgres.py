"""`PostgresSession` and `PostgresStore`: sessions in a PostgreSQL database, for many processes
on many machines sharing one store (``relayrace[postgres]``: psycopg 3 and its pool).

The same event log and guarantees as `SQLiteSession`: every ``append`` is one transaction;
each session's events carry their position (``seq``, unique per session), so an append
extends the log as its session object last saw it or is refused with `SessionConflictError`;
a run holds the session's lease (a row with an owner and an expiry, renewed while the run
lives), so a second run anywhere is refused or waits, and a crashed holder's lease lapses.
The schema is created and migrated on first use (versioned in ``relayrace_schema``, under an
advisory lock, so concurrent starters do it once). Each process keeps one connection pool per
database URL and event loop, shared by all its sessions. A database that cannot be reached is
`SessionStoreUnavailable`; a lock held past ``busy_timeout`` is `SessionStoreBusy`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Hashable, Sequence
from itertools import chain
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

from ..core.events import AgentEvent, RunFinishedEvent, dump_events, load_events
from ..core.exceptions import (
    SessionConflictError,
    SessionStoreBusy,
    SessionStoreUnavailable,
    UserError,
)
from ._pgconn import Pools, connect, refused, why
from ._pgrows import (
    CREATED,
    LAST,
    ONE,
    RELEASE,
    SELECT,
    SINCE,
    TAKE_DEAD,
    TAKE_LEASE,
    TOUCH,
    info_of,
    where,
)
from ._pgschema import migrate
from ._snapshots import Snapshots
from .base import (
    LeaseHolder,
    LogView,
    Session,
    SessionInfo,
    check_waits,
    lease_row_owner,
    new_session_id,
    process_tag,
)
from .idempotency import PostgresIdempotency
from .store import SessionStore, check_page

__all__ = ["PostgresSession", "PostgresStore"]

T = TypeVar("T")

POOL_TIMEOUT = 60.0
"""Seconds an operation waits for a pooled connection by default (see docs/stores.md)."""
_ONE_STATEMENT = 2000  # events appended in one statement (5 parameters each, of 65,535)


class _Held:
    """The lease row an object holds: its owner, the row's owner column, and what keeps it
    alive (the timer of its next renewal, or the renewal under way)."""

    __slots__ = ("keeper", "owner", "row")

    def __init__(self, owner: str, row: str) -> None:
        self.owner, self.row = owner, row
        self.keeper: asyncio.TimerHandle | asyncio.Task[None] | None = None

    def drop(self) -> None:
        if self.keeper is not None:
            self.keeper.cancel()


async def _received(sent: tuple[psycopg.AsyncCursor[Any] | None, psycopg.AsyncCursor[Any]]
                    ) -> tuple[list[str], Any]:
    """What `PostgresSession._send_read` asked for: the event lines and the session's row."""
    info, events = sent
    row = None if info is None else await info.fetchone()
    return [r[0] for r in await events.fetchall()], row


_pools = Pools(lambda conn: migrate(conn))
_snapshots: dict[str, Snapshots] = {}  # per database URL: the conversations run here last


class PostgresSession(Session):
    """A session in the PostgreSQL database at ``url`` (its row is written with its first
    events). ``busy_timeout`` bounds how long a write waits for a lock (and for a restarting
    server); ``pool_timeout`` how long it waits for one of the process's ``pool_size`` pooled
    connections; ``lease_ttl`` is how long a run's lease outlives its last renewal."""

    def __init__(self, session_id: str | None = None, url: str = "", *,
                 parent_id: str | None = None, parent_tool_call_id: str | None = None,
                 agent_path: str = "", child_key: str = "", owner: str = "",
                 busy_timeout: float = 5.0, lease_ttl: float = 30.0, pool_size: int = 10,
                 pool_timeout: float = POOL_TIMEOUT) -> None:
        if not url:
            raise UserError("PostgresSession needs the database's URL, postgresql://...")
        check_waits(busy_timeout=busy_timeout, lease_ttl=lease_ttl, pool_timeout=pool_timeout)
        self.session_id = session_id or new_session_id()
        self.url = url
        self.busy_timeout = busy_timeout
        self.lease_ttl = lease_ttl
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        now = time.time()
        self.info = SessionInfo(session_id=self.session_id, parent_id=parent_id,
                                parent_tool_call_id=parent_tool_call_id, path=agent_path,
                                key=child_key, created_at=now, updated_at=now, owner=owner)
        self._seq: int | None = None  # the log's last position as this object saw it
        self._failed: BaseException | None = None
        self._held: _Held | None = None  # the lease row held by this object
        # The log as read with the lease (where the read began, and what it found), for the
        # run's first view: (the read's key, event lines, the session's row).
        self._ahead: tuple[tuple[int | None, bool], list[str], Any] | None = None
        # A snapshot this object started from, until a read finds the database still holds
        # its session: the session's created_at that read must find (`_snapshots`).
        self._check: float | None = None
        self._lock = asyncio.Lock()  # this object's reads and writes, one at a time

    def _like(self, session_id: str, **links: Any) -> PostgresSession:
        return PostgresSession(session_id, self.url, busy_timeout=self.busy_timeout,
                               lease_ttl=self.lease_ttl, pool_size=self.pool_size,
                               pool_timeout=self.pool_timeout, **links)

    async def _run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Any], *,
                   again: Callable[[psycopg.AsyncConnection[Any]], Any] | None = None,
                   safe: bool = True) -> Any:
        """``fn(connection)`` with a pooled connection; the database's failures as typed
        errors. A connection that dies on its own (the server restarted or dropped it; not a
        statement that failed) is replaced once by a fresh one, for ``again`` (default:
        ``fn``), unless the call is not ``safe`` to run twice."""
        try:
            pooled = await _pools.get(self.url, self.pool_size, self.busy_timeout)
            # Taken and given back, not ``pool.connection()``: that also enters the connection's
            # own context, whose commit at the end is a no-op on these autocommit connections
            # (a lock and a generator a round trip); the pool rolls back a connection returned
            # inside a transaction all the same.
            conn = await pooled.take(self.pool_timeout)
            try:
                return await fn(conn)
            except psycopg.OperationalError:
                if not safe or not conn.broken:
                    raise
            finally:
                await pooled.give(conn)
            async with await connect(self.url, self.busy_timeout) as fresh:
                return await (again or fn)(fresh)
        except (pg_errors.LockNotAvailable, pg_errors.QueryCanceled) as exc:
            raise SessionStoreBusy(self.session_id, timeout=self.busy_timeout,
                                   store=where(self.url)) from exc
        except PoolTimeout as exc:  # all connections in use past pool_timeout (before its base)
            raise SessionStoreBusy(
                self.session_id, timeout=self.pool_timeout, store=where(self.url),
                setting="pool_timeout", also=" (or pool_size; docs/stores.md sizes them)",
                waiting=f"had no free connection in this process's pool of {self.pool_size}",
            ) from exc
        except (psycopg.OperationalError, OSError) as exc:
            raise SessionStoreUnavailable(self.session_id, store=where(self.url),
                                          reason=why(exc), refused=refused(exc)) from exc

    async def _load_info(self, conn: psycopg.AsyncConnection[Any]) -> None:
        row = await (await conn.execute(ONE, (self.session_id,))).fetchone()
        if row is not None:
            self.info = info_of(row)

    # -- reading ------------------------------------------------------------------------------

    async def view(self) -> LogView:
        """The cached view, with what other objects or processes appended since folded in."""
        async with self._lock:
            self._adopt()
            view = self._view
            if view is None or self._seq is None:
                view, seen, fresh = LogView(), 0, True
            else:
                for batch in self._unfolded or ():
                    view.fold(batch)
                seen, fresh = self._seq, False
            self._unfolded = None
            ahead, self._ahead = self._ahead, None

            async def read(conn: psycopg.AsyncConnection[Any]) -> tuple[list[str], Any]:
                # A first read takes the session's row and its events in one round trip (a
                # read from a snapshot, the row's created_at).
                async with conn.pipeline() if fresh or self._check is not None else \
                        contextlib.nullcontext():
                    sent = await self._send_read(conn, seen, fresh)
                return await _received(sent)

            if ahead is not None and ahead[0] == (self._seq, fresh):  # read with the lease
                lines, row = ahead[1], ahead[2]
            else:
                lines, row = await self._run(read)
            if self._check is not None:
                if not self._checked(row):  # not the log the snapshot was of: read it whole
                    view, seen, fresh = LogView(), 0, True
                    lines, row = await self._run(read)
                row = None if not fresh else row
            if row is not None:
                self.info = info_of(row)
            events = load_events(lines)
            view.fold(events)
            self._view, self._seq, self._failed = view, view.size, None
            self.info.event_count = view.size
            if events:
                self.info.updated_at = max(self.info.updated_at, events[-1].time)
            return view

    def _adopt(self) -> None:
        """Start from the process's snapshot of the session, if this object has read nothing
        yet; the next read checks that the database still holds the same session."""
        if self._view is None and self._seq is None:
            kept = _snapshots.setdefault(self.url, Snapshots()).take(self.session_id)
            if kept is not None:
                self._view, self.info = kept
                self._seq, self._check = kept[0].size, kept[1].created_at

    def _checked(self, row: Any) -> bool:
        """Whether the row a read from a snapshot found is the snapshot's session (if not,
        this object forgets the snapshot)."""
        check, self._check = self._check, None
        if row is not None and row[0] == check:
            return True
        self._view, self._seq, self._unfolded = None, None, None
        return False

    async def _send_read(self, conn: psycopg.AsyncConnection[Any], seen: int, fresh: bool
                         ) -> tuple[psycopg.AsyncCursor[Any] | None, psycopg.AsyncCursor[Any]]:
        """Ask for the events after position ``seen`` (``fresh``: and the session's row; from
        a snapshot: the row's created_at)."""
        sid = self.session_id
        info = await conn.execute(ONE, (sid,)) if fresh else await conn.execute(
            CREATED, (sid,)) if self._check is not None else None
        return info, await conn.execute(SINCE, (sid, seen))

    async def get_events(self) -> list[AgentEvent]:
        async with self._lock:
            async def read(conn: psycopg.AsyncConnection[Any]) -> list[tuple[int, str]]:
                async with conn.transaction():  # the info and the events from one snapshot
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    await self._load_info(conn)
                    rows = await (await conn.execute(
                        "SELECT seq, data FROM relayrace_events WHERE session_id = %s "
                        "ORDER BY seq", (self.session_id,))).fetchall()
                return [(r[0], r[1]) for r in rows]

            rows = await self._run(read)
            last = rows[-1][0] if rows else 0
            if self._check is not None:  # a snapshot never checked: the view is built anew
                self._check, self._seq = None, None
            if self._seq != last:
                self._view, self._unfolded = None, None
            self._ahead = None
            self._seq, self._failed = last, None
            return load_events([r[1] for r in rows])

    # -- writing ------------------------------------------------------------------------------

    async def append(self, events: Sequence[AgentEvent]) -> None:
        """Append ``events`` in one transaction, right after the events this object last saw.

        Raises `SessionConflictError` if another writer appended meanwhile; nothing is written
        then, and later appends of this object are refused until it reads the log again.
        """
        if not events:
            return
        lines = dump_events(events)
        # Once started, the transaction ends committed or rolled back even if this task is
        # cancelled: the write is shielded, and its outcome recorded either way.
        await asyncio.shield(self._append(events, lines))

    async def _append(self, events: Sequence[AgentEvent], lines: list[str]) -> None:
        async with self._lock:
            if self._failed is not None:
                raise self._failed
            sid, seq = self.session_id, self._seq
            # The batch that ends a run gives the run's lease row back in the same statement:
            # the run writes nothing after it (an append refused keeps the lease, as before).
            held = self._held
            ends = held if held is not None and held.owner == self._run_owner and \
                isinstance(events[-1], RunFinishedEvent) else None
            release = () if ends is None else (sid, ends.row)

            async def write(conn: psycopg.AsyncConnection[Any]) -> int:
                start = seq
                if start is None:  # nothing read or written yet: append at the end
                    row = await (await conn.execute(LAST, (sid,))).fetchone()
                    start = row[0] if row else 0
                rows = [(sid, start + n, e.kind, e.time, line)  # type: ignore[attr-defined]
                        for n, (e, line) in enumerate(zip(events, lines, strict=True), 1)]
                i = self.info
                touch = (sid, i.parent_id, i.parent_tool_call_id, i.path, i.key, i.created_at,
                         i.owner, max(r[3] for r in rows))
                if len(rows) > _ONE_STATEMENT:  # beyond a statement's parameters: a block
                    async with conn.transaction(), conn.cursor() as cur:
                        await cur.execute(TOUCH, touch)
                        if release:
                            await cur.execute(RELEASE, release)
                        await cur.executemany(
                            "INSERT INTO relayrace_events (session_id, seq, kind, time, data) "
                            "VALUES (%s, %s, %s, %s, %s)", rows)
                    return start
                values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
                released = f", released AS ({RELEASE})" if release else ""
                # One statement, so one round trip, atomic without a transaction block: the
                # session's row (made or touched), every event and the lease given back (at a
                # run's end) land together or not at all.
                await conn.execute(f"WITH touched AS ({TOUCH}){released} INSERT INTO "
                                   f"relayrace_events (session_id, seq, kind, time, data) "
                                   f"VALUES {values}",
                                   [*touch, *release, *chain.from_iterable(rows)])
                return start

            async def again(conn: psycopg.AsyncConnection[Any]) -> int:
                """The batch's start, if its first event was written by the attempt whose
                connection died before it heard back (written atomically: all of it); else it is
                written now (compared with the log as this object saw it, as always)."""
                row = await (await conn.execute(
                    "SELECT seq FROM relayrace_events WHERE session_id = %s AND seq > %s AND "
                    "data = %s", (sid, seq or 0, lines[0]))).fetchone()
                return int(row[0]) - 1 if row is not None else await write(conn)

            try:
                start = await self._run(write, again=again)
            except pg_errors.UniqueViolation as exc:  # another writer holds these positions
                async def last(conn: psycopg.AsyncConnection[Any]) -> int:
                    row = await (await conn.execute(LAST, (sid,))).fetchone()
                    return int(row[0]) if row else 0
                found = await self._run(last)
                self._failed = SessionConflictError(sid, expected=seq or 0, found=found)
                raise self._failed from exc
            except BaseException as exc:
                self._failed = exc
                raise
            self._seq, self._ahead = start + len(events), None
            if ends is not None and self._held is ends:  # its row is gone with the batch
                self._held = None
                ends.drop()
            self._folded(events)
            self.info.updated_at = events[-1].time
            self.info.event_count = self._seq

    # -- the lease ----------------------------------------------------------------------------

    def _lease_key(self) -> Hashable:
        return ("postgres", self.url, self.session_id)

    async def acquire_lease(self, owner: str) -> bool:
        """Take the lease in this process, then the database's lease row (kept alive); the
        same round trip reads the log as it stands once the row is taken, for the run's first
        view."""
        if not await super().acquire_lease(owner):
            return False
        now = time.time()
        row_owner, sid, expires = lease_row_owner(owner, now), self.session_id, \
            now + self.lease_ttl
        self._adopt()
        fresh = self._view is None or self._seq is None  # what view() will read
        key, seen = (self._seq, fresh), 0 if fresh else self._seq or 0

        async def take(conn: psycopg.AsyncConnection[Any]) -> bool:
            async with conn.pipeline():  # in order: the read sees the log under the lease
                cur = await conn.execute(TAKE_LEASE, (sid, row_owner, expires, now,
                                                       process_tag() + ":%"))
                sent = await self._send_read(conn, seen, fresh)
            if cur.rowcount == 1:
                self._ahead = (key, *await _received(sent))
                return True
            row = await (await conn.execute(
                "SELECT owner, expires_at FROM relayrace_leases WHERE session_id = %s",
                (sid,))).fetchone()
            holder = None if row is None else LeaseHolder.of(row[0], row[1])
            self.holder = str(holder or "held by another process")
            if row is not None and holder is not None and holder.gone():  # died here
                cur = await conn.execute(TAKE_DEAD, (row_owner, expires, sid, row[0]))
                return cur.rowcount == 1
            return False

        try:
            taken = await self._run(take)
        except BaseException:
            await super().release_lease(owner)
            raise
        if not taken:
            await super().release_lease(owner)
            return False
        self._held = held = _Held(owner, row_owner)
        self._keep(held)
        return True

    def _keep(self, held: _Held) -> None:
        """Renew ``held``'s row in ``lease_ttl / 3`` seconds (a timer: no task per run)."""
        held.keeper = asyncio.get_running_loop().call_later(self.lease_ttl / 3, self._renew,
                                                            held)

    def _renew(self, held: _Held) -> None:
        async def renew() -> None:
            try:
                await self._run(lambda conn: conn.execute(
                    "UPDATE relayrace_leases SET expires_at = %s WHERE session_id = %s AND "
                    "owner = %s", (time.time() + self.lease_ttl, self.session_id, held.row)))
            except (SessionStoreBusy, SessionStoreUnavailable):
                pass  # next time; if the lease lapses, appends still cannot clash
            if self._held is held:
                self._keep(held)
        held.keeper = asyncio.get_running_loop().create_task(renew())

    async def release_lease(self, owner: str) -> None:
        held, self._ahead = self._held, None
        view = self._view
        if view is not None and self._failed is None and self._check is None and \
                self._seq is not None:  # a snapshot for the next object on the session
            self._catch_up(view)
            if view.size == self._seq:
                _snapshots.setdefault(self.url, Snapshots()).keep(self.session_id, view,
                                                                  self.info)
        try:
            if held is not None and held.owner == owner:  # not given back with the run's end
                self._held = None
                held.drop()
                await self._run(lambda conn: conn.execute(RELEASE, (self.session_id,
                                                                     held.row)))
        except (SessionStoreBusy, SessionStoreUnavailable):
            pass  # the row lapses after lease_ttl; the run's outcome stands
        finally:
            await super().release_lease(owner)

    async def _record_fork(self) -> None:
        info = self.info

        async def write(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute(
                "INSERT INTO relayrace_forks (session_id, origin_id, at) VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET origin_id = excluded.origin_id, "
                "at = excluded.at", (self.session_id, info.forked_from, info.forked_at))
        await self._run(write)

    # -- children -----------------------------------------------------------------------------

    def child(self, *, path: str, tool_call_id: str, key: str = "") -> PostgresSession:
        return self._like(f"{self.session_id}.{new_session_id()[:8]}", parent_id=self.session_id,
                          parent_tool_call_id=tool_call_id, agent_path=path, child_key=key,
                          owner=self.info.owner)

    def open(self, session_id: str) -> PostgresSession:
        return self._like(session_id, owner=self.info.owner)

    async def children(self) -> list[SessionInfo]:
        async def read(conn: psycopg.AsyncConnection[Any]) -> list[SessionInfo]:
            rows = await (await conn.execute(f"{SELECT} WHERE parent_id = %s ORDER BY "
                                             "created_at", (self.session_id,))).fetchall()
            return [info_of(r) for r in rows]
        result: list[SessionInfo] = await self._run(read)
        return result

    def open_child(self, info: SessionInfo) -> PostgresSession:
        child = self._like(info.session_id)
        child.info = info
        return child


class PostgresStore(SessionStore):
    """Sessions in the PostgreSQL database at ``url`` (``postgresql://user:pw@host/db``).

    ``pool_size`` bounds the connections this process opens to it (per event loop), shared
    by every session of the store, and ``pool_timeout`` how long an operation waits for one
    of them (a thousand conversations on ten connections queue for them); ``busy_timeout`` is
    how long a write waits for a lock; all of them and ``lease_ttl`` are given to each session.
    """

    def __init__(self, url: str, *, pool_size: int = 10, busy_timeout: float = 5.0,
                 lease_ttl: float = 30.0, pool_timeout: float = POOL_TIMEOUT) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise UserError(f"A PostgreSQL store's URL starts with postgresql://; got "
                            f"{url.split('://')[0]!r}://...")
        check_waits(busy_timeout=busy_timeout, lease_ttl=lease_ttl, pool_timeout=pool_timeout)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise UserError(f"pool_size counts connections (an int, at least 1); got "
                            f"{pool_size!r}.")
        self.url = url
        self.pool_size = pool_size
        self.busy_timeout = busy_timeout
        self.lease_ttl = lease_ttl
        self.pool_timeout = pool_timeout
        self._idempotency = PostgresIdempotency(self._run)

    def idempotency(self) -> PostgresIdempotency:
        return self._idempotency

    def session(self, session_id: str | None = None, *, owner: str = "") -> PostgresSession:
        return PostgresSession(session_id, self.url, owner=owner, busy_timeout=self.busy_timeout,
                               lease_ttl=self.lease_ttl, pool_size=self.pool_size,
                               pool_timeout=self.pool_timeout)

    async def _run(self, fn: Callable[[psycopg.AsyncConnection[Any]], Any], *,
                   safe: bool = True) -> Any:
        return await self.session("(the store)")._run(fn, safe=safe)

    async def list_sessions(self, *, parent_id: str | None = None, owner: str | None = None,
                            limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        check_page(limit, offset)
        where, args = ("parent_id IS NULL", []) if parent_id is None else ("parent_id = %s",
                                                                           [parent_id])
        if owner is not None:
            where += " AND owner = %s"
            args.append(owner)

        async def read(conn: psycopg.AsyncConnection[Any]) -> list[SessionInfo]:
            rows = await (await conn.execute(
                f"{SELECT} WHERE {where} ORDER BY updated_at DESC, session_id LIMIT %s "
                "OFFSET %s", (*args, limit, offset))).fetchall()
            return [info_of(r) for r in rows]
        result: list[SessionInfo] = await self._run(read)
        return result

    async def get_info(self, session_id: str) -> SessionInfo | None:
        async def read(conn: psycopg.AsyncConnection[Any]) -> SessionInfo | None:
            row = await (await conn.execute(ONE, (session_id,))).fetchone()
            return None if row is None else info_of(row)
        result: SessionInfo | None = await self._run(read)
        return result

    async def delete(self, session_id: str) -> bool:
        async def remove(conn: psycopg.AsyncConnection[Any]) -> bool:
            async with conn.transaction():
                rows = await (await conn.execute(
                    "WITH RECURSIVE tree(id) AS (SELECT session_id FROM relayrace_sessions "
                    "WHERE session_id = %s UNION ALL SELECT s.session_id FROM "
                    "relayrace_sessions s JOIN tree ON s.parent_id = tree.id) SELECT id FROM "
                    "tree", (session_id,))).fetchall()
                ids = [r[0] for r in rows]
                for table in ("relayrace_events", "relayrace_leases", "relayrace_forks",
                              "relayrace_sessions"):
                    await conn.execute(f"DELETE FROM {table} WHERE session_id = ANY(%s)",
                                       (ids,))
                return bool(ids)
        _snapshots.get(self.url, Snapshots()).forget(session_id)
        result: bool = await self._run(remove, safe=False)  # a second run would find nothing
        return result

    async def aclose(self) -> None:
        """Close this process's pool for the store's URL (in the running event loop), and
        drop its snapshots of the store's conversations."""
        _snapshots.pop(self.url, None)
        await _pools.close(self.url)
