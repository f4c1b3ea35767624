"""`SQLiteSession`: sessions in one SQLite file, the embedded default of the CLI.

The database runs in WAL mode and every ``append`` is one transaction, so a process that dies
between turns loses nothing. Calls are made inline on the event loop: each is a short local
transaction, far cheaper than a hop to a worker thread. One connection per file is shared by
all sessions of a process, so concurrent runs of different sessions are safe.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from ..events import AgentEvent, dump_events, load_events
from .base import LogView, Session, SessionInfo, new_session_id

__all__ = ["DEFAULT_DB_PATH", "SQLiteSession"]

DEFAULT_DB_PATH = Path(".relayrace") / "sessions.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT,
    parent_tool_call_id TEXT,
    path TEXT NOT NULL DEFAULT '',
    child_key TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_parent ON sessions(parent_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    kind TEXT NOT NULL,
    time REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_session ON events(session_id, id);
"""


_SCHEMA_VERSION = 2
# Columns later schema versions added to tables of older files.
_ADDED_COLUMNS = (
    ("sessions", "child_key", "TEXT NOT NULL DEFAULT ''"),
    ("events", "time", "REAL NOT NULL DEFAULT 0"),
)


class _Database:
    """One connection to one file, shared by every session of the process."""

    _open: ClassVar[dict[str, _Database]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.lock = threading.Lock()
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Bring a file written by an earlier relayrace to the current schema, in place."""
        (version,) = self.conn.execute("PRAGMA user_version").fetchone()
        if version >= _SCHEMA_VERSION:
            return
        for table, column, declaration in _ADDED_COLUMNS:
            names = {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            if column not in names:
                self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
        self.conn.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    @classmethod
    def get(cls, path: str | os.PathLike[str]) -> _Database:
        raw = os.fspath(path)
        db = cls._open.get(raw)  # the common case: a path already opened, as it was written
        if db is not None:
            return db
        file = Path(raw)
        file.parent.mkdir(parents=True, exist_ok=True)
        key = str(file.resolve())
        with cls._open_lock:
            db = cls._open.get(key)
            if db is None:
                db = cls._open[key] = _Database(key)
            cls._open[raw] = db
            return db


def _info(
    row: tuple[str, str | None, str | None, str, str, float, float | None, int]
) -> SessionInfo:
    return SessionInfo(
        session_id=row[0],
        parent_id=row[1],
        parent_tool_call_id=row[2],
        path=row[3],
        key=row[4],
        created_at=row[5],
        updated_at=row[6] or row[5],
        event_count=row[7],
    )


_COLUMNS = "session_id, parent_id, parent_tool_call_id, path, child_key, created_at"
# Counts and times come from the events themselves: appends touch one table only.
_SELECT = (f"SELECT {_COLUMNS}, (SELECT MAX(time) FROM events e WHERE e.session_id = "
           "s.session_id), (SELECT COUNT(*) FROM events e WHERE e.session_id = s.session_id) "
           "FROM sessions s")


class SQLiteSession(Session):
    """A session stored in the SQLite file at ``path`` (created if needed)."""

    def __init__(
        self,
        session_id: str | None = None,
        path: str | os.PathLike[str] = DEFAULT_DB_PATH,
        *,
        parent_id: str | None = None,
        parent_tool_call_id: str | None = None,
        agent_path: str = "",
        child_key: str = "",
    ) -> None:
        self.session_id = session_id or new_session_id()
        self.path = Path(path)
        self._db = _Database.get(self.path)
        now = time.time()
        with self._db.lock:
            self._db.conn.execute(
                f"INSERT OR IGNORE INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (self.session_id, parent_id, parent_tool_call_id, agent_path, child_key, now),
            )
            row = self._db.conn.execute(
                f"{_SELECT} WHERE session_id = ?", (self.session_id,)
            ).fetchone()
        self.info = _info(row)
        self._seen_count = self.info.event_count

    async def view(self) -> LogView:
        """The cached view, refreshed if another process or object appended meanwhile."""
        with self._db.lock:
            (count,) = self._db.conn.execute(
                "SELECT COUNT(*) FROM events WHERE session_id = ?", (self.session_id,)
            ).fetchone()
        if self._view is not None and count != self._seen_count:
            self._view = None  # someone else wrote to this session: rebuild from the file
        self._seen_count = count
        return await super().view()

    async def get_events(self) -> list[AgentEvent]:
        with self._db.lock:
            rows = self._db.conn.execute(
                "SELECT data FROM events WHERE session_id = ? ORDER BY id", (self.session_id,)
            ).fetchall()
        return load_events([r[0] for r in rows])

    async def append(self, events: Sequence[AgentEvent]) -> None:
        if not events:
            return
        lines = dump_events(events)
        sid = self.session_id
        rows = [(sid, e.kind, e.time, line)  # type: ignore[attr-defined]
                for e, line in zip(events, lines, strict=True)]
        with self._db.lock:
            conn = self._db.conn
            if len(rows) == 1:  # one statement is its own transaction
                conn.execute("INSERT INTO events (session_id, kind, time, data) "
                             "VALUES (?, ?, ?, ?)", rows[0])
            else:
                conn.execute("BEGIN")
                try:
                    conn.executemany("INSERT INTO events (session_id, kind, time, data) "
                                     "VALUES (?, ?, ?, ?)", rows)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        self.info.updated_at = events[-1].time
        self._folded(events)
        self._seen_count += len(events)
        self.info.event_count += len(rows)

    def child(self, *, path: str, tool_call_id: str, key: str = "") -> SQLiteSession:
        return SQLiteSession(
            f"{self.session_id}.{new_session_id()[:8]}",
            self.path,
            parent_id=self.session_id,
            parent_tool_call_id=tool_call_id,
            agent_path=path,
            child_key=key,
        )

    async def children(self) -> list[SessionInfo]:
        return self.list_sessions(self.path, parent_id=self.session_id)

    def open_child(self, info: SessionInfo) -> SQLiteSession:
        return SQLiteSession(info.session_id, self.path)

    @staticmethod
    def list_sessions(
        path: str | os.PathLike[str] = DEFAULT_DB_PATH, *, parent_id: str | None = None
    ) -> list[SessionInfo]:
        """Sessions in the file at ``path``: top-level ones, or the children of ``parent_id``."""
        db = _Database.get(path)
        where = "parent_id IS NULL" if parent_id is None else "parent_id = ?"
        args: tuple[str, ...] = () if parent_id is None else (parent_id,)
        with db.lock:
            rows = db.conn.execute(f"{_SELECT} WHERE {where} ORDER BY created_at", args).fetchall()
        return [_info(r) for r in rows]

    @staticmethod
    def exists(session_id: str, path: str | os.PathLike[str] = DEFAULT_DB_PATH) -> bool:
        """Whether the file at ``path`` holds a session ``session_id``."""
        db = _Database.get(path)
        with db.lock:
            row = db.conn.execute(
                "SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        return row is not None
