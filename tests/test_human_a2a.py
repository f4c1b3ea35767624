"""A person holding a conversation served over A2A: the task asks for input saying so, and the
caller's next message reaches the person instead of being taken for a decision."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest  # noqa: E402

from relayrace.connect.a2a import state_name  # noqa: E402
from relayrace.connect.a2a_server import create_a2a_app, session_id_for  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from test_human_server import desk  # noqa: E402


def _message(text: str, *, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(message=Message(
        message_id=os.urandom(8).hex(), context_id=context_id, task_id=task_id,
        role=Role.ROLE_USER, parts=[Part(text=text)]))


async def test_an_a2a_caller_is_told_a_person_will_answer(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    app = create_a2a_app(desk(), url="http://localhost", store=store)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://localhost",
            timeout=30) as http:
        client = await create_client("http://localhost", ClientConfig(httpx_client=http))
        first = [e async for e in client.send_message(_message("a person please"))]
        last = first[-1].status_update
        assert state_name(last.status.state) == "input-required"
        said = "".join(p.text for p in last.status.message.parts)
        assert "support-desk (a person) has the conversation" in said
        # The caller's next message is the user's, for the person (not a decision).
        again = [e async for e in client.send_message(_message(
            "hello?", context_id=last.context_id, task_id=last.task_id))]
        assert state_name(again[-1].status_update.status.state) == "input-required"
        await client.close()
    events = await store.session(session_id_for(last.context_id)).get_events()
    users = [e.message.content for e in events
             if e.kind == "message" and e.message.role == "user"]
    assert users == ["a person please", "hello?"]
