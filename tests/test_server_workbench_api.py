"""The workbench's API (issue 39): the graph says the model each agent really runs on and marks
people and approval-gated calls; a session made and not run yet is listed, with its time and
(once it has one) its title; each run of the runs list has the run_id its POST answered;
forks at any agent of the team, with an edited context, listed by their origin, and refused
(422) for an ``at`` that is no JSON number; who decided an approval, and when, is in the log,
the inbox says what the user asked and since when it waits; a run's spans nest a delegation
under its tool call and list the tools each model call was offered."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from relayrace import Agent, UserError, human  # noqa: E402
from relayrace.server import create_app, key_id  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from relayrace.testing import FunctionModel, text  # noqa: E402
from server_team import front  # noqa: E402

KEY = "alice-key-0123456789"


async def _client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost",
            timeout=30) as c:
        yield c


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in _client(create_app(front, store=SQLiteStore(tmp_path / "s.db"),
                                      user="local-dev")):
        yield c


async def _run(c: httpx.AsyncClient, sid: str, said: str, **extra: Any) -> dict[str, Any]:
    answer = await c.post(f"/api/sessions/{sid}/runs", json={"input": said, **extra})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_the_graph_names_the_model_each_agent_runs_on_and_marks_people_and_gates(
        tmp_path: Path) -> None:
    desk = Agent("desk", instructions="Help.", model="openai:gpt-4o-mini",
                 sub_agents=[human("supervisor", description="A person.")],
                 tools=front.tools)
    override = FunctionModel(lambda r: text("hi"), name="models.py:model")
    for model, said in ((None, "openai:gpt-4o-mini"), (override, "models.py:model")):
        app = create_app([desk, front], store=SQLiteStore(tmp_path / "s.db"), model=model)
        async for c in _client(app):
            teams = (await c.get("/api/graph")).json()["teams"]
            nodes = {n["name"]: n for t in teams for n in t["nodes"]}
            assert nodes["desk"]["model"] == said and nodes["desk"]["detail"].endswith(said)
            # every agent runs on the override when there is one, on its own model else
            assert nodes["billing"]["model"] == (said if model else "function")
            assert nodes["supervisor"]["human"] and nodes["supervisor"]["model"] == ""
            assert nodes["supervisor"]["detail"] == "a person"
            assert not nodes["desk"]["human"]
            assert nodes["tool:refund"]["approval"] and not nodes["tool:ask_user"]["approval"]


async def test_a_session_made_and_not_run_yet_is_listed_with_its_time_and_title(
        client: httpx.AsyncClient) -> None:
    before = time.time()
    ran = (await client.post("/api/sessions", json={})).json()["session_id"]
    await _run(client, ran, "hello   there,\nfirst message")
    await _run(client, ran, "second message")
    made = (await client.post("/api/sessions", json={"agent": "billing"})).json()["session_id"]
    rows = (await client.get("/api/sessions")).json()["sessions"]
    assert [r["session_id"] for r in rows] == [made, ran]  # the newest first
    assert rows[0]["status"] == "idle" and rows[0]["agent"] == "billing"
    assert rows[0]["created_at"] >= before and rows[0]["title"] == ""
    assert rows[1]["title"] == "hello there, first message"  # the first user message
    assert [r["session_id"] for r in (await client.get(
        "/api/sessions", params={"status": "idle"})).json()["sessions"]] == [made]
    assert (await client.get("/api/sessions", params={"status": "finished"})).json()[
        "sessions"][0]["session_id"] == ran
    paged = (await client.get("/api/sessions", params={"limit": 1, "offset": 1})).json()
    assert [r["session_id"] for r in paged["sessions"]] == [ran]
    await _run(client, made, "refund INV-1")  # run once, it is the store's to list
    rows = (await client.get("/api/sessions")).json()["sessions"]
    assert [r["session_id"] for r in rows] == [made, ran]


async def test_each_run_listed_has_the_run_id_its_post_answered(
        client: httpx.AsyncClient) -> None:
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    first = await _run(client, sid, "hello")
    waiting = await _run(client, sid, "refund INV-2")
    call = waiting["result"]["pending"]["approvals"][0]["call_id"]
    resumed = (await client.post(f"/api/sessions/{sid}/pending", json={
        "approvals": {call: True}, "background": False})).json()
    background = await client.post(f"/api/sessions/{sid}/runs",
                                   json={"input": "hello again", "background": True})
    assert background.status_code == 202
    await client.get(f"/api/runs/{background.json()['run_id']}/events")  # to its end
    runs = (await client.get(f"/api/sessions/{sid}/runs")).json()["runs"]
    assert [r["run_id"] for r in runs] == [first["run_id"], waiting["run_id"],
                                           resumed["run_id"], background.json()["run_id"]]
    assert all(r["run_id"].startswith("run-") for r in runs)


async def test_a_fork_refuses_an_at_that_is_no_json_number(client: httpx.AsyncClient) -> None:
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    await _run(client, sid, "hello")
    for bad in ("1", True, 1.5, None, [1]):
        refused = await client.post(f"/api/sessions/{sid}/fork", json={"at": bad})
        assert refused.status_code == 422, (bad, refused.text)
        assert refused.json()["error"]["type"] == "invalid_request"
        assert "at:" in refused.json()["error"]["message"]
    assert (await client.post(f"/api/sessions/{sid}/fork", json={"at": 1})).status_code == 201
    out_of_range = await client.post(f"/api/sessions/{sid}/fork", json={"at": 99})
    assert out_of_range.status_code == 400 and "event seq from 1 to" in out_of_range.text


async def test_a_fork_runs_at_any_agent_with_its_context_edited_and_its_origin_lists_it(
        client: httpx.AsyncClient) -> None:
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    await _run(client, sid, "hello one")
    events = (await client.get(f"/api/sessions/{sid}")).json()["events"]
    said = next(i for i, e in enumerate(events, 1) if e["kind"] == "message"
                and e["message"]["role"] == "user")
    wrong = await client.post(f"/api/sessions/{sid}/fork",
                              json={"at": len(events), "edits": {"1": "x"}})
    assert wrong.status_code == 400 and "seqs of messages" in wrong.text  # 1: run_started
    made = (await client.post(f"/api/sessions/{sid}/fork", json={
        "at": len(events), "edits": {str(said): "refund INV-7, said otherwise"}})).json()
    fork = made["session_id"]
    copied = (await client.get(f"/api/sessions/{fork}")).json()["events"]
    assert copied[said - 1]["message"]["content"] == "refund INV-7, said otherwise"
    assert events[said - 1]["message"]["content"] == "hello one"  # the origin as it was

    # billing is no served agent: a member of front's team, where the fork's run starts.
    ran = await _run(client, fork, "refund INV-7 now", agent="billing")
    assert ran["agent"] == "billing" and ran["status"] == "waiting"
    [approval] = ran["result"]["pending"]["approvals"]
    assert approval["agent"] == "billing" and "INV-7" in approval["arguments"]
    runs = (await client.get(f"/api/sessions/{fork}/runs")).json()["runs"]
    assert runs[-1]["agents"] == ["billing"]
    done = (await client.post(f"/api/sessions/{fork}/pending", json={
        "approvals": {approval["call_id"]: True}, "background": False})).json()
    assert done["result"]["final_output"] == "Done: refund issued for INV-7."
    # a new session may start at a member as well; a name of no team's agent is refused
    other = (await client.post("/api/sessions", json={"agent": "researcher"})).json()
    assert (await _run(client, other["session_id"], "relays"))["agent"] == "researcher"
    missing = await client.post(f"/api/sessions/{fork}/runs",
                                json={"input": "x", "agent": "nobody"})
    assert missing.status_code == 404 and "billing" in missing.text

    listed = (await client.get(f"/api/sessions/{sid}/forks")).json()["forks"]
    assert [(f["session_id"], f["forked_at"]) for f in listed] == [(fork, len(events))]
    assert (await client.get(f"/api/sessions/{fork}/forks")).json()["forks"] == []


async def test_who_decided_an_approval_and_when_is_in_the_log(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    app = create_app(front, store=SQLiteStore(store), api_keys=[f"alice:{KEY}"])
    async for c in _client(app):
        auth = {"X-API-Key": KEY, "X-Relayrace-User": "mallory"}  # a key's name wins
        sid = (await c.post("/api/sessions", json={}, headers=auth)).json()["session_id"]
        stopped = (await c.post(f"/api/sessions/{sid}/runs", json={"input": "refund INV-3"},
                                headers=auth)).json()
        call = stopped["result"]["pending"]["approvals"][0]["call_id"]
        unknown = await c.post(f"/api/sessions/{sid}/pending", headers=auth,
                               json={"approvals": {"nope": True}, "background": False})
        assert unknown.status_code == 400 and "nope" in unknown.text
        before = time.time()
        await c.post(f"/api/sessions/{sid}/pending", headers=auth,
                     json={"approvals": {call: True}, "background": False})
        events = (await c.get(f"/api/sessions/{sid}", headers=auth)).json()["events"]
        [decided] = [e for e in events if e["kind"] == "approval_decided"]
        assert (decided["tool_call_id"], decided["tool_name"], decided["approved"],
                decided["decided_by"]) == (call, "refund", True, "alice")
        assert before <= decided["time"] <= time.time()
        # written before the run it resumed, which went on to the refund
        kinds = [e["kind"] for e in events]
        assert kinds.index("approval_decided") < len(kinds) - kinds[::-1].index("run_started")
        assert events[-1]["kind"] == "run_finished" and events[-1]["status"] == "completed"
        inbox = (await c.get("/api/inbox", headers=auth)).json()
        assert inbox["items"] == [] and [(d["session_id"], d["tool"], d["approved"],
                                          d["decided_by"]) for d in inbox["decided"]] == [
            (sid, "refund", True, "alice")]

    for headers, by in (({}, "local-dev"), ({"X-Relayrace-User": "bob"}, "bob")):
        keyless = create_app(front, store=SQLiteStore(store), user="local-dev")
        async for c in _client(keyless):
            sid = (await c.post("/api/sessions", json={})).json()["session_id"]
            stopped = await _run(c, sid, "refund INV-5")
            call = stopped["result"]["pending"]["approvals"][0]["call_id"]
            await c.post(f"/api/sessions/{sid}/pending", headers=headers,
                         json={"approvals": {call: False}, "background": False})
            events = (await c.get(f"/api/sessions/{sid}")).json()["events"]
            [decided] = [e for e in events if e["kind"] == "approval_decided"]
            assert (decided["approved"], decided["decided_by"]) == (False, by)
    assert key_id(KEY) != "alice"  # the key's name is said, never the key or its id

    # `relayrace sessions show` says it too: who, what, and when
    from typer.testing import CliRunner

    from relayrace.cli import app as cli
    from relayrace.cli._render import format_time

    shown = await asyncio.to_thread(CliRunner().invoke, cli,  # its own event loop
                                    ["sessions", "show", sid, "--db", str(store)])
    assert shown.exit_code == 0, shown.output
    assert f"✗ rejected refund by bob at {format_time(decided['time'])}" in shown.stdout


async def test_the_inbox_says_what_the_user_asked_and_since_when_it_waits(
        client: httpx.AsyncClient) -> None:
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    await _run(client, sid, "hello first")
    before = time.time()
    await _run(client, sid, "refund INV-8 please")
    [item] = (await client.get("/api/inbox")).json()["items"]
    assert item["user_message"] == "refund INV-8 please"
    assert before <= item["waiting_since"] <= time.time()


async def test_a_delegation_nests_under_its_tool_call_and_model_calls_list_their_tools(
        client: httpx.AsyncClient) -> None:
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    await _run(client, sid, "research relay races")
    spans = (await client.get(f"/api/sessions/{sid}/runs/1/trace")).json()["spans"]
    by_id = {s["span_id"]: s for s in spans}
    [delegation] = [s for s in spans if s["kind"] == "delegation"]
    tool = by_id[delegation["parent_id"]]
    assert (tool["kind"], tool["name"]) == ("tool", "researcher")
    assert tool["start_ms"] <= delegation["start_ms"]
    assert tool["start_ms"] + tool["duration_ms"] >= delegation["start_ms"] + \
        delegation["duration_ms"]
    assert tool["detail"]["result"].startswith("SUMMARY: relay races")
    child = [s for s in spans if s["parent_id"] == delegation["span_id"]]
    assert [s["kind"] for s in child] == ["agent"] and child[0]["name"] == "researcher"
    model = next(s for s in spans if s["kind"] == "model" and s["agent"] == "front")
    offered = {t["name"]: t for t in model["detail"]["tools"]}
    assert {"researcher", "ask_user", "transfer_to_billing"} <= set(offered)
    billing = next(n for n in front.sub_agents if n.name == "billing")
    assert billing.tools[0].requires_approval  # refund: offered to billing, gated
    wait = await _run(client, sid, "refund INV-9")
    assert wait["status"] == "waiting"
    spans = (await client.get(f"/api/sessions/{sid}/runs/2/trace")).json()["spans"]
    billing_call = next(s for s in spans if s["kind"] == "model" and s["agent"] == "billing")
    assert {"name": "refund", "description": "Refund an invoice (a person approves it "
            "first).", "approval": True} in billing_call["detail"]["tools"]


def test_a_key_may_be_named_and_is_presented_without_its_name() -> None:
    from relayrace.connect.keys import Keys

    for keys in (Keys([f"alice:{KEY}", "an-unnamed-key-0123456789"]),
                 Keys({"alice": KEY, "": "an-unnamed-key-0123456789"})):
        owner = keys.owner(KEY)
        assert owner == key_id(KEY) and keys.name(owner) == "alice"
        assert keys.owner(f"alice:{KEY}") is None  # the name is no part of the key
        unnamed = keys.owner("an-unnamed-key-0123456789")
        assert unnamed is not None and keys.name(unnamed) == unnamed  # named by its id
    with pytest.raises(UserError, match="at least 16 characters"):
        Keys(["alice:short"])


async def test_a_run_named_at_an_agent_starts_with_it(tmp_path: Path) -> None:
    from relayrace.testing import tool_call

    helper = Agent("helper", instructions="Help.", model=FunctionModel(_said("helper")),
                   sticky=True)  # keeps the conversation, turn after turn

    def desk_turn(request: Any) -> Any:
        if request.messages[-1].role == "user" and "transfer" in request.messages[-1].content:
            return tool_call("transfer_to_helper", {"reason": "asked"})
        return _said("desk")(request)

    desk = Agent("desk", instructions="Route.", model=FunctionModel(desk_turn),
                 sub_agents=[helper])
    async for c in _client(create_app(desk, store=SQLiteStore(tmp_path / "s.db"))):
        sid = (await c.post("/api/sessions", json={})).json()["session_id"]
        assert (await _run(c, sid, "transfer me"))["result"]["last_agent"] == "helper"
        # unnamed, the run goes on with the agent the conversation was left with
        assert (await _run(c, sid, "hello"))["result"]["final_output"] == "helper: hello"
        named = await _run(c, sid, "hello desk", agent="desk")  # the entry point, named
        assert named["result"]["final_output"] == "desk: hello desk"
        back = await _run(c, sid, "to helper again", agent="helper")  # a member, named
        assert back["result"]["final_output"] == "helper: to helper again"


def _said(name: str) -> Any:
    def answer(request: Any) -> Any:
        return text(f"{name}: " + next(m.content for m in reversed(request.messages)
                                       if m.role == "user"))
    return answer
