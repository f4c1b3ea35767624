"""Serving an ASGI app on uvicorn until cancelled: the MCP and A2A servers share it."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

__all__ = ["serve_asgi"]


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
