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
import hashlib
import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agents.agent import Agent
from ..agents.delegation import AgentTool
from ..agents.handoffs import FINISH_TASK
from ..agents.tools import FunctionTool, ask_user
from ..core.exceptions import ModelProviderError, ModelTimeout, UserError
from ..core.messages import Message, ToolCall
from ..core.reports import SUBMIT_REPORT
from ..core.usage import Usage
from ..models.interface import Model, ModelRequest, ModelResponse, StatusUpdate

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

__all__ = ["RemoteAgent", "RemoteResult", "remote_tool_call"]

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
# The calls a delegated remote child makes for its remote task's input-required state: an
# ask_user call per question, a remote_tool_call (needing approval) per call to approve. Their
# ids are ``prefix + nonce:task id:remote id`` (the log keeps them, so a resume finds the task).
_ASK_PREFIX = "a2a-ask-"
_APPROVE_PREFIX = "a2a-approve-"
_APPROVED = "approved"
DATA_KEY = "relayrace"
"""The key of the data part that carries relayrace's own view of a message (the conversation
handed over, a report), so a relayrace server reads it as it was meant."""


def sdk() -> None:
    """Fail clearly when the ``a2a-sdk`` is not installed."""
    try:
        import a2a.client  # noqa: F401
    except ImportError as exc:
        raise UserError("A2A needs the a2a-sdk: pip install 'relayrace[a2a]'.") from exc


def context_id_for(conversation: str, name: str) -> str:
    """The A2A ``contextId`` for ``name``'s remote context in ``conversation``: stable across
    processes and resumes, and telling the remote nothing about the session's id."""
    return hashlib.sha256(f"{conversation}/{name}".encode()).hexdigest()[:32]


@dataclass(slots=True)
class RemoteResult:
    """What one exchange with a remote A2A agent came to."""

    state: str
    """The remote task's final state: ``completed``, ``input-required``, ``failed``, ..."""
    text: str = ""
    """The answer: the artifacts' text (or the agent's message); the question when the task
    waits for input; the reason when it failed."""
    data: list[Any] = field(default_factory=list)
    """The artifacts' structured (data) parts."""
    task_id: str = ""
    """The remote task's id ("" when the remote answered with a message and no task)."""
    usage: dict[str, int] = field(default_factory=dict)
    """What a relayrace remote's run used (`Usage`'s fields), as its task's metadata says;
    empty for another remote."""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """A relayrace remote's tool calls (``path``, ``tool``, ``ok``), from its task's
    metadata."""


_FINAL = frozenset({"completed", "failed", "canceled", "rejected", "input-required",
                    "auth-required"})
_STATES = {"TASK_STATE_COMPLETED": "completed", "TASK_STATE_FAILED": "failed",
           "TASK_STATE_CANCELED": "canceled", "TASK_STATE_INPUT_REQUIRED": "input-required",
           "TASK_STATE_REJECTED": "rejected", "TASK_STATE_AUTH_REQUIRED": "auth-required",
           "TASK_STATE_WORKING": "working", "TASK_STATE_SUBMITTED": "submitted"}


def state_name(state: int) -> str:
    """An A2A task state as relayrace names it (``input-required``, ...)."""
    from a2a.types.a2a_pb2 import TaskState

    return _STATES.get(TaskState.Name(state), "unknown")


def _plain(value: Any) -> Any:
    """A data part's value with its whole numbers as ints: protobuf's Struct, A2A's data
    carrier, holds every number as a double (``21`` arrives as ``21.0``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _texts(parts: Sequence[Any]) -> tuple[str, list[Any]]:
    from google.protobuf.json_format import MessageToDict

    texts, data = [], []
    for part in parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            data.append(_plain(MessageToDict(part.data)))
        elif kind == "url":
            texts.append(part.url)
    return "\n".join(t for t in texts if t), data


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
            self._card = _fetch_card(self.url, self.headers, timeout)
            name = _INVALID.sub("_", self._card.name)[:64] or "remote_agent"
            if description is None:
                description = self._card.description
        self.remote_model = _RemoteModel(self)
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
                _fetch_card, self.url, self.headers, self.exchange_timeout)
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
            parts.append(_data_part(data))
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
                        update = _follow(event, result, context_id, task_id)
                        if update is not None:
                            yield update
                if result.state not in _FINAL:
                    raise ValueError(f"its stream ended while the task was {result.state}, "
                                     "before any final state")
            except TimeoutError as exc:
                if result.task_id:  # the remote should not go on with work nobody waits for
                    await _cancel(client, result.task_id, reserve)
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


def _remote_tool_call(tool: str, arguments: str, call_id: str) -> str:
    """A call the remote agent waits to make until a person approves it: ``tool`` with
    ``arguments``, the remote's call ``call_id``."""
    return _APPROVED


remote_tool_call = FunctionTool(_remote_tool_call, name="remote_tool_call", confirm=True)
"""What a delegated `RemoteAgent` calls for each call its remote task needs approved: the run
stops with it pending (``result.pending.approvals``) and the decision goes to the remote."""


class _TaskGone(Exception):
    """The remote does not know the task a message continues."""


class _RemoteChild(Agent[Any, str]):
    """A `RemoteAgent` as a delegated child: it may ask the run's person (``ask_user``)."""

    remote = True


def _fetch_card(url: str, headers: Mapping[str, str], timeout: float) -> AgentCard:
    import httpx
    from a2a.types.a2a_pb2 import AgentCard
    from google.protobuf.json_format import ParseDict

    card_url = f"{url}/.well-known/agent-card.json"
    try:
        response = httpx.get(card_url, headers=dict(headers), timeout=min(timeout, 30.0))
        response.raise_for_status()
        card: AgentCard = ParseDict(response.json(), AgentCard(), ignore_unknown_fields=True)
        return card
    except (httpx.HTTPError, ValueError) as exc:
        raise UserError(f"No A2A agent card at {card_url}: {exc}. Check the URL (the remote's "
                        "base URL) and that the remote agent is running.") from exc
    except Exception as exc:  # protobuf's ParseError: a card of another shape
        raise UserError(f"The agent card at {card_url} could not be read: {exc}.") from exc


def _data_part(data: Any) -> Any:
    from a2a.types.a2a_pb2 import Part
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Value

    return Part(data=ParseDict(data, Value()))


def _follow(event: Any, result: RemoteResult, context_id: str, task_id: str
            ) -> StatusUpdate | None:
    """Fold one streamed A2A event into ``result``; the progress to show, if any. An event
    of another context, or of another task than the one sent to (or first seen), is refused
    (ValueError): it answers someone else."""
    kind = event.WhichOneof("payload")
    if kind is None:
        return None
    about = getattr(event, kind)
    their_task = about.id if kind == "task" else about.task_id
    wanted = task_id or result.task_id
    if (about.context_id and about.context_id != context_id) or \
            (their_task and wanted and their_task != wanted):
        raise ValueError(f"it sent a {kind} of task {their_task or '-'} in context "
                         f"{about.context_id or '-'}, while this exchange is task "
                         f"{wanted or '(new)'} in context {context_id}")
    result.task_id = result.task_id or their_task
    if kind in ("task", "status_update") and about.metadata:
        _spent(about.metadata, result)
    if kind == "message":
        result.text, data = _texts(event.message.parts)
        result.data.extend(data)
        result.state = "completed"
        return None
    if kind == "task":
        task = event.task
        result.task_id = task.id
        result.state = state_name(task.status.state)
        for artifact in task.artifacts:
            text, data = _texts(artifact.parts)
            result.text = "\n".join(t for t in (result.text, text) if t)
            result.data.extend(data)
        if task.status.HasField("message"):
            said, data = _texts(task.status.message.parts)
            if result.state != "completed" and said:
                result.text = said
            if result.state == "input-required":
                result.data.extend(data)
        return None
    if kind == "artifact_update":
        text, data = _texts(event.artifact_update.artifact.parts)
        result.text = "".join((result.text, text)) if event.artifact_update.append \
            else "\n".join(t for t in (result.text, text) if t)
        result.data.extend(data)
        return None
    if kind == "status_update":
        update = event.status_update
        result.task_id = result.task_id or update.task_id
        result.state = state_name(update.status.state)
        said, data = _texts(update.status.message.parts) if update.status.HasField("message") \
            else ("", [])
        if result.state in ("input-required", "failed", "rejected", "canceled",
                            "auth-required") and said:
            result.text = said
        if result.state == "input-required":
            result.data.extend(data)
        if said and result.state in ("working", "submitted"):
            return StatusUpdate(said, result.state)
    return None


def _spent(metadata: Any, result: RemoteResult) -> None:
    """Read what a relayrace remote reports it used and did from a task's metadata."""
    from google.protobuf.json_format import MessageToDict

    mine = _plain(MessageToDict(metadata)).get(DATA_KEY)
    if not isinstance(mine, dict):
        return
    usage, calls = mine.get("usage"), mine.get("tool_calls")
    if isinstance(usage, dict):
        known = set(Usage.__dataclass_fields__)
        result.usage = {k: v for k, v in usage.items() if k in known and isinstance(v, int)}
    if isinstance(calls, list):
        result.tool_calls = [c for c in calls if isinstance(c, dict)]


async def _cancel(client: Any, task_id: str, within: float) -> None:
    from a2a.types.a2a_pb2 import CancelTaskRequest

    try:
        await asyncio.wait_for(client.cancel_task(CancelTaskRequest(id=task_id)), within)
    except Exception:  # noqa: S110 - best effort: the timeout is what the caller hears of
        pass


def _transcript(messages: Sequence[Message]) -> str:
    """The conversation handed over, as text for a remote that does not read relayrace's."""
    lines = []
    for m in messages:
        if m.role == "user" and m.content:
            lines.append(f"user: {m.content}")
        elif m.role == "assistant" and m.content:
            lines.append(f"{m.name or 'assistant'}: {m.content}")
    return "\n".join(lines)


_OPEN_LIMIT = 4096


class _RemoteModel(Model):
    """Answers a `RemoteAgent`'s turns by exchanging A2A messages with the remote agent."""

    output_mode = "prompted"

    def __init__(self, agent: RemoteAgent) -> None:
        self.agent = agent
        self.name = f"a2a:{agent.url}"
        # context id -> its task waiting for input; at most _OPEN_LIMIT conversations (one
        # forgotten is found again on the remote, by `RemoteAgent.open_task`)
        self._open: dict[str, str] = {}

    async def request(self, request: ModelRequest) -> ModelResponse:
        response: ModelResponse | None = None
        async for item in self.stream(request):
            if isinstance(item, ModelResponse):
                response = item
        assert response is not None
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        agent = self.agent
        context_id = context_id_for(request.conversation or "-", agent.name)
        text, task_id, data = await self._what_to_send(request, context_id)
        result = RemoteResult(state="unknown")
        async for item in agent.send(text, context_id=context_id, task_id=task_id, data=data):
            if isinstance(item, RemoteResult):
                result = item
            else:
                yield item
        yield self._answer(request, context_id, result)

    async def _what_to_send(self, request: ModelRequest, context_id: str
                            ) -> tuple[str, str, Any]:
        """The text (and data) to send, and the remote task it continues ("": a new one)."""
        messages = request.messages
        mine = [i for i, m in enumerate(messages)
                if m.role == "assistant" and m.name == self.agent.name]
        last = mine[-1] if mine else -1
        if last >= 0:
            asked = _what_was_asked(messages[last].tool_calls, messages[last + 1:])
            if asked is not None:
                return asked
        if last < 0:  # the conversation handed over (or the task given), as it was filtered
            return _transcript(messages), "", {DATA_KEY: {"messages": _said(messages)}}
        new = "\n".join(m.content for m in messages[last + 1:] if m.role == "user")
        task_id = self._open.pop(context_id, "") or await self.agent.open_task(context_id)
        return new, task_id, None

    def _answer(self, request: ModelRequest, context_id: str,
                result: RemoteResult) -> ModelResponse:
        name = self.agent.name
        offered = {t.name for t in request.tools}
        calls: tuple[ToolCall, ...] = ()
        text = result.text
        if result.state == "input-required":
            if "ask_user" in offered:  # a delegated child: the run's pending request(s)
                calls, text = _requests(result), ""
            else:  # the active agent of a chat: the next user turn answers it
                self._open[context_id] = result.task_id
                if len(self._open) > _OPEN_LIMIT:
                    del self._open[next(iter(self._open))]
        elif result.state == "completed":
            structured = [d for d in result.data if not (isinstance(d, dict) and DATA_KEY in d)]
            if structured:  # the remote's data parts are part of its answer, as JSON
                value = structured[0] if len(structured) == 1 else structured
                text = "\n".join(t for t in (text, json.dumps(value, ensure_ascii=False)) if t)
            report = next((d[DATA_KEY]["report"] for d in result.data if isinstance(d, dict)
                           and isinstance(d.get(DATA_KEY), dict)
                           and isinstance(d[DATA_KEY].get("report"), dict)), None)
            if SUBMIT_REPORT in offered and report is not None:
                calls = (ToolCall(id=f"a2a-report-{secrets.token_hex(4)}", name=SUBMIT_REPORT,
                                  arguments=json.dumps(report)),)
                text = ""
            elif FINISH_TASK in offered:  # done: control goes back to the agent that transferred
                calls = (ToolCall(id=f"a2a-done-{secrets.token_hex(4)}", name=FINISH_TASK,
                                  arguments=json.dumps({"result": text})),)
                text = ""
        else:
            why = f"The remote agent {name!r} at {self.agent.url}: its task ended " \
                  f"{result.state}" + (f": {result.text}" if result.text else ".")
            if FINISH_TASK in offered:  # the agent that transferred hears of it and goes on
                calls = (ToolCall(id=f"a2a-done-{secrets.token_hex(4)}", name=FINISH_TASK,
                                  arguments=json.dumps({"result": why})),)
                text = ""
            else:
                raise ModelProviderError(why, provider="a2a")
        # a relayrace remote says what its run used: its requests, tool calls and tokens count
        # as this agent's; another remote's exchange is one request
        remote = Usage(**result.usage) if result.usage else None
        used = Usage(requests=1)
        if remote is not None:
            used.add_tokens(remote)
        return ModelResponse(message=Message.assistant(text, calls, name=name),
                             usage=used, model=self.name, remote=remote)


def _pending_of(result: RemoteResult) -> dict[str, Any]:
    """What a relayrace remote's input-required state waits for (its data part), if said."""
    for d in result.data:
        mine = d.get(DATA_KEY) if isinstance(d, dict) else None
        if isinstance(mine, dict) and isinstance(mine.get("pending"), dict):
            pending: dict[str, Any] = mine["pending"]
            return pending
    return {}


def _requests(result: RemoteResult) -> tuple[ToolCall, ...]:
    """The calls a delegated child makes for its remote task's input-required state: one
    ``ask_user`` per question and one ``remote_tool_call`` per call to approve (a remote that
    does not list them asks its status message's text)."""
    pending, task = _pending_of(result), result.task_id

    def call_id(prefix: str, remote_id: str) -> str:
        return f"{prefix}{secrets.token_hex(4)}:{task}:{remote_id}"

    calls = [ToolCall(id=call_id(_ASK_PREFIX, str(q.get("id", ""))), name="ask_user",
                      arguments=json.dumps({"question": str(q.get("question", ""))}
                                           | _choices(q.get("choices"))))
             for q in pending.get("questions") or () if isinstance(q, dict)]
    calls += [ToolCall(id=call_id(_APPROVE_PREFIX, str(a.get("call_id", ""))),
                       name=remote_tool_call.name, arguments=json.dumps({
                           "tool": str(a.get("tool", "")), "arguments": str(a.get("arguments", "")),
                           "call_id": str(a.get("call_id", ""))}))
              for a in pending.get("approvals") or () if isinstance(a, dict)]
    if not calls:
        calls = [ToolCall(id=call_id(_ASK_PREFIX, ""), name="ask_user",
                          arguments=json.dumps({"question": result.text or "(no question)"}))]
    return tuple(calls)


def _choices(choices: Any) -> dict[str, Any]:
    """``ask_user``'s choices argument for a remote question's choices, if they are some."""
    if isinstance(choices, list) and choices and all(isinstance(c, str) and c for c in choices):
        return {"choices": choices}
    return {}


def _what_was_asked(calls: Sequence[ToolCall], after: Sequence[Message]
                    ) -> tuple[str, str, Any] | None:
    """The answer to the requests `_requests` made (what to send, the task it goes to, the
    decisions by the remote's ids), once the run has them; None if the calls were others."""
    ours = [c for c in calls if c.id.startswith((_ASK_PREFIX, _APPROVE_PREFIX))]
    if not ours:
        return None
    said = {m.tool_call_id: m.content for m in after if m.role == "tool"}
    answers: dict[str, str] = {}
    approvals: dict[str, bool] = {}
    task_id = ""
    for call in ours:
        _, task_id, remote_id = call.id.split(":", 2)
        if call.id.startswith(_APPROVE_PREFIX):
            approvals[remote_id] = said.get(call.id) == _APPROVED
        else:
            answers[remote_id] = said.get(call.id, "")
    text = "\n".join([*answers.values(), *("yes" if ok else "no" for ok in approvals.values())])
    if "" in answers:  # a remote that did not list its question: the text answers it
        return text, task_id, None
    return text, task_id, {DATA_KEY: {"answers": answers, "approvals": approvals}}


def _said(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """What was said, for a relayrace remote to take as its run's input: the user's and the
    agents' text, without the calls and results of tools the remote does not have."""
    return [{"role": m.role, "content": m.content, "name": m.name} for m in messages
            if m.role in ("user", "assistant") and m.content]
