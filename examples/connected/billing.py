"""A third relayrace team, served over A2A by ``main.py`` in its own process:

    relayrace a2a serve billing.py:billing --port 8766

The assistant in ``main.py`` reaches it both ways A2A allows: as a tool (it asks billing
about an invoice and gets the answer back), and as a handoff target (the conversation moves to
billing, which asks the user which invoice to refund, takes the answer on the next turn, and
hands control back once the refund is done). Its model is scripted so the example runs
offline.
"""

from __future__ import annotations

import re

from relayrace import Agent, ask_user
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, Turn, text, tool_call


def answer(request: ModelRequest) -> Turn:
    said = [m for m in request.messages if m.role in ("user", "tool")]
    last = said[-1].content if said else ""
    if said and said[-1].role == "tool":  # the user answered the question
        return text(f"Refund issued for invoice {last.strip()}: 42.00 EUR, back in 3 days.")
    invoice = re.search(r"INV-\d+", last)
    if "refund" not in last.lower():
        name = invoice.group(0) if invoice else "the invoice"
        return text(f"{name} is paid (42.00 EUR, on 2026-11-02).")
    if invoice:
        return text(f"Refund issued for invoice {invoice.group(0)}: 42.00 EUR, back in 3 days.")
    return tool_call("ask_user", {"question": "Which invoice should I refund?"})


billing = Agent("billing", instructions="Answer invoice questions; issue refunds.",
                description="Answers questions about invoices and issues refunds.",
                model=FunctionModel(answer), tools=[ask_user])
