"""A fake HTTP server for the provider adapter tests (no network), and stream collection.

``FakeServer`` is plugged into an SDK client as its transport: it replays queued responses
(recorded payloads from ``tests/payloads/<provider>/``) or raises queued transport errors, and
records every request, so a test checks both the JSON an adapter sent and what it parsed back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai

from relayrace.models import Model, ModelRequest, ModelResponse
from relayrace.models.anthropic import AnthropicModel
from relayrace.models.openai import OpenAIChatModel


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


def sse_events(path: Path) -> list[bytes]:
    """The events of a recorded stream, each with its blank-line end."""
    return [event + b"\n\n" for event in path.read_bytes().split(b"\n\n") if event.strip()]


def cut_stream(path: Path, events: int, *, reset: bool = False) -> httpx2.Response:
    """The first ``events`` events of a recorded stream; then the body ends, or with ``reset``
    the connection drops as a proxy or a crashing server would drop it."""

    async def body() -> AsyncIterator[bytes]:
        for event in sse_events(path)[:events]:
            yield event
        if reset:
            raise httpx2.RemoteProtocolError(
                "peer closed connection without sending complete message body")

    return httpx2.Response(200, content=body(), headers={"content-type": "text/event-stream"})


def edited(path: Path, old: str, new: str) -> httpx2.Response:
    """A recorded payload with ``old`` replaced by ``new`` (exactly once)."""
    data = path.read_text()
    assert data.count(old) == 1, old
    return replay_bytes(data.replace(old, new).encode(), path.suffix)


def replay_bytes(content: bytes, suffix: str = ".json") -> httpx2.Response:
    """``content`` as a 200 response of the kind a recorded payload with ``suffix`` has."""
    kind = "text/event-stream" if suffix == ".sse" else "application/json"
    return httpx2.Response(200, content=content, headers={"content-type": kind})


async def collect(model: Model, request: ModelRequest) -> tuple[list[str], ModelResponse]:
    """Stream ``request``: the text deltas, and the complete response, which must come last."""
    items = [item async for item in model.stream(request)]
    *deltas, final = items
    assert all(isinstance(d, str) for d in deltas)
    assert isinstance(final, ModelResponse)
    return [d for d in deltas if isinstance(d, str)], final


PAYLOADS = Path(__file__).parent / "payloads"


def openai_model(server: FakeServer, *, max_retries: int = 0) -> OpenAIChatModel:
    """An ``OpenAIChatModel`` whose every request ``server`` answers."""
    client = openai.AsyncOpenAI(api_key="test-key", base_url="https://api.test/v1",
                                max_retries=max_retries, http_client=server.http_client())
    return OpenAIChatModel("gpt-4o-mini", client=client)


def anthropic_model(server: FakeServer, *, max_retries: int = 0) -> AnthropicModel:
    """An ``AnthropicModel`` whose every request ``server`` answers."""
    client = anthropic.AsyncAnthropic(api_key="test-key", base_url="https://anthropic.test",
                                      max_retries=max_retries, http_client=server.http_client())
    return AnthropicModel("claude-test", client=client)
