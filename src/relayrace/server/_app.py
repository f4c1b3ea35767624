"""`create_app`: the server's ASGI app (FastAPI), its middleware and its state."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse

from .._version import __version__
from ..agents.agent import Agent
from ..connect.asgi import Access, HostGuard
from ..connect.keys import presented_key
from ..core.exceptions import UserError
from ..models.interface import Model
from ..sessions import SessionStore, open_store
from ..tracing import get_trace_processors, set_trace_processors
from . import _api, _evals, _graph, _inbox, _openai, _workbench
from ._console import ConsoleFiles
from ._conversations import Conversations
from ._errors import error_body, install
from ._idempotency import DEFAULT_WINDOW, Idempotency
from ._prices import PriceTable
from ._runs import RunManager
from ._security import Keys, RateLimit, RateLimiter
from ._sessions import SummaryCache

__all__ = ["Server", "create_app"]

log = logging.getLogger("relayrace.server")

DEFAULT_MAX_BODY = 1_000_000
"""Bytes a request body may have unless ``max_body_bytes`` says otherwise."""


@dataclass(eq=False)
class Server:
    """What the routes share: the served agents, the session store and the runs."""

    agents: dict[str, Agent[Any]]
    store: SessionStore
    runs: RunManager
    keys: Keys
    limiter: RateLimiter | None
    max_body: int
    idempotency: Idempotency
    """Requests' ``Idempotency-Key`` headers, recorded in the store."""
    created: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)
    """Sessions created through the API that have no events yet: id -> owner, agent, when it
    was made and whether a run started on it (the oldest forgotten past
    ``_api.CREATED_KEPT``: a client cannot grow it without bound)."""
    conversations: Conversations = field(default_factory=Conversations)
    """Each OpenAI-protocol session's transcript so far (its hash)."""
    match_transcripts: bool = False
    """Whether an OpenAI-protocol request without a session handle goes on with the one
    session whose transcript it resends."""
    summaries: SummaryCache = field(default_factory=SummaryCache)
    """The session list's log summaries, each read again only when its log grew."""
    user: str = ""
    """Who decides approvals on a server without API keys, unless a request says
    (``X-Relayrace-User``)."""

    @property
    def default(self) -> Agent[Any]:
        """The agent a session talks to unless it says otherwise."""
        return next(iter(self.agents.values()))

    @functools.cached_property
    def members(self) -> dict[str, Agent[Any]]:
        """Every agent of the served teams by name, the served ones first: a run may start
        with any of them (teams are fixed once built)."""
        found = dict(self.agents)
        for agent in self.agents.values():
            for name, member in _graph.team_agents(agent).items():
                found.setdefault(name, member)
        return found


def _durable_runners(served: list[Agent[Any]], store: SessionStore) -> dict[str, Any]:
    url = getattr(store, "url", None)
    if url is None:
        raise UserError("A durable server queues runs for workers that share its database: "
                        "give it a SQLite file or a postgresql:// store, not memory://.")
    try:  # imported here: DBOS is an extra
        from ..durable.runs import DurableRunner
    except ImportError as exc:
        raise UserError(f"A durable server needs DBOS: pip install 'relayrace[durable]' "
                        f"({exc}).") from None
    return {a.name: DurableRunner(a, db=url, work=False) for a in served}


def create_app(agents: Agent[Any] | Sequence[Agent[Any]], *,
               store: SessionStore | str | None = None,
               api_keys: Sequence[str] | Mapping[str, str] = (),
               cors_origins: Sequence[str] = (), max_body_bytes: int = DEFAULT_MAX_BODY,
               rate_limit: RateLimit | str | None = None, model: Model | str | None = None,
               max_turns: int | None = None, console: bool = True,
               otel: bool = False, durable: bool = False, allowed_hosts: Sequence[str] = (),
               allowed_origins: Sequence[str] = (),
               idempotency_window: float = DEFAULT_WINDOW,
               match_transcripts: bool = False,
               prices: PriceTable | str | os.PathLike[str] | None = None,
               eval_cases: str | os.PathLike[str] | None = None, user: str = "") -> FastAPI:
    """An ASGI app serving ``agents``: the sessions and runs API (``/api``), the
    OpenAI-compatible endpoints (``/v1``), the web console (``/``), ``/healthz`` and the
    OpenAPI schema (``/openapi.json``).

    Sessions live in ``store`` (a `SessionStore`, or what `open_store` reads; default: the
    SQLite file ``.relayrace/sessions.db``), the same as the CLI's. With ``api_keys``, every
    request needs one (``Authorization: Bearer KEY`` or ``X-API-Key``) and each key sees only
    its own sessions; a key may have a name (``NAME:KEY``, or a mapping of names to keys), which
    the session log records as who decided an approval (without keys: the request's
    ``X-Relayrace-User`` header, else ``user``). ``cors_origins`` lists the origins a browser
    may call from (none by default); ``max_body_bytes`` bounds a request's body (413
    beyond); ``rate_limit`` (``"60/m"`` or a `RateLimit`) bounds each key's requests (429
    with ``Retry-After``).
    The app answers only requests whose ``Host`` is ``localhost``, ``127.0.0.1``, ``[::1]`` or
    one of ``allowed_hosts`` (421 otherwise: DNS rebinding), and refuses a state-changing
    request from a web page (its ``Origin``) on another host unless ``allowed_origins`` or
    ``cors_origins`` lists it (403); every response forbids framing and foreign scripts
    (`relayrace.connect.asgi.HostGuard`). ``otel`` exports runs to OpenTelemetry (needs
    ``relayrace[otel]``): a request's ``traceparent`` then becomes the parent of its run's
    trace. With ``durable`` (needs ``relayrace[durable]`` and a store in a database), the
    API's runs go to the served team's DBOS queue for ``relayrace worker`` processes
    (`relayrace.durable`); the server follows each through its session log. The
    OpenAI-compatible endpoints still run in the server.
    A request that starts a run may send an ``Idempotency-Key``: a retry with the same key
    (from the same API key) within ``idempotency_window`` seconds (a day) gets the first
    request's response and starts no second run; the keys are kept in the store.
    On ``/v1/chat/completions`` a conversation goes on in the session its
    ``X-Relayrace-Session`` header names; a request without one starts a new session, unless
    ``match_transcripts``: then it goes on with the one session whose transcript it resends
    (refused with 409 when several do).
    ``prices`` (a `PriceTable` or the path of its YAML file, docs/console.md) prices the
    usage the console shows. ``eval_cases`` is the case file the console's "Save as eval
    case" may add cases to (the browser never names a path; without it, the case is only
    shown to copy).
    """
    served = [agents] if isinstance(agents, Agent) else list(agents)
    if not served:
        raise UserError("A server needs at least one agent to serve.")
    names = [a.name for a in served]
    if len(set(names)) != len(names):
        raise UserError(f"Served agents need different names; got {names}.")
    if max_body_bytes < 1:
        raise UserError(f"max_body_bytes is a number of bytes >= 1, got {max_body_bytes!r}.")
    access = Access(allowed_hosts, [*allowed_origins, *cors_origins])
    if not idempotency_window > 0:
        raise UserError(f"idempotency_window is a number of seconds > 0, got "
                        f"{idempotency_window!r}.")
    if eval_cases is not None and Path(eval_cases).suffix not in (".yaml", ".yml", ".jsonl"):
        raise UserError(f"eval_cases is a case file (.yaml, .yml or .jsonl), got "
                        f"{os.fspath(eval_cases)!r}.")
    limit = RateLimit.parse(rate_limit) if isinstance(rate_limit, str) else rate_limit
    runs = RunManager(model=model, max_turns=max_turns)
    sessions = store if isinstance(store, SessionStore) else open_store(store)
    server = Server(agents={a.name: a for a in served}, store=sessions,
                    runs=runs, keys=Keys(api_keys),
                    limiter=RateLimiter(limit) if limit is not None else None,
                    max_body=max_body_bytes, match_transcripts=match_transcripts, user=user,
                    idempotency=Idempotency(sessions.idempotency(), idempotency_window))
    exporter = _otel_processor() if otel else None
    if durable:
        runs.durable = _durable_runners(served, server.store)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            for runner in runs.durable.values():
                await runner.start()
            yield
        finally:
            await runs.aclose()
            await server.idempotency.aclose()  # the stopped runs' responses are recorded
            for runner in runs.durable.values():
                await runner.stop()
            await server.store.aclose()
            set_trace_processors([p for p in get_trace_processors()
                                  if p is not runs.traces and p is not exporter])

    app = FastAPI(title="relayrace", version=__version__, lifespan=lifespan,
                  description="Sessions, runs and their events; OpenAI-compatible chat "
                              "completions; the web console.", docs_url=None, redoc_url=None)
    app.state.relayrace = server
    app.state.prices = prices if isinstance(prices, PriceTable | None) else PriceTable.load(prices)
    app.state.eval_cases = _evals.CaseFile(Path(eval_cases)) if eval_cases is not None else None
    install(app)
    app.include_router(_openai.router)  # first: a route is found by trying each in order
    app.include_router(_api.router)
    app.include_router(_workbench.router)
    app.include_router(_graph.router)
    app.include_router(_inbox.router)
    app.include_router(_evals.router)

    @app.get("/healthz", summary="Liveness")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "agents": list(server.agents), "version": __version__}

    docs = _docs_page()

    @app.get("/docs", include_in_schema=False)
    async def try_it() -> HTMLResponse:
        return docs

    app.add_middleware(_Guard, server=server)
    if cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins),
                           allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type",
                                          "Last-Event-ID", "X-Relayrace-Session",
                                          "Idempotency-Key", "X-Relayrace-Progress",
                                          "X-Relayrace-User"],
                           expose_headers=["X-Relayrace-Session", "X-Relayrace-Run",
                                           "Idempotent-Replayed"])
    app.add_middleware(HostGuard, access=access)  # the outermost: checked before anything
    if console:
        app.mount("/", ConsoleFiles(), name="console")
    return app


_OPEN = ("/healthz", "/openapi.json", "/docs")
_SWAGGER = "https://cdn.jsdelivr.net"


def _docs_page() -> HTMLResponse:
    """FastAPI's Swagger UI page, with a policy that lets it load Swagger UI from its CDN and
    run its one inline script (by hash), and still forbids framing it."""
    page = get_swagger_ui_html(openapi_url="/openapi.json", title="relayrace API")
    scripts = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s).digest()).decode()}'"
                       for s in re.findall(rb"<script>(.*?)</script>", page.body, re.S))
    page.headers["Content-Security-Policy"] = (
        f"default-src 'self'; script-src {_SWAGGER} {scripts}; style-src {_SWAGGER} "
        "'unsafe-inline'; img-src 'self' data: https://fastapi.tiangolo.com; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
    return page


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class _Guard:
    """Key, rate limit and body size checks, the ``traceparent``, and the request log: plain
    ASGI, so it adds no task or stream per request (and streams pass through untouched)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]],
                 server: Server) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [0]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self._checked(scope, receive, sending)
        finally:
            log.info("%s %s %s %.1fms", scope["method"], scope["path"], status[0],
                     (time.perf_counter() - started) * 1000)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        server, path = self.server, scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        state = scope.setdefault("state", {})
        if path.startswith(("/api/", "/v1/")):
            owner = server.keys.owner(presented_key(headers))
            if owner is None:
                await _reply(send, 401, error_body(
                    "A valid API key is needed: send it as 'Authorization: Bearer KEY' or "
                    "'X-API-Key: KEY'.", "unauthorized"), {"WWW-Authenticate": "Bearer"})
                return
            state["owner"] = owner
            if server.limiter is not None:
                wait = server.limiter.take(owner)
                if wait:
                    await _reply(send, 429, error_body(
                        f"Too many requests: this key may make {server.limiter.limit.requests} "
                        f"per {server.limiter.limit.seconds:g} s; try again in {wait:.1f} s.",
                        "rate_limited"), {"Retry-After": server.limiter.retry_after(wait)})
                    return
        elif path not in _OPEN:
            state["owner"] = ""
        size = headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > server.max_body):
            await _too_large(send, server)
            return
        if size is None and scope["method"] in ("POST", "PUT", "PATCH"):
            body = bytearray()  # chunked: read no further than the limit, then replay it
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > server.max_body:
                    await _too_large(send, server)
                    return
            replayed = [{"type": "http.request", "body": bytes(body), "more_body": False}]

            async def replay() -> dict[str, Any]:
                return replayed.pop() if replayed else await receive()
            receive = replay
        token = _join_trace(headers) if "traceparent" in headers else None
        try:
            await self.app(scope, receive, send)
        finally:
            if token is not None:
                from opentelemetry import context

                context.detach(token)  # type: ignore[arg-type]


async def _reply(send: Send, status: int, body: dict[str, Any],
                 headers: dict[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


async def _too_large(send: Send, server: Server) -> None:
    await _reply(send, 413, error_body(
        f"The request body is larger than {server.max_body} bytes.", "payload_too_large"))


def _join_trace(headers: dict[str, str]) -> object | None:
    """Make the request's ``traceparent`` the current OpenTelemetry context (if installed)."""
    try:
        from opentelemetry import context, propagate
    except ImportError:
        return None
    return context.attach(propagate.extract(headers))


def _otel_processor() -> Any:
    from ..tracing import add_trace_processor
    from ..tracing.otel import OpenTelemetryProcessor

    processor = OpenTelemetryProcessor()
    add_trace_processor(processor)
    return processor
