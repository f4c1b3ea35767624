"""A2A both ways, two processes on 127.0.0.1: ``relayrace a2a serve`` in a subprocess, and
relayrace calling it (`RemoteAgent` as a tool and as a handoff target), plus the a2a-sdk's
own client against relayrace's server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
)

from conftest import assert_valid_protocol, messages_of, wait_until  # noqa: E402
from relayrace import Agent, Runner, StatusEvent, UserError  # noqa: E402
from relayrace.connect.a2a import RemoteAgent, context_id_for, state_name  # noqa: E402
from relayrace.connect.a2a_server import session_id_for  # noqa: E402
from relayrace.core.events import HandoffEvent, ToolResultEvent  # noqa: E402
from relayrace.sessions import MemorySession, SQLiteStore  # noqa: E402
from relayrace.testing import ScriptedModel, text, tool_call  # noqa: E402

HERE = Path(__file__).resolve().parent
AGENTS = ["billing", "slowpoke", "broken", "careful", "desk", "reporter"]


@contextlib.contextmanager
def serving(db: Path, port: int = 0, *options: str, env: dict[str, str] | None = None
            ) -> Iterator[str]:
    """``relayrace a2a serve`` in its own process on ``port`` (0: a free one): its URL."""
    command = [sys.executable, "-m", "relayrace.cli", "a2a", "serve", str(HERE / "a2a_team.py"),
               *[a for name in AGENTS for a in ("--agent", name)], "--port", str(port),
               "--db", str(db), *options]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True,
                               env=os.environ | {"PYTHONUNBUFFERED": "1"} | (env or {}))
    lines: list[str] = []
    started = threading.Event()

    def drain() -> None:  # read all it says, so its pipe never fills
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            started.set()
        started.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    started.wait(30)
    found = re.search(r"at (http://127\.0\.0\.1:\d+)", lines[0] if lines else "")
    try:
        if found is None:
            pytest.fail(f"the A2A server did not start: {lines}")
        yield found.group(1)
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(5)
        assert process.stderr is not None
        process.stderr.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The test team served in its own process: (its URL, its database)."""
    db = tmp_path_factory.mktemp("a2a") / "server.db"
    with serving(db) as url:
        yield url, db


def remote(url: str, agent: str, **options: Any) -> RemoteAgent:
    return RemoteAgent(url, name=agent, metadata={"agent": agent}, **options)


async def test_the_card_names_the_agent_its_skills_and_its_url(server: tuple[str, Path]) -> None:
    url, _ = server
    card = httpx.get(f"{url}/.well-known/agent-card.json").json()
    assert card["name"] == "billing" and card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["url"] == url
    skills = {s["id"] for s in card["skills"]}
    assert {"billing", "billing.ask_user", "slowpoke.wait", "careful.refund",
            "desk.clerk"} <= skills
    found = RemoteAgent(url)  # no name: read from the card
    assert found.name == "billing" and found.description == "Invoices and refunds."


def test_a_url_with_no_agent_behind_it_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="No A2A agent card at http://127.0.0.1:9/"):
        RemoteAgent("http://127.0.0.1:9")
    with pytest.raises(UserError, match="http"):
        RemoteAgent("ftp://example")


async def test_a_remote_agent_as_a_tool_answers_and_keeps_its_context_per_session(
        server: tuple[str, Path]) -> None:
    url, db = server
    billing = remote(url, "billing")
    model = ScriptedModel([tool_call("billing", {"query": "Is INV-7 paid?"}), text("Paid."),
                           tool_call("billing", {"query": "And INV-8?"}), text("Also paid.")])
    boss = Agent("boss", instructions="x", model=model, tools=[billing.as_tool(report=False)])
    session = MemorySession()
    first = await Runner.run(boss, "INV-7?", session=session)
    second = await Runner.run(boss, "INV-8?", session=session)
    results = [e.message.content for e in session.events if isinstance(e, ToolResultEvent)]
    assert results[0].startswith("INV-7 is paid.") and "1 user message(s)" in results[0]
    # The second delegation continued the same remote context: the remote heard both tasks.
    assert results[1].startswith("INV-8 is paid.") and "2 user message(s)" in results[1]
    assert first.final_output == "Paid." and second.final_output == "Also paid."
    # The remote kept the context in its own session store, under the context's session.
    context = context_id_for(session.session_id, "billing")
    stored = await SQLiteStore(db).get_info(session_id_for(context))
    assert stored is not None and stored.event_count > 0
    other = MemorySession()  # another conversation: another remote context
    model2 = ScriptedModel([tool_call("billing", {"query": "INV-1?"}), text("ok")])
    boss2 = Agent("boss", instructions="x", model=model2, tools=[billing.as_tool(report=False)])
    await Runner.run(boss2, "INV-1?", session=other)
    fresh = [e.message.content for e in other.events if isinstance(e, ToolResultEvent)]
    assert "1 user message(s)" in fresh[0]


async def test_remote_progress_streams_tagged_with_the_child_path(
        server: tuple[str, Path]) -> None:
    url, _ = server
    desk = remote(url, "desk")
    model = ScriptedModel([tool_call("desk", {"query": "Invoice INV-4 please"}), text("ok")])
    boss = Agent("boss", instructions="x", model=model, tools=[desk.as_tool(report=False)])
    updates = [e async for e in Runner.stream(boss, "go") if isinstance(e, StatusEvent)]
    assert updates and {u.path for u in updates} == {"boss/desk"}
    said = "\n".join(u.text for u in updates)
    assert "clerk done" in said and "desk handed off to billing_local" in said


async def test_a_remote_question_in_a_delegation_is_the_runs_pending_question(
        server: tuple[str, Path]) -> None:
    url, _ = server
    billing = remote(url, "billing")
    model = ScriptedModel([tool_call("billing", {"query": "I want a refund"}),
                           text("Refunded.")])
    boss = Agent("boss", instructions="x", model=model, tools=[billing.as_tool(report=False)])
    session = MemorySession()
    stopped = await Runner.run(boss, "refund please", session=session)
    assert stopped.pending is not None
    [question] = stopped.pending.questions
    assert question.question == "Which invoice should I refund?"
    assert question.path == "boss/billing"
    done = await Runner.resume(stopped.pending, answers={question.id: "INV-3"})
    assert done.final_output == "Refunded."
    results = [e.message.content for e in session.events if isinstance(e, ToolResultEvent)]
    assert results[-1] == "Refund issued for invoice INV-3."
    assert_valid_protocol(messages_of(session.events))


async def test_a_handoff_to_a_remote_agent_holds_the_conversation_then_returns(
        server: tuple[str, Path]) -> None:
    url, _ = server

    def team() -> tuple[Agent[Any], ScriptedModel]:
        model = ScriptedModel([tool_call("transfer_to_billing", {"reason": "a refund"}),
                               text("Billing refunded INV-7; anything else?")])
        billing = remote(url, "billing")
        return Agent("assistant", instructions="x", model=model, sub_agents=[billing]), model

    assistant, model = team()
    session = MemorySession()
    asked = await Runner.run(assistant, "I want a refund", session=session)
    assert asked.last_agent.name == "billing"
    assert asked.final_output == "Which invoice should I refund?"
    # A new process (new objects, same session): the next turn goes to the remote and its
    # open task, and the remote's finished task gives control back.
    assistant2, model2 = team()
    model2.turns.pop(0)
    done = await Runner.run(assistant2, "INV-7", session=session)
    assert done.last_agent.name == "assistant"
    assert done.final_output == "Billing refunded INV-7; anything else?"
    handoffs = [e for e in session.events if isinstance(e, HandoffEvent)]
    assert [(h.agent, h.to_agent, h.is_return) for h in handoffs] == [
        ("assistant", "billing", False), ("billing", "assistant", True)]
    assert "Refund issued for invoice INV-7." in handoffs[1].reason
    assert_valid_protocol(messages_of(session.events))
    remote_said = [e.message for e in session.events
                   if getattr(e, "message", None) is not None and e.agent == "billing"
                   and e.message.role == "assistant"]
    assert remote_said[0].content == "Which invoice should I refund?"
    assert model.requests and len(model2.requests) == 1


async def test_a_failed_or_rejected_remote_task_is_a_tool_error(
        server: tuple[str, Path]) -> None:
    url, _ = server
    model = ScriptedModel([tool_call("broken", {"query": "x"}), tool_call("nobody", {"query": "y"}),
                           text("Both failed.")])
    boss = Agent("boss", instructions="x", model=model, tools=[
        remote(url, "broken").as_tool(report=False), remote(url, "nobody").as_tool(report=False)])
    session = MemorySession()
    result = await Runner.run(boss, "go", session=session)
    assert result.final_output == "Both failed."
    errors = {e.tool_name: e.message.content for e in session.events
              if isinstance(e, ToolResultEvent)}
    assert "ended failed" in errors["broken"] and "provider is down" in errors["broken"]
    assert "ended rejected" in errors["nobody"] and "No agent 'nobody'" in errors["nobody"]
    assert all(e.is_error for e in session.events if isinstance(e, ToolResultEvent))


async def test_a_remote_that_takes_too_long_is_a_tool_error_and_its_task_is_cancelled(
        server: tuple[str, Path]) -> None:
    url, _ = server
    slow = remote(url, "slowpoke", timeout=1.5)
    model = ScriptedModel([tool_call("slowpoke", {"query": "wait"}), text("Gave up.")])
    boss = Agent("boss", instructions="x", model=model, tools=[slow.as_tool(report=False)])
    session = MemorySession()
    result = await Runner.run(boss, "go", session=session)
    assert result.final_output == "Gave up."
    [error] = [e for e in session.events if isinstance(e, ToolResultEvent)]
    assert error.is_error and "did not finish within 1.5 s" in error.message.content


@pytest.fixture
async def client(server: tuple[str, Path]) -> Any:
    """The a2a-sdk's own client for the server."""
    async with httpx.AsyncClient(timeout=30) as http:
        sdk_client = await create_client(server[0], ClientConfig(httpx_client=http))
        yield sdk_client
        await sdk_client.close()


def _message(text_: str, *, context_id: str = "", task_id: str = "",
             agent: str = "") -> SendMessageRequest:
    request = SendMessageRequest(message=Message(
        message_id=os.urandom(8).hex(), context_id=context_id, task_id=task_id,
        role=Role.ROLE_USER, parts=[Part(text=text_)]))
    if agent:
        request.metadata.update({"agent": agent})
    return request


async def test_the_sdk_client_cancels_a_running_task_and_the_session_stays_valid(
        server: tuple[str, Path], client: Any) -> None:
    _, db = server
    states: list[str] = []
    task_id = context_id = ""

    async def follow() -> None:
        nonlocal task_id, context_id
        async for event in client.send_message(_message("go", agent="slowpoke")):
            kind = event.WhichOneof("payload")
            if kind == "task":
                task_id, context_id = event.task.id, event.task.context_id
            elif kind == "status_update":
                states.append(state_name(event.status_update.status.state))

    following = asyncio.ensure_future(follow())
    polled = SQLiteStore(db)

    async def tool_started() -> bool:
        if not context_id:
            return False
        events = await polled.session(session_id_for(context_id)).get_events()
        return any(e.kind == "tool_started" for e in events)

    await wait_until(tool_started, "the run's tool call to start", timeout=30, every=0.05)
    await polled.aclose()
    cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
    assert state_name(cancelled.status.state) == "canceled"
    await asyncio.wait_for(following, 10)
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert state_name(task.status.state) == "canceled"
    session = SQLiteStore(db).session(session_id_for(context_id))
    events = await session.get_events()
    assert events[-1].kind == "run_finished" and events[-1].status != "completed", events[-1]
    assert_valid_protocol(messages_of(events))


async def test_the_sdk_client_answers_an_approval_through_input_required(client: Any) -> None:
    seen: list[Any] = []
    async for event in client.send_message(_message("refund INV-9", agent="careful")):
        seen.append(event)
    last = seen[-1].status_update
    assert state_name(last.status.state) == "input-required"
    said = "".join(p.text for p in last.status.message.parts)
    assert "Approve refund" in said and "INV-9" in said
    # An answer that decides nothing is asked again; "yes" runs the call.
    again = [e async for e in client.send_message(_message(
        "maybe", context_id=last.context_id, task_id=last.task_id, agent="careful"))]
    assert state_name(again[-1].status_update.status.state) == "input-required"
    done = [e async for e in client.send_message(_message(
        "yes", context_id=last.context_id, task_id=last.task_id, agent="careful"))]
    artifacts = [e.artifact_update.artifact for e in done
                 if e.WhichOneof("payload") == "artifact_update"]
    assert state_name(done[-1].status_update.status.state) == "completed"
    assert artifacts and artifacts[0].parts[0].text == "Result: refunded INV-9"


async def test_a_yaml_team_reaches_remote_agents_as_a_tool_and_as_a_handoff_target(
        server: tuple[str, Path], tmp_path: Path) -> None:
    from relayrace.config import load_team

    url, _ = server
    (tmp_path / "front.agent.yaml").write_text(f"""\
apiVersion: relayrace/v1
kind: Agent
metadata: {{name: front}}
spec:
  model: {{primary: {{provider: openai, model: gpt-4o-mini}}}}
  prompts: {{system: Help.}}
  tools:
    - type: a2a
      url: {url}
      name: ledger
      agent: billing
    - type: a2a
      card_url: {url}/.well-known/agent-card.json
      as: handoff
""")
    model = ScriptedModel([tool_call("ledger", {"query": "Is INV-5 paid?"}),
                           tool_call("transfer_to_billing", {"reason": "refund INV-5"}),
                           text("Done: refunded.")])
    team = load_team(tmp_path, model=model)
    front = team["front"]
    assert [h.agent.name for h in front.handoffs] == ["billing"]  # its name from the card
    session = MemorySession()
    # The run's model= replaces the local agents' models, never a remote agent's.
    result = await Runner.run(front, "Refund INV-5 if it is paid", session=session, model=model)
    assert result.final_output == "Done: refunded."
    results = [e.message.content for e in session.events if isinstance(e, ToolResultEvent)]
    assert results[0].startswith("INV-5 is paid.")
    returned = [e for e in session.events if isinstance(e, HandoffEvent) and e.is_return]
    assert "Refund issued for invoice INV-5." in returned[0].reason


def test_a_yaml_a2a_tool_needs_one_address(tmp_path: Path) -> None:
    from relayrace import ConfigError
    from relayrace.config import load_team

    (tmp_path / "a.agent.yaml").write_text("""\
apiVersion: relayrace/v1
kind: Agent
metadata: {name: a}
spec:
  prompts: {system: x}
  tools:
    - {type: a2a, name: r}
""")
    with pytest.raises(ConfigError, match="url"):
        load_team(tmp_path)


async def test_a_report_the_remote_returns_is_the_childs_report(
        server: tuple[str, Path]) -> None:
    url, _ = server
    model = ScriptedModel([tool_call("reporter", {"query": "Which invoices are open?"}),
                           text("Two.")])
    boss = Agent("boss", instructions="x", model=model,
                 tools=[remote(url, "reporter").as_tool()])
    result = await Runner.run(boss, "open invoices?")
    [report] = result.reports
    assert report.summary == "Two invoices are open."
    assert report.key_findings == ["INV-1 is open", "INV-2 is open"]
    assert report.confidence == "high"


async def test_the_sdk_client_sees_a_failed_run_as_a_failed_task(client: Any) -> None:
    events = [e async for e in client.send_message(_message("go", agent="broken"))]
    last = events[-1].status_update
    assert state_name(last.status.state) == "failed"
    said = "".join(p.text for p in last.status.message.parts)
    assert "provider is down" in said and "Traceback" not in said


async def test_a_remote_that_restarted_goes_on_with_the_conversation(tmp_path: Path) -> None:
    # The restarted remote no longer knows the task waiting for input: the answer goes to
    # the same context, where the relayrace server's session still holds the question.
    db = tmp_path / "server.db"
    with serving(db) as url:
        model = ScriptedModel([tool_call("transfer_to_billing", {"reason": "a refund"}),
                               text("Back with you."),
                               tool_call("billing", {"query": "I want a refund"}),
                               text("Refunded.")])
        billing = remote(url, "billing")
        assistant = Agent("assistant", instructions="x", model=model, sub_agents=[billing],
                          tools=[billing.as_tool(report=False)])
        chat = MemorySession()
        asked = await Runner.run(assistant, "I want a refund", session=chat)
        assert asked.final_output == "Which invoice should I refund?"
    with serving(db, int(url.rsplit(":", 1)[1])):
        done = await Runner.run(assistant, "INV-7", session=chat)
        assert done.last_agent.name == "assistant" and done.final_output == "Back with you."
        returned = [e for e in chat.events if isinstance(e, HandoffEvent) and e.is_return]
        assert "Refund issued for invoice INV-7." in returned[0].reason
        delegated = MemorySession()
        stopped = await Runner.run(assistant, "refund", session=delegated)
        assert stopped.pending is not None
        [question] = stopped.pending.questions
    with serving(db, int(url.rsplit(":", 1)[1])):
        resumed = await Runner.resume(stopped.pending, answers={question.id: "INV-3"})
    assert resumed.final_output == "Refunded."
    results = [e for e in delegated.events if isinstance(e, ToolResultEvent)]
    assert not results[-1].is_error
    assert results[-1].message.content == "Refund issued for invoice INV-3."


async def test_the_server_remembers_its_latest_tasks_and_forgotten_contexts_go_on() -> None:
    from a2a.utils.errors import TaskNotFoundError

    from a2a_team import billing
    from relayrace.connect.a2a_server import create_a2a_app

    url = "http://a2a.test"
    app = create_a2a_app(billing, url=url, store="memory://", max_tasks=2)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=url,
                                 timeout=30) as http:
        sdk_client = await create_client(url, ClientConfig(httpx_client=http))
        asked = [e async for e in sdk_client.send_message(_message("I want a refund"))]
        waiting = asked[-1].status_update
        assert state_name(waiting.status.state) == "input-required"
        for n in (1, 2):
            [e async for e in sdk_client.send_message(_message(f"Is INV-{n} paid?"))]
        with pytest.raises(TaskNotFoundError):  # two newer tasks: the first is forgotten
            await sdk_client.get_task(GetTaskRequest(id=waiting.task_id))
        # ... but its context's session still waits for the answer.
        done = [e async for e in sdk_client.send_message(_message(
            "INV-4", context_id=waiting.context_id))]
        assert state_name(done[-1].status_update.status.state) == "completed"
        answer = [e.artifact_update.artifact for e in done
                  if e.WhichOneof("payload") == "artifact_update"]
        assert answer[0].parts[0].text == "Refund issued for invoice INV-4."
        await sdk_client.close()
    with pytest.raises(UserError, match="max_tasks"):
        create_a2a_app(billing, url=url, store="memory://", max_tasks=0)


async def test_a_remote_call_to_approve_in_a_delegation_is_the_runs_pending_approval(
        server: tuple[str, Path]) -> None:
    url, _ = server
    careful = remote(url, "careful")
    for approve, said in ((True, "Result: refunded INV-9"), (False, "Result: Rejected")):
        model = ScriptedModel([tool_call("careful", {"query": "Refund INV-9"}), text("Done.")])
        boss = Agent("boss", instructions="x", model=model,
                     tools=[careful.as_tool(report=False)])
        session = MemorySession()
        stopped = await Runner.run(boss, "refund INV-9", session=session)
        assert stopped.pending is not None and not stopped.pending.questions
        [approval] = stopped.pending.approvals
        assert approval.tool_name == "remote_tool_call" and approval.path == "boss/careful"
        assert '"tool": "refund"' in approval.arguments and "INV-9" in approval.arguments
        done = await Runner.resume(stopped.pending, approvals={approval.call_id: approve})
        assert done.final_output == "Done."
        [result] = [e for e in session.events if isinstance(e, ToolResultEvent)]
        assert not result.is_error and result.message.content.startswith(said)
        assert_valid_protocol(messages_of(session.events))


async def test_a_foreign_remotes_data_parts_are_part_of_the_tool_result() -> None:
    # An A2A agent that is not relayrace, written with the a2a-sdk: it answers with a text
    # part and a data part, after a progress update.
    import socket

    from a2a.helpers.proto_helpers import new_task_from_user_message
    from a2a.server.agent_execution import AgentExecutor
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types.a2a_pb2 import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        TaskState,
    )
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Value
    from starlette.applications import Starlette

    from relayrace.connect.a2a_server import serve_a2a

    class Weather(AgentExecutor):
        async def execute(self, context: Any, event_queue: Any) -> None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            up = TaskUpdater(event_queue, task.id, task.context_id)
            await up.update_status(TaskState.TASK_STATE_WORKING,
                                   up.new_agent_message([Part(text="looking outside")]))
            await up.add_artifact([Part(text="Sunny."), Part(data=ParseDict(
                {"celsius": 21, "sky": "clear"}, Value()))])
            await up.complete()

        async def cancel(self, context: Any, event_queue: Any) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = AgentCard(name="weather", description="The weather.", version="1",
                     supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC",
                                                          protocol_version="1.0")],
                     capabilities=AgentCapabilities(streaming=True),
                     skills=[AgentSkill(id="weather", name="weather", description="Weather.")],
                     default_input_modes=["text/plain"], default_output_modes=["text/plain"])
    handler = DefaultRequestHandler(agent_executor=Weather(), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(card),
                            *create_jsonrpc_routes(handler, rpc_url="/")])
    serving_task = asyncio.ensure_future(serve_a2a(app, port=0, sock=sock))
    try:
        weather = RemoteAgent(url, name="weather", timeout=10)
        model = ScriptedModel([tool_call("weather", {"query": "Weather in Oslo?"}), text("ok")])
        boss = Agent("boss", instructions="x", model=model,
                     tools=[weather.as_tool(report=False)])
        events = [e async for e in Runner.stream(boss, "weather?")]
    finally:
        serving_task.cancel()
        await asyncio.gather(serving_task, return_exceptions=True)
    [result] = [e for e in events if isinstance(e, ToolResultEvent)]
    assert not result.is_error
    said, data = result.message.content.split("\n")
    assert said == "Sunny." and json.loads(data) == {"celsius": 21, "sky": "clear"}
    assert [e.text for e in events if isinstance(e, StatusEvent)] == ["looking outside"]


async def test_a_server_started_with_keys_refuses_a_request_without_one(tmp_path: Path) -> None:
    first, second = "k" * 20, "e" * 20
    with serving(tmp_path / "server.db", 0, "--api-key", first,
                 env={"RELAYRACE_API_KEYS": second}) as url:
        async with httpx.AsyncClient(timeout=30) as http:
            card = (await http.get(f"{url}/.well-known/agent-card.json")).json()
            assert set(card["securitySchemes"]) == {"bearer", "apiKey"}
            call = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
            refused = await http.post(url, json=call)
            assert refused.status_code == 401 and "API key" in refused.text
            wrong = await http.post(url, json=call, headers={"X-API-Key": "w" * 20})
            assert wrong.status_code == 401
            for key in (first, second):  # the flag's key and the environment's
                known = await http.post(url, json=call, headers={"Authorization": f"Bearer {key}"})
                assert known.status_code == 200 and "error" in known.json()
        billing = remote(url, "billing", headers={"X-API-Key": second})
        *_, answered = [item async for item in billing.send("Is INV-1 paid?", context_id="c1")]
        assert "INV-1 is paid" in getattr(answered, "text", "")


async def test_the_sdk_client_reads_a_handoff_from_the_status_metadata(client: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    events = [e async for e in client.send_message(_message("Invoice INV-4", agent="desk"))]
    said = [MessageToDict(e.status_update.metadata) for e in events
            if e.WhichOneof("payload") == "status_update"
            and state_name(e.status_update.status.state) == "working"
            and e.status_update.metadata]
    assert said == [{"relayrace": {"handoff": {
        "from": "desk", "to": "billing_local", "reason": "invoice question",
        "returned": False}}}]


async def test_a_relayrace_remote_reports_its_usage_and_tool_calls_and_the_caller_counts_them(
        server: tuple[str, Path], client: Any) -> None:
    from google.protobuf.json_format import MessageToDict

    url, _ = server
    events = [e async for e in client.send_message(_message("Invoice INV-4", agent="desk"))]
    task = await client.get_task(GetTaskRequest(id=events[-1].status_update.task_id))
    spent = MessageToDict(task.metadata)["relayrace"]
    assert spent["usage"]["requests"] == 4 and spent["usage"]["tool_calls"] == 1
    assert [(c["path"], c["tool"], c["ok"]) for c in spent["tool_calls"]] == [
        ("desk", "clerk", True), ("desk", "transfer_to_billing_local", True)]
    desk = remote(url, "desk")
    model = ScriptedModel([tool_call("desk", {"query": "Invoice INV-4 please"}), text("ok")])
    boss = Agent("boss", instructions="x", model=model, tools=[desk.as_tool(report=False)])
    stream = Runner.stream(boss, "go", session=MemorySession())
    said = [e.text async for e in stream if isinstance(e, StatusEvent)]
    assert stream.result is not None
    # what the remote's run used (its own models' requests, its tool calls, their tokens)
    # counts as the remote agent's, and in the run's total
    usage = stream.result.usage.per_agent["boss/desk"]
    assert (usage.requests, usage.tool_calls) == (4, 1)
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    total = stream.result.usage.total
    assert total.requests == 4 + 2 and total.tool_calls == 1 + 1  # boss: 2 requests, 1 call
    assert "desk: clerk done" in said  # the remote's tool call, by its own path
