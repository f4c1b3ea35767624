"""The schema of a SQLite session file: its tables and indexes, made on first use, and the
migration of a file an earlier relayrace wrote, in place (under the file's write lock, so two
processes opening it together migrate it once)."""

from __future__ import annotations

import sqlite3
import time

__all__ = ["busy", "prepare"]

_RETRY_INTERVAL = 0.01  # seconds between tries of a lock SQLite's busy handler cannot wait for

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


def busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is SQLite giving up on another connection's lock."""
    return exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def use_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
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

def migrate(conn: sqlite3.Connection) -> None:
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


def prepare(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Bring a new connection's file to the current schema, in WAL mode."""
    use_wal(conn, busy_timeout)
    conn.executescript(_TABLES)
    migrate(conn)
    conn.executescript(_INDEXES)
