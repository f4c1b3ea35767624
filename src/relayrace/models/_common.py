"""What the provider adapters share: SDK clients per event loop, the request deadline, and
stored tool calls made into a valid request (arguments as objects, ids unique and paired)."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import httpx2
from pydantic_core import from_json

from ..core.messages import Message
from .interface import DEFAULT_DEADLINE, ModelSettings

T = TypeVar("T")


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class BadResponse(Exception):
    """A response that arrived but cannot be used (malformed, cut short): worth asking again."""


# What a 200 response can fail with that the SDKs let through: a body that is not JSON, a
# connection dropped or a read timed out while a stream is read, a body of the wrong shape.
UNREADABLE = (BadResponse, json.JSONDecodeError, httpx2.TransportError)


class GaveUp(Exception):
    """The last of ``tries`` responses was unreadable too (the message says how)."""

    def __init__(self, error: BaseException, tries: int, why: str = "") -> None:
        self.tries = tries
        if not isinstance(error, BadResponse):  # a library's error: its type says the most
            why = f" ({type(error).__name__}){why}"
        super().__init__(f"{error}{why}")


async def retrying(attempt: Callable[[], Awaitable[T]], retries: int) -> T:
    """``attempt()``, tried up to ``retries`` more times while its response is unreadable."""
    tries = 0
    while True:
        tries += 1
        try:
            return await attempt()
        except UNREADABLE as e:
            if tries > retries:
                raise GaveUp(e, tries) from e


def gave_up(e: BaseException, retry: int, retries: int, streamed: bool) -> GaveUp | None:
    """For try ``retry`` of a stream that failed with ``e``: ``GaveUp`` if it is not tried
    again (no tries left, or its text already streamed, which a new try would repeat)."""
    if streamed:
        return GaveUp(e, retry + 1, "; not asked again, as its text had already been streamed")
    return GaveUp(e, retry + 1) if retry == retries else None


def tries_text(tries: int) -> str:
    """``"1 try"``, ``"3 tries"``."""
    return "1 try" if tries == 1 else f"{tries} tries"


class LoopClients(Generic[C]):
    """One SDK client per event loop, closed while that loop shuts down.

    An SDK client's connections belong to the loop that opened them, so a client cached across
    loops (``Runner.run_sync`` twice) fails with "Event loop is closed". Each loop gets its own
    client; an async generator parked on the loop closes it when ``asyncio.run`` (or any loop
    owner calling ``shutdown_asyncgens``) finalizes the loop's generators.
    """

    def __init__(self, build: Callable[[], C]) -> None:
        self._build = build
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )
        self._keepers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, AsyncGenerator[None, None]
        ] = weakref.WeakKeyDictionary()

    def current(self) -> C:
        """The running loop's client (built if needed); outside a loop, a new one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return self._build()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._build()
        return client

    async def get(self) -> C:
        """The running loop's client, set to be closed when the loop shuts down."""
        client = self.current()
        loop = asyncio.get_running_loop()
        if loop not in self._keepers:
            keeper = self._keeper(client)
            await keeper.asend(None)  # started on this loop: its shutdown will close it
            self._keepers[loop] = keeper
        return client

    async def _keeper(self, client: C) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            loop = asyncio.get_running_loop()
            self._clients.pop(loop, None)
            self._keepers.pop(loop, None)
            await client.close()


def deadline(settings: ModelSettings) -> float:
    """Seconds a whole request may take: ``ModelSettings.deadline`` or ``DEFAULT_DEADLINE``."""
    return settings.deadline if settings.deadline is not None else DEFAULT_DEADLINE


def deadline_at(settings: ModelSettings) -> float:
    """The loop time by which a request must be done."""
    return asyncio.get_running_loop().time() + deadline(settings)


async def bounded(items: AsyncIterator[T], when: float) -> AsyncIterator[T]:
    """The items of a stream, each awaited within the deadline ``when`` (loop time).

    Only the waits are bounded: the consumer's own work between items never gets cancelled.
    A body that breaks while it is read counts as unreadable whichever SDK version reads it:
    newer SDKs (anthropic 2.17, for one) wrap the transport error in their connection error,
    which would otherwise read as a request that never reached the server.
    """
    while True:
        async with asyncio.timeout_at(when):
            try:
                item = await anext(items)
            except StopAsyncIteration:
                return
            except Exception as e:
                if isinstance(e.__cause__, httpx2.TransportError) and not isinstance(e, UNREADABLE):
                    raise e.__cause__ from None
                raise
        yield item


def arguments_object(arguments: str) -> dict[str, Any] | None:
    """Stored arguments as a JSON object, ``{}`` if blank; ``None`` if they are not one.

    Parsed like tool arguments are (``pydantic_core``), whose nesting limit keeps any stored
    text, however deep, from overflowing the stack here or in an SDK serializing it.
    """
    if not arguments.strip():
        return {}
    try:
        parsed = from_json(arguments)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


@dataclass(slots=True)
class ToolIds:
    """The id each stored tool call and tool result goes to a provider with.

    Some servers number calls per response (``call_0`` in every turn), so stored ids repeat.
    A result answers the first unanswered call with its id in the assistant turn just before
    it; every call gets an id unique in the request, and its result the same one.
    """

    calls: dict[tuple[int, int], str] = field(default_factory=dict)
    """(message index, call index) -> id, for every call."""
    results: dict[int, str] = field(default_factory=dict)
    """Message index -> id, for every tool result."""
    paired: set[str] = field(default_factory=set)
    """The ids of calls answered in the turn right after them (each by one result)."""


def tool_ids(messages: Sequence[Message], safe: Callable[[str], str] = str) -> ToolIds:
    """Unique, paired ids for the tool calls and results of ``messages`` (see ``ToolIds``).

    ``safe`` rewrites an id into the characters the provider accepts. Consecutive assistant
    messages form one turn; a turn's calls wait for results until the next assistant turn.
    """
    ids = ToolIds()
    used: set[str] = set()

    def unique(call_id: str) -> str:
        base = safe(call_id) or "call"
        wire, n = base, 1
        while wire in used:
            n += 1
            wire = f"{base}_{n}"
        used.add(wire)
        return wire

    waiting: dict[str, list[str]] = {}  # stored id -> ids of this turn's unanswered calls
    previous_assistant = False
    for i, m in enumerate(messages):
        if m.role == "assistant":
            if not previous_assistant:
                waiting = {}
            for j, tc in enumerate(m.tool_calls):
                wire = ids.calls[(i, j)] = unique(tc.id)
                waiting.setdefault(tc.id, []).append(wire)
            previous_assistant = True
            continue
        previous_assistant = False
        if m.role == "tool":
            calls = waiting.get(m.tool_call_id or "")
            if calls:
                wire = ids.results[i] = calls.pop(0)
                ids.paired.add(wire)
            else:
                ids.results[i] = unique(m.tool_call_id or "")
    return ids
