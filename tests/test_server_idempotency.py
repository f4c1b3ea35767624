"""Retries never start a second run: a failed run says so without inviting a retry (500,
``x-should-retry: false``), and ``Idempotency-Key`` gives a retried request the first one's
response, on every store, across restarts, for concurrent duplicates and for streams. Driven
from outside: the official ``openai`` client against a real uvicorn, and httpx."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from conftest import wait_until  # noqa: E402
from relayrace import Agent, tool  # noqa: E402
from relayrace.models import ModelRequest  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import MemoryStore, SessionStore, SQLiteStore  # noqa: E402
from relayrace.testing import FunctionModel, Turn, text, tool_call  # noqa: E402
from test_server import uvicorn_server  # noqa: E402


def appending_team(ledger: Path, answer: Any) -> Agent[Any]:
    """An agent whose first turn appends a line to ``ledger`` (a side effect a second run
    would repeat) and whose second turn is ``answer(request)``: a turn, or an exception."""

    @tool
    def record(line: str) -> str:
        """Append a line to the ledger."""
        with ledger.open("a") as f:
            f.write(line + "\n")
        return "recorded"

    async def turn(request: ModelRequest) -> Turn:
        if request.messages[-1].role != "tool":
            return tool_call("record", {"line": f"charge for {request.messages[-1].content}"})
        result: Turn = await answer(request)
        return result

    return Agent("clerk", instructions="Record, then answer.", tools=[record],
                 model=FunctionModel(turn))


def lines(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def runs_of(app: Any) -> int:
    return len(app.state.relayrace.runs.runs)


def test_the_openai_client_with_its_retries_starts_one_run_when_the_model_fails(
        tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    ledger = tmp_path / "ledger.txt"

    async def down(request: ModelRequest) -> Turn:
        return RuntimeError("the model provider is down")

    app = create_app(appending_team(ledger, down), store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")  # default retries
        with pytest.raises(openai.InternalServerError) as failed:
            client.chat.completions.create(
                model="clerk", messages=[{"role": "user", "content": "order 7"}])
    assert lines(ledger) == ["charge for order 7"]  # one run, one side effect
    assert runs_of(app) == 1
    assert failed.value.status_code == 500
    assert failed.value.response.headers["x-should-retry"] == "false"
    assert "the model provider is down" in failed.value.message


def test_a_client_that_times_out_and_retries_with_its_key_gets_the_first_runs_answer(
        tmp_path: Path) -> None:
    openai = pytest.importorskip("openai")
    ledger = tmp_path / "ledger.txt"
    arrived: list[asyncio.Event] = []

    async def slow(request: ModelRequest) -> Turn:
        await arrived[0].wait()  # answers only once the client's retry has come
        return text("Charged once.")

    app = create_app(appending_team(ledger, slow), store=SQLiteStore(tmp_path / "s.db"))
    seen: list[str] = []

    async def counting(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/chat/completions":
            if not arrived:
                arrived.append(asyncio.Event())
            seen.append(dict(scope["headers"]).get(b"idempotency-key", b"").decode())
            if len(seen) == 2:
                arrived[0].set()
        await app(scope, receive, send)

    with uvicorn_server(counting) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=1.5)
        raw = client.chat.completions.with_raw_response.create(
            model="clerk", messages=[{"role": "user", "content": "order 8"}],
            extra_headers={"Idempotency-Key": "order-8-attempt"})
        answer = raw.parse()
    assert answer.choices[0].message.content == "Charged once."
    assert seen == ["order-8-attempt", "order-8-attempt"]  # the first attempt timed out
    assert raw.headers["Idempotent-Replayed"] == "true"
    assert lines(ledger) == ["charge for order 8"]
    assert runs_of(app) == 1


async def answered(request: ModelRequest) -> Turn:
    said = next(m.content for m in reversed(request.messages) if m.role == "user")
    return text(f"Done: {said}.")


async def test_the_same_key_twice_returns_the_same_result_from_one_run(
        store: SessionStore, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    app = create_app(appending_team(ledger, answered), store=store)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        sid = (await c.post("/api/sessions", json={})).json()["session_id"]
        key = {"Idempotency-Key": "run-1"}
        first = await c.post(f"/api/sessions/{sid}/runs", json={"input": "a"}, headers=key)
        again = await c.post(f"/api/sessions/{sid}/runs", json={"input": "a"}, headers=key)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json() and first.json()["status"] == "finished"
        assert again.headers["Idempotent-Replayed"] == "true"
        assert "Idempotent-Replayed" not in first.headers
        reused = await c.post(f"/api/sessions/{sid}/runs", json={"input": "b"}, headers=key)
        assert reused.status_code == 422
        assert "already used with a different request" in reused.json()["error"]["message"]

        chat = {"model": "clerk", "messages": [{"role": "user", "content": "c"}]}
        said = await c.post("/v1/chat/completions", json=chat, headers={"Idempotency-Key": "c"})
        replayed = await c.post("/v1/chat/completions", json=chat,
                                headers={"Idempotency-Key": "c"})
        assert said.status_code == replayed.status_code == 200
        assert replayed.json() == said.json()
        assert replayed.json()["choices"][0]["message"]["content"] == "Done: c."
        assert replayed.headers["X-Relayrace-Session"] == said.headers["X-Relayrace-Session"]
        plain = await c.post("/v1/chat/completions", json=chat)  # no key: a new request
        assert plain.status_code == 200
    assert lines(ledger) == ["charge for a", "charge for c", "charge for c"]
    assert runs_of(app) == 3


async def test_concurrent_duplicates_start_one_run(store: SessionStore, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    app = create_app(appending_team(ledger, answered), store=store)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        chat = {"model": "clerk", "messages": [{"role": "user", "content": "d"}]}
        replies = await asyncio.gather(*[
            c.post("/v1/chat/completions", json=chat, headers={"Idempotency-Key": "dup"})
            for _ in range(8)])
    assert {r.status_code for r in replies} == {200}
    assert len({r.text for r in replies}) == 1  # one answer, the same for all
    assert sum(r.headers.get("Idempotent-Replayed") == "true" for r in replies) == 7
    assert lines(ledger) == ["charge for d"]
    assert runs_of(app) == 1


async def test_a_key_survives_a_restart_of_the_server(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    team = appending_team(ledger, answered)
    chat = {"model": "clerk", "messages": [{"role": "user", "content": "e"}]}
    bodies = []
    for _ in range(2):  # the same file, a new app and store each time
        app = create_app(team, store=SQLiteStore(tmp_path / "s.db"))
        async with app.router.lifespan_context(app), httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
            reply = await c.post("/v1/chat/completions", json=chat,
                                 headers={"Idempotency-Key": "e"})
            assert reply.status_code == 200
            bodies.append(reply.json())
    assert bodies[0] == bodies[1]
    assert runs_of(app) == 0  # the restarted server ran nothing
    assert lines(ledger) == ["charge for e"]


async def test_keys_are_per_api_key_and_expire_after_the_window(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    k1, k2 = "key-one-0123456789abcdef", "key-two-0123456789abcdef"
    app = create_app(appending_team(ledger, answered), store=SQLiteStore(tmp_path / "s.db"),
                     api_keys=[k1, k2], idempotency_window=0.5)
    chat = {"model": "clerk", "messages": [{"role": "user", "content": "f"}]}
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        for k in (k1, k2, k1):
            reply = await c.post("/v1/chat/completions", json=chat, headers={
                "Idempotency-Key": "same", "Authorization": f"Bearer {k}"})
            assert reply.status_code == 200
        assert runs_of(app) == 2  # one per owner
        records = app.state.relayrace.store.idempotency()

        async def lapsed() -> bool:
            owner = app.state.relayrace.keys.owner(k1)
            return await records.get(owner, "same", window=0.5) is None

        await wait_until(lapsed, "the key's 0.5 s window to pass")
        again = await c.post("/v1/chat/completions", json=chat, headers={
            "Idempotency-Key": "same", "Authorization": f"Bearer {k1}"})
        assert again.status_code == 200 and "Idempotent-Replayed" not in again.headers
    assert runs_of(app) == 3 and len(lines(ledger)) == 3
    with pytest.raises(Exception, match="idempotency_window"):
        create_app(appending_team(ledger, answered), store=MemoryStore(), idempotency_window=0)


async def test_a_failed_run_is_500_without_retry_and_its_key_replays_the_failure(
        tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"

    async def down(request: ModelRequest) -> Turn:
        return RuntimeError("provider down")

    app = create_app(appending_team(ledger, down), store=SQLiteStore(tmp_path / "s.db"))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        sid = (await c.post("/api/sessions", json={})).json()["session_id"]
        replies = [await c.post(f"/api/sessions/{sid}/runs", json={"input": "g"},
                                headers={"Idempotency-Key": "g"}) for _ in range(2)]
        for reply in replies:
            assert reply.status_code == 500 and reply.headers["x-should-retry"] == "false"
            body = reply.json()
            assert body["error"]["type"] == "run_failed"
            assert "provider down" in body["error"]["message"]
            assert body["run"]["status"] == "failed"
        assert replies[1].json() == replies[0].json()
        missing = await c.post("/api/sessions/nobody/runs", json={"input": "g"},
                               headers={"Idempotency-Key": "h"})
        assert missing.status_code == 404  # refused before any run: the key is not kept
        assert await app.state.relayrace.store.idempotency().get("", "h", window=60) is None
        bad = await c.post(f"/api/sessions/{sid}/runs", json={"input": "g"},
                           headers={"Idempotency-Key": "has spaces"})
        assert bad.status_code == 400 and "Idempotency-Key" in bad.json()["error"]["message"]
    assert lines(ledger) == ["charge for g"]


async def test_a_streamed_retry_replays_the_whole_stream(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    app = create_app(appending_team(ledger, answered), store=SQLiteStore(tmp_path / "s.db"))
    chat = {"model": "clerk", "stream": True,
            "messages": [{"role": "user", "content": "s"}]}

    def content(stream: str) -> str:
        return "".join(
            json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
            for line in stream.splitlines()
            if line.startswith("data: {"))

    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        first = await c.post("/v1/chat/completions", json=chat, headers={"Idempotency-Key": "s"})
        again = await c.post("/v1/chat/completions", json=chat, headers={"Idempotency-Key": "s"})
    assert again.headers["content-type"].startswith("text/event-stream")
    assert again.headers["Idempotent-Replayed"] == "true"
    assert content(again.text) == content(first.text) and "Done: s." in content(first.text)
    assert again.text.rstrip().endswith("data: [DONE]")
    assert lines(ledger) == ["charge for s"] and runs_of(app) == 1


async def test_a_key_whose_server_went_away_mid_run_is_refused_not_run_again(
        tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    release = asyncio.Event()

    async def held(request: ModelRequest) -> Turn:
        await release.wait()
        return text("late")

    app = create_app(appending_team(ledger, held), store=SQLiteStore(tmp_path / "s.db"))
    idempotency = app.state.relayrace.idempotency
    idempotency.renew = 0.05

    async def gone(owner: str, key: str) -> None:
        """The claim is never renewed, as when its server has died."""

    idempotency.records.touch = gone
    chat = {"model": "clerk", "messages": [{"role": "user", "content": "i"}]}
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        first = asyncio.ensure_future(c.post("/v1/chat/completions", json=chat,
                                             headers={"Idempotency-Key": "i"}))
        # The first request holds the key and its run is under way.
        await wait_until(lambda: lines(ledger), "the first request's run to charge")
        retry = await c.post("/v1/chat/completions", json=chat,
                             headers={"Idempotency-Key": "i"})
        assert retry.status_code == 409 and retry.headers["x-should-retry"] == "false"
        assert "went away" in retry.json()["error"]["message"]
        release.set()
        assert (await first).status_code == 200
    assert lines(ledger) == ["charge for i"] and runs_of(app) == 1


async def test_a_store_gives_a_key_to_exactly_one_of_many_concurrent_claims(
        store: SessionStore) -> None:
    from relayrace.sessions.idempotency import StoredResponse

    records = store.idempotency()
    claims = await asyncio.gather(*[records.claim("team-a", "k", "fp", window=60)
                                    for _ in range(10)])
    assert sum(c is None for c in claims) == 1
    assert {c.fingerprint for c in claims if c is not None} == {"fp"}
    assert await records.claim("team-b", "k", "fp", window=60) is None  # another owner's
    await records.finish("team-a", "k", StoredResponse(201, {"x-a": "1"}, "body"))
    found = await records.get("team-a", "k", window=60)
    assert found is not None and found.response == StoredResponse(201, {"x-a": "1"}, "body")
    await records.release("team-b", "k")
    assert await records.get("team-b", "k", window=60) is None
    assert await records.get("team-a", "k", window=1e-9) is None  # past its window


async def test_memory_keeps_a_bounded_number_of_finished_records() -> None:
    from relayrace.sessions.idempotency import MemoryIdempotency, StoredResponse

    records = MemoryIdempotency(keep=3)
    assert await records.claim("o", "running", "fp", window=60) is None  # never finished
    for n in range(5):
        assert await records.claim("o", f"k{n}", "fp", window=60) is None
        await records.finish("o", f"k{n}", StoredResponse(200))
    await records.claim("o", "last", "fp", window=60)
    kept = [k for k in ["running", "k0", "k1", "k2", "k3", "k4", "last"]
            if await records.get("o", k, window=60) is not None]
    assert kept == ["running", "k4", "last"]  # the oldest finished went; the running stays


async def test_a_run_refused_because_another_process_holds_its_session_is_409(
        tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    store = SQLiteStore(tmp_path / "s.db")
    app = create_app(appending_team(ledger, answered), store=store)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        sid = (await c.post("/api/sessions", json={})).json()["session_id"]
        assert (await c.post(f"/api/sessions/{sid}/runs", json={"input": "a"})).status_code \
            == 200
        other = SQLiteStore(tmp_path / "s.db").session(sid)  # as the CLI would, elsewhere
        assert await other.acquire_lease("the-cli")
        try:
            busy = await c.post(f"/api/sessions/{sid}/runs", json={"input": "b"})
            chat = await c.post("/v1/chat/completions", headers={"X-Relayrace-Session": sid},
                                json={"model": "clerk",
                                      "messages": [{"role": "user", "content": "c"}]})
        finally:
            await other.release_lease("the-cli")
    for reply in (busy, chat):
        assert reply.status_code == 409, reply.text
        assert "x-should-retry" not in reply.headers  # nothing ran: a retry later is fine
        assert "has a run in progress" in reply.json()["error"]["message"]
    assert busy.json()["run"]["status"] == "busy"  # the run's record says it never ran
    assert lines(ledger) == ["charge for a"]
