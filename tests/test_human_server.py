"""A person holding a served conversation: the takeover is listed, the person replies and hands
back through ``/api/sessions/{id}/pending`` (idempotently), and the events show it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from relayrace import Agent, human  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from relayrace.testing import ScriptedModel, tool_call  # noqa: E402


def desk() -> Agent:
    model = ScriptedModel(by_agent={
        "triage": [tool_call("transfer_to_support-desk", {"reason": "wants a person"}),
                   "Back with triage: anything else?"],
        "billing": ["Billing here: refund done."]})
    billing = Agent("billing", instructions="Bills.", model=model)
    return Agent("triage", instructions="Route.", model=model,
                 sub_agents=[billing, human("support-desk", description="A person.")])


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(desk(), store=SQLiteStore(tmp_path / "s.db"))
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost") as c:
        yield c


def sse(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in body.splitlines()
            if line.startswith("data: {")]


async def test_a_person_replies_and_hands_back_over_the_api(client: httpx.AsyncClient) -> None:
    made = await client.post("/api/sessions", json={})
    sid = made.json()["session_id"]
    stopped = (await client.post(f"/api/sessions/{sid}/runs",
                                 json={"input": "I want a person"})).json()
    assert stopped["status"] == "waiting"
    assert stopped["result"]["pending"]["takeover"] == {
        "agent": "support-desk", "path": "support-desk", "from_agent": "triage"}
    events = sse((await client.get(f"/api/runs/{stopped['run_id']}/events")).text)
    assert [e["from_agent"] for e in events if e["kind"] == "human_takeover"] == ["triage"]
    pending = (await client.get(f"/api/sessions/{sid}/pending")).json()
    assert pending["takeover"]["agent"] == "support-desk"

    # The person replies; a retry with the same Idempotency-Key starts no second run.
    key = {"Idempotency-Key": "reply-1"}
    body = {"reply": "Hi, Ana from support.", "background": False}
    replied = await client.post(f"/api/sessions/{sid}/pending", json=body, headers=key)
    again = await client.post(f"/api/sessions/{sid}/pending", json=body, headers=key)
    assert replied.status_code == 200, replied.text
    assert replied.json()["result"]["final_output"] == "Hi, Ana from support."
    assert again.json()["run_id"] == replied.json()["run_id"]
    listed = (await client.get(f"/api/sessions/{sid}")).json()
    said = [e for e in listed["events"] if e["kind"] == "message"
            and e["message"]["content"] == "Hi, Ana from support."]
    assert len(said) == 1 and said[0]["message"]["name"] == "support-desk"

    # The user's next message goes to the person: accepted, and waits again.
    user = (await client.post(f"/api/sessions/{sid}/runs", json={"input": "still there?"})).json()
    assert user["status"] == "waiting" and user["result"]["pending"]["takeover"]
    wrong = await client.post(f"/api/sessions/{sid}/pending",
                              json={"hand_back": "nobody", "background": False})
    assert wrong.status_code == 400 and "not an agent of the team" in wrong.text
    back = (await client.post(f"/api/sessions/{sid}/pending",
                              json={"hand_back": "billing", "background": False})).json()
    assert back["result"]["final_output"] == "Billing here: refund done."
    assert back["result"]["last_agent"] == "billing"
    assert (await client.get(f"/api/sessions/{sid}/pending")).json()["takeover"] is None


async def test_the_openai_endpoint_says_a_person_will_answer_and_passes_messages_on(
        client: httpx.AsyncClient) -> None:
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    chat = {"model": "triage", "messages": [{"role": "user", "content": "a person please"}]}
    first = await client.post("/v1/chat/completions", json=chat,
                              headers={"X-Relayrace-Session": sid})
    assert first.status_code == 200, first.text
    said = first.json()["choices"][0]["message"]["content"]
    assert said.startswith("support-desk (a person) has the conversation and will answer")
    replied = await client.post(f"/api/sessions/{sid}/pending",
                                json={"reply": "Ana here.", "background": False})
    assert replied.json()["result"]["final_output"] == "Ana here."
    # The user's next message reaches the person (not refused as waiting for decisions).
    nxt = await client.post("/v1/chat/completions", headers={"X-Relayrace-Session": sid},
                            json={"model": "triage",
                                  "messages": [{"role": "user", "content": "thanks"}]})
    assert nxt.status_code == 200, nxt.text
    assert "has the conversation" in nxt.json()["choices"][0]["message"]["content"]


async def test_the_inbox_lists_a_person_holding_a_conversation_with_its_actions(
        client: httpx.AsyncClient) -> None:
    """A takeover is an inbox item like an approval: its actions are bodies for
    ``/api/sessions/{id}/pending`` (a reply typed in, or the hand-back)."""
    sid = (await client.post("/api/sessions", json={})).json()["session_id"]
    await client.post(f"/api/sessions/{sid}/runs", json={"input": "I want a person"})
    inbox = await client.get("/api/inbox")
    assert inbox.status_code == 200, inbox.text
    [item] = inbox.json()["items"]
    assert (item["session_id"], item["kind"], item["title"]) == (
        sid, "takeover", "support-desk (a person) holds the conversation")
    reply, hand_back = item["actions"]
    assert reply["decide"] == {"reply": "$input"} and "input" in reply
    assert hand_back == {"label": "Hand back to triage", "decide": {"hand_back": True}}
    body = {**reply["decide"], "reply": "Ana here.", "background": False}
    done = (await client.post(f"/api/sessions/{sid}/pending", json=body)).json()
    assert done["result"]["final_output"] == "Ana here."
    assert (await client.get("/api/inbox")).json()["items"] == []  # the user's turn now
    await client.post(f"/api/sessions/{sid}/runs", json={"input": "thanks, back to the bot"})
    assert [i["kind"] for i in (await client.get("/api/inbox")).json()["items"]] == ["takeover"]
    back = (await client.post(f"/api/sessions/{sid}/pending",
                              json={**hand_back["decide"], "background": False})).json()
    assert back["result"]["last_agent"] == "triage"
    assert (await client.get("/api/inbox")).json()["items"] == []
