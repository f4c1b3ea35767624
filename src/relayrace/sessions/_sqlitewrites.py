"""The statements that write a SQLite session file's rows, many rows to a statement.

One statement is one step for SQLite and one hand-over of the interpreter's lock for the
file's thread (`_sqlitefile`), whatever its number of rows; and a statement that fails is
undone alone, the transaction going on.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Any

__all__ = ["drop_leases", "touch_sessions", "write_events"]

# Rows in one statement at most: below SQLite's 999 parameters of old (8 a session row).
_ROWS = 120


@functools.cache
def _statement(head: str, width: int, rows: int, tail: str = "") -> str:
    """``head`` with ``rows`` rows of ``width`` parameters, then ``tail``."""
    row = "(" + ", ".join(["?"] * width) + ")"
    return f"{head} {', '.join([row] * rows)}{tail}"


def _write_rows(conn: sqlite3.Connection, head: str, width: int, values: list[Any],
                tail: str = "") -> None:
    """Run ``head VALUES ...`` over ``values`` (``width`` a row): one statement a chunk."""
    step = _ROWS * width
    for at in range(0, len(values), step):
        chunk = values[at:at + step]
        conn.execute(_statement(head, width, len(chunk) // width, tail), chunk)


_EVENTS = "INSERT INTO events (session_id, seq, kind, time, data) VALUES"
# Each batch writes its session's row: made with the first events, later its last activity
# (the latest event time, as the events say; a fork's events keep their origin's times).
_TOUCH = ("INSERT INTO sessions (session_id, parent_id, parent_tool_call_id, path, child_key, "
          "created_at, owner, updated_at) VALUES")
_TOUCHED = (" ON CONFLICT(session_id) DO UPDATE SET updated_at = "
            "MAX(sessions.updated_at, excluded.updated_at)")
_DROP = "DELETE FROM leases WHERE (session_id, owner) IN (VALUES"


def write_events(conn: sqlite3.Connection, values: list[Any]) -> None:
    """Insert events: (session id, seq, kind, time, data) a row, flattened. Up to `_ROWS`
    events are one statement, which SQLite undoes alone if a position is taken."""
    _write_rows(conn, _EVENTS, 5, values)


def touch_sessions(conn: sqlite3.Connection, values: list[Any] | tuple[Any, ...]) -> None:
    """Make or touch session rows: (id, parent id, parent tool call id, path, child key,
    created at, owner, updated at) a row, flattened; ``updated_at`` only moves forward."""
    _write_rows(conn, _TOUCH, 8, list(values), _TOUCHED)


def drop_leases(conn: sqlite3.Connection, values: list[Any] | tuple[Any, ...]) -> None:
    """Delete lease rows: (session id, owner) a row, flattened."""
    _write_rows(conn, _DROP, 2, list(values), ")")
