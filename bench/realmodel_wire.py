"""The wire between relayrace's OpenAI provider and a real server: recorded, and replayed.

`Recorder` is an HTTP transport that passes every request on and keeps it with its response,
a stream's bytes as they came (chunking and all). `Replayer` answers the same requests from
what was kept, so the replay tests (tests/test_realmodel_replay.py) run relayrace's real
OpenAI provider code on what a real llama.cpp server returned, without the server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai

from relayrace import ModelSettings
from relayrace.models.openai import OpenAIChatModel

MODEL_ALIAS = "qwen2.5-coder-1.5b"
"""The name the local server serves the model under (``--alias``)."""


class _Tee(httpx2.AsyncByteStream):
    """A response body passed on chunk by chunk, and kept in ``record`` once read: a stream
    as the chunks it came in (``chunks``), anything else whole (``body``)."""

    def __init__(self, stream: Any, record: dict[str, Any]) -> None:
        self._stream, self._record, self._parts = stream, record, list[bytes]()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._parts.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        if self._record["content_type"].startswith("text/event-stream"):
            self._record["chunks"] = [part.decode() for part in self._parts]
        else:
            self._record["body"] = b"".join(self._parts).decode()
        await self._stream.aclose()


class _Chunks(httpx2.AsyncByteStream):
    """A recorded stream's body, in the chunks it came in."""

    def __init__(self, chunks: list[str]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk.encode()


class Recorder(httpx2.AsyncBaseTransport):
    """Passes requests on to the server, keeping each exchange in ``exchanges``."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.exchanges: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sent = await request.aread()
        response = await self._inner.handle_async_request(request)
        record: dict[str, Any] = {
            "path": request.url.path, "request": json.loads(sent) if sent else None,
            "status": response.status_code,
            "content_type": response.headers.get("content-type", "")}
        self.exchanges.append(record)
        return httpx2.Response(response.status_code, headers=response.headers,
                               stream=_Tee(response.stream, record),
                               extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


class Replayer:
    """Answers requests with recorded responses, in order; each request must be the recorded
    one's shape (roles, tools offered, streaming, output schema), else the replay is stale."""

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self._left = list(exchanges)
        self.sent: list[dict[str, Any]] = []

    @property
    def left(self) -> int:
        """Recorded exchanges not yet replayed."""
        return len(self._left)

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.sent.append(body)
        if not self._left:
            raise AssertionError(f"request {len(self.sent)} was never recorded: re-record "
                                 "with python3 dev realmodel")
        exchange = self._left.pop(0)
        recorded, now = shape(exchange["request"]), shape(body)
        if recorded != now:
            raise AssertionError(f"request {len(self.sent)} is not the recorded one: "
                                 f"recorded {recorded}, sent {now}; re-record with python3 "
                                 "dev realmodel")
        headers = {"content-type": exchange["content_type"]}
        if "chunks" in exchange:
            return httpx2.Response(exchange["status"], headers=headers,
                                   stream=_Chunks(exchange["chunks"]))
        return httpx2.Response(exchange["status"], content=exchange.get("body", "").encode(),
                               headers=headers)


def shape(body: dict[str, Any]) -> dict[str, Any]:
    """What a replayed request must share with the recorded one."""
    return {"roles": [m["role"] for m in body["messages"]],
            "tools": sorted(t["function"]["name"] for t in body.get("tools", ())),
            "stream": bool(body.get("stream")),
            "response_format": (body.get("response_format") or {}).get("type")}


def local_model(transport: httpx2.AsyncBaseTransport, base_url: str,
                settings: ModelSettings | None = None) -> OpenAIChatModel:
    """relayrace's OpenAI provider on the local server, through ``transport``."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="local", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=transport,
                                                               timeout=600))
    return OpenAIChatModel(MODEL_ALIAS, client=client, settings=settings or ModelSettings(
        temperature=0, text_tool_calls="parse"))


def trimmed(exchange: dict[str, Any]) -> dict[str, Any]:
    """An exchange as a fixture keeps it: the response whole, the request without the tools'
    schemas and descriptions (the same in every request; a replay checks their names)."""
    request = exchange["request"]
    if request is None or "tools" not in request:
        return exchange
    tools = [{"type": t["type"], "function": {"name": t["function"]["name"]}}
             for t in request["tools"]]
    return {**exchange, "request": {**request, "tools": tools}}
