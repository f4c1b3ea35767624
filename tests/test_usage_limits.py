"""Usage limits and usage roll-up across a whole delegation tree."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from conftest import (
    assert_valid_protocol,
    of_type,
    requests_of,
    session_messages,
    wait_until,
)
from relayrace import (
    Agent,
    DelegationEvent,
    RunFinishedEvent,
    Runner,
    ToolResultEvent,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    tool,
)
from relayrace.sessions import MemorySession
from relayrace.teams.meta_tools import DelegationConfig
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


@tool
def ping(n: int) -> str:
    """Ping."""
    return f"pong {n}"


def tree(model: Any, *, child_tools: Sequence[Any] = ()) -> Agent:
    researcher = Agent("researcher", instructions="You research.", model=model,
                       tools=child_tools)
    return Agent("coordinator", instructions="You coordinate.", model=model,
                 tools=[researcher.as_tool(), ping])


def assert_rolls_up(usage: Any) -> None:
    """The total is exactly the sum of the per-agent entries."""
    summed = Usage()
    for entry in usage.per_agent.values():
        summed.add(entry)
    assert usage.total == summed


async def assert_consistent(session: MemorySession) -> None:
    """A run that stopped on a limit leaves a valid log that says it failed."""
    for s in [session, *session.child_sessions]:
        assert_valid_protocol(await session_messages(s))
    finished = of_type(session.events, RunFinishedEvent)
    assert finished and finished[-1].status == "failed"
    assert "UsageLimitExceeded" in finished[-1].output


# --------------------------------------------------------------------------- roll-up


async def test_usage_rolls_up_over_the_tree_with_child_paths() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), tool_call("ping", {"n": 1}),
                        text("final")],
        "researcher": [tool_call("ping", {"n": 2}), text("child answer")],
    })
    result = await Runner.run(tree(model, child_tools=[ping]), "go")
    per = result.usage.per_agent
    assert set(per) == {"coordinator", "coordinator/researcher"}
    assert per["coordinator"].requests == 3
    assert per["coordinator/researcher"].requests == 2
    assert per["coordinator"].tool_calls == 2  # researcher and ping
    assert per["coordinator/researcher"].tool_calls == 1
    assert result.usage.total.requests == len(model.requests) == 5
    assert_rolls_up(result.usage)
    child_tokens = sum(r for r in [per["coordinator/researcher"].input_tokens])
    assert child_tokens > 0
    [event] = result.delegations
    assert event.usage == per["coordinator/researcher"]


async def test_usage_of_a_grandchild_is_rolled_up_too() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("analyst", {"query": "n"}), text("researched")],
        "analyst": [text("analysed")],
    })
    analyst = Agent("analyst", instructions="You analyse.", model=model)
    researcher = Agent("researcher", instructions="You research.", model=model,
                       tools=[analyst.as_tool()])
    coordinator = Agent("coordinator", instructions="x", model=model,
                        tools=[researcher.as_tool()])
    result = await Runner.run(coordinator, "go")
    per = result.usage.per_agent
    assert per["coordinator/researcher/analyst"].requests == 1
    assert per["coordinator/researcher"].requests == 2
    assert result.usage.total.requests == 5
    assert_rolls_up(result.usage)
    # The child's delegation event counts its own child too.
    child_event = next(d for d in result.delegations if d.child_agent == "researcher")
    assert child_event.usage is not None and child_event.usage.requests == 3


async def test_usage_of_a_failed_child_is_still_counted() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("ping", {"n": 1}), RuntimeError("boom")],
    })
    result = await Runner.run(tree(model, child_tools=[ping]), "go")
    assert result.tool_results[0].is_error
    assert result.usage.per_agent["coordinator/researcher"].requests == 2
    assert result.usage.total.requests == 4
    assert_rolls_up(result.usage)


# --------------------------------------------------------------------------- the parent


async def test_parent_hitting_max_requests_raises_with_a_consistent_session() -> None:
    model = FunctionModel(lambda req: tool_call("ping", {"n": 1}))
    session = MemorySession()
    agent = Agent("solo", instructions="x", model=model, tools=[ping])
    with pytest.raises(UsageLimitExceeded) as info:
        await Runner.run(agent, "go", session=session, usage_limits=UsageLimits(max_requests=3))
    assert info.value.limit == "max_requests" and info.value.maximum == 3
    assert len(model.requests) == 3
    await assert_consistent(session)


async def test_parent_hitting_max_tool_calls_raises_and_the_log_matches_what_ran() -> None:
    ran: list[int] = []

    @tool
    def act(n: int) -> str:
        """Do something with a side effect."""
        ran.append(n)
        return f"did {n}"

    model = FunctionModel(lambda req: [tool_call("act", {"n": 1}), tool_call("act", {"n": 2})])
    session = MemorySession()
    agent = Agent("solo", instructions="x", model=model, tools=[act])
    with pytest.raises(UsageLimitExceeded) as info:
        await Runner.run(agent, "go", session=session,
                         usage_limits=UsageLimits(max_tool_calls=3))
    assert info.value.limit == "max_tool_calls"
    # Any call the run left running finishes before the log is checked.
    await wait_until(lambda: asyncio.all_tasks() == {asyncio.current_task()},
                     "the tool calls the run left running to end")
    await assert_consistent(session)
    logged = [e for e in of_type(session.events, ToolResultEvent) if not e.is_error]
    # Every call that really ran has its result in the log; none is marked "Not executed".
    assert len(ran) <= 3
    assert len(logged) == len(ran)


async def test_input_token_budget_counts_the_whole_tree() -> None:
    long_task = "describe " * 200
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": long_task}), text("final")],
        "researcher": [text("ok")],
    })
    session = MemorySession()
    with pytest.raises(UsageLimitExceeded) as info:
        await Runner.run(tree(model), "go", session=session,
                         usage_limits=UsageLimits(max_input_tokens=400))
    assert info.value.limit == "max_input_tokens"
    await assert_consistent(session)


async def test_output_tokens_of_a_child_count_against_the_parent() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [text("x" * 800)],
    })
    session = MemorySession()
    with pytest.raises(UsageLimitExceeded) as info:
        await Runner.run(tree(model), "go", session=session,
                         usage_limits=UsageLimits(max_output_tokens=100))
    assert info.value.limit == "max_output_tokens"
    # The child hit the budget first; its parent was told before the run stopped.
    [event] = of_type(session.events, DelegationEvent)
    assert not event.ok and "max_output_tokens" in (event.error or "")
    await assert_consistent(session)


# --------------------------------------------------------------------------- a child


async def test_child_hitting_max_tool_calls_is_an_error_result_for_the_parent() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("ping", {"n": 1}), tool_call("ping", {"n": 2}),
                       text("never")],
    })
    result = await Runner.run(tree(model, child_tools=[ping]), "go",
                              usage_limits=UsageLimits(max_tool_calls=2))
    [res] = result.tool_results
    assert res.is_error
    assert "max_tool_calls" in res.message.content
    assert result.final_output == "final"
    assert result.usage.total.tool_calls == 2
    assert_rolls_up(result.usage)


async def test_child_hitting_max_requests_is_an_error_result_for_the_parent() -> None:
    # coordinator 1, researcher 1 (ping) + refused; coordinator then needs a 3rd request.
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("ping", {"n": 1}), text("never")],
    })
    session = MemorySession()
    with pytest.raises(UsageLimitExceeded):
        await Runner.run(tree(model, child_tools=[ping]), "go", session=session,
                         usage_limits=UsageLimits(max_requests=2))
    [event] = of_type(session.events, DelegationEvent)
    assert not event.ok and "max_requests" in (event.error or "")
    assert len(model.requests) == 2
    await assert_consistent(session)


async def test_max_agent_calls_refuses_further_children() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "a"}),
                        tool_call("researcher", {"query": "b"}), text("final")],
        "researcher": [text("first")],
    })
    result = await Runner.run(tree(model), "go", usage_limits=UsageLimits(max_agent_calls=1))
    first, second = result.tool_results
    assert not first.is_error
    assert second.is_error and "max_agent_calls" in second.message.content
    assert len(requests_of(model, "researcher")) == 1
    assert result.final_output == "final"


async def test_max_depth_bounds_nesting() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("researcher", {"query": "q"}), text("final")],
        "researcher": [tool_call("analyst", {"query": "n"}), text("researched anyway")],
        "analyst": [text("never")],
    })
    analyst = Agent("analyst", instructions="You analyse.", model=model)
    researcher = Agent("researcher", instructions="x", model=model, tools=[analyst.as_tool()])
    coordinator = Agent("coordinator", instructions="x", model=model,
                        tools=[researcher.as_tool()])
    result = await Runner.run(coordinator, "go", usage_limits=UsageLimits(max_depth=1))
    assert not requests_of(model, "analyst")
    researcher_requests = requests_of(model, "researcher")
    told = [m for m in researcher_requests[-1].messages if m.role == "tool"]
    assert told and "max_depth" in told[0].content
    assert result.tool_results[0].is_error is False
    assert result.final_output == "final"


# --------------------------------------------------------------------------- fan-out


def fan_out_lead(children: int, per_child: int = 1) -> tuple[Agent, list[FunctionModel], Any]:
    models: list[FunctionModel] = []
    specialists = []
    for i in range(children):
        turns = [tool_call("ping", {"n": k}) for k in range(per_child - 1)] + [text(f"c{i}")]

        async def fn(request: Any, queue: list[Any] = turns) -> Any:
            await asyncio.sleep(0.01)  # let siblings interleave
            return queue.pop(0)

        models.append(FunctionModel(fn))
        specialists.append(Agent(f"s{i}", instructions="x", description="d", model=models[-1],
                                 tools=[ping]))
    lead_model = ScriptedModel([
        tool_call("war_room", {"agents": [{"type": f"s{i}", "task": "t"}
                                          for i in range(children)]}),
        text("final"),
    ])
    lead = Agent("lead", instructions="x", model=lead_model, specialists=specialists)
    return lead, models, lead_model


async def test_parallel_fan_out_never_exceeds_max_requests() -> None:
    lead, models, lead_model = fan_out_lead(5, per_child=2)
    session = MemorySession()
    with pytest.raises(UsageLimitExceeded) as info:
        await Runner.run(lead, "go", session=session, usage_limits=UsageLimits(max_requests=6))
    assert info.value.limit == "max_requests"
    total = len(lead_model.requests) + sum(len(m.requests) for m in models)
    assert total == 6
    events = of_type(session.events, DelegationEvent)
    assert len(events) == 5
    assert any(not e.ok and "max_requests" in (e.error or "") for e in events)
    await assert_consistent(session)


async def test_parallel_fan_out_respects_max_agent_calls_exactly() -> None:
    lead, models, _ = fan_out_lead(5)
    result = await Runner.run(lead, "go", usage_limits=UsageLimits(max_agent_calls=2))
    started = [m for m in models if m.requests]
    assert len(started) == 2
    [res] = result.tool_results
    assert res.message.content.count("max_agent_calls") == 3


def token_fan_out(children: int, reply: str,
                  concurrency: int | None = None) -> tuple[Agent, list[int]]:
    """A lead whose war room starts ``children`` children (``concurrency`` at a time, all by
    default), each answering ``reply`` after a pause; the list records how many child
    requests were in flight at each request."""
    in_flight: list[int] = [0]
    seen: list[int] = []

    async def fn(request: Any) -> str:
        in_flight[0] += 1
        seen.append(in_flight[0])
        await asyncio.sleep(0.01)  # a model's latency: how many are in flight is tested
        in_flight[0] -= 1
        return reply

    specialists = [Agent(f"s{i}", instructions="x", description="d", model=FunctionModel(fn))
                   for i in range(children)]
    lead_model = ScriptedModel([
        tool_call("war_room", {"agents": [{"type": f"s{i}", "task": "t"}
                                          for i in range(children)]}),
        text("final"),
    ])
    lead = Agent("lead", instructions="x", model=lead_model, specialists=specialists,
                 delegation=DelegationConfig(max_concurrency=concurrency or children))
    return lead, seen


async def test_parallel_fan_out_stops_at_a_token_budget_where_sequential_calls_would() -> None:
    # Each child answers 30 output tokens. Made one after another, the first answer fits the
    # budget and the second passes it; concurrent children must not all be sent first.
    unlimited, _ = token_fan_out(6, "x" * 120)
    lead_output = (await Runner.run(unlimited, "go")).usage.per_agent["lead"].output_tokens
    lead, seen = token_fan_out(6, "x" * 120)
    session = MemorySession()
    with pytest.raises(UsageLimitExceeded) as info:
        await Runner.run(lead, "go", session=session,
                         usage_limits=UsageLimits(max_output_tokens=lead_output + 45))
    assert info.value.limit == "max_output_tokens"
    assert len(seen) == 2  # not 6: the others waited, then saw the budget used up
    events = of_type(session.events, DelegationEvent)
    assert [e.ok for e in events].count(True) == 1
    assert all("max_output_tokens" in (e.error or "") for e in events if not e.ok)
    await assert_consistent(session)


@pytest.mark.parametrize("budget", [120, 300, 450])
async def test_parallel_fan_out_input_budget_stops_where_sequential_calls_would(
    budget: int,
) -> None:
    # The same war room, one child at a time and all six at once: the same child requests
    # are made and the same limit is reached, at the same figure.
    ends = {}
    for concurrency in (1, 6):
        lead, seen = token_fan_out(6, "ok", concurrency)
        with pytest.raises(UsageLimitExceeded) as info:
            await Runner.run(lead, "go", usage_limits=UsageLimits(max_input_tokens=budget))
        ends[concurrency] = (len(seen), str(info.value))
    assert ends[6] == ends[1]


@pytest.mark.parametrize("limits", [UsageLimits(max_output_tokens=1_000),
                                    UsageLimits(max_input_tokens=10_000)])
async def test_a_token_budget_does_not_serialize_a_fan_out_that_fits(limits: UsageLimits) -> None:
    lead, seen = token_fan_out(5, "x" * 40)
    result = await Runner.run(lead, "go", usage_limits=limits)
    assert result.final_output == "final"
    assert max(seen) == 5  # all five children at once
    assert result.usage.total.output_tokens <= 1_000


async def test_a_call_that_ends_the_run_leaves_no_sibling_running_unlogged() -> None:
    # One call of a parallel batch ends the run (a budget) while its sibling still runs: the
    # sibling finishes, its real result is logged in its place, and nothing runs on after.
    done: list[str] = []

    @tool
    async def over_budget() -> str:
        """Spends what is left."""
        raise UsageLimitExceeded("max_tool_calls", 3, 2)

    @tool
    async def slow() -> str:
        """Takes a moment."""
        await asyncio.sleep(0.02)  # still running when its sibling ends the run
        done.append("slow")
        return "slow done"

    session = MemorySession()
    model = ScriptedModel([[tool_call("over_budget"), tool_call("slow")]])
    agent = Agent("a", instructions="x", model=model, tools=[over_budget, slow])
    with pytest.raises(UsageLimitExceeded):
        await Runner.run(agent, "go", session=session)
    assert done == ["slow"]
    results = {e.tool_name: e.message.content for e in of_type(session.events, ToolResultEvent)}
    assert set(results) == {"over_budget", "slow"} and results["slow"] == "slow done"
    assert results["over_budget"].startswith("Outcome unknown: the run stopped "
                                              "(UsageLimitExceeded)")
    assert_valid_protocol(await session_messages(session))
