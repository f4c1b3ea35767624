"""The options every serving command (``serve``, ``a2a serve``, ``mcp serve``) spells the
same way: which hosts and web origins it answers, and the API keys it requires."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ..connect.keys import ENV_KEYS

__all__ = ["AllowedHosts", "AllowedOrigins", "ApiKeys", "api_keys_given"]

AllowedHosts = Annotated[list[str] | None, typer.Option(
    "--allowed-host", help="Also answer requests for this Host: NAME (any port) or NAME:PORT, "
    "or '*' for any (repeatable). Loopback names, and --host unless it is 0.0.0.0 or ::, "
    "always are; other hosts get 421 (DNS rebinding).")]
"""``--allowed-host``, the same on every serving command."""

AllowedOrigins = Annotated[list[str] | None, typer.Option(
    "--allowed-origin", help="Let web pages at this origin (scheme://host[:port], or '*') "
    "post to the server (repeatable). Pages on an allowed host may; others get 403.")]
"""``--allowed-origin``, the same on every serving command."""

ApiKeys = Annotated[list[str] | None, typer.Option(
    "--api-key", help=f"Require this API key (repeatable; also {ENV_KEYS}, "
    "comma-separated), or NAME:KEY to name it. Each key sees only its own sessions.")]
"""The ``--api-key`` option, the same on every server command."""


def api_keys_given(api_keys: list[str] | None) -> list[str]:
    """The keys of ``--api-key`` and of ``RELAYRACE_API_KEYS`` (comma-separated)."""
    return [*(api_keys or []), *(k for k in os.environ.get(ENV_KEYS, "").split(",") if k.strip())]
