"""Sessions: append-only event logs, in memory or in SQLite."""

from .base import Session, SessionInfo, new_session_id
from .memory import MemorySession
from .sqlite import DEFAULT_DB_PATH, SQLiteSession

__all__ = [
    "DEFAULT_DB_PATH",
    "MemorySession",
    "SQLiteSession",
    "Session",
    "SessionInfo",
    "new_session_id",
]
