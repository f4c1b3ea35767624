"""Worker heartbeats: the runs of a worker that died are taken over by a live one.

DBOS recovers a process's unfinished workflows when a process with the same executor id
starts again. A worker that never comes back (its machine is gone, its pod rescheduled under
another name) would leave its runs waiting, so every worker writes a heartbeat row, and each
looks for rows older than ``dead_after``. A live worker claims such a row (one conditional
``UPDATE``, so one worker wins), hands the dead worker's pending runs back to the queue, where
any worker takes them (DBOS's step records let them continue where they stopped), and only then
deletes the row: a claimer that dies on the way leaves its claim to lapse after ``dead_after``,
and another worker claims the row again.

A run is taken over within ``dead_after`` plus one heartbeat interval plus the queue's
polling interval of the worker's death. Heartbeats compare the clocks of the workers' hosts
(kept in step by NTP), so ``dead_after`` must exceed their drift by far: the default is 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import sqlalchemy as sa

__all__ = ["Heartbeat"]

_log = logging.getLogger("relayrace.durable")

_metadata = sa.MetaData()
_workers = sa.Table(
    "relayrace_workers", _metadata,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("beat", sa.Float, nullable=False),
    sa.Column("claimed_by", sa.String(200), nullable=True),
    sa.Column("claimed_at", sa.Float, nullable=True),
)


def engine_url(url: str) -> str:
    """A database URL as SQLAlchemy names its driver (psycopg 3 for PostgreSQL)."""
    scheme, sep, rest = url.partition("://")
    if scheme in ("postgresql", "postgres"):
        return f"postgresql+psycopg://{rest}"
    return f"{scheme}{sep}{rest}"


class Heartbeat:
    """This worker's heartbeat, and the takeover of the workers whose heartbeat stopped."""

    def __init__(self, url: str, executor_id: str, *, every: float, dead_after: float,
                 take_over: Callable[[str], Awaitable[int]],
                 taken: Callable[[], Awaitable[None]]) -> None:
        self.executor_id = executor_id
        self.every = every
        self.dead_after = dead_after
        self._take_over = take_over
        self._taken = taken  # this worker was taken for dead: let go of the runs it lost
        self.beaten = time.monotonic()  # when a beat last kept this worker alive
        self._engine = sa.create_engine(engine_url(url), pool_size=1, max_overflow=1) \
            if not url.startswith("sqlite") else sa.create_engine(url)
        self._task: asyncio.Task[None] | None = None
        self._joined = False  # whether the first beat wrote this worker's row

    def _create(self) -> None:
        try:
            _metadata.create_all(self._engine, checkfirst=True)
        except sa.exc.IntegrityError:  # another worker created it at the same moment
            pass

    def beat(self) -> bool:
        """Write this worker's heartbeat; ``False`` if another worker took it for dead."""
        now, started = time.time(), time.monotonic()
        mine = _workers.c.executor_id == self.executor_id
        with self._engine.begin() as conn:
            if conn.execute(sa.update(_workers).where(
                    mine, _workers.c.claimed_by.is_(None)).values(beat=now)).rowcount:
                self.beaten = max(self.beaten, started)
                return True
            if conn.execute(sa.select(_workers.c.executor_id).where(mine)).first() is not None:
                return False  # claimed: another worker is taking this one's runs over
            # The first beat; or a takeover of this worker finished: it beats again from now.
            conn.execute(sa.insert(_workers).values(executor_id=self.executor_id, beat=now))
        joined, self._joined = self._joined, True
        return not joined

    def stale(self) -> bool:
        """Whether another worker may have taken this one for dead: its last beat that kept it
        alive is older than ``dead_after`` less one interval (it was paused, or its beats
        failed)."""
        return time.monotonic() - self.beaten > self.dead_after - self.every

    def claim_dead(self) -> list[str]:
        """The workers whose heartbeat stopped, each claimed by this worker alone (a claim
        older than ``dead_after`` is a dead claimer's, and taken again)."""
        now = time.time()
        cutoff = now - self.dead_after
        stale = sa.and_(_workers.c.beat < cutoff, sa.or_(_workers.c.claimed_at.is_(None),
                                                         _workers.c.claimed_at < cutoff))
        claimed = []
        with self._engine.begin() as conn:
            rows = conn.execute(sa.select(_workers.c.executor_id).where(stale)).scalars().all()
        for executor_id in rows:
            with self._engine.begin() as conn:
                if conn.execute(sa.update(_workers).where(
                        _workers.c.executor_id == executor_id, stale).values(
                        claimed_by=self.executor_id, claimed_at=now)).rowcount:
                    claimed.append(executor_id)
        return claimed

    def release(self, dead: str) -> None:
        """Delete the claimed row of ``dead``, whose runs are back on the queue."""
        with self._engine.begin() as conn:
            conn.execute(sa.delete(_workers).where(_workers.c.executor_id == dead,
                                                   _workers.c.claimed_by == self.executor_id))

    def leave(self) -> None:
        """Remove this worker's row (it stopped with nothing left running)."""
        with self._engine.begin() as conn:
            conn.execute(sa.delete(_workers).where(_workers.c.executor_id == self.executor_id))

    async def start(self) -> None:
        """Write the first heartbeat (before the worker takes any run), then keep beating."""
        await asyncio.to_thread(self._create)
        await asyncio.to_thread(self.beat)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                if not await asyncio.to_thread(self.beat):
                    _log.warning("worker %s: another worker took this worker's runs over (its "
                                 "heartbeat was older than %ss); dead_after is too short for "
                                 "this machine's pauses", self.executor_id, self.dead_after)
                    await self._taken()
                for dead in await asyncio.to_thread(self.claim_dead):
                    count = await self._take_over(dead)
                    await asyncio.to_thread(self.release, dead)
                    _log.info("worker %s took over %d run(s) of dead worker %s",
                              self.executor_id, count, dead)
            except Exception:  # a database hiccup: the next beat tries again
                _log.exception("worker %s: heartbeat failed", self.executor_id)

    async def stop(self) -> None:
        """Stop beating (the row stays until ``leave``)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def close(self) -> None:
        self._engine.dispose()
