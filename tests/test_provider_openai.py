"""The OpenAI chat-completions adapter against recorded wire payloads (no network).

Every test plugs a mock transport into the SDK client, so requests are captured and recorded
responses from ``tests/payloads/openai/`` are replayed; both directions are checked: the JSON
the adapter sent and the normalized ``ModelResponse`` it parsed back.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from pydantic import BaseModel, Field

from provider_helpers import FakeServer, collect, cut_stream, edited, replay, replay_bytes
from relayrace.core.exceptions import ModelBehaviorError, ModelProviderError, UserError
from relayrace.core.messages import Message, ToolCall
from relayrace.models import ModelRequest, ModelSettings, ToolDefinition
from relayrace.models.openai import OpenAIChatModel

PAYLOADS = Path(__file__).parent / "payloads" / "openai"
BASE_URL = "https://api.test/v1"

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a location.",
    parameters={
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
)


def recorded(
    name: str, status: int = 200, headers: dict[str, str] | None = None
) -> httpx2.Response:
    """A recorded payload from ``payloads/openai/`` as the server's response."""
    return replay(PAYLOADS / name, status, headers)


def make_model(server: FakeServer, *, max_retries: int = 0, **kwargs: Any) -> OpenAIChatModel:
    client = openai.AsyncOpenAI(
        api_key="test-key",
        base_url=BASE_URL,
        max_retries=max_retries,
        http_client=server.http_client(),
    )
    return OpenAIChatModel("gpt-4o-mini", client=client, **kwargs)


def ask(text: str = "What is the capital of France?", **kwargs: Any) -> ModelRequest:
    return ModelRequest(instructions="You are terse.", messages=[Message.user(text)], **kwargs)


async def test_text_answer_sends_system_then_user_and_parses_text_and_usage() -> None:
    server = FakeServer(recorded("text.json"))
    response = await make_model(server).request(ask())

    request = server.requests[0]
    assert request.url == f"{BASE_URL}/chat/completions"
    assert request.headers["authorization"] == "Bearer test-key"
    assert server.body() == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
    }
    assert response.message == Message.assistant("The capital of France is Paris.")
    assert (response.usage.requests, response.usage.input_tokens) == (1, 24)
    assert response.usage.output_tokens == 8
    assert response.model == "gpt-4o-mini-2024-07-18"


async def test_empty_instructions_send_no_system_message() -> None:
    server = FakeServer(recorded("text.json"))
    request = ModelRequest(instructions="  ", messages=[Message.user("hi")])
    await make_model(server).request(request)
    assert server.body()["messages"] == [{"role": "user", "content": "hi"}]


async def test_history_tools_and_settings_map_to_chat_completions_shapes() -> None:
    server = FakeServer(recorded("tool_call.json"))
    history = [
        Message.user("Weather in Paris and Rome?"),
        Message.assistant(
            "",
            (
                ToolCall("call_a", "get_weather", '{"location": "Paris"}'),
                ToolCall("call_b", "get_weather", '{"location": "Rome"'),  # malformed
            ),
            name="triage",
        ),
        Message.tool("call_a", "18C, sunny", name="get_weather"),
        Message.tool("call_b", "Error: arguments were not valid JSON", name="get_weather"),
        Message.system("Handoff: you are now the weather agent."),
        Message.assistant("Paris is sunny.", (ToolCall("call_c", "get_weather", "{}"),)),
        Message.tool("call_c", ""),
    ]
    model = make_model(server, settings=ModelSettings(temperature=0.1, max_tokens=50))
    settings = ModelSettings(
        temperature=0.7, top_p=0.9, parallel_tool_calls=False, extra={"seed": 7}
    )
    response = await model.request(
        ModelRequest(
            instructions="Be helpful.", messages=history, tools=[WEATHER], settings=settings
        )
    )

    body = server.body()
    assert body["messages"] == [
        {"role": "system", "content": "Be helpful."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
                },
                {
                    # Wrapped, not verbatim: vLLM and llama.cpp parse past calls' arguments
                    # and answer HTTP 400 when they are not valid JSON.
                    "id": "call_b",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": r'{"_raw_arguments": "{\"location\": \"Rome\""}',
                    },
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "18C, sunny"},
        {
            "role": "tool",
            "tool_call_id": "call_b",
            "content": "Error: arguments were not valid JSON",
        },
        {"role": "system", "content": "Handoff: you are now the weather agent."},
        {
            "role": "assistant",
            "content": "Paris is sunny.",
            "tool_calls": [
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": ""},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": WEATHER.description,
                "parameters": WEATHER.parameters,
            },
        }
    ]
    # Request settings win field by field; unset ones fall back to the constructor's.
    assert (body["temperature"], body["top_p"], body["max_completion_tokens"]) == (0.7, 0.9, 50)
    assert "max_tokens" not in body  # reasoning models refuse it
    assert body["parallel_tool_calls"] is False
    assert body["seed"] == 7  # `extra` reaches the top level of the body

    assert response.message.content == ""
    assert response.message.tool_calls == (
        ToolCall("call_12345xyz", "get_weather", '{"location":"Paris, France"}'),
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (82, 17)


async def test_malformed_arguments_of_a_past_call_go_back_as_valid_json() -> None:
    # Servers that validate past arguments (vLLM, llama.cpp) would otherwise reject every
    # request after the first malformed call.
    server = FakeServer(recorded("parallel_tool_calls.json"), recorded("text.json"))
    model = make_model(server)
    first = await model.request(ask(tools=[WEATHER]))
    paris, bogota, email = first.message.tool_calls
    truncated = '{"to": "bob@example.com", "body": "Hi'
    assert email.arguments == truncated

    history = [
        Message.user("What is the capital of France?"),
        first.message,
        Message.tool(paris.id, "18C, sunny"),
        Message.tool(bogota.id, "14C, rain"),
        Message.tool(email.id, "Error: arguments were not valid JSON"),
    ]
    await model.request(ModelRequest(instructions="", messages=history, tools=[WEATHER]))

    sent = [c["function"]["arguments"] for c in server.body()["messages"][1]["tool_calls"]]
    assert sent[:2] == ['{"location": "Paris, France"}', '{"location": "Bogotá, Colombia"}']
    assert json.loads(sent[2]) == {"_raw_arguments": truncated}
    assert email.arguments == truncated  # the session keeps the original text


@pytest.mark.parametrize(
    ("stored", "sent"),
    [
        ("", "{}"),
        ("  ", "{}"),
        (' {"a": 1} ', ' {"a": 1} '),
        ("[1, 2]", '{"_raw_arguments": "[1, 2]"}'),
        ('"Paris"', r'{"_raw_arguments": "\"Paris\""}'),
        ("null", '{"_raw_arguments": "null"}'),
    ],
)
async def test_past_arguments_are_always_a_json_object_on_the_wire(stored: str, sent: str) -> None:
    server = FakeServer(recorded("text.json"))
    history = [
        Message.user("hi"),
        Message.assistant("", (ToolCall("call_a", "get_weather", stored),)),
        Message.tool("call_a", "done"),
    ]
    await make_model(server).request(ModelRequest(instructions="", messages=history))
    assert server.body()["messages"][1]["tool_calls"][0]["function"]["arguments"] == sent


async def test_parallel_tool_calls_without_tools_offered_is_not_sent() -> None:
    server = FakeServer(recorded("text.json"))
    model = make_model(server, settings=ModelSettings(parallel_tool_calls=True))
    await model.request(ask())
    assert "parallel_tool_calls" not in server.body()
    assert "tools" not in server.body()


async def test_parallel_tool_calls_keep_order_ids_and_raw_arguments() -> None:
    server = FakeServer(recorded("parallel_tool_calls.json"))
    response = await make_model(server).request(ask(tools=[WEATHER]))
    assert response.message.tool_calls == (
        ToolCall("call_FthC9qRpsL5kBpwwyw6c7j4k", "get_weather", '{"location": "Paris, France"}'),
        ToolCall(
            "call_RpEDoB8O0FTL9JoKTuCVFOyR", "get_weather", '{"location": "Bogotá, Colombia"}'
        ),
        # Truncated JSON is passed through untouched; the engine reports it to the model.
        ToolCall(
            "call_q8RZvN2nM6xW4bY0pL1tK9sJ", "send_email", '{"to": "bob@example.com", "body": "Hi'
        ),
    )
    assert response.usage.total_tokens == 214


async def test_missing_tool_call_ids_are_synthesized_and_object_arguments_serialized() -> None:
    server = FakeServer(recorded("ollama_tool_call_no_id.json"))
    response = await make_model(server).request(ask(tools=[WEATHER]))
    first, second = response.message.tool_calls
    assert first.id and second.id and first.id != second.id
    assert json.loads(first.arguments) == {"q": "relay"}
    assert second.arguments == '{"q": "race"}'
    assert response.model == "qwen2.5:7b"


async def test_stream_yields_text_deltas_then_the_complete_response() -> None:
    server = FakeServer(recorded("stream_text.sse"))
    deltas, final = await collect(make_model(server), ask())

    body = server.body()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert deltas == ["Relay", " races", " pass the baton."]
    assert final.message == Message.assistant("Relay races pass the baton.")
    # Usage arrives in the last chunk, whose `choices` is empty.
    assert (final.usage.input_tokens, final.usage.output_tokens) == (19, 6)


async def test_stream_assembles_parallel_tool_calls_by_index() -> None:
    server = FakeServer(recorded("stream_tool_calls.sse"))
    deltas, final = await collect(make_model(server), ask(tools=[WEATHER]))
    assert deltas == ["Checking both."]
    assert final.message.content == "Checking both."
    assert final.message.tool_calls == (
        ToolCall("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", '{"location": "Paris"}'),
        ToolCall("call_ABPjm4wiX1Dlw1oMqoJR1yHd", "get_time", '{"tz": "Europe/Paris"}'),
    )
    assert (final.usage.input_tokens, final.usage.output_tokens) == (120, 52)
    assert final.model == "gpt-4o-2024-08-06"


async def test_error_event_inside_a_stream_becomes_a_provider_error() -> None:
    sse = b'data: {"error": {"message": "The model is overloaded.", "type": "server_error"}}\n\n'
    server = FakeServer(
        httpx2.Response(200, content=sse, headers={"content-type": "text/event-stream"})
    )
    with pytest.raises(ModelProviderError, match="The model is overloaded"):
        await collect(make_model(server), ask())


async def test_rate_limit_is_reported_with_status_and_advice() -> None:
    server = FakeServer(recorded("error_429.json", status=429))
    with pytest.raises(ModelProviderError) as info:
        await make_model(server, max_retries=0).request(ask())
    error = info.value
    assert (error.status_code, error.provider) == (429, "openai")
    assert "Rate limit reached" in str(error)  # the provider's own detail
    assert "retry later" in str(error) and "concurrency" in str(error)
    assert isinstance(error.__cause__, openai.RateLimitError)
    assert len(server.requests) == 1


async def test_server_error_is_retried_by_the_sdk_then_reported() -> None:
    fast_retry = {"retry-after-ms": "1"}
    server = FakeServer(
        recorded("error_500.json", status=500, headers=fast_retry),
        recorded("error_500.json", status=500, headers=fast_retry),
    )
    with pytest.raises(ModelProviderError) as info:
        await make_model(server, max_retries=1).request(ask())
    assert info.value.status_code == 500
    assert "after 1 retries" in str(info.value)
    assert len(server.requests) == 2  # the first try and one retry


async def test_retry_succeeds_after_a_transient_429() -> None:
    server = FakeServer(
        recorded("error_429.json", status=429, headers={"retry-after-ms": "1"}),
        recorded("text.json"),
    )
    response = await make_model(server, max_retries=2).request(ask())
    assert response.message.content == "The capital of France is Paris."
    assert len(server.requests) == 2


async def test_bad_key_points_at_openai_api_key() -> None:
    server = FakeServer(recorded("error_401.json", status=401))
    with pytest.raises(ModelProviderError, match="OPENAI_API_KEY") as info:
        await make_model(server).request(ask())
    assert info.value.status_code == 401


async def test_timeout_becomes_a_provider_error() -> None:
    server = FakeServer(httpx2.ReadTimeout)
    with pytest.raises(ModelProviderError, match="timed out") as info:
        await make_model(server, max_retries=0).request(ask())
    assert info.value.status_code is None
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


async def test_connection_failure_names_the_server() -> None:
    server = FakeServer(httpx2.ConnectError)
    with pytest.raises(ModelProviderError, match="Could not connect") as info:
        await make_model(server, max_retries=0).request(ask())
    assert "api.test" in str(info.value)


async def test_per_request_timeout_is_passed_to_the_sdk() -> None:
    seen: list[object] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.extensions.get("timeout"))
        return recorded("text.json")

    client = openai.AsyncOpenAI(
        api_key="test-key",
        base_url=BASE_URL,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    model = OpenAIChatModel("gpt-4o-mini", client=client)
    await model.request(ask(settings=ModelSettings(timeout=3.5)))
    assert isinstance(seen[0], dict) and seen[0]["read"] == 3.5


async def test_no_key_fails_at_request_time_not_at_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIChatModel("gpt-4o-mini")  # constructing never needs a key
    assert model.name == "openai:gpt-4o-mini"
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        await model.request(ask())


def test_local_server_without_key_gets_a_placeholder_and_constructor_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel(
        "llama3.2", base_url="http://localhost:11434/v1", max_retries=5, timeout=12.0
    )
    client = model.client
    assert client.api_key  # the SDK requires one even though Ollama ignores it
    assert str(client.base_url).startswith("http://localhost:11434/v1")
    assert (client.max_retries, client.timeout) == (5, 12.0)


def test_infer_model_builds_the_adapter_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    from relayrace.models import infer_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = infer_model("openai:gpt-test-infer-offline")
    assert isinstance(model, OpenAIChatModel)
    assert model.name == "openai:gpt-test-infer-offline"


UNREADABLE_BODIES = {
    "invalid JSON": (b'{"id": "chatcmpl-1", "choices": [', "application/json"),
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
    garbage = b"data: {not json at all\n\n"
    server = FakeServer(replay_bytes(garbage, ".sse"), replay_bytes(garbage, ".sse"))
    with pytest.raises(ModelProviderError, match="JSONDecodeError"):
        await collect(make_model(server, max_retries=1), ask())
    assert len(server.requests) == 2


@pytest.mark.parametrize("reset", [False, True], ids=["ended", "reset"])
async def test_a_stream_cut_short_after_text_fails_without_a_result(reset: bool) -> None:
    # "Relay races" then the stream stops: the text is not the answer.
    server = FakeServer(cut_stream(PAYLOADS / "stream_text.sse", 3, reset=reset),
                        recorded("stream_text.sse"))
    received: list[object] = []
    with pytest.raises(ModelProviderError, match="could not be used") as info:
        async for item in make_model(server, max_retries=2).stream(ask()):
            received.append(item)
    assert received == ["Relay", " races"]  # no ModelResponse
    assert ("no finish_reason" in str(info.value)) is not reset
    assert "not asked again" in str(info.value)
    assert len(server.requests) == 1  # a new try would stream "Relay races" twice


async def test_tool_calls_cut_short_are_never_returned_and_a_bare_cut_is_asked_again() -> None:
    # The stream ends inside the calls' arguments: an error, not calls to run.
    server = FakeServer(cut_stream(PAYLOADS / "stream_tool_calls.sse", 6))
    received: list[object] = []
    with pytest.raises(ModelProviderError, match="no finish_reason"):
        async for item in make_model(server, max_retries=1).stream(ask(tools=[WEATHER])):
            received.append(item)
    assert received == ["Checking both."]

    # Cut before any text was passed on: asked again.
    server = FakeServer(cut_stream(PAYLOADS / "stream_tool_calls.sse", 1),
                        recorded("stream_tool_calls.sse"))
    _, final = await collect(make_model(server, max_retries=1), ask(tools=[WEATHER]))
    assert [c.arguments for c in final.message.tool_calls] == [
        '{"location": "Paris"}', '{"tz": "Europe/Paris"}']


async def test_an_answer_cut_by_the_length_limit_is_reported_as_such() -> None:
    server = FakeServer(edited(PAYLOADS / "text.json", '"stop"', '"length"'))
    with pytest.raises(ModelBehaviorError, match=r"max_tokens=5 .*raise ModelSettings.max_tokens"):
        await make_model(server).request(ask(settings=ModelSettings(max_tokens=5)))

    server = FakeServer(edited(PAYLOADS / "stream_tool_calls.sse", '"finish_reason":"tool_calls"',
                               '"finish_reason":"length"'))
    with pytest.raises(ModelBehaviorError, match="output limit"):
        await collect(make_model(server), ask(tools=[WEATHER]))


async def test_max_tokens_goes_as_max_completion_tokens_or_the_field_asked_for() -> None:
    server = FakeServer(recorded("reasoning_cached.json"), recorded("text.json"))
    model = make_model(server)
    await model.request(ask(settings=ModelSettings(max_tokens=300)))
    assert server.body()["max_completion_tokens"] == 300
    assert "max_tokens" not in server.body()

    older = make_model(server, max_tokens_field="max_tokens")
    await older.request(ask(settings=ModelSettings(max_tokens=300)))
    assert server.body()["max_tokens"] == 300
    assert "max_completion_tokens" not in server.body()

    with pytest.raises(UserError, match="'max_completion_tokens' or 'max_tokens'"):
        make_model(server, max_tokens_field="max_length")


def test_local_servers_from_infer_model_get_the_older_max_tokens_field() -> None:
    from relayrace.models import infer_model

    local = infer_model("ollama:llama-test-fields")
    assert isinstance(local, OpenAIChatModel) and local.max_tokens_field == "max_tokens"
    hosted = infer_model("openai:gpt-test-fields")
    assert isinstance(hosted, OpenAIChatModel)
    assert hosted.max_tokens_field == "max_completion_tokens"


async def test_cached_and_reasoning_tokens_are_recorded_in_usage() -> None:
    server = FakeServer(recorded("reasoning_cached.json"))
    response = await make_model(server).request(ask())
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens) == (1843, 212)
    assert (usage.cache_read_tokens, usage.reasoning_tokens) == (1536, 192)
    assert usage.cache_write_tokens == 0
    assert response.model == "o4-mini-2025-04-16"

    server = FakeServer(recorded("stream_reasoning_cached.sse"))
    deltas, final = await collect(make_model(server), ask())
    assert deltas == ["Paris."]
    assert (final.usage.cache_read_tokens, final.usage.reasoning_tokens) == (1536, 192)

    # A compatible server without the details counts none.
    server = FakeServer(recorded("ollama_tool_call_no_id.json"))
    response = await make_model(server).request(ask(tools=[WEATHER]))
    assert (response.usage.cache_read_tokens, response.usage.reasoning_tokens) == (0, 0)


async def test_a_runs_usage_totals_count_cached_and_reasoning_tokens() -> None:
    from relayrace import Agent, Runner

    model = make_model(FakeServer(recorded("reasoning_cached.json")))
    result = await Runner.run(Agent("a", instructions="x", model=model), "hi")
    for usage in (result.usage.total, result.usage.per_agent["a"]):
        assert (usage.requests, usage.input_tokens, usage.output_tokens) == (1, 1843, 212)
        assert (usage.cache_read_tokens, usage.reasoning_tokens) == (1536, 192)


async def test_a_refusal_is_surfaced_in_the_response_and_as_its_text() -> None:
    refusal = "I'm sorry, I can't assist with that request."
    server = FakeServer(recorded("refusal.json"))
    response = await make_model(server).request(ask())
    assert response.refusal == refusal
    assert response.message == Message.assistant(refusal)

    server = FakeServer(recorded("text.json"))
    assert (await make_model(server).request(ask())).refusal is None


async def test_a_streamed_refusal_comes_whole_with_the_response_not_as_text() -> None:
    server = FakeServer(recorded("stream_refusal.sse"))
    deltas, final = await collect(make_model(server), ask())
    assert deltas == []  # kept back, so a FallbackModel can still ask another model
    assert final.refusal == "I'm sorry, I can't assist with that request."
    assert final.message.content == final.refusal


FLIGHTS = ToolDefinition(
    name="search_flights",
    description="Find flights.",
    parameters={
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "destination": {"type": "string", "description": "IATA code"},
            "max_stops": {"type": "integer", "default": 1},
            "cabin": {"enum": ["economy", "business"], "default": "economy"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "passengers": {"type": "array", "items": {"$ref": "#/$defs/Passenger"}},
            "lead": {"$ref": "#/$defs/Passenger", "description": "Who books."},
            "seat": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
        "required": ["origin", "destination", "passengers", "lead"],
        "$defs": {
            "Passenger": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name"],
            }
        },
    },
)


async def test_strict_tools_send_strict_compatible_schemas() -> None:
    original = copy.deepcopy(FLIGHTS.parameters)
    server = FakeServer(recorded("strict_tool_call.json"))
    model = make_model(server, settings=ModelSettings(strict_tools=True))
    await model.request(ask(tools=[FLIGHTS]))

    function = server.body()["tools"][0]["function"]
    assert function["strict"] is True
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "destination": {"type": "string", "description": "IATA code"},
            "max_stops": {"type": ["integer", "null"]},
            "cabin": {"anyOf": [{"enum": ["economy", "business"]}, {"type": "null"}]},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "passengers": {"type": "array", "items": {"$ref": "#/$defs/Passenger"}},
            # No keyword may stand beside a $ref: it is expanded in place.
            "lead": {
                "description": "Who books.",
                "type": "object",
                "properties": {"name": {"type": "string"},
                               "age": {"type": ["integer", "null"]}},
                "required": ["name", "age"],
                "additionalProperties": False,
            },
            "seat": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        },
        "required": ["origin", "destination", "max_stops", "cabin", "note", "passengers",
                     "lead", "seat"],
        "additionalProperties": False,
        "$defs": {
            "Passenger": {
                "type": "object",
                "properties": {"name": {"type": "string"},
                               "age": {"type": ["integer", "null"]}},
                "required": ["name", "age"],
                "additionalProperties": False,
            }
        },
    }
    assert FLIGHTS.parameters == original  # the tool's own schema is left as it was


async def test_strict_tool_arguments_lose_the_nulls_strict_mode_added() -> None:
    server = FakeServer(recorded("strict_tool_call.json"))
    model = make_model(server, settings=ModelSettings(strict_tools=True))
    response = await model.request(ask(tools=[FLIGHTS]))
    (call,) = response.message.tool_calls
    # Omitted, so the tool's defaults apply; a null its schema accepts would be kept.
    assert json.loads(call.arguments) == {
        "origin": "CDG", "destination": "FCO", "passengers": [{"name": "Ada"}]}

    # Without strict_tools, arguments pass through verbatim.
    server = FakeServer(recorded("strict_tool_call.json"))
    response = await make_model(server).request(ask(tools=[FLIGHTS]))
    assert '"max_stops":null' in response.message.tool_calls[0].arguments
    assert "strict" not in server.body()["tools"][0]["function"]


UNFIT_SCHEMAS = {
    "open map": {"type": "object", "properties": {
        "tags": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "self-expanding $ref": {
        "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {
            "child": {"$ref": "#/$defs/Node", "description": "The next node."}}}}},
    "outside $ref": {"type": "object", "properties": {
        "x": {"$ref": "https://example.test/x.json", "description": "An x."}}},
}


@pytest.mark.parametrize("schema", UNFIT_SCHEMAS.values(), ids=list(UNFIT_SCHEMAS))
async def test_a_schema_strict_mode_cannot_express_is_sent_without_strict(
    schema: dict[str, Any],
) -> None:
    unfit = ToolDefinition(name="tag", description="Tag things.", parameters=schema)
    server = FakeServer(recorded("tool_call.json"))
    model = make_model(server, settings=ModelSettings(strict_tools=True))
    await model.request(ask(tools=[unfit, WEATHER]))
    first, second = (t["function"] for t in server.body()["tools"])
    assert "strict" not in first and first["parameters"] == schema
    assert second["strict"] is True
    assert second["parameters"]["additionalProperties"] is False


class Stop(BaseModel):
    """A stop on the way."""

    city: str
    nights: int = 1
    next: Stop | None = Field(default=None, description="The stop after this one.")


async def test_strict_schemas_of_function_tools_with_nested_models() -> None:
    from relayrace import tool

    @tool
    def plan(first: Stop, budget: float | None = None, pace: str = "slow") -> str:
        """Plan a trip through its stops."""
        return first.city

    server = FakeServer(recorded("strict_tool_call.json"))
    model = make_model(server, settings=ModelSettings(strict_tools=True))
    await model.request(ask(tools=[plan.definition]))
    function = server.body()["tools"][0]["function"]
    assert function["strict"] is True

    def closed(schema: object) -> None:  # every object in it closed, all properties required
        if isinstance(schema, dict):
            assert "default" not in schema
            if "properties" in schema:
                assert schema["additionalProperties"] is False
                assert schema["required"] == list(schema["properties"])
            for value in schema.values():
                closed(value)
        elif isinstance(schema, list):
            for value in schema:
                closed(value)

    closed(function["parameters"])
    assert function["parameters"]["properties"]["pace"]["type"] == ["string", "null"]
    # The model's nulls for optional fields, nested ones too, are dropped again.
    arguments = '{"first": {"city": "Rome", "nights": null, "next": null}, "budget": null, ' \
        '"pace": null}'
    recording = json.loads((PAYLOADS / "strict_tool_call.json").read_text())
    recording["choices"][0]["message"]["tool_calls"][0]["function"] = {
        "name": "plan", "arguments": arguments}
    server = FakeServer(replay_bytes(json.dumps(recording).encode()))
    model = make_model(server, settings=ModelSettings(strict_tools=True))
    response = await model.request(ask(tools=[plan.definition]))
    cleaned = json.loads(response.message.tool_calls[0].arguments)
    # `budget` and `next` accept null in the tool's own schema, so they stay.
    assert cleaned == {"first": {"city": "Rome", "next": None}, "budget": None}


async def test_usage_adds_the_cache_and_reasoning_counts_and_keeps_positional_fields() -> None:
    from relayrace import Usage

    server = FakeServer(recorded("reasoning_cached.json"), recorded("reasoning_cached.json"))
    model = make_model(server)
    total = Usage(0, 7, 3, 2)  # requests, input, output, tool calls: as before
    for _ in range(2):
        total.add((await model.request(ask())).usage)
    assert (total.requests, total.input_tokens, total.output_tokens, total.tool_calls) == (
        2, 7 + 2 * 1843, 3 + 2 * 212, 2)
    assert (total.cache_read_tokens, total.reasoning_tokens) == (2 * 1536, 2 * 192)


async def test_a_tool_marked_strict_goes_strict_without_strict_tools() -> None:
    # @tool(strict=True) sets ToolDefinition.strict; the agent-wide setting stays off.
    server = FakeServer(recorded("strict_tool_call.json"))
    lenient = ToolDefinition(name="note", description="Take a note.",
                             parameters={"type": "object", "properties": {"x": {"type": "string"}}})
    strict = ToolDefinition(name=FLIGHTS.name, description=FLIGHTS.description,
                            parameters=FLIGHTS.parameters, strict=True)
    response = await make_model(server).request(ask(tools=[lenient, strict]))
    first, second = (t["function"] for t in server.body()["tools"])
    assert "strict" not in first
    assert second["strict"] is True and second["parameters"]["additionalProperties"] is False
    # The strict tool's arguments lose the nulls strict mode made the model send.
    assert json.loads(response.message.tool_calls[0].arguments) == {
        "origin": "CDG", "destination": "FCO", "passengers": [{"name": "Ada"}]}
