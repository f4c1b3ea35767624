"""The rows of a SQLite session file's sessions: a session's info, the listings (a parent's
children, a page of the most recently updated) and deletion with the delegated children."""

from __future__ import annotations

import sqlite3

from .base import SessionInfo

__all__ = ["SELECT", "children_of", "delete", "info_of", "one", "page"]


def info_of(
    row: tuple[str, str | None, str | None, str, str, float, str, float, int,
               str | None, int | None]
) -> SessionInfo:
    return SessionInfo(
        session_id=row[0],
        parent_id=row[1],
        parent_tool_call_id=row[2],
        path=row[3],
        key=row[4],
        created_at=row[5],
        owner=row[6],
        updated_at=row[7],
        event_count=row[8],
        forked_from=row[9],
        forked_at=row[10] or 0,
    )


_COLUMNS = "session_id, parent_id, parent_tool_call_id, path, child_key, created_at, owner"
SELECT = (f"SELECT {_COLUMNS}, updated_at, (SELECT COUNT(*) FROM events e WHERE e.session_id = "
           "s.session_id), (SELECT origin_id FROM forks f WHERE f.session_id = s.session_id), "
           "(SELECT at FROM forks f WHERE f.session_id = s.session_id) FROM sessions s")


def children_of(conn: sqlite3.Connection, parent_id: str | None) -> list[SessionInfo]:
    where = "parent_id IS NULL" if parent_id is None else "parent_id = ?"
    args: tuple[str, ...] = () if parent_id is None else (parent_id,)
    rows = conn.execute(f"{SELECT} WHERE {where} ORDER BY created_at", args).fetchall()
    return [info_of(r) for r in rows]


def page(conn: sqlite3.Connection, parent_id: str | None, owner: str | None, limit: int,
          offset: int) -> list[SessionInfo]:
    """A page of sessions, most recently updated first (`SQLiteStore.list_sessions`)."""
    where, args = ("parent_id IS NULL", []) if parent_id is None else ("parent_id = ?",
                                                                       [parent_id])
    if owner is not None:
        where += " AND owner = ?"
        args.append(owner)
    rows = conn.execute(f"{SELECT} WHERE {where} ORDER BY updated_at DESC, session_id "
                        "LIMIT ? OFFSET ?", (*args, limit, offset)).fetchall()
    return [info_of(r) for r in rows]


def one(conn: sqlite3.Connection, session_id: str) -> SessionInfo | None:
    row = conn.execute(f"{SELECT} WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else info_of(row)


def delete(conn: sqlite3.Connection, session_id: str) -> bool:
    """Delete a session, its delegated children (recursively), their events and leases."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        ids = [r[0] for r in conn.execute(
            "WITH RECURSIVE tree(id) AS (SELECT session_id FROM sessions WHERE session_id = ? "
            "UNION ALL SELECT s.session_id FROM sessions s JOIN tree ON s.parent_id = tree.id) "
            "SELECT id FROM tree", (session_id,))]
        for table in ("events", "leases", "forks", "sessions"):
            conn.executemany(f"DELETE FROM {table} WHERE session_id = ?", [(i,) for i in ids])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return bool(ids)
