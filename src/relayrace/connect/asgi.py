"""What relayrace's HTTP servers (``serve``, ``a2a serve``, ``mcp serve``) share as ASGI: the
guard every request passes (Host and Origin checks, security headers), and serving an app on
uvicorn until cancelled."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..core.exceptions import UserError
from .keys import Keys, presented_key

__all__ = ["CONTENT_SECURITY_POLICY", "LOOPBACK", "Access", "HostGuard", "KeyGuard", "serve_asgi"]

log = logging.getLogger("relayrace.http")

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
"""The host names every server answers to, on any port."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'")
"""The policy of every response that sets none itself: content from the server only, and no
page may frame it."""

_WILDCARDS = {"0.0.0.0", "[::]"}  # bind addresses, not names a client asks for
_CHANGES = {"POST", "PUT", "PATCH", "DELETE"}
_HOST = re.compile(r"(?P<name>\[[0-9a-f:.]+\]|[a-z0-9_-]+(?:\.[a-z0-9_-]+)*)"
                   r"(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<host>[^/?#@]+)")
_DEFAULT_PORTS = {"http": "80", "https": "443"}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _host_port(text: str) -> tuple[str, str | None] | None:
    """``name`` and ``port`` of a Host header (or an allowed host), lower case; ``None`` if it
    is not one. A bare IPv6 address (``::1``, as ``--host`` takes it) gets its brackets."""
    text = text.strip().lower()
    if text.count(":") > 1 and not text.startswith("["):
        text = f"[{text}]"
    match = _HOST.fullmatch(text)
    return (match["name"], match["port"]) if match else None


def _origin(text: str) -> str | None:
    """An origin as browsers send it (``scheme://host[:port]``, no default port), lower case;
    ``None`` if ``text`` is not one."""
    match = _ORIGIN.fullmatch(text.strip().lower().rstrip("/"))
    hostport = _host_port(match["host"]) if match else None
    if match is None or hostport is None:
        return None
    name, port = hostport
    scheme = match["scheme"]
    return f"{scheme}://{name}" + (f":{port}" if port and port != _DEFAULT_PORTS[scheme] else "")


class Access:
    """Which ``Host`` a server answers to, and which web origins may change its state.

    A request must name one of `LOOPBACK` (any port) or of ``hosts`` as its Host (a name
    alone allows any port; ``name:port`` that port; ``"*"`` any host; the wildcard bind
    addresses ``0.0.0.0`` and ``::`` are no names and are skipped), else it gets 421: a web
    page that rebinds its own name to this machine sends that name. A POST, PUT, PATCH or
    DELETE that carries an ``Origin`` (browsers do) must come from a page on an allowed host,
    or from one of ``origins`` (``scheme://host[:port]``, or ``"*"``), else it gets 403.
    Requests without an Origin (curl, SDK clients) are not browsers' and pass.
    """

    def __init__(self, hosts: Sequence[str] = (), origins: Sequence[str] = ()) -> None:
        self.any_host = "*" in hosts
        self.any_origin = "*" in origins
        self.hosts: set[tuple[str, str | None]] = {(name, None) for name in LOOPBACK}
        for host in hosts:
            if host == "*" or not host.strip():  # "": uvicorn's "every address"
                continue
            parsed = _host_port(host)
            if parsed is None:
                raise UserError(f"An allowed host is a name or an address, with :PORT to allow "
                                f"only that port (e.g. example.com, 10.0.0.5:8000, [::1]), or "
                                f"'*' for any; got {host!r}.")
            if parsed[0] not in _WILDCARDS:
                self.hosts.add(parsed)
        self.origins: set[str] = set()
        for origin in origins:
            normal = _origin(origin) if origin != "*" else origin
            if normal is None:
                raise UserError(f"An allowed origin is scheme://host[:port] as a browser sends "
                                f"it (e.g. https://app.example.com), or '*' for any; got "
                                f"{origin!r}.")
            self.origins.add(normal)

    def host_ok(self, host: str) -> bool:
        """Whether a request whose Host header is ``host`` is answered."""
        if self.any_host:
            return True
        parsed = _host_port(host)
        return parsed is not None and (parsed in self.hosts or (parsed[0], None) in self.hosts)

    def origin_ok(self, origin: str) -> bool:
        """Whether a page at ``origin`` may change this server's state."""
        if self.any_origin:
            return True
        normal = _origin(origin)
        return normal is not None and (normal in self.origins
                                       or self.host_ok(normal.split("://", 1)[1]))


class HostGuard:
    """ASGI middleware: refuses what `Access` does not allow (421 for the Host, 403 for the
    Origin, as JSON ``{"error": {"message", "type"}}``), and adds to every response that
    lacks them a ``Content-Security-Policy`` (`CONTENT_SECURITY_POLICY`), ``X-Frame-Options:
    DENY`` and ``X-Content-Type-Options: nosniff``."""

    def __init__(self, app: App, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        host, origin = headers.get("host", ""), headers.get("origin")
        if not self.access.host_ok(host):
            log.warning("Refused %s %s for Host %r", scope["method"], scope["path"], host)
            await _refuse(send, 421, "misdirected_request", (
                f"This server answers to {', '.join(LOOPBACK)} (and the hosts it was started "
                f"with), not to the Host {host!r}: a page that names another host may be a "
                "DNS rebinding attack. If that name is this server's, start it with "
                "--allowed-host NAME (allowed_hosts=[...] in Python)."))
            return
        if scope["method"] in _CHANGES and origin is not None \
                and not self.access.origin_ok(origin):
            log.warning("Refused %s %s from Origin %r", scope["method"], scope["path"], origin)
            await _refuse(send, 403, "forbidden_origin", (
                f"A web page at {origin!r} may not change this server's state. If that page is "
                "yours, start the server with --allowed-origin ORIGIN (allowed_origins=[...] "
                "in Python)."))
            return

        async def secured(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *(h for h in _SECURITY if h[0] not in present)]
            await send(message)

        await self.app(scope, receive, secured)


_SECURITY = [(b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
             (b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff")]


class KeyGuard:
    """ASGI middleware: with `Keys` that require one, refuses a request that presents no valid
    key (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``) with 401 and
    ``WWW-Authenticate: Bearer``; without keys it lets everything in."""

    def __init__(self, app: App, keys: Keys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.keys.required:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope["headers"]}
            if self.keys.owner(presented_key(headers)) is None:
                await _refuse(send, 401, "unauthorized", (
                    "A valid API key is needed: send it as 'Authorization: Bearer KEY' or "
                    "'X-API-Key: KEY'."), [(b"www-authenticate", b"Bearer")])
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, kind: str, message: str,
                  extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        *_SECURITY, *extra]})
    await send({"type": "http.response.body", "body": body})


async def serve_asgi(app: Any, *, port: int, host: str = "127.0.0.1",
                     sock: socket.socket | None = None) -> None:
    """Serve ``app`` on ``host:port`` (or the already bound ``sock``) until cancelled, then
    shut down, giving open streams a second to end."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                            timeout_graceful_shutdown=1)
    web = uvicorn.Server(config)
    serving = asyncio.ensure_future(web.serve(sockets=[sock] if sock is not None else None))
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        web.should_exit = True
        await serving
        raise
