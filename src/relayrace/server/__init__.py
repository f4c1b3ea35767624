"""relayrace's server: a team behind an HTTP API, an OpenAI-compatible endpoint and a web
console (``relayrace serve TARGET``, or `create_app` to embed; needs ``relayrace[server]``).
Layer: an entry point. May import the runner, durable runs, evals, config, connect's
ASGI guard and keys, and everything below.

- ``/api``: sessions (create, list, get, export, delete, children), runs (start and wait, or
  in the background; their events as Server-Sent Events that resume with ``Last-Event-ID``;
  cancel; trace and usage), and what a session waits for (approvals, questions) and the
  answers; the console's workbench: a session's runs, any run's trace and usage (priced by a
  `PriceTable`), forks. Its OpenAPI schema is at ``/openapi.json``.
- ``/v1/chat/completions`` and ``/v1/models``: each served agent is a model id.
- ``/``: the web console. ``/healthz``: liveness.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    from ..core.exceptions import UserError

    raise UserError("relayrace's server needs FastAPI and uvicorn: "
                    "pip install 'relayrace[server]'.") from exc

from ._app import DEFAULT_MAX_BODY, Server, create_app
from ._prices import ModelPrice, PriceTable
from ._security import RateLimit, key_id

__all__ = ["DEFAULT_MAX_BODY", "ModelPrice", "PriceTable", "RateLimit", "Server", "create_app",
           "key_id"]
