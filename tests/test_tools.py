"""Tools: schemas from type hints and docstrings, validation, RunContext, concurrency, errors."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from conftest import assert_valid_protocol, of_type, session_messages
from relayrace import Agent, RunContext, Runner, ToolResultEvent, tool
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


def _run_with(tools: list[Any], turns: list[Any], **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(turns)
    return Agent("worker", instructions="work", model=model, tools=tools, **kw), model


def _results(result: Any) -> list[ToolResultEvent]:
    return of_type(result.new_events, ToolResultEvent)


# --- schemas --------------------------------------------------------------------------------


def test_schema_from_type_hints_and_google_docstring() -> None:
    @tool
    def get_weather(city: str, days: int = 1, units: list[str] | None = None) -> str:
        """Get the weather forecast for a city.

        Args:
            city: The city to look up.
            days: How many days ahead,
                counting today.
            units: Optional unit names.
        """
        return city

    assert get_weather.name == "get_weather"
    assert "weather forecast" in get_weather.description
    assert "Args" not in get_weather.description
    schema = get_weather.parameters
    assert schema["type"] == "object"
    props = schema["properties"]
    assert set(props) == {"city", "days", "units"}
    assert props["city"]["type"] == "string"
    assert props["days"]["type"] == "integer"
    assert props["city"]["description"] == "The city to look up."
    assert "How many days ahead" in props["days"]["description"]
    assert "counting today" in props["days"]["description"]
    assert props["units"]["description"] == "Optional unit names."
    assert schema["required"] == ["city"]
    json.dumps(schema)  # a plain JSON document


def test_run_context_parameter_is_hidden_from_the_schema() -> None:
    @tool
    async def whoami(ctx: RunContext, greeting: str) -> str:
        """Say who is asking."""
        return greeting

    assert set(whoami.parameters["properties"]) == {"greeting"}
    assert "ctx" not in json.dumps(whoami.parameters)


def test_tool_options_name_description() -> None:
    @tool(name="lookup", description="Find a record.")
    def find(key: str) -> str:
        return key

    assert find.name == "lookup"
    assert find.description == "Find a record."
    assert find("k") == "k"  # still callable as a plain function


async def test_offered_tool_definition_matches_schema() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: First addend.
            b: Second addend.
        """
        return a + b

    seen: list[Any] = []

    def fn(req: Any) -> Any:
        seen.append(list(req.tools))
        return text("ok")

    agent = Agent("calc", instructions="x", model=FunctionModel(fn), tools=[add])
    await Runner.run(agent, "hi")
    (definition,) = seen[0]
    assert definition.name == "add"
    assert definition.parameters["properties"]["a"]["description"] == "First addend."
    assert definition.description.startswith("Add two numbers.")


class Address(BaseModel):
    street: str
    zip_code: str = Field(pattern=r"^[0-9]{5}$")


class Receipt(BaseModel):
    total: int
    currency: str


@tool
def ship(address: Address, speed: Literal["slow", "fast"] = "slow", note: str | None = None
         ) -> Receipt:
    """Ship a parcel.

    Args:
        address (Address): Where to.
        speed (str): How fast.
        note: Optional note.
    """
    return Receipt(total=5 if speed == "slow" else 9, currency="EUR")


def test_schema_for_models_literals_and_typed_docstrings() -> None:
    schema = ship.parameters
    props = schema["properties"]
    assert schema["required"] == ["address"]
    assert props["speed"]["enum"] == ["slow", "fast"]
    assert props["address"]["description"] == "Where to."
    assert props["speed"]["description"] == "How fast."
    assert props["note"]["description"] == "Optional note."
    text_schema = json.dumps(schema)
    assert "zip_code" in text_schema and "street" in text_schema


async def test_nested_model_arguments_are_validated_and_models_returned_as_json() -> None:
    agent, model = _run_with([ship], [
        tool_call("ship", {"address": {"street": "Main 1", "zip_code": "abc"}}),
        tool_call("ship", {"address": {"street": "Main 1", "zip_code": "12345"},
                           "speed": "warp"}),
        tool_call("ship", {"address": {"street": "Main 1", "zip_code": "12345"},
                           "speed": "fast"}),
        text("shipped"),
    ])
    result = await Runner.run(agent, "go")
    bad_zip, bad_speed, ok = _results(result)
    assert bad_zip.is_error and "zip_code" in bad_zip.message.content
    assert bad_speed.is_error and "speed" in bad_speed.message.content
    assert not ok.is_error
    assert json.loads(ok.message.content) == {"total": 9, "currency": "EUR"}


# --- calls ----------------------------------------------------------------------------------


async def test_sync_and_async_tools_return_results_to_the_model() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    async def shout(word: str) -> dict[str, str]:
        """Shout."""
        await asyncio.sleep(0)
        return {"loud": word.upper()}

    agent, model = _run_with(
        [add, shout],
        [[tool_call("add", {"a": 2, "b": 3}), tool_call("shout", {"word": "hey"})], text("ok")],
    )
    result = await Runner.run(agent, "go")
    assert result.final_output == "ok"
    tool_msgs = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [m.content for m in tool_msgs][0] == "5"
    assert json.loads(tool_msgs[1].content) == {"loud": "HEY"}
    assert all(not e.is_error for e in _results(result))
    model.assert_complete()


async def test_run_context_parameter_receives_the_run_context() -> None:
    got: list[Any] = []

    @tool
    def sync_ctx(ctx: RunContext, n: int) -> str:
        """Sync."""
        got.append(("sync", ctx.context, ctx.agent.name, n))
        return "s"

    @tool
    async def async_ctx(n: int, ctx: RunContext[dict]) -> str:
        """Async."""
        got.append(("async", ctx.context, ctx.agent.name, n))
        return "a"

    agent, _ = _run_with(
        [sync_ctx, async_ctx],
        [[tool_call("sync_ctx", {"n": 1}), tool_call("async_ctx", {"n": 2})], text("ok")],
    )
    context = {"tenant": "acme"}
    await Runner.run(agent, "go", context=context)
    assert sorted(got) == [("async", context, "worker", 2), ("sync", context, "worker", 1)]


async def test_arguments_are_validated_before_the_call() -> None:
    calls: list[Any] = []

    @tool
    def book(seats: int, name: str) -> str:
        """Book seats."""
        calls.append((seats, name))
        return "booked"

    agent, model = _run_with(
        [book],
        [
            tool_call("book", {"seats": "many", "name": "x"}),
            tool_call("book", {"name": "x"}),
            tool_call("book", {"seats": 1, "name": "x", "extra": True}),
            tool_call("book", {"seats": 2, "name": "ok"}),
            text("done"),
        ],
    )
    result = await Runner.run(agent, "go")
    assert calls == [(2, "ok")]
    res = _results(result)
    assert [e.is_error for e in res] == [True, True, True, False]
    assert "seats" in res[0].message.content
    assert "seats" in res[1].message.content
    assert "extra" in res[2].message.content
    # The model is told what a valid call looks like.
    for e in res[:3]:
        assert '"seats"' in e.message.content and '"name"' in e.message.content
        assert e.traceback is None
    assert result.final_output == "done"
    assert_valid_protocol(await session_messages(result.session))


async def test_malformed_json_arguments_are_reported_to_the_model() -> None:
    calls: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count."""
        calls.append(n)
        return n

    agent, model = _run_with([count], [tool_call("count", '{"n": 1'), text("sorry")])
    result = await Runner.run(agent, "go")
    assert calls == []
    (ev,) = _results(result)
    assert ev.is_error
    assert "JSON" in ev.message.content
    assert "count" in ev.message.content
    # The model's next request contains the explanation.
    assert model.requests[1].messages[-1].content == ev.message.content
    assert result.final_output == "sorry"


async def test_unknown_tool_lists_the_available_ones() -> None:
    @tool
    def real() -> str:
        """Real."""
        return "r"

    agent, model = _run_with([real], [tool_call("imaginary", {}), text("ok")])
    result = await Runner.run(agent, "go")
    (ev,) = _results(result)
    assert ev.is_error
    assert "imaginary" in ev.message.content
    assert "real" in ev.message.content
    assert ev.message.tool_call_id == model.requests[1].messages[-2].tool_calls[0].id


async def test_raising_tool_reports_message_and_keeps_traceback() -> None:
    @tool
    def explode(x: int) -> int:
        """Explode."""
        return _inner_failure(x)

    agent, model = _run_with([explode], [tool_call("explode", {"x": 7}), text("handled")])
    result = await Runner.run(agent, "go")
    assert result.final_output == "handled"
    (ev,) = _results(result)
    assert ev.is_error
    assert "bad value 7" in ev.message.content
    assert "Traceback" not in ev.message.content
    assert ev.traceback is not None
    assert "Traceback" in ev.traceback
    assert "_inner_failure" in ev.traceback
    assert "ValueError" in ev.traceback
    # The traceback is kept in the session log too.
    stored = of_type(await result.session.get_events(), ToolResultEvent)
    assert stored[0].traceback == ev.traceback


def _inner_failure(x: int) -> int:
    raise ValueError(f"bad value {x}")


async def test_async_tool_that_raises() -> None:
    @tool
    async def boom() -> str:
        """Boom."""
        raise RuntimeError("kaput")

    agent, _ = _run_with([boom], [tool_call("boom"), text("ok")])
    result = await Runner.run(agent, "go")
    (ev,) = _results(result)
    assert ev.is_error and "kaput" in ev.message.content and "RuntimeError" in ev.traceback


# --- concurrency ----------------------------------------------------------------------------


async def test_ordinary_async_tools_run_concurrently() -> None:
    a_started, b_started = asyncio.Event(), asyncio.Event()

    @tool
    async def tool_a() -> str:
        """A."""
        a_started.set()
        await asyncio.wait_for(b_started.wait(), 2)  # only possible if B runs meanwhile
        return "a"

    @tool
    async def tool_b() -> str:
        """B."""
        b_started.set()
        await asyncio.wait_for(a_started.wait(), 2)
        return "b"

    agent, _ = _run_with([tool_a, tool_b], [[tool_call("tool_a"), tool_call("tool_b")], text("ok")])
    result = await Runner.run(agent, "go")
    assert [e.message.content for e in _results(result)] == ["a", "b"]
    assert not any(e.is_error for e in _results(result))


async def test_ordinary_sync_tools_run_concurrently_off_the_event_loop() -> None:
    barrier = threading.Barrier(2, timeout=2)

    @tool
    def left() -> str:
        """Left."""
        barrier.wait()
        return "l"

    @tool
    def right() -> str:
        """Right."""
        barrier.wait()
        return "r"

    agent, _ = _run_with([left, right], [[tool_call("left"), tool_call("right")], text("ok")])
    result = await Runner.run(agent, "go")
    assert [e.message.content for e in _results(result)] == ["l", "r"]


def _overlap(x: tuple[float, float], y: tuple[float, float]) -> bool:
    return x[0] < y[1] and y[0] < x[1]


async def test_sequential_tools_never_overlap_and_run_in_emitted_order() -> None:
    spans: dict[str, tuple[float, float]] = {}
    order: list[str] = []

    def make(name: str, *, sequential: bool) -> Any:
        async def fn() -> str:
            start = time.perf_counter()
            order.append(name)
            await asyncio.sleep(0.03)  # a tool's duration: overlaps are tested
            spans[name] = (start, time.perf_counter())
            return name

        fn.__name__ = name
        fn.__doc__ = f"Tool {name}."
        return tool(sequential=sequential)(fn)

    s1, s2, s3 = (make(n, sequential=True) for n in ("s1", "s2", "s3"))
    o1, o2 = make("o1", sequential=False), make("o2", sequential=False)
    assert s1.sequential and not o1.sequential
    turn = [tool_call("s2"), tool_call("o1"), tool_call("s1"), tool_call("o2"), tool_call("s3")]
    agent, _ = _run_with([s1, s2, s3, o1, o2], [turn, text("ok")])
    result = await Runner.run(agent, "go")
    # Results are answered in emission order.
    assert [e.message.content for e in _results(result)] == ["s2", "o1", "s1", "o2", "s3"]
    # Sequential tools ran in the order emitted...
    seq_order = [n for n in order if n.startswith("s")]
    assert seq_order == ["s2", "s1", "s3"]
    # ...and never overlapped any other call.
    for s in ("s1", "s2", "s3"):
        for other in spans:
            if other != s:
                assert not _overlap(spans[s], spans[other]), (s, other, spans)


async def test_ordinary_tools_overlap_each_other_but_not_sequential_ones() -> None:
    spans: dict[str, tuple[float, float]] = {}

    def make(name: str, *, sequential: bool) -> Any:
        async def fn() -> str:
            start = time.perf_counter()
            await asyncio.sleep(0.05)  # a tool's duration: overlaps are tested
            spans[name] = (start, time.perf_counter())
            return name

        fn.__name__ = name
        fn.__doc__ = f"Tool {name}."
        return tool(sequential=sequential)(fn)

    tools = [make("o1", sequential=False), make("o2", sequential=False),
             make("o3", sequential=False), make("s1", sequential=True),
             make("s2", sequential=True)]
    turn = [tool_call("o1"), tool_call("o2"), tool_call("o3"), tool_call("s1"), tool_call("s2")]
    agent, _ = _run_with(tools, [turn, text("ok")])
    await Runner.run(agent, "go")
    assert _overlap(spans["o1"], spans["o2"]) and _overlap(spans["o2"], spans["o3"])
    assert not _overlap(spans["s1"], spans["s2"])
    for o in ("o1", "o2", "o3"):
        assert not _overlap(spans[o], spans["s1"]) and not _overlap(spans[o], spans["s2"])


async def test_tool_results_keep_emission_order_even_when_finishing_out_of_order() -> None:
    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(0.03)  # finishes after its sibling: result order is tested
        return "slow"

    @tool
    async def fast() -> str:
        """Fast."""
        return "fast"

    agent, model = _run_with(
        [slow, fast], [[tool_call("slow", id="c1"), tool_call("fast", id="c2")], text("ok")]
    )
    result = await Runner.run(agent, "go")
    assert [(e.message.tool_call_id, e.message.content) for e in _results(result)] == [
        ("c1", "slow"), ("c2", "fast")]
    assert_valid_protocol(model.requests[1].messages)


def test_duplicate_tool_names_are_rejected() -> None:
    from relayrace import UserError

    @tool
    def same() -> str:
        """A."""
        return "a"

    other = tool(name="same")(lambda: "b")
    with pytest.raises(UserError):
        Agent("a", instructions="x", tools=[same, other])


def test_undecorated_function_is_not_a_tool() -> None:
    from relayrace import UserError

    def plain() -> str:
        return "x"

    with pytest.raises(UserError):
        Agent("a", instructions="x", tools=[plain])  # type: ignore[list-item]


async def test_empty_arguments_mean_no_arguments() -> None:
    calls: list[tuple[int, int]] = []

    @tool
    def page(size: int = 10, start: int = 0) -> str:
        """A page."""
        calls.append((size, start))
        return "ok"

    @tool
    def need(n: int) -> str:
        """Needs n."""
        return "never"

    agent, model = _run_with([page, need], [
        tool_call("page", ""), tool_call("page", "  \n"), tool_call("page", '{"start": 5}'),
        tool_call("need", " "), text("done"),
    ])
    result = await Runner.run(agent, "go")
    assert calls == [(10, 0), (10, 0), (10, 5)]
    res = _results(result)
    assert [e.is_error for e in res] == [False, False, False, True]
    assert res[3].message.content.startswith("Invalid arguments for need: n: Field required.")
