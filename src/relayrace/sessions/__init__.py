"""Sessions: append-only event logs, and the stores they live in (memory, SQLite, PostgreSQL).

Layer: a port (with `steps`, where a durable engine records a run). Imports only `core`.

The log and the in-memory session load with the package; the persistent stores (SQLite and
what serves them) load when one of their names is first used, so ``import relayrace`` and
``relayrace --help`` never open the SQLite modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core._lazy import lazy_names
from .base import DEFAULT_DB_PATH, Session, SessionInfo, new_session_id
from .memory import MemorySession

if TYPE_CHECKING:
    from .idempotency import IdempotencyRecord, IdempotencyRecords, StoredResponse
    from .sqlite import SQLiteSession
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

__getattr__ = lazy_names(__name__, {
    "IdempotencyRecord": ".idempotency",
    "IdempotencyRecords": ".idempotency",
    "StoredResponse": ".idempotency",
    "SQLiteSession": ".sqlite",
    "MemoryStore": ".store",
    "SessionStore": ".store",
    "SQLiteStore": ".store",
    "open_store": ".store",
})
