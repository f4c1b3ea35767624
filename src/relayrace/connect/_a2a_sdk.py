"""The bridge to the ``a2a-sdk``: relayrace's values to and from A2A's protobuf messages.

What a remote's streamed events come to (`RemoteResult`, folded by `follow`), the text and data
of message parts, task states as relayrace names them, the agent card, and the one remote
context (``contextId``) per conversation. Used by the client (`relayrace.connect.a2a`) and the
server (`relayrace.connect.a2a_server`); the SDK is imported only when a function needs it.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.exceptions import UserError
from ..core.usage import Usage
from ..models.interface import StatusUpdate

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

__all__ = ["DATA_KEY", "FINAL", "RemoteResult", "cancel", "context_id_for", "data_part",
           "fetch_card", "follow", "sdk", "state_name", "texts"]

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


FINAL = frozenset({"completed", "failed", "canceled", "rejected", "input-required",
                   "auth-required"})
"""The task states that end an exchange (the task is done, or waits for the caller)."""
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


def texts(parts: Sequence[Any]) -> tuple[str, list[Any]]:
    """The text of message ``parts`` (text and URL parts, one a line) and their data parts."""
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


def fetch_card(url: str, headers: Mapping[str, str], timeout: float) -> AgentCard:
    """The agent card of the remote at base ``url``; a `UserError` saying what to check when
    there is none or it cannot be read."""
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


def data_part(data: Any) -> Any:
    """A message part carrying ``data`` (JSON-like) as A2A's structured data."""
    from a2a.types.a2a_pb2 import Part
    from google.protobuf.json_format import ParseDict
    from google.protobuf.struct_pb2 import Value

    return Part(data=ParseDict(data, Value()))


def follow(event: Any, result: RemoteResult, context_id: str, task_id: str
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
        result.text, data = texts(event.message.parts)
        result.data.extend(data)
        result.state = "completed"
        return None
    if kind == "task":
        task = event.task
        result.task_id = task.id
        result.state = state_name(task.status.state)
        for artifact in task.artifacts:
            text, data = texts(artifact.parts)
            result.text = "\n".join(t for t in (result.text, text) if t)
            result.data.extend(data)
        if task.status.HasField("message"):
            said, data = texts(task.status.message.parts)
            if result.state != "completed" and said:
                result.text = said
            if result.state == "input-required":
                result.data.extend(data)
        return None
    if kind == "artifact_update":
        text, data = texts(event.artifact_update.artifact.parts)
        result.text = "".join((result.text, text)) if event.artifact_update.append \
            else "\n".join(t for t in (result.text, text) if t)
        result.data.extend(data)
        return None
    if kind == "status_update":
        update = event.status_update
        result.task_id = result.task_id or update.task_id
        result.state = state_name(update.status.state)
        said, data = texts(update.status.message.parts) if update.status.HasField("message") \
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


async def cancel(client: Any, task_id: str, within: float) -> None:
    """Ask the remote to cancel ``task_id``, waiting at most ``within`` seconds; never fails."""
    from a2a.types.a2a_pb2 import CancelTaskRequest

    try:
        await asyncio.wait_for(client.cancel_task(CancelTaskRequest(id=task_id)), within)
    except Exception:  # noqa: S110 - best effort: the timeout is what the caller hears of
        pass
