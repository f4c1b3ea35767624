"""Connections to a PostgreSQL store: a pool per database URL and event loop, closed when the
loop ends; connection failures said as what they are, within the store's ``busy_timeout``; a
connection that died on its own replaced by a fresh one.

A pool's own connection attempts report only that none succeeded in time, so the first
connection of a pool is made here, directly: a refused port, a missing database or a wrong
password is said at once. A database that restarts closes every connection of the pool; the
operation that finds its connection dead gets one fresh connection (the server may still be
starting: tried until ``busy_timeout``), where the caller says that running it again is safe.

Callers wait for one of a pool's connections as for a permit (`Pooled.take`): a place in a
first-come queue, a future each. Waiting in the pool's own queue costs a condition, a task and
a timer per waiter and per connection handed over, and a thousand sessions sharing ten
connections wait for one on nearly every statement.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

__all__ = ["Pooled", "Pools", "connect", "refused", "why"]

_RETRY_INTERVAL = 0.1  # seconds between attempts to reach a server that is starting
# What a server that was reached says when it turns a connection away for good.
_REFUSALS = ("does not exist", "authentication failed", "no pg_hba.conf entry",
             "permission denied", "password")


def _options(busy_timeout: float) -> dict[str, Any]:
    # The lock timeout is a setting of each connection, sent as it opens: no round trip per
    # statement.
    return {"autocommit": True, "options": f"-c lock_timeout={int(busy_timeout * 1000)}"}


def why(exc: BaseException) -> str:
    """What a connection failure says, on one line (the server's own words, if it answered)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text.partition("FATAL: ")[2].strip() or text


def refused(exc: BaseException) -> bool:
    """Whether the server was reached and refused the connection for good (no such database
    or user, a wrong password): trying again changes nothing."""
    text = str(exc)
    return "FATAL:" in text and any(r in text for r in _REFUSALS)


async def connect(url: str, busy_timeout: float) -> psycopg.AsyncConnection[Any]:
    """A new connection to ``url``, tried until ``busy_timeout`` runs out while the server
    cannot be reached (it may be restarting); a refusal is raised at once."""
    deadline = time.monotonic() + busy_timeout
    while True:
        left = deadline - time.monotonic()
        try:
            return await psycopg.AsyncConnection.connect(
                url, connect_timeout=max(1, int(left + 0.999)), **_options(busy_timeout))
        except psycopg.OperationalError as exc:
            if refused(exc) or time.monotonic() + _RETRY_INTERVAL >= deadline:
                raise
        await asyncio.sleep(_RETRY_INTERVAL)


class Pooled:
    """A pool and the permits to take its connections, one per connection it may open: a
    caller holding a permit finds a connection ready (or the pool opening one), and callers
    beyond them wait for a permit, first come first served."""

    __slots__ = ("_permits", "pool")

    def __init__(self, pool: AsyncConnectionPool, size: int) -> None:
        self.pool = pool
        self._permits = asyncio.Semaphore(size)

    async def take(self, wait: float) -> psycopg.AsyncConnection[Any]:
        """A connection of the pool, waited for at most ``wait`` seconds (`PoolTimeout`);
        give it back with `give`."""
        permits = self._permits
        if permits.locked():
            deadline = time.monotonic() + wait
            try:
                async with asyncio.timeout(wait):
                    await permits.acquire()
            except TimeoutError:
                raise PoolTimeout(f"couldn't get a connection after {wait:.2f} sec") from None
            wait = deadline - time.monotonic()
        else:
            await permits.acquire()  # a permit is free: taken at once
        try:
            conn: psycopg.AsyncConnection[Any] = await self.pool.getconn(max(wait, 0.001))
            return conn
        except BaseException:
            permits.release()
            raise

    async def give(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """Give back a connection `take` gave (the pool rolls back one left in a transaction)."""
        try:
            await self.pool.putconn(conn)
        finally:
            self._permits.release()


class Pools:
    """One connection pool per database URL and event loop, for the whole process; a loop's
    pools are closed when it ends (``asyncio.run`` cancels what is left at its end: a task
    here waits for that), so that a process exits when its ``asyncio.run`` returns. A pool is
    made once, however many callers ask for it at once (each would otherwise open a first
    connection of its own: a thousand sessions starting together would exceed the server's
    ``max_connections``)."""

    def __init__(self, prepare: Callable[[psycopg.AsyncConnection[Any]], Awaitable[None]]
                 ) -> None:
        self._prepare = prepare  # run on a URL's first connection in this process
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                               dict[str, Pooled]] = weakref.WeakKeyDictionary()
        # The pools being made, per loop and URL: every caller waits for the same one.
        self._making: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Task[Pooled]]] = (
            weakref.WeakKeyDictionary())
        self._prepared: set[str] = set()
        self._closers: set[asyncio.Task[None]] = set()

    async def get(self, url: str, size: int, busy_timeout: float) -> Pooled:
        """The running loop's pool for ``url``; its first connection says what is wrong."""
        loop = asyncio.get_running_loop()
        pools = self._pools.get(loop)
        if pools is None:
            pools = self._pools[loop] = {}
            closer = loop.create_task(_close_at_end(pools), name="relayrace-postgres-pools")
            self._closers.add(closer)
            closer.add_done_callback(self._closers.discard)
        pool = pools.get(url)
        if pool is not None:
            return pool
        making = self._making.setdefault(loop, {})
        task = making.get(url)
        if task is None:
            task = making[url] = loop.create_task(self._make(pools, url, size, busy_timeout))
            task.add_done_callback(lambda _: making.pop(url, None))
        # Shielded: a caller cancelled leaves the pool to the others waiting for it.
        return await asyncio.shield(task)

    async def _make(self, pools: dict[str, Pooled], url: str, size: int,
                    busy_timeout: float) -> Pooled:
        async with await connect(url, busy_timeout) as first:
            if url not in self._prepared:
                await self._prepare(first)
                self._prepared.add(url)
        pool = AsyncConnectionPool(url, min_size=1, max_size=size, open=False,
                                   timeout=busy_timeout, name="relayrace",
                                   kwargs=_options(busy_timeout))
        await pool.open()
        made = pools[url] = Pooled(pool, size)
        return made

    async def close(self, url: str) -> None:
        """Close the running loop's pool for ``url``."""
        made = self._pools.get(asyncio.get_running_loop(), {}).pop(url, None)
        if made is not None:
            await made.pool.close()


async def _close_at_end(pools: dict[str, Pooled]) -> None:
    """Wait for the loop's end (its final cancellation), then close its pools."""
    try:
        await asyncio.Event().wait()
    finally:
        while pools:
            await pools.popitem()[1].pool.close(timeout=0)
