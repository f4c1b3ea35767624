"""`relayrace a2a serve` with API keys, driven by the a2a-sdk's own client: each key has its
own tasks and contexts, and an approval is taken only on the task that asked for it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a")

from a2a.client import AuthInterceptor, ClientConfig, CredentialService, create_client  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
)
from a2a.utils.errors import TaskNotFoundError  # noqa: E402

from a2a_team import billing, careful  # noqa: E402
from relayrace.connect.a2a import state_name  # noqa: E402
from relayrace.connect.a2a_server import create_a2a_app  # noqa: E402

URL = "http://a2a.test"
ALICE, BOB = "alice-" + "a" * 20, "bob-" + "b" * 20


class Key(CredentialService):
    """Hands the SDK one API key for whichever scheme the card asks for."""

    def __init__(self, key: str) -> None:
        self.key = key

    async def get_credentials(self, security_scheme_name: str, context: Any) -> str | None:
        return self.key


@pytest.fixture
async def clients() -> AsyncIterator[tuple[Any, Any]]:
    """Two SDK clients of one keyed server, each with its own key (sent as the card says)."""
    app = create_a2a_app([careful, billing], url=URL, store="memory://",
                         api_keys=[ALICE, BOB])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=URL,
                                 timeout=30) as http:
        made = [await create_client(URL, ClientConfig(httpx_client=http),
                                    interceptors=[AuthInterceptor(Key(key))])
                for key in (ALICE, BOB)]
        yield made[0], made[1]
        for client in made:
            await client.close()


def _message(text: str, *, agent: str, context_id: str = "", task_id: str = ""
             ) -> SendMessageRequest:
    request = SendMessageRequest(message=Message(
        message_id=os.urandom(8).hex(), context_id=context_id, task_id=task_id,
        role=Role.ROLE_USER, parts=[Part(text=text)]))
    request.metadata.update({"agent": agent})
    return request


async def _last(client: Any, request: SendMessageRequest) -> Any:
    events = [e async for e in client.send_message(request)]
    return events[-1]


async def test_another_keys_task_is_not_found_not_listed_and_cannot_be_approved(
        clients: tuple[Any, Any]) -> None:
    alice, bob = clients
    asked = (await _last(alice, _message("refund INV-9", agent="careful"))).status_update
    assert state_name(asked.status.state) == "input-required"
    with pytest.raises(TaskNotFoundError):
        await bob.get_task(GetTaskRequest(id=asked.task_id))
    listed = await bob.list_tasks(ListTasksRequest())
    assert asked.task_id not in [t.id for t in listed.tasks]
    mine = await alice.list_tasks(ListTasksRequest())
    assert asked.task_id in [t.id for t in mine.tasks]
    with pytest.raises(TaskNotFoundError):  # "yes" on Alice's task
        await _last(bob, _message("yes", agent="careful", context_id=asked.context_id,
                                  task_id=asked.task_id))
    # "yes" on Alice's context: Bob's own conversation of that id, where nothing waits.
    own = await _last(bob, _message("yes", agent="careful", context_id=asked.context_id))
    assert "refunded" not in str(own)
    task = await alice.get_task(GetTaskRequest(id=asked.task_id))
    assert state_name(task.status.state) == "input-required"
    done = await _last(alice, _message("yes", agent="careful", context_id=asked.context_id,
                                       task_id=asked.task_id))
    assert state_name(done.status_update.status.state) == "completed"
    answer = (await alice.get_task(GetTaskRequest(id=asked.task_id))).artifacts[0]
    assert answer.parts[0].text == "Result: refunded INV-9"


async def test_an_approval_is_taken_only_on_the_task_that_asked(
        clients: tuple[Any, Any]) -> None:
    alice, _ = clients
    asked = (await _last(alice, _message("refund INV-9", agent="careful"))).status_update
    other = await _last(alice, _message("yes", agent="careful", context_id=asked.context_id))
    update = other.status_update if other.WhichOneof("payload") == "status_update" \
        else other.task.status
    status = update.status if hasattr(update, "status") else update
    assert state_name(status.state) == "rejected"
    assert asked.task_id in "".join(p.text for p in status.message.parts)
    task = await alice.get_task(GetTaskRequest(id=asked.task_id))
    assert state_name(task.status.state) == "input-required"
