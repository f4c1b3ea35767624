"""The team tests/test_durable.py runs durably: ``triage`` transfers to ``ops``, which runs two
side-effecting ``work`` calls in parallel beside a delegated ``researcher`` child (which calls
``fetch``), then ``charge``, which needs a person's approval, then answers.

Every tool execution and every model answer is appended to a ledger (``RELAYRACE_TEST_LEDGER``,
fsynced before the tool or the model returns), so a test counts what happened once and what
happened twice. ``RELAYRACE_TEST_CRASH=effect:NAME`` kills the process (``os._exit``, as a
SIGKILL would) right after the side effect NAME is written, before its tool returns.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from relayrace import Agent, RunContext, TransferPolicy, tool
from relayrace.messages import Message
from relayrace.models.interface import ModelRequest
from relayrace.testing import FunctionModel, tool_call


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


@tool
async def work(ctx: RunContext[Any], tag: str) -> str:
    """Do some work with a side effect.

    Args:
        tag: Which work.
    """
    await asyncio.sleep(0.01 if tag == "fast" else 0.05)
    effect(ctx, f"work-{tag}")
    return f"{tag} done"


@tool
async def fetch(ctx: RunContext[Any], url: str) -> str:
    """Fetch a document.

    Args:
        url: What to fetch.
    """
    effect(ctx, "fetch")
    return f"contents of {url}"


@tool(requires_approval=True)
async def charge(ctx: RunContext[Any], amount: int) -> str:
    """Charge the customer's card.

    Args:
        amount: Euros.
    """
    effect(ctx, "charge")
    return f"charged {amount} EUR"


def _called(messages: list[Message], name: str) -> bool:
    return any(m.role == "tool" and m.name == name for m in messages)


def _uid() -> str:  # unique across processes, as a real provider's call ids are
    return "call_" + os.urandom(6).hex()


def _turn(request: ModelRequest) -> Any:
    seen = list(request.messages)
    if request.agent == "triage":
        if not _called(seen, "transfer_to_ops"):
            return tool_call("transfer_to_ops", {"reason": "ops work"}, id=_uid())
        return "Ops has it."
    if request.agent == "researcher":
        if not _called(seen, "fetch"):
            return tool_call("fetch", {"url": "https://example.org/doc"}, id=_uid())
        return "The doc exists."
    if not _called(seen, "work"):
        return [tool_call("work", {"tag": "fast"}, id=_uid()),
                tool_call("work", {"tag": "slow"}, id=_uid()),
                tool_call("researcher", {"query": "find the doc"}, id=_uid())]
    if not _called(seen, "charge"):
        return tool_call("charge", {"amount": 42}, id=_uid())
    return "All done."


def play(request: ModelRequest) -> Any:
    """The model: a turn decided by the conversation, recorded as the model's answer (a
    provider's bill) under (conversation, agent, messages seen)."""
    turn = _turn(request)
    record("model", request.conversation, request.agent, len(request.messages))
    return turn


model = FunctionModel(play)
researcher = Agent("researcher", instructions="Research.", model=model, tools=[fetch])
ops = Agent("ops", instructions="Do the work.", model=model,
            tools=[work, charge, researcher.as_tool()],
            transfer_policy=TransferPolicy(to_parent=True))
team = Agent("triage", instructions="Route.", model=model, sub_agents=[ops])
