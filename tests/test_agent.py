"""Agents: instructions (templates and callables), the agent tree, find_agent."""

from __future__ import annotations

import pytest

from relayrace import Agent, RelayraceError, RunContext, Runner, TransferPolicy, UserError
from relayrace.testing import ScriptedModel, text


async def test_plain_instructions_reach_the_model() -> None:
    model = ScriptedModel([text("hello")])
    agent = Agent("a", instructions="You are terse.", model=model)
    result = await Runner.run(agent, "hi")
    assert result.final_output == "hello"
    assert model.requests[0].instructions == "You are terse."
    assert model.requests[0].agent == "a"


async def test_template_instructions_render_the_run_context() -> None:
    model = ScriptedModel([text("ok"), text("ok")])
    agent = Agent(
        "a",
        instructions="You work for {{ company }}{% if vip %}, a VIP client{% endif %}.",
        model=model,
    )
    await Runner.run(agent, "hi", context={"company": "ACME", "vip": True})
    await Runner.run(agent, "hi", context={"company": "Globex", "vip": False})
    assert model.requests[0].instructions == "You work for ACME, a VIP client."
    assert model.requests[1].instructions == "You work for Globex."


async def test_template_missing_variable_is_a_typed_error_naming_it() -> None:
    model = ScriptedModel([text("never")])
    agent = Agent("a", instructions="Serve {{ company }}.", model=model)
    with pytest.raises(UserError, match="company"):
        await Runner.run(agent, "hi", context={})
    assert model.requests == []


@pytest.mark.parametrize(
    "template",
    [
        "{{ company.__class__.__mro__ }}",
        "{{ ''.__class__.__base__.__subclasses__() }}",
        "{{ cycler.__init__.__globals__ }}",
    ],
)
async def test_template_runs_in_the_sandbox(template: str) -> None:
    model = ScriptedModel([text("never")])
    agent = Agent("a", instructions=template, model=model)
    try:
        await Runner.run(agent, "hi", context={"company": "ACME"})
    except RelayraceError:
        return  # refused with a typed error: fine
    # If rendering did not fail, it must not have exposed Python internals.
    rendered = model.requests[0].instructions
    assert "class" not in rendered and "module" not in rendered and "builtins" not in rendered


async def test_template_cannot_mutate_context() -> None:
    model = ScriptedModel([text("x")])
    agent = Agent("a", instructions="{{ items.append(4) }}{{ items }}", model=model)
    items = [1, 2, 3]
    with pytest.raises(RelayraceError):
        await Runner.run(agent, "hi", context={"items": items})
    assert items == [1, 2, 3]


async def test_sync_callable_instructions_get_the_run_context() -> None:
    seen: list[RunContext] = []

    def instructions(ctx: RunContext) -> str:
        seen.append(ctx)
        return f"Agent {ctx.agent.name} serving {ctx.context['user']}"

    model = ScriptedModel([text("ok")])
    agent = Agent("helper", instructions=instructions, model=model)
    await Runner.run(agent, "hi", context={"user": "ann"})
    assert model.requests[0].instructions == "Agent helper serving ann"
    assert seen and seen[0].context == {"user": "ann"}


async def test_async_callable_instructions() -> None:
    async def instructions(ctx: RunContext) -> str:
        return f"async for {ctx.context}"

    model = ScriptedModel([text("ok")])
    agent = Agent("a", instructions=instructions, model=model)
    await Runner.run(agent, "hi", context="bob")
    assert model.requests[0].instructions == "async for bob"


async def test_callable_instructions_are_evaluated_each_turn() -> None:
    from relayrace import tool
    from relayrace.testing import tool_call

    counter = {"n": 0}

    @tool
    def bump() -> str:
        """Increase the counter."""
        counter["n"] += 1
        return "bumped"

    model = ScriptedModel([tool_call("bump"), text("done")])
    agent = Agent(
        "a", instructions=lambda ctx: f"count={counter['n']}", model=model, tools=[bump]
    )
    await Runner.run(agent, "go")
    assert [r.instructions for r in model.requests] == ["count=0", "count=1"]


def test_agent_has_at_most_one_parent() -> None:
    child = Agent("child", instructions="c")
    Agent("p1", instructions="p", sub_agents=[child])
    with pytest.raises(UserError):
        Agent("p2", instructions="p", sub_agents=[child])
    # The failed build left the tree unchanged.
    assert child.parent is not None and child.parent.name == "p1"


def test_agent_cannot_be_its_own_child_or_listed_twice() -> None:
    child = Agent("child", instructions="c")
    with pytest.raises(UserError):
        Agent("p", instructions="p", sub_agents=[child, child])


def test_names_must_be_unique_within_a_tree() -> None:
    a = Agent("same", instructions="x")
    b = Agent("other", instructions="x", sub_agents=[Agent("same", instructions="y")])
    with pytest.raises(UserError, match="same"):
        Agent("root", instructions="r", sub_agents=[a, b])


def test_find_agent_searches_the_whole_tree_from_any_node() -> None:
    leaf = Agent("leaf", instructions="l")
    mid = Agent("mid", instructions="m", sub_agents=[leaf])
    side = Agent("side", instructions="s")
    root = Agent("root", instructions="r", sub_agents=[mid, side])
    for start in (root, mid, leaf, side):
        assert start.find_agent("leaf") is leaf
        assert start.find_agent("root") is root
        assert start.find_agent("side") is side
        assert start.find_agent("nobody") is None
    assert {a.name for a in root.walk()} == {"root", "mid", "leaf", "side"}
    assert root.sub_agents == (mid, side)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"handoff_tools": "several"},
        {"max_turns": 0},
    ],
)
def test_bad_agent_options_are_user_errors(kwargs: dict) -> None:
    with pytest.raises(UserError):
        Agent("a", instructions="x", **kwargs)


def test_empty_name_is_rejected() -> None:
    with pytest.raises(UserError):
        Agent("  ", instructions="x")


def test_transfer_policy_defaults_to_children_only() -> None:
    policy = TransferPolicy()
    assert policy.to_parent is False and policy.to_peers is False
    agent = Agent("a", instructions="x")
    assert agent.transfer_policy == TransferPolicy()


async def test_agent_max_turns_is_used_when_the_run_gives_none() -> None:
    from relayrace import MaxTurnsExceeded, tool
    from relayrace.testing import FunctionModel, tool_call

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = FunctionModel(lambda req: tool_call("ping"))
    agent = Agent("a", instructions="x", model=model, tools=[ping], max_turns=3)
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(agent, "go")
    assert len(model.requests) == 3
    # The run's own max_turns wins over the agent's.
    model2 = FunctionModel(lambda req: tool_call("ping"))
    agent2 = Agent("b", instructions="x", model=model2, tools=[ping], max_turns=3)
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(agent2, "go", max_turns=5)
    assert len(model2.requests) == 5
