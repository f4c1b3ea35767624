"""``relayrace serve``: the sessions and runs API, SSE, security, the OpenAI-compatible
endpoint (with the official ``openai`` client against a real uvicorn on 127.0.0.1), trace
context, and a bounded load test."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from conftest import assert_valid_protocol, messages_of  # noqa: E402
from relayrace import Agent, tool  # noqa: E402
from relayrace.server import create_app, key_id  # noqa: E402
from relayrace.sessions import MemoryStore, SQLiteStore  # noqa: E402
from relayrace.testing import FunctionModel, text, tool_call  # noqa: E402
from server_team import front  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        yield c


async def new_session(c: httpx.AsyncClient, **headers: str) -> str:
    made = await c.post("/api/sessions", json={}, headers=headers)
    assert made.status_code == 201, made.text
    session_id: str = made.json()["session_id"]
    return session_id


def sse(body: str) -> list[tuple[int, dict[str, Any]]]:
    """(id, event) of each Server-Sent Event in ``body``."""
    out = []
    for block in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields and "id" in fields:
            out.append((int(fields["id"]), json.loads(fields["data"])))
    return out


async def test_health_and_the_openapi_schema_document_the_api(
        client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json()["agents"] == ["front"]
    paths = (await client.get("/openapi.json")).json()["paths"]
    for path in ("/api/sessions", "/api/sessions/{session_id}/runs", "/api/runs/{run_id}/events",
                 "/api/runs/{run_id}/cancel", "/api/sessions/{session_id}/pending",
                 "/api/runs/{run_id}/trace", "/v1/chat/completions", "/v1/models"):
        assert path in paths, path


async def test_a_session_is_created_run_listed_exported_and_deleted(
        client: httpx.AsyncClient) -> None:
    sid = await new_session(client)
    assert (await client.get(f"/api/sessions/{sid}")).json()["status"] == "idle"
    done = (await client.post(f"/api/sessions/{sid}/runs", json={"input": "hello"})).json()
    assert done["status"] == "finished" and done["result"]["final_output"] == "Echo: hello"
    research = await client.post(f"/api/sessions/{sid}/runs", json={"input": "research relays"})
    assert research.json()["result"]["final_output"].startswith("Research done")
    other = await new_session(client)
    await client.post(f"/api/sessions/{other}/runs", json={"input": "second"})
    listed = (await client.get("/api/sessions")).json()["sessions"]
    assert [s["session_id"] for s in listed] == [other, sid]  # newest first
    assert listed[1]["last_message"].startswith("Research done")
    assert listed[1]["usage"]["requests"] == 4 and listed[1]["status"] == "finished"
    paged = (await client.get("/api/sessions?limit=1&offset=1")).json()["sessions"]
    assert [s["session_id"] for s in paged] == [sid]
    found = (await client.get("/api/sessions?q=research")).json()["sessions"]
    assert [s["session_id"] for s in found] == [sid]
    detail = (await client.get(f"/api/sessions/{sid}")).json()
    kinds = [e["kind"] for e in detail["events"]]
    assert kinds.count("run_started") == 2 and "delegation" in kinds
    exported = (await client.get(f"/api/sessions/{sid}/export")).text.splitlines()
    assert [json.loads(line)["kind"] for line in exported] == kinds
    [child] = (await client.get(f"/api/sessions/{sid}/children")).json()["children"]
    assert child["path"] == "front/researcher"
    child_events = (await client.get(f"/api/sessions/{child['session_id']}")).json()["events"]
    assert child_events[-1]["kind"] == "run_finished"
    assert (await client.delete(f"/api/sessions/{sid}")).json() == {"deleted": True}
    assert (await client.get(f"/api/sessions/{sid}")).status_code == 404
    assert (await client.get(f"/api/sessions/{child['session_id']}")).status_code == 404


async def test_a_background_run_streams_every_event_and_a_reconnect_misses_none(
        client: httpx.AsyncClient) -> None:
    sid = await new_session(client)
    started = await client.post(f"/api/sessions/{sid}/runs",
                                json={"input": "research streams", "background": True})
    assert started.status_code == 202
    run_id = started.json()["run_id"]
    whole = sse((await client.get(f"/api/runs/{run_id}/events")).text)
    ids = [i for i, _ in whole]
    assert ids == list(range(1, len(ids) + 1))
    assert whole[-1][1]["kind"] == "run_end" and whole[-1][1]["status"] == "finished"
    paths = {e.get("path") for _, e in whole}
    assert "front/researcher" in paths  # the child's events, tagged with its path
    cut = len(whole) // 2
    rest = sse((await client.get(f"/api/runs/{run_id}/events",
                                 headers={"Last-Event-ID": str(cut)})).text)
    assert rest == whole[cut:]
    logged = [e for _, e in whole if e["kind"] not in ("text_delta", "run_end", "output",
                                                       "status")
              and "/" not in e["path"]]
    stored = (await client.get(f"/api/sessions/{sid}")).json()["events"]
    assert [e["run_id"] for e in logged if e["kind"] == "run_started"] == [run_id]
    for e in logged:  # the stream names the server's run; the session log holds the same event
        e.pop("run_id", None)
    assert logged == [{k: v for k, v in e.items() if k != "run_id"} for e in stored]
    run = (await client.get(f"/api/runs/{run_id}")).json()
    assert run["status"] == "finished" and run["result"]["usage"]["requests"] == 3
    trace = (await client.get(f"/api/runs/{run_id}/trace")).json()
    kinds = {s["kind"] for s in trace["spans"]}
    assert {"run", "agent", "model", "tool", "delegation"} <= kinds
    assert all(s["duration_ms"] >= 0 and not s["open"] for s in trace["spans"])


@tool
async def nap(seconds: float) -> str:
    """Sleep."""
    await asyncio.sleep(seconds)
    return "rested"


sleeper = Agent("sleeper", instructions="Sleep.", tools=[nap], model=FunctionModel(
    lambda r: text("awake") if r.messages[-1].role == "tool"
    else tool_call("nap", {"seconds": 30})))


async def test_cancelling_a_run_leaves_its_session_valid(tmp_path: Path) -> None:
    app = create_app([sleeper], store=SQLiteStore(tmp_path / "s.db"))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        sid = await new_session(c)
        run_id = (await c.post(f"/api/sessions/{sid}/runs",
                               json={"input": "nap", "background": True})).json()["run_id"]
        for _ in range(100):
            detail = (await c.get(f"/api/sessions/{sid}")).json()
            if any(e["kind"] == "tool_started" for e in detail["events"]):
                break
            await asyncio.sleep(0.02)
        assert detail["status"] == "running" and detail["run_id"] == run_id
        busy = await c.post(f"/api/sessions/{sid}/runs", json={"input": "again"})
        assert busy.status_code == 409 and "has a run going" in busy.json()["error"]["message"]
        cancelled = (await c.post(f"/api/runs/{run_id}/cancel")).json()
        assert cancelled["status"] == "cancelled"
        events = await SQLiteStore(tmp_path / "s.db").session(sid).get_events()
        assert events[-1].kind == "run_finished"
        assert_valid_protocol(messages_of(events))  # every call answered


async def test_approvals_and_questions_are_listed_answered_and_the_run_resumes(
        client: httpx.AsyncClient) -> None:
    sid = await new_session(client)
    stopped = (await client.post(f"/api/sessions/{sid}/runs",
                                 json={"input": "refund INV-4"})).json()
    assert stopped["status"] == "waiting"
    pending = (await client.get(f"/api/sessions/{sid}/pending")).json()
    [approval] = pending["approvals"]
    assert approval["tool"] == "refund" and json.loads(approval["arguments"]) == {
        "invoice": "INV-4"}
    refused = await client.post(f"/api/sessions/{sid}/runs", json={"input": "hi"})
    assert refused.status_code == 409 and "waits for decisions" in refused.text
    done = (await client.post(f"/api/sessions/{sid}/pending", json={
        "approvals": {approval["call_id"]: True}, "background": False})).json()
    assert done["result"]["final_output"] == "Done: refund issued for INV-4."
    asked = (await client.post(f"/api/sessions/{sid}/runs", json={"input": "ask me"})).json()
    [question] = asked["result"]["pending"]["questions"]
    wrong = await client.post(f"/api/sessions/{sid}/pending",
                              json={"answers": {"nope": "x"}, "background": False})
    assert wrong.status_code == 400 and "No pending question 'nope'" in wrong.text
    answered = (await client.post(f"/api/sessions/{sid}/pending", json={
        "answers": {question["id"]: "Ada"}, "background": False})).json()
    assert answered["result"]["final_output"] == "You said: Ada"
    assert (await client.get(f"/api/sessions/{sid}/pending")).json() == {
        "approvals": [], "questions": [], "takeover": None}


async def test_each_api_key_sees_only_its_own_sessions(tmp_path: Path) -> None:
    k1, k2 = "key-one-0123456789abcdef", "key-two-0123456789abcdef"
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"), api_keys=[k1, k2])
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        assert (await c.get("/api/sessions")).status_code == 401
        assert (await c.get("/api/sessions",
                            headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await c.get("/healthz")).status_code == 200  # liveness needs no key
        one = {"Authorization": f"Bearer {k1}"}
        two = {"X-API-Key": k2}
        sid = await new_session(c, **one)
        run = (await c.post(f"/api/sessions/{sid}/runs", json={"input": "mine"},
                            headers=one)).json()
        for path in (f"/api/sessions/{sid}", f"/api/sessions/{sid}/export",
                     f"/api/sessions/{sid}/pending", f"/api/runs/{run['run_id']}",
                     f"/api/runs/{run['run_id']}/events"):
            denied = await c.get(path, headers=two)
            assert denied.status_code == 404, path  # never told it exists
        assert (await c.get("/api/sessions", headers=two)).json()["sessions"] == []
        assert (await c.delete(f"/api/sessions/{sid}", headers=two)).status_code == 404
        chat = await c.post("/v1/chat/completions", headers={**two, "X-Relayrace-Session": sid},
                            json={"model": "front", "messages": [
                                {"role": "user", "content": "hi"}]})
        assert chat.status_code == 404
        [mine] = (await c.get("/api/sessions", headers=one)).json()["sessions"]
        assert mine["session_id"] == sid
        stored = await SQLiteStore(tmp_path / "s.db").get_info(sid)
        assert stored is not None and stored.owner == key_id(k1) and k1 not in stored.owner


async def test_limits_cors_and_errors_are_json_without_stack_traces(tmp_path: Path) -> None:
    app = create_app(front, store=MemoryStore(), max_body_bytes=200, rate_limit="5/m",
                     cors_origins=["http://console.example"])
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        big = await c.post("/api/sessions", content=b"{" + b" " * 500 + b"}",
                           headers={"content-type": "application/json"})
        assert big.status_code == 413 and "larger than 200 bytes" in big.json()["error"]["message"]

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(10):
                yield b" " * 100
        chunked = await c.post("/api/sessions", content=chunks())
        assert chunked.status_code == 413
        bad = await c.post("/api/sessions", json={"agent": "nobody"})
        assert bad.status_code == 404 and "No agent 'nobody'" in bad.json()["error"]["message"]
        invalid = await c.post("/api/sessions", json={"agnet": "front"})
        assert invalid.status_code == 422 and "agnet" in invalid.json()["error"]["message"]
        allowed = await c.get("/api/agents", headers={"Origin": "http://console.example"})
        assert allowed.headers["access-control-allow-origin"] == "http://console.example"
        other = await c.get("/api/agents", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        limited = await c.get("/api/agents")
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    closed = create_app(front, store=MemoryStore())
    async with closed.router.lifespan_context(closed), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=closed, raise_app_exceptions=False),
            base_url="http://localhost") as c:
        assert "access-control-allow-origin" not in (await c.get(
            "/api/agents", headers={"Origin": "http://console.example"})).headers

        async def broken(session_id: str) -> None:
            raise RuntimeError("disk on fire at /secret/path")
        closed.state.relayrace.store.get_info = broken
        crashed = await c.get("/api/sessions/abc")
        assert crashed.status_code == 500
        assert crashed.json() == {"error": {"message": "Internal error; the server's log has "
                                            "the details.", "type": "internal_error"}}
        assert "secret" not in crashed.text and "Traceback" not in crashed.text


@contextmanager
def uvicorn_server(app: Any) -> Iterator[str]:
    """``app`` on a real uvicorn at a free port of 127.0.0.1, in a thread: its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # Idle keep-alive connections stay open for the test: with uvicorn's 5 s default, a slow
    # machine lets one lapse just as the client's pool hands it out again (a ReadError that
    # says nothing about the server).
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on",
                                           timeout_graceful_shutdown=1, backlog=2048,
                                           timeout_keep_alive=300))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_the_openai_client_talks_to_a_served_agent(tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == ["front"]
        first = client.chat.completions.create(
            model="front", messages=[{"role": "user", "content": "hello"}])
        assert first.choices[0].message.content == "Echo: hello"
        assert first.usage is not None and first.usage.total_tokens > 0
        # A client that resends the conversation without a handle: a new session, seeded with it.
        raw = client.chat.completions.with_raw_response.create(model="front", messages=[
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "Echo: hello"},
            {"role": "user", "content": "research relays"}])
        second = raw.parse()
        assert second.choices[0].message.content.startswith("Research done")
        session = raw.headers["X-Relayrace-Session"]
        events = httpx.get(f"{url}/api/sessions/{session}").json()["events"]
        assert [e["message"]["content"] for e in events
                if e["kind"] == "message" and e["message"]["role"] == "user"] == [
            "hello", "research relays"]
        # Streamed: the answer says what the run waits for.
        stream = client.chat.completions.create(
            model="front", stream=True, extra_headers={"X-Relayrace-Session": "chat-1"},
            messages=[{"role": "user", "content": "refund INV-8"}])
        shown = "".join(c.choices[0].delta.content or "" for c in stream)
        assert "The run waits for a person" in shown and "approve refund" in shown
        missing = httpx.post(f"{url}/v1/chat/completions", json={
            "model": "nobody", "messages": [{"role": "user", "content": "x"}]})
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "model_not_found"


def test_a_traceparent_becomes_the_parent_of_the_runs_trace() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from relayrace.tracing import get_trace_processors, set_trace_processors
    from relayrace.tracing.otel import OpenTelemetryProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    before = get_trace_processors()
    set_trace_processors([*before, OpenTelemetryProcessor(tracer_provider=provider)])
    try:
        app = create_app(front, store=MemoryStore())
        trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        with uvicorn_server(app) as url:
            sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "hi"}, headers={
                "traceparent": f"00-{trace_id}-{parent_id}-01"}, timeout=30)
    finally:
        set_trace_processors(before)
    [run] = [s for s in exporter.get_finished_spans() if s.name == "relayrace.run front"]
    assert f"{run.context.trace_id:032x}" == trace_id
    assert run.parent is not None and f"{run.parent.span_id:016x}" == parent_id


async def _streamed_run(c: httpx.AsyncClient, n: int) -> tuple[str, list[tuple[int, Any]]]:
    sid = (await c.post("/api/sessions", json={})).json()["session_id"]
    run = (await c.post(f"/api/sessions/{sid}/runs",
                        json={"input": f"research topic {n}", "background": True})).json()
    async with c.stream("GET", f"/api/runs/{run['run_id']}/events") as response:
        body = "".join([chunk async for chunk in response.aiter_text()])
    return sid, sse(body)


@pytest.mark.slow
def test_200_concurrent_streamed_runs_lose_no_event_and_leave_every_session_valid(
        tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "load.db"))

    async def load(url: str) -> list[tuple[str, list[tuple[int, Any]]]]:
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
        async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as c:
            return await asyncio.gather(*[_streamed_run(c, n) for n in range(200)])

    with uvicorn_server(app) as url:
        results = asyncio.run(load(url))
    store = SQLiteStore(tmp_path / "load.db")

    async def check() -> None:
        for sid, events in results:
            ids = [i for i, _ in events]
            assert ids == list(range(1, len(ids) + 1)), sid
            assert events[-1][1]["kind"] == "run_end" and events[-1][1]["status"] == "finished"
            stored = await store.session(sid).get_events()
            logged = [e for _, e in events if e["kind"] not in ("text_delta", "run_end",
                                                                "output", "status")
                      and "/" not in e["path"]]
            assert len(logged) == len(stored), sid
            assert_valid_protocol(messages_of(stored))

    asyncio.run(check())
    assert len({sid for sid, _ in results}) == 200


@pytest.mark.slow
def test_relayrace_serve_starts_and_answers(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY",
                                                            "ANTHROPIC_API_KEY")}
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "relayrace.cli", "serve",
         str(ROOT / "examples" / "support" / "team.py") + ":triage", "--port", str(port),
         "--db", str(tmp_path / "s.db")], stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() - started < 30
                time.sleep(0.02)
        assert health.json()["agents"] == ["triage"]
        base = f"http://127.0.0.1:{port}"
        sid = httpx.post(f"{base}/api/sessions", json={}).json()["session_id"]
        done = httpx.post(f"{base}/api/sessions/{sid}/runs",
                          json={"input": "I was charged twice"}, timeout=60).json()
        assert done["status"] == "finished" and "INV-2041" in done["result"]["final_output"]
        console = httpx.get(f"{base}/")
        assert console.status_code == 200 and "relayrace console" in console.text
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


async def test_first_messages_of_different_conversations_never_share_a_session(
        client: httpx.AsyncClient) -> None:
    async def say(messages: list[dict[str, str]]) -> tuple[str, str]:
        reply = await client.post("/v1/chat/completions", json={"model": "front",
                                                                 "messages": messages})
        assert reply.status_code == 200, reply.text
        return reply.headers["X-Relayrace-Session"], reply.json()["choices"][0][
            "message"]["content"]

    first = [{"role": "user", "content": "hello"}]
    alice, answer = await say(first)
    bob, _ = await say(first)  # the same first words, another conversation
    assert alice != bob
    again, _ = await say([*first, {"role": "assistant", "content": answer},
                          {"role": "user", "content": "research relays"}])
    assert again not in (alice, bob)  # no handle: never found by its text
    events = (await client.get(f"/api/sessions/{again}")).json()["events"]
    assert [e["message"]["content"] for e in events if e["kind"] == "message"
            and e["message"]["role"] == "user"] == ["hello", "research relays"]
    stranger, _ = await say([{"role": "user", "content": "hi"},
                             {"role": "assistant", "content": "an answer nobody gave"},
                             {"role": "user", "content": "go on"}])
    assert stranger not in (alice, bob)  # an unknown history starts a session seeded with it
    seeded = (await client.get(f"/api/sessions/{stranger}")).json()["events"]
    assert [e["message"]["content"] for e in seeded if e["kind"] == "message"][:3] == [
        "hi", "an answer nobody gave", "go on"]
