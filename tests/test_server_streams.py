"""The server's streams on the wire: what a run has ready is written at once (an answer that
shows no progress is one chunk, the retry hint goes with the first events), and a client that
goes away mid-stream ends its stream while its run goes on. Driven with raw HTTP/1.1 over a
socket (to see the chunks) and httpx, against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

pytest.importorskip("fastapi")

from relayrace import Agent  # noqa: E402
from relayrace.models import ModelRequest  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import MemoryStore  # noqa: E402
from relayrace.testing import FunctionModel, text  # noqa: E402
from server_team import front  # noqa: E402
from test_server import sse, uvicorn_server  # noqa: E402


def _request(url: str, method: str, path: str, body: dict[str, Any] | None = None,
             **headers: str) -> bytes:
    """The raw HTTP/1.1 request, as bytes."""
    host = urlsplit(url).netloc
    data = b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close",
             f"Content-Length: {len(data)}", "Content-Type: application/json",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def _raw(url: str, request: bytes) -> tuple[dict[str, str], list[bytes]]:
    """The response's headers and its body's chunks (chunked transfer encoding, as sent)."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall(request)
        received = bytearray()
        while block := s.recv(65536):
            received += block
    head, _, rest = bytes(received).partition(b"\r\n\r\n")
    status, *fields = head.decode("latin-1").split("\r\n")
    assert " 200 " in status + " ", status
    headers = {k.lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    assert headers["transfer-encoding"] == "chunked", headers
    chunks = []
    while True:
        size, _, rest = rest.partition(b"\r\n")
        if int(size, 16) == 0:
            return headers, chunks
        chunks.append(rest[:int(size, 16)])
        rest = rest[int(size, 16) + 2:]


def _content(body: str) -> list[Any]:
    return [json.loads(line[6:]) if line != "data: [DONE]" else "[DONE]"
            for line in body.split("\n") if line.startswith("data: ")]


def test_what_a_run_has_ready_is_written_in_one_chunk() -> None:
    app = create_app(front, store=MemoryStore())
    with uvicorn_server(app) as url:
        chat = {"model": "front", "stream": True, "messages": [{"role": "user",
                                                                 "content": "hello there"}]}
        headers, chunks = _raw(url, _request(url, "POST", "/v1/chat/completions", chat))
        # The run streams its answer word by word, but without progress nothing shows
        # before the answer: the role, the answer, the stop and [DONE] are one write.
        assert len(chunks) == 1, chunks
        said = _content(chunks[0].decode())
        assert said[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert said[1]["choices"][0]["delta"] == {"content": "Echo: hello there"}
        assert said[2]["choices"][0]["finish_reason"] == "stop" and said[3] == "[DONE]"
        assert headers["content-type"] == "text/event-stream; charset=utf-8"
        assert headers["x-frame-options"] == "DENY"  # the guard's headers on a stream too

        # A run's events, read after it ended: the retry hint and every event, one write.
        _, chunks = _raw(url, _request(url, "GET", f"/api/runs/{headers['x-relayrace-run']}"
                                                   "/events"))
        assert len(chunks) == 1, chunks
        body = chunks[0].decode()
        assert body.startswith("retry: 1000\n\n")
        events = sse(body)
        assert [n for n, _ in events] == list(range(1, len(events) + 1))
        assert events[-1][1]["kind"] == "run_end" and events[-1][1]["status"] == "finished"

        # Resumed after its last event: only the retry hint, and the stream ends.
        _, chunks = _raw(url, _request(url, "GET", f"/api/runs/{headers['x-relayrace-run']}"
                                                   "/events", **{"Last-Event-ID":
                                                                 str(len(events))}))
        assert chunks == [b"retry: 1000\n\n"]


@contextmanager
def _logged(name: str) -> Iterator[list[logging.LogRecord]]:
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _until(condition: Any, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def test_a_client_that_goes_away_ends_its_stream_and_its_run_goes_on() -> None:
    gate = threading.Event()

    async def slow(request: ModelRequest) -> Any:
        while not gate.is_set():  # the model answers once the test lets it
            await asyncio.sleep(0.01)
        return text("late answer")

    agent = Agent("slow", instructions="Answer.", model=FunctionModel(slow))
    app = create_app(agent, store=MemoryStore())
    with uvicorn_server(app) as url, _logged("relayrace.server") as requests, \
            _logged("uvicorn.error") as errors:
        parts = urlsplit(url)
        chat = {"model": "slow", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        s = socket.create_connection((parts.hostname, parts.port), timeout=30)
        s.sendall(_request(url, "POST", "/v1/chat/completions", chat,
                           **{"X-Relayrace-Progress": "true"}))
        head = b""
        while b"data: " not in head:  # the headers and the first chunk: the stream is open
            head += s.recv(65536)
        run_id = next(line.split(":", 1)[1].strip() for line in
                      head.decode("latin-1").split("\r\n")
                      if line.lower().startswith("x-relayrace-run:"))
        s.close()
        # The stream ends with its client (its request is logged as done) while the run
        # still waits for its model.
        _until(lambda: any("/v1/chat/completions" in r.getMessage() for r in requests),
               "the stream's request ends")
        run = httpx.get(f"{url}/api/runs/{run_id}").json()
        assert run["status"] == "running"
        gate.set()
        _until(lambda: httpx.get(f"{url}/api/runs/{run_id}").json()["status"] != "running",
               "the run ends")
        run = httpx.get(f"{url}/api/runs/{run_id}").json()
        assert run["status"] == "finished" and run["result"]["final_output"] == "late answer"
        assert not [r for r in errors if r.levelno >= logging.ERROR], \
            [r.getMessage() for r in errors]
