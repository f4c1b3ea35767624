"""Crash safety: what a killed run leaves on disk, and what resuming it does.

A process runs a team (``fixtures/crash_team.py``) on a SQLite session and dies inside a tool,
after the tool's side effect and before its result is recorded, as SIGKILL would leave it. The
test then resumes the session in its own process and checks, from the tools' ledger and the log,
that nothing ran twice, nothing recorded was lost, and the model is told the truth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import assert_valid_protocol, session_messages
from relayrace import (
    Agent,
    RunContext,
    Runner,
    RunResult,
    ToolResultEvent,
    ToolStartedEvent,
    tool,
)
from relayrace.agents.approvals import PendingRun
from relayrace.core.events import AgentEvent, DelegationEvent, RunFinishedEvent
from relayrace.sessions import SQLiteSession
from relayrace.testing import ScriptedModel, tool_call

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import crash_team  # noqa: E402

WAIT = 5.0  # seconds a resume waits for the dead process's lease to lapse


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("LEDGER", str(path))
    monkeypatch.delenv("CRASH_IN", raising=False)
    return path


def crash(db: Path, plan: str, crash_in: str, text: str = "go") -> None:
    """Run the team in a new process that dies inside the tool ``crash_in``."""
    env = {**os.environ, "CRASH_IN": crash_in}
    done = subprocess.run([sys.executable, str(FIXTURES / "crash_team.py"), str(db), plan, text],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 137, done.stderr


async def resume(plan: str, session: SQLiteSession) -> RunResult:
    """Continue the session in this process, once the dead process's lease has lapsed."""
    return await Runner.run(crash_team.team(plan), None, session=session, wait_for_session=WAIT)


def effects(ledger: Path) -> list[list[str]]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def names(ledger: Path) -> list[str]:
    return [e[3] for e in effects(ledger)]


def results(events: list[AgentEvent]) -> dict[str, str]:
    return {e.tool_name: e.message.content for e in events if isinstance(e, ToolResultEvent)}


async def test_a_call_that_finished_is_kept_when_a_sibling_dies(tmp_path: Path,
                                                                 ledger: Path) -> None:
    db = tmp_path / "s.db"
    crash(db, "parallel", crash_in="slow")
    session = SQLiteSession("s", db)
    on_disk = await session.get_events()
    # fast finished while slow was running: its result was written then, not with the batch.
    assert results(on_disk) == {"transfer_to_ops": results(on_disk)["transfer_to_ops"],
                                "fast": "fast done"}
    assert {e.tool_call_id for e in on_disk if isinstance(e, ToolStartedEvent)} == {
        "call_fast", "call_slow"}
    result = await resume("parallel", session)
    assert result.final_output == "all done"
    assert names(ledger) == ["fast", "slow"]  # nothing ran twice
    told = results(await session.get_events())
    assert told["slow"].startswith("Outcome unknown: this call started at ")
    assert "agent ops" in told["slow"] and "Not executed" not in told["slow"]
    assert_valid_protocol(await session_messages(session))


async def test_an_idempotent_call_whose_outcome_is_unknown_runs_again_with_its_key(
        tmp_path: Path, ledger: Path) -> None:
    db = tmp_path / "s.db"
    crash(db, "idempotent", crash_in="slow_idempotent")
    session = SQLiteSession("s", db)
    result = await resume("idempotent", session)
    assert result.final_output == "all done"
    runs = [e for e in effects(ledger) if e[3] == "slow_idempotent"]
    assert len(runs) == 2 and runs[0][2] == runs[1][2] != ""  # the same call key both times
    assert [e[3] for e in effects(ledger)].count("fast") == 1
    assert results(await session.get_events())["slow_idempotent"] == "slow_idempotent done"


async def test_new_input_after_a_crash_tells_started_from_never_run(tmp_path: Path,
                                                                    ledger: Path) -> None:
    db = tmp_path / "s.db"
    crash(db, "sequential", crash_in="first")
    session = SQLiteSession("s", db)
    result = await Runner.run(crash_team.team("sequential"), "any news?", session=session,
                              wait_for_session=WAIT)
    assert result.final_output == "all done"
    told = results(await session.get_events())
    assert told["first"].startswith("Outcome unknown")  # it ran: never "not executed"
    # Said as it happened: the call started, and its result was never recorded.
    assert "this call started at " in told["first"]
    assert "its result was never recorded (the run was interrupted)" in told["first"]
    assert "before this call ran" not in told["first"]
    assert told["second"] == "Not executed: the run was interrupted before this call started."
    assert names(ledger) == ["first"]
    assert_valid_protocol(await session_messages(session))


async def test_a_delegated_child_continues_its_own_log_on_resume(tmp_path: Path,
                                                                 ledger: Path) -> None:
    db = tmp_path / "s.db"
    crash(db, "delegate", crash_in="summarize")
    session = SQLiteSession("s", db)
    [child_info] = await session.children()
    result = await resume("delegate", session)
    assert result.final_output == "all done"
    assert names(ledger) == ["fetch", "summarize"]  # the child's finished call did not run again
    assert [c.session_id for c in await session.children()] == [child_info.session_id]
    child = SQLiteSession(child_info.session_id, db)
    told = results(await child.get_events())
    assert told["fetch"] == "the document" and told["summarize"].startswith("Outcome unknown")
    [delegation] = result.delegations
    assert delegation.child_session_id == child_info.session_id and delegation.ok
    assert_valid_protocol(await session_messages(child))


async def test_a_child_finished_before_its_parent_logged_it_is_recorded_on_resume(
        tmp_path: Path, ledger: Path) -> None:
    # Killed between the child's last write (its run's end) and the parent's write of the
    # delegation: the child's log is complete, the parent's does not name the child.
    db = tmp_path / "s.db"
    crash(db, "delegate", crash_in="delegation")
    session = SQLiteSession("s", db)
    [child_info] = await session.children()
    child_events = await SQLiteSession(child_info.session_id, db).get_events()
    assert isinstance(child_events[-1], RunFinishedEvent)
    assert child_events[-1].status == "completed"
    assert not [e for e in await session.get_events() if isinstance(e, DelegationEvent)]
    result = await resume("delegate", session)
    assert result.final_output == "all done"
    assert names(ledger) == ["fetch", "summarize"]  # the child's work was reused, not redone
    assert [c.session_id for c in await session.children()] == [child_info.session_id]
    # The parent's log now accounts for the child: its delegation, report and usage.
    [delegation] = [e for e in await session.get_events() if isinstance(e, DelegationEvent)]
    assert delegation.child_session_id == child_info.session_id and delegation.ok
    assert delegation.tool_call_id == "call_researcher" and delegation.report is not None
    assert delegation.report["summary"] == "found it"
    assert delegation.usage is not None and delegation.usage.requests == 3
    assert result.delegations == [delegation]
    assert_valid_protocol(await session_messages(session))


async def test_an_approved_call_cut_short_is_put_to_the_person_again(tmp_path: Path,
                                                                     ledger: Path) -> None:
    db = tmp_path / "s.db"
    crash(db, "approval", crash_in="charge")  # approved, started, then the process died
    session = SQLiteSession("s", db)
    team = crash_team.team("approval")
    stale = await PendingRun.from_session(session, entry=team)
    assert stale is not None  # the first stop's request, approved before the crash
    again = await Runner.resume(stale, approvals={"call_charge": True},
                               wait_for_session=WAIT)
    assert names(ledger) == ["charge"]  # that approval was used: it does not run the call again
    assert again.pending is not None
    [asked] = again.pending.approvals
    assert asked.call_id == "call_charge" and asked.note.startswith("Outcome unknown")
    restored = PendingRun.from_json(again.pending.to_json(), entry=team, session=session)
    assert restored.approvals[0].note == asked.note
    done = await Runner.resume(restored, approvals={"call_charge": False})
    assert done.final_output == "all done"
    assert names(ledger) == ["charge"]
    assert results(await session.get_events())["charge"].startswith("Rejected")


async def test_an_answered_question_cut_short_is_not_answered_again(tmp_path: Path,
                                                                   ledger: Path) -> None:
    db = tmp_path / "s.db"
    crash(db, "question", crash_in="pay")  # asked, answered "visa", paid, then the process died
    session = SQLiteSession("s", db)
    team = crash_team.team("question")
    stale = await PendingRun.from_session(session, entry=team)
    assert stale is not None  # the question of the first stop, answered before the crash
    [q] = stale.questions
    done = await Runner.resume(stale, answers={q.id: "visa"}, wait_for_session=WAIT)
    assert names(ledger) == ["pay"]  # that answer was used: the call does not run again
    assert done.final_output == "all done"
    assert results(await session.get_events())["pay"].startswith("Outcome unknown")
    assert_valid_protocol(await session_messages(session))


async def test_a_question_on_disk_is_answered_from_another_process(tmp_path: Path,
                                                                   ledger: Path) -> None:
    db = tmp_path / "s.db"
    first = await Runner.run(crash_team.team("question"), "go", session=SQLiteSession("s", db))
    assert first.pending is not None and not ledger.exists()  # nothing paid yet
    # The asking process is gone: a new one finds the question on disk and answers it.
    done = subprocess.run([sys.executable, "-c", (
        "import asyncio, sys; sys.path.insert(0, sys.argv[2]); import crash_team\n"
        "from relayrace import Runner\nfrom relayrace.agents.approvals import PendingRun\n"
        "from relayrace.sessions import SQLiteSession\n"
        "async def go():\n"
        "    p = await PendingRun.from_session(SQLiteSession('s', sys.argv[1]),\n"
        "                                      entry=crash_team.team('question'))\n"
        "    r = await Runner.resume(p, answers={p.questions[0].id: 'amex'})\n"
        "    print(r.final_output)\n"
        "asyncio.run(go())\n"), str(db), str(FIXTURES)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "all done"
    assert names(ledger) == ["pay"]
    assert results(await SQLiteSession("s", db).get_events())["pay"] == "paid with amex"


async def test_a_transfer_and_its_result_are_written_in_one_batch(tmp_path: Path) -> None:
    batches: list[list[str]] = []

    class Recording(SQLiteSession):
        async def append(self, events: Any) -> None:
            batches.append([e.kind for e in events])
            await super().append(events)

    model = ScriptedModel([tool_call("transfer_to_b", {"reason": "r"}), "hi"])
    b = Agent("b", instructions="B.", model=model)
    a = Agent("a", instructions="A.", model=model, sub_agents=[b])
    await Runner.run(a, "go", session=Recording("s", tmp_path / "s.db"))
    [batch] = [b for b in batches if "handoff" in b]
    assert batch == ["tool_result", "handoff"]


async def test_call_keys_differ_for_repeated_call_ids(tmp_path: Path) -> None:
    keys: list[str] = []

    @tool
    def note(ctx: RunContext[Any]) -> str:
        """Note the key."""
        keys.append(ctx.call_key)
        return "ok"

    # Some servers number calls per response: call_0 in every turn.
    model = ScriptedModel([tool_call("note", id="call_0"), tool_call("note", id="call_0"),
                           "done"])
    agent = Agent("a", instructions="A.", model=model, tools=[note])
    session = SQLiteSession("s", tmp_path / "s.db")
    await Runner.run(agent, "go", session=session)
    assert len(keys) == 2 and keys[0] != keys[1]
    assert all(k.startswith("s:") and k.endswith(":call_0") for k in keys)


async def test_memory_sessions_record_no_starts() -> None:
    @tool
    def work() -> str:
        """Work."""
        return "ok"

    model = ScriptedModel([tool_call("work"), "done"])
    result = await Runner.run(Agent("a", instructions="A.", model=model, tools=[work]), "go")
    # A memory log dies with the process: no crash to resume from, nothing to mark.
    assert [e.kind for e in result.new_events] == [
        "run_started", "message", "message", "tool_result", "message", "run_finished"]
