"""The agents a relayrace A2A server serves in tests/test_a2a.py (one process, many agents;
a message names its agent in its metadata). Scripted, so they run offline."""

from __future__ import annotations

import asyncio
import re

from relayrace import Agent, ModelProviderError, ask_user, tool
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, Turn, text, tool_call


def answer(request: ModelRequest) -> Turn:
    """Billing: answers invoice questions; asks which invoice to refund when not told."""
    said = [m for m in request.messages if m.role in ("user", "tool")]
    last = said[-1].content if said else ""
    if said and said[-1].role == "tool":
        return text(f"Refund issued for invoice {last.strip()}.")
    invoice = re.search(r"INV-\d+", last)
    if "refund" not in last.lower():
        return text(f"{invoice.group(0) if invoice else 'That invoice'} is paid. "
                    f"(I have heard {len([m for m in request.messages if m.role == 'user'])} "
                    "user message(s) in this context.)")
    if invoice:
        return text(f"Refund issued for invoice {invoice.group(0)}.")
    return tool_call("ask_user", {"question": "Which invoice should I refund?"})


billing = Agent("billing", instructions="Invoices.", description="Invoices and refunds.",
                model=FunctionModel(answer), tools=[ask_user])


@tool
async def wait(seconds: float) -> str:
    """Wait."""
    await asyncio.sleep(seconds)
    return "waited"


def slow_turn(request: ModelRequest) -> Turn:
    if request.messages[-1].role == "tool":
        return text("done")
    return tool_call("wait", {"seconds": 60})


slowpoke = Agent("slowpoke", instructions="Wait.", description="Takes its time.",
                 model=FunctionModel(slow_turn), tools=[wait])


def fail(request: ModelRequest) -> Turn:
    raise ModelProviderError("the provider is down (scripted)", provider="test")


broken = Agent("broken", instructions="Fail.", description="Always fails.",
               model=FunctionModel(fail))


@tool(confirm=True)
def refund(invoice: str) -> str:
    """Refund an invoice (a person confirms first)."""
    return f"refunded {invoice}"


def careful_turn(request: ModelRequest) -> Turn:
    results = [m for m in request.messages if m.role == "tool"]
    if results:
        return text(f"Result: {results[-1].content}")
    return tool_call("refund", {"invoice": "INV-9"})


careful = Agent("careful", instructions="Refund carefully.", description="Refunds, confirmed.",
                model=FunctionModel(careful_turn), tools=[refund])

clerk = Agent("clerk", instructions="File it.", description="Files things.",
              model=FunctionModel(lambda r: text(f"Filed: {r.messages[-1].content}")))


def desk_turn(request: ModelRequest) -> Turn:
    if any(m.role == "tool" and m.name == "clerk" for m in request.messages):
        return tool_call("transfer_to_billing_local", {"reason": "invoice question"})
    return tool_call("clerk", {"query": request.messages[-1].content})


billing_local = Agent("billing_local", instructions="Invoices.", model=FunctionModel(answer))
desk = Agent("desk", instructions="Route.", description="Files, then hands to billing.",
             model=FunctionModel(desk_turn), tools=[clerk.as_tool(report=False)],
             sub_agents=[billing_local])

reporter = Agent("reporter", instructions="Report.", description="Reports with findings.",
                 model=FunctionModel(lambda r: text(
                     "Looked it up.\n<handoff>\nSUMMARY: Two invoices are open.\nKEY FINDINGS:\n"
                     "- INV-1 is open\n- INV-2 is open\nCONFIDENCE: high\n</handoff>")))
