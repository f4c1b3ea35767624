"""Scripted models for the support team's eval cases (examples/support/evals.yaml), offline.

A scripted model plays one conversation, so every case run gets its own: ``scripted(case)``
makes the model that plays ``case``, each agent with its own turns.

    relayrace eval run examples/support/team.py:triage examples/support/evals.yaml \\
        --model examples/support/eval_models.py:scripted
"""

from __future__ import annotations

from relayrace.evals import Case
from relayrace.testing import ScriptedModel, Turn, text, tool_call


def _to(agent: str, reason: str) -> Turn:
    return tool_call(f"transfer_to_{agent}", {"reason": reason})


def _report(summary: str, sources: list[str], confidence: str, gaps: list[str]) -> Turn:
    return tool_call("submit_report", {
        "summary": summary, "key_findings": [summary], "sources": sources,
        "confidence": confidence, "confidence_reason": "from the incident records",
        "gaps": gaps})


_REFUND = [tool_call("lookup_invoice", {"invoice_id": "INV-2041"}),
           tool_call("issue_refund", {"invoice_id": "INV-2041", "amount_eur": 149.0,
                                      "reason": "duplicate card charge on 2026-11-02"}),
           text("The second 149.00 EUR charge on INV-2041 was a duplicate; I refunded it "
                "(RF-7300, 3-5 business days).")]
_ACCOUNT = [tool_call("get_account", {}),
            text("We have ops@acme.example on file for ACME GmbH (Team plan, 12 seats).")]

SCRIPTS: dict[str, dict[str, list[Turn]]] = {
    "refund-duplicate-charge": {
        "triage": [_to("billing", "duplicate charge on INV-2041")],
        "billing": _REFUND},
    "invoice-status": {
        "triage": [_to("billing", "invoice status")],
        "billing": [tool_call("lookup_invoice", {"invoice_id": "INV-1987"}),
                    text("INV-1987 (149.00 EUR) is paid: one charge on 2026-10-02.")]},
    "unknown-invoice": {
        "triage": [_to("billing", "invoice question")],
        "billing": [tool_call("lookup_invoice", {"invoice_id": "INV-9999"}),
                    text("I could not find INV-9999; the invoices on your account are INV-1987 "
                         "and INV-2041. Could you check the number?")]},
    "dashboard-timeouts": {
        "triage": [_to("technical", "dashboard timing out")],
        "technical": [tool_call("check_service_status", {"service": "dashboard"}),
                      _to("database", "eu-west read replicas lagging")],
        "database": [tool_call("replication_lag", {"region": "eu-west"}),
                     text("The eu-west read replicas are 47.5 s behind (threshold 5 s), so "
                          "dashboard queries time out; a replica rebuild is scheduled.")]},
    "api-latency": {
        "triage": [_to("technical", "slow API")],
        "technical": [tool_call("check_service_status", {"service": "api"}),
                      _to("network", "API operational; latency from eu-west")],
        "network": [tool_call("trace_route", {"region": "eu-west"}),
                    text("The route to eu-west is healthy: 38 ms median, 91 ms p99, no packet "
                         "loss. The slowness is not in the network.")]},
    "contact-email": {
        "triage": [_to("account", "contact e-mail on file")],
        "account": _ACCOUNT},
    "seat-count": {
        "triage": [_to("account", "seat count")],
        "account": [tool_call("get_account", {}),
                    text("Your Team plan has 12 seats; it renews on 2027-03-01.")]},
    "incident-history": {
        "triage": [_to("technical", "has this happened before")],
        "technical": [tool_call("incidents", {"query": "dashboard timeouts eu-west"}),
                      text("Yes: INC-311 on 2026-06-14 was the same, eu-west read replicas "
                           "lagging after a schema migration; a replica rebuild fixed it in "
                           "2 h 10 min.")],
        "incidents": [tool_call("search_incidents", {"query": "dashboard timeouts"}),
                      _report("INC-311 (2026-06-14): dashboard timeouts from lagging eu-west "
                              "read replicas, fixed by a replica rebuild in 2 h 10 min.",
                              ["INC-311"], "high", [])]},
    "incident-unknown": {
        "triage": [_to("technical", "exports failing before")],
        "technical": [tool_call("incidents", {"query": "exports failed last year"}),
                      text("We have no record of an exports incident; the incident history "
                           "does not go back past 2026, so I cannot rule one out.")],
        "incidents": [tool_call("search_incidents", {"query": "exports failed"}),
                      _report("No past incident involves exports.", [], "low",
                              ["records before 2026 are not searchable"])]},
    "charged-twice-then-email": {
        "triage": [_to("billing", "duplicate charge"), _to("account", "contact e-mail")],
        "billing": [*_REFUND, _to("triage", "billing settled; an account question now")],
        "account": _ACCOUNT},
    "refund-arguments": {
        "triage": [_to("billing", "refund a duplicate")],
        "billing": _REFUND},
    "two-topics-billing-first": {
        "triage": [[text("I'll get both looked at."),
                    _to("billing", "duplicate charge on INV-2041"),
                    _to("technical", "dashboard timing out")]],
        "billing": _REFUND},
    "cheap-routing": {
        "triage": [_to("account", "plan question")],
        "account": [tool_call("get_account", {}), text("You are on the Team plan.")]},
}


def scripted(case: Case) -> ScriptedModel:
    """A model that plays ``case``'s conversation (each agent its own turns)."""
    return ScriptedModel(name="scripted-evals", by_agent=SCRIPTS[case.id.partition("~")[0]])
