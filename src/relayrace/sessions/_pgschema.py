"""The schema of a PostgreSQL store: relayrace's tables, created on a database's first use and
migrated by a newer relayrace, versioned in ``relayrace_schema`` under an advisory lock, so
many processes starting at once migrate once."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from ..core.exceptions import UserError

__all__ = ["SCHEMA_VERSION", "migrate"]

SCHEMA_VERSION = 3
_MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE IF NOT EXISTS relayrace_sessions (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT,
    parent_tool_call_id TEXT,
    path TEXT NOT NULL DEFAULT '',
    child_key TEXT NOT NULL DEFAULT '',
    created_at DOUBLE PRECISION NOT NULL,
    owner TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS relayrace_sessions_parent ON relayrace_sessions(parent_id);
CREATE INDEX IF NOT EXISTS relayrace_sessions_owner ON relayrace_sessions(owner);
CREATE TABLE IF NOT EXISTS relayrace_events (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS relayrace_leases (
    session_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
""",
    2: """
CREATE TABLE IF NOT EXISTS relayrace_forks (
    session_id TEXT PRIMARY KEY,
    origin_id TEXT NOT NULL,
    at INTEGER NOT NULL
);
""",
    # Each session's last activity, kept by appends: a listing's page is an index range.
    3: """
ALTER TABLE relayrace_sessions ADD COLUMN IF NOT EXISTS updated_at DOUBLE PRECISION NOT NULL
    DEFAULT 0;
UPDATE relayrace_sessions s SET updated_at = COALESCE((SELECT MAX(time) FROM relayrace_events e
    WHERE e.session_id = s.session_id), s.created_at);
CREATE INDEX IF NOT EXISTS relayrace_sessions_recent
    ON relayrace_sessions(parent_id, updated_at DESC, session_id);
CREATE INDEX IF NOT EXISTS relayrace_sessions_owner_recent
    ON relayrace_sessions(owner, parent_id, updated_at DESC, session_id);
""",
}
"""Each schema version's DDL, applied in order to bring a database up to ``SCHEMA_VERSION``."""
_MIGRATION_LOCK = 0x72656C6179  # the advisory lock that serializes migrations ("relay")


async def migrate(conn: psycopg.AsyncConnection[Any]) -> None:
    """Bring the database to ``SCHEMA_VERSION``; concurrent starters wait for one another."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS relayrace_schema (version INTEGER NOT "
                           "NULL, applied_at DOUBLE PRECISION NOT NULL)")
        row = await (await conn.execute("SELECT MAX(version) FROM relayrace_schema")).fetchone()
        current = (row[0] if row else None) or 0
        if current > SCHEMA_VERSION:
            raise UserError(f"The PostgreSQL store was written by a newer relayrace (schema "
                            f"{current}; this one knows {SCHEMA_VERSION}): upgrade relayrace.")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            await conn.execute(_MIGRATIONS[version])
            await conn.execute("INSERT INTO relayrace_schema VALUES (%s, %s)",
                               (version, time.time()))
