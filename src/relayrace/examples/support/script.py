"""The offline demo: a scripted model that plays every agent of the support team.

The two customer messages in ``CONVERSATION`` drive it through a parallel batch holding two
handoffs (the first wins), tool calls, a transfer back to the parent, a nested handoff
(triage -> technical -> database), and, on the second message, a walk back up the tree.
"""

from __future__ import annotations

from relayrace.testing import ScriptedModel, Turn, text, tool_call

CONVERSATION = [
    "Hi, I was charged twice for invoice INV-2041, and since this morning our dashboard "
    "keeps timing out.",
    "Thanks! Which contact e-mail do you have on file for us?",
]


SPENT = ("That was the whole scripted demo (two customer messages). To talk about anything "
         "else, run the team on a real model: --model provider:model and its API key.")


def scripted_model() -> ScriptedModel:
    """A fresh model holding the demo's turns, in the order the agents will ask.

    Each session plays the demo from its start (a server gives every conversation its own
    session), and a message past the demo's two is answered with ``SPENT``.
    """
    return ScriptedModel(turns(), name="scripted-demo", per_conversation=True,
                         then=text(SPENT))


def turns() -> list[Turn]:
    """The demo's model turns, in the order the agents ask for them."""
    return [
        # triage: two handoffs in one parallel batch; billing is first, so billing wins.
        [text("I'll get both of these looked at."),
         tool_call("transfer_to_billing", {"reason": "duplicate charge on INV-2041"}),
         tool_call("transfer_to_technical", {"reason": "dashboard timing out"})],
        # billing
        tool_call("lookup_invoice", {"invoice_id": "INV-2041"}),
        tool_call("issue_refund", {"invoice_id": "INV-2041", "amount_eur": 149.0,
                                   "reason": "duplicate card charge on 2026-11-02"}),
        # billing hands back to its parent; a handoff beside text: the handoff wins.
        [text("The second 149.00 EUR charge was a duplicate; I refunded it."),
         tool_call("transfer_to_triage",
                   {"reason": "billing settled; the dashboard timeouts are still open"})],
        # triage -> technical -> database: a nested handoff.
        tool_call("transfer_to_technical", {"reason": "dashboard timing out since this morning"}),
        tool_call("check_service_status", {"service": "dashboard"}),
        tool_call("transfer_to_database",
                  {"reason": "dashboard degraded; eu-west read replicas lagging"}),
        tool_call("replication_lag", {"region": "eu-west"}),
        text("Two things are settled. Billing: the duplicate 149.00 EUR charge on INV-2041 was "
             "refunded (refund RF-7300, 3-5 business days). Dashboard: read replicas in eu-west "
             "are 47.5 s behind (threshold 5 s), which makes dashboard queries time out; a "
             "replica rebuild is scheduled, and the dashboard will recover once it completes."),
        # Second message: database is still active; the question walks back up to account.
        tool_call("transfer_to_technical", {"reason": "an account question, not a database one"}),
        tool_call("transfer_to_triage", {"reason": "account question"}),
        tool_call("transfer_to_account", {"reason": "contact e-mail on file"}),
        tool_call("get_account", {}),
        text("We have ops@acme.example as the contact e-mail for ACME GmbH (Team plan, 12 "
             "seats). Tell me if you'd like to change it."),
    ]
