"""`MemorySession`: a session kept in process memory."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..core.events import AgentEvent
from ..core.exceptions import SessionConflictError
from .base import LogView, Session, SessionInfo, new_session_id

__all__ = ["MemorySession"]


class MemorySession(Session):
    """A session in memory: fast, and gone with the process.

    An append extends the log as this object last saw it (its last ``view()`` or its own last
    append): if ``events`` was changed behind its back, the append is refused with
    `SessionConflictError` rather than built on a log it has not read.

    Sessions made from one another (``open``, ``child``) share a store, so ``open(id)`` finds
    the same session again (an agent's memory across the conversations of a user); pass
    ``store=`` to share one between sessions made separately.
    """

    persistent = False

    def __init__(self, session_id: str | None = None, *, info: SessionInfo | None = None,
                 store: dict[str, MemorySession] | None = None) -> None:
        self.session_id = session_id or (info.session_id if info else new_session_id())
        self._store = store
        if store is not None:
            store.setdefault(self.session_id, self)
        now = time.time()
        self.info = info or SessionInfo(session_id=self.session_id, created_at=now, updated_at=now)
        self.events: list[AgentEvent] = []
        self.child_sessions: list[MemorySession] = []
        self._seen = 0  # the log's length as this object last saw it

    @property
    def store(self) -> dict[str, MemorySession]:
        """The sessions that can open one another by id, this one included."""
        store = self._store
        if store is None:
            # Made when first asked for: it holds this session, which holds it, and a session
            # that never opens another (most) is then freed with no garbage collection.
            store = self._store = {self.session_id: self}
        return store

    async def get_events(self) -> list[AgentEvent]:
        if len(self.events) != self._seen:  # what this object saw: appends extend this log
            self._view = None
            self._seen = len(self.events)
        return list(self.events)

    async def view(self) -> LogView:
        # Session.view's steps without a second coroutine: this runs once per run.
        mine, view = self.events, self._view
        if view is None or len(mine) != self._seen:  # new, or changed behind this object's back
            self._seen = len(mine)
            return self._read(mine)
        if self._unfolded:
            self._catch_up(view)
        return view

    async def append(self, events: Sequence[AgentEvent]) -> None:
        mine = self.events
        if len(mine) != self._seen:
            raise SessionConflictError(self.session_id, expected=self._seen, found=len(mine))
        mine.extend(events)
        info = self.info
        info.event_count = self._seen = len(mine)
        if events:
            info.updated_at = events[-1].time
        self._folded(events)

    def child(self, *, path: str, tool_call_id: str, key: str = "") -> MemorySession:
        now = time.time()
        info = SessionInfo(
            session_id=f"{self.session_id}.{len(self.child_sessions) + 1}",
            parent_id=self.session_id,
            parent_tool_call_id=tool_call_id,
            path=path,
            key=key,
            created_at=now,
            updated_at=now,
            owner=self.info.owner,
        )
        child = MemorySession(info=info, store=self.store)
        self.child_sessions.append(child)
        return child

    def open(self, session_id: str) -> MemorySession:
        found = self.store.get(session_id)
        if found is not None:
            return found
        now = time.time()
        return MemorySession(info=SessionInfo(session_id=session_id, created_at=now,
                                              updated_at=now, owner=self.info.owner),
                             store=self.store)

    async def children(self) -> list[SessionInfo]:
        return [c.info for c in self.child_sessions]

    def open_child(self, info: SessionInfo) -> MemorySession:
        for child in self.child_sessions:
            if child.session_id == info.session_id:
                return child
        raise KeyError(info.session_id)
