"""``Idempotency-Key`` on the endpoints that start runs: a retried request gets the first
request's response, or waits for it while its run goes on, and never starts a second run.

A key is claimed in the session store (`relayrace.sessions.IdempotencyRecords`) for its owner
(the API key; with none configured, everyone is one owner), with a fingerprint of the request.
The claimant does the work and records its response when the run ends, whether or not its
client is still there; while the run goes on it renews the claim, so a claim whose server went
away is recognised (and answered 409, never run again). A request that is refused before its
run starts (bad input, a busy session) records nothing: retrying it with the key is fine.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from ..sessions.idempotency import IdempotencyRecords, StoredResponse
from ._errors import NO_RETRY, ApiError, error_body
from ._runs import RunRecord

__all__ = ["DEFAULT_WINDOW", "HEADER", "Claim", "Idempotency"]

log = logging.getLogger("relayrace.server")

HEADER = "Idempotency-Key"
DEFAULT_WINDOW = 24 * 3600.0
"""Seconds a key's record is kept: a retry within it gets the first response."""
REPLAYED = "Idempotent-Replayed"
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
_UNSTORED = {"content-length", "date", "server"}


class Claim:
    """A request's hold on its key (``key`` ``None``: the request sent none). Used as
    ``async with``: a request that fails before its run starts releases the key."""

    def __init__(self, keeper: Idempotency, owner: str, key: str | None) -> None:
        self.keeper = keeper
        self.owner = owner
        self.key = key
        self.started = False

    async def __aenter__(self) -> Claim:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None and not self.started and self.key is not None:
            await asyncio.shield(self.keeper.release(self.owner, self.key))

    async def record(self, response: Response) -> Response:
        """Record ``response`` as the key's (the work is done); it is returned, recorded or
        not: a store that fails here leaves a claim a retry finds abandoned (409)."""
        self.started = True
        if self.key is not None:
            try:
                await self.keeper.finish(self.owner, self.key, response)
            except Exception:
                log.exception("Could not record the response to %s %r", HEADER, self.key)
        return response

    def settle(self, run: RunRecord,
               respond: Callable[[RunRecord], Awaitable[Response]]) -> asyncio.Task[Response]:
        """When ``run`` ends, ``respond(run)`` is the key's response: a task that renews the
        claim meanwhile and records it, whether or not the request still waits."""
        self.started = True
        task = asyncio.ensure_future(self._settle(run, respond))
        self.keeper.tasks.add(task)
        task.add_done_callback(self.keeper.tasks.discard)
        return task

    async def _settle(self, run: RunRecord,
                      respond: Callable[[RunRecord], Awaitable[Response]]) -> Response:
        assert run.task is not None
        while not run.task.done():
            await asyncio.wait({run.task}, timeout=self.keeper.renew)
            if self.key is not None and not run.task.done():
                with contextlib.suppress(Exception):  # renewed next time; it lapses late
                    await self.keeper.records.touch(self.owner, self.key)
        try:
            response = await respond(run)
        except Exception:  # recorded all the same: a retry must not start the run again
            log.exception("Could not answer run %s", run.run_id)
            response = JSONResponse(error_body("Internal error; the server's log has the "
                                               "details.", "internal_error"),
                                    status_code=500, headers=NO_RETRY)
        return await self.record(response)


class Idempotency:
    """The server's side of ``Idempotency-Key``: claims, waits and replays, over ``records``
    kept for ``window`` seconds. A claim not renewed for ``3 * renew`` seconds is taken for
    one whose server went away; a waiting request looks again every ``poll`` seconds."""

    def __init__(self, records: IdempotencyRecords, window: float = DEFAULT_WINDOW, *,
                 renew: float = 10.0, poll: float = 0.25) -> None:
        self.records = records
        self.window = window
        self.renew = renew
        self.poll = poll
        self._held: dict[tuple[str, str], asyncio.Event] = {}  # this process's open claims
        self.tasks: set[asyncio.Task[Response]] = set()
        """The claims being settled (their runs still going)."""

    async def enter(self, request: Request, owner: str, *request_parts: Any
                    ) -> Claim | Response:
        """The request's claim on its key (or on none), or the response to replay for it.

        ``request_parts`` is what makes the request this request besides its method and
        path (its body, as its pydantic model, and headers that change what it does): a key
        reused with other parts is refused (422). They are read only when a key is sent.
        """
        key = request.headers.get(HEADER)
        if key is None:
            return Claim(self, owner, None)
        if not _KEY.match(key):
            raise ApiError(400, f"{HEADER} is 1 to 255 printable ASCII characters without "
                           "spaces (a UUID, say).", "invalid_request_error")
        fingerprint = hashlib.sha256(json.dumps(
            [request.method, request.url.path, *(
                p.model_dump() if isinstance(p, BaseModel) else p for p in request_parts)],
            sort_keys=True,
            default=str).encode()).hexdigest()
        found = await self.records.claim(owner, key, fingerprint, window=self.window)
        while found is not None:
            if found.fingerprint != fingerprint:
                raise ApiError(422, f"{HEADER} {key!r} was already used with a different "
                               f"request (another path or body); send a new key for a new "
                               "request, or this one's exact body to get its result.",
                               "idempotency_key_reused")
            if found.response is not None:
                return _replay(found.response)
            if time.time() - found.updated_at > 3 * self.renew:
                raise ApiError(409, f"The request with {HEADER} {key!r} stopped before its "
                               "run ended (its server went away); it is not run again. Its "
                               "session keeps what it did; send a new key to run anew.",
                               "idempotency_key_interrupted", headers=NO_RETRY)
            held = self._held.get((owner, key))
            if held is not None:  # this process runs it: woken when it ends
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(held.wait(), self.poll)
            else:
                await asyncio.sleep(self.poll)
            found = await self.records.get(owner, key, window=self.window)
            if found is None:  # released, or expired: claimed afresh
                found = await self.records.claim(owner, key, fingerprint, window=self.window)
        self._held[(owner, key)] = asyncio.Event()
        return Claim(self, owner, key)

    async def finish(self, owner: str, key: str, response: Response) -> None:
        """Record ``response`` for the key, and wake this process's waiters."""
        try:
            headers = {k: v for k, v in response.headers.items() if k not in _UNSTORED}
            body = bytes(response.body).decode()
            await self.records.finish(owner, key, StoredResponse(
                response.status_code, headers, body))
        finally:
            self._wake(owner, key)

    async def release(self, owner: str, key: str) -> None:
        """Forget the claim (its request started nothing), and wake this process's waiters."""
        try:
            await self.records.release(owner, key)
        finally:
            self._wake(owner, key)

    def _wake(self, owner: str, key: str) -> None:
        held = self._held.pop((owner, key), None)
        if held is not None:
            held.set()

    async def aclose(self) -> None:
        """Wait for the claims being settled (their runs have been stopped)."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


def _replay(stored: StoredResponse) -> Response:
    return Response(stored.body.encode(), status_code=stored.status,
                    headers={**stored.headers, REPLAYED: "true"})
