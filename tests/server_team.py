"""The team the server tests (and the console's browser tests) serve: scripted, offline.

``front`` answers by what the user says: "refund INV-n" hands off to billing (whose refund
tool waits for a person's approval), "research X" delegates to the researcher (who reports),
"ask" asks the user a question, "password ..." is redacted by a guardrail, anything else is
echoed (streamed word by word).
"""

from __future__ import annotations

import re

from relayrace import Agent, ask_user, tool
from relayrace.agents.guardrails import ContentFilterGuardrail
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, Turn, text, tool_call


def _last_user(request: ModelRequest) -> str:
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


@tool(confirm=True)
def refund(invoice: str) -> str:
    """Refund an invoice (a person approves it first)."""
    return f"refund issued for {invoice}"


def billing_turn(request: ModelRequest) -> Turn:
    last = request.messages[-1]
    if last.role == "tool" and last.name == "refund":
        return text(f"Done: {last.content}.")
    invoice = re.search(r"INV-\d+", _last_user(request))
    return tool_call("refund", {"invoice": invoice.group(0) if invoice else "INV-0"})


billing = Agent("billing", instructions="Refunds.", description="Refunds invoices.",
                model=FunctionModel(billing_turn), tools=[refund])

researcher = Agent("researcher", instructions="Research.", description="Researches a topic.",
                   model=FunctionModel(lambda r: text(
                       f"Found it.\n<handoff>\nSUMMARY: {r.messages[-1].content} is well "
                       "known.\nKEY FINDINGS:\n- first finding\n- second finding\n"
                       "CONFIDENCE: high\n</handoff>")))


def front_turn(request: ModelRequest) -> Turn:
    last = request.messages[-1]
    said = _last_user(request)
    if last.role == "tool":
        if last.name == "ask_user":
            return text(f"You said: {last.content}")
        return text("Research done: " + last.content.splitlines()[0])
    if said.startswith("refund"):
        return tool_call("transfer_to_billing", {"reason": "a refund"})
    if said.startswith("research"):
        return tool_call("researcher", {"query": said.removeprefix("research").strip()})
    if said.startswith("ask"):
        return tool_call("ask_user", {"question": "What is your name?"})
    return text(f"Echo: {said}")


front = Agent("front", instructions="Help.", description="The front desk.",
              model=FunctionModel(front_turn), sub_agents=[billing],
              tools=[researcher.as_tool(), ask_user],
              input_guardrails=[ContentFilterGuardrail(keywords=["password"])])


def slow_front(delay: float) -> Agent:
    """A front desk whose billing agent's model takes ``delay`` seconds per answer: a run that
    transfers to billing streams for a while (the console's live views)."""
    slow_billing = Agent("billing", instructions="Refunds.",
                         model=FunctionModel(billing_turn, delay=delay), tools=[refund])
    return Agent("front", instructions="Help.", model=FunctionModel(front_turn),
                 sub_agents=[slow_billing])
