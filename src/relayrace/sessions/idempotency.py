"""Idempotency records: a request's ``Idempotency-Key``, claimed once, and the response it got.

A server that honours the header claims (owner, key) in its session store before it does any
work. The claim is atomic (a unique key, ``INSERT ... ON CONFLICT DO NOTHING``), so of two
requests with one key exactly one does the work; the other finds the record running (and
waits) or done (and replays its response). Records are kept in the store, so they hold
across processes and restarts, for a window (the server's choice) after their response;
expired ones are purged as new keys are claimed.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["IdempotencyRecord", "IdempotencyRecords", "MemoryIdempotency", "PostgresIdempotency",
           "SQLiteIdempotency", "StoredResponse"]

PURGE_EVERY = 60.0
"""Seconds between purges of every expired record (the claimed key's own is purged at once)."""


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A response as it was sent: status, headers and body (text)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    """One claimed key: the request it was claimed for (a fingerprint), when, and its
    response once the work is done (``None`` while it runs)."""

    owner: str
    key: str
    fingerprint: str
    created_at: float
    updated_at: float
    """When the claim was last renewed (its holder renews it while the work goes on)."""
    response: StoredResponse | None = None


class IdempotencyRecords(ABC):
    """A store's idempotency records (`relayrace.sessions.SessionStore.idempotency`).

    ``window`` is in seconds: a record unchanged for longer is gone. Its holder renews a
    running record, so it lasts while its work goes on, then ``window`` after the response.
    """

    @abstractmethod
    async def claim(self, owner: str, key: str, fingerprint: str, *,
                    window: float) -> IdempotencyRecord | None:
        """Claim ``key`` for ``owner``: ``None`` if this caller now holds it (and does the
        work), else the live record someone else claimed."""

    @abstractmethod
    async def get(self, owner: str, key: str, *, window: float) -> IdempotencyRecord | None:
        """The live record of ``key``, if any."""

    @abstractmethod
    async def touch(self, owner: str, key: str) -> None:
        """Renew the holder's claim (``updated_at``) while its work goes on."""

    @abstractmethod
    async def finish(self, owner: str, key: str, response: StoredResponse) -> None:
        """Record the response of the claimed work."""

    @abstractmethod
    async def release(self, owner: str, key: str) -> None:
        """Forget a claim whose request did no work (refused before it started)."""


def _response(status: int | None, headers: str | None, body: str | None
              ) -> StoredResponse | None:
    if status is None:
        return None
    return StoredResponse(status, json.loads(headers or "{}"), body or "")


class MemoryIdempotency(IdempotencyRecords):
    """Records in this process's memory, at most ``keep`` finished ones (the oldest go)."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self._records: OrderedDict[tuple[str, str], IdempotencyRecord] = OrderedDict()

    def _purge(self, window: float) -> None:
        cutoff = time.time() - window
        records = self._records
        while records:  # in order of their last change: the oldest first
            oldest = next(iter(records.values()))
            if oldest.updated_at > cutoff:
                break
            records.popitem(last=False)

    def _bound(self) -> None:
        records = self._records
        excess = len(records) - self.keep
        if excess > 0:  # the oldest finished records go; running ones stay
            doomed: list[tuple[str, str]] = []
            for k, r in records.items():
                if len(doomed) == excess:
                    break
                if r.response is not None:
                    doomed.append(k)
            for k in doomed:
                del records[k]

    async def claim(self, owner: str, key: str, fingerprint: str, *,
                    window: float) -> IdempotencyRecord | None:
        self._purge(window)
        found = self._records.get((owner, key))
        if found is not None:
            return found
        now = time.time()
        self._records[(owner, key)] = IdempotencyRecord(owner, key, fingerprint, now, now)
        self._bound()
        return None

    async def get(self, owner: str, key: str, *, window: float) -> IdempotencyRecord | None:
        found = self._records.get((owner, key))
        return found if found is not None and found.updated_at > time.time() - window else None

    def _replace(self, owner: str, key: str, **changes: Any) -> None:
        found = self._records.get((owner, key))
        if found is not None:
            values = {f: getattr(found, f) for f in IdempotencyRecord.__dataclass_fields__}
            self._records[(owner, key)] = IdempotencyRecord(**{**values, **changes})
            self._records.move_to_end((owner, key))

    async def touch(self, owner: str, key: str) -> None:
        self._replace(owner, key, updated_at=time.time())

    async def finish(self, owner: str, key: str, response: StoredResponse) -> None:
        self._replace(owner, key, updated_at=time.time(), response=response)

    async def release(self, owner: str, key: str) -> None:
        self._records.pop((owner, key), None)


_COLUMNS = "owner, request_key, fingerprint, created_at, updated_at, status, headers, body"


def _record(row: Any) -> IdempotencyRecord:
    return IdempotencyRecord(row[0], row[1], row[2], row[3], row[4],
                             _response(row[5], row[6], row[7]))


class _SQLRecords(IdempotencyRecords):
    """The records in a SQL table, the same statements on SQLite and PostgreSQL (``?``
    placeholders are written as the driver wants them)."""

    table: str
    marker: str  # the driver's placeholder
    real: str  # the type of a float

    @property
    def ddl(self) -> str:
        """The statements that create the table and its index."""
        return (f"CREATE TABLE IF NOT EXISTS {self.table} (owner TEXT NOT NULL, request_key "
                f"TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at {self.real} NOT NULL, "
                f"updated_at {self.real} NOT NULL, status INTEGER, headers TEXT, body TEXT, "
                f"PRIMARY KEY (owner, request_key)); CREATE INDEX IF NOT EXISTS "
                f"{self.table}_updated ON {self.table}(updated_at)")

    def __init__(self) -> None:
        self._ready = False  # whether the table is known to exist
        self._purged = 0.0  # when every expired record was last purged

    def _sql(self, statement: str) -> str:
        return statement.replace("?", self.marker).replace("TABLE_", self.table)

    def _purge_all(self) -> bool:
        now = time.monotonic()
        if now - self._purged < PURGE_EVERY:
            return False
        self._purged = now
        return True

    def _claim_statements(self, owner: str, key: str, fingerprint: str, window: float
                          ) -> list[tuple[str, tuple[Any, ...]]]:
        now = time.time()
        cutoff = now - window
        purge = (self._sql("DELETE FROM TABLE_ WHERE updated_at <= ?"), (cutoff,)) \
            if self._purge_all() else \
            (self._sql("DELETE FROM TABLE_ WHERE owner = ? AND request_key = ? AND "
                       "updated_at <= ?"), (owner, key, cutoff))
        insert = (self._sql(f"INSERT INTO TABLE_ ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, NULL, "
                            "NULL, NULL) ON CONFLICT (owner, request_key) DO NOTHING"),
                  (owner, key, fingerprint, now, now))
        return [purge, insert]

    def _select(self, owner: str, key: str, window: float) -> tuple[str, tuple[Any, ...]]:
        return (self._sql(f"SELECT {_COLUMNS} FROM TABLE_ WHERE owner = ? AND request_key = ? AND "
                          "updated_at > ?"), (owner, key, time.time() - window))

    def _touch(self, owner: str, key: str) -> tuple[str, tuple[Any, ...]]:
        return (self._sql("UPDATE TABLE_ SET updated_at = ? WHERE owner = ? AND request_key = ?"),
                (time.time(), owner, key))

    def _finish(self, owner: str, key: str, response: StoredResponse
                ) -> tuple[str, tuple[Any, ...]]:
        return (self._sql("UPDATE TABLE_ SET updated_at = ?, status = ?, headers = ?, body = ? "
                          "WHERE owner = ? AND request_key = ?"),
                (time.time(), response.status, json.dumps(response.headers), response.body,
                 owner, key))

    def _release(self, owner: str, key: str) -> tuple[str, tuple[Any, ...]]:
        return self._sql("DELETE FROM TABLE_ WHERE owner = ? AND request_key = ?"), (owner, key)


class SQLiteIdempotency(_SQLRecords):
    """Records in the ``idempotency_keys`` table of a SQLite store's file; ``call(fn)`` runs
    ``fn(connection)`` in the file's thread (`relayrace.sessions.SQLiteStore`)."""

    table = "idempotency_keys"
    marker = "?"
    real = "REAL"

    def __init__(self, call: Callable[[Callable[[Any], Any]], Awaitable[Any]]) -> None:
        super().__init__()
        self._call = call

    def _conn(self, conn: Any) -> Any:
        if not self._ready:
            conn.executescript(self.ddl)
            self._ready = True
        return conn

    async def claim(self, owner: str, key: str, fingerprint: str, *,
                    window: float) -> IdempotencyRecord | None:
        statements = self._claim_statements(owner, key, fingerprint, window)
        select = self._select(owner, key, window)

        def claim(conn: Any) -> IdempotencyRecord | None:
            conn = self._conn(conn)
            conn.execute("BEGIN IMMEDIATE")  # the purge, the claim and the read together
            try:
                rowcount = 0
                for sql, args in statements:
                    rowcount = conn.execute(sql, args).rowcount
                row = None if rowcount == 1 else conn.execute(*select).fetchone()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return None if rowcount == 1 else _record(row) if row is not None else _RELEASED
        found: IdempotencyRecord | None = await self._call(claim)
        return await self.claim(owner, key, fingerprint, window=window) \
            if found is _RELEASED else found

    async def get(self, owner: str, key: str, *, window: float) -> IdempotencyRecord | None:
        select = self._select(owner, key, window)

        def read(conn: Any) -> IdempotencyRecord | None:
            row = self._conn(conn).execute(*select).fetchone()
            return None if row is None else _record(row)
        found: IdempotencyRecord | None = await self._call(read)
        return found

    async def _write(self, statement: tuple[str, tuple[Any, ...]]) -> None:
        await self._call(lambda conn: self._conn(conn).execute(*statement))

    async def touch(self, owner: str, key: str) -> None:
        await self._write(self._touch(owner, key))

    async def finish(self, owner: str, key: str, response: StoredResponse) -> None:
        await self._write(self._finish(owner, key, response))

    async def release(self, owner: str, key: str) -> None:
        await self._write(self._release(owner, key))


# A claim that lost the race to a holder which released its key before it could be read:
# claimed again.
_RELEASED = IdempotencyRecord("", "", "", 0.0, 0.0)


class PostgresIdempotency(_SQLRecords):
    """Records in the ``relayrace_idempotency_keys`` table of a PostgreSQL store's database;
    ``run(fn)`` awaits ``fn(connection)`` with a pooled connection
    (`relayrace.sessions.postgres.PostgresStore`)."""

    table = "relayrace_idempotency_keys"
    marker = "%s"
    real = "DOUBLE PRECISION"
    _LOCK = 0x6964656D  # the advisory lock under which processes create the table ("idem")

    def __init__(self, run: Callable[[Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
                 ) -> None:
        super().__init__()
        self._run = run

    async def _conn(self, conn: Any) -> Any:
        if not self._ready:
            async with conn.transaction():  # concurrent starters create it once
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._LOCK,))
                for statement in self.ddl.split(";"):
                    await conn.execute(statement)
            self._ready = True
        return conn

    async def claim(self, owner: str, key: str, fingerprint: str, *,
                    window: float) -> IdempotencyRecord | None:
        statements = self._claim_statements(owner, key, fingerprint, window)
        select = self._select(owner, key, window)

        async def claim(conn: Any) -> IdempotencyRecord | None:
            conn = await self._conn(conn)
            async with conn.transaction():
                rowcount = 0
                for sql, args in statements:
                    rowcount = (await conn.execute(sql, args)).rowcount
            if rowcount == 1:
                return None
            # A concurrent claim waited for this one's commit (or the other way round): a
            # new statement sees the winner's row.
            row = await (await conn.execute(*select)).fetchone()
            return _RELEASED if row is None else _record(row)
        found: IdempotencyRecord | None = await self._run(claim)
        return await self.claim(owner, key, fingerprint, window=window) \
            if found is _RELEASED else found

    async def get(self, owner: str, key: str, *, window: float) -> IdempotencyRecord | None:
        select = self._select(owner, key, window)

        async def read(conn: Any) -> IdempotencyRecord | None:
            row = await (await (await self._conn(conn)).execute(*select)).fetchone()
            return None if row is None else _record(row)
        found: IdempotencyRecord | None = await self._run(read)
        return found

    async def _write(self, statement: tuple[str, tuple[Any, ...]]) -> None:
        async def write(conn: Any) -> None:
            await (await self._conn(conn)).execute(*statement)
        await self._run(write)

    async def touch(self, owner: str, key: str) -> None:
        await self._write(self._touch(owner, key))

    async def finish(self, owner: str, key: str, response: StoredResponse) -> None:
        await self._write(self._finish(owner, key, response))

    async def release(self, owner: str, key: str) -> None:
        await self._write(self._release(owner, key))
