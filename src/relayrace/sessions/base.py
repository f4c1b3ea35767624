"""The `Session` interface: an append-only log of typed events."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import os
import secrets
import socket
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.events import AgentEvent, MessageEvent, ToolResultEvent, dump_events
from ..core.exceptions import SessionInUseError, UserError
from .view import LogView

__all__ = ["DEFAULT_DB_PATH", "Lease", "LeaseHolder", "LogView", "Session", "SessionInfo",
           "check_wait", "check_waits", "lease_row_owner", "new_session_id", "process_tag"]

DEFAULT_DB_PATH = Path(".relayrace") / "sessions.db"
"""Where SQLite sessions and stores live unless told otherwise."""


def new_session_id() -> str:
    """A fresh session id (16 hex digits) from the OS's cryptographic source.

    Never from ``random``: an application that seeds it would give two users the same id, and
    one user's run the other's history.
    """
    return secrets.token_hex(8)


class LeaseHolder:
    """Who holds a store's lease row: written in its owner column as ``TAG:SINCE:OWNER``, the
    TAG naming the holder's process (``TOKEN@MACHINE/PID``), so that another process can tell
    a holder that died on this machine (its lease is taken over at once) and say who holds it.
    """

    __slots__ = ("expires_at", "machine", "pid", "since")

    def __init__(self, machine: str, pid: int, since: float, expires_at: float) -> None:
        self.machine, self.pid, self.since, self.expires_at = machine, pid, since, expires_at

    @classmethod
    def of(cls, row_owner: str, expires_at: float) -> LeaseHolder | None:
        """The holder a lease row names (``None``: a row of an older relayrace)."""
        tag, _, rest = row_owner.partition(":")
        since, _, _ = rest.partition(":")
        _, _, where = tag.partition("@")
        machine, _, pid = where.rpartition("/")
        try:
            return cls(machine, int(pid), float(since), expires_at)
        except ValueError:
            return None

    def gone(self) -> bool:
        """Whether the holder was a process of this machine that no longer runs."""
        return self.machine == _MACHINE and self.pid != os.getpid() and not _alive(self.pid)

    def __str__(self) -> str:
        def at(t: float) -> str:
            return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))
        host = self.machine.partition("[")[0]
        return (f"held by process {self.pid} on host {host} since {at(self.since)}; it lapses "
                f"at {at(self.expires_at)} unless its holder renews it")


def _machine() -> str:
    """This machine as lease rows name it: the host name, and the process id namespace (two
    containers may share a host name, never one namespace)."""
    try:
        space = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        space = ""
    return f"{socket.gethostname()}[{space}]" if space else socket.gethostname()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (a zombie, dead but not yet reaped by its
    parent, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


_MACHINE = _machine()
_process: tuple[int, str] = (0, "")


def lease_row_owner(owner: str, since: float) -> str:
    """``owner``'s lease as a store's row names it: ``TAG:SINCE:OWNER`` (see `LeaseHolder`)."""
    return f"{process_tag()}:{since:.3f}:{owner}"


def process_tag() -> str:
    """This process's tag in lease rows (a new one after a fork, which holds no lease): a
    lease row with it is this process's own to take again."""
    global _process
    if _process[0] != os.getpid():
        _process = (os.getpid(), f"{secrets.token_hex(6)}@{_MACHINE}/{os.getpid()}")
    return _process[1]


# The write leases held in this process: a log's lease key -> the owner holding it. A lock,
# not an asyncio primitive: runs on the same log may live in different threads' event loops.
_leases: dict[Hashable, object] = {}
_leases_lock = threading.Lock()


@dataclass(slots=True, kw_only=True)
class SessionInfo:
    """A session's identity and links, as listed by a store."""

    session_id: str
    """The session's id."""
    parent_id: str | None = None
    """For a delegated child: the parent session."""
    parent_tool_call_id: str | None = None
    """For a delegated child: the parent's tool call that started it."""
    path: str = ""
    """For a delegated child: its agent path, e.g. ``coordinator/researcher``."""
    key: str = ""
    """For a delegated child: which child of the parent's tool call it is (stable on resume)."""
    created_at: float = 0.0
    """When the session was created (seconds since the epoch)."""
    updated_at: float = 0.0
    """When an event was last appended."""
    event_count: int = 0
    """How many events the log holds."""
    owner: str = ""
    """Whom the session belongs to (the server's API key id; ``""``: nobody in particular).
    Delegated children and opened sessions take their session's owner."""
    forked_from: str | None = None
    """For a fork (`Session.fork`): the session it was forked from."""
    forked_at: int = 0
    """For a fork: how many of its origin's events it began with (the origin's event seq)."""


_DURABLE_RENAMED = ("Session.durable is renamed Session.persistent (whether the log outlives "
                    "the process; relayrace.durable is about durable runs): use persistent.")


class Session(ABC):
    """An append-only log of events; what each agent sees is derived from it.

    Everything needed to continue a run is in the log, so a crashed run can be resumed by
    running again on the same session.
    """

    session_id: str
    """The session's id."""
    info: SessionInfo
    """Its identity and parent links."""

    persistent: bool = True
    """Whether the log outlives the process; if so, a run writes its input before the model
    is called and a turn's tool calls before they run, so a crash then loses nothing (a memory
    log takes them with the batch that follows)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._lease_here = cls.acquire_lease is Session.acquire_lease and \
            cls.release_lease is Session.release_lease and \
            cls._lease_key is Session._lease_key and cls.__hash__ is object.__hash__
        old = cls.__dict__.get("durable")
        if isinstance(old, bool):  # a subclass written before the rename says it the old way
            warnings.warn(_DURABLE_RENAMED, DeprecationWarning, stacklevel=2)
            cls.persistent = old
            del cls.durable

    @property
    def durable(self) -> bool:
        """Deprecated alias of `persistent` (``relayrace.durable`` is about durable runs)."""
        warnings.warn(_DURABLE_RENAMED, DeprecationWarning, stacklevel=2)
        return self.persistent

    @durable.setter
    def durable(self, value: bool) -> None:
        warnings.warn(_DURABLE_RENAMED, DeprecationWarning, stacklevel=2)
        self.persistent = value

    _view: LogView | None = None
    _unfolded: list[Sequence[AgentEvent]] | None = None  # appended since the view was read

    @abstractmethod
    async def get_events(self) -> list[AgentEvent]:
        """Every event, oldest first."""

    async def view(self) -> LogView:
        """The conversation derived from the log, cached and brought up to date when read."""
        view = self._view
        if view is None:
            return self._read(await self.get_events())
        if self._unfolded:
            self._catch_up(view)
        return view

    def _read(self, events: Sequence[AgentEvent]) -> LogView:
        """A new view of the whole log, ``events``, now the cached one."""
        view = LogView()
        view.fold(events)
        self._view, self._unfolded = view, None
        return view

    def _catch_up(self, view: LogView) -> None:
        """Fold what was appended since the cached ``view`` was read into it."""
        for batch in self._unfolded or ():
            view.fold(batch)
        self._unfolded = None

    def _folded(self, events: Sequence[AgentEvent]) -> None:
        """Note ``events`` as appended, for the cached view to take in when next read.

        Folding lazily costs nothing for logs that are written but not read again, such as
        a delegated child's.
        """
        if self._view is not None:
            if self._unfolded is None:
                self._unfolded = [events]
            else:
                self._unfolded.append(events)

    @abstractmethod
    async def append(self, events: Sequence[AgentEvent]) -> None:
        """Append ``events`` atomically, in order."""

    @abstractmethod
    def child(self, *, path: str, tool_call_id: str, key: str = "") -> Session:
        """A new session in the same store, linked to this one, for a delegated child run."""

    def open(self, session_id: str) -> Session:
        """Another session of the same store, by id (empty until written): where an agent's
        `Memory` lives. A store that can reach its other sessions by id overrides this."""
        raise UserError(f"{type(self).__name__} cannot open another session of its store by "
                        f"id, which an agent's memory needs (it would open {session_id!r}); "
                        "use a store that can (MemorySession, SQLiteSession), or override "
                        "Session.open.")

    @abstractmethod
    async def children(self) -> list[SessionInfo]:
        """The child sessions started from this one."""

    @abstractmethod
    def open_child(self, info: SessionInfo) -> Session:
        """The child session ``info`` describes (one of ``children()``)."""

    # -- one writer at a time ------------------------------------------------------------------

    lease_poll: float = 0.05
    """How often a run waiting for the lease (``wait_for_session``) tries again, in seconds."""

    def _lease_key(self) -> Hashable:
        """What names this log among the process's leases: by default the object itself."""
        return self

    holder: str = ""
    """Who held the lease when this object last failed to take it (for the error)."""

    _run_owner: str = ""
    """The owner whose lease a run holds here (``Runner``'s): the run writes nothing after the
    batch that ends it (its last event a `RunFinishedEvent`), so a store may give the lease
    back in that batch's own write."""

    _lease_here = True
    """Whether the lease lives only in this process and is keyed by this object (the lease
    methods and the key are `Session`'s, the hash is identity): then a free one is taken and
    given back without an await or a lock (`Lease.take`)."""

    async def acquire_lease(self, owner: str) -> bool:
        """Take the session's write lease for ``owner``; ``False`` if another owner holds it
        (``holder`` then says who).

        The default lease lives in this process, on this session object. A store whose log is
        shared by other objects or processes extends it (`SQLiteSession` keeps a lease row).
        """
        if self._hold(owner):
            return True
        self.holder = "held by another run in this process"
        return False

    async def release_lease(self, owner: str) -> None:
        """Give up ``owner``'s lease (nothing happens if ``owner`` does not hold it)."""
        self._unhold(owner)

    def _hold(self, owner: object) -> bool:
        """Take the process's lease on this log for ``owner``; ``False`` if another holds it."""
        with _leases_lock:
            return _leases.setdefault(self._lease_key(), owner) == owner

    def _unhold(self, owner: object) -> None:
        """Give up ``owner``'s hold on the process's lease on this log, if it has it."""
        key = self._lease_key()
        with _leases_lock:
            if _leases.get(key) == owner:
                del _leases[key]

    def lease(self, *, wait: float | None = None) -> Lease:
        """Hold the session's write lease while an ``async with`` block runs; it yields the
        owner id.

        ``Runner`` holds it for each run on the top-level session (its delegated children's
        sessions are written only through it). Another holder means `SessionInUseError`, at
        once or, with ``wait`` seconds, once they have passed without the lease coming free.
        """
        if wait is not None:
            check_wait(wait)
        return Lease(self, wait)

    async def fork(self, *, at: int, edits: Mapping[int, str] | None = None) -> Session:
        """A new session of the same store whose log is this one's first ``at`` events (up to
        and including event seq ``at``, counted from 1), linked to this one as its origin.

        Running on the fork continues from that point (time travel); this session is left
        as it is. Delegated children's logs stay with the origin. ``edits`` maps seqs (up to
        ``at``) of messages (user, assistant or tool results) to the text the fork's copy
        has instead: the context its next run sees, changed.
        """
        events = await self.get_events()
        if isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= len(events):
            raise UserError(f"Session.fork(at=...) takes an event seq from 1 to {len(events)} "
                            f"(the log of {self.session_id!r}); got {at!r}.")
        copied = events[:at]
        for seq, text in (edits or {}).items():
            event = copied[seq - 1] if isinstance(seq, int) and 1 <= seq <= at else None
            if not isinstance(event, MessageEvent | ToolResultEvent) or not isinstance(text, str):
                raise UserError(f"Session.fork(edits=...) maps the seqs of messages (1 to {at}) "
                                f"to their new text; got {seq!r}: {text!r}.")
            changed = dataclasses.replace(event.message, content=text)
            copied[seq - 1] = dataclasses.replace(event, message=changed) \
                if isinstance(event, MessageEvent) else \
                dataclasses.replace(event, message=changed, full_content=None)
        made = self.open(new_session_id())
        made.info.owner = self.info.owner
        made.info.forked_from, made.info.forked_at = self.session_id, at
        await made._record_fork()
        await made.append(copied)
        return made

    async def _record_fork(self) -> None:  # noqa: B027 - a store whose info is enough keeps it
        """Store ``info.forked_from`` and ``info.forked_at`` where the info alone does not
        last (a database's table); written before the fork's events."""

    async def export_jsonl(self) -> str:
        """The whole log as JSON lines."""
        return "".join(line + "\n" for line in dump_events(await self.get_events()))


def check_wait(wait: float | None) -> None:
    """Refuse a ``wait_for_session`` that is not a number of seconds >= 0 (or None)."""
    if wait is not None and not 0 <= wait < math.inf:
        raise UserError(f"wait_for_session is a number of seconds >= 0, or None not to wait; "
                        f"got {wait!r}.")


def check_waits(**seconds: object) -> None:
    """Refuse a store's settings in seconds that are not: each a number >= 0 (``lease_ttl``
    above 0), named in the error."""
    for name, value in seconds.items():
        least = "above 0" if name == "lease_ttl" else ">= 0"
        if isinstance(value, bool) or not isinstance(value, int | float) or \
                not (value > 0 if name == "lease_ttl" else value >= 0) or value == math.inf:
            raise UserError(f"{name} is a number of seconds {least}; got {value!r}.")


# Owner ids: unique across processes (a random part drawn once) and cheap per run.
_owner_prefix = secrets.token_hex(6)
_owner_numbers = itertools.count()


class Lease:
    """``Session.lease()``: takes the lease on entry (waiting if asked), gives it up on exit.

    A ``run``'s lease (``Runner``'s) ends no later than the batch that ends the run, for a
    store that gives it back with that batch (`Session._run_owner`). A lease that lives only
    in this process can also be taken without an await (`take`, then `give_back`): a run on a
    `MemorySession` does that (its store has no batch to give it back with).
    """

    __slots__ = ("_owner", "_run", "_session", "_wait")

    def __init__(self, session: Session, wait: float | None, *, run: bool = False) -> None:
        self._session = session
        self._wait = wait
        self._run = run
        self._owner = ""  # named on entry (``take`` holds the lease as this object)

    def take(self) -> bool:
        """Take the lease now if it is free and lives only in this process (see
        ``Session._lease_here``); then `give_back` gives it up. ``False``: enter it with
        ``async with`` instead, which waits or refuses, and takes a store's shared record."""
        session = self._session
        # Keyed by the session object (identity hash and equality): one dict operation that
        # runs no Python code takes it, so no other thread can come between; no lock needed.
        return session._lease_here and _leases.setdefault(session, self) is self

    def give_back(self) -> None:
        """Give up the lease `take` took."""
        session = self._session
        if _leases.get(session) is self:  # only the holder removes its entry: no race
            del _leases[session]

    async def __aenter__(self) -> str:
        session = self._session
        owner = self._owner = f"{_owner_prefix}-{next(_owner_numbers)}"
        if not await session.acquire_lease(owner):  # the common case: free
            deadline = time.monotonic() + (self._wait or 0.0)
            while not await session.acquire_lease(owner):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SessionInUseError(session.session_id, waited=self._wait,
                                            holder=session.holder)
                await asyncio.sleep(min(session.lease_poll, left))
        if self._run:
            session._run_owner = owner
        return owner

    async def __aexit__(self, *exc_info: object) -> None:
        session = self._session
        if session._run_owner == self._owner:
            session._run_owner = ""
        # Not shielded: the process's own hold is dropped without suspending, so even a second
        # cancellation cannot keep it; a store's shared record lapses otherwise.
        await session.release_lease(self._owner)
