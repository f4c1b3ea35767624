"""The Anthropic Messages adapter against recorded wire payloads (no network).

Every test plugs a mock transport into the SDK client, so requests are captured and recorded
responses from ``tests/payloads/anthropic/`` are replayed; both directions are checked: the JSON
the adapter sent and the normalized ``ModelResponse`` it parsed back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from provider_helpers import FakeServer, collect, cut_stream, edited, replay, replay_bytes
from relayrace.core.exceptions import ModelBehaviorError, ModelProviderError, UserError
from relayrace.core.messages import Message, ToolCall
from relayrace.models import ModelRequest, ModelResponse, ModelSettings, ToolDefinition
from relayrace.models.anthropic import AnthropicModel

PAYLOADS = Path(__file__).parent / "payloads" / "anthropic"
BASE_URL = "https://anthropic.test"
# A made-up id: the SDK warns about real ones once they are deprecated, and warnings fail tests.
MODEL = "claude-test"
CONTINUES = {"type": "text", "text": "(conversation continues)"}

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a location.",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)


def recorded(
    name: str, status: int = 200, headers: dict[str, str] | None = None
) -> httpx2.Response:
    """A recorded payload from ``payloads/anthropic/`` as the server's response."""
    return replay(PAYLOADS / name, status, headers)


def make_client(server: FakeServer, *, max_retries: int = 0, **kwargs: Any) -> Any:
    return anthropic.AsyncAnthropic(
        base_url=BASE_URL,
        max_retries=max_retries,
        http_client=server.http_client(),
        **{"api_key": "test-key", **kwargs},
    )


def make_model(server: FakeServer, *, max_retries: int = 0, **kwargs: Any) -> AnthropicModel:
    client = make_client(server, max_retries=max_retries)
    return AnthropicModel(MODEL, client=client, **kwargs)


def ask(*messages: Message, instructions: str = "You are terse.", **kwargs: Any) -> ModelRequest:
    history = list(messages) or [Message.user("What is the capital of France?")]
    return ModelRequest(instructions=instructions, messages=history, **kwargs)


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def all_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [block for message in body["messages"] for block in message["content"]]


async def test_text_answer_sends_system_parameter_and_parses_text_and_usage() -> None:
    server = FakeServer(recorded("text.json"))
    response = await make_model(server).request(ask())

    assert server.requests[0].url == f"{BASE_URL}/v1/messages"
    assert server.body() == {
        "model": MODEL,
        "max_tokens": 4096,
        "system": "You are terse.",
        "messages": [user(text("What is the capital of France?"))],
    }
    assert response.message == Message.assistant("The capital of France is Paris.")
    assert (response.usage.requests, response.usage.input_tokens) == (1, 21)
    assert response.usage.output_tokens == 10
    assert response.model == "claude-sonnet-4-6"


async def test_tool_use_answer_keeps_text_and_counts_cached_input() -> None:
    server = FakeServer(recorded("tool_use.json"))
    response = await make_model(server).request(ask(tools=[WEATHER]))

    assert server.body()["tools"] == [
        {
            "name": "get_weather",
            "description": WEATHER.description,
            "input_schema": WEATHER.parameters,
        }
    ]
    assert response.message.content == "I'll check the weather in Paris."
    (call,) = response.message.tool_calls
    assert (call.id, call.name) == ("toolu_01A09q90qw90lq917835lq9", "get_weather")
    assert json.loads(call.arguments) == {"location": "Paris, France", "unit": "celsius"}
    # 384 uncached + 1200 read from the prompt cache were all sent.
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1584, 73)


async def test_parallel_tool_use_blocks_become_ordered_tool_calls() -> None:
    server = FakeServer(recorded("parallel_tool_use.json"))
    response = await make_model(server).request(ask(tools=[WEATHER]))
    assert response.message.content == ""
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.message.tool_calls] == [
        ("toolu_01HZ1nV8LM7X4X3qQ2d6jB5Q", "get_weather", {"location": "Paris, France"}),
        ("toolu_01Ngf1XwQ6P2D6fHGZ2sH8mT", "get_time", {"tz": "Europe/Paris"}),
    ]


async def test_history_with_tools_merges_roles_and_orders_tool_results_first() -> None:
    server = FakeServer(recorded("text.json"))
    history = [
        # Starts with another agent's assistant turn: a user turn must come first.
        Message.assistant("Handing you to the weather desk.", name="triage"),
        Message.system("You now own this conversation."),
        Message.user("Paris and Rome, please."),
        Message.user(""),  # empty: dropped, never an empty text block
        Message.assistant(
            "   ",  # whitespace only: no text block
            (
                ToolCall("call_a", "get_weather", '{"location": "Paris"}'),
                ToolCall("call_b", "get_weather", '{"location": "Rome"'),  # malformed
            ),
        ),
        Message.tool("call_a", "18C, sunny"),
        Message.user("Also, hurry."),  # merged into the tool results' user turn, after them
        Message.tool("call_b", ""),
        Message.assistant("Paris is sunny; Rome failed."),
        Message.user("Thanks"),
    ]
    await make_model(server).request(ask(*history, instructions="Be helpful.", tools=[WEATHER]))

    body = server.body()
    assert body["system"] == "Be helpful.\n\nYou now own this conversation."
    assert body["messages"] == [
        user(CONTINUES),
        assistant(text("Handing you to the weather desk.")),
        user(text("Paris and Rome, please.")),
        assistant(
            {
                "type": "tool_use",
                "id": "call_a",
                "name": "get_weather",
                "input": {"location": "Paris"},
            },
            # Malformed arguments still travel as an object, so the history stays valid.
            {
                "type": "tool_use",
                "id": "call_b",
                "name": "get_weather",
                "input": {"_raw_arguments": '{"location": "Rome"'},
            },
        ),
        user(
            {"type": "tool_result", "tool_use_id": "call_a", "content": "18C, sunny"},
            {"type": "tool_result", "tool_use_id": "call_b"},  # empty result: no content
            text("Also, hurry."),
        ),
        assistant(text("Paris is sunny; Rome failed.")),
        user(text("Thanks")),
    ]
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))
    assert all(b["text"].strip() for b in all_blocks(body) if b["type"] == "text")


async def test_without_tools_tool_traffic_is_rendered_as_text() -> None:
    server = FakeServer(recorded("text.json"))
    history = [
        Message.user("Weather in Paris?"),
        Message.assistant(
            "Let me look.", (ToolCall("call_a", "get_weather", '{"location": "Paris"}'),)
        ),
        Message.tool("call_a", "18C, sunny"),
        Message.user("Summarize."),
    ]
    await make_model(server).request(ask(*history))

    body = server.body()
    assert "tools" not in body
    assert {b["type"] for b in all_blocks(body)} == {"text"}
    assert body["messages"] == [
        user(text("Weather in Paris?")),
        assistant(
            text("Let me look."),
            text('[called tool get_weather with {"location": "Paris"}]'),
        ),
        user(text("[result of get_weather: 18C, sunny]"), text("Summarize.")),
    ]


async def test_unanswered_calls_and_orphan_results_fall_back_to_text() -> None:
    server = FakeServer(recorded("text.json"))
    history = [
        Message.user("Go."),
        Message.assistant("", (ToolCall("call_x", "search", '{"q": "a"}'),)),
        Message.user("Never mind."),  # the call is not answered in the next user turn...
        Message.assistant("OK, stopping."),
        Message.tool("call_x", "found a", name="search"),  # ...but two turns later
        Message.tool("call_gone", "orphan", name="lookup"),  # answers no call at all
    ]
    await make_model(server).request(ask(*history, tools=[WEATHER]))

    body = server.body()
    assert {b["type"] for b in all_blocks(body)} == {"text"}
    assert body["messages"][1:] == [
        assistant(text('[called tool search with {"q": "a"}]')),
        user(text("Never mind.")),
        assistant(text("OK, stopping.")),
        user(text("[result of search: found a]"), text("[result of lookup: orphan]")),
    ]


async def test_consecutive_assistant_messages_merge_and_keep_one_tool_pair() -> None:
    server = FakeServer(recorded("text.json"))
    history = [
        Message.user("Go."),
        Message.assistant("", (ToolCall("call_x", "search", '{"q": "a"}'),), name="triage"),
        Message.assistant("Still thinking.", name="researcher"),
        Message.user("Well?"),
        Message.tool("call_x", "found a"),
        Message.tool("call_x", "found a again"),  # a duplicate result can only be text
    ]
    await make_model(server).request(ask(*history, tools=[WEATHER]))

    assert server.body()["messages"][1:] == [
        assistant(
            {"type": "tool_use", "id": "call_x", "name": "search", "input": {"q": "a"}},
            text("Still thinking."),
        ),
        user(
            {"type": "tool_result", "tool_use_id": "call_x", "content": "found a"},
            text("Well?"),
            text("[result of search: found a again]"),
        ),
    ]


async def test_history_ending_with_assistant_gets_a_user_turn_and_ids_are_sanitized() -> None:
    server = FakeServer(recorded("text.json"))
    history = [
        Message.user("Hi"),
        Message.assistant("", (ToolCall("fc:1/a", "get_weather", ""),)),
        Message.tool("fc:1/a", "ok"),
        Message.assistant("Done."),
    ]
    await make_model(server).request(ask(*history, tools=[WEATHER]))

    messages = server.body()["messages"]
    assert messages[1] == assistant(
        {"type": "tool_use", "id": "fc_1_a", "name": "get_weather", "input": {}}
    )
    assert messages[2] == user({"type": "tool_result", "tool_use_id": "fc_1_a", "content": "ok"})
    assert messages[-1] == user(CONTINUES)  # no prefill: the model answers a user turn


async def test_settings_max_tokens_and_extra_reach_the_body() -> None:
    server = FakeServer(recorded("text.json"))
    model = make_model(server, max_tokens=1000, settings=ModelSettings(extra={"top_k": 3}))
    settings = ModelSettings(max_tokens=64, extra={"metadata": {"user_id": "u-1"}})
    await model.request(ask(settings=settings))

    body = server.body()
    assert body["max_tokens"] == 64
    assert body["top_k"] == 3 and body["metadata"] == {"user_id": "u-1"}


async def test_sampling_settings_are_withheld_from_the_current_api_version() -> None:
    server = FakeServer(recorded("text.json"), recorded("text.json"))
    model = make_model(server, settings=ModelSettings(temperature=0.2, top_p=0.9))
    with pytest.warns(UserWarning, match="temperature"):
        await model.request(ask())
    await model.request(ask())  # warned once per model, not per request
    assert "temperature" not in server.body(0) and "top_p" not in server.body(0)


async def test_sampling_settings_are_sent_to_a_client_pinned_to_the_old_api_version() -> None:
    server = FakeServer(recorded("text.json"))
    client = make_client(server, default_headers={"anthropic-version": "2023-06-01"})
    model = AnthropicModel(MODEL, client=client)
    await model.request(ask(settings=ModelSettings(temperature=0.2)))
    assert server.requests[0].headers["anthropic-version"] == "2023-06-01"
    assert server.body()["temperature"] == 0.2


async def test_stream_yields_text_then_assembles_tool_input_from_json_deltas() -> None:
    server = FakeServer(recorded("stream.sse"))
    deltas, final = await collect(make_model(server), ask(tools=[WEATHER]))

    assert server.body()["stream"] is True
    assert deltas == ["Okay", ", let's check the weather for San Francisco, CA:"]
    assert final.message.content == "Okay, let's check the weather for San Francisco, CA:"
    assert final.message.tool_calls == (
        ToolCall(
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "get_weather",
            '{"location": "San Francisco, CA", "unit": "fahrenheit"}',
        ),
        ToolCall("toolu_01Kx8Qm3rT2bN6vJ9wZ4pL7c", "get_time", "{}"),  # no deltas at all
    )
    assert (final.usage.input_tokens, final.usage.output_tokens) == (472, 89)
    assert final.model == "claude-sonnet-4-6"


async def test_overloaded_error_event_mid_stream_is_a_529_provider_error() -> None:
    server = FakeServer(recorded("stream_overloaded.sse"))
    received: list[str | ModelResponse] = []
    with pytest.raises(ModelProviderError, match="overloaded") as info:
        async for item in make_model(server).stream(ask()):
            received.append(item)
    assert received == ["Part"]
    assert (info.value.status_code, info.value.provider) == (529, "anthropic")


async def test_rate_limit_is_reported_with_status_and_advice() -> None:
    server = FakeServer(recorded("error_429.json", status=429))
    with pytest.raises(ModelProviderError) as info:
        await make_model(server, max_retries=0).request(ask())
    error = info.value
    assert (error.status_code, error.provider) == (429, "anthropic")
    assert "exceed the rate limit" in str(error)  # the API's own detail
    assert "retry later" in str(error)
    assert isinstance(error.__cause__, anthropic.RateLimitError)
    assert len(server.requests) == 1


async def test_overloaded_529_is_retried_by_the_sdk_then_reported() -> None:
    fast_retry = {"retry-after-ms": "1"}
    server = FakeServer(
        recorded("error_529.json", status=529, headers=fast_retry),
        recorded("error_529.json", status=529, headers=fast_retry),
    )
    with pytest.raises(ModelProviderError, match="overloaded") as info:
        await make_model(server, max_retries=1).request(ask())
    assert info.value.status_code == 529
    assert len(server.requests) == 2


async def test_server_error_500_is_reported() -> None:
    server = FakeServer(recorded("error_500.json", status=500))
    with pytest.raises(ModelProviderError, match="Internal server error") as info:
        await make_model(server, max_retries=0).request(ask())
    assert info.value.status_code == 500


async def test_timeout_becomes_a_provider_error() -> None:
    server = FakeServer(httpx2.ReadTimeout)
    with pytest.raises(ModelProviderError, match="timed out") as info:
        await make_model(server, max_retries=0).request(ask())
    assert info.value.status_code is None
    assert isinstance(info.value.__cause__, anthropic.APITimeoutError)


async def test_missing_key_is_a_user_error_and_nothing_is_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no stored credentials either
    server = FakeServer()
    model = AnthropicModel(MODEL, client=make_client(server, api_key=None))
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY"):
        await model.request(ask())
    assert server.requests == []


def test_construction_needs_no_key_and_applies_constructor_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = AnthropicModel("claude-haiku-4-5", max_retries=4, timeout=30.0)
    assert model.name == "anthropic:claude-haiku-4-5"
    assert (model.client.max_retries, model.client.timeout) == (4, 30.0)


UNREADABLE_BODIES = {
    "invalid JSON": (b'{"id": "msg_1", "content": [', "application/json"),
    "empty": (b"", "application/json"),
    "HTML": (b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    "JSON of another shape": (b'{"status": "ok"}', "application/json"),
}


@pytest.mark.parametrize("body", UNREADABLE_BODIES.values(), ids=list(UNREADABLE_BODIES))
async def test_an_unreadable_200_body_is_retried_then_a_provider_error(
    body: tuple[bytes, str],
) -> None:
    content, kind = body
    bad = [httpx2.Response(200, content=content, headers={"content-type": kind})
           for _ in range(2)]
    server = FakeServer(*bad)
    with pytest.raises(ModelProviderError, match="could not be used.*on 2 tries"):
        await make_model(server, max_retries=1).request(ask())
    assert len(server.requests) == 2

    server = FakeServer(httpx2.Response(200, content=content, headers={"content-type": kind}),
                        recorded("text.json"))
    response = await make_model(server, max_retries=1).request(ask())
    assert response.message.content == "The capital of France is Paris."


async def test_a_garbage_stream_line_is_retried_then_a_provider_error() -> None:
    garbage = b"event: message_start\ndata: {not json at all\n\n"
    server = FakeServer(replay_bytes(garbage, ".sse"), replay_bytes(garbage, ".sse"))
    with pytest.raises(ModelProviderError, match="JSONDecodeError"):
        await collect(make_model(server, max_retries=1), ask())
    assert len(server.requests) == 2


@pytest.mark.parametrize("reset", [False, True], ids=["ended", "reset"])
async def test_a_stream_cut_short_fails_without_a_result(reset: bool) -> None:
    # Text, then the stream stops inside the first tool call's input.
    server = FakeServer(cut_stream(PAYLOADS / "stream.sse", 10, reset=reset),
                        recorded("stream.sse"))
    received: list[object] = []
    with pytest.raises(ModelProviderError, match="could not be used") as info:
        async for item in make_model(server, max_retries=2).stream(ask(tools=[WEATHER])):
            received.append(item)
    assert received == ["Okay", ", let's check the weather for San Francisco, CA:"]
    assert ("no message_stop" in str(info.value)) is not reset
    assert ("peer closed connection" in str(info.value)) is reset
    assert "not asked again" in str(info.value)
    assert len(server.requests) == 1  # a new try would stream the text twice

    # Cut before any text was passed on: asked again.
    server = FakeServer(cut_stream(PAYLOADS / "stream.sse", 1, reset=reset),
                        recorded("stream.sse"))
    _, final = await collect(make_model(server, max_retries=1), ask(tools=[WEATHER]))
    assert len(final.message.tool_calls) == 2 and len(server.requests) == 2


async def test_an_answer_cut_by_max_tokens_is_reported_as_such() -> None:
    server = FakeServer(edited(PAYLOADS / "text.json", '"end_turn"', '"max_tokens"'))
    with pytest.raises(ModelBehaviorError, match=r"max_tokens=7 .*raise ModelSettings.max_tokens"):
        await make_model(server).request(ask(settings=ModelSettings(max_tokens=7)))

    # Tool input cut by the limit is not taken as complete arguments.
    server = FakeServer(edited(PAYLOADS / "stream.sse", '"stop_reason":"tool_use"',
                               '"stop_reason":"max_tokens"'))
    with pytest.raises(ModelBehaviorError, match="max_tokens=4096"):
        await collect(make_model(server), ask(tools=[WEATHER]))


async def test_cache_read_and_write_tokens_are_recorded_in_usage() -> None:
    server = FakeServer(recorded("cached_text.json"))
    usage = (await make_model(server).request(ask())).usage
    # Input counts every token sent; the cache counts say how many of them were cached.
    assert (usage.input_tokens, usage.output_tokens) == (21 + 188 + 2048, 10)
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (2048, 188)
    assert usage.reasoning_tokens == 0

    server = FakeServer(recorded("stream_cached.sse"))
    deltas, final = await collect(make_model(server), ask())
    assert deltas == ["Paris", "."]
    assert (final.usage.input_tokens, final.usage.output_tokens) == (21 + 188 + 2048, 4)
    assert (final.usage.cache_read_tokens, final.usage.cache_write_tokens) == (2048, 188)

    # A final count of input tokens alone keeps the cache counts message_start gave.
    server = FakeServer(edited(
        PAYLOADS / "stream_cached.sse",
        '"usage":{"input_tokens":21,"cache_creation_input_tokens":188,'
        '"cache_read_input_tokens":2048,"output_tokens":4}',
        '"usage":{"input_tokens":25,"output_tokens":4}'))
    _, final = await collect(make_model(server), ask())
    assert final.usage.input_tokens == 25 + 188 + 2048
    assert (final.usage.cache_read_tokens, final.usage.cache_write_tokens) == (2048, 188)

    server = FakeServer(recorded("text.json"))
    usage = (await make_model(server).request(ask())).usage
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (0, 0)


async def test_a_refusal_stop_reason_is_surfaced_in_the_response() -> None:
    server = FakeServer(recorded("refusal.json"))
    response = await make_model(server).request(ask())
    assert response.refusal is not None and "stop_reason 'refusal'" in response.refusal
    assert response.message.content == response.refusal  # never an empty turn

    server = FakeServer(recorded("stream_refusal.sse"))
    deltas, final = await collect(make_model(server), ask())
    assert deltas == ["Here is how"]  # streamed before the refusal came
    assert final.refusal == "Here is how"
    assert final.message.content == "Here is how"

    server = FakeServer(recorded("text.json"))
    assert (await make_model(server).request(ask())).refusal is None
