"""The coordination meta-tools: delegate_to_agent, war_room, agent_pipeline, debate_ensemble."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest

from conftest import assert_valid_protocol, session_messages
from relayrace import Agent, ModelProviderError, Runner, ToolResultEvent, UserError
from relayrace.teams.meta_tools import DelegationConfig
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call

META_NAMES = {"delegate_to_agent", "war_room", "agent_pipeline", "debate_ensemble"}


# --------------------------------------------------------------------------- helpers


def specialist(name: str, answer: Any, *, description: str | None = None,
               delay: float = 0.0) -> Agent:
    """A specialist with its own model; ``answer`` is a turn or a function of the request."""

    def fn(request: Any) -> Any:
        return answer(request) if callable(answer) else answer

    return Agent(name, instructions=f"You are {name}.",
                 description=description if description is not None else f"{name} skills",
                 model=FunctionModel(fn, name=f"model-{name}", delay=delay))


def timed(name: str, log: list[tuple[str, float, float]], *, fail: bool = False,
          pause: float = 0.05) -> Agent:
    """A specialist whose model records when each request started and ended."""

    async def fn(request: Any) -> Any:
        start = time.perf_counter()
        await asyncio.sleep(pause)  # a model's latency: when requests overlap is tested
        log.append((name, start, time.perf_counter()))
        if fail:
            raise RuntimeError(f"{name} broke down")
        return text(f"SUMMARY: {name} result")

    return Agent(name, instructions=f"You are {name}.", description=f"{name} skills",
                 model=FunctionModel(fn, name=f"model-{name}"))


def lead(specialists: Sequence[Agent], turns: list[Any], **options: Any) -> tuple[Agent, Any]:
    model = ScriptedModel(turns)
    return Agent("lead", instructions="You lead.", model=model, specialists=specialists,
                 **options), model


def child_requests(agent: Agent) -> list[Any]:
    return agent.model.requests  # type: ignore[union-attr, no-any-return]


async def one_result(result: Any) -> ToolResultEvent:
    """The run made exactly one tool call with exactly one result: return it."""
    messages = await session_messages(result.session)
    assert_valid_protocol(messages)
    calls = [c for m in messages for c in m.tool_calls]
    assert len(calls) == 1
    [res] = result.tool_results
    assert res.message.tool_call_id == calls[0].id
    return res


# --------------------------------------------------------------------------- offering


async def test_all_four_meta_tools_are_offered_by_default() -> None:
    agent, model = lead([specialist("alice", text("a"))], [text("hi")])
    await Runner.run(agent, "go")
    assert set(model.requests[0].tools) == META_NAMES


async def test_meta_tools_can_be_chosen() -> None:
    agent, model = lead([specialist("alice", text("a"))], [text("hi")],
                        meta_tools=("delegate", "pipeline"))
    await Runner.run(agent, "go")
    assert set(model.requests[0].tools) == {"delegate_to_agent", "agent_pipeline"}


async def test_unknown_meta_tool_and_missing_specialists_are_user_errors() -> None:
    with pytest.raises(UserError):
        Agent("lead", instructions="x", specialists=[specialist("alice", text("a"))],
              meta_tools=("telepathy",))  # type: ignore[arg-type]
    with pytest.raises(UserError):
        Agent("lead", instructions="x", meta_tools=("delegate",))


async def test_every_specialist_description_appears_in_every_meta_tool_description() -> None:
    seen: list[Any] = []

    def fn(request: Any) -> Any:
        seen.extend(request.tools)
        return text("hi")

    team = [specialist("alice", text("a"), description="Reads balance sheets"),
            specialist("bob", text("b"), description="Knows tax law")]
    agent = Agent("lead", instructions="x", model=FunctionModel(fn), specialists=team)
    await Runner.run(agent, "go")
    by_name = {d.name: d for d in seen}
    assert set(by_name) == META_NAMES
    for name in sorted(META_NAMES):
        description = by_name[name].description
        for spec in team:
            assert spec.name in description, (name, spec.name)
            assert spec.description in description, (name, spec.description)


# --------------------------------------------------------------------------- delegate


async def test_delegate_runs_one_child_and_returns_its_report() -> None:
    alice = specialist("alice", text("SUMMARY: alice found X-42\nCONFIDENCE: high - sure"))
    agent, model = lead([alice], [
        tool_call("delegate_to_agent", {"agent_type": "alice", "task": "find X",
                                        "audience": "the board of directors"}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert not res.is_error
    assert "X-42" in res.message.content
    [req] = child_requests(alice)
    assert req.messages[-1].content == "find X"
    assert "the board of directors" in req.instructions
    assert "submit_report" in req.instructions and req.tools == ["submit_report"]
    assert result.reports[0].summary == "alice found X-42"
    assert result.final_output == "done"
    assert res.message in model.requests[1].messages


async def test_delegate_to_an_unknown_specialist_lists_the_valid_ones() -> None:
    alice, bob = specialist("alice", text("a")), specialist("bob", text("b"))
    agent, _ = lead([alice, bob], [
        tool_call("delegate_to_agent", {"agent_type": "mallory", "task": "t"}), text("ok")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error
    assert "mallory" in res.message.content
    assert "alice" in res.message.content and "bob" in res.message.content
    assert child_requests(alice) == [] and child_requests(bob) == []
    assert result.final_output == "ok"


async def test_delegate_child_failure_is_an_error_result() -> None:
    broken = specialist("alice", lambda req: (_ for _ in ()).throw(RuntimeError("kaput")))
    agent, _ = lead([broken], [
        tool_call("delegate_to_agent", {"agent_type": "alice", "task": "t"}), text("ok")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error and "kaput" in res.message.content
    assert result.final_output == "ok"


async def test_child_timeout_from_the_delegation_config() -> None:
    slow = specialist("alice", text("late"), delay=5)
    agent, _ = lead([slow], [
        tool_call("delegate_to_agent", {"agent_type": "alice", "task": "t"}), text("ok")],
        delegation=DelegationConfig(child_timeout=0.05))
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error and "timed out" in res.message.content


# --------------------------------------------------------------------------- war room


async def test_war_room_runs_children_concurrently_in_the_order_given() -> None:
    log: list[tuple[str, float, float]] = []
    team = [timed("alice", log), timed("bob", log), timed("carol", log)]
    agent, _ = lead(team, [
        tool_call("war_room", {"agents": [{"type": "carol", "task": "t3"},
                                          {"type": "alice", "task": "t1"},
                                          {"type": "bob", "task": "t2"}]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert not res.is_error
    assert len(log) == 3
    latest_start = max(start for _, start, _ in log)
    earliest_end = min(end for _, _, end in log)
    assert latest_start < earliest_end, "the children did not overlap"
    content = res.message.content
    positions = [content.index(f"{name} result") for name in ("carol", "alice", "bob")]
    assert positions == sorted(positions)
    assert len(result.delegations) == 3


async def test_war_room_failing_child_gets_an_error_entry_and_the_others_return() -> None:
    log: list[tuple[str, float, float]] = []
    team = [timed("alice", log), timed("bob", log, fail=True), timed("carol", log)]
    agent, _ = lead(team, [
        tool_call("war_room", {"agents": [{"type": "alice", "task": "t1"},
                                          {"type": "bob", "task": "t2"},
                                          {"type": "carol", "task": "t3"}]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    content = res.message.content
    assert "alice result" in content and "carol result" in content
    assert "bob broke down" in content
    assert content.index("alice result") < content.index("bob broke down") \
        < content.index("carol result")
    assert sorted(d.ok for d in result.delegations) == [False, True, True]
    assert result.final_output == "done"


async def test_war_room_max_concurrency_one_serializes_children() -> None:
    log: list[tuple[str, float, float]] = []
    team = [timed("alice", log), timed("bob", log), timed("carol", log)]
    agent, _ = lead(team, [
        tool_call("war_room", {"agents": [{"type": n, "task": "t"}
                                          for n in ("alice", "bob", "carol")]}),
        text("done")], delegation=DelegationConfig(max_concurrency=1))
    result = await Runner.run(agent, "go")
    await one_result(result)
    spans = sorted((start, end) for _, start, end in log)
    assert len(spans) == 3
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, "children overlapped despite max_concurrency=1"


async def test_war_room_unknown_type_lists_valid_specialists() -> None:
    log: list[tuple[str, float, float]] = []
    team = [timed("alice", log), timed("bob", log)]
    agent, _ = lead(team, [
        tool_call("war_room", {"agents": [{"type": "alice", "task": "t"},
                                          {"type": "zed", "task": "t"}]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error
    assert "zed" in res.message.content
    assert "alice" in res.message.content and "bob" in res.message.content
    assert log == []  # nothing ran


# --------------------------------------------------------------------------- pipeline


async def test_pipeline_passes_each_stage_the_previous_report() -> None:
    first = specialist("analyst", text("SUMMARY: stage one found S1-MARK\n"
                                       "CONFIDENCE: medium - partial"))
    second = specialist("writer", lambda req: text(
        "SUMMARY: wrote it up" + (" using S1-MARK" if "S1-MARK" in req.messages[-1].content
                                  else "")))
    agent, _ = lead([first, second], [
        tool_call("agent_pipeline", {"stages": [{"type": "analyst", "task": "analyse"},
                                                {"type": "writer", "task": "write"}]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert not res.is_error
    [stage2] = child_requests(second)
    user = stage2.messages[-1]
    assert user.role == "user"
    assert user.content.startswith("write")
    assert "stage one found S1-MARK" in user.content
    [stage1] = child_requests(first)
    assert stage1.messages[-1].content == "analyse"
    assert "wrote it up using S1-MARK" in res.message.content
    assert [d.child_agent for d in result.delegations] == ["analyst", "writer"]


async def test_a_failing_stage_stops_the_pipeline() -> None:
    first = specialist("analyst", text("SUMMARY: stage one found S1-MARK"))
    broken = specialist("checker", lambda req: (_ for _ in ()).throw(RuntimeError("no data")))
    third = specialist("writer", text("SUMMARY: never"))
    agent, _ = lead([first, broken, third], [
        tool_call("agent_pipeline", {"stages": [{"type": "analyst", "task": "a"},
                                                {"type": "checker", "task": "b"},
                                                {"type": "writer", "task": "c"}]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error
    content = res.message.content
    assert "stage 2" in content and "checker" in content
    assert "no data" in content
    assert "S1-MARK" in content  # the reports so far
    assert child_requests(third) == []
    assert result.final_output == "done"


async def test_pipeline_unknown_type_lists_valid_specialists() -> None:
    first = specialist("analyst", text("x"))
    agent, _ = lead([first], [
        tool_call("agent_pipeline", {"stages": [{"type": "analyst", "task": "a"},
                                                {"type": "nobody", "task": "b"}]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error and "nobody" in res.message.content
    assert "analyst" in res.message.content
    assert child_requests(first) == []


# --------------------------------------------------------------------------- debate


def debater(name: str, answers: list[str]) -> Agent:
    queue = list(answers)
    return specialist(name, lambda req: text(queue.pop(0) if len(queue) > 1 else queue[0]))


async def test_debate_stops_early_at_consensus_of_normalized_answers() -> None:
    alice = debater("alice", ["It is obviously the capital.\nFINAL ANSWER: Paris"])
    bob = debater("bob", ["Thinking...\nfinal answer: paris."])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital of France?",
                                      "participants": ["alice", "bob"], "rounds": 3}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert not res.is_error
    content = res.message.content
    assert "CONSENSUS" in content and "NO CONSENSUS" not in content
    assert "paris" in content.lower()
    assert "CONFIDENCE" in content
    assert len(child_requests(alice)) == 1 and len(child_requests(bob)) == 1
    assert child_requests(alice)[0].messages[-1].content.startswith("Capital of France?")
    assert "FINAL ANSWER" in child_requests(alice)[0].instructions


async def test_debate_without_consensus_returns_the_dissent() -> None:
    alice = debater("alice", ["FINAL ANSWER: Paris"])
    bob = debater("bob", ["FINAL ANSWER: Lyon"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital of France?",
                                      "participants": ["alice", "bob"], "rounds": 2}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    content = res.message.content
    assert "NO CONSENSUS" in content
    assert "DISSENT" in content
    assert "Paris" in content and "Lyon" in content
    assert len(child_requests(alice)) == 2 and len(child_requests(bob)) == 2
    # In round 2 each participant is shown the other's answer.
    assert "Lyon" in child_requests(alice)[1].messages[-1].content
    assert "Paris" in child_requests(bob)[1].messages[-1].content


async def test_debate_participants_may_change_their_mind() -> None:
    alice = debater("alice", ["FINAL ANSWER: Paris"])
    bob = debater("bob", ["FINAL ANSWER: Lyon", "You convinced me. FINAL ANSWER: Paris"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital?", "participants": ["alice", "bob"],
                                      "rounds": 3}),
        text("done")])
    result = await Runner.run(agent, "go")
    content = (await one_result(result)).message.content
    assert "CONSENSUS after 2" in content
    assert len(child_requests(bob)) == 2


async def test_debate_participants_may_be_models() -> None:
    gpt = FunctionModel(lambda req: text("FINAL ANSWER: Paris"), name="gpt-test")
    alice = debater("alice", ["FINAL ANSWER: paris"])
    agent, model = lead([alice], [
        tool_call("debate_ensemble", {"question": "Capital?",
                                      "participants": ["alice", "gpt"]}),
        text("done")], delegation=DelegationConfig(debate_models={"gpt": gpt}))
    result = await Runner.run(agent, "go")
    content = (await one_result(result)).message.content
    assert len(gpt.requests) == 1
    assert gpt.requests[0].agent == "gpt"
    assert "CONSENSUS" in content and "NO CONSENSUS" not in content
    assert "gpt" in next(t for t in agent.tools if t.name == "debate_ensemble").description


async def test_a_judge_decides_consensus() -> None:
    judge_model = FunctionModel(lambda req: text('{"consensus": true, "answer": "Paris"}'))
    judge = Agent("judge", instructions="You judge.", model=judge_model)
    alice = debater("alice", ["FINAL ANSWER: Paris"])
    bob = debater("bob", ["FINAL ANSWER: the French capital city, Paris"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital?", "participants": ["alice", "bob"],
                                      "rounds": 3}),
        text("done")], delegation=DelegationConfig(judge=judge))
    result = await Runner.run(agent, "go")
    content = (await one_result(result)).message.content
    assert "CONSENSUS" in content and "NO CONSENSUS" not in content
    assert "Paris" in content
    assert len(judge_model.requests) == 1
    judged = judge_model.requests[0].messages[-1].content
    assert "French capital city" in judged and "Capital?" in judged
    assert len(child_requests(alice)) == 1


@pytest.mark.parametrize("verdict", ['{"a": ' + "[" * 3000 + "}",
                                     '{"consensus": ' + "9" * 5000 + "}"])
async def test_a_judge_answering_unparsable_json_falls_back_to_comparing(verdict: str) -> None:
    judge = Agent("judge", instructions="You judge.", model=FunctionModel(lambda req: verdict))
    alice = debater("alice", ["FINAL ANSWER: Paris"])
    bob = debater("bob", ["FINAL ANSWER: Paris"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital?", "participants": ["alice", "bob"],
                                      "rounds": 1}),
        text("done")], delegation=DelegationConfig(judge=judge))
    result = await Runner.run(agent, "go")
    content = (await one_result(result)).message.content
    assert "CONSENSUS" in content and "NO CONSENSUS" not in content  # the answers agree


async def test_a_judge_can_deny_consensus_of_equal_answers() -> None:
    judge_model = FunctionModel(lambda req: text('{"consensus": false, "answer": ""}'))
    judge = Agent("judge", instructions="You judge.", model=judge_model)
    alice = debater("alice", ["FINAL ANSWER: Paris"])
    bob = debater("bob", ["FINAL ANSWER: Paris"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital?", "participants": ["alice", "bob"],
                                      "rounds": 2}),
        text("done")], delegation=DelegationConfig(judge=judge))
    result = await Runner.run(agent, "go")
    content = (await one_result(result)).message.content
    assert "NO CONSENSUS" in content
    assert len(judge_model.requests) == 2
    assert len(child_requests(alice)) == 2


async def test_debate_unknown_participant_lists_the_valid_ones() -> None:
    alice = debater("alice", ["FINAL ANSWER: Paris"])
    bob = debater("bob", ["FINAL ANSWER: Paris"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "Capital?",
                                      "participants": ["alice", "oracle"]}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error
    assert "oracle" in res.message.content
    assert "alice" in res.message.content and "bob" in res.message.content
    assert child_requests(alice) == []


async def test_debate_refuses_duplicate_participants() -> None:
    alice = debater("alice", ["FINAL ANSWER: 42", "FINAL ANSWER: 7"])
    bob = debater("bob", ["FINAL ANSWER: 42"])
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "q", "participants": ["alice", "alice"],
                                      "rounds": 1}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    assert res.is_error
    assert "only once" in res.message.content and "alice" in res.message.content
    assert "CONSENSUS" not in res.message.content
    assert child_requests(alice) == [] and child_requests(bob) == []
    assert await result.session.children() == []
    assert result.final_output == "done"


async def test_debate_where_every_participant_fails_has_no_consensus() -> None:
    def broken(request: Any) -> Any:
        raise ModelProviderError("HTTP 429")

    alice, bob = specialist("alice", broken), specialist("bob", broken)
    agent, _ = lead([alice, bob], [
        tool_call("debate_ensemble", {"question": "q", "participants": ["alice", "bob"],
                                      "rounds": 2}),
        text("done")])
    result = await Runner.run(agent, "go")
    res = await one_result(result)
    content = res.message.content
    assert content.startswith("NO CONSENSUS"), content
    assert "CONSENSUS after" not in content
    assert "CONFIDENCE: high" not in content
    assert "HTTP 429" in content
    assert result.final_output == "done"
