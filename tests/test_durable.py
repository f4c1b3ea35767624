"""Durable runs on DBOS (``relayrace.durable``): workers in their own processes, killed at the
worst moments; a live worker finishes their runs without repeating a side effect or paying for
a model answer twice; approvals and questions wait with no process; one run per run id.

The kill points: right after DBOS recorded a model answer or a tool's result and before the
session log took it (``step:...``, the window a plain session log cannot close), and in a tool
after its side effect and before it returned (``effect:...``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("dbos")

from conftest import assert_valid_protocol  # noqa: E402
from durable_team import read_ledger, team  # noqa: E402
from relayrace import (  # noqa: E402
    Agent,
    AnswerError,
    DurableRunError,
    Runner,
    UserError,
    ask_user,
    tool,
)
from relayrace.core.events import ToolResultEvent, load_events  # noqa: E402
from relayrace.durable import DurableRunner  # noqa: E402
from relayrace.sessions.base import LogView  # noqa: E402
from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call  # noqa: E402

HERE = Path(__file__).resolve().parent
WORKER = HERE / "durable_worker.py"
HEARTBEAT, DEAD_AFTER, QUEUE_POLL = 0.2, 1.0, 0.2  # as durable_worker.py runs them
INPUT = "Charge me after the work."


def _path() -> str:
    """The tests' directory on the path, before the one this process was given (a checkout's
    own ``src``, when the tests run on it)."""
    return os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)


class Workers:
    """Worker processes of one test, on one database and one ledger; all killed at the end."""

    def __init__(self, db: str, ledger: Path) -> None:
        self.db, self.ledger = db, ledger
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, name: str, crash: str = "") -> subprocess.Popen[str]:
        env = dict(os.environ, RELAYRACE_TEST_LEDGER=str(self.ledger),
                   RELAYRACE_TEST_CRASH=crash, PYTHONPATH=_path())
        proc = subprocess.Popen([sys.executable, str(WORKER), self.db, name], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "ready\n", proc.communicate()[1][-3000:]
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.communicate()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(str(tmp_path / "sessions.db"), tmp_path / "ledger.jsonl")
    yield w
    w.stop()


def _sqlite_logs(db: str) -> dict[str, list[Any]]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT session_id, data FROM events ORDER BY id").fetchall()
    finally:
        conn.close()
    logs: dict[str, list[str]] = {}
    for sid, data in rows:
        logs.setdefault(sid, []).append(data)
    return {sid: load_events(lines) for sid, lines in logs.items()}


def _heartbeat_rows(db: str, executor_id: str) -> list[Any]:
    conn = sqlite3.connect(Path(db).with_suffix(".dbos.sqlite"))
    try:
        return conn.execute("SELECT * FROM relayrace_workers WHERE executor_id = ?",
                            (executor_id,)).fetchall()
    finally:
        conn.close()


def _check_no_damage(ledger: Path, logs: dict[str, list[Any]], *,
                     answers_once: bool = True) -> dict[str, str]:
    """Every side effect once, every model answer paid for once, every log a history a
    provider accepts; returns each tool's result text by tool name (the last).

    A model answer is paid for twice only when the kill came while it was in flight: after the
    provider answered and before DBOS recorded it. A worker running several runs is killed
    with some of them there, so tests of such workers pass ``answers_once=False``."""
    entries = read_ledger(ledger)
    effects = Counter(tuple(e[1:3]) for e in entries if e[0] == "effect")
    assert [k for k, n in effects.items() if n > 1] == []
    answers = Counter(tuple(e[1:]) for e in entries if e[0] == "model")
    if answers_once:
        assert [k for k, n in answers.items() if n > 1] == []
    results: dict[str, str] = {}
    for events in logs.values():
        view = LogView()
        view.fold(events)
        assert_valid_protocol(view.messages)
        for e in events:
            if isinstance(e, ToolResultEvent):
                results[e.tool_name] = e.message.content
    return results


async def _approve_and_finish(client: DurableRunner, run_id: str) -> str:
    result = await client.result(run_id, wait=60)
    assert result.status == "interrupted", result
    assert result.pending is not None
    assert [a.tool_name for a in result.pending.approvals] == ["charge"]
    again = await client.resume(result.session_id, approvals={
        a.call_id: True for a in result.pending.approvals})
    done = await client.result(again.run_id, wait=60)
    assert done.status == "completed", done
    assert done.output == "All done."
    return done.session_id


@pytest.mark.parametrize("crash", [
    "step:model:ops",  # the answer is recorded, the log does not have it yet
    "step:tool:fetch",  # a delegated child's tool result, recorded, not logged
    "step:tool:work",  # one of two parallel calls recorded, the other still running
    "effect:work-slow",  # the side effect happened; the tool never returned
    "ended",  # the run's stop is logged; DBOS never learned the workflow's outcome
])
async def test_a_killed_workers_run_is_finished_by_another_without_repeating_anything(
        workers: Workers, crash: str) -> None:
    first = workers.start("a", crash=crash)
    async with DurableRunner(team, db=workers.db, work=False) as client:
        run = await client.submit(INPUT, run_id="order-1")
        assert await asyncio.to_thread(first.wait, 60) == 9  # killed where the test said
        workers.start("b")
        await _approve_and_finish(client, run.run_id)
    # Killed beside the researcher child, the run may lose its answer in flight (see above).
    alone = crash in ("step:model:ops", "step:tool:fetch", "ended")
    results = _check_no_damage(workers.ledger, _sqlite_logs(workers.db), answers_once=alone)
    if crash == "step:tool:fetch":  # recorded: its result, not "outcome unknown"
        assert results["fetch"] == "contents of https://example.org/doc"
    if crash == "effect:work-slow":  # it ran and never returned: not run again
        assert results["work"].startswith("Outcome unknown")
    effects = [e[3] for e in read_ledger(workers.ledger) if e[0] == "effect"]
    assert effects.count("charge") == 1
    if crash == "step:model:ops":
        # The run went on from the recorded answer: the calls it made are the calls logged.
        assert effects.count("fetch") == 1


async def test_a_live_worker_takes_a_dead_workers_run_over_within_the_bound(
        workers: Workers) -> None:
    workers.start("live")
    doomed = workers.start("doomed", crash="step:model:ops")
    async with DurableRunner(team, db=workers.db, work=False) as client:
        # Submitted until the doomed worker takes one (the queue hands runs to either).
        ids = [f"order-{i}" for i in range(6)]
        for run_id in ids:
            await client.submit(INPUT, run_id=run_id)
        await asyncio.to_thread(doomed.wait, 60)
        died = time.monotonic()
        results = [await client.result(run_id, wait=60) for run_id in ids]
        recovered = time.monotonic() - died
        assert all(r.status == "interrupted" for r in results)
        # The doomed worker died at its first run's first recorded answer: none of its runs
        # ended there, so every run ended on the live worker, its own and the taken over.
        assert {(r.status, r.worker) for r in await client.runs(ids)} == {("ended", "live")}
        for run_id in ids:
            await _approve_and_finish(client, run_id)
    assert doomed.returncode == 9
    # The bound: the heartbeat goes stale (dead_after), a live worker notices at its next
    # beat, and the queue hands the run out at its next poll; the rest is the run itself.
    assert recovered < DEAD_AFTER + HEARTBEAT + QUEUE_POLL + 5.0
    _check_no_damage(workers.ledger, _sqlite_logs(workers.db), answers_once=False)


async def test_an_approval_waits_with_no_process_and_any_later_worker_goes_on(
        workers: Workers) -> None:
    first = workers.start("a")
    async with DurableRunner(team, db=workers.db, work=False) as client:
        run = await client.submit(INPUT)
        result = await client.result(run.run_id, wait=60)
        assert result.status == "interrupted"
        first.kill()
        first.wait()
        assert result.pending is not None
        effects = [e[3] for e in read_ledger(workers.ledger) if e[0] == "effect"]
        assert "charge" not in effects
        # Decided while no worker runs: the run waits on the queue, in the database only.
        again = await client.resume(run.session_id, approvals={
            a.call_id: True for a in result.pending.approvals})
        with pytest.raises(DurableRunError, match="still running"):
            await client.result(again.run_id, wait=1.0)
        workers.start("b")
        done = await client.result(again.run_id, wait=60)
    assert done.status == "completed" and done.output == "All done."
    _check_no_damage(workers.ledger, _sqlite_logs(workers.db))


async def test_submitting_a_run_id_twice_starts_one_run(workers: Workers) -> None:
    workers.start("a")
    async with DurableRunner(team, db=workers.db, work=False) as client:
        first = await client.submit(INPUT, run_id="same")
        second = await client.submit("Something else entirely.", run_id="same")
        assert second == first  # the first submission's run, in its session
        result = await client.result("same", wait=60)
    assert result.status == "interrupted"
    triage = [e for e in read_ledger(workers.ledger) if e[0] == "model" and e[2] == "triage"]
    assert len(triage) == 1
    logs = _sqlite_logs(workers.db)
    users = [e.message.content for e in logs[first.session_id]
             if e.kind == "message" and e.message.role == "user"]
    assert users == [INPUT]


async def test_workers_share_one_postgres_database(tmp_path: Path, postgres_url: str) -> None:
    workers = Workers(postgres_url, tmp_path / "ledger.jsonl")
    try:
        doomed = workers.start("p1", crash="step:tool:fetch")
        async with DurableRunner(team, db=postgres_url, work=False) as client:
            ids = [(await client.submit(INPUT, run_id=f"pg-{i}")).run_id for i in range(6)]
            assert await asyncio.to_thread(doomed.wait, 60) == 9
            workers.start("p2")
            workers.start("p3")
            finished = [await _approve_and_finish(client, run_id) for run_id in ids]
            store = client.store
            logs = {}
            for info in await store.list_sessions(limit=1000):
                logs[info.session_id] = await store.session(info.session_id).get_events()
        assert len(set(finished)) == 6
        _check_no_damage(workers.ledger, logs, answers_once=False)
        effects = Counter(e[3] for e in read_ledger(workers.ledger) if e[0] == "effect")
        assert effects["charge"] == 6
    finally:
        workers.stop()


def _relay(pay: list[str]) -> Agent[None]:
    """``a`` calls ``lookup``, then hands over to ``b``, which answers: bench/durable_steps.py's
    run (three model requests, a step tool, a handoff)."""

    @tool
    async def lookup(i: int) -> str:
        """Look up item i."""
        pay.append("lookup")
        return f"r{i}"

    b = Agent("b", instructions="Answer.", model=ScriptedModel([text("done")]))
    return Agent("a", instructions="Route.", tools=[lookup], sub_agents=[b], model=ScriptedModel(
        [tool_call("lookup", {"i": 1}), tool_call("transfer_to_b", {})]))


async def test_a_durable_run_writes_its_log_when_it_must_not_after_every_step(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A durable run's steps record the model's answers and the tools' results, so its log
    takes them with the next write that must be on record (the run's start, a tool call about
    to start, the run's end): three event writes for this run where a plain run on the same
    store makes seven, counted at the driver, and the same log."""
    import psycopg

    sent: list[str] = []
    original = psycopg.AsyncCursor.execute

    async def counted(self: Any, query: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(query))
        return await original(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
    pay: list[str] = []
    async with DurableRunner(_relay(pay), db=postgres_url) as durable:
        sent.clear()
        run = await durable.submit("find item 1")
        result = await durable.result(run.run_id, wait=30)
        durable_writes = sum("INSERT INTO relayrace_events" in q for q in sent)
        durable_log = await durable.store.session(run.session_id).get_events()
        session = durable.store.session()
        sent.clear()
        plain = await Runner.run(_relay(pay), "find item 1", session=session)
        plain_writes = sum("INSERT INTO relayrace_events" in q for q in sent)
        plain_log = await durable.store.session(session.session_id).get_events()
    assert result.status == "completed" and result.output == plain.final_output == "done"
    assert pay == ["lookup", "lookup"]
    assert [e.kind for e in durable_log] == [e.kind for e in plain_log] == [
        "run_started", "message", "message", "tool_started", "tool_result", "message",
        "tool_result", "handoff", "message", "run_finished"]
    assert (durable_writes, plain_writes) == (3, 7)


async def test_a_durable_runs_delegated_result_is_written_when_its_call_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A delegating tool's result is no step's record (its child's steps are): a durable run
    writes it the moment the call ends, while the model's answers wait for the next write that
    must be on record (a plain run would write each of them on its own)."""
    from relayrace.sessions.sqlite import SQLiteSession

    batches: list[tuple[str, list[str]]] = []
    original = SQLiteSession.append

    async def append(self: SQLiteSession, events: Any) -> None:
        batches.append((self.session_id, [e.kind for e in events]))
        await original(self, events)

    monkeypatch.setattr(SQLiteSession, "append", append)
    child = Agent("researcher", instructions="Research.", model=ScriptedModel([text("found")]))
    boss = Agent("boss", instructions="Ask.", tools=[child.as_tool(report=False)],
                 model=ScriptedModel([tool_call("researcher", {"query": "A"}), text("ok")]))
    async with DurableRunner(boss, db=tmp_path / "s.db") as durable:
        run = await durable.submit("find A")
        result = await durable.result(run.run_id, wait=30)
    assert result.status == "completed" and result.output == "ok"
    assert [kinds for sid, kinds in batches if sid == run.session_id] == [
        ["run_started", "message"],
        ["message", "tool_started"],  # the answer waited for the call's start
        ["delegation", "tool_result"],  # the child's result, at once
        ["message", "run_finished"]]


# -- in this process: questions, errors ------------------------------------------------------


@tool
async def refund(invoice: str) -> str:
    """Refund an invoice.

    Args:
        invoice: Which.
    """
    return f"refunded {invoice}"


async def test_a_question_waits_durably_and_the_answer_goes_on(tmp_path: Path) -> None:
    def play(request: Any) -> Any:
        tools = [m for m in request.messages if m.role == "tool"]
        if not tools:
            return tool_call("ask_user", {"question": "Which invoice?"})
        if len(tools) == 1:
            return tool_call("refund", {"invoice": tools[0].content})
        return text(f"Done: {tools[-1].content}.")

    agent = Agent("billing", instructions="Refunds.", model=FunctionModel(play),
                  tools=[ask_user, refund])
    async with DurableRunner(agent, db=tmp_path / "s.db", heartbeat=0.2,
                             dead_after=1.0) as durable:
        run = await durable.submit("Refund my invoice.")
        asked = await durable.result(run.run_id, wait=30)
        assert asked.status == "interrupted" and asked.pending is not None
        [question] = asked.pending.questions
        with pytest.raises(AnswerError):
            await durable.resume(run.session_id, answers={"nope": "INV-1"})
        again = await durable.resume(run.session_id, answers={question.id: "INV-7"})
        done = await durable.result(again.run_id, wait=30)
        # Followed from the log: the resumed run's call, its result and the answer, in order.
        followed = [e async for e in durable.follow(again.run_id)]
    assert done.status == "completed" and done.output == "Done: refunded INV-7."
    assert [e.kind for e in followed] == [
        "run_started", "tool_started", "tool_result", "message", "tool_started", "tool_result",
        "message", "run_finished"]
    assert followed[-1].status == "completed" and followed[-2].message.content == done.output
    # The same log a plain Runner would continue: a later turn runs on it in-process.
    more = await Runner.run(Agent("billing", instructions=".", model=ScriptedModel(
        [text("Anything else?")])), "Thanks", session=durable.store.session(run.session_id))
    assert more.final_output == "Anything else?"


async def test_a_run_that_fails_says_why(tmp_path: Path) -> None:
    agent = Agent("empty", instructions=".", model=ScriptedModel([text("")]))
    async with DurableRunner(agent, db=tmp_path / "s.db") as durable:
        run = await durable.submit("hi")
        result = await durable.result(run.run_id, wait=30)
    assert result.status == "failed"
    assert result.error.startswith("ModelBehaviorError: ") and "empty turn" in result.error


async def test_misuse_is_refused_with_what_would_be_right(tmp_path: Path) -> None:
    agent = Agent("a", instructions=".", model=ScriptedModel([text("hi")]))
    with pytest.raises(UserError, match="memory://"):
        DurableRunner(agent, db="memory://")
    with pytest.raises(UserError, match="two heartbeats"):
        DurableRunner(agent, db=tmp_path / "s.db", heartbeat=1.0, dead_after=1.5)
    idle = DurableRunner(agent, db=tmp_path / "s.db", work=False)
    with pytest.raises(UserError, match="not started"):
        await idle.submit("hi")
    async with idle:
        with pytest.raises(DurableRunError, match="no run has this id"):
            await idle.result("nothing")
        with pytest.raises(DurableRunError, match="waits for no approval"):
            await idle.resume("no-such-session", approvals={"x": True})
        with pytest.raises(UserError, match="non-empty text"):
            await idle.submit("")
        with pytest.raises(UserError, match="status is one of"):
            await idle.runs(status="done")  # type: ignore[arg-type]
    async with DurableRunner(agent, db=tmp_path / "s.db"):
        with pytest.raises(UserError, match="already works in this process"):
            await DurableRunner(agent, db=tmp_path / "s.db").start()
    unreachable = DurableRunner(agent, db="postgresql://nobody@127.0.0.1:1/nothing", work=False)
    with pytest.raises(DurableRunError, match="could not be reached .*connection") as caught:
        await unreachable.start()
    assert "check that it is up" in str(caught.value) and caught.value.run_id is None


async def test_the_default_database_needs_no_setup(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No --db: SQLite files under .relayrace/, made on the first use of a fresh directory."""
    monkeypatch.chdir(tmp_path)
    agent = Agent("a", instructions=".", model=ScriptedModel([text("hi")]))
    async with DurableRunner(agent, work=False) as durable:
        run = await durable.submit("hello", run_id="first")
    assert run.run_id == "first"
    assert (tmp_path / ".relayrace" / "sessions.dbos.sqlite").exists()


async def test_a_waiter_hears_when_the_database_fails() -> None:
    from relayrace.durable.results import _Results

    class Broken:
        async def list_workflows_async(self, **_: Any) -> list[Any]:
            raise OSError("the database went away")

    results = _Results(Broken())  # type: ignore[arg-type]
    with pytest.raises(DurableRunError, match="could not be read: OSError: the database went"):
        await asyncio.wait_for(results.wait("run-1"), 5)


async def test_a_run_that_ends_in_this_process_is_heard_at_once_not_at_the_next_poll(
        tmp_path: Path) -> None:
    """The waiter's sweep of every run waited for comes once a minute here. A run this worker
    started itself is never swept (no poll runs while only such runs are waited for): its
    workflow's task hands over what DBOS recorded. A run from the queue (a given run id) is
    swept once, then its end here hands its outcome over."""
    from relayrace.durable.results import _Results

    agent = Agent("a", instructions=".", model=ScriptedModel([text("hi"), text("again")]))
    async with DurableRunner(agent, db=tmp_path / "s.db", poll_interval=0.05) as durable:
        assert durable._client is not None
        durable._results = results = _Results(durable._client, interval=60)
        queried: list[list[str]] = []
        original = durable._client.list_workflows_async

        async def counted(**kw: Any) -> Any:
            if kw.get("workflow_ids") is not None:  # a waiter's (stop lists this worker's)
                queried.append(list(kw["workflow_ids"]))
            return await original(**kw)

        durable._client.list_workflows_async = counted  # type: ignore[method-assign]
        run = await durable.submit("hello")
        result = await durable.result(run.run_id, wait=20)
        assert queried == []  # started here: no read at all
        assert results._task is None  # and no poll waking every interval meanwhile
        queued = await durable.submit("more", run_id="run-queued", session_id=run.session_id)
        second = await durable.result(queued.run_id, wait=20)
        await results.aclose()
    assert result.status == "completed" and result.output == "hi"
    assert second.status == "completed" and second.output == "again"
    assert queried == [["run-queued"]]  # the first sweep only


async def test_a_worker_starts_its_own_runs_at_once_within_its_concurrency(
        tmp_path: Path) -> None:
    """With the queue polled every 30 s, runs this worker has room for start at once; one
    beyond ``worker_concurrency`` waits on the queue, for any worker."""
    running, most = 0, 0
    release = asyncio.Event()

    async def respond(request: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await release.wait()
        running -= 1
        return text("done")

    agent = Agent("a", instructions=".", model=FunctionModel(respond, record=False))
    async with DurableRunner(agent, db=tmp_path / "s.db", poll_interval=30,
                             worker_concurrency=2) as durable:
        started = time.monotonic()
        first = [await durable.submit(f"run {n}") for n in range(2)]
        extra = await durable.submit("run 2")
        async with asyncio.timeout(20):
            while running < 2:
                await asyncio.sleep(0.01)
        assert [i.status for i in await durable.runs([extra.run_id])] == ["queued"]
        release.set()
        results = [await durable.result(r.run_id, wait=20) for r in first]
        took = time.monotonic() - started
    assert [r.output for r in results] == ["done", "done"]
    assert most == 2
    assert took < 20  # the queue's next poll would have come after 30 s


def test_the_cli_submits_to_a_worker_and_resumes_after_approval(tmp_path: Path) -> None:
    db = str(tmp_path / "sessions.db")
    env = dict(os.environ, RELAYRACE_TEST_LEDGER=str(tmp_path / "ledger.jsonl"),
               PYTHONPATH=_path())
    cli = [sys.executable, "-m", "relayrace.cli"]
    target = f"{HERE / 'durable_team.py'}:team"
    worker = subprocess.Popen([*cli, "worker", target, "--db", db, "--heartbeat", "0.2",
                               "--dead-after", "1", "--drain", "5"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        asked = subprocess.run([*cli, "submit", target, INPUT, "--db", db, "--json",
                                "--timeout", "60"], env=env, capture_output=True, text=True,
                               timeout=120)
        assert asked.returncode == 3, asked.stderr
        ended = json.loads(asked.stdout)
        [approval] = ended["pending"]["approvals"]
        done = subprocess.run([*cli, "submit", target, "--session", ended["session_id"],
                               "--approve", approval["call_id"], "--db", db, "--timeout", "60",
                               "--follow"],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "All done." in done.stdout and "answered by ops" in done.stdout
        # Followed as the worker ran it: the approved call and its result, then the answer.
        assert "charge" in done.stdout and "charged" in done.stdout, done.stdout
        assert done.stdout.index("charged") < done.stdout.index("All done.")
        missing = subprocess.run([*cli, "submit", target, "--db", db], env=env,
                                 capture_output=True, text=True, timeout=120)
        assert missing.returncode == 1 and "Give the user message" in missing.stderr
    finally:
        worker.terminate()  # drains, hands back what is left, exits
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "works queue relayrace-triage" in err
    for said in ("starts on queue", "took run run-", "drains", "stopped"):  # its life, logged
        assert said in err, err


async def test_a_durable_server_queues_its_runs_for_workers(workers: Workers) -> None:
    """`relayrace serve --durable`: the API's runs go to the queue; a worker runs them; the
    server follows each through the session log, approvals included."""
    pytest.importorskip("fastapi")
    import httpx

    from relayrace.server import create_app
    from test_server import sse

    workers.start("a")
    app = create_app(team, store=workers.db, durable=True)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        sid = (await c.post("/api/sessions", json={})).json()["session_id"]
        member = await c.post(f"/api/sessions/{sid}/runs", json={"input": "x", "agent": "ops"})
        assert member.status_code == 400 and "--agent ops" in member.text  # not queued
        stopped = (await c.post(f"/api/sessions/{sid}/runs", json={"input": INPUT})).json()
        assert stopped["status"] == "waiting", stopped
        assert stopped["event_count"] > 0  # the worker's events, read from the log
        [approval] = stopped["result"]["pending"]["approvals"]
        assert approval["tool"] == "charge"
        queued = await c.post(f"/api/sessions/{sid}/pending",
                              json={"approvals": {approval["call_id"]: True}})
        assert queued.status_code == 202
        run_id = queued.json()["run_id"]
        for _ in range(600):
            run = (await c.get(f"/api/runs/{run_id}")).json()
            if run["status"] != "running":
                break
            await asyncio.sleep(0.05)
        assert run["status"] == "finished", run
        assert run["result"]["final_output"] == "All done."
        assert run["result"]["last_agent"] == "ops" and run["result"]["usage"]["requests"] > 0
        events = sse((await c.get(f"/api/runs/{run_id}/events")).text)
        kinds = [e["kind"] for _, e in events]
        assert kinds[0] == "run_started" and kinds[-1] == "run_end"
        assert "tool_result" in kinds  # the charge, as the worker logged it
        logged = (await c.get(f"/api/sessions/{sid}")).json()["events"]
        assert [e["approved"] for e in logged if e["kind"] == "approval_decided"] == [True]
    effects = [e[3] for e in read_ledger(workers.ledger) if e[0] == "effect"]
    assert effects.count("charge") == 1



def test_one_live_worker_claims_a_dead_one_and_a_dead_claimers_claim_lapses(
        tmp_path: Path) -> None:
    from relayrace.durable.workers import Heartbeat

    async def nothing(dead: str) -> int:
        return 0

    async def no_runs() -> None:
        return None

    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    beats = {name: Heartbeat(url, name, every=0.05, dead_after=0.3, take_over=nothing,
                             taken=no_runs)
             for name in ("dead", "a", "b")}
    try:
        beats["dead"]._create()
        for beat in beats.values():
            assert beat.beat()  # the first beat inserts the row
        time.sleep(0.35)  # real time is tested: past dead_after, a silent worker counts as dead
        beats["a"].beat()
        beats["b"].beat()
        assert beats["a"].claim_dead() == ["dead"]  # one claimer wins...
        assert beats["b"].claim_dead() == []  # ...the other finds it claimed
        assert not beats["dead"].beat()  # a worker that wakes finds itself taken over
        time.sleep(0.35)  # "a" died before releasing: its claim lapses, and its own row
        beats["b"].beat()
        assert sorted(beats["b"].claim_dead()) == ["a", "dead"]
        beats["b"].release("dead")
        beats["b"].release("a")
        assert beats["b"].claim_dead() == []
    finally:
        for beat in beats.values():
            beat.close()


async def test_a_worker_taken_for_dead_while_alive_lets_its_run_finish_on_the_new_owner(
        workers: Workers) -> None:
    """The race a loaded machine makes: a worker's heartbeat stops past ``dead_after`` while
    its run goes on, a live worker takes the run over, then the first one wakes up mid-step."""
    paused = workers.ledger.with_name("PAUSED")
    workers.start("starved", crash="pause:tool:work")
    async with DurableRunner(team, db=workers.db, work=False) as client:
        run = await client.submit(INPUT, run_id="raced")
        for _ in range(600):  # the run is in its first `work` call, the heartbeat silent
            if paused.exists():
                break
            await asyncio.sleep(0.05)
        assert paused.exists()
        workers.start("owner")
        # Taken for dead: its heartbeat row is gone once the run is back on the queue; then
        # a worker (either: the queue hands it to whichever asks first) runs it again.
        for _ in range(600):
            if not _heartbeat_rows(workers.db, "starved") and \
                    [r.status for r in await client.runs([run.run_id])] == ["running"]:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the starved worker's run was never taken over")
        paused.unlink()  # the starved worker wakes up, still in the step it was in
        await _approve_and_finish(client, run.run_id)
    logs = _sqlite_logs(workers.db)
    ends = [e for e in logs[run.session_id] if e.kind == "run_finished"]
    assert [e.status for e in ends] == ["interrupted", "completed"]  # no failed end logged
    _check_no_damage(workers.ledger, logs, answers_once=False)
