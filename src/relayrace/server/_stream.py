"""`EventStream`: the server's Server-Sent Events responses, as plain ASGI.

A stream is a series of pieces of text, each flagged when it is the last. Each piece is one
body message (an empty one none), and the last carries the response's end with it, so a
stream that has one piece to write costs what a plain response does. While it waits for its
next piece, a client that goes away ends it (the run it follows goes on): one task listens
for the disconnect and cancels the stream's own wait, which it absorbs. Starlette's
`StreamingResponse` does this with an AnyIO task group per response, whose cancel scopes and
task cost a fifth of a streamed run served on one connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping

from fastapi.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["EventStream", "Piece"]

Piece = tuple[str, bool]
"""Text to write, and whether it is the stream's last."""

class EventStream(Response):
    """A ``text/event-stream`` response writing ``pieces`` as they come."""

    media_type = "text/event-stream"

    def __init__(self, pieces: AsyncIterator[Piece], headers: Mapping[str, str]) -> None:
        self.pieces = pieces
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        assert task is not None
        state = {"open": True, "gone": False}

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if state["open"]:  # the client went away while the stream waits: end it
                state["gone"] = True
                task.cancel()

        listener = asyncio.ensure_future(listen())
        ended = False
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            async for text, last in self.pieces:
                if text or last:
                    await send({"type": "http.response.body", "body": text.encode(),
                                "more_body": not last})
                ended = ended or last
            if not ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not state["gone"]:
                raise
            task.uncancel()  # the cancellation was this stream's own: the request is done
        finally:
            state["open"] = False
            listener.cancel()
