r"""A customer-support team: triage routes to billing, technical and account specialists.

technical has its own sub-agents (network, database) and may delegate a look into past
incidents to the incidents analyst, who reports back; every specialist may transfer back to
its parent. The tools return realistic made-up data.

    relayrace run examples/support/team.py:triage "I was charged twice" -c customer=ACME \
        --model openai:gpt-4o-mini

It ships in the package (``relayrace demo`` runs it); examples/support/team.py in a checkout
is the same team, built from here.

``-c customer=...`` fills ``{{ customer }}`` in the instructions (they fall back to "the
customer" without it). With no --model and no API key the team runs on the scripted demo
model (`relayrace.examples.support.script`).
"""

from __future__ import annotations

import os
from datetime import date

from relayrace import Agent, Model, RunContext, TransferPolicy, tool

BACK_TO_PARENT = TransferPolicy(to_parent=True)

_INVOICES = {
    "INV-2041": {"customer": "ACME GmbH", "amount_eur": 149.00, "status": "paid",
                 "charges": ["2026-11-02 149.00 EUR card ****4242",
                             "2026-11-02 149.00 EUR card ****4242"]},
    "INV-1987": {"customer": "ACME GmbH", "amount_eur": 149.00, "status": "paid",
                 "charges": ["2026-10-02 149.00 EUR card ****4242"]},
}
_REFUNDS: list[dict[str, object]] = []


@tool
async def lookup_invoice(invoice_id: str) -> dict[str, object]:
    """Look up an invoice and the card charges made for it.

    Args:
        invoice_id: The invoice number, e.g. INV-2041.
    """
    invoice = _INVOICES.get(invoice_id.upper())
    if invoice is None:
        return {"error": f"no invoice {invoice_id}", "known": sorted(_INVOICES)}
    return {"invoice_id": invoice_id.upper(), **invoice}


@tool(sequential=True)
async def issue_refund(invoice_id: str, amount_eur: float, reason: str) -> dict[str, object]:
    """Refund part or all of an invoice to the card it was paid with.

    Args:
        invoice_id: The invoice to refund.
        amount_eur: How much to refund, in euros.
        reason: Why, for the ledger.
    """
    refund = {"refund_id": f"RF-{7300 + len(_REFUNDS)}", "invoice_id": invoice_id,
              "amount_eur": amount_eur, "reason": reason, "eta": "3-5 business days"}
    _REFUNDS.append(refund)
    return refund


@tool
async def check_service_status(service: str) -> dict[str, object]:
    """Current status of one of our services (dashboard, api, exports).

    Args:
        service: The service name.
    """
    statuses = {
        "dashboard": {"status": "degraded", "since": "08:41 UTC",
                      "suspected_cause": "database read replicas lagging in eu-west"},
        "api": {"status": "operational"},
        "exports": {"status": "operational"},
    }
    return {"service": service, **statuses.get(service.lower(), {"status": "unknown service"})}


@tool
async def trace_route(region: str) -> dict[str, object]:
    """Latency and packet loss from the edge to a region.

    Args:
        region: A region such as eu-west or us-east.
    """
    return {"region": region, "p50_ms": 38, "p99_ms": 91, "packet_loss_pct": 0.0}


@tool
async def replication_lag(region: str) -> dict[str, object]:
    """Replication lag of the database read replicas in a region.

    Args:
        region: A region such as eu-west or us-east.
    """
    lag = {"eu-west": 47.5, "us-east": 0.4}.get(region, 0.0)
    return {"region": region, "lag_seconds": lag, "threshold_seconds": 5.0,
            "action": "replica rebuild scheduled" if lag > 5 else "none"}


_INCIDENTS = [
    {"id": "INC-311", "date": "2026-06-14", "service": "dashboard",
     "summary": "dashboard timeouts: eu-west read replicas lagged after a schema migration",
     "fix": "replica rebuild, 2 h 10 min"},
    {"id": "INC-287", "date": "2026-03-02", "service": "api",
     "summary": "API 502s behind a misconfigured load balancer in us-east",
     "fix": "config rollback, 25 min"},
]


@tool
async def search_incidents(query: str) -> list[dict[str, str]]:
    """Search past incidents and their postmortems.

    Args:
        query: Keywords, e.g. a service name or a symptom.
    """
    words = {w.lower() for w in query.split() if len(w) > 2}
    return [i for i in _INCIDENTS
            if words & (set(i["summary"].replace(":", "").split()) | {i["service"]})]


@tool
async def get_account(ctx: RunContext[dict[str, str]]) -> dict[str, object]:
    """The signed-in customer's account: plan, contact e-mail and seats."""
    customer = (ctx.context or {}).get("customer", "ACME GmbH")  # no context from the CLI
    return {"customer": customer, "plan": "Team", "seats": 12,
            "contact_email": "ops@acme.example", "renewal": str(date(2027, 3, 1))}


def build_team(model: Model | str) -> Agent[dict[str, str]]:
    """The support team, every agent on ``model``."""
    network = Agent(
        "network", model=model, tools=[trace_route], transfer_policy=BACK_TO_PARENT,
        description="Connectivity, latency and DNS problems.",
        instructions="You diagnose network problems for "
                     "{{ customer | default('the customer') }}. Use trace_route.",
    )
    database = Agent(
        "database", model=model, tools=[replication_lag], transfer_policy=BACK_TO_PARENT,
        description="Slow queries, replication lag, data consistency.",
        instructions="You diagnose database problems for "
                     "{{ customer | default('the customer') }}. Use replication_lag, then "
                     "explain the cause and what is being done.",
    )
    incidents = Agent(
        "incidents", model=model, tools=[search_incidents],
        description="Finds past incidents like a current problem, and how they were fixed.",
        instructions="You search past incidents and postmortems. Cite incident ids as sources; "
                     "name what the records do not say as gaps.",
    )
    technical = Agent(
        "technical", model=model, sub_agents=[network, database],
        tools=[check_service_status, incidents.as_tool(
            description="Ask the incidents analyst whether a problem happened before and how "
                        "it was fixed; it reports back with its sources and confidence.")],
        transfer_policy=BACK_TO_PARENT,
        description="Outages, errors, slowness of the dashboard or the API.",
        instructions="You are technical support. Check the service status first, then hand "
                     "network problems to network and database problems to database. Transfer "
                     "back to triage for anything that is not technical. When the customer asks "
                     "whether a problem happened before, ask incidents.",
    )
    billing = Agent(
        "billing", model=model, tools=[lookup_invoice, issue_refund],
        transfer_policy=BACK_TO_PARENT,
        description="Invoices, charges, refunds.",
        instructions="You are billing support for {{ customer | default('the customer') }}. "
                     "Look invoices up before acting; refund duplicate charges. When billing is "
                     "settled, transfer back to triage if the customer raised other topics.",
    )
    account = Agent(
        "account", model=model, tools=[get_account], transfer_policy=BACK_TO_PARENT,
        description="Account details, seats, contact e-mail, plan.",
        instructions="You answer questions about the customer's account.",
    )
    return Agent(
        "triage", model=model, sub_agents=[billing, technical, account],
        description="Routes each customer request to the right specialist.",
        instructions="You are the first line of support for "
                     "{{ customer | default('the customer') }}. Do not solve problems yourself: "
                     "transfer to the specialist who owns the request. If a message raises "
                     "several topics, start with the first one.",
    )


def configured_model() -> str | None:
    """A real model if the environment names one: RELAYRACE_MODEL, or an API key."""
    if os.environ.get("RELAYRACE_MODEL"):
        return os.environ["RELAYRACE_MODEL"]
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return "openai:" + os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic:claude-sonnet-4-5"
    return None


def default_model() -> Model | str:
    """The model the environment names (see `configured_model`), else the scripted demo."""
    from .script import scripted_model  # offline: the scripted demo conversation

    return configured_model() or scripted_model()


triage = build_team(default_model())
"""The team's entry agent, on `default_model`."""
