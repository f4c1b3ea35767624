"""A relayrace team served over A2A: `create_a2a_app`, and ``relayrace a2a serve``.

Each A2A message is a run of the team in the session of its ``contextId`` (kept in
relayrace's session store, so ``relayrace sessions`` shows it and a restarted server goes
on). Handoffs, delegations and remote progress stream as ``working`` status updates; the
answer is the task's artifact (text, and a data part with the structured output and report);
a run that stops for an approval or a question leaves the task ``input-required``, and the
next message on the context answers it. Cancelling a task cancels its run, and the session
stays valid. Built on the ``a2a-sdk``'s request handler and Starlette routes.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import urlsplit

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from ..agents.agent import Agent
from ..agents.approvals import PendingRun
from ..core.events import (
    AgentEvent,
    DelegationEvent,
    GuardrailTriggeredEvent,
    HandoffEvent,
    StatusEvent,
    ToolResultEvent,
)
from ..core.exceptions import AnswerError, RelayraceError, UserError
from ..core.messages import Message
from ..core.reports import parse_report
from ..models.interface import Model
from ..runner import Runner, RunResult
from ..sessions import SessionStore, open_store
from ._a2a_sdk import DATA_KEY, data_part, sdk, texts
from .asgi import Access, HostGuard, serve_asgi
from .keys import Keys, presented_key

__all__ = ["agent_card", "create_a2a_app", "serve_a2a", "session_id_for"]

_messages: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_YES = {"yes", "y", "approve", "approved", "ok", "allow", "true"}
_NO = {"no", "n", "reject", "rejected", "deny", "false"}


def session_id_for(context_id: str, owner: str = "") -> str:
    """The relayrace session that holds the A2A context ``context_id`` of the API key whose
    owner id is ``owner`` (``""``: a server without keys): one key never reaches another's."""
    scoped = f"{owner}\n{context_id}" if owner else context_id
    return "a2a-" + hashlib.sha256(scoped.encode()).hexdigest()[:24]


def agent_card(agents: Sequence[Agent[Any]], *, url: str, name: str | None = None,
               version: str = "1", keys_required: bool = False) -> Any:
    """The A2A agent card of ``agents``: each agent a skill, and each of its tools one too;
    with ``keys_required``, its security schemes say how to send the API key."""
    sdk()
    from a2a.types.a2a_pb2 import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        APIKeySecurityScheme,
        HTTPAuthSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    skills = []
    for agent in agents:
        skills.append(AgentSkill(id=agent.name, name=agent.name, tags=["agent"],
                                 description=agent.description or f"The agent {agent.name}."))
        for t in agent.tools:
            skills.append(AgentSkill(id=f"{agent.name}.{t.name}", name=t.name, tags=["tool"],
                                     description=t.description or t.name))
    first = agents[0]
    schemes = {"bearer": SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(
                   scheme="Bearer", description="An API key of the server, as a bearer token.")),
               "apiKey": SecurityScheme(api_key_security_scheme=APIKeySecurityScheme(
                   location="header", name="X-API-Key",
                   description="An API key of the server, in the X-API-Key header."))}
    secured: dict[str, Any] = {} if not keys_required else {
        "security_schemes": schemes,
        "security_requirements": [SecurityRequirement(schemes={n: StringList()})
                                  for n in schemes]}
    return AgentCard(**secured,
        name=name or first.name, version=version,
        description=first.description or f"The relayrace agent {first.name} and its team.",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"], skills=skills)


def create_a2a_app(agents: Agent[Any] | Sequence[Agent[Any]], *, url: str,
                   store: SessionStore | str | None = None, model: Model | str | None = None,
                   max_turns: int | None = None, name: str | None = None,
                   max_tasks: int = 10_000, api_keys: Sequence[str] = (),
                   allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()) -> Any:
    """A Starlette app serving ``agents`` over A2A (JSON-RPC at ``/``, the card at
    ``/.well-known/agent-card.json``); ``url`` is where clients reach it.

    Sessions live in ``store`` (a `SessionStore` or what `open_store` reads; default: the
    SQLite file ``.relayrace/sessions.db``). A message goes to the first agent unless its
    metadata names another (``{"agent": name}``). The server remembers its ``max_tasks``
    most recently updated tasks (in memory); a message on a context whose task was
    forgotten, or sent before a restart, goes on in the context's session all the same.
    Requests must name a loopback host, ``url``'s or one of ``allowed_hosts`` as their Host,
    and a web page elsewhere than those or ``allowed_origins`` may not post (`HostGuard`).

    With ``api_keys``, every request but the card's needs one (``Authorization: Bearer
    KEY`` or ``X-API-Key: KEY``; else 401), and each key has its own tasks and contexts:
    another key's task is not found, and its context id names a different conversation.
    """
    sdk()
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    served = [agents] if isinstance(agents, Agent) else list(agents)
    if isinstance(max_tasks, bool) or not isinstance(max_tasks, int) or max_tasks < 1:
        raise UserError(f"max_tasks is how many tasks the server remembers, an int >= 1; "
                        f"got {max_tasks!r}.")
    if not served:
        raise UserError("An A2A server needs at least one agent to serve.")
    sessions = store if isinstance(store, SessionStore) else open_store(store)
    keys = Keys(api_keys)
    card = agent_card(served, url=url, name=name, keys_required=keys.required)
    tasks = _recent_tasks_class()(max_tasks)
    executor = _executor_class()(served, sessions, model, max_turns, tasks)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=tasks,
                                    agent_card=card)
    access = Access([urlsplit(url).netloc, *allowed_hosts], allowed_origins)
    return Starlette(routes=[*create_agent_card_routes(card),
                             *create_jsonrpc_routes(handler, rpc_url="/")],
                     middleware=[Middleware(HostGuard, access=access), _key_check(keys)])


def _key_check(keys: Keys) -> Any:
    """The middleware that lets in a request with a valid key (any, without keys) as the
    key's owner, which the SDK's task store and the executor scope everything by."""
    from starlette.authentication import (
        AuthCredentials,
        AuthenticationBackend,
        AuthenticationError,
        SimpleUser,
    )
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.requests import HTTPConnection
    from starlette.responses import JSONResponse

    class KeyBackend(AuthenticationBackend):
        async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser]:
            if conn.url.path.startswith("/.well-known/"):  # the card says how to get in
                return AuthCredentials(), SimpleUser("")
            owner = keys.owner(presented_key(conn.headers))
            if owner is None:
                raise AuthenticationError("A valid API key is needed: send it as "
                                          "'Authorization: Bearer KEY' or 'X-API-Key: KEY'.")
            return AuthCredentials(["authenticated"]), SimpleUser(owner)

    def refuse(conn: HTTPConnection, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": {"message": str(exc), "type": "unauthorized"}},
                            status_code=401, headers={"WWW-Authenticate": "Bearer"})

    return Middleware(AuthenticationMiddleware, backend=KeyBackend(), on_error=refuse)


def _recent_tasks_class() -> type:
    from collections import OrderedDict

    from a2a.server.tasks import InMemoryTaskStore

    class RecentTasks(InMemoryTaskStore):
        """The SDK's in-memory task store, holding the ``limit`` most recently saved tasks:
        a long-running server's memory stays bounded (the sessions keep the conversations)."""

        def __init__(self, limit: int) -> None:
            super().__init__()
            self.limit = limit
            self.order: OrderedDict[str, Any] = OrderedDict()  # task id -> its call context

        async def save(self, task: Any, context: Any) -> None:
            await super().save(task, context)
            self.order[task.id] = context
            self.order.move_to_end(task.id)
            while len(self.order) > self.limit:
                old, owner = self.order.popitem(last=False)
                await super().delete(old, owner)

        async def delete(self, task_id: str, context: Any) -> None:
            self.order.pop(task_id, None)
            await super().delete(task_id, context)

    return RecentTasks


def _executor_class() -> type:
    from collections import OrderedDict

    from a2a.server.agent_execution import AgentExecutor

    class Executor(AgentExecutor):
        def __init__(self, agents: list[Agent[Any]], store: SessionStore,
                     model: Model | str | None, max_turns: int | None, tasks: Any) -> None:
            self.agents = {a.name: a for a in agents}
            self.default = agents[0]
            self.store = store
            self.model = model
            self.max_turns = max_turns
            # session id -> the task that asked for input there: while the server remembers
            # that task, only it takes the answer; once forgotten (or after a restart), any
            # task of its owner on the context does
            self.asking: OrderedDict[str, str] = OrderedDict()
            self.tasks = tasks

        def asked(self, session_id: str, task_id: str) -> None:
            self.asking[session_id] = task_id
            self.asking.move_to_end(session_id)
            while len(self.asking) > self.tasks.limit:
                self.asking.popitem(last=False)

        async def execute(self, context: Any, event_queue: Any) -> None:
            await _execute(self, context, event_queue)

        async def cancel(self, context: Any, event_queue: Any) -> None:
            from a2a.server.tasks import TaskUpdater

            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    return Executor


async def _execute(server: Any, context: Any, queue: Any) -> None:
    from a2a.helpers.proto_helpers import new_task_from_user_message
    from a2a.server.tasks import TaskUpdater
    from a2a.types.a2a_pb2 import TaskState

    task = context.current_task
    if task is None:
        task = new_task_from_user_message(context.message)
        await queue.enqueue_event(task)
    up = TaskUpdater(queue, task.id, task.context_id)
    text, data = texts(context.message.parts)
    given: dict[str, Any] = next((d[DATA_KEY] for d in data if isinstance(d, dict)
                  and isinstance(d.get(DATA_KEY), dict)), {})
    from google.protobuf.json_format import MessageToDict

    asked = context.metadata or MessageToDict(context.message.metadata)
    wanted = str(asked.get("agent") or "")
    if wanted and wanted not in server.agents:
        await up.reject(up.new_agent_message(_parts(
            f"No agent {wanted!r} is served here; the agents are: "
            f"{', '.join(server.agents)}.")))
        return
    agent = server.agents.get(wanted, server.default)
    session_id = session_id_for(task.context_id, context.call_context.user.user_name)
    session = server.store.session(session_id)
    pending = await PendingRun.from_session(session, entry=agent)
    asker = server.asking.get(session_id, task.id) if pending is not None else task.id
    if asker != task.id and await server.tasks.get(asker, context.call_context) is not None:
        await up.reject(up.new_agent_message(_parts(
            f"This conversation waits for an answer on its task {asker}: send the answer "
            "there (with that taskId).")))
        return
    options: dict[str, Any] = {"session": session, "model": server.model,
                               "max_turns": server.max_turns}
    run_input: Any = text
    # A person holding the conversation takes the message as the user's; decisions and
    # answers are what a message to a run waiting on them gives.
    if pending is not None and (pending.approvals or pending.questions):
        try:
            options["approvals"], options["answers"] = _decisions(pending, text, given)
        except AnswerError as exc:
            await up.requires_input(up.new_agent_message(_parts(
                f"{exc} {_asking(pending)}", {"pending": _pending(pending)})))
            return
        run_input = None
    elif isinstance(given.get("messages"), list):
        try:
            run_input = _messages.validate_python(given["messages"]) or text
        except ValueError:
            run_input = text
    await up.start_work()
    stream = Runner.stream(agent, run_input, **options)
    calls: list[dict[str, Any]] = []  # the run's tool calls, for the task's metadata
    try:
        async for event in stream:
            if isinstance(event, ToolResultEvent):
                calls.append({"path": event.path, "tool": event.tool_name,
                              "ok": not event.is_error})
            said = _progress(event)
            if said is not None:
                await up.update_status(TaskState.TASK_STATE_WORKING, up.new_agent_message(
                    _parts(said[0], {"event": said[1]})), metadata=_status_metadata(event))
    except RelayraceError as exc:
        await up.failed(up.new_agent_message(_parts(f"{type(exc).__name__}: {exc}")))
        return
    result = stream.result
    assert result is not None
    # what the run used and did, for a caller that counts and shows its remotes' work
    spent = {DATA_KEY: {"usage": asdict(result.usage.total), "tool_calls": calls}}
    if result.pending is not None:
        server.asked(session_id, task.id)
        await up.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, up.new_agent_message(
            _parts(_asking(result.pending), {"pending": _pending(result.pending)})),
            metadata=spent)
        return
    answer, extra = _answer(result)
    await up.add_artifact(_parts(answer, extra), name="answer")
    await up.update_status(TaskState.TASK_STATE_COMPLETED, metadata=spent)


def _parts(text: str, data: dict[str, Any] | None = None) -> list[Any]:
    from a2a.types.a2a_pb2 import Part

    parts = [Part(text=text)]
    if data is not None:
        parts.append(data_part({DATA_KEY: to_jsonable_python(data, fallback=str)}))
    return parts


def _progress(event: AgentEvent) -> tuple[str, dict[str, Any]] | None:
    """What a run's event says to an A2A client following the task, if anything."""
    kind = type(event)
    where = {"agent": event.agent, "path": event.path, "kind": getattr(event, "kind", "")}
    if kind is HandoffEvent:
        e: Any = event
        verb = "returned control to" if e.is_return else "handed off to"
        return f"{e.agent} {verb} {e.to_agent}: {e.reason}", where | {"to": e.to_agent}
    if kind is DelegationEvent:
        e = event
        outcome = "finished" if e.ok else f"failed: {e.error}"
        return f"{e.path}/{e.child_agent} {outcome}", where | {"child": e.child_agent,
                                                               "ok": e.ok}
    if kind is ToolResultEvent:
        e = event
        status = "failed" if e.is_error else "done"
        return f"{e.path}: {e.tool_name} {status}", where | {"tool": e.tool_name}
    if kind is GuardrailTriggeredEvent:
        return f"{event.path}: a guardrail acted", where
    if kind is StatusEvent:
        e = event
        return f"{e.path}: {e.text}", where | {"state": e.state}
    return None


def _status_metadata(event: AgentEvent) -> dict[str, Any] | None:
    """The status update's own metadata: a handoff as data a client reads without parsing
    the text (``{"relayrace": {"handoff": {"from", "to", "reason", "returned"}}}``)."""
    if not isinstance(event, HandoffEvent):
        return None
    return {DATA_KEY: {"handoff": {"from": event.agent, "to": event.to_agent,
                                   "reason": event.reason, "returned": event.is_return}}}


def _answer(result: RunResult[Any]) -> tuple[str, dict[str, Any]]:
    output = result.final_output
    if isinstance(output, str):
        answer, value = output, None
    else:
        value = to_jsonable_python(output)
        answer = json.dumps(value, ensure_ascii=False)
    report = parse_report(answer)
    reported = (report.key_findings or report.sources or report.gaps
                or report.confidence != "unknown")
    extra: dict[str, Any] = {"agent": result.last_agent.name, "output": value}
    if reported:
        data = report.to_dict()
        data.pop("raw", None)
        extra["report"] = data
    return answer, extra


def _asking(pending: PendingRun) -> str:
    """What the run waits for, as the text of the task's input-required status (the data
    part beside it lists the ids)."""
    lines = [q.question + (f" (one of: {', '.join(q.choices)})" if q.choices else "")
             for q in pending.questions]
    lines += [f"Approve {a.tool_name}({a.arguments}) by {a.path}? (call {a.call_id}; "
              "answer yes or no)" for a in pending.approvals]
    if pending.takeover is not None:
        lines.append(f"{pending.takeover.agent} (a person) has the conversation and will "
                     "answer.")
    return "\n".join(lines)


def _pending(pending: PendingRun) -> dict[str, Any]:
    return {"questions": [{"id": q.id, "question": q.question, "choices": q.choices,
                           "path": q.path} for q in pending.questions],
            "approvals": [{"call_id": a.call_id, "tool": a.tool_name,
                           "arguments": a.arguments, "path": a.path, "note": a.note}
                          for a in pending.approvals]}


def _decisions(pending: PendingRun, text: str, given: dict[str, Any]
               ) -> tuple[dict[str, bool], dict[str, str]]:
    """The approvals and answers a message gives: a data part's ``approvals``/``answers``
    maps, else its text (the answer to every open question; yes or no to every call)."""
    approvals, answers = given.get("approvals"), given.get("answers")
    if isinstance(approvals, dict) or isinstance(answers, dict):
        return ({str(k): bool(v) for k, v in (approvals or {}).items()},
                {str(k): str(v) for k, v in (answers or {}).items()})
    word = text.strip().lower().rstrip(".!")
    decided: dict[str, bool] = {}
    if pending.approvals:
        if word not in _YES | _NO:
            raise AnswerError(f"{text!r} decides nothing: answer yes or no.")
        decided = {a.call_id: word in _YES for a in pending.approvals}
    said = {q.id: text.strip() for q in pending.questions}
    return decided, said


async def serve_a2a(app: Any, *, port: int, host: str = "127.0.0.1",
                    sock: socket.socket | None = None) -> None:
    """Serve ``app`` (from `create_a2a_app`) on ``host:port`` until cancelled."""
    await serve_asgi(app, port=port, host=host, sock=sock)
