"""`SessionStore`: where sessions live, named by one URL, and `open_store` that reads it.

The CLI, the server and the workers reach sessions through a store, so the same command
works on a SQLite file, a PostgreSQL database or memory: ``--db`` is parsed here and nowhere
else.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from ..core.exceptions import SessionStoreBusy, UserError
from ._sqlitefile import BUSY_TIMEOUT as _BUSY_TIMEOUT
from ._sqlitefile import Database as _Database
from ._sqlitefile import busy as _busy
from ._sqlitefile import check_synchronous
from ._sqliterows import delete as _delete
from ._sqliterows import one as _one
from ._sqliterows import page as _page
from .base import Session, SessionInfo, check_waits
from .idempotency import IdempotencyRecords, MemoryIdempotency, SQLiteIdempotency
from .memory import MemorySession
from .sqlite import DEFAULT_DB_PATH, SQLiteSession

__all__ = ["MemoryStore", "SQLiteStore", "SessionStore", "check_page", "open_store"]

T = TypeVar("T")

_FORMS = ("a file path or sqlite:///PATH (SQLite), postgresql://USER@HOST/DB (PostgreSQL), "
          "or memory:// (this process only)")


class SessionStore(ABC):
    """Where sessions live: a SQLite file, a PostgreSQL database, or this process's memory.

    Use it as ``async with open_store(url) as store:`` or call `aclose` when done.
    """

    url: str
    """The store's URL, as `open_store` accepts it."""

    @abstractmethod
    def session(self, session_id: str | None = None, *, owner: str = "") -> Session:
        """A session of this store (a new id when ``None``; nothing is written until its first
        events, when ``owner`` is recorded with it)."""

    @abstractmethod
    async def list_sessions(self, *, parent_id: str | None = None, owner: str | None = None,
                            limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        """Top-level sessions (or the delegated children of ``parent_id``), most recently
        updated first; only ``owner``'s when it is given."""

    @abstractmethod
    async def get_info(self, session_id: str) -> SessionInfo | None:
        """The session's info, or ``None`` if the store holds no such session."""

    async def exists(self, session_id: str) -> bool:
        """Whether the store holds a session ``session_id``."""
        return await self.get_info(session_id) is not None

    @abstractmethod
    async def delete(self, session_id: str) -> bool:
        """Delete the session, its events and lease, and its delegated children's; ``False``
        if there was no such session."""

    @abstractmethod
    def idempotency(self) -> IdempotencyRecords:
        """The store's records of requests' ``Idempotency-Key`` headers (a server's; the same
        object on every call), kept where its sessions are."""

    async def aclose(self) -> None:  # noqa: B027 - a store with nothing to close keeps it
        """Release the store's connections."""

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()


def check_page(limit: int, offset: int) -> None:
    """Refuse a page of sessions that cannot be: a negative limit or offset."""
    if limit < 0 or offset < 0:
        raise UserError(f"list_sessions takes limit >= 0 and offset >= 0; got limit={limit}, "
                        f"offset={offset}.")


class MemoryStore(SessionStore):
    """Sessions in this process's memory (`MemorySession`): gone with the process."""

    url = "memory://"

    def __init__(self) -> None:
        self.sessions: dict[str, MemorySession] = {}
        """Every session of the store by id, delegated children included."""
        self._idempotency = MemoryIdempotency()

    def session(self, session_id: str | None = None, *, owner: str = "") -> MemorySession:
        found = self.sessions.get(session_id) if session_id else None
        if found is not None:
            return found
        made = MemorySession(session_id, store=self.sessions)
        made.info.owner = owner
        return made

    def idempotency(self) -> MemoryIdempotency:
        return self._idempotency

    def _written(self) -> list[MemorySession]:
        return [s for s in self.sessions.values() if s.events]

    async def list_sessions(self, *, parent_id: str | None = None, owner: str | None = None,
                            limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        check_page(limit, offset)
        found = [s.info for s in self._written() if s.info.parent_id == parent_id
                 and (owner is None or s.info.owner == owner)]
        found.sort(key=lambda i: (-i.updated_at, i.session_id))
        return found[offset:offset + limit]

    async def get_info(self, session_id: str) -> SessionInfo | None:
        found = self.sessions.get(session_id)
        return found.info if found is not None and found.events else None

    async def delete(self, session_id: str) -> bool:
        found = self.sessions.get(session_id)
        if found is None or not found.events:
            return False
        doomed = [found]
        while doomed:
            session = doomed.pop()
            doomed.extend(session.child_sessions)
            del self.sessions[session.session_id]
            session.events.clear()
        return True


class SQLiteStore(SessionStore):
    """Sessions in the SQLite file at ``path`` (`SQLiteSession`), created when first written.

    ``busy_timeout``, ``lease_ttl`` and ``synchronous`` are given to every session of the
    store (``synchronous="FULL"``: every commit syncs the disk).
    """

    def __init__(self, path: str | os.PathLike[str] = DEFAULT_DB_PATH, *,
                 busy_timeout: float = _BUSY_TIMEOUT, lease_ttl: float = 30.0,
                 synchronous: str = "NORMAL") -> None:
        check_waits(busy_timeout=busy_timeout, lease_ttl=lease_ttl)
        self.path = Path(path)
        self.url = f"sqlite:///{self.path.absolute()}"
        self.busy_timeout = busy_timeout
        self.lease_ttl = lease_ttl
        self.synchronous = check_synchronous(synchronous)
        self._db = _Database.get(self.path)  # held: the file's thread lives with the store
        self._idempotency = SQLiteIdempotency(self._call)

    def session(self, session_id: str | None = None, *, owner: str = "") -> SQLiteSession:
        return SQLiteSession(session_id, self.path, owner=owner, busy_timeout=self.busy_timeout,
                             lease_ttl=self.lease_ttl, synchronous=self.synchronous)

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(connection)`` in the file's thread; a lock held past ``busy_timeout`` is
        `SessionStoreBusy`."""
        db, settings = self._db, (self.busy_timeout, self.synchronous)
        try:
            return await db.run(lambda: fn(db.conn(settings)))
        except sqlite3.OperationalError as exc:
            if not _busy(exc):
                raise
            raise SessionStoreBusy("(the store)", timeout=self.busy_timeout,
                                   store=f"the SQLite file {self.path}") from exc

    def idempotency(self) -> SQLiteIdempotency:
        return self._idempotency

    async def list_sessions(self, *, parent_id: str | None = None, owner: str | None = None,
                            limit: int = 100, offset: int = 0) -> list[SessionInfo]:
        check_page(limit, offset)
        if not self.path.exists():  # listing creates no file
            return []
        return await self._call(lambda c: _page(c, parent_id, owner, limit, offset))

    async def get_info(self, session_id: str) -> SessionInfo | None:
        if not self.path.exists():
            return None
        return await self._call(lambda c: _one(c, session_id))

    async def delete(self, session_id: str) -> bool:
        if not self.path.exists():
            return False
        self._db.snapshots.forget(session_id)
        return await self._call(lambda c: _delete(c, session_id))


def open_store(url: str | os.PathLike[str] | None = None) -> SessionStore:
    """The store ``url`` names: ``None`` for the SQLite file ``.relayrace/sessions.db``; a file
    path or ``sqlite:///PATH`` (``sqlite:////abs/path``: absolute) for a SQLite file;
    ``postgresql://...`` (or ``postgres://``) for a PostgreSQL database; ``memory://`` for
    this process's memory."""
    if url is None:
        return SQLiteStore(DEFAULT_DB_PATH)
    text = os.fspath(url)
    if "://" not in text:
        if not text.strip():
            raise UserError(f"A session store is named by {_FORMS}; got an empty string.")
        return SQLiteStore(text)
    scheme, _, rest = text.partition("://")
    scheme = scheme.lower()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise UserError(f"A SQLite store's URL is sqlite:///PATH (three slashes, then the "
                            f"path); got {text!r}.")
        return SQLiteStore(rest[1:])
    if scheme == "memory":
        return MemoryStore()
    if scheme in ("postgresql", "postgres"):
        try:  # imported here: psycopg is an extra
            postgres = importlib.import_module(".postgres", __package__)
        except ImportError as exc:
            raise UserError(f"A PostgreSQL store needs psycopg: pip install "
                            f"'relayrace[postgres]' ({exc}).") from exc
        store: SessionStore = postgres.PostgresStore(text)
        return store
    raise UserError(f"Unknown session store {text!r}: a store is named by {_FORMS}.")
