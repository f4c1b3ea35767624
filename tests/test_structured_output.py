"""Structured output: ``Agent(output_type=T)`` in every mode, retries, streaming, handoffs,
delegation, YAML and the provider adapters (recorded payloads, no network)."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any, Literal

import anthropic
import openai
import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from provider_helpers import FakeServer, replay
from relayrace import (
    Agent,
    OutputEvent,
    OutputValidationError,
    RelayraceError,
    Runner,
    TextDeltaEvent,
    UserError,
    json_schema_type,
    tool,
)
from relayrace.agents.guardrails import PIIGuardrail
from relayrace.config import load_team
from relayrace.core.events import (
    MessageEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolResultEvent,
    dump_events,
    load_events,
)
from relayrace.core.exceptions import ConfigError, ModelBehaviorError
from relayrace.core.messages import Message, ToolCall
from relayrace.models.anthropic import AnthropicModel
from relayrace.models.openai import OpenAIChatModel
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import ScriptedModel, final_output, text, tool_call

PAYLOADS = Path(__file__).parent / "payloads"
MODES: list[Literal["native", "tool", "prompted"]] = ["native", "tool", "prompted"]


class Plan(BaseModel):
    title: str
    steps: list[str]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    name: str
    year: int


class Refusal(BaseModel):
    kind: Literal["refusal"]
    why: str


class City(BaseModel):
    city: str
    population: int
    nickname: str = ""
    landmarks: list[str]


@tool
async def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: three facts"


def planner(model: Any, **options: Any) -> Agent[Any, Plan]:
    return Agent("planner", instructions="Plan the task.", model=model, output_type=Plan,
                 **options)


# -- every type, every mode -------------------------------------------------------------------


CASES: dict[str, tuple[Any, Any]] = {
    "model": (Plan, Plan(title="trip", steps=["pack", "go"])),
    "dataclass": (Point, Point(1, 2)),
    "typeddict": (Movie, {"name": "Heat", "year": 1995}),
    "list": (list[int], [3, 1, 2]),
    "union": (Plan | Refusal, Refusal(kind="refusal", why="unsafe")),
    "int": (int, 42),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(CASES))
async def test_every_output_type_in_every_mode(case: str, mode: Any) -> None:
    output_type, value = CASES[case]
    model = ScriptedModel([final_output(value)])
    agent: Agent[Any, Any] = Agent("a", instructions="Answer.", model=model,
                                   output_type=output_type, output_mode=mode)
    result = await Runner.run(agent, "go")
    assert result.final_output == value
    assert type(result.final_output) is type(value)
    asked = model.requests[0].output
    assert asked is not None and asked.mode == mode
    assert asked.schema["type"] == "object"  # a non-object type travels wrapped
    assert (asked.wrapper == "response") == (case in ("list", "union", "int"))
    assert ("final_result" in model.requests[0].tools) == (mode == "tool")
    assert ("JSON schema" in model.requests[0].instructions) == (mode == "prompted")


async def test_default_mode_is_the_models_and_the_final_answer_is_json() -> None:
    model = ScriptedModel([final_output(Plan(title="t", steps=["a"]))])
    result = await Runner.run(planner(model), "go")
    assert model.requests[0].output is not None
    assert model.requests[0].output.mode == "tool"  # a test model plays a tool-calling one
    assert result.final_output == Plan(title="t", steps=["a"])
    finished = result.new_events[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert json.loads(finished.output) == {"title": "t", "steps": ["a"]}
    native = ScriptedModel([final_output(Plan(title="t", steps=[]))], output_mode="native")
    await Runner.run(planner(native), "go")
    assert native.requests[0].output is not None
    assert native.requests[0].output.mode == "native"


async def test_a_plain_agent_asks_for_no_output_and_str_output_is_text() -> None:
    model = ScriptedModel(["hello", "hi"])
    result = await Runner.run(Agent("a", instructions="x", model=model), "go")
    assert result.final_output == "hello" and model.requests[0].output is None
    agent = Agent("b", instructions="x", model=model, output_type=str)
    assert (await Runner.run(agent, "go")).final_output == "hi"


# -- invalid output: told, retried, then a typed error ----------------------------------------


async def test_wrong_fields_in_the_output_tool_are_told_and_retried() -> None:
    model = ScriptedModel([final_output({"title": "t"}),
                           final_output({"title": "t", "steps": ["a"]})])
    result = await Runner.run(planner(model), "go")
    assert result.final_output == Plan(title="t", steps=["a"])
    told = model.requests[1].messages[-1]
    assert told.role == "tool" and told.name == "final_result"
    assert "steps: Field required" in told.content
    errors = [e for e in result.tool_results if e.is_error]
    assert len(errors) == 1


async def test_garbage_json_in_native_mode_is_told_as_a_note_and_retried() -> None:
    model = ScriptedModel(['{"title": "t", "steps": [', final_output(Plan(title="t", steps=[]))])
    result = await Runner.run(planner(model, output_mode="native"), "go")
    assert result.final_output == Plan(title="t", steps=[])
    note = model.requests[1].messages[-1]
    assert note.role == "user" and "not valid" in note.content and "JSON" in note.content


async def test_retries_exhausted_raise_with_the_raw_output_and_keep_the_session() -> None:
    model = ScriptedModel([final_output('{"title": 1}', raw=True)] * 3)
    session = MemorySession()
    with pytest.raises(OutputValidationError) as info:
        await Runner.run(planner(model), "go", session=session)
    error = info.value
    assert isinstance(error, ModelBehaviorError) and isinstance(error, RelayraceError)
    assert error.raw_output == '{"title": 1}' and error.agent == "planner"
    assert "3 attempt(s)" in str(error) and "output_retries" in str(error)
    assert model.remaining == 0  # output_retries=2: three tries in all
    events = session.events
    finished = events[-1]
    assert isinstance(finished, RunFinishedEvent) and finished.status == "failed"
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(results) == 3 and all(r.is_error for r in results)  # every call answered


async def test_output_retries_zero_fails_on_the_first_bad_output() -> None:
    model = ScriptedModel(["not json"])
    with pytest.raises(OutputValidationError) as info:
        await Runner.run(planner(model, output_mode="native", output_retries=0), "go")
    assert info.value.raw_output == "not json"


async def test_a_model_that_never_calls_the_output_tool() -> None:
    model = ScriptedModel(["Here is the plan: pack, go.", "Really, pack and go."])
    with pytest.raises(OutputValidationError) as info:
        await Runner.run(planner(model, output_retries=1), "go")
    assert info.value.raw_output == "Really, pack and go."
    told = model.requests[1].messages[-1]
    assert "calling the final_result tool" in told.content


async def test_prompted_mode_reads_json_from_prose_and_fences() -> None:
    model = ScriptedModel(['Sure! ```json\n{"title": "t", "steps": ["a"]}\n```',
                           'Here you go: {"title": "u", "steps": []} Enjoy.'])
    agent = planner(model, output_mode="prompted")
    assert (await Runner.run(agent, "go")).final_output == Plan(title="t", steps=["a"])
    assert (await Runner.run(agent, "go")).final_output == Plan(title="u", steps=[])
    assert '"steps"' in model.requests[0].instructions


async def test_other_calls_beside_a_valid_output_are_not_run() -> None:
    model = ScriptedModel([[tool_call("lookup", {"topic": "x"}),
                            final_output(Plan(title="t", steps=[]))]])
    result = await Runner.run(planner(model, tools=[lookup]), "go")
    assert result.final_output == Plan(title="t", steps=[])
    by_tool = {e.tool_name: e for e in result.tool_results}
    assert by_tool["lookup"].is_error and "Not executed" in by_tool["lookup"].message.content
    assert not by_tool["final_result"].is_error


async def test_other_calls_beside_an_invalid_output_run_as_usual() -> None:
    model = ScriptedModel([[tool_call("lookup", {"topic": "x"}), final_output({"title": 2})],
                           final_output(Plan(title="t", steps=["read"]))])
    result = await Runner.run(planner(model, tools=[lookup]), "go")
    assert result.final_output.steps == ["read"]
    seen = model.requests[1].messages
    assert {m.content for m in seen if m.role == "tool"} >= {"x: three facts"}
    assert any(m.role == "tool" and "Invalid final output" in m.content for m in seen)


# -- streaming --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_stream_yields_partial_objects_then_the_final_one(mode: str) -> None:
    # Native: the JSON arrives as text; tool: as the output tool's streamed arguments.
    value = Plan(title="a long trip", steps=["pack the bags", "go"])
    model = ScriptedModel([final_output(value)], output_mode=mode)  # type: ignore[arg-type]
    stream = Runner.stream(planner(model), "go")
    outputs = [e for e in [e async for e in stream] if isinstance(e, OutputEvent)]
    partials = [e.output for e in outputs if e.partial]
    assert len(partials) >= 3  # the object grows as words arrive
    assert all(isinstance(p, Plan) for p in partials)
    assert partials[0] != value and len(partials) == len({p.model_dump_json() for p in partials})
    assert not outputs[-1].partial and outputs[-1].output == value
    assert stream.result is not None and stream.result.final_output == value


async def test_a_tool_mode_stream_shows_no_arguments_as_text() -> None:
    model = ScriptedModel([final_output(Plan(title="t", steps=[]))])
    stream = Runner.stream(planner(model), "go")
    events = [e async for e in stream]
    assert not [e for e in events if isinstance(e, TextDeltaEvent)]
    outputs = [e for e in events if isinstance(e, OutputEvent)]
    assert outputs[-1].output == Plan(title="t", steps=[]) and not outputs[-1].partial


# -- handoffs and delegation ------------------------------------------------------------------


async def test_the_final_answer_is_validated_against_the_agent_that_gives_it() -> None:
    model = ScriptedModel(by_agent={
        "router": [tool_call("transfer_to_planner", {"reason": "plans"})],
        "planner": [final_output({"title": "t"}), final_output(Plan(title="t", steps=[]))],
    })
    plans = planner(model)
    router = Agent("router", instructions="Route.", model=model, sub_agents=[plans],
                   output_type=Plan)
    result = await Runner.run(router, "go")
    assert result.last_agent is plans and result.final_output == Plan(title="t", steps=[])
    assert model.by_agent and model.remaining == 0


def test_a_handoff_target_with_another_output_type_is_refused_when_built() -> None:
    other = Agent("writer", instructions="Write.", model="openai:gpt-4o-mini")
    with pytest.raises(UserError) as info:
        Agent("boss", instructions="x", output_type=Plan, sub_agents=[other])
    message = str(info.value)
    assert "'writer'" in message and "text" in message and "same output_type" in message
    with pytest.raises(UserError, match="'boss' answers with text, but 'planner'"):
        Agent("boss", instructions="x", sub_agents=[planner(None)])
    same = planner(None)
    Agent("boss2", instructions="x", output_type=Plan, sub_agents=[same])  # same type: fine
    worker = Agent("worker", instructions="x", mode="task")
    Agent("boss3", instructions="x", output_type=Plan, sub_agents=[worker])  # it returns


async def test_a_typed_child_returns_its_value_to_the_parent(tmp_path: Path) -> None:
    model = ScriptedModel(by_agent={
        "boss": [tool_call("planner", {"query": "plan a trip"}), text("done")],
        "planner": [final_output(Plan(title="trip", steps=["go"]))],
    })
    boss = Agent("boss", instructions="Delegate.", model=model, tools=[planner(model).as_tool()])
    session = SQLiteSession("s", tmp_path / "db.sqlite")
    result = await Runner.run(boss, "go", session=session)
    (delegation,) = result.delegations
    assert delegation.output == Plan(title="trip", steps=["go"]) and delegation.report is None
    seen = model.requests[-1].messages[-1]
    assert seen.role == "tool" and json.loads(seen.content) == {"title": "trip", "steps": ["go"]}
    child_instructions = next(r.instructions for r in model.requests if r.agent == "planner")
    assert "<handoff>" not in child_instructions  # no text report is asked of it
    stored = [e for e in await session.get_events() if e.kind == "delegation"]
    assert stored[0].output == {"title": "trip", "steps": ["go"]}  # JSON data once stored


# -- bad declarations -------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "expected"), [
    ({"output_type": object()}, "is not a type pydantic can validate"),
    ({"output_type": Plan, "output_mode": "json"}, "use 'native', 'tool' or 'prompted'"),
    ({"output_type": Plan, "output_retries": -1}, "output_retries must be >= 0"),
])
def test_bad_output_options_are_user_errors(options: dict[str, Any], expected: str) -> None:
    with pytest.raises(UserError, match=expected):
        Agent("a", instructions="x", **options)


def test_a_tool_named_final_result_clashes_with_the_output_tool() -> None:
    @tool
    async def final_result(x: str) -> str:
        """Clash."""
        return x

    with pytest.raises(UserError, match="rename its own tool"):
        Agent("a", instructions="x", output_type=Plan, tools=[final_result])
    assert Agent("b", instructions="x", tools=[final_result]).output is None


def test_json_schema_type_validates_with_jsonschema() -> None:
    with pytest.raises(UserError, match="Invalid output schema"):
        json_schema_type({"type": "nonsense"})


async def test_an_agent_from_a_json_schema_checks_and_returns_json_data() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}},
              "required": ["n"]}
    model = ScriptedModel([final_output({"n": 0}), final_output({"n": 3})])
    agent: Agent[Any, Any] = Agent("a", instructions="x", model=model,
                                   output_type=json_schema_type(schema))
    result = await Runner.run(agent, "go")
    assert result.final_output == {"n": 3}
    assert "0 is less than the minimum of 1" in model.requests[1].messages[-1].content
    assert model.requests[0].output is not None
    assert model.requests[0].output.schema["properties"] == schema["properties"]


# -- YAML -------------------------------------------------------------------------------------


def yaml_agent(body: str) -> str:
    return ("apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n  name: a\nspec:\n"
            "  prompts:\n    system: Plan.\n" + textwrap.indent(textwrap.dedent(body), "  "))


async def test_yaml_output_schema_as_a_json_schema(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml_agent("""\
        output_mode: native
        output_retries: 0
        output_schema:
          type: object
          properties: {city: {type: string}}
          required: [city]
        """))
    model = ScriptedModel([final_output({"city": "Paris"})])
    agent = load_team(tmp_path, model=model)["a"]
    assert (await Runner.run(agent, "go")).final_output == {"city": "Paris"}
    assert model.requests[0].output is not None and model.requests[0].output.mode == "native"


async def test_yaml_output_schema_as_an_import_path(tmp_path: Path) -> None:
    (tmp_path / "shapes.py").write_text(
        "from pydantic import BaseModel\n\nclass Shape(BaseModel):\n    sides: int\n")
    (tmp_path / "a.yaml").write_text(yaml_agent("output_schema: 'shapes:Shape'\n"))
    model = ScriptedModel([final_output({"sides": 3})])
    agent = load_team(tmp_path, model=model)["a"]
    result = await Runner.run(agent, "go")
    assert type(result.final_output).__name__ == "Shape" and result.final_output.sides == 3


@pytest.mark.parametrize(("value", "expected"), [
    ("'no_colon'", "neither a JSON Schema nor an import path"),
    ("{type: bogus}", "Invalid output schema"),
])
def test_yaml_bad_output_schema_is_a_located_config_error(
    tmp_path: Path, value: str, expected: str
) -> None:
    (tmp_path / "a.yaml").write_text(yaml_agent(f"output_schema: {value}\n"))
    with pytest.raises(ConfigError, match=expected) as info:
        load_team(tmp_path)
    assert "spec.output_schema" in str(info.value)


# -- provider adapters (recorded payloads) ----------------------------------------------------


def openai_model(server: FakeServer) -> OpenAIChatModel:
    client = openai.AsyncOpenAI(api_key="k", base_url="https://api.test/v1", max_retries=0,
                                http_client=server.http_client())
    return OpenAIChatModel("gpt-4o-mini", client=client)


def anthropic_model(server: FakeServer) -> AnthropicModel:
    client = anthropic.AsyncAnthropic(api_key="k", base_url="https://api.test", max_retries=0,
                                      http_client=server.http_client())
    return AnthropicModel("claude-sonnet-4-6", client=client)


def city_agent(model: Any, **options: Any) -> Agent[Any, City]:
    return Agent("geo", instructions="Describe the city.", model=model, output_type=City,
                 **options)


async def test_openai_native_sends_a_strict_response_format() -> None:
    server = FakeServer(replay(PAYLOADS / "openai" / "structured_native.json"))
    result = await Runner.run(city_agent(openai_model(server)), "Paris?")
    body = server.body()
    assert "tools" not in body and "tool_choice" not in body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "City"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == ["city", "landmarks", "nickname", "population"]
    # The null strict mode made the model send for an optional field is dropped: its default.
    assert result.final_output == City(city="Paris", population=2102650,
                                       landmarks=["Eiffel Tower", "Louvre"])


async def test_openai_tool_mode_requires_a_tool_call() -> None:
    server = FakeServer(replay(PAYLOADS / "openai" / "structured_tool_call.json"))
    result = await Runner.run(city_agent(openai_model(server), output_mode="tool"), "Paris?")
    body = server.body()
    assert body["tool_choice"] == "required" and "response_format" not in body
    (offered,) = body["tools"]
    assert offered["function"]["name"] == "final_result"
    assert offered["function"]["parameters"]["required"] == ["city", "population", "landmarks"]
    assert result.final_output.landmarks == ["Eiffel Tower"]


async def test_openai_native_stream_yields_partial_cities() -> None:
    server = FakeServer(replay(PAYLOADS / "openai" / "stream_structured_native.sse"))
    stream = Runner.stream(city_agent(openai_model(server)), "Paris?")
    outputs = [e for e in [e async for e in stream] if isinstance(e, OutputEvent)]
    partials = [e.output for e in outputs if e.partial]
    # Each new value once, as the JSON grows (a string being written shows as far as it got);
    # the nickname's null (strict mode's, for an optional field) never stops the partials.
    assert [p.landmarks for p in partials] == [
        [""], ["Eiffel"], ["Eiffel Tower"], ["Eiffel Tower", ""], ["Eiffel Tower", "Louvre"]]
    assert all(p.nickname == "" for p in partials)
    assert outputs[-1].output == City(city="Paris", population=2102650,
                                      landmarks=["Eiffel Tower", "Louvre"])


async def test_anthropic_takes_structured_output_through_a_forced_tool() -> None:
    server = FakeServer(replay(PAYLOADS / "anthropic" / "structured_tool_use.json"))
    result = await Runner.run(city_agent(anthropic_model(server)), "Paris?")
    body = server.body()
    assert body["tool_choice"] == {"type": "any"}
    (offered,) = body["tools"]
    assert offered["name"] == "final_result" and offered["input_schema"]["type"] == "object"
    assert result.final_output == City(city="Paris", population=2102650,
                                       landmarks=["Eiffel Tower", "Louvre"])


async def test_openai_in_tool_mode_streams_partial_objects_from_the_tool_arguments() -> None:
    server = FakeServer(replay(PAYLOADS / "openai" / "stream_structured_tool.sse"))
    stream = Runner.stream(city_agent(openai_model(server), output_mode="tool"), "Paris?")
    events = [e async for e in stream]
    partials = [e.output for e in events if isinstance(e, OutputEvent) and e.partial]
    assert len(partials) >= 3 and partials[-1].landmarks == ["Eiffel Tower", "Louvre"]
    assert server.body()["tool_choice"] == "required"
    assert not [e for e in events if isinstance(e, TextDeltaEvent)]
    assert stream.result is not None and stream.result.final_output.population == 2102650


async def test_anthropic_streams_partial_objects_from_the_output_tools_arguments() -> None:
    server = FakeServer(replay(PAYLOADS / "anthropic" / "stream_structured_tool.sse"))
    stream = Runner.stream(city_agent(anthropic_model(server)), "Paris?")
    events = [e async for e in stream]
    outputs = [e for e in events if isinstance(e, OutputEvent)]
    partials = [e.output for e in outputs if e.partial]
    assert len(partials) >= 3 and partials[0] != partials[-1]  # it grew as the JSON came
    assert [p.landmarks for p in partials][-1] == ["Eiffel Tower", "Louvre"]
    assert not [e for e in events if isinstance(e, TextDeltaEvent)]  # never shown as text
    assert outputs[-1].output == City(city="Paris", population=2102650,
                                      landmarks=["Eiffel Tower", "Louvre"])
    assert not outputs[-1].partial


async def test_anthropic_refuses_native_mode_with_a_user_error() -> None:
    server = FakeServer()
    with pytest.raises(UserError, match="output_mode='tool'"):
        await Runner.run(city_agent(anthropic_model(server), output_mode="native"), "Paris?")
    assert server.requests == []


async def test_output_events_round_trip_through_json_lines() -> None:
    event = OutputEvent(agent="a", output={"x": 1}, partial=False)
    (back,) = load_events(dump_events([event]))
    assert isinstance(back, OutputEvent) and back.output == {"x": 1}


@pytest.mark.parametrize("mode", MODES)
async def test_output_guardrails_see_the_structured_output(mode: Any) -> None:
    model = ScriptedModel([final_output(Plan(title="mail ada@example.com", steps=[]))])
    agent = planner(model, output_mode=mode, output_guardrails=[PIIGuardrail()])
    result = await Runner.run(agent, "go")
    assert result.final_output.title == "mail [EMAIL]"


async def test_a_guardrail_blocking_a_typed_answer_ends_with_a_typed_error() -> None:
    model = ScriptedModel([final_output(Plan(title="mail ada@example.com", steps=[]))])
    agent = planner(model, output_guardrails=[PIIGuardrail(action="block")])
    session = MemorySession()
    with pytest.raises(OutputValidationError, match=r"ended \(guardrail\)"):
        await Runner.run(agent, "go", session=session)
    assert [e.kind for e in session.events].count("guardrail") == 1
    assert isinstance(session.events[-1], RunFinishedEvent)



@pytest.mark.parametrize("arguments", ['{"title": "t", "steps": ["a"]}', '{"title": 1}'])
async def test_a_final_output_logged_before_a_crash_is_checked_on_resume(
    tmp_path: Path, arguments: str
) -> None:
    session = SQLiteSession("s", tmp_path / "db.sqlite")
    call = ToolCall("call_1", "final_result", arguments)
    await session.append([  # what a process killed right after the model's answer leaves
        RunStartedEvent(agent="planner", path="planner"),
        MessageEvent(agent="planner", path="planner", message=Message.user("go")),
        MessageEvent(agent="planner", path="planner",
                     message=Message("assistant", "", (call,), name="planner")),
    ])
    valid = "steps" in arguments
    model = ScriptedModel([] if valid else [final_output(Plan(title="u", steps=[]))])
    result = await Runner.run(planner(model), None, session=session)
    assert result.final_output == (Plan(title="t", steps=["a"]) if valid
                                   else Plan(title="u", steps=[]))
    first = next(e for e in result.new_events if isinstance(e, ToolResultEvent))
    assert first.tool_name == "final_result" and first.is_error is not valid


def test_clone_keeps_the_output_options() -> None:
    copy = planner(None, output_mode="prompted", output_retries=5).clone(name="p2")
    assert copy.output is not None and copy.output.type is Plan
    assert (copy.output.mode, copy.output.retries) == ("prompted", 5)
