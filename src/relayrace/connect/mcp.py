"""MCP servers as toolsets: their tools offered to agents, their results mapped faithfully.

``MCPServer.stdio(...)`` runs a server as a child process; ``MCPServer.http(...)`` reaches one
over streamable HTTP. Put either in an agent's ``tools=[...]``: the server starts on the first
run that needs it, its tool list is cached (refreshed when the server says it changed, or on
``refresh()``), and one session serves every agent and concurrent run that shares the object.
Needs the ``mcp`` package (``pip install 'relayrace[mcp]'``), 1.30 or later, 1.x or 2.x.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from ..agents.context import RunContext
from ..agents.tools import Tool, ToolRetry, Toolset, parse_arguments
from ..core.exceptions import MCPServerError, UserError
from ..models.interface import ToolDefinition

__all__ = ["MCPServer", "MCPTool", "ToolFilter"]

ToolFilter = Sequence[str] | Callable[[ToolDefinition], bool]
"""Tool names, or a predicate on a tool as the server lists it (its own name)."""

_CONNECTION_CLOSED = -32000  # the SDK's error code for a session whose transport ended
_MAX_PAGES = 100  # a server that paginates forever cannot hang a listing
_STOP_WAIT = 10.0  # seconds a stopping server gets to shut down before it is cancelled
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _sdk() -> Any:
    """The ``mcp`` package, or a UserError naming the extra that installs it."""
    try:
        import mcp
    except ImportError:
        raise UserError("MCPServer needs the mcp package: pip install 'relayrace[mcp]' (mcp "
                        "1.30 or later).") from None
    return mcp


def _reason(exc: BaseException) -> str:
    """``Type: message`` of the first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _error_code(exc: BaseException) -> int | None:
    """The JSON-RPC code of an SDK error (``McpError.error.code`` on 1.x, ``.code`` on 2.x)."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) if error is not None else getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def _is_sdk_error(exc: BaseException) -> bool:
    return type(exc).__name__ in ("McpError", "MCPError") and _error_code(exc) is not None


def _matches(spec: ToolFilter, definition: ToolDefinition) -> bool:
    if callable(spec):
        return bool(spec(definition))
    return definition.name in spec


def _render_block(block: Mapping[str, Any]) -> str:
    """One content block as text for the model; non-text content is described, not inlined."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[{kind}: {block.get('mimeType', 'unknown type')}, about {size} bytes]"
    if kind == "resource_link":
        return f"[resource: {block.get('uri', '')} ({block.get('name', '')})]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return str(resource["text"])
        return f"[resource: {resource.get('uri', '')} ({resource.get('mimeType', 'binary')})]"
    return f"[{kind} content]"


class MCPTool(Tool):
    """One tool of an MCP server, as an agent is offered it (see :class:`MCPServer`)."""

    def __init__(self, server: MCPServer, remote: ToolDefinition, name: str) -> None:
        self.server = server
        self.remote_name = remote.name
        """The tool's name on the server (``name`` may carry a prefix)."""
        self.name = name
        self.description = remote.description or remote.name
        self.parameters = remote.parameters
        self.requires_approval = server.requires_approval

    async def invoke(self, ctx: RunContext[Any], arguments: str) -> Any:
        """Call the tool on the server: its structured content (JSON) or its text is the
        result; an ``isError`` result is told to the model, as is a broken call."""
        args = parse_arguments(arguments, self.name)
        if ctx.span is not None:
            ctx.span.attributes["mcp_server"] = self.server.name
            ctx.span.attributes["mcp_tool"] = self.remote_name
        return await self.server.call_tool(self.remote_name, args)


class _Connection:
    """One live session with the server, owned by a task of the loop it was opened in.

    The SDK's transports are anyio task groups, which must be entered and left in one task;
    the owner task does both, and calls from any task of that loop share its session.
    """

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.loop = asyncio.get_running_loop()
        self.session: Any = None
        self.error: BaseException | None = None
        self.broken = False
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self._own(), name=f"mcp server {server.name}")

    async def _own(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                self.session = await self.server._open(stack, self._on_message)
                self.ready.set()
                await self.stop.wait()
        except BaseException as exc:  # the server failed to start or its transport broke
            self.error = exc
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.broken = True
            self.ready.set()

    async def _on_message(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/tools/list_changed":
            self.server._tools = None

    async def close(self) -> None:
        self.stop.set()
        if not self.task.done():
            # wait(), not the task itself: its own end (even a cancellation) is not an error
            # of the caller's.
            await asyncio.wait((self.task,), timeout=_STOP_WAIT)
        if not self.task.done():
            self.task.cancel()


class MCPServer(Toolset):
    """An MCP server whose tools agents are offered: put it in ``Agent(tools=[...])``.

    Build one with :meth:`stdio` or :meth:`http`. It starts on the first run that needs it (or
    on ``await server.start()``) and stops with ``async with server:`` or
    ``await server.stop()``; at the end of the event loop (``asyncio.run``) its session is
    closed with the loop, and a stdio server's process ends with it. One object may serve
    several agents and concurrent runs: they share one session, calls multiplexed on it.

    ``include`` / ``exclude`` filter the listed tools (names, or a predicate on the tool as
    the server lists it); ``prefix`` renames each tool ``<prefix>_<name>``. A tool named like
    another tool of the agent is an error when the agent's tools are built, naming both.
    ``timeout`` bounds each call and ``start_timeout`` the start. A call that fails (the server
    died, the connection dropped, no answer in time) is told to the model; the next call starts
    the server again (stdio) or reconnects (HTTP).
    """

    def __init__(
        self,
        *,
        name: str,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        include: ToolFilter | None = None,
        exclude: ToolFilter | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        start_timeout: float = 30.0,
        requires_approval: bool = False,
    ) -> None:
        if (command is None) == (url is None):
            raise UserError("An MCPServer needs a command (MCPServer.stdio) or a url "
                            "(MCPServer.http), not both.")
        if not name or not name.strip():
            raise UserError("An MCPServer needs a non-empty name.")
        if timeout <= 0 or start_timeout <= 0:
            raise UserError(f"MCP server {name!r}: timeout and start_timeout must be positive, "
                            f"got {timeout} and {start_timeout}.")
        if prefix is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", prefix):
            raise UserError(f"MCP server {name!r}: prefix {prefix!r} must be 1-32 characters of "
                            "[A-Za-z0-9_-].")
        for option, spec in (("include", include), ("exclude", exclude)):
            if isinstance(spec, str):
                raise UserError(f"MCP server {name!r}: {option} takes a list of tool names or a "
                                f"function, not the string {spec!r}; write [{spec!r}].")
        self.name = name
        self.label = f"MCP server {name!r}"
        self.command = command
        self.args = tuple(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.url = url
        self.headers = dict(headers or {})
        self.include = include
        self.exclude = exclude
        self.prefix = prefix
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.requires_approval = requires_approval
        self._tools: tuple[MCPTool, ...] | None = None
        self._conn: _Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        include: ToolFilter | None = None,
        exclude: ToolFilter | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        start_timeout: float = 30.0,
        requires_approval: bool = False,
    ) -> MCPServer:
        """A server run as ``command args`` and spoken to over its stdin and stdout.

        ``env`` is added to the SDK's safe default environment (PATH, HOME, ...), not to the
        whole environment of this process. ``name`` (default: the command's file name) names
        the server in spans and errors.
        """
        if not command:
            raise UserError("MCPServer.stdio needs a command, e.g. 'mcp-server-time'.")
        default = re.split(r"[\\/]", command)[-1] or command
        return cls(name=name or default, command=command, args=args, env=env, cwd=cwd,
                   include=include, exclude=exclude, prefix=prefix, timeout=timeout,
                   start_timeout=start_timeout, requires_approval=requires_approval)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
        include: ToolFilter | None = None,
        exclude: ToolFilter | None = None,
        prefix: str | None = None,
        timeout: float = 60.0,
        start_timeout: float = 30.0,
        requires_approval: bool = False,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``),
        with ``headers`` on every request (authorization, ...). ``name`` defaults to the host."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UserError(f"MCPServer.http needs an http(s) URL such as "
                            f"'http://127.0.0.1:8000/mcp', got {url!r}.")
        return cls(name=name or parts.hostname or url, url=url, headers=headers,
                   include=include, exclude=exclude, prefix=prefix, timeout=timeout,
                   start_timeout=start_timeout, requires_approval=requires_approval)

    def __repr__(self) -> str:
        where = self.url or " ".join([self.command or "", *self.args])
        return f"MCPServer({self.name!r}, {where!r})"

    # -- lifecycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the server (and open its session) unless it runs; idempotent."""
        await self._connection()

    async def stop(self) -> None:
        """Close the session (a stdio server's process ends); the next use starts it again."""
        conn, self._conn = self._conn, None
        if conn is not None and conn.loop is asyncio.get_running_loop():
            await conn.close()

    async def refresh(self) -> None:
        """Forget the cached tool list: the next turn of an agent that has the server lists
        its tools again."""
        self._tools = None

    def _guard(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def _connection(self) -> _Connection:
        """The live session, started (or started again after it broke) as needed."""
        conn = self._conn
        loop = asyncio.get_running_loop()
        if conn is not None and not conn.broken and conn.loop is loop and conn.ready.is_set():
            return conn
        async with self._guard():
            conn = self._conn
            if conn is None or conn.broken or conn.loop is not loop:
                if conn is not None and conn.loop is loop:
                    await conn.close()
                _sdk()
                conn = self._conn = _Connection(self)
        try:
            await asyncio.wait_for(asyncio.shield(conn.ready.wait()), self.start_timeout)
        except TimeoutError:
            conn.task.cancel()  # a start that hangs is abandoned, not waited for
            raise MCPServerError(f"{self.label} ({self._where()}) did not start within "
                                 f"{self.start_timeout:g} s; check the command or URL, or "
                                 "raise start_timeout.") from None
        if conn.broken:
            why = _reason(conn.error) if conn.error is not None else "it stopped"
            raise MCPServerError(f"{self.label} ({self._where()}) could not be "
                                 f"{'reached' if self.url else 'started'}: {why}.")
        return conn

    def _where(self) -> str:
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])

    async def _open(self, stack: AsyncExitStack, on_message: Callable[[Any], Any]) -> Any:
        """Open the transport and an initialized client session on ``stack``.

        The initialize handshake works with every server of the 1.x and 2.x SDKs, and keeps
        the notifications (``tools/list_changed``) that the cache relies on.
        """
        mcp = _sdk()
        if self.command is not None:
            from mcp.client.stdio import stdio_client

            params = mcp.StdioServerParameters(command=self.command, args=list(self.args),
                                               env=self.env, cwd=self.cwd)
            streams = await stack.enter_async_context(stdio_client(params))
        else:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            client = await stack.enter_async_context(
                create_mcp_http_client(headers=self.headers or None))
            assert self.url is not None
            streams = await stack.enter_async_context(
                streamable_http_client(self.url, http_client=client))
        # 1.x yields (read, write, get_session_id), 2.x (read, write).
        session = await stack.enter_async_context(
            mcp.ClientSession(streams[0], streams[1], message_handler=on_message))
        await session.initialize()
        return session

    # -- tools ----------------------------------------------------------------------------------

    async def list_tools(self) -> tuple[MCPTool, ...]:
        """The server's tools, filtered and prefixed; listed once, then again only after the
        server announces a change (``notifications/tools/list_changed``) or ``refresh()``."""
        tools = self._tools
        if tools is not None:
            return tools
        conn = await self._connection()
        async with self._guard():
            if self._tools is None:
                listed = await self._fetch(conn)
                self._tools = tuple(MCPTool(self, d, self._local_name(d.name)) for d in listed
                                    if self._keeps(d))
            return self._tools

    async def _fetch(self, conn: _Connection) -> list[ToolDefinition]:
        types = _sdk().types
        found: list[ToolDefinition] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(self.timeout):
                for _ in range(_MAX_PAGES):
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await conn.session.list_tools(params=params)
                    data = page.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for t in data.get("tools", []):
                        found.append(ToolDefinition(
                            name=t["name"], description=t.get("description", ""),
                            parameters=t.get("inputSchema") or {"type": "object",
                                                                "properties": {}}))
                    cursor = data.get("nextCursor")
                    if not cursor:
                        break
        except TimeoutError:
            raise MCPServerError(f"{self.label} did not list its tools within "
                                 f"{self.timeout:g} s.") from None
        except Exception as exc:
            conn.broken = conn.broken or not _is_sdk_error(exc) or \
                _error_code(exc) == _CONNECTION_CLOSED
            raise MCPServerError(f"{self.label} could not list its tools: {_reason(exc)}.") \
                from exc
        return found

    def _keeps(self, definition: ToolDefinition) -> bool:
        if self.include is not None and not _matches(self.include, definition):
            return False
        return self.exclude is None or not _matches(self.exclude, definition)

    def _local_name(self, remote: str) -> str:
        """The name the model sees: prefixed, and cut to what model APIs accept."""
        name = f"{self.prefix}_{remote}" if self.prefix else remote
        return _INVALID_NAME_CHARS.sub("_", name)[:64]

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call the server's tool ``name`` (its own name, unprefixed) and map the result:
        structured content as JSON data, else the text of its content blocks. An ``isError``
        result raises :class:`ToolRetry` with the server's text; a broken or timed-out call
        raises :class:`MCPServerError`; both reach the model as the tool's error."""
        conn = await self._connection()
        try:
            async with asyncio.timeout(self.timeout):
                result = await conn.session.call_tool(name, dict(arguments))
        except TimeoutError:
            raise MCPServerError(f"{self.label} did not answer the call of {name!r} within "
                                 f"{self.timeout:g} s.") from None
        except Exception as exc:
            if not _is_sdk_error(exc) or _error_code(exc) == _CONNECTION_CLOSED:
                conn.broken = True  # the next call starts the server again, or reconnects
                again = "started again" if self.command else "reconnected"
                raise MCPServerError(f"{self.label} broke off the call of {name!r} "
                                     f"({_reason(exc)}); it will be {again} on the next "
                                     "call.") from exc
            raise MCPServerError(f"{self.label} refused the call of {name!r}: "
                                 f"{_reason(exc)}.") from exc
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        text = "\n".join(_render_block(b) for b in data.get("content", []))
        if data.get("isError"):
            raise ToolRetry(f"{self.label}, tool {name!r}: {text or 'the tool failed'}")
        structured = data.get("structuredContent")
        return structured if structured is not None else text
