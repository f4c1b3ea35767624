"""A stand-in for llama-server in tests/test_realmodel_cli.py: it takes llama-server's
arguments, serves ``/health`` on 127.0.0.1, writes its pid to ``FAKE_LLAMA_DIR``, and answers chat
completions as ``FAKE_LLAMA`` says: ``hang`` (never, after touching ``asked``) or ``hello``
(a one-word answer)."""

from __future__ import annotations

import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(os.environ["FAKE_LLAMA_DIR"])


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_: object) -> None:
        pass

    def _send(self, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"status": "ok"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        (HERE / "asked").touch()
        if os.environ.get("FAKE_LLAMA") == "hang":
            time.sleep(600)
        self._send({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "hello"}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1])
    (HERE / "pid").write_text(str(os.getpid()))
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
