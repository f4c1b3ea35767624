"""Pausing for a person's answer: the ask_user tool, RunContext.ask_user, and resumption."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import assert_valid_protocol, of_type, requests_of, session_messages
from relayrace import (
    Agent,
    AnswerError,
    QuestionAskedEvent,
    RunContext,
    RunFinishedEvent,
    Runner,
    UserError,
    ask_user,
    tool,
)
from relayrace.agents.approvals import PendingRun
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import ScriptedModel, text, tool_call

BOOKED: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    BOOKED.clear()


@tool
def book(ctx: RunContext[Any], city: str) -> str:
    """Book a trip, asking the traveller what the request leaves open."""
    seat = ctx.ask_user(f"Window or aisle to {city}?", choices=["window", "aisle"])
    meal = ctx.ask_user("Any meal wishes?")
    BOOKED.append(f"{city}/{seat}/{meal}")
    return f"booked {city}, {seat} seat, meal: {meal}"


@tool(requires_approval=True)
def pay(ctx: RunContext[Any]) -> str:
    """Pay (needs approval), with the card the user picks."""
    card = ctx.ask_user("Which card?", choices=["visa", "amex"])
    BOOKED.append(f"paid/{card}")
    return f"paid with {card}"


ASK = tool_call("ask_user", {"question": "Which city?"}, id="call_ask")


def concierge(model: Any, *tools: Any) -> Agent:
    return Agent("concierge", instructions="Help travellers.", model=model,
                 tools=list(tools) or [ask_user])


# --------------------------------------------------------------------------- the ask_user tool


async def test_the_ask_user_tool_stops_the_run_with_a_pending_question() -> None:
    model = ScriptedModel([ASK])
    result = await Runner.run(concierge(model), "plan a trip")
    assert result.pending is not None and result.pending.approvals == []
    [q] = result.pending.questions
    assert (q.question, q.choices, q.call_id, q.tool_name, q.path) == (
        "Which city?", None, "call_ask", "ask_user", "concierge")
    assert q.id.startswith("q_")
    assert result.reason == "awaiting an answer"
    [event] = of_type(result.new_events, QuestionAskedEvent)
    assert event.question_id == q.id and event.tool_call_id == "call_ask"
    assert of_type(result.new_events, RunFinishedEvent)[-1].status == "interrupted"


async def test_the_answer_is_the_tool_result_and_the_run_goes_on_at_the_same_step() -> None:
    model = ScriptedModel([ASK, text("Lisbon it is.")])
    session = MemorySession()
    first = await Runner.run(concierge(model), "plan a trip", session=session)
    assert first.pending is not None
    [q] = first.pending.questions
    result = await Runner.resume(first.pending, answers={q.id: "Lisbon"})
    assert result.final_output == "Lisbon it is."
    [res] = result.tool_results
    assert res.message.tool_call_id == "call_ask" and res.message.content == "Lisbon"
    assert len(model.requests) == 2  # no model turn was spent on the question
    assert_valid_protocol(await session_messages(session))


async def test_the_model_choices_are_enforced_at_resume() -> None:
    model = ScriptedModel([tool_call("ask_user", {"question": "Proceed?",
                                                  "choices": ["yes", "no"]}, id="c1"),
                           text("ok")])
    first = await Runner.run(concierge(model), "go")
    assert first.pending is not None
    [q] = first.pending.questions
    assert q.choices == ["yes", "no"]
    with pytest.raises(AnswerError, match=r"'maybe' is not an answer.*'yes', 'no'"):
        await Runner.resume(first.pending, answers={q.id: "maybe"})
    done = await Runner.resume(first.pending, answers={q.id: "no"})  # nothing was lost
    assert done.tool_results[0].message.content == "no"


async def test_a_bad_question_from_the_model_is_told_to_it() -> None:
    model = ScriptedModel([tool_call("ask_user", {"question": "  "}, id="c1"), text("ok")])
    result = await Runner.run(concierge(model), "go")
    assert result.pending is None
    [res] = result.tool_results
    assert res.is_error and "needs a question" in res.message.content


# --------------------------------------------------------------------------- bad resumes


async def test_a_question_never_answered_is_a_typed_error_naming_it() -> None:
    model = ScriptedModel([ASK, text("done")])
    session = MemorySession()
    first = await Runner.run(concierge(model), "go", session=session)
    assert first.pending is not None
    [q] = first.pending.questions
    before = list(session.events)
    with pytest.raises(AnswerError, match=q.id) as info:
        await Runner.resume(first.pending, answers={})
    assert info.value.missing == [q.id] and "Which city?" in str(info.value)
    assert session.events == before  # nothing written: the session still waits
    result = await Runner.resume(first.pending, answers={q.id: "Rome"})
    assert result.final_output == "done"


async def test_an_answer_for_an_unknown_id_is_a_typed_error() -> None:
    model = ScriptedModel([ASK])
    first = await Runner.run(concierge(model), "go")
    assert first.pending is not None
    [q] = first.pending.questions
    with pytest.raises(AnswerError, match=r"q_nope.*pending"):
        await Runner.resume(first.pending, answers={q.id: "Rome", "q_nope": "x"})


async def test_an_answer_that_is_not_text_is_a_typed_error() -> None:
    model = ScriptedModel([ASK])
    first = await Runner.run(concierge(model), "go")
    assert first.pending is not None
    [q] = first.pending.questions
    with pytest.raises(AnswerError, match="must be a string"):
        await Runner.resume(first.pending, answers={q.id: 3})  # type: ignore[dict-item]


async def test_an_answer_is_used_once() -> None:
    model = ScriptedModel([ASK, text("done"), ASK])
    first = await Runner.run(concierge(model), "go")
    assert first.pending is not None
    [q] = first.pending.questions
    await Runner.resume(first.pending, answers={q.id: "Rome"})
    with pytest.raises(UserError, match="no longer waits"):
        await Runner.resume(first.pending, answers={q.id: "Oslo"})


# --------------------------------------------------------------------------- RunContext.ask_user


async def test_a_tool_asking_twice_gets_both_answers_and_completes_once() -> None:
    model = ScriptedModel([tool_call("book", {"city": "Oslo"}, id="call_book"), text("Booked.")])
    first = await Runner.run(concierge(model, book), "book Oslo")
    assert first.pending is not None
    [seat] = first.pending.questions
    assert seat.choices == ["window", "aisle"] and seat.call_id == "call_book"
    second = await Runner.resume(first.pending, answers={seat.id: "aisle"})
    assert second.pending is not None and BOOKED == []
    [meal] = second.pending.questions
    assert meal.id != seat.id and meal.question == "Any meal wishes?"
    assert meal.answered == ["aisle"]
    # JSON round trip, as if the process had restarted in between
    restored = PendingRun.from_json(second.pending.to_json(), entry=second.last_agent,
                                    session=second.session)
    assert json.loads(second.pending.to_json())["questions"][0]["id"] == meal.id
    done = await Runner.resume(restored, answers={meal.id: "vegetarian"})
    assert BOOKED == ["Oslo/aisle/vegetarian"]
    assert done.tool_results[0].message.content == "booked Oslo, aisle seat, meal: vegetarian"
    assert done.final_output == "Booked."


async def test_a_question_asked_by_an_approved_call_keeps_its_approval() -> None:
    model = ScriptedModel([tool_call("pay", {}, id="call_pay"), text("Paid.")])
    first = await Runner.run(concierge(model, pay), "pay")
    assert first.pending is not None
    [approval] = first.pending.approvals
    second = await Runner.resume(first.pending, approvals={approval.call_id: True})
    assert second.pending is not None and second.pending.approvals == []
    [q] = second.pending.questions
    done = await Runner.resume(second.pending, answers={q.id: "amex"})
    assert BOOKED == ["paid/amex"] and done.final_output == "Paid."


async def test_a_question_survives_a_restart_with_sqlite(tmp_path: Any) -> None:
    db = tmp_path / "q.db"
    model = ScriptedModel([tool_call("book", {"city": "Rome"}, id="call_book")])
    first = await Runner.run(concierge(model, book), "book", session=SQLiteSession("q", db))
    assert first.pending is not None
    # A new process: new objects, the question read back from disk.
    model2 = ScriptedModel([text("Booked.")])
    agent = concierge(model2, book)
    pending = await PendingRun.from_session(SQLiteSession("q", db), entry=agent)
    assert pending is not None
    assert pending.questions == first.pending.questions
    second = await Runner.resume(pending, answers={pending.questions[0].id: "window"})
    assert second.pending is not None
    [meal] = second.pending.questions
    done = await Runner.resume(second.pending, answers={meal.id: "none"})
    assert BOOKED == ["Rome/window/none"] and done.final_output == "Booked."


async def test_ask_user_refuses_a_malformed_question() -> None:
    @tool
    def bad(ctx: RunContext[Any]) -> str:
        """Asks with an empty list of choices."""
        return ctx.ask_user("Which?", choices=[])

    model = ScriptedModel([tool_call("bad", {}, id="c1"), text("ok")])
    result = await Runner.run(concierge(model, bad), "go")
    assert result.pending is None
    assert "choices are a non-empty list" in result.tool_results[0].message.content


# --------------------------------------------------------------------------- delegated children


def delegating(model: Any) -> Agent:
    child = Agent("planner", instructions="Plan trips.", model=model, tools=[ask_user])
    return Agent("coordinator", instructions="Coordinate.", model=model,
                 tools=[child.as_tool(report=False)])


async def test_a_question_inside_a_delegated_child_surfaces_and_resumes_there() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [tool_call("planner", {"query": "plan"}, id="call_agent"),
                        text("Planned.")],
        "planner": [ASK, text("Trip to Porto.")],
    })
    session = MemorySession()
    first = await Runner.run(delegating(model), "plan", session=session)
    assert first.pending is not None
    [q] = first.pending.questions
    [child] = session.child_sessions
    assert q.path == "coordinator/planner" and q.session_id == child.session_id
    [outer] = of_type(session.events, QuestionAskedEvent)  # surfaced on the outer log
    assert outer.session_id == child.session_id and outer.question_id == q.id
    assert len(requests_of(model, "coordinator")) == 1  # the parent's model never answers it

    result = await Runner.resume(first.pending, answers={q.id: "Porto"})
    assert result.final_output == "Planned."
    assert len(session.child_sessions) == 1  # the child went on in its own session
    child_msgs = await session_messages(child)
    assert "Porto" in [m.content for m in child_msgs if m.role == "tool"]
    assert_valid_protocol(child_msgs)
    assert "Trip to Porto." in result.tool_results[0].message.content


async def test_questions_of_two_children_have_distinct_ids() -> None:
    model = ScriptedModel(by_agent={
        "coordinator": [[tool_call("planner", {"query": "a"}, id="call_a"),
                         tool_call("planner", {"query": "b"}, id="call_b")], text("Both.")],
        "planner": [ASK, ASK, text("one"), text("two")],  # both children reuse call_ask
    })
    first = await Runner.run(delegating(model), "plan two")
    assert first.pending is not None
    ids = [q.id for q in first.pending.questions]
    assert len(set(ids)) == 2
    with pytest.raises(AnswerError, match=ids[1]):
        await Runner.resume(first.pending, answers={ids[0]: "Rome"})
    done = await Runner.resume(first.pending, answers={ids[0]: "Rome", ids[1]: "Oslo"})
    assert done.final_output == "Both."


async def test_ask_user_outside_a_tool_call_is_a_user_error() -> None:
    def instructions(ctx: RunContext[Any]) -> str:
        return ctx.ask_user("Who are you?")

    agent = Agent("a", instructions=instructions, model=ScriptedModel([text("x")]))
    with pytest.raises(UserError, match="inside a tool call only"):
        await Runner.run(agent, "go")


async def test_new_input_instead_of_an_answer_tells_the_model_it_was_not_answered(
        tmp_path: Any) -> None:
    session = SQLiteSession("n", tmp_path / "n.db")
    model = ScriptedModel([ASK, text("Rome, then.")])
    first = await Runner.run(concierge(model), "plan", session=session)
    assert first.pending is not None
    result = await Runner.run(concierge(model), "Let's say Rome", session=session)
    assert result.final_output == "Rome, then."
    [res] = result.tool_results
    assert res.message.tool_call_id == "call_ask"
    assert res.message.content.startswith("Not finished: this call was waiting for a person")
    assert_valid_protocol(await session_messages(session))
