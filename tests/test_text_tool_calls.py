"""A final answer that is only tool calls written as text is never taken as the answer:
``ModelSettings.text_tool_calls`` asks again (``reask``), runs them (``parse``), or keeps the
text (``off``). Each written form under each setting, with a scripted model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from relayrace import (
    Agent,
    MessageEvent,
    ModelBehaviorError,
    ModelSettings,
    RunFinishedEvent,
    Runner,
    TextDeltaEvent,
    ToolResultEvent,
    UserError,
    tool,
)
from relayrace.agents.output import OUTPUT_TOOL
from relayrace.core.messages import NOTE
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, final_output, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor

ran: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    ran.append(city)
    return f"{city}: sunny"


_ARGS = {"city": "Paris"}
_CALL = json.dumps({"name": "get_weather", "arguments": _ARGS})
FORMS = {
    "fenced": f"```json\n{_CALL}\n```",
    "doubled": "{" + _CALL + "}",
    "opening doubled": "{" + _CALL,
    "hermes": f"<tool_call>\n{_CALL}\n</tool_call>",
    "bare": f"  {_CALL}\n",
    "parameters": json.dumps({"name": "get_weather", "parameters": _ARGS}),
}


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def _agent(model: ScriptedModel, setting: str | None, **options: Any) -> Agent[Any]:
    settings = None if setting is None else ModelSettings(text_tool_calls=setting)  # type: ignore[arg-type]
    return Agent("weather", instructions="Say the weather.", model=model, tools=[get_weather],
                 model_settings=settings, **options)


def _assistant(events: list[Any]) -> list[MessageEvent]:
    return [e for e in events if isinstance(e, MessageEvent) and e.message.role == "assistant"]


@pytest.mark.parametrize("form", FORMS)
async def test_parse_runs_the_written_call(form: str) -> None:
    model = ScriptedModel([text(FORMS[form]), text("Sunny in Paris.")])
    result = await Runner.run(_agent(model, "parse"), "weather in Paris?")
    assert result.final_output == "Sunny in Paris."
    assert ran == ["Paris"]
    parsed = _assistant(result.new_events)[0]
    assert parsed.parsed_from_text == FORMS[form]
    assert parsed.message.content == ""
    (call,) = parsed.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", _ARGS)
    assert call.id.startswith("text_call_")
    (done,) = [e for e in result.new_events if isinstance(e, ToolResultEvent)]
    assert done.message.tool_call_id == call.id and not done.is_error
    # The model saw its call answered like a native one.
    assert model.requests[1].messages[-1].content == "Paris: sunny"


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("setting", [None, "reask"])
async def test_reask_tells_the_model_once_then_takes_its_next_answer(
        form: str, setting: str | None) -> None:
    model = ScriptedModel([text(FORMS[form]), tool_call("get_weather", _ARGS),
                           text("Sunny in Paris.")])
    result = await Runner.run(_agent(model, setting), "weather in Paris?")
    assert result.final_output == "Sunny in Paris."
    assert ran == ["Paris"]
    note = model.requests[1].messages[-1]
    assert note.role == "user" and note.name == NOTE
    assert note.content.endswith("Call the tool; do not write it as text.")
    assert "get_weather" in note.content
    assert result.usage.total.requests == 3  # the corrective turn is a request like any other
    assert _assistant(result.new_events)[0].message.content == FORMS[form]


@pytest.mark.parametrize("form", FORMS)
async def test_off_keeps_the_text_as_the_answer(form: str) -> None:
    model = ScriptedModel([text(FORMS[form])])
    result = await Runner.run(_agent(model, "off"), "weather in Paris?")
    assert result.final_output == FORMS[form]
    assert ran == []


@pytest.mark.parametrize("form", FORMS)
async def test_a_second_written_call_fails_typed_and_the_session_stays_valid(form: str) -> None:
    model = ScriptedModel([text(FORMS[form]), text(FORMS["fenced"]), text("Hello again.")])
    session = MemorySession("s")
    agent = _agent(model, "reask")
    with pytest.raises(ModelBehaviorError) as failed:
        await Runner.run(agent, "weather in Paris?", session=session)
    message = str(failed.value)
    assert "'weather'" in message and "get_weather" in message and "```json" in message
    assert "text_tool_calls='parse'" in message
    assert len(model.requests) == 2  # bounded: one corrective turn, no loop
    events = await session.get_events()
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"
    assert ran == []
    # The session goes on: the next run answers.
    again = await Runner.run(agent, "and hello?", session=session)
    assert again.final_output == "Hello again."


async def test_several_calls_in_one_block_all_run() -> None:
    block = "```json\n" + json.dumps([{"name": "get_weather", "arguments": {"city": "Paris"}},
                                      {"name": "get_weather", "arguments": {"city": "Oslo"}}]
                                     ) + "\n```"
    hermes = "\n".join(f'<tool_call>{{"name": "get_weather", "arguments": {{"city": "{c}"}}}}'
                       "</tool_call>" for c in ("Rome", "Lima"))
    model = ScriptedModel([text(block), text(hermes), text("Done.")])
    result = await Runner.run(_agent(model, "parse"), "weather?")
    assert result.final_output == "Done."
    assert ran == ["Paris", "Oslo", "Rome", "Lima"]
    ids = [c.id for e in _assistant(result.new_events) for c in e.message.tool_calls]
    assert len(set(ids)) == 4


@pytest.mark.parametrize("answer", [
    "I would call get_weather with the city Paris.",
    'Use ```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n``` next time.',
    '{"name": "get_news", "arguments": {"topic": "Paris"}}',
    '{"name": "get_weather", "arguments": "Paris"}',
    '```json\n{"name": "get_weather", "arguments": {"city": "Par',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '{"name": "get_weather", "arguments": {"city": "Paris"}} {"answer": 1}',
])
@pytest.mark.parametrize("setting", ["reask", "parse"])
async def test_what_is_not_only_calls_of_offered_tools_is_an_answer(answer: str,
                                                                   setting: str) -> None:
    model = ScriptedModel([text(answer)])
    result = await Runner.run(_agent(model, setting), "weather?")
    assert result.final_output == answer
    assert len(model.requests) == 1 and ran == []


async def test_a_bad_argument_in_a_parsed_call_is_a_tool_error_the_model_corrects() -> None:
    model = ScriptedModel([text('{"name": "get_weather", "arguments": {"town": "Paris"}}'),
                           tool_call("get_weather", _ARGS), text("Sunny.")])
    result = await Runner.run(_agent(model, "parse"), "weather?")
    first, second = [e for e in result.new_events if isinstance(e, ToolResultEvent)]
    assert first.is_error and "city" in first.message.content
    assert not second.is_error and ran == ["Paris"]
    assert result.final_output == "Sunny."


async def test_a_written_transfer_hands_off_when_parsed() -> None:
    model = ScriptedModel([
        text('{{"name": "transfer_to_billing", "arguments": {"reason": "a refund"}}}'),
        text("Refunded.")])
    settings = ModelSettings(text_tool_calls="parse")
    billing = Agent("billing", instructions="Bills.", model=model)
    triage = Agent("triage", instructions="Route.", model=model, sub_agents=[billing],
                   model_settings=settings)
    result = await Runner.run(triage, "refund please")
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [("triage", "billing")]
    assert result.last_agent.name == "billing"
    assert _assistant(result.new_events)[0].finish_reason == "transfer"


async def test_the_models_own_settings_say_when_the_agents_do_not() -> None:
    model = ScriptedModel([text(FORMS["hermes"]), text("Sunny.")])
    model.settings = ModelSettings(text_tool_calls="parse")
    result = await Runner.run(_agent(model, None), "weather?")
    assert ran == ["Paris"] and result.final_output == "Sunny."


class Call(BaseModel):
    name: str
    arguments: dict[str, str]


@pytest.mark.parametrize("setting", ["reask", "parse"])
async def test_a_typed_agents_valid_json_output_is_never_a_call(setting: str) -> None:
    model = ScriptedModel([final_output({"name": "get_weather", "arguments": _ARGS})],
                          output_mode="native")
    agent = _agent(model, setting, output_type=Call)
    result = await Runner.run(agent, "which call?")
    assert result.final_output == Call(name="get_weather", arguments=_ARGS)
    assert ran == [] and len(model.requests) == 1


async def test_a_typed_agents_written_output_call_is_parsed_in_tool_mode() -> None:
    class Weather(BaseModel):
        summary: str

    call = json.dumps({"name": OUTPUT_TOOL, "arguments": {"summary": "sunny"}})
    written = f"```json\n{call}\n```"
    model = ScriptedModel([text(written)], output_mode="tool")
    result = await Runner.run(_agent(model, "parse", output_type=Weather), "weather?")
    assert result.final_output == Weather(summary="sunny")


async def test_the_trace_marks_parsed_and_reasked_turns(traces: InMemoryTraceProcessor) -> None:
    model = ScriptedModel([text(FORMS["fenced"]), text("Sunny.")])
    parsed = await Runner.run(_agent(model, "parse"), "weather?")
    model = ScriptedModel([text(FORMS["doubled"]), text("Sunny.")])
    reasked = await Runner.run(_agent(model, "reask"), "weather?")
    for result, mark in ((parsed, "parsed"), (reasked, "reasked")):
        spans = [s for s in traces.trace(result.trace_id) if s.kind == "model"]
        assert spans[0].attributes["text_tool_calls"] == mark
        assert spans[0].attributes["text_tool_names"] == ["get_weather"]
        assert "text_tool_calls" not in spans[1].attributes


async def test_streamed_events_show_the_parsed_call() -> None:
    model = ScriptedModel([text(FORMS["fenced"]), text("Sunny.")])
    seen = [e async for e in Runner.stream(_agent(model, "parse"), "weather?")
            if isinstance(e, MessageEvent) and e.parsed_from_text]
    assert [e.message.tool_calls[0].name for e in seen] == ["get_weather"]


async def _streamed(agent: Agent[Any]) -> tuple[list[str], Any]:
    stream = Runner.stream(agent, "weather in Paris?")
    deltas = [e.delta async for e in stream if isinstance(e, TextDeltaEvent)]
    return deltas, stream.result


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("setting", ["parse", "reask"])
async def test_a_streamed_written_call_is_never_shown_as_text(form: str, setting: str) -> None:
    # The scripted model streams word by word, as a real one streams tokens.
    second = text("It is sunny in Paris.") if setting == "parse" else \
        tool_call("get_weather", _ARGS)
    model = ScriptedModel([text(FORMS[form]), second, text("It is sunny in Paris.")])
    deltas, result = await _streamed(_agent(model, setting))
    assert ran == ["Paris"]
    assert "".join(deltas) == result.final_output == "It is sunny in Paris."
    assert len(deltas) > 1  # the answer itself still streams in pieces


@pytest.mark.parametrize("form", FORMS)
async def test_with_off_a_streamed_written_call_is_shown_as_the_answer(form: str) -> None:
    model = ScriptedModel([text(FORMS[form])])
    deltas, result = await _streamed(_agent(model, "off"))
    assert "".join(deltas) == result.final_output == FORMS[form]


@pytest.mark.parametrize("answer", [
    "```python\nprint('sunny in Paris')\n```",  # a fence, but code: it streams once that is clear
    '{"verdict": "sunny all afternoon in Paris"}',  # JSON, but no call's key
    "<b>Sunny</b> all day long in Paris.",
])
async def test_an_answer_that_only_opens_like_a_call_streams(answer: str) -> None:
    model = ScriptedModel([text(answer)])
    deltas, result = await _streamed(_agent(model, "parse"))
    assert "".join(deltas) == result.final_output == answer
    assert len(deltas) > 1


async def test_json_that_is_no_call_of_an_offered_tool_is_shown_whole_at_its_end() -> None:
    answer = '{"name": "Paris", "arguments": {"sky": "clear", "wind": "light"}}'
    model = ScriptedModel([text(answer)])
    deltas, result = await _streamed(_agent(model, "reask"))
    assert deltas == [answer] and result.final_output == answer


def test_a_setting_that_is_no_choice_is_refused() -> None:
    with pytest.raises(UserError, match="'reask', 'parse' or 'off'"):
        ModelSettings(text_tool_calls="parsed")  # type: ignore[arg-type]
