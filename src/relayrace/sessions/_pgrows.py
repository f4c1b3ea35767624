"""The statements of a PostgreSQL store that name its rows, and a session's info from its row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from .base import SessionInfo

__all__ = ["COLUMNS", "CREATED", "LAST", "ONE", "RELEASE", "SELECT", "SINCE", "TAKE_DEAD",
           "TAKE_LEASE", "TOUCH", "info_of", "where"]

COLUMNS = "session_id, parent_id, parent_tool_call_id, path, child_key, created_at, owner"
SELECT = (f"SELECT {COLUMNS}, updated_at, (SELECT COUNT(*) FROM relayrace_events e WHERE "
           "e.session_id = s.session_id) AS event_count, (SELECT origin_id FROM relayrace_forks "
           "f WHERE f.session_id = s.session_id) AS forked_from, (SELECT at FROM "
           "relayrace_forks f WHERE f.session_id = s.session_id) AS forked_at "
           "FROM relayrace_sessions s")
# Every batch writes its session's row: made with the first events, later its last activity
# (the latest event time, as the events say; a fork's events keep their origin's times).
TOUCH = (f"INSERT INTO relayrace_sessions ({COLUMNS}, updated_at) VALUES (%s, %s, %s, %s, %s, "
          "%s, %s, %s) ON CONFLICT (session_id) DO UPDATE SET updated_at = "
          "GREATEST(relayrace_sessions.updated_at, excluded.updated_at)")
LAST = "SELECT COALESCE(MAX(seq), 0) FROM relayrace_events WHERE session_id = %s"
ONE = f"{SELECT} WHERE session_id = %s"
CREATED = "SELECT created_at FROM relayrace_sessions WHERE session_id = %s"
SINCE = "SELECT data FROM relayrace_events WHERE session_id = %s AND seq > %s ORDER BY seq"
RELEASE = "DELETE FROM relayrace_leases WHERE session_id = %s AND owner = %s"
TAKE_LEASE = ("INSERT INTO relayrace_leases (session_id, owner, expires_at) VALUES (%s, %s, %s) "
               "ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner, "
               "expires_at = excluded.expires_at "
               "WHERE relayrace_leases.expires_at <= %s OR relayrace_leases.owner LIKE %s")
# Take over the lease of a holder that died on this machine: the row as it was read.
TAKE_DEAD = ("UPDATE relayrace_leases SET owner = %s, expires_at = %s WHERE session_id = %s "
              "AND owner = %s")


def info_of(row: Sequence[Any]) -> SessionInfo:
    return SessionInfo(session_id=row[0], parent_id=row[1], parent_tool_call_id=row[2],
                       path=row[3], key=row[4], created_at=row[5], owner=row[6],
                       updated_at=row[7], event_count=row[8], forked_from=row[9],
                       forked_at=row[10] or 0)


def where(url: str) -> str:
    """The database as an error names it: host and database, never the password."""
    parts = urlsplit(url)
    return f"the PostgreSQL database {parts.path.lstrip('/') or '(default)'} at " \
           f"{parts.hostname or 'the local socket'}"
