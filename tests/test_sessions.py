"""Sessions: memory and SQLite logs, export, concurrency, resume, interrupted runs."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    assert_valid_protocol,
    messages_of,
    of_type,
    root_with_billing,
    session_messages,
)
from relayrace import (
    Agent,
    AgentEvent,
    HandoffEvent,
    Message,
    MessageEvent,
    RunFinishedEvent,
    Runner,
    RunStartedEvent,
    ToolCall,
    ToolResultEvent,
    tool,
)
from relayrace.core.events import dump_events, load_events
from relayrace.sessions import MemorySession, Session, SQLiteSession
from relayrace.sessions.base import LogView
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call


def root_stopped_after(prompt: str, *calls: ToolCall) -> list[AgentEvent]:
    """The log root leaves when its run dies right after the model asked for ``calls``."""
    return [
        RunStartedEvent(agent="root", path="root"),
        MessageEvent(agent="root", path="root", message=Message.user(prompt)),
        MessageEvent(agent="root", path="root", message=Message.assistant("", calls, name="root")),
    ]


@pytest.fixture(params=["memory", "sqlite"])
def make_session(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def make(session_id: str = "s1") -> Session:
        if request.param == "memory":
            return MemorySession(session_id)
        return SQLiteSession(session_id, tmp_path / "db.sqlite")

    return make


async def test_session_accumulates_runs(make_session: Any) -> None:
    session = make_session()
    model = ScriptedModel([text("one"), tool_call("add", {"a": 1, "b": 2}), text("two")])
    agent = root_with_billing(model)
    await Runner.run(agent, "first", session=session)
    await Runner.run(agent, "second", session=session)
    events = await session.get_events()
    assert [type(e) for e in events].count(RunStartedEvent) == 2
    assert [e.status for e in of_type(events, RunFinishedEvent)] == ["completed", "completed"]
    assert [m.content for m in messages_of(events)] == ["first", "one", "second", "", "3", "two"]
    assert session.session_id == "s1"


async def test_empty_session_has_no_events(make_session: Any) -> None:
    assert await make_session("fresh").get_events() == []


async def test_export_jsonl_round_trips(make_session: Any) -> None:
    session = make_session()
    model = ScriptedModel([
        [text("checking"), tool_call("add", {"a": 1, "b": 2})],
        tool_call("add", '{"a": bad'),
        tool_call("transfer_to_billing", {"reason": "money"}),
        text("done"),
    ])
    await Runner.run(root_with_billing(model), "go", session=session)
    exported = await session.export_jsonl()
    assert exported.endswith("\n")
    lines = exported.splitlines()
    events = await session.get_events()
    assert len(lines) == len(events)
    loaded = load_events(lines)
    assert loaded == events
    kinds = {type(e) for e in loaded}
    assert {RunStartedEvent, MessageEvent, ToolResultEvent, HandoffEvent,
            RunFinishedEvent} <= kinds
    # Usage on assistant messages survives the round trip.
    usage = [e.usage for e in loaded if isinstance(e, MessageEvent) and e.usage is not None]
    assert usage and all(u.requests == 1 for u in usage)


async def test_sqlite_uses_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    session = SQLiteSession("w", path)
    await Runner.run(Agent("a", instructions="x", model=ScriptedModel([text("hi")])), "hello",
                     session=session)
    conn = sqlite3.connect(path)
    try:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()
    assert mode.lower() == "wal"


async def test_sqlite_list_sessions(tmp_path: Path) -> None:
    path = tmp_path / "list.db"
    model = ScriptedModel([text("a"), text("b"), text("c")])
    agent = Agent("a", instructions="x", model=model)
    for sid in ("alpha", "beta", "gamma"):
        await Runner.run(agent, "hi", session=SQLiteSession(sid, path))
    listed = SQLiteSession.list_sessions(path)
    assert {i.session_id for i in listed} == {"alpha", "beta", "gamma"}
    for info in listed:
        assert info.event_count == 4  # started, user, assistant, finished
    assert SQLiteSession.list_sessions(tmp_path / "other.db") == []


async def test_sqlite_batch_is_atomic(tmp_path: Path) -> None:
    session = SQLiteSession("atomic", tmp_path / "a.db")
    good = MessageEvent(agent="a", message=Message.user("kept"))
    await session.append([good])

    class NotAnEvent:
        kind = "message"

    with pytest.raises(Exception):  # noqa: B017 - any failure is fine, partial writes are not
        await session.append([MessageEvent(agent="a", message=Message.user("lost")),
                              NotAnEvent()])  # type: ignore[list-item]
    events = await SQLiteSession("atomic", tmp_path / "a.db").get_events()
    assert [e.message.content for e in events] == ["kept"]


async def test_sqlite_resume_from_a_second_object(tmp_path: Path) -> None:
    path = tmp_path / "resume.db"
    model = ScriptedModel([
        tool_call("transfer_to_billing", {"reason": "invoice"}),
        text("billing answers"),
        text("billing again"),
    ])
    agent = root_with_billing(model)
    billing = agent.find_agent("billing")
    assert billing is not None
    billing.sticky = True  # it keeps the conversation, so the next run continues with it
    await Runner.run(agent, "invoice?", session=SQLiteSession("conv", path))
    again = SQLiteSession("conv", path)
    before = await again.get_events()
    assert [(e.agent, e.to_agent) for e in of_type(before, HandoffEvent)] == [
        ("root", "billing")]
    result = await Runner.run(agent, "and now?", session=again)
    assert model.requests[2].agent == "billing"
    assert result.last_agent.name == "billing"
    assert [m.content for m in model.requests[2].messages if m.role == "user"] == [
        "invoice?", "and now?"]
    third = SQLiteSession("conv", path)
    assert await third.get_events() == await again.get_events()


async def test_sqlite_concurrent_runs_of_different_sessions(tmp_path: Path) -> None:
    path = tmp_path / "many.db"

    def fn(req: Any) -> Any:
        last = req.messages[-1]
        if last.role == "user":
            n = int(last.content.split()[-1])
            return [tool_call("add", {"a": n, "b": 1000}), tool_call("add", {"a": n, "b": 0})]
        return text(f"answer {last.content}")

    model = FunctionModel(fn, delay=0.005)
    agent = root_with_billing(model)
    sessions = [SQLiteSession(f"s{i}", path) for i in range(20)]
    results = await asyncio.gather(
        *(Runner.run(agent, f"number {i}", session=s) for i, s in enumerate(sessions))
    )
    for i, (session, result) in enumerate(zip(sessions, results, strict=True)):
        assert result.final_output == f"answer {i}"
        events = await SQLiteSession(f"s{i}", path).get_events()
        assert events == result.new_events
        msgs = messages_of(events)
        assert msgs[0].content == f"number {i}"
        assert [m.content for m in msgs if m.role == "tool"] == [str(i + 1000), str(i)]
        assert_valid_protocol(msgs)
        assert session.info.event_count == len(events)
    assert len(SQLiteSession.list_sessions(path)) == 20


async def test_resume_executes_dangling_tool_calls(make_session: Any) -> None:
    """A log that stops after the model asked for tools (the process died) resumes with None."""
    session = make_session("crashed")
    executed: list[int] = []

    @tool
    def charge(amount: int) -> str:
        """Charge an amount."""
        executed.append(amount)
        return f"charged {amount}"

    await session.append(root_stopped_after("charge me", ToolCall("c1", "charge", '{"amount": 5}'),
                                            ToolCall("c2", "charge", '{"amount": 7}')))
    model = ScriptedModel([text("charged both")])
    agent = root_with_billing(model, tools=(charge,))
    result = await Runner.run(agent, None, session=session)
    assert sorted(executed) == [5, 7]
    assert result.final_output == "charged both"
    seen = model.requests[0].messages
    assert [(m.tool_call_id, m.content) for m in seen if m.role == "tool"] == [
        ("c1", "charged 5"), ("c2", "charged 7")]
    assert_valid_protocol(await session_messages(session))


async def test_resume_runs_dangling_calls_as_the_active_agent(make_session: Any) -> None:
    session = make_session("crashed2")
    await session.append([
        *root_stopped_after("bill me", ToolCall("h", "transfer_to_billing", '{"reason": "bill"}')),
        ToolResultEvent(agent="root", path="root", message=Message.tool("h", "Transferred"),
                        tool_name="transfer_to_billing"),
        HandoffEvent(agent="root", path="root", to_agent="billing", reason="bill",
                     tool_call_id="h"),
        MessageEvent(agent="billing", path="billing", message=Message.assistant(
            "", (ToolCall("x", "add", '{"a": 2, "b": 3}'),), name="billing")),
    ])
    model = ScriptedModel([text("5 it is")])
    result = await Runner.run(root_with_billing(model), None, session=session)
    assert model.requests[0].agent == "billing"
    assert result.last_agent.name == "billing"
    (ev,) = result.tool_results
    assert ev.agent == "billing" and ev.message.content == "5"
    assert_valid_protocol(await session_messages(session))


async def test_resume_performs_a_dangling_handoff(make_session: Any) -> None:
    session = make_session("crashed-handoff")
    await session.append(
        root_stopped_after("bill me", ToolCall("h", "transfer_to_billing", '{"reason": "money"}')))
    model = ScriptedModel([text("billing here")])
    result = await Runner.run(root_with_billing(model), None, session=session)
    assert [(h.agent, h.to_agent) for h in result.handoffs] == [("root", "billing")]
    assert model.requests[0].agent == "billing"
    assert result.final_output == "billing here"
    assert_valid_protocol(await session_messages(session))


async def test_new_input_on_dangling_calls_answers_them_first(make_session: Any) -> None:
    session = make_session("crashed3")
    await session.append(root_stopped_after("go", ToolCall("d", "add", '{"a": 1, "b": 1}')))
    model = ScriptedModel([text("fresh start")])
    await Runner.run(root_with_billing(model), "something else", session=session)
    assert_valid_protocol(model.requests[0].messages)
    assert_valid_protocol(await session_messages(session))
    assert model.requests[0].messages[-1].content == "something else"


async def test_model_crash_after_tool_turn_resumes_cleanly(make_session: Any) -> None:
    from relayrace import ModelProviderError

    session = make_session("flaky")
    executed: list[int] = []

    @tool
    def step(n: int) -> str:
        """Do a step."""
        executed.append(n)
        return f"step {n}"

    model = ScriptedModel([
        tool_call("step", {"n": 1}),
        ModelProviderError("timeout", status_code=504),
        text("finished"),
    ])
    agent = Agent("root", instructions="x", model=model, tools=[step])
    with pytest.raises(ModelProviderError):
        await Runner.run(agent, "work", session=session)
    assert_valid_protocol(await session_messages(session))
    result = await Runner.run(agent, None, session=session)
    assert result.final_output == "finished"
    assert executed == [1]  # the completed step is not repeated
    assert [m.content for m in model.requests[2].messages if m.role == "tool"] == ["step 1"]


async def test_cancelled_run_leaves_a_valid_log(make_session: Any) -> None:
    session = make_session("cancel")
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        started.set()
        await asyncio.sleep(10)  # still running when the run is cancelled
        return "never"

    model = ScriptedModel([[tool_call("slow"), tool_call("slow")]])
    task = asyncio.create_task(
        Runner.run(Agent("a", instructions="x", model=model, tools=[slow]), "go",
                   session=session))
    await asyncio.wait_for(started.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
    assert isinstance(events[-1], RunFinishedEvent) and events[-1].status != "completed"


async def test_a_database_written_by_the_first_schema_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, parent_id TEXT, "
        "parent_tool_call_id TEXT, path TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL, "
        "updated_at REAL NOT NULL, event_count INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, "
        "kind TEXT NOT NULL, data TEXT NOT NULL);"
        "INSERT INTO sessions VALUES ('old1', NULL, NULL, '', 1.0, 1.0, 0);"
    )
    old.commit()
    old.close()
    assert [i.session_id for i in SQLiteSession.list_sessions(path)] == ["old1"]
    session = SQLiteSession("old1", path)
    agent = Agent("a", instructions="x", model=ScriptedModel([text("hello")]))
    result = await Runner.run(agent, "hi", session=session)
    assert result.final_output == "hello"
    assert [e.kind for e in await SQLiteSession("old1", path).get_events()][-1] == "run_finished"


async def test_a_failed_first_turn_keeps_the_input_and_resumes(make_session: Any) -> None:
    from relayrace import ModelProviderError

    session = make_session("first-turn")
    model = ScriptedModel([ModelProviderError("overloaded", status_code=529), text("hello")])
    agent = Agent("root", instructions="x", model=model)
    with pytest.raises(ModelProviderError):
        await Runner.run(agent, "hi there", session=session)
    events = await session.get_events()
    assert [m.content for m in messages_of(events)] == ["hi there"]
    assert of_type(events, RunFinishedEvent)[-1].status == "failed"
    result = await Runner.run(agent, None, session=session)
    assert result.final_output == "hello"
    assert [m.content for m in model.requests[1].messages] == ["hi there"]


async def test_a_durable_session_holds_the_input_before_the_model_is_called(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db.sqlite"
    seen: list[list[str]] = []

    async def answer(request: Any) -> Any:
        other = SQLiteSession("durable", db)  # what a restarted process would read
        seen.append([m.content for m in messages_of(await other.get_events())])
        return text("ok")

    session = SQLiteSession("durable", db)
    assert session.persistent and not MemorySession().persistent
    await Runner.run(Agent("root", instructions="x", model=FunctionModel(answer)), "keep me",
                     session=session)
    assert seen == [["keep me"]]


async def test_a_durable_session_holds_a_turns_calls_before_they_run(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    seen: list[list[str]] = []

    @tool
    async def probe() -> str:
        """Look at what a restarted process would read."""
        events = await SQLiteSession("calls", db).get_events()
        seen.append([c.name for m in messages_of(events) for c in m.tool_calls])
        return "seen"

    model = ScriptedModel([tool_call("probe"), text("done")])
    agent = Agent("root", instructions="x", model=model, tools=[probe])
    await Runner.run(agent, "go", session=SQLiteSession("calls", db))
    assert seen == [["probe"]]


async def test_a_memory_session_keeps_calls_and_results_when_a_tool_is_cancelled() -> None:
    @tool
    async def stuck() -> str:
        """Never finishes."""
        raise asyncio.CancelledError

    session = MemorySession()
    model = ScriptedModel([tool_call("stuck")])
    agent = Agent("root", instructions="x", model=model, tools=[stuck])
    with pytest.raises(asyncio.CancelledError):
        await Runner.run(agent, "go", session=session)
    events = await session.get_events()
    assert_valid_protocol(messages_of(events))
    assert [m.role for m in messages_of(events)] == ["user", "assistant", "tool"]
    assert of_type(events, RunFinishedEvent)[-1].status == "failed"


async def test_the_view_takes_in_what_was_appended_after_it_was_read(
    make_session: Any,
) -> None:
    session = make_session("view")
    model = ScriptedModel([text("one"), text("two")])
    agent = Agent("root", instructions="x", model=model)
    await Runner.run(agent, "first", session=session)
    assert [m.content for m in (await session.view()).messages] == ["first", "one"]
    await session.append([MessageEvent(agent="root", path="root", message=Message.user("note"))])
    await Runner.run(agent, "second", session=session)
    view = await session.view()
    assert [m.content for m in view.messages] == ["first", "one", "note", "second", "two"]
    fresh = LogView()
    fresh.fold(await session.get_events())
    assert fresh.messages == view.messages  # the same as one built from the whole log


# --------------------------------------------------------------------------- ids


async def test_session_ids_do_not_repeat_when_the_application_seeds_random(
    tmp_path: Path,
) -> None:
    db = tmp_path / "ids.db"
    random.seed(42)
    alice = SQLiteSession(path=db)
    alice_child = alice.child(path="root/helper", tool_call_id="c1")
    random.seed(42)
    bob = SQLiteSession(path=db)
    bob_child = alice.child(path="root/helper", tool_call_id="c1")
    assert alice.session_id != bob.session_id
    assert alice_child.session_id != bob_child.session_id
    model = ScriptedModel([text("noted"), text("hello bob")])
    agent = Agent("root", instructions="x", model=model)
    await Runner.run(agent, "alice's account number is 1234", session=alice)
    await Runner.run(agent, "hi, I am bob", session=bob)
    assert [m.content for m in model.requests[1].messages] == ["hi, I am bob"]


async def test_a_database_with_events_of_the_second_schema_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "v2.db"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, parent_id TEXT, "
        "parent_tool_call_id TEXT, path TEXT NOT NULL DEFAULT '', "
        "child_key TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL);"
        "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, "
        "kind TEXT NOT NULL, time REAL NOT NULL, data TEXT NOT NULL);"
        "CREATE INDEX events_session ON events(session_id, id);"
        "INSERT INTO sessions VALUES ('a', NULL, NULL, '', '', 1.0);"
        "INSERT INTO sessions VALUES ('b', NULL, NULL, '', '', 1.0);"
        "PRAGMA user_version = 2;"
    )
    for sid, content in [("a", "a1"), ("b", "b1"), ("a", "a2")]:  # interleaved sessions
        event = MessageEvent(agent="root", path="root", message=Message.user(content))
        old.execute("INSERT INTO events (session_id, kind, time, data) VALUES (?, ?, ?, ?)",
                    (sid, "message", event.time, dump_events([event])[0]))
    old.commit()
    old.close()
    session = SQLiteSession("a", path)
    model = ScriptedModel([text("a answered")])
    await Runner.run(Agent("root", instructions="x", model=model), "a3", session=session)
    assert [m.content for m in model.requests[0].messages] == ["a1", "a2", "a3"]
    assert [m.content for m in messages_of(await SQLiteSession("a", path).get_events())] == [
        "a1", "a2", "a3", "a answered"]
    assert [m.content for m in messages_of(await SQLiteSession("b", path).get_events())] == [
        "b1"]
