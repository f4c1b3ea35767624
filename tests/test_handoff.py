"""Same-session handoffs: transfer tools, policies, explicit handoffs, filters, limits, loops."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from conftest import assert_valid_protocol, messages_of, of_type, session_messages
from relayrace import (
    Agent,
    ConfigError,
    HandoffEvent,
    HandoffLoopError,
    MaxHandoffsExceeded,
    MaxTurnsExceeded,
    Message,
    RunFinishedEvent,
    Runner,
    ToolResultEvent,
    TransferPolicy,
    UserError,
    handoff,
    keep_last,
    remove_tool_traffic,
    tool,
)
from relayrace.sessions import MemorySession
from relayrace.teams.routing import TerminateTarget
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def team(
    model: Any,
    *,
    policy: TransferPolicy = TransferPolicy(),  # noqa: B008
    mode: str = "per_agent",
    root_tools: tuple[Any, ...] = (),
    child_tools: tuple[Any, ...] = (),
) -> Agent:
    """root -> (billing, support); billing -> refunds."""
    refunds = Agent("refunds", instructions="I am refunds.", description="Processes refunds.",
                    model=model, transfer_policy=policy, handoff_tools=mode)
    billing = Agent("billing", instructions="I am billing.", description="Invoices and payments.",
                    model=model, sub_agents=[refunds], transfer_policy=policy,
                    handoff_tools=mode, tools=child_tools)
    support = Agent("support", instructions="I am support.", description="Technical help.",
                    model=model, transfer_policy=policy, handoff_tools=mode, tools=child_tools)
    return Agent("root", instructions="I am root.", description="Front desk.", model=model,
                 sub_agents=[billing, support], handoff_tools=mode, tools=root_tools)


def transfer_tools(names: list[str]) -> set[str]:
    return {n for n in names if n.startswith("transfer_to")}


def tool_defs(model: FunctionModel | Any) -> list[dict[str, Any]]:
    return model.seen_tools  # type: ignore[no-any-return]


def recording_model(turns: list[Any]) -> FunctionModel:
    """A FunctionModel that plays ``turns`` and records the full tool definitions offered."""
    queue = list(turns)
    seen: list[dict[str, Any]] = []

    def fn(req: Any) -> Any:
        seen.append({d.name: d for d in req.tools})
        return queue.pop(0) if queue else text("done")

    model = FunctionModel(fn)
    model.seen_tools = seen  # type: ignore[attr-defined]
    return model


# --- which transfer tools are offered --------------------------------------------------------


async def test_default_policy_offers_children_only() -> None:
    model = ScriptedModel([tool_call("transfer_to_billing"), text("billing here")])
    root = team(model)
    await Runner.run(root, "hi")
    assert transfer_tools(model.requests[0].tools) == {"transfer_to_billing",
                                                       "transfer_to_support"}
    # billing may reach its child refunds, but not its parent nor its sibling.
    assert transfer_tools(model.requests[1].tools) == {"transfer_to_refunds"}


async def test_no_handoff_tool_without_allowed_targets() -> None:
    model = ScriptedModel([tool_call("transfer_to_support"), text("ok")])
    await Runner.run(team(model), "hi")
    assert model.requests[1].agent == "support"
    assert model.requests[1].tools == []


async def test_single_mode_without_targets_offers_no_tool() -> None:
    model = ScriptedModel([tool_call("transfer_to_agent", {"agent_name": "support"}),
                           text("ok")])
    await Runner.run(team(model, mode="single"), "hi")
    assert model.requests[1].agent == "support"
    assert model.requests[1].tools == []


async def test_to_parent_policy_offers_the_parent() -> None:
    model = ScriptedModel([tool_call("transfer_to_support"), tool_call("transfer_to_root"),
                           text("root again")])
    result = await Runner.run(team(model, policy=TransferPolicy(to_parent=True)), "hi")
    assert transfer_tools(model.requests[1].tools) == {"transfer_to_root"}
    assert model.requests[2].agent == "root"
    assert result.last_agent.name == "root"


async def test_to_peers_policy_offers_siblings_not_self() -> None:
    model = ScriptedModel([tool_call("transfer_to_support"), tool_call("transfer_to_billing"),
                           text("billing")])
    result = await Runner.run(team(model, policy=TransferPolicy(to_peers=True)), "hi")
    assert transfer_tools(model.requests[1].tools) == {"transfer_to_billing"}
    assert result.last_agent.name == "billing"
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [
        ("root", "support"), ("support", "billing")]


async def test_parent_and_peers_together() -> None:
    model = ScriptedModel([tool_call("transfer_to_billing"), text("x")])
    await Runner.run(team(model, policy=TransferPolicy(to_parent=True, to_peers=True)), "hi")
    assert transfer_tools(model.requests[1].tools) == {
        "transfer_to_refunds", "transfer_to_root", "transfer_to_support"}


async def test_per_agent_descriptions_come_from_the_target() -> None:
    model = recording_model([text("ok")])
    await Runner.run(team(model), "hi")
    defs = tool_defs(model)[0]
    assert "Invoices and payments." in defs["transfer_to_billing"].description
    assert "Technical help." in defs["transfer_to_support"].description
    params = defs["transfer_to_billing"].parameters
    assert params["type"] == "object"
    assert "reason" in params["properties"]


async def test_single_mode_offers_one_tool_with_an_enum_of_targets() -> None:
    model = recording_model([tool_call("transfer_to_agent", {"agent_name": "billing",
                                                             "reason": "invoice"}),
                             text("billing here")])
    root = team(model, mode="single")
    result = await Runner.run(root, "hi")
    defs = tool_defs(model)
    assert list(defs[0]) == ["transfer_to_agent"]
    params = defs[0]["transfer_to_agent"].parameters
    assert sorted(params["properties"]["agent_name"]["enum"]) == ["billing", "support"]
    assert "reason" in params["properties"]
    assert "agent_name" in params.get("required", [])
    assert list(defs[1]) == ["transfer_to_agent"]
    assert defs[1]["transfer_to_agent"].parameters["properties"]["agent_name"]["enum"] == [
        "refunds"]
    assert result.last_agent.name == "billing"
    assert result.handoffs[0].reason == "invoice"
    assert model.requests[1].agent == "billing"
    assert any("invoice" in m.content for m in model.requests[1].messages)


async def test_tool_names_are_sanitized_bounded_and_unique() -> None:
    long_name = "x" * 100
    a = Agent("Billing Team!", instructions="a", description="spaces and punctuation")
    b = Agent("Billing_Team_", instructions="b", description="collides once sanitized")
    c = Agent(long_name, instructions="c")
    d = Agent("ünïcode agent", instructions="d")
    model = recording_model([text("ok")])
    root = Agent("root", instructions="r", model=model, sub_agents=[a, b, c, d])
    await Runner.run(root, "hi")
    names = list(tool_defs(model)[0])
    assert len(names) == 4
    assert len(set(names)) == 4
    for n in names:
        assert TOOL_NAME.match(n), n


@pytest.mark.parametrize("target", ["Billing Team!", "Billing_Team_", "y" * 90])
async def test_each_sanitized_tool_reaches_its_own_agent(target: str) -> None:
    agents = [Agent("Billing Team!", instructions="a"), Agent("Billing_Team_", instructions="b"),
              Agent("y" * 90, instructions="c")]
    probe = recording_model([text("probe")])
    probe_root = Agent("root", instructions="r", model=probe, sub_agents=agents)
    await Runner.run(probe_root, "hi")
    by_desc = {d.description: n for n, d in tool_defs(probe)[0].items()}
    tool_name = next(n for desc, n in by_desc.items() if target in desc)

    model = ScriptedModel([tool_call(tool_name), text("arrived")])
    agents2 = [Agent("Billing Team!", instructions="a", model=model),
               Agent("Billing_Team_", instructions="b", model=model),
               Agent("y" * 90, instructions="c", model=model)]
    root = Agent("root", instructions="r", model=model, sub_agents=agents2)
    result = await Runner.run(root, "hi")
    assert result.last_agent.name == target
    assert model.requests[1].agent == target


@tool
def transfer_to_billing() -> str:
    """A user tool that happens to be named like a transfer."""
    return "tool ran"


@tool
def transfer_to_agent() -> str:
    """A user tool named like the single transfer tool."""
    return "tool ran"


@tool
def transfer_to_root() -> str:
    """A user tool named like the transfer to a parent called root."""
    return "tool ran"


@tool
def transfer_to_b() -> str:
    """A user tool named like the transfer to a peer called b."""
    return "tool ran"


def _clash_user_tool() -> Agent:
    return Agent("root", instructions="r", tools=[transfer_to_billing],
                 sub_agents=[Agent("billing", instructions="b")])


def _clash_single_tool() -> Agent:
    return Agent("root", instructions="r", tools=[transfer_to_agent], handoff_tools="single",
                 sub_agents=[Agent("billing", instructions="b")])


def _clash_meta_tool() -> Agent:
    return Agent("root", instructions="r", specialists=[Agent("expert", instructions="e")],
                 sub_agents=[handoff(Agent("billing", instructions="b"),
                                     tool_name="delegate_to_agent")])


def _clash_agent_tool() -> Agent:
    helper = Agent("helper", instructions="h")
    return Agent("root", instructions="r", tools=[helper.as_tool(name="transfer_to_billing")],
                 sub_agents=[Agent("billing", instructions="b")])


def _clash_finish_task() -> Agent:
    return Agent("root", instructions="r", mode="task",
                 sub_agents=[handoff(Agent("billing", instructions="b"),
                                     tool_name="finish_task")])


def _clash_two_transfers() -> Agent:
    return Agent("root", instructions="r",
                 sub_agents=[handoff(Agent("billing", instructions="b"), tool_name="go"),
                             handoff(Agent("refunds", instructions="f"), tool_name="go")])


@pytest.mark.parametrize(("build", "named"), [
    (_clash_two_transfers, ["'go'", "'billing'", "'refunds'"]),
    (_clash_user_tool, ["transfer_to_billing", "'billing'"]),
    (_clash_single_tool, ["transfer_to_agent", "'billing'"]),
    (_clash_meta_tool, ["delegate_to_agent", "'billing'"]),
    (_clash_agent_tool, ["transfer_to_billing", "'billing'"]),
    (_clash_finish_task, ["finish_task", "'billing'"]),
], ids=["two transfers", "user tool", "single transfer tool", "meta-tool",
        "agent tool", "finish_task"])
def test_a_transfer_tool_clashing_with_another_tool_is_rejected_when_built(
        build: Any, named: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    for name in named:
        assert name in str(info.value)


def test_a_user_tool_named_finish_task_is_rejected_on_a_task_agent() -> None:
    @tool
    def finish_task(result: str) -> str:
        """Shadows the tool a task agent returns with."""
        return result

    with pytest.raises(UserError, match="finish_task"):
        Agent("worker", instructions="w", mode="task", tools=[finish_task])
    Agent("chatty", instructions="c", tools=[finish_task])  # no clash outside task mode


@pytest.mark.parametrize("policy", ["parent", "peers"])
def test_a_clash_with_a_transfer_to_the_parent_or_a_peer_leaves_no_parent_link(
        policy: str) -> None:
    clashing = Agent("a", instructions="a", tools=[transfer_to_root, transfer_to_b],
                     transfer_policy=TransferPolicy(to_parent=policy == "parent",
                                                    to_peers=policy == "peers"))
    b = Agent("b", instructions="b")
    with pytest.raises(ConfigError, match="transfer_to_(root|b)") as info:
        Agent("root", instructions="r", sub_agents=[b, clashing])
    assert "'a'" in str(info.value)
    # Nothing was half applied: both agents are free to be placed again.
    assert b.parent is None and clashing.parent is None
    root = Agent("root", instructions="r", sub_agents=[b])
    assert b.parent is root


# --- what a handoff does -------------------------------------------------------------------


async def test_target_continues_the_same_session_with_full_history() -> None:
    model = ScriptedModel([
        text("Hello, how can I help?"),
        tool_call("transfer_to_billing", {"reason": "customer asks about an invoice"}),
        text("Billing: your invoice is paid."),
    ])
    session = MemorySession()
    root = team(model)
    await Runner.run(root, "hi", session=session)
    result = await Runner.run(root, "where is my invoice?", session=session)
    assert result.final_output == "Billing: your invoice is paid."
    assert result.last_agent.name == "billing"
    req = model.requests[2]
    assert req.agent == "billing"
    assert req.instructions == "I am billing."
    contents = [m.content for m in req.messages]
    assert "hi" in contents
    assert "Hello, how can I help?" in contents
    assert "where is my invoice?" in contents
    # The reason is visible to the target.
    assert any("customer asks about an invoice" in m.content for m in req.messages)
    (ev,) = result.handoffs
    assert (ev.agent, ev.to_agent, ev.reason) == ("root", "billing",
                                                  "customer asks about an invoice")
    # The handoff is in the session log, and the log is valid.
    stored = of_type(await session.get_events(), HandoffEvent)
    assert [(e.agent, e.to_agent) for e in stored] == [("root", "billing")]
    assert_valid_protocol(await session_messages(session))
    assert_valid_protocol(req.messages)


async def test_default_reason_is_visible_to_the_target() -> None:
    model = ScriptedModel([tool_call("transfer_to_support"), text("support")])
    await Runner.run(team(model), "help")
    req = model.requests[1]
    note = [m for m in req.messages if m.role in ("tool", "system")]
    assert note and any("root" in m.content for m in note)


async def test_handoff_event_reason_has_a_short_default() -> None:
    """HandoffEvent.reason is documented as 'as the model gave it (or a short default)'."""
    model = ScriptedModel([tool_call("transfer_to_support"), text("support")])
    result = await Runner.run(team(model), "help")
    (ev,) = result.handoffs
    assert ev.reason.strip(), "a handoff without a reason should record a short default"


async def test_active_agent_is_remembered_by_the_session() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_billing", {"reason": "money"}),
        text("billing 1"),
        text("billing 2"),
        text("support answers"),
        text("root answers"),
    ])
    root = team(model)
    session = MemorySession()
    await Runner.run(root, "pay", session=session)
    r2 = await Runner.run(root, "more", session=session)
    assert model.requests[2].agent == "billing"
    assert r2.last_agent.name == "billing"
    r3 = await Runner.run(root, "tech", session=session, start_agent="support")
    assert model.requests[3].agent == "support"
    assert r3.last_agent.name == "support"
    r4 = await Runner.run(root, "desk", session=session, start_agent=root)
    assert model.requests[4].agent == "root"
    assert r4.last_agent.name == "root"
    model.assert_complete()


async def test_a_sub_agent_passed_to_run_is_where_the_run_starts() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_billing", {"reason": "money"}),
        text("billing 1"),
        text("support answers"),
        text("support again"),
    ])
    root = team(model)
    session = MemorySession()
    await Runner.run(root, "pay", session=session)  # billing is now the active agent
    support = root.find_agent("support")
    assert support is not None
    r2 = await Runner.run(support, "tech", session=session)  # naming a sub-agent starts there
    assert (model.requests[2].agent, r2.last_agent.name) == ("support", "support")
    # support can transfer nowhere: having answered, it hands the new turn to its parent.
    await Runner.run(root, "more", session=session)
    assert model.requests[3].agent == "root"
    model.assert_complete()


async def test_unknown_start_agent_is_a_user_error() -> None:
    from relayrace import UserError

    with pytest.raises(UserError, match="nobody"):
        await Runner.run(team(ScriptedModel([text("x")])), "hi", start_agent="nobody")


async def test_handoff_beside_final_text_the_handoff_wins() -> None:
    model = ScriptedModel([
        [text("Let me pass you on."), tool_call("transfer_to_support", {"reason": "tech"})],
        text("support final"),
    ])
    result = await Runner.run(team(model), "help")
    assert result.final_output == "support final"
    assert result.last_agent.name == "support"
    assert len(result.handoffs) == 1
    model.assert_complete()


async def test_first_emitted_handoff_wins_and_tools_still_run() -> None:
    ran: list[str] = []

    @tool
    def note(text_: str) -> str:
        """Write a note."""
        ran.append(text_)
        return f"noted {text_}"

    model = ScriptedModel([
        [
            tool_call("note", {"text_": "before"}, id="n1"),
            tool_call("transfer_to_support", {"reason": "first"}, id="h1"),
            tool_call("transfer_to_billing", {"reason": "second"}, id="h2"),
            tool_call("note", {"text_": "after"}, id="n2"),
        ],
        text("support done"),
    ])
    result = await Runner.run(team(model, root_tools=(note,)), "go")
    assert sorted(ran) == ["after", "before"]
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [("root", "support")]
    assert result.last_agent.name == "support"
    results = {e.message.tool_call_id: e for e in of_type(result.new_events, ToolResultEvent)}
    assert set(results) == {"n1", "h1", "h2", "n2"}
    assert results["n1"].message.content == "noted before"
    assert results["n2"].message.content == "noted after"
    assert not results["h1"].is_error
    assert results["h2"].is_error
    refusal = results["h2"].message.content.lower()
    assert "not" in refusal and "support" in refusal  # says it was not done and why
    # All results of the turn precede the handoff event, and the target sees them.
    idx = {id(e): i for i, e in enumerate(result.new_events)}
    handoff_at = idx[id(result.handoffs[0])]
    assert all(idx[id(e)] < handoff_at for e in results.values())
    seen_ids = {m.tool_call_id for m in model.requests[1].messages if m.role == "tool"}
    assert {"n1", "h1", "h2", "n2"} <= seen_ids
    assert_valid_protocol(model.requests[1].messages)
    assert_valid_protocol(await session_messages(result.session))


async def test_several_single_mode_handoffs_first_wins() -> None:
    model = ScriptedModel([
        [
            tool_call("transfer_to_agent", {"agent_name": "billing"}, id="a"),
            tool_call("transfer_to_agent", {"agent_name": "support"}, id="b"),
        ],
        text("billing done"),
    ])
    result = await Runner.run(team(model, mode="single"), "go")
    assert result.last_agent.name == "billing"
    res = {e.message.tool_call_id: e for e in of_type(result.new_events, ToolResultEvent)}
    assert res["b"].is_error and not res["a"].is_error
    assert_valid_protocol(await session_messages(result.session))


# --- refused transfers ----------------------------------------------------------------------


async def test_forbidden_transfer_to_a_sibling_is_explained_and_the_run_goes_on() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_support"),
        tool_call("transfer_to_billing", {"reason": "wrong desk"}),
        text("support keeps it"),
    ])
    result = await Runner.run(team(model), "hi")
    assert result.last_agent.name == "support"
    assert result.final_output == "support keeps it"
    refused = of_type(result.new_events, ToolResultEvent)[-1]
    assert refused.is_error
    assert "billing" in refused.message.content
    assert "not allowed" in refused.message.content.lower() or "forbid" in (
        refused.message.content.lower())
    assert [h.to_agent for h in result.handoffs] == ["support"]
    assert model.requests[2].agent == "support"


async def test_a_refused_transfer_lists_the_transfers_that_can_be_made_now() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_support"),
        tool_call("transfer_to_Billing_Team"),  # a peer's sanitized name: known, not allowed
        text("support stays"),
    ])
    network = Agent("network", instructions="n", model=model)
    database = Agent("database", instructions="d", model=model)
    support = Agent("support", instructions="s", model=model, sub_agents=[
        handoff(network, is_enabled=False), handoff(database, tool_name="ask_db")])
    root = Agent("root", instructions="r", model=model, sub_agents=[
        Agent("Billing Team", instructions="b", model=model), support])
    result = await Runner.run(root, "hi")
    refused = of_type(result.new_events, ToolResultEvent)[-1]
    assert refused.is_error and result.final_output == "support stays"
    assert "'Billing Team' is not allowed" in refused.message.content
    assert refused.message.content.endswith("Transfers you can make now: ask_db.")


async def test_forbidden_transfer_to_parent_without_policy() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_billing"),
        tool_call("transfer_to_root"),
        text("billing keeps it"),
    ])
    result = await Runner.run(team(model), "hi")
    refused = of_type(result.new_events, ToolResultEvent)[-1]
    assert refused.is_error and "root" in refused.message.content
    assert result.last_agent.name == "billing"


async def test_forbidden_transfer_in_single_mode() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_agent", {"agent_name": "billing"}),
        tool_call("transfer_to_agent", {"agent_name": "support"}),
        text("billing keeps it"),
    ])
    result = await Runner.run(team(model, mode="single"), "hi")
    refused = of_type(result.new_events, ToolResultEvent)[-1]
    assert refused.is_error
    assert "support" in refused.message.content  # what was wrong
    assert "refunds" in refused.message.content  # what is valid
    assert result.last_agent.name == "billing"
    assert [h.to_agent for h in result.handoffs] == ["billing"]


async def test_unknown_agent_in_single_mode_lists_valid_targets() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_agent", {"agent_name": "sales"}),
        tool_call("transfer_to_agent", {}),
        text("root"),
    ])
    result = await Runner.run(team(model, mode="single"), "hi")
    first, second = of_type(result.new_events, ToolResultEvent)
    for ev in (first, second):
        assert ev.is_error
        assert "billing" in ev.message.content and "support" in ev.message.content
    assert "sales" in first.message.content
    assert result.handoffs == []
    assert result.last_agent.name == "root"


async def test_malformed_handoff_arguments_do_not_transfer() -> None:
    model = ScriptedModel([tool_call("transfer_to_billing", '{"reason": '), text("root")])
    result = await Runner.run(team(model), "hi")
    (ev,) = of_type(result.new_events, ToolResultEvent)
    assert ev.is_error and "JSON" in ev.message.content
    assert result.handoffs == []


# --- explicit handoff() ---------------------------------------------------------------------


async def test_explicit_handoff_name_and_description() -> None:
    billing = Agent("billing", instructions="b", description="ignored")
    model = recording_model([tool_call("escalate_to_money"), text("money")])
    billing.model = model
    root = Agent("root", instructions="r", model=model, sub_agents=[
        handoff(billing, tool_name="escalate_to_money", description="Use for payments.")])
    result = await Runner.run(root, "hi")
    defs = tool_defs(model)[0]
    assert list(defs) == ["escalate_to_money"]
    assert defs["escalate_to_money"].description == "Use for payments."
    assert result.last_agent.name == "billing"


@pytest.mark.parametrize("mode", ["per_agent", "single"])
async def test_disabled_handoff_is_not_offered_nor_performed(mode: str) -> None:
    billing = Agent("billing", instructions="b")
    support = Agent("support", instructions="s")
    call = (tool_call("transfer_to_billing") if mode == "per_agent"
            else tool_call("transfer_to_agent", {"agent_name": "billing"}))
    model = recording_model([call, text("root stays")])
    billing.model = support.model = model
    root = Agent("root", instructions="r", model=model, handoff_tools=mode, sub_agents=[
        handoff(billing, is_enabled=False), support])
    result = await Runner.run(root, "hi")
    defs = tool_defs(model)[0]
    if mode == "per_agent":
        assert set(defs) == {"transfer_to_support"}
    else:
        assert defs["transfer_to_agent"].parameters["properties"]["agent_name"]["enum"] == [
            "support"]
    assert result.handoffs == []
    assert result.last_agent.name == "root"
    (ev,) = of_type(result.new_events, ToolResultEvent)
    assert ev.is_error


async def test_is_enabled_callable_sees_the_run_context() -> None:
    def vip_only(ctx: Any) -> bool:
        return bool(ctx.context.get("vip"))

    def build(model: Any) -> Agent:
        vip = Agent("vip", instructions="v", model=model)
        return Agent("root", instructions="r", model=model,
                     sub_agents=[handoff(vip, is_enabled=vip_only)])

    m1 = ScriptedModel([tool_call("transfer_to_vip"), text("vip desk")])
    r1 = await Runner.run(build(m1), "hi", context={"vip": True})
    assert transfer_tools(m1.requests[0].tools) == {"transfer_to_vip"}
    assert r1.last_agent.name == "vip"

    m2 = ScriptedModel([tool_call("transfer_to_vip"), text("normal desk")])
    r2 = await Runner.run(build(m2), "hi", context={"vip": False})
    assert transfer_tools(m2.requests[0].tools) == set()
    assert r2.last_agent.name == "root"
    (ev,) = of_type(r2.new_events, ToolResultEvent)
    assert ev.is_error
    assert_valid_protocol(await session_messages(r2.session))


async def test_on_handoff_is_called_with_context_and_reason() -> None:
    calls: list[tuple[Any, str]] = []

    async def on_async(ctx: Any, reason: str) -> None:
        calls.append((ctx.context, reason))

    def on_sync(ctx: Any, reason: str) -> None:
        calls.append(("sync", reason))

    model = ScriptedModel([tool_call("transfer_to_a", {"reason": "r1"}),
                           tool_call("transfer_to_b", {"reason": "r2"}), text("b")])
    b = Agent("b", instructions="b", model=model)
    a = Agent("a", instructions="a", model=model,
              sub_agents=[handoff(b, on_handoff=on_sync)])
    root = Agent("root", instructions="r", model=model,
                 sub_agents=[handoff(a, on_handoff=on_async)])
    await Runner.run(root, "go", context={"k": 1})
    assert calls == [({"k": 1}, "r1"), ("sync", "r2")]


@pytest.mark.parametrize("mode", ["per_agent", "single"])
async def test_an_async_is_enabled_is_awaited(mode: str) -> None:
    async def closed(ctx: Any) -> bool:
        return False

    async def open_(ctx: Any) -> bool:
        return True

    def call(target: str, id: str) -> Any:
        if mode == "per_agent":
            return tool_call(f"transfer_to_{target}", id=id)
        return tool_call("transfer_to_agent", {"agent_name": target}, id=id)

    model = recording_model([call("vip", "v"), call("desk", "d"), text("desk here")])
    vip = Agent("vip", instructions="v", model=model)
    desk = Agent("desk", instructions="d", model=model)
    root = Agent("root", instructions="r", model=model, handoff_tools=mode, sub_agents=[
        handoff(vip, is_enabled=closed), handoff(desk, is_enabled=open_)])
    result = await Runner.run(root, "hi")
    defs = tool_defs(model)[0]
    if mode == "per_agent":
        assert set(defs) == {"transfer_to_desk"}
    else:
        assert defs["transfer_to_agent"].parameters["properties"]["agent_name"]["enum"] == [
            "desk"]
    refused, moved = result.tool_results
    assert refused.is_error and "vip" in refused.message.content
    assert not moved.is_error
    assert [h.to_agent for h in result.handoffs] == ["desk"]
    assert result.last_agent.name == "desk"


async def test_a_transfer_keeps_its_tool_name_while_another_is_disabled() -> None:
    """Names that sanitize alike are numbered once; hiding one never renames the other."""
    model = recording_model([tool_call("transfer_to_A_B_2"), text("A_B here")])
    first = Agent("A B", instructions="1", model=model)
    second = Agent("A_B", instructions="2", model=model)
    root = Agent("root", instructions="r", model=model, sub_agents=[
        handoff(first, is_enabled=lambda ctx: False), handoff(second, is_enabled=lambda ctx: True)])
    result = await Runner.run(root, "hi")
    assert list(tool_defs(model)[0]) == ["transfer_to_A_B_2"]
    assert result.last_agent.name == "A_B"


async def test_an_awaitable_returned_by_on_handoff_is_awaited() -> None:
    calls: list[str] = []

    class Audit:
        """An awaitable that is not a coroutine: its work happens only when awaited."""

        def __init__(self, reason: str) -> None:
            self.reason = reason

        def __await__(self) -> Any:
            yield from asyncio.sleep(0).__await__()
            calls.append(self.reason)

    model = ScriptedModel([tool_call("transfer_to_b", {"reason": "r1"}), text("b")])
    b = Agent("b", instructions="b", model=model)
    root = Agent("root", instructions="r", model=model,
                 sub_agents=[handoff(b, on_handoff=lambda ctx, reason: Audit(reason))])
    result = await Runner.run(root, "go")
    assert calls == ["r1"]
    assert result.last_agent.name == "b"


async def test_an_async_input_filter_is_awaited() -> None:
    async def users_only(messages: list[Message]) -> list[Message]:
        return [m for m in messages if m.role == "user"]

    model = ScriptedModel([
        tool_call("lookup", {"q": "order 7"}),
        tool_call("transfer_to_clean", {"reason": "needs a human touch"}),
        text("clean answer"),
        text("clean again"),
    ])
    clean = Agent("clean", instructions="c", model=model, sticky=True)
    root = Agent("root", instructions="r", model=model, tools=[lookup],
                 sub_agents=[handoff(clean, input_filter=users_only)])
    session = MemorySession()
    await Runner.run(root, "where is order 7?", session=session)
    await Runner.run(root, "and now?", session=session)  # the filter holds in a later run
    for request in model.requests[2:]:
        assert request.agent == "clean"
        assert all(m.role == "user" for m in request.messages)
        assert "where is order 7?" in [m.content for m in request.messages]
    assert any("needs a human touch" in m.content for m in model.requests[2].messages)
    assert model.requests[3].messages[-1].content == "and now?"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def test_remove_tool_traffic_filter_hides_tools_from_target_only() -> None:
    model = ScriptedModel([
        tool_call("lookup", {"q": "order 7"}),
        [text("Passing on."), tool_call("transfer_to_clean", {"reason": "needs a human touch"})],
        text("clean answer"),
    ])
    clean = Agent("clean", instructions="c", model=model, sticky=True)
    root = Agent("root", instructions="r", model=model, tools=[lookup],
                 sub_agents=[handoff(clean, input_filter=remove_tool_traffic)])
    result = await Runner.run(root, "where is order 7?")
    seen = model.requests[2].messages
    assert model.requests[2].agent == "clean"
    assert all(m.role != "tool" and not m.tool_calls for m in seen)
    assert any(m.content == "where is order 7?" for m in seen)
    assert any(m.content == "Passing on." for m in seen)
    assert any("needs a human touch" in m.content for m in seen)
    # The session keeps the full record.
    full = await session_messages(result.session)
    assert sum(1 for m in full if m.role == "tool") == 2
    assert any(m.content == "found order 7" for m in full)
    assert_valid_protocol(full)


async def test_an_input_filter_still_applies_when_the_target_continues_in_a_later_run() -> None:
    model = ScriptedModel([
        tool_call("lookup", {"q": "order 7"}),
        tool_call("transfer_to_clean", {"reason": "needs a human touch"}),
        text("clean answer"),
        text("clean again"),
        text("clean a third time"),
    ])
    clean = Agent("clean", instructions="c", model=model, sticky=True)
    root = Agent("root", instructions="r", model=model, tools=[lookup],
                 sub_agents=[handoff(clean, input_filter=remove_tool_traffic)])
    session = MemorySession()
    await Runner.run(root, "where is order 7?", session=session)
    await Runner.run(root, "and now?", session=session)
    await Runner.run(root, "still there?", session=session)
    for request in model.requests[2:]:
        assert request.agent == "clean"
        assert all(m.role != "tool" and not m.tool_calls for m in request.messages)
        assert not any("found order 7" in m.content for m in request.messages)
    assert model.requests[4].messages[-1].content == "still there?"
    assert any(m.content == "found order 7" for m in await session_messages(session))


async def test_keep_last_filter_never_splits_a_call_from_its_result() -> None:
    model = ScriptedModel([
        text("one"),
        text("two"),
        [tool_call("lookup", {"q": "a"}), tool_call("lookup", {"q": "b"})],
        tool_call("transfer_to_short", {"reason": "brief"}),
        text("short answer"),
    ])
    short = Agent("short", instructions="s", model=model)
    root = Agent("root", instructions="r", model=model, tools=[lookup],
                 sub_agents=[handoff(short, input_filter=keep_last(2))])
    session = MemorySession()
    await Runner.run(root, "m1", session=session)
    await Runner.run(root, "m2", session=session)
    result = await Runner.run(root, "m3", session=session)
    seen = model.requests[4].messages
    assert model.requests[4].agent == "short"
    assert "m1" not in [m.content for m in seen]
    assert seen[0].role != "tool"
    assert_valid_protocol([m for m in seen if m.role != "system"])
    assert any("brief" in m.content for m in seen)
    full = await session_messages(result.session)
    assert [m.content for m in full if m.role == "user"] == ["m1", "m2", "m3"]


def test_keep_last_rejects_nonpositive_n() -> None:
    with pytest.raises(ValueError):
        keep_last(0)


@pytest.mark.parametrize("option", ["input_filter", "is_enabled", "on_handoff"])
def test_a_handoff_option_that_cannot_be_called_is_rejected_when_built(option: str) -> None:
    billing = Agent("billing", instructions="b")
    with pytest.raises(UserError, match=f"{option}.*'keep_last'"):
        handoff(billing, **{option: "keep_last"})
    assert billing.parent is None


_BROKEN: dict[str, Any] = {
    "raises": ValueError("the filter has a bug"),
    "returns None": None,
    "returns a string": "hello",
    "returns a list of strings": ["hello"],
}


@pytest.mark.parametrize("failure", list(_BROKEN))
async def test_a_failing_input_filter_ends_the_run_and_leaves_the_session_as_before(
        failure: str) -> None:
    broken = True

    def picky_filter(messages: list[Message]) -> Any:
        if not broken:
            return messages[-2:]
        outcome = _BROKEN[failure]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    model = ScriptedModel([
        tool_call("transfer_to_billing", {"reason": "money"}, id="t1"),
        tool_call("transfer_to_billing", {"reason": "money"}, id="t2"),
        text("billing here"),
    ])
    billing = Agent("billing", instructions="b", model=model, sticky=True)
    root = Agent("root", instructions="r", model=model,
                 sub_agents=[handoff(billing, input_filter=picky_filter)])
    session = MemorySession()
    with pytest.raises(UserError, match="picky_filter"):
        await Runner.run(root, "pay", session=session)
    events = await session.get_events()
    assert of_type(events, HandoffEvent) == []
    [answer] = of_type(events, ToolResultEvent)
    assert answer.message.tool_call_id == "t1" and answer.is_error
    assert "picky_filter" in answer.message.content
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"
    assert "picky_filter" in events[-1].output

    broken = False  # once the filter is fixed, the same session works again
    result = await Runner.run(root, "pay please", session=session)
    assert [r.agent for r in model.requests] == ["root", "root", "billing"]
    assert result.final_output == "billing here"
    assert [h.to_agent for h in result.handoffs] == ["billing"]
    assert len(model.requests[2].messages) == 2
    assert_valid_protocol(await session_messages(session))


async def test_an_input_filter_failing_in_a_later_run_is_a_user_error_naming_it() -> None:
    broken = False

    def later_filter(messages: list[Message]) -> list[Message]:
        if broken:
            raise KeyError("gone")
        return messages

    model = ScriptedModel([tool_call("transfer_to_billing"), text("billing 1"),
                           text("billing 2")])
    billing = Agent("billing", instructions="b", model=model, sticky=True)
    root = Agent("root", instructions="r", model=model,
                 sub_agents=[handoff(billing, input_filter=later_filter)])
    session = MemorySession()
    await Runner.run(root, "pay", session=session)
    broken = True
    with pytest.raises(UserError, match="later_filter"):
        await Runner.run(root, "again", session=session)
    assert_valid_protocol(await session_messages(session))
    broken = False
    result = await Runner.run(root, "and again", session=session)
    assert (result.last_agent.name, result.final_output) == ("billing", "billing 2")


# --- limits and loops -----------------------------------------------------------------------


def _always_transfer(policy_model: dict[str, str]) -> FunctionModel:
    def fn(req: Any) -> Any:
        return tool_call(policy_model[req.agent], {"reason": "not mine"})

    return FunctionModel(fn)


async def test_ping_pong_is_detected_long_before_the_turn_limit() -> None:
    model = _always_transfer({"root": "transfer_to_billing", "billing": "transfer_to_root"})
    root = team(model, policy=TransferPolicy(to_parent=True))
    session = MemorySession()
    with pytest.raises(HandoffLoopError) as info:
        await Runner.run(root, "whose is this?", session=session, max_turns=50)
    assert len(model.requests) <= 6
    assert set(info.value.hops) == {"root", "billing"}
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"


async def test_three_way_ping_pong_between_peers_is_not_mistaken_for_work() -> None:
    model = _always_transfer({"billing": "transfer_to_support", "support": "transfer_to_billing",
                              "root": "transfer_to_billing"})
    root = team(model, policy=TransferPolicy(to_peers=True))
    with pytest.raises(HandoffLoopError):
        await Runner.run(root, "x", max_turns=50)
    assert len(model.requests) <= 8


async def test_a_cycle_through_three_agents_is_a_loop() -> None:
    model = _always_transfer({"root": "transfer_to_billing", "billing": "transfer_to_support",
                              "support": "transfer_to_root"})
    root = team(model, policy=TransferPolicy(to_parent=True, to_peers=True))
    session = MemorySession()
    with pytest.raises(HandoffLoopError) as info:
        await Runner.run(root, "x", session=session, max_turns=50)
    assert info.value.hops == ["root", "billing", "support", "root", "billing", "support"]
    assert len(model.requests) == 5  # the second billing -> support is refused: a loop
    assert_valid_protocol(messages_of(await session.get_events()))


async def test_back_and_forth_with_work_in_between_is_not_a_loop() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_billing"),
        tool_call("lookup", {"q": "1"}),
        tool_call("transfer_to_root"),
        tool_call("lookup", {"q": "2"}),
        tool_call("transfer_to_billing"),
        tool_call("lookup", {"q": "3"}),
        tool_call("transfer_to_root"),
        text("finally"),
    ])
    root = team(model, policy=TransferPolicy(to_parent=True), root_tools=(lookup,),
                child_tools=(lookup,))
    result = await Runner.run(root, "x", max_turns=20)
    assert result.final_output == "finally"
    assert len(result.handoffs) == 4


async def test_max_handoffs_ends_the_run_with_a_consistent_session() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_billing"),
        tool_call("transfer_to_refunds"),
        text("never"),
    ])
    session = MemorySession()
    with pytest.raises(MaxHandoffsExceeded) as info:
        await Runner.run(team(model), "x", session=session, max_handoffs=1)
    assert info.value.max_handoffs == 1
    events = await session.get_events()
    assert [(e.agent, e.to_agent) for e in of_type(events, HandoffEvent)] == [
        ("root", "billing")]
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"
    assert len(model.requests) == 2


async def test_max_handoffs_allows_exactly_n() -> None:
    model = ScriptedModel([
        tool_call("transfer_to_billing"),
        tool_call("transfer_to_refunds"),
        text("refunds here"),
    ])
    result = await Runner.run(team(model), "x", max_handoffs=2)
    assert result.last_agent.name == "refunds"


async def test_a_handoff_target_keeps_to_its_own_max_turns() -> None:
    model = ScriptedModel([tool_call("transfer_to_billing")]
                          + [tool_call("lookup", {"q": str(i)}) for i in range(5)])
    billing = Agent("billing", instructions="b", model=model, tools=[lookup], max_turns=2)
    root = Agent("root", instructions="r", model=model, sub_agents=[billing])
    session = MemorySession()
    with pytest.raises(MaxTurnsExceeded) as info:
        await Runner.run(root, "x", session=session)
    assert (info.value.max_turns, info.value.agent) == (2, "billing")
    assert "billing" in str(info.value)
    assert [r.agent for r in model.requests] == ["root", "billing", "billing"]
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status == "failed"


async def test_turn_limit_with_handoffs_leaves_every_call_answered() -> None:
    model = _always_transfer({"root": "transfer_to_billing", "billing": "transfer_to_refunds",
                              "refunds": "lookup"})
    refunds_tools = (lookup,)
    root = team(model, child_tools=refunds_tools)
    # refunds has no lookup tool: the call is an unknown tool, answered with an error.
    session = MemorySession()
    with pytest.raises(MaxTurnsExceeded):
        await Runner.run(root, "x", session=session, max_turns=4)
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
    assert events[-1].status == "failed"


async def test_failing_on_handoff_hook_loses_no_tool_result() -> None:
    """Tools of the turn ran: their real results must be recorded, whatever the hook does."""
    ran: list[str] = []

    @tool
    def note(x: str) -> str:
        """Write a note."""
        ran.append(x)
        return f"noted {x}"

    def hook(ctx: Any, reason: str) -> None:
        raise RuntimeError("hook failed")

    model = ScriptedModel([[tool_call("note", {"x": "a"}, id="n"), tool_call("transfer_to_b",
                                                                              id="h")],
                           text("after")])
    b = Agent("b", instructions="b", model=model)
    root = Agent("root", instructions="r", model=model, tools=[note],
                 sub_agents=[handoff(b, on_handoff=hook)])
    session = MemorySession()
    try:
        await Runner.run(root, "go", session=session)
    except Exception:  # noqa: BLE001, S110 - ending the run is acceptable; losing data is not
        pass
    assert ran == ["a"]
    events = await session.get_events()
    results = {e.message.tool_call_id: e for e in of_type(events, ToolResultEvent)}
    assert results["n"].message.content == "noted a"
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent)


async def test_an_on_handoff_hook_that_raises_stops_the_transfer() -> None:
    def hook(ctx: Any, reason: str) -> None:
        raise RuntimeError("CRM is down")

    model = ScriptedModel([tool_call("transfer_to_billing", {"reason": "x"}, id="h"),
                           text("triage carries on")])
    billing = Agent("billing", instructions="b", model=model)
    triage = Agent("triage", instructions="t", model=model,
                   sub_agents=[handoff(billing, on_handoff=hook)])
    result = await Runner.run(triage, "hi")
    assert result.last_agent.name == "triage"
    assert result.handoffs == []
    assert [r.agent for r in model.requests] == ["triage", "triage"]
    assert result.final_output == "triage carries on"
    [res] = result.tool_results
    assert res.message.tool_call_id == "h" and res.is_error
    assert "transfer to billing failed" in res.message.content
    assert "CRM is down" in res.message.content
    assert res.traceback is not None
    assert "RuntimeError: CRM is down" in res.traceback and "Traceback" in res.traceback
    assert res.message in model.requests[1].messages
    assert_valid_protocol(await session_messages(result.session))


def test_a_team_cannot_be_a_handoff_target() -> None:
    # (Workflows can: see tests/test_handoff_targets.py.)
    from relayrace.teams.team import Team

    model = ScriptedModel([text("unused")])
    flow = Team("wf", agents=[Agent("s1", instructions="x", model=model),
                              Agent("s2", instructions="x", model=model)],
                default_target=TerminateTarget("done"))
    with pytest.raises(UserError, match="'wf'"):
        Agent("root", instructions="r", model=model, sub_agents=[flow])
    with pytest.raises(UserError, match="'wf'"):
        Agent("root", instructions="r", model=model, sub_agents=[handoff(flow)])
    # A failed construction leaves the workflow untouched, usable as a tool.
    assert flow.parent is None
    Agent("root", instructions="r", model=model, tools=[flow.as_tool()])
