"""The team tests/test_durable.py runs durably, bench/chaos.py's: ``triage`` transfers to
``ops``, which runs two side-effecting ``work`` calls in parallel beside a delegated
``researcher`` child (which calls ``fetch``), then ``charge``, which needs a person's
approval, then answers.

Every tool execution and every model answer is appended to a ledger (``RELAYRACE_TEST_LEDGER``,
fsynced before the tool or the model returns), so a test counts what happened once and what
happened twice. ``RELAYRACE_TEST_CRASH=effect:NAME`` kills the process (``os._exit``, as a
SIGKILL would) right after the side effect NAME is written, before its tool returns.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from relayrace import RunContext
from relayrace.models.interface import ModelRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from chaos import team as chaos_team  # noqa: E402


def ledger() -> Path:
    return Path(os.environ.get("RELAYRACE_TEST_LEDGER", "ledger.jsonl"))


def record(*entry: Any) -> None:
    with ledger().open("a") as f:
        f.write(json.dumps(list(entry)) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_ledger(path: Path) -> list[list[Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def effect(ctx: RunContext[Any], name: str) -> None:
    record("effect", ctx.session.session_id, ctx.tool_call_id, name)
    if os.environ.get("RELAYRACE_TEST_CRASH") == f"effect:{name}":
        os._exit(9)


def answered(request: ModelRequest) -> None:
    """The model gave an answer (a provider's bill), under (conversation, agent, messages seen)."""
    record("model", request.conversation, request.agent, len(request.messages))


team = chaos_team(effect, answered)
