"""A fake HTTP server for the provider adapter tests (no network), and stream collection.

``FakeServer`` is plugged into an SDK client as its transport: it replays queued responses
(recorded payloads from ``tests/payloads/<provider>/``) or raises queued transport errors, and
records every request, so a test checks both the JSON an adapter sent and what it parsed back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2

from relayrace.models import Model, ModelRequest, ModelResponse


class FakeServer:
    """Replays queued responses (or raises queued transport errors) and records requests."""

    def __init__(self, *replies: httpx2.Response | type[Exception]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, type):
            raise reply("simulated transport failure", request=request)
        return reply

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)

    def http_client(self) -> httpx2.AsyncClient:
        """An HTTP client for an SDK whose every request this server answers."""
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))


def replay(path: Path, status: int = 200, headers: dict[str, str] | None = None) -> httpx2.Response:
    """A recorded payload as the server's response (SSE for ``.sse`` files, JSON otherwise)."""
    kind = "text/event-stream" if path.suffix == ".sse" else "application/json"
    return httpx2.Response(
        status,
        content=path.read_bytes(),
        headers={"content-type": kind, **(headers or {})},
    )


async def collect(model: Model, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    """Stream ``request``: the text deltas, and the complete response, which must come last."""
    items = [item async for item in model.stream(request)]
    *deltas, final = items
    assert all(isinstance(d, str) for d in deltas)
    assert isinstance(final, ModelResponse)
    return [d for d in deltas if isinstance(d, str)], final
