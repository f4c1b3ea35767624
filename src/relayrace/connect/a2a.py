"""Agents in other processes, reached over A2A (Agent2Agent): `RemoteAgent`.

A `RemoteAgent` is an agent whose turns are answered by a remote A2A agent: put it in
``sub_agents=[...]`` and a transfer hands the conversation to it (it stays the active agent
while its remote task waits for input, and gives control back when the task is done); use
``remote.as_tool()`` and it is a delegated child (its remote task updates stream as
``StatusEvent``s tagged with the child's path, its artifacts are the tool result, a question
it asks becomes the run's pending question). Failed, rejected or cancelled tasks, timeouts and
transport failures are errors the calling agent's model is told about, as for local children.

One remote context (A2A ``contextId``) per conversation: it is derived from the session (a
delegated child's from its parent session), so the next delegation, turn or resume, in any
process, continues the same remote context. Needs ``relayrace[a2a]`` (the ``a2a-sdk``).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..agents.agent import Agent
from ..agents.delegation import AgentTool
from ..agents.tools import ask_user
from ..core.exceptions import ModelProviderError, ModelTimeout, UserError
from ..models.interface import StatusUpdate
from ._a2a_model import RemoteModel, remote_tool_call
from ._a2a_sdk import (
    FINAL,
    RemoteResult,
    cancel,
    context_id_for,
    data_part,
    fetch_card,
    follow,
    sdk,
    state_name,
)

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

__all__ = ["RemoteAgent", "RemoteResult", "context_id_for", "remote_tool_call", "state_name"]

_INVALID = re.compile(r"[^A-Za-z0-9_-]")


class RemoteAgent(Agent[Any, str]):
    """An agent in another process, reached over A2A at ``url``.

    A run's ``model=`` does not replace its model: the remote agent answers its turns.

    ``name`` and ``description`` default to the remote's agent card, fetched at once when
    ``name`` is not given (a transfer tool needs the name when the agent is built), else at
    the first exchange. ``headers`` go with every request (an API key), ``metadata`` with
    every message (``{"agent": name}`` picks one of a relayrace server's agents); ``timeout``
    bounds one exchange with the remote, in seconds. In ``sub_agents=[...]`` it is a handoff target;
    ``as_tool()`` makes it a delegated child.
    """

    def __init__(self, url: str, *, name: str | None = None, description: str | None = None,
                 headers: Mapping[str, str] | None = None,
                 metadata: Mapping[str, Any] | None = None, timeout: float = 300.0) -> None:
        sdk()
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UserError(f"RemoteAgent needs the remote agent's http(s) URL, got {url!r}.")
        if not timeout > 0:
            raise UserError(f"RemoteAgent's timeout is a number of seconds > 0, got {timeout!r}.")
        self.url = url.rstrip("/")
        """The remote agent's base URL (its card is at ``/.well-known/agent-card.json``)."""
        self.headers = dict(headers or {})
        """Sent with every request to the remote (an API key, say)."""
        self.metadata = dict(metadata or {})
        """Sent as every message's request metadata (a relayrace server reads ``agent``: which
        of its agents answers)."""
        self.exchange_timeout = timeout
        """Seconds one exchange with the remote may take."""
        self._card: AgentCard | None = None
        if name is None:
            self._card = fetch_card(self.url, self.headers, timeout)
            name = _INVALID.sub("_", self._card.name)[:64] or "remote_agent"
            if description is None:
                description = self._card.description
        self.remote_model = RemoteModel(self)
        """The model that answers this agent's turns by exchanging messages with the remote."""
        super().__init__(name, instructions="", description=description or "",
                         model=self.remote_model, mode="task")
        self._child = _RemoteChild(name, instructions="", description=self.description,
                                   model=self.remote_model,
                                   tools=[ask_user, remote_tool_call])

    remote = True

    def __repr__(self) -> str:
        return f"RemoteAgent({self.name!r}, {self.url!r})"

    def as_tool(self, **options: Any) -> AgentTool[Agent[Any]]:
        """This remote agent as a delegated child (``Agent.as_tool``'s options): a question
        the remote asks stops the run with it pending, and the answer goes back to the
        remote task."""
        return self._child.as_tool(**options)

    async def card(self) -> AgentCard:
        """The remote's agent card (fetched once)."""
        card = self._card
        if card is None:
            card = self._card = await asyncio.to_thread(
                fetch_card, self.url, self.headers, self.exchange_timeout)
        return card

    async def send(self, text: str, *, context_id: str, task_id: str = "",
                   data: Any = None) -> AsyncIterator[StatusUpdate | RemoteResult]:
        """Send one message to the remote and follow its task: its progress, then the
        `RemoteResult` last. Transport failures, timeouts, events addressed to another task
        or context, and a stream that ends before the task reaches a final state are
        `ModelProviderError`s. ``timeout`` bounds the whole exchange (the card, a second
        attempt, and the cancel of a task that took too long).

        A remote that no longer knows ``task_id`` (it restarted, or let the task expire)
        gets the message again as a new task of the same context: a relayrace server then
        answers the run that waits in the context's session."""
        deadline = asyncio.get_running_loop().time() + self.exchange_timeout
        try:
            async with asyncio.timeout_at(deadline):
                card = await self.card()
        except TimeoutError as exc:
            raise self._too_long() from exc
        try:
            async for item in self._exchange(card, text, context_id, task_id, data, deadline):
                yield item
        except _TaskGone:
            async for item in self._exchange(card, text, context_id, "", data, deadline):
                yield item

    def _too_long(self) -> ModelTimeout:
        return ModelTimeout(f"The remote agent {self.name!r} at {self.url} did not finish "
                            f"within {self.exchange_timeout} s.")

    async def _exchange(self, card: AgentCard, text: str, context_id: str, task_id: str,
                        data: Any, deadline: float
                        ) -> AsyncIterator[StatusUpdate | RemoteResult]:
        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.types.a2a_pb2 import Message as A2AMessage
        from a2a.types.a2a_pb2 import Part, Role, SendMessageRequest
        from a2a.utils.errors import A2AError, TaskNotFoundError

        parts = [Part(text=text)]
        if data is not None:
            parts.append(data_part(data))
        message = A2AMessage(message_id=secrets.token_hex(16), context_id=context_id,
                             task_id=task_id, role=Role.ROLE_USER, parts=parts)
        result = RemoteResult(state="unknown")
        client: Any = None
        # kept from the exchange's time, so that a task that took too long is cancelled
        # within ``timeout`` too
        reserve = min(1.0, self.exchange_timeout / 10)
        async with httpx.AsyncClient(headers=self.headers, timeout=self.exchange_timeout) as http:
            try:
                client = await create_client(card, ClientConfig(httpx_client=http))
                async with asyncio.timeout_at(deadline - reserve):
                    request = SendMessageRequest(message=message)
                    if self.metadata:
                        request.metadata.update(self.metadata)
                    async for event in client.send_message(request):
                        update = follow(event, result, context_id, task_id)
                        if update is not None:
                            yield update
                if result.state not in FINAL:
                    raise ValueError(f"its stream ended while the task was {result.state}, "
                                     "before any final state")
            except TimeoutError as exc:
                if result.task_id:  # the remote should not go on with work nobody waits for
                    await cancel(client, result.task_id, reserve)
                raise self._too_long() from exc
            except TaskNotFoundError as exc:
                if task_id and not result.task_id:
                    raise _TaskGone from exc
                raise self._unreachable(exc) from exc
            except (A2AError, httpx.HTTPError, ValueError) as exc:
                raise self._unreachable(exc) from exc
            finally:
                if client is not None:
                    await client.close()
        yield result

    def _unreachable(self, exc: Exception) -> ModelProviderError:
        return ModelProviderError(f"The remote agent {self.name!r} at {self.url} could not be "
                                  f"reached or answered badly: {type(exc).__name__}: {exc}",
                                  provider="a2a")

    async def open_task(self, context_id: str) -> str:
        """The remote task of ``context_id`` that waits for input, if the remote lists one."""
        import httpx
        from a2a.client import ClientConfig, create_client
        from a2a.types.a2a_pb2 import ListTasksRequest, TaskState

        card = await self.card()
        timeout = self.exchange_timeout
        try:
            async with httpx.AsyncClient(headers=self.headers, timeout=timeout) as http:
                client = await create_client(card, ClientConfig(httpx_client=http))
                try:
                    found = await client.list_tasks(ListTasksRequest(
                        context_id=context_id, status=TaskState.TASK_STATE_INPUT_REQUIRED))
                finally:
                    await client.close()
        except Exception:  # a remote without task listing: the message starts a new task
            return ""
        return found.tasks[0].id if found.tasks else ""


class _TaskGone(Exception):
    """The remote does not know the task a message continues."""


class _RemoteChild(Agent[Any, str]):
    """A `RemoteAgent` as a delegated child: it may ask the run's person (``ask_user``)."""

    remote = True
