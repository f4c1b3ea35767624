"""FallbackModel: the next model on an error, a timeout or a refusal, through Runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from provider_helpers import FakeServer, anthropic_model, cut_stream, openai_model, replay
from relayrace import (
    Agent,
    AllModelsFailed,
    FallbackModel,
    MessageEvent,
    ModelBehaviorError,
    ModelProviderError,
    ModelRefused,
    ModelTimeout,
    Runner,
    TextDeltaEvent,
    UserError,
)
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, ScriptedModel

PAYLOADS = Path(__file__).parent / "payloads"
REFUSAL = "I'm sorry, I can't assist with that request."


def failing(name: str, error: BaseException) -> FunctionModel:
    def answer(request: ModelRequest) -> BaseException:
        return error

    return FunctionModel(answer, name=name)


def agent(model: FallbackModel) -> Agent[Any]:
    return Agent("helper", instructions="Help.", model=model)


async def test_a_provider_error_moves_on_and_the_answering_model_is_recorded() -> None:
    down = failing("primary", ModelProviderError("HTTP 503", status_code=503))
    backup = ScriptedModel(["From the backup."], name="backup")
    model = FallbackModel(down, backup)
    result = await Runner.run(agent(model), "hi")

    assert result.final_output == "From the backup."
    (answer,) = [e for e in result.session.events if isinstance(e, MessageEvent)
                 and e.message.role == "assistant"]
    assert answer.model == "backup"
    assert list(model.usage_by_model) == ["backup"]  # the failed request reported no usage
    assert model.usage_by_model["backup"].requests == 1
    assert model.name == "fallback(primary, backup)"


async def test_every_model_failing_raises_a_typed_error_listing_each_failure() -> None:
    model = FallbackModel(
        failing("one", ModelProviderError("HTTP 500: boom", status_code=500)),
        failing("two", ModelTimeout("did not finish within its deadline of 5 s")),
        on=("error", "timeout"),
    )
    with pytest.raises(AllModelsFailed) as info:
        await Runner.run(agent(model), "hi")
    error = info.value
    assert [(name, type(e)) for name, e in error.failures] == [
        ("one", ModelProviderError), ("two", ModelTimeout)]
    assert "All 2 models failed" in str(error)
    assert "one: ModelProviderError: HTTP 500: boom" in str(error)
    assert "two: ModelTimeout" in str(error)
    assert isinstance(error, ModelProviderError)


async def test_a_failure_kind_not_in_on_is_raised_at_once() -> None:
    backup = ScriptedModel(["never asked"], name="backup")
    model = FallbackModel(failing("primary", ModelTimeout("timed out")), backup, on=("error",))
    with pytest.raises(ModelTimeout):
        await Runner.run(agent(model), "hi")
    assert backup.requests == []

    # An error that is no provider failure (a bug, a model misbehaving) is never moved on from.
    model = FallbackModel(failing("primary", ModelBehaviorError("empty turn")), backup)
    with pytest.raises(ModelBehaviorError):
        await Runner.run(agent(model), "hi")
    assert backup.requests == []


async def test_a_plain_timeout_error_counts_as_a_timeout() -> None:
    backup = ScriptedModel(["Done."], name="backup")
    model = FallbackModel(failing("slow", TimeoutError()), backup, on=["timeout"])
    assert (await Runner.run(agent(model), "hi")).final_output == "Done."


@pytest.mark.parametrize(("provider", "payload"), [
    ("openai", "openai/refusal.json"), ("anthropic", "anthropic/refusal.json")])
async def test_a_provider_refusal_moves_on_and_its_tokens_are_counted(
    provider: str, payload: str,
) -> None:
    server = FakeServer(replay(PAYLOADS / payload))
    refusing = openai_model(server) if provider == "openai" else anthropic_model(server)
    backup = ScriptedModel(["Here is the answer."], name="backup")
    model = FallbackModel(refusing, backup)
    result = await Runner.run(agent(model), "hi")

    assert result.final_output == "Here is the answer."
    refused = model.usage_by_model[refusing.name]
    assert refused.requests == 1 and refused.output_tokens > 0
    answered = model.usage_by_model["backup"]
    used = result.usage.per_agent["helper"]
    # The refused answer was paid for: the run's usage counts its tokens too.
    assert used.output_tokens == refused.output_tokens + answered.output_tokens
    assert used.input_tokens == refused.input_tokens + answered.input_tokens


async def test_a_refusal_is_the_answer_when_refusal_is_not_in_on() -> None:
    server = FakeServer(replay(PAYLOADS / "openai/refusal.json"))
    backup = ScriptedModel(["never asked"], name="backup")
    model = FallbackModel(openai_model(server), backup, on=("error", "timeout"))
    result = await Runner.run(agent(model), "hi")
    assert result.final_output == REFUSAL
    assert backup.requests == []


async def test_every_model_refusing_raises_with_each_refusal() -> None:
    first = FakeServer(replay(PAYLOADS / "openai/refusal.json"))
    second = FakeServer(replay(PAYLOADS / "anthropic/refusal.json"))
    model = FallbackModel(openai_model(first), anthropic_model(second))
    with pytest.raises(AllModelsFailed) as info:
        await Runner.run(agent(model), "hi")
    refusals = [e for _, e in info.value.failures]
    assert all(isinstance(e, ModelRefused) for e in refusals)
    assert [e.model for e in refusals if isinstance(e, ModelRefused)] == [
        "openai:gpt-4o-mini", "anthropic:claude-test"]
    assert REFUSAL in str(info.value)


async def stream_run(model: FallbackModel) -> tuple[list[str], str]:
    stream = Runner.stream(agent(model), "hi")
    deltas = [e.delta async for e in stream if isinstance(e, TextDeltaEvent)]
    assert stream.result is not None
    return deltas, stream.result.final_output


async def test_streaming_moves_on_before_any_text_was_streamed() -> None:
    # The stream breaks before its first text: the next model streams the answer.
    broken = FakeServer(cut_stream(PAYLOADS / "openai/stream_text.sse", 1, reset=True))
    backup = FakeServer(replay(PAYLOADS / "anthropic/stream_cached.sse"))
    model = FallbackModel(openai_model(broken), anthropic_model(backup))
    assert await stream_run(model) == (["Paris", "."], "Paris.")
    assert list(model.usage_by_model) == ["anthropic:claude-test"]


async def test_streaming_moves_on_from_a_refusal_sent_before_any_text() -> None:
    refusing = FakeServer(replay(PAYLOADS / "openai/stream_refusal.sse"))
    model = FallbackModel(openai_model(refusing), ScriptedModel(["Fine, Paris."], name="b"))
    deltas, output = await stream_run(model)
    assert output == "Fine, Paris."
    assert REFUSAL not in "".join(deltas)  # the refusal was never streamed

    refusing = FakeServer(replay(PAYLOADS / "anthropic/stream_refusal_at_once.sse"))
    model = FallbackModel(anthropic_model(refusing), ScriptedModel(["Fine, Paris."], name="b"))
    assert (await stream_run(model))[1] == "Fine, Paris."


async def test_streaming_after_text_raises_the_failure_without_asking_another() -> None:
    backup = ScriptedModel(["never asked"], name="backup")
    broken = FakeServer(cut_stream(PAYLOADS / "openai/stream_text.sse", 3, reset=True))
    model = FallbackModel(openai_model(broken), backup)
    stream = Runner.stream(agent(model), "hi")
    deltas: list[str] = []
    with pytest.raises(ModelProviderError, match="already been streamed"):
        async for event in stream:
            if isinstance(event, TextDeltaEvent):
                deltas.append(event.delta)
    assert deltas == ["Relay", " races"]  # once each: no other model's text after them

    refusing = FakeServer(replay(PAYLOADS / "anthropic/stream_refusal.sse"))
    model = FallbackModel(anthropic_model(refusing), backup)
    with pytest.raises(ModelRefused, match="declined to answer: 'Here is how'"):
        await stream_run(model)
    assert backup.requests == []


@pytest.mark.parametrize("on", [("error", "refusals"), (), "everything"])
def test_unknown_failure_kinds_are_a_user_error(on: Any) -> None:
    with pytest.raises(UserError, match="'error', 'timeout', 'refusal'"):
        FallbackModel(ScriptedModel([]), ScriptedModel([]), on=on)


def test_models_may_be_named_by_provider_strings() -> None:
    model = FallbackModel("openai:gpt-test-fallback", "anthropic:claude-test-fallback",
                          on="error")
    assert [m.name for m in model.models] == [
        "openai:gpt-test-fallback", "anthropic:claude-test-fallback"]
    assert model.on == {"error"}
