"""Snapshots of the conversations a process ran last, per store: a session opened again (a
stateless server opens one per request) starts from its snapshot and reads only the events
appended since, so a turn costs the same at 5,000 events as at 50.

A snapshot is a copy of a session object's view as it stood after its run, at a known
position of the log. The log stays the only record: a snapshot is used only where the store
still holds the session it was taken of (the same ``created_at``: a session deleted and made
again is another log), and whatever was appended since, by any process, is read and folded in
as always. The oldest events a conversation holds are never read again until something asks
for the whole log (`Session.get_events`: an export, a fork, the server's history). Snapshots
are kept up to ``SNAPSHOT_EVENTS`` events per store, the least recently used dropped first.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict

from .base import SessionInfo
from .view import LogView

__all__ = ["SNAPSHOT_EVENTS", "Snapshots"]

SNAPSHOT_EVENTS = 200_000
"""Events a store's snapshots hold at most in one process (their messages are what they cost)."""


class Snapshots:
    """One store's snapshots in this process, by session id (safe to use from any thread)."""

    __slots__ = ("_events", "_kept", "_limit", "_lock")

    def __init__(self, limit: int = SNAPSHOT_EVENTS) -> None:
        self._kept: OrderedDict[str, tuple[LogView, SessionInfo]] = OrderedDict()
        self._events = 0
        self._limit = limit
        self._lock = threading.Lock()

    def take(self, session_id: str) -> tuple[LogView, SessionInfo] | None:
        """A copy of the session's snapshot, to fold on from (``None``: none is kept)."""
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None:
                return None
            self._kept.move_to_end(session_id)
        return kept[0].copy(), copy.copy(kept[1])

    def keep(self, session_id: str, view: LogView, info: SessionInfo) -> None:
        """Keep a copy of ``view`` (every event up to ``view.size`` folded in) and ``info``."""
        if not view.size or view.size > self._limit:
            return
        made = (view.copy(), copy.copy(info))
        with self._lock:
            old = self._kept.pop(session_id, None)
            if old is not None:
                self._events -= old[0].size
            self._kept[session_id] = made
            self._events += view.size
            while self._events > self._limit:
                _, dropped = self._kept.popitem(last=False)
                self._events -= dropped[0].size

    def forget(self, session_id: str) -> None:
        """Drop the session's snapshot (it was deleted)."""
        with self._lock:
            old = self._kept.pop(session_id, None)
            if old is not None:
                self._events -= old[0].size
