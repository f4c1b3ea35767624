"""How a `RemoteAgent`'s turns are answered: `RemoteModel` turns a model request into a
message to the remote agent and its task's outcome into the model's response (an answer, a
report, a transfer back, or the questions and approvals its remote task waits for).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ..agents.handoffs import FINISH_TASK
from ..agents.tools import FunctionTool
from ..core.exceptions import ModelProviderError
from ..core.messages import Message, ToolCall
from ..core.reports import SUBMIT_REPORT
from ..core.usage import Usage
from ..models.interface import Model, ModelRequest, ModelResponse, StatusUpdate
from ._a2a_sdk import DATA_KEY, RemoteResult, context_id_for

__all__ = ["Remote", "RemoteModel", "remote_tool_call"]

# The calls a delegated remote child makes for its remote task's input-required state: an
# ask_user call per question, a remote_tool_call (needing approval) per call to approve. Their
# ids are ``prefix + nonce:task id:remote id`` (the log keeps them, so a resume finds the task).
_ASK_PREFIX = "a2a-ask-"
_APPROVE_PREFIX = "a2a-approve-"
_APPROVED = "approved"


class Remote(Protocol):
    """What `RemoteModel` needs of the agent whose turns it answers (a `RemoteAgent`)."""

    @property
    def name(self) -> str: ...

    @property
    def url(self) -> str: ...

    def send(self, text: str, *, context_id: str, task_id: str = "",
             data: Any = None) -> AsyncIterator[StatusUpdate | RemoteResult]:
        """One message to the remote, its task's progress, then its `RemoteResult` last."""
        ...

    async def open_task(self, context_id: str) -> str:
        """The remote task of ``context_id`` that waits for input ("" when none)."""
        ...


def _remote_tool_call(tool: str, arguments: str, call_id: str) -> str:
    """A call the remote agent waits to make until a person approves it: ``tool`` with
    ``arguments``, the remote's call ``call_id``."""
    return _APPROVED


remote_tool_call = FunctionTool(_remote_tool_call, name="remote_tool_call", confirm=True)
"""What a delegated `RemoteAgent` calls for each call its remote task needs approved: the run
stops with it pending (``result.pending.approvals``) and the decision goes to the remote."""


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


class RemoteModel(Model):
    """Answers a `RemoteAgent`'s turns by exchanging A2A messages with the remote agent."""

    output_mode = "prompted"

    def __init__(self, agent: Remote) -> None:
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
