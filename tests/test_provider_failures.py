"""Both provider adapters under bad input and bad servers, through ``Runner`` (no network).

Stored histories no provider would have written (arguments nested thousands deep, call ids
repeated in every turn) must still convert to a valid request; a server that hangs or drips
bytes must end in a typed error within the request deadline; and a model must work across
event loops. After every failure the session stays usable.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from provider_helpers import (
    PAYLOADS,
    FakeServer,
    anthropic_model,
    cut_stream,
    openai_model,
    replay,
)
from relayrace import Agent, FallbackModel, Runner, tool
from relayrace.agents.tools import ToolRetry, parse_arguments
from relayrace.core.exceptions import ModelProviderError, ModelTimeout
from relayrace.core.messages import Message, ToolCall
from relayrace.models import Model, ModelRequest, ModelSettings, ToolDefinition
from relayrace.models.anthropic import AnthropicModel
from relayrace.models.openai import OpenAIChatModel
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call

DEEP = "[" * 3000
PROVIDERS: dict[str, Callable[[FakeServer], Model]] = {
    "openai": openai_model,
    "anthropic": anthropic_model,
}


@tool
def lookup(order_id: str) -> str:
    """Find an order."""
    return f"order {order_id}: shipped"


def front(model: Model | str) -> Agent[Any]:
    billing = Agent("billing", instructions="I am billing.", description="Invoices.")
    return Agent("front", instructions="Help.", model=model, tools=[lookup], sub_agents=[billing])


def sent_calls(provider: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(id, arguments) of every past tool call in a request body, in order."""
    if provider == "openai":
        return [(c["id"], json.loads(c["function"]["arguments"]))
                for m in body["messages"] for c in m.get("tool_calls", ())]
    return [(b["id"], b["input"]) for m in body["messages"] for b in m["content"]
            if b["type"] == "tool_use"]


def sent_results(provider: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(call id, content) of every tool result in a request body, in order."""
    if provider == "openai":
        return [(m["tool_call_id"], m["content"]) for m in body["messages"]
                if m["role"] == "tool"]
    return [(b["tool_use_id"], b["content"]) for m in body["messages"] for b in m["content"]
            if b["type"] == "tool_result"]


def user_texts(provider: str, body: dict[str, Any]) -> list[str]:
    """The user's text in a request body, in order."""
    if provider == "openai":
        return [m["content"] for m in body["messages"] if m["role"] == "user"]
    return [b["text"] for m in body["messages"] if m["role"] == "user" for b in m["content"]
            if b["type"] == "text"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_deeply_nested_arguments_are_a_tool_error_and_the_history_still_converts(
    provider: str,
) -> None:
    # As a transfer call and as an ordinary call: each comes back to the model as an error.
    scripted = ScriptedModel([tool_call("transfer_to_billing", DEEP), tool_call("lookup", DEEP),
                              text("Sorry, which order?")])
    session = MemorySession()
    result = await Runner.run(front(scripted), "Where is my order?", session=session)
    assert result.final_output == "Sorry, which order?"
    errors = [e for e in session.events if e.kind == "tool_result"]
    assert [(e.tool_name, e.is_error) for e in errors] == [
        ("transfer_to_billing", True), ("lookup", True)]
    assert all("not valid JSON" in e.message.content for e in errors)

    # A later request converts that history: the text goes back under _raw_arguments.
    server = FakeServer(replay(PAYLOADS / provider / "text.json"))
    later = await Runner.run(front(PROVIDERS[provider](server)), "A7", session=session)
    assert later.final_output
    body = server.body()
    assert [args for _, args in sent_calls(provider, body)] == [{"_raw_arguments": DEEP}] * 2


# One server and model per provider for every example: building SDK clients is the slow part.
SERVERS = {provider: FakeServer() for provider in PROVIDERS}
MODELS = {provider: make(SERVERS[provider]) for provider, make in PROVIDERS.items()}


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.text(), st.integers(0, 4000).map(lambda n: "[" * n + "{" * n),
                 st.integers(0, 5000).map(lambda n: '{"n": ' + "9" * n + "}"),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                              lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)
                              ).map(json.dumps)))
def test_any_argument_text_is_an_object_or_a_tool_error_and_converts(arguments: str) -> None:
    try:
        expected = parse_arguments(arguments, "lookup")
    except ToolRetry as e:
        assert "Invalid arguments for lookup" in str(e)
        expected = {"_raw_arguments": arguments}  # kept as text, sent as an object
    history = [Message.user("Hi"), Message.assistant("", (ToolCall("c1", "lookup", arguments),)),
               Message.tool("c1", "Error: invalid arguments", name="lookup")]
    offered = ToolDefinition(name="lookup", description="Find an order.", parameters={})
    request = ModelRequest(instructions="Help.", messages=history, tools=[offered])
    for provider, model in MODELS.items():
        server = SERVERS[provider]
        server.replies.append(replay(PAYLOADS / provider / "text.json"))
        asyncio.run(model.request(request))
        [(_, sent)] = sent_calls(provider, server.body())
        assert sent == expected


def completion(*calls: tuple[str, str, dict[str, Any]], content: str = "") -> httpx2.Response:
    """A chat completion as an OpenAI-compatible server sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [
            {"id": id, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for id, name, args in calls]
    return httpx2.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "local",
        "choices": [{"index": 0, "message": message,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_call_ids_repeated_in_every_turn_convert_to_unique_paired_ids(
    provider: str,
) -> None:
    # A server that numbers calls per response: call_0 (twice in one turn too) every turn.
    numbering = FakeServer(
        completion(("call_0", "lookup", {"order_id": "A7"})),
        completion(("call_0", "lookup", {"order_id": "B8"}),
                   ("call_0", "lookup", {"order_id": "C9"})),
        completion(content="All shipped."),
    )
    session = MemorySession()
    result = await Runner.run(front(openai_model(numbering)), "Orders?", session=session)
    assert result.final_output == "All shipped."

    server = FakeServer(replay(PAYLOADS / provider / "text.json"))
    await Runner.run(front(PROVIDERS[provider](server)), "And A7 again?", session=session)
    for wire, body in (("openai", numbering.body()), (provider, server.body())):
        calls = sent_calls(wire, body)
        ids = [id for id, _ in calls]
        assert len(set(ids)) == 3
        assert [args["order_id"] for _, args in calls] == ["A7", "B8", "C9"]
    # Each result goes with its own call: B8's answer with the call that asked for B8.
    orders = {id: args["order_id"] for id, args in sent_calls(provider, server.body())}
    results = sent_results(provider, server.body())
    assert [(orders[id], content) for id, content in results] == [
        (order, f"order {order}: shipped") for order in ("A7", "B8", "C9")]
    if provider == "anthropic":  # every tool_use is answered in the very next message
        messages = server.body()["messages"]
        for i, m in enumerate(messages):
            uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
            if uses:
                answers = [b["tool_use_id"] for b in messages[i + 1]["content"]
                           if b["type"] == "tool_result"]
                assert answers == uses


STREAMS = {"openai": ("stream_tool_calls.sse", 6), "anthropic": ("stream.sse", 10)}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cut_stream_or_an_unreadable_body_fails_the_run_and_the_session_goes_on(
    provider: str,
) -> None:
    recording, events = STREAMS[provider]
    html = httpx2.Response(200, content=b"<html>502</html>", headers={"content-type": "text/html"})
    server = FakeServer(cut_stream(PAYLOADS / provider / recording, events), html,
                        replay(PAYLOADS / provider / "text.json"))
    session = MemorySession()
    agent = front(PROVIDERS[provider](server))
    with pytest.raises(ModelProviderError, match="before the answer was complete"):
        async for _ in Runner.stream(agent, "Weather?", session=session):
            pass
    with pytest.raises(ModelProviderError, match="could not be used"):
        await Runner.run(agent, "Weather?", session=session)
    assert not [e for e in session.events if e.kind == "tool_result"]  # cut calls never ran
    later = await Runner.run(agent, "Weather, please?", session=session)
    assert later.final_output == "The capital of France is Paris."
    # The failed runs' inputs are kept; nothing of their cut or unreadable answers is.
    assert user_texts(provider, server.body()) == ["Weather?", "Weather?", "Weather, please?"]


@asynccontextmanager
async def dripping_server(content_type: str, drip: bytes) -> AsyncIterator[str]:
    """A local server that answers 200 and then sends ``drip`` every 20 ms, never finishing."""

    writers: list[asyncio.StreamWriter] = []
    handlers: list[asyncio.Task[Any]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + content_type.encode()
                     + b"\r\ncontent-length: 1000000\r\n\r\n")
        while not writer.is_closing():
            writer.write(drip)
            await asyncio.sleep(0.02)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        for writer in writers:
            writer.close()
        # A handler still dripping would outlive this loop and be destroyed pending later.
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


def local_model(provider: str, base_url: str) -> Model:
    if provider == "openai":
        return OpenAIChatModel("local", base_url=f"{base_url}/v1", api_key="k", max_retries=0)
    return AnthropicModel("claude-test", base_url=base_url, api_key="k", max_retries=0)


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_that_never_finishes_fails_at_the_request_deadline(
    provider: str, stream: bool,
) -> None:
    # Each read gets a byte well within its timeout; only the overall deadline can end this.
    kind, drip = (("text/event-stream", b": keep-alive\n\n") if stream
                  else ("application/json", b" "))
    session = MemorySession()
    async with dripping_server(kind, drip) as base_url:
        agent = Agent("front", instructions="Help.", model=local_model(provider, base_url),
                      model_settings=ModelSettings(timeout=1, deadline=0.3))
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ModelProviderError, match="deadline of 0.3 s"):
            if stream:
                async for _ in Runner.stream(agent, "Hi", session=session):
                    pass
            else:
                await Runner.run(agent, "Hi", session=session)
        assert loop.time() - started < 5
    later = await Runner.run(front(ScriptedModel([text("Hello again.")])), "Hi?", session=session)
    assert later.final_output == "Hello again."
    kinds = [e.kind for e in session.events]
    assert kinds[:2] == ["run_started", "message"] and kinds.count("run_finished") == 2


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_missed_deadline_is_a_timeout_a_fallback_model_moves_on_from(
    provider: str, stream: bool,
) -> None:
    kind, drip = (("text/event-stream", b": keep-alive\n\n") if stream
                  else ("application/json", b" "))
    async with dripping_server(kind, drip) as base_url:
        slow = local_model(provider, base_url)
        model = FallbackModel(slow, ScriptedModel([text("From the backup.")], name="backup"),
                              on=("timeout",))
        agent = Agent("front", instructions="Help.", model=model,
                      model_settings=ModelSettings(timeout=1, deadline=0.3))
        if stream:
            result = Runner.stream(agent, "Hi")
            async for _ in result:
                pass
            assert result.result is not None
            assert result.result.final_output == "From the backup."
        else:
            assert (await Runner.run(agent, "Hi")).final_output == "From the backup."

        with pytest.raises(ModelTimeout, match="deadline of 0.3 s"):
            await Runner.run(agent.clone(model=slow), "Hi")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        provider = "anthropic" if self.path.endswith("/messages") else "openai"
        body = (PAYLOADS / provider / "text.json").read_bytes()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def threaded_server() -> Iterator[str]:
    """A local server in its own thread, so it outlives the event loops of ``run_sync``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_run_sync_twice_uses_a_client_per_event_loop_and_closes_it(
    provider: str, threaded_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent("front", instructions="Help.", model=local_model(provider, threaded_server))
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        first = Runner.run_sync(agent, "Hi")
        second = Runner.run_sync(agent, "Hi again")
        gc.collect()
    assert first.final_output and second.final_output == first.final_output
    assert not caplog.records  # e.g. "Task exception was never retrieved"
