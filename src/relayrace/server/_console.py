"""The console's static files, served from memory: its scripts and stylesheets as one bundle
each, validated by ETag and compressed once.

The console is small readable modules (``static/*.js``, ``static/*.css``); a browser gets them
in three requests (the page, one stylesheet, one script), not ten: a browser opens six
connections to a host at most, and the page's first API calls would queue behind the rest.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Mapping
from importlib import resources

from starlette.types import Receive, Scope, Send

__all__ = ["BUNDLES", "ConsoleFiles"]

BUNDLES: Mapping[str, tuple[str, ...]] = {
    "console.css": ("app.css", "workbench.css"),
    # In this order: each module builds on the ones before it.
    "console.js": ("app.js", "waterfall.js", "workbench.js", "usage.js", "graph.js",
                   "home.js", "inbox.js", "evals.js"),
}
"""Each bundle the page loads and the modules it is made of, in order."""

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml"}

class _File:
    """One response body, its ETag and (when it pays) its gzip form."""

    __slots__ = ("body", "etag", "gzipped", "kind")

    def __init__(self, body: bytes, kind: str) -> None:
        self.body, self.kind = body, kind
        self.etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        packed = gzip.compress(body, mtime=0)
        self.gzipped = packed if len(packed) < len(body) - 256 else None


class ConsoleFiles:
    """ASGI app: the console's files by name (``/`` is ``index.html``), from memory.

    ``Cache-Control: no-cache``: a browser keeps them and asks each time whether they changed
    (a 304 when not), so an upgraded server's console shows at once.
    """

    def __init__(self) -> None:
        static = resources.files("relayrace.server") / "static"
        found = {f.name: f.read_bytes() for f in static.iterdir() if f.is_file()}
        for bundle, parts in BUNDLES.items():  # a comment names each module's start
            note = "/* --- {} --- */\n" if bundle.endswith(".css") else "// --- {} ---\n"
            found[bundle] = b"".join(note.format(p).encode() + found[p] + b"\n" for p in parts)
        self._files = {name: _File(body, _TYPES.get("." + name.rpartition(".")[2],
                                                    "application/octet-stream"))
                       for name, body in found.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope["path"].lstrip("/") or "index.html"
        found = self._files.get(name)
        if found is None:
            await _send(send, 404, [(b"content-type", b"text/plain; charset=utf-8")],
                        b"Not Found")
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, 405, [(b"allow", b"GET, HEAD")], b"")
            return
        asked = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        headers = [(b"etag", found.etag.encode()), (b"cache-control", b"no-cache"),
                   (b"vary", b"accept-encoding")]
        if found.etag in asked.get("if-none-match", ""):
            await _send(send, 304, headers, b"")
            return
        body = found.body
        if found.gzipped is not None and "gzip" in asked.get("accept-encoding", ""):
            body = found.gzipped
            headers.append((b"content-encoding", b"gzip"))
        headers.append((b"content-type", found.kind.encode()))
        await _send(send, 200, headers, b"" if scope["method"] == "HEAD" else body,
                    length=len(body))


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes, *,
                length: int | None = None) -> None:
    if status != 304:  # a 304 has no body, and says nothing of the body's length
        headers = [*headers, (b"content-length", str(len(body) if length is None
                                                     else length).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
