"""The OpenAI-compatible endpoints: ``POST /v1/chat/completions`` and ``GET /v1/models``.

Each served entry agent is a model id. The conversation lives in a relayrace session: the one
the ``X-Relayrace-Session`` header names (its handle). Without one, a request starts a new
session seeded with the messages it sent, unless the server matches transcripts
(``match_transcripts``): then the one session whose last answer ends the messages the client
sent before its new one goes on (several such sessions: refused, never guessed).
Streamed content is the answer, byte for byte as the non-streamed message; with the
``X-Relayrace-Progress: true`` header, chunks also carry the run's progress (handoffs, tool
calls, delegations, as the CLI shows them) in a ``relayrace`` field that OpenAI clients ignore.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..agents.approvals import PendingRun
from ..core.events import (
    AgentEvent,
    DelegationEvent,
    GuardrailTriggeredEvent,
    HandoffEvent,
    MessageEvent,
    StatusEvent,
    ToolResultEvent,
)
from ..core.messages import Message
from ..sessions import new_session_id
from ._conversations import check_session_id, transcript_key
from ._errors import ApiError, run_failed
from ._idempotency import Claim
from ._runs import ENDED_WITHOUT_RESULT
from ._stream import EventStream, Piece

__all__ = ["router"]

router = APIRouter(prefix="/v1")

SESSION_HEADER = "X-Relayrace-Session"
PROGRESS_HEADER = "X-Relayrace-Progress"


class ChatMessage(BaseModel):
    """One message of the conversation, as OpenAI's clients send it."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    """A chat completion request; options relayrace does not use are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, list):  # content parts: the text ones
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return content or ""


def _server(request: Request) -> Any:
    return request.app.state.relayrace


@router.get("/models", summary="The served agents, as model ids")
async def models(request: Request) -> dict[str, Any]:
    return {"object": "list", "data": [
        {"id": name, "object": "model", "created": 0, "owned_by": "relayrace"}
        for name in _server(request).agents]}


@router.post("/chat/completions", summary="Talk to a served agent (OpenAI's protocol)")
async def chat(request: Request, body: ChatRequest) -> Any:
    claim = await _server(request).idempotency.enter(
        request, request.state.owner, body, request.headers.get(SESSION_HEADER))
    if isinstance(claim, Response):  # the same request again: the first one's response
        return claim
    async with claim:
        return await _chat(request, body, claim)


async def _chat(request: Request, body: ChatRequest, claim: Claim) -> Response:
    server = _server(request)
    owner: str = request.state.owner
    agent = server.agents.get(body.model)
    if agent is None:
        raise ApiError(404, f"The model {body.model!r} does not exist; the served agents are: "
                       f"{', '.join(server.agents)}.", "model_not_found")
    said = [(m.role, _text(m.content)) for m in body.messages if m.role in ("user", "assistant")]
    if not said or said[-1][0] != "user" or not said[-1][1].strip():
        raise ApiError(400, "The last message must be the user's, with text.",
                       "invalid_request_error")
    named = request.headers.get(SESSION_HEADER)
    session_id = _session_for(server, owner, body.model, said[:-1],
                              None if named is None else check_session_id(named))
    made = server.created.get(session_id)  # created through the API, not yet run
    info = await server.store.get_info(session_id)
    if (info is not None and info.owner != owner) or (made is not None and made["owner"] != owner):
        raise ApiError(404, f"No session {session_id!r}.", "not_found")
    end = server.conversations.end_of(session_id) if info is not None else None
    if len(said) > 1 and end is not None and end != transcript_key(owner, body.model, said[:-1]):
        # An edited or regenerated earlier turn: the session holds turns the client dropped.
        raise ApiError(409, f"The messages sent are not session {session_id!r}'s conversation "
                       "(an earlier turn was edited or regenerated). Send only the new message "
                       f"to go on with it, or drop {SESSION_HEADER} (or name a new id) to start "
                       "a session from the messages sent.", "conversation_mismatch")
    session = server.store.session(session_id, owner=owner)
    stopped = None if info is None else await PendingRun.from_session(session, entry=agent)
    # A person holding the conversation takes the user's messages; decisions come first.
    if stopped is not None and (stopped.approvals or stopped.questions):
        raise ApiError(409, f"Session {session_id!r} waits for decisions; answer them at "
                       f"/api/sessions/{session_id}/pending.", "conflict")
    if session_id in server.runs.active:
        raise ApiError(409, f"Session {session_id!r} has a run going.", "conflict")
    # A new session starts from the whole conversation the client sent; a known one goes on.
    run_input: Any = said[-1][1] if info is not None or len(said) == 1 else [
        Message.user(text) if role == "user" else Message.assistant(text)
        for role, text in said]
    run = server.runs.start(agent, session, owner, run_input)
    headers = {SESSION_HEADER: session_id, "X-Relayrace-Run": run.run_id}
    completion_id = "chatcmpl-" + secrets.token_hex(12)

    # The transcript the answer will end: what the client sent (a new session is seeded with
    # it), or the session's so far and the new message (a client may send only that). A known
    # session whose transcript the server does not remember (a restart) stays unremembered.
    said_new = said if info is None else said[-1:]

    def remember(answer: str) -> None:
        if info is None or end is not None:
            server.conversations.answered(session_id, transcript_key(
                owner, body.model, [*said_new, ("assistant", answer)], after=end))

    if body.stream:
        if claim.key is not None:  # a retry replays the whole stream, once it has ended
            claim.settle(run, lambda ended: _whole_stream(ended, body.model, completion_id,
                                                          remember, headers))
        progress = request.headers.get(PROGRESS_HEADER, "").lower() in ("1", "true", "yes")
        return EventStream(_chunks(run, body.model, completion_id, remember, progress),
                           headers)

    async def respond(run: Any) -> Response:
        if run.status in ENDED_WITHOUT_RESULT:
            return run_failed(run.status, run.error, headers=headers)
        result = run.result or {}
        usage = result.get("usage") or {}
        answer = _final(result, session_id)
        remember(answer)
        return JSONResponse({
            "id": completion_id, "object": "chat.completion", "created": int(time.time()),
            "model": body.model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": answer}}],
            "usage": {"prompt_tokens": usage.get("input_tokens", 0),
                      "completion_tokens": usage.get("output_tokens", 0),
                      "total_tokens": usage.get("total_tokens", 0)},
        }, headers=headers)

    return await asyncio.shield(claim.settle(run, respond))


async def _whole_stream(run: Any, model: str, completion_id: str,
                        remember: Callable[[str], None], headers: dict[str, str]) -> Response:
    """An ended run's stream, whole, as its first client was sent it (for a retry)."""
    body = "".join([part async for part, _ in _chunks(run, model, completion_id, remember,
                                                      progress=False)])
    return Response(body, media_type="text/event-stream", headers=headers)


def _session_for(server: Any, owner: str, model: str, history: Sequence[tuple[str, str]],
                 named: str | None) -> str:
    """The session a request goes on with: the one it names, the one the transcript it resends
    ends (only on a server that matches transcripts), or a new one."""
    if named is not None:
        return named
    if server.match_transcripts and history:
        matches = server.conversations.ending_with(transcript_key(owner, model, history))
        if len(matches) > 1:
            raise ApiError(409, f"{len(matches)} sessions end with the messages sent, so which "
                           f"one goes on is ambiguous; name it in the {SESSION_HEADER} header "
                           "(each answer's response carries it).", "ambiguous_conversation")
        if matches:
            return str(matches[0])
    return "oai-" + new_session_id()


def _final(result: dict[str, Any], session_id: str) -> str:
    """The answer; for a run that stopped for a person, what it waits for."""
    pending = result.get("pending")
    if pending:
        asked = [f"- {q['question']} (question {q['id']})" for q in pending["questions"]]
        asked += [f"- approve {a['tool']}({a['arguments']})? (call {a['call_id']})"
                  for a in pending["approvals"]]
        held = pending.get("takeover")
        if held and not asked:
            return (f"{held['agent']} (a person) has the conversation and will answer; their "
                    f"replies are added at POST /api/sessions/{session_id}/pending.")
        return ("The run waits for a person:\n" + "\n".join(asked) +
                f"\nDecide at POST /api/sessions/{session_id}/pending.")
    output = result.get("final_output")
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _render(event: AgentEvent) -> str:
    """The progress an event shows, as the CLI shows it: tool calls and results, handoffs,
    delegations, status and guardrails; "" for anything else, text above all (the answer's
    own pieces are the content's, never progress)."""
    kind, path = type(event), event.path
    depth = path.count("/")
    pad = "  " * depth
    e: Any = event
    if kind is MessageEvent:
        return "".join(f"\n{pad}⚙ {c.name}({c.arguments[:200]})\n"
                       for c in e.message.tool_calls)
    if kind is ToolResultEvent:
        content = e.message.content
        short = content if len(content) <= 200 else content[:199] + "…"
        return f"{pad}→ {e.tool_name}: {short}\n"
    if kind is HandoffEvent:
        verb = "returned to" if e.is_return else "→"
        return f"\n{pad}↪ handoff {e.agent} {verb} {e.to_agent}: {e.reason}\n"
    if kind is DelegationEvent:
        outcome = "ok" if e.ok else f"failed: {e.error}"
        return f"{pad}⇢ {e.agent} delegated to {e.child_agent} {outcome}\n"
    if kind is StatusEvent:
        return f"{pad}⋯ {e.agent}: {e.text}\n"
    if kind is GuardrailTriggeredEvent:
        return f"{pad}⛨ guardrail {e.guardrail} {e.action}\n"
    return ""


async def _chunks(run: Any, model: str, completion_id: str,
                  remember: Callable[[str], None], progress: bool) -> AsyncIterator[Piece]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None,
              shown: str | None = None) -> str:
        body: dict[str, Any] = {
            "id": completion_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if shown is not None:  # an extension field: OpenAI's clients ignore it
            body["relayrace"] = {"progress": shown}
        return "data: " + json.dumps(body, ensure_ascii=False) + "\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if not progress:  # nothing shows before the answer: one wait, then one write
        await run.events.ended()
    async for batch in run.events.follow(0):
        for _, event in batch:
            if isinstance(event, dict):  # how the run ended: the last event
                if event.get("status") in ("failed", "cancelled"):
                    out.append(chunk({"content": f"\n[the run {event['status']}: "
                                                 f"{event.get('error')}]"}))
                else:  # the answer (or what the run waits for): as the non-streamed message
                    answer = _final(event.get("result") or {}, run.session_id)
                    out.append(chunk({"content": answer}))
                    remember(answer)
                out += [chunk({}, "stop"), "data: [DONE]\n\n"]
                yield "".join(out), True
                return
            shown = _render(event) if progress else ""
            if shown:
                out.append(chunk({}, shown=shown))
        yield "".join(out), False  # what arrived together is written together
        out = []
