"""Sessions: append-only event logs, and the stores they live in (memory, SQLite, PostgreSQL).

Layer: a port (with `steps`, where a durable engine records a run). Imports only `core`.
"""

from .base import Session, SessionInfo, new_session_id
from .idempotency import IdempotencyRecord, IdempotencyRecords, StoredResponse
from .memory import MemorySession
from .sqlite import DEFAULT_DB_PATH, SQLiteSession
from .store import MemoryStore, SessionStore, SQLiteStore, open_store

__all__ = [
    "DEFAULT_DB_PATH",
    "IdempotencyRecord",
    "IdempotencyRecords",
    "MemorySession",
    "MemoryStore",
    "SQLiteSession",
    "SQLiteStore",
    "Session",
    "SessionInfo",
    "SessionStore",
    "StoredResponse",
    "new_session_id",
    "open_store",
]
