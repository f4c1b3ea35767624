"""A transfer is visible to whoever embeds the run: the transferring turn's message event ends
with ``finish_reason="transfer"`` (the Go ADK's ``FinishReasonTransfer``)."""

from __future__ import annotations

from pathlib import Path

from relayrace import Agent, HandoffEvent, MessageEvent, Runner, tool
from relayrace.sessions import SQLiteSession
from relayrace.testing import ScriptedModel, text, tool_call


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


def _desk(model: ScriptedModel) -> Agent:
    billing = Agent("billing", instructions="Bills.", model=model)
    return Agent("triage", instructions="Route.", model=model, tools=[lookup],
                 sub_agents=[billing])


def _reasons(events: list) -> list[tuple[str, str | None]]:  # type: ignore[type-arg]
    return [(e.agent, e.finish_reason) for e in events
            if isinstance(e, MessageEvent) and e.message.role == "assistant"]


def _script() -> ScriptedModel:
    return ScriptedModel([tool_call("lookup", {"order": "A1"}),
                          tool_call("transfer_to_billing", {"reason": "refund"}),
                          text("Refunded.")])


async def test_the_transferring_turn_ends_with_finish_reason_transfer(tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "s.db")
    result = await Runner.run(_desk(_script()), "refund A1", session=session)
    expected = [("triage", None), ("triage", "transfer"), ("billing", None)]
    assert _reasons(result.new_events) == expected
    # The event right after the transferring message's result is the handoff it announced.
    handoff = next(e for e in result.new_events if isinstance(e, HandoffEvent))
    assert handoff.agent == "triage" and handoff.to_agent == "billing"
    # The session log keeps it, read back by a new session object.
    assert _reasons(await SQLiteSession("s", tmp_path / "s.db").get_events()) == expected


async def test_a_stream_sees_the_transfer_on_the_message_event() -> None:
    seen: list[tuple[str, str | None]] = []
    async for event in Runner.stream(_desk(_script()), "refund A1"):
        if isinstance(event, MessageEvent) and event.message.role == "assistant":
            seen.append((event.agent, event.finish_reason))  # as it was when it came
    assert seen == [("triage", None), ("triage", "transfer"), ("billing", None)]
