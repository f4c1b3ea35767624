"""``relayrace serve``'s sessions on the OpenAI-compatible endpoint: a conversation is found by
its handle, never by its text (transcript matching only as an opt-in that refuses ambiguity);
session ids are validated and belong to their creator from creation; streamed content is the
answer; the served example answers any number of conversations. Driven with the official
``openai`` client against a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")

from relayrace import Agent, tool  # noqa: E402
from relayrace.models import ModelRequest  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import MemoryStore  # noqa: E402
from relayrace.testing import (  # noqa: E402
    FunctionModel,
    ScriptedModel,
    ScriptExhausted,
    text,
    tool_call,
)
from server_team import front  # noqa: E402
from test_server import sse, uvicorn_server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _recall(request: ModelRequest) -> Any:
    """Says every user message it was given: what is in the model's context."""
    return text("You said: " + " | ".join(m.content for m in request.messages
                                          if m.role == "user"))


memo = Agent("memo", instructions="Remember.", model=FunctionModel(_recall))


def _client(url: str, **headers: str) -> Any:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0,
                         default_headers=headers or None)


def _say(client: Any, messages: list[dict[str, str]]) -> tuple[str, str]:
    raw = client.chat.completions.with_raw_response.create(model="memo", messages=messages)
    answer = raw.parse().choices[0].message.content
    return raw.headers["X-Relayrace-Session"], answer


def test_two_users_with_the_same_first_answer_never_share_a_conversation() -> None:
    app = create_app(memo, store=MemoryStore())
    with uvicorn_server(app) as url:
        alice, bob = _client(url), _client(url)  # one server, no keys: one owner
        first = [{"role": "user", "content": "hello"}]
        a_sid, a_first = _say(alice, first)
        b_sid, b_first = _say(bob, first)
        assert a_first == b_first == "You said: hello"
        _, a_second = _say(alice, [*first, {"role": "assistant", "content": a_first},
                                   {"role": "user", "content": "my card is 4111 1111 1111"}])
        assert "4111" in a_second
        b_sid2, b_second = _say(bob, [*first, {"role": "assistant", "content": b_first},
                                      {"role": "user", "content": "what is my card?"}])
        assert "4111" not in b_second  # bob is never told alice's data
        assert b_second == "You said: hello | what is my card?"
        assert len({a_sid, b_sid, b_sid2}) == 3  # no handle: a new session every time

        # With a handle, each goes on in their own session, sending only the new message.
        a_named, b_named = _client(url, **{"X-Relayrace-Session": "alice-chat"}), \
            _client(url, **{"X-Relayrace-Session": "bob-chat"})
        assert _say(a_named, first) == ("alice-chat", "You said: hello")
        assert _say(b_named, first) == ("bob-chat", "You said: hello")
        _say(a_named, [{"role": "user", "content": "my card is 4111"}])
        assert _say(b_named, [{"role": "user", "content": "my card?"}])[1] == \
            "You said: hello | my card?"


def test_transcript_matching_is_an_opt_in_that_refuses_an_ambiguous_match() -> None:
    app = create_app(memo, store=MemoryStore(), match_transcripts=True)
    with uvicorn_server(app) as url:
        client = _client(url)
        first = [{"role": "user", "content": "hello"}]
        sid, answer = _say(client, first)
        said = [*first, {"role": "assistant", "content": answer},
                {"role": "user", "content": "again"}]
        assert _say(client, said) == (sid, "You said: hello | again")  # goes on

        # A regenerated or edited turn: the session holds the dropped turn; a new one starts.
        edited = [*said[:2], {"role": "user", "content": "something else"}]
        other, redone = _say(client, edited)
        assert other != sid and redone == "You said: hello | something else"

        # Two sessions end with the same transcript: refused, not guessed.
        _say(client, first)
        _say(client, first)
        with pytest.raises(openai.ConflictError) as refused:
            _say(client, said)
        assert refused.value.body["type"] == "ambiguous_conversation"  # type: ignore[index]
        assert "X-Relayrace-Session" in refused.value.message


def test_a_named_session_refuses_a_conversation_whose_earlier_turn_was_edited() -> None:
    app = create_app(memo, store=MemoryStore())
    with uvicorn_server(app) as url:
        client = _client(url, **{"X-Relayrace-Session": "chat-7"})
        first = [{"role": "user", "content": "hello"}]
        _, answer = _say(client, first)
        said = [*first, {"role": "assistant", "content": answer},
                {"role": "user", "content": "secret plan"}]
        _, second = _say(client, said)
        edited = [*said[:2], {"role": "user", "content": "no plan"}]
        with pytest.raises(openai.ConflictError) as refused:
            _say(client, edited)
        assert refused.value.body["type"] == "conversation_mismatch"  # type: ignore[index]
        # The conversation as the session has it goes on, sent whole or only its new message.
        said += [{"role": "assistant", "content": second}, {"role": "user", "content": "go on"}]
        third = _say(client, said)[1]
        assert third == "You said: hello | secret plan | go on"
        fourth = _say(client, [{"role": "user", "content": "and on"}])[1]
        said += [{"role": "assistant", "content": third}, {"role": "user", "content": "and on"},
                 {"role": "assistant", "content": fourth}, {"role": "user", "content": "end"}]
        assert _say(client, said)[1] == "You said: hello | secret plan | go on | and on | end"


def test_a_created_session_belongs_to_its_creator_and_ids_are_validated() -> None:
    k1, k2 = "key-one-0123456789abcdef", "key-two-0123456789abcdef"
    app = create_app(memo, store=MemoryStore(), api_keys=[k1, k2])
    with uvicorn_server(app) as url:
        one = {"Authorization": f"Bearer {k1}"}
        sid = httpx.post(f"{url}/api/sessions", json={}, headers=one).json()["session_id"]
        thief = openai.OpenAI(base_url=f"{url}/v1", api_key=k2, max_retries=0)
        with pytest.raises(openai.NotFoundError):
            thief.chat.completions.create(model="memo", extra_headers={
                "X-Relayrace-Session": sid}, messages=[{"role": "user", "content": "mine"}])
        run = httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "hi"}, headers=one,
                         timeout=30)
        assert run.status_code == 200 and run.json()["result"]["final_output"] == "You said: hi"
        mine = openai.OpenAI(base_url=f"{url}/v1", api_key=k1, max_retries=0,
                             default_headers={"X-Relayrace-Session": "k1-chat"})
        mine.chat.completions.create(model="memo", messages=[{"role": "user", "content": "a"}])
        with pytest.raises(openai.NotFoundError):  # not a 409 that would tell it exists
            thief.chat.completions.create(
                model="memo", extra_headers={"X-Relayrace-Session": "k1-chat"}, messages=[
                    {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"},
                    {"role": "user", "content": "d"}])

        owner = openai.OpenAI(base_url=f"{url}/v1", api_key=k1, max_retries=0)
        for bad in (".", "..", "-x", "a/b", "a b", "a" * 257):
            with pytest.raises(openai.BadRequestError) as refused:
                owner.chat.completions.create(model="memo", extra_headers={
                    "X-Relayrace-Session": bad}, messages=[{"role": "user", "content": "x"}])
            assert refused.value.body["type"] == "invalid_session_id", bad  # type: ignore[index]
            assert "letters, digits" in refused.value.message
        for path in ("%2E", "%2E%2E", "-x"):
            got = httpx.get(f"{url}/api/sessions/{path}", headers=one)
            assert got.status_code == 400, path
            assert got.json()["error"]["type"] == "invalid_session_id"
        ok = owner.chat.completions.with_raw_response.create(
            model="memo", extra_headers={"X-Relayrace-Session": "a.b_c-" + "d" * 250},
            messages=[{"role": "user", "content": "x"}])
        assert ok.http_response.status_code == 200


def test_streamed_content_is_the_answer_byte_for_byte_and_progress_is_opt_in() -> None:
    app = create_app(front, store=MemoryStore())
    with uvicorn_server(app) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        for said in ("research relays", "hello there"):
            messages = [{"role": "user", "content": said}]
            whole = client.chat.completions.create(model="front", messages=messages)
            streamed = "".join(c.choices[0].delta.content or "" for c in
                               client.chat.completions.create(model="front", stream=True,
                                                              messages=messages))
            assert streamed == whole.choices[0].message.content, said
        plain = list(client.chat.completions.create(
            model="front", stream=True, messages=[{"role": "user", "content": "refund INV-8"}]))
        assert all((c.model_extra or {}).get("relayrace") is None for c in plain)
        shown = list(client.chat.completions.create(
            model="front", stream=True, extra_headers={"X-Relayrace-Progress": "true"},
            messages=[{"role": "user", "content": "refund INV-8"}]))
        progress = "".join((c.model_extra or {}).get("relayrace", {}).get("progress", "")
                           for c in shown)
        assert "↪ handoff front → billing: a refund" in progress
        assert '⚙ refund({"invoice": "INV-8"})' in progress
        content = "".join(c.choices[0].delta.content or "" for c in shown)
        assert content.startswith("The run waits for a person") and "↪" not in content


def test_progress_never_carries_the_answers_own_text_streamed_or_not() -> None:
    @tool
    def forecast(city: str) -> str:
        """The forecast for a city."""
        return f"{city}: sun"

    answer = '{{"verdict": "Sunny skies over Paris all afternoon, light breeze"}}'
    model = ScriptedModel([tool_call("forecast", {"city": "Paris"}), text(answer)],
                          per_conversation=True)
    agent = Agent("weather", instructions="Forecast.", model=model, tools=[forecast])
    app = create_app(agent, store=MemoryStore())
    with uvicorn_server(app) as url, _client(url, **{"X-Relayrace-Progress": "true"}) as client:
        messages = [{"role": "user", "content": "Paris?"}]
        chunks = list(client.chat.completions.create(model="weather", stream=True,
                                                     messages=messages,
                                                     extra_headers={"X-Relayrace-Session": "a"}))
        entries = [(c.model_extra or {}).get("relayrace", {}).get("progress") for c in chunks]
        shown = [e for e in entries if e is not None]
        # The model streamed its answer word by word; progress is the call and its result.
        assert [e.strip() for e in shown] == ['⚙ forecast({"city": "Paris"})',
                                              "→ forecast: Paris: sun"]
        content = "".join(c.choices[0].delta.content or "" for c in chunks)
        assert content == answer
        whole = client.chat.completions.with_raw_response.create(
            model="weather", messages=messages, extra_headers={"X-Relayrace-Session": "b"})
        body = whole.http_response.json()
        assert "relayrace" not in body and body["choices"][0]["message"]["content"] == answer


def test_a_scripted_model_per_conversation_answers_any_number_of_sessions() -> None:
    model = ScriptedModel([text("one"), text("two")], per_conversation=True,
                          then=text("spent"))
    agent = Agent("a", instructions=".", model=model)
    app = create_app(agent, store=MemoryStore())
    with uvicorn_server(app) as url:
        for name in ("s1", "s2", "s3"):
            client = _client(url, **{"X-Relayrace-Session": name})
            said = [client.chat.completions.create(model="a", messages=[
                {"role": "user", "content": "hi"}]).choices[0].message.content
                for _ in range(3)]
            assert said == ["one", "two", "spent"], name
    shared = ScriptedModel([text("one")])
    import asyncio

    from relayrace import Runner

    asyncio.run(Runner.run(Agent("b", instructions=".", model=shared), "hi"))
    with pytest.raises(ScriptExhausted):
        asyncio.run(Runner.run(Agent("b", instructions=".", model=shared), "hi"))


@pytest.fixture
def served_example(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RELAYRACE_MODEL")}
    process = subprocess.Popen(
        [sys.executable, "-m", "relayrace.cli", "serve",
         str(ROOT / "examples" / "support" / "team.py") + ":triage", "--port", str(port),
         "--db", str(tmp_path / "s.db")], stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    try:
        while True:
            try:
                httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None
                assert time.monotonic() - started < 30
                time.sleep(0.02)
        yield base, process
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()


def test_the_served_example_answers_any_number_of_conversations(
        served_example: tuple[str, subprocess.Popen[bytes]]) -> None:
    base, process = served_example
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    question = [{"role": "user", "content": "I was charged twice"}]
    for _ in range(3):  # each a new conversation, as the README's step sends it
        answer = client.chat.completions.create(model="triage", messages=question)
        assert "INV-2041" in (answer.choices[0].message.content or "")
    named = _client(base, **{"X-Relayrace-Session": "demo-1"})
    for n in range(4):  # past the demo's two messages: still answered
        reply = named.chat.completions.create(model="triage", messages=[
            {"role": "user", "content": f"message {n}"}])
        assert reply.choices[0].message.content
    sid = httpx.post(f"{base}/api/sessions", json={}).json()["session_id"]
    run = httpx.post(f"{base}/api/sessions/{sid}/runs", json={
        "input": "I was charged twice", "background": True}).json()
    with httpx.stream("GET", f"{base}/api/runs/{run['run_id']}/events", timeout=60) as events:
        body = "".join(events.iter_text())
    started = [e for _, e in sse(body) if e["kind"] == "run_started"]
    assert started and all(e["run_id"] == run["run_id"] for e in started)
    process.terminate()
    process.wait(10)
    assert process.stderr is not None
    said = process.stderr.read().decode()
    assert "triage: model scripted-demo" in said, said
    assert "ScriptExhausted" not in said
