"""The scenarios `python3 dev realmodel` runs on a real local model, and the replay tests again.

Each takes ``make(settings)``, which gives relayrace's OpenAI provider on the scenario's wire
(the live server through a recorder, or a replay of it), and returns an `Outcome`: what
happened (``facts``: the tools that ran, the handoffs, the path) and the checks on it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from relayrace import (
    Agent,
    DelegationEvent,
    MessageEvent,
    Model,
    ModelBehaviorError,
    ModelSettings,
    Runner,
    RunResult,
    TextDeltaEvent,
    tool,
)
from relayrace.sessions import MemorySession

ROOT = Path(__file__).resolve().parent.parent
Make = Callable[[ModelSettings | None], Model]


@dataclass
class Outcome:
    """What a scenario saw happen, and whether each check on it held."""

    facts: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every check held."""
        return bool(self.checks) and all(self.checks.values())


def _facts(result: RunResult[Any]) -> dict[str, Any]:
    usage = result.usage.total
    return {"tools": [(r.tool_name, r.message.content[:80]) for r in result.tool_results],
            "handoffs": [f"{h.agent}->{h.to_agent}" for h in result.handoffs],
            "last_agent": result.last_agent.name,
            "answer": str(result.final_output)[:160],
            # the calls the model wrote as text, which relayrace ran (text_tool_calls="parse")
            "calls parsed from text": [c.name for e in result.new_events
                                       if isinstance(e, MessageEvent) and e.parsed_from_text
                                       for c in e.message.tool_calls],
            "usage": {"requests": usage.requests, "input_tokens": usage.input_tokens,
                      "output_tokens": usage.output_tokens}}


@tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name, e.g. Paris.
    """
    return f"{city}: 21 C, sunny"


def _weather(model: Model) -> Agent[Any]:
    return Agent("weather", model=model, tools=[get_weather],
                 instructions="You answer questions about the weather: call get_weather once, "
                              "then answer in one sentence from what it returned.")


async def one_tool(make: Make) -> Outcome:
    """One agent, one tool: the tool runs, and the answer uses what it returned."""
    result = await Runner.run(_weather(make(None)), "What is the weather in Paris?")
    facts = _facts(result)
    return Outcome(facts, {
        "get_weather ran": [t for t, _ in facts["tools"]] == ["get_weather"],
        "with Paris": any("Paris" in out for _, out in facts["tools"]),
        "the answer says it": "21" in facts["answer"] or "sunny" in facts["answer"].lower()})


def _desk(model: Model) -> Agent[Any]:
    billing = Agent("billing", model=model, description="Invoices, charges, refunds.",
                    sticky=True,  # it keeps the conversation for the session's next turns
                    instructions="You are billing support. Answer billing questions briefly.")
    technical = Agent("technical", model=model, description="Outages, errors, bugs.",
                      instructions="You are technical support. Answer briefly.")
    return Agent("triage", model=model, sub_agents=[billing, technical],
                 instructions="You route each customer message to the specialist who owns "
                              "it: transfer_to_billing or transfer_to_technical. Never answer "
                              "yourself.")


async def handoff_two_turns(make: Make) -> Outcome:
    """Triage hands a billing question to billing; the session's next turn is billing's."""
    model, session = make(None), MemorySession("realmodel-handoff")
    first = await Runner.run(_desk(model), "I was charged twice for my last invoice.",
                             session=session)
    second = await Runner.run(_desk(model), "Thanks. When will the money be back?",
                              session=session)
    spoke = [e.agent for e in second.new_events
             if isinstance(e, MessageEvent) and e.message.role == "assistant"]
    facts = {"turn 1": _facts(first), "turn 2": {**_facts(second), "spoke": spoke}}
    return Outcome(facts, {
        "turn 1 handed off to billing": facts["turn 1"]["handoffs"] == ["triage->billing"],
        "turn 2 began with billing": spoke[:1] == ["billing"],
        "an answer": bool(facts["turn 2"]["answer"])})


@tool
def search_notes(topic: str) -> str:
    """Search the team's notes on a topic.

    Args:
        topic: What to look for, e.g. "relay batons".
    """
    return (f"Notes on {topic}: the 4x100 m relay baton is passed in a 30 m zone; a dropped "
            "baton may be picked up by the runner who dropped it.")


async def delegation_report(make: Make) -> Outcome:
    """A parent asks a child (``as_tool``), which reports back with ``submit_report``."""
    model = make(None)
    researcher = Agent("researcher", model=model, tools=[search_notes],
                       instructions="You research a topic with search_notes, then report "
                                    "with submit_report.")
    parent = Agent("coordinator", model=model, tools=[researcher.as_tool(
        description="Ask the researcher about a topic; it reports what the notes say.")],
                   instructions="You answer with the researcher's help: call the researcher "
                                "tool first, then answer from its report.")
    result = await Runner.run(parent, "What do our notes say about relay batons?")
    delegations = [e for e in result.new_events if isinstance(e, DelegationEvent)]
    reports = [d.report or {} for d in delegations]
    facts = {**_facts(result), "delegations": [d.child_agent for d in delegations],
             "reports": [str(r.get("summary", ""))[:120] for r in reports]}
    return Outcome(facts, {
        "the researcher ran": any(d.child_agent == "researcher" and d.ok for d in delegations),
        "it reported with submit_report": any(
            r.get("summary") and "submit_report" not in str(r) for r in reports)})


class Ticket(BaseModel):
    """A support ticket."""

    category: Literal["billing", "technical", "account"]
    priority: int
    summary: str


async def output_type(make: Make) -> Outcome:
    """A typed agent: the answer is a valid ``Ticket`` (native structured output)."""
    agent = Agent("tickets", model=make(None), output_type=Ticket,
                  instructions="Turn the customer's message into a ticket; priority 1-3.")
    result = await Runner.run(agent, "Our dashboard has been down for an hour!")
    ticket = result.final_output
    return Outcome({"ticket": ticket.model_dump()}, {
        "a Ticket": isinstance(ticket, Ticket), "technical": ticket.category == "technical"})


async def streaming(make: Make) -> Outcome:
    """A streamed answer comes in many text deltas, the first soon, and with usage."""
    agent = Agent("writer", model=make(None), instructions="Answer in two sentences.")
    pieces: list[str] = []
    stream = Runner.stream(agent, "Why do relay runners pass a baton?")
    async for event in stream:
        if isinstance(event, TextDeltaEvent):
            pieces.append(event.delta)
    usage, answer = stream.result.usage.total, str(stream.result.final_output)
    return Outcome({"deltas": len(pieces), "output_tokens": usage.output_tokens,
                    "answer": answer[:160]}, {
        "many deltas": len(pieces) >= 10, "usage came": usage.output_tokens > 0,
        "the text is the deltas'": bool(answer) and "".join(pieces) == answer})


async def max_tokens(make: Make) -> Outcome:
    """An answer cut at ``max_tokens`` is a typed error; the session goes on after it."""
    session = MemorySession("realmodel-max-tokens")
    short = Agent("writer", model=make(ModelSettings(temperature=0, max_tokens=16)),
                  instructions="Answer at length.")
    error = ""
    try:
        await Runner.run(short, "Tell me the history of the relay race.", session=session)
    except ModelBehaviorError as exc:
        error = str(exc)
    again = Agent("writer", model=make(None), instructions="Answer in one sentence.")
    result = await Runner.run(again, "Say hello.", session=session)
    return Outcome({"error": error[:160], "follow-up": str(result.final_output)[:80]}, {
        "a typed error naming max_tokens": "max_tokens" in error,
        "the session answers after it": bool(result.final_output)})


async def serve_openai_client(make: Make) -> Outcome:
    """``relayrace serve`` (its app, on 127.0.0.1) with the official ``openai`` client: the
    models list, an answer with usage and a session, and a stream."""
    import openai
    import uvicorn

    from relayrace.server import create_app
    from relayrace.sessions import MemoryStore

    app = create_app(_weather(make(None)), store=MemoryStore())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    await asyncio.to_thread(_started, server)
    port = server.servers[0].sockets[0].getsockname()[1]

    def talk() -> dict[str, Any]:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local",
                               max_retries=0)
        with client:
            models = [m.id for m in client.models.list()]
            raw = client.chat.completions.with_raw_response.create(
                model="weather", messages=[{"role": "user", "content": "Weather in Paris?"}])
            whole = raw.parse()
            chunks = list(client.chat.completions.create(
                model="weather", stream=True,
                messages=[{"role": "user", "content": "And in Oslo?"}],
                extra_headers={"X-Relayrace-Session": raw.headers["x-relayrace-session"]}))
        return {"models": models, "answer": (whole.choices[0].message.content or "")[:160],
                "total_tokens": whole.usage.total_tokens if whole.usage else 0,
                "session": raw.headers.get("x-relayrace-session", ""),
                "streamed": "".join(c.choices[0].delta.content or "" for c in chunks)[:160],
                "chunks": len(chunks)}

    try:
        facts = await asyncio.to_thread(talk)
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 30)
    shown = facts["answer"] + facts["streamed"]
    return Outcome(facts, {
        "the agent is a model": facts["models"] == ["weather"],
        "an answer with usage": bool(facts["answer"]) and facts["total_tokens"] > 0,
        "a session header": bool(facts["session"]),
        "a streamed answer": bool(facts["streamed"]),
        "get_weather ran": "21" in facts["answer"] or "sunny" in facts["answer"].lower(),
        # a call the model wrote as text runs; the client never sees it as the answer
        "no call shown as text": "get_weather" not in shown})


def _started(server: Any) -> None:
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("the relayrace server did not start in 30 s")
        time.sleep(0.05)


def support_team(model: Model) -> Agent[Any]:
    """The support demo team (examples/support/team.py) on ``model``."""
    sys.path.insert(0, str(ROOT / "examples" / "support"))
    try:
        from team import build_team
    finally:
        sys.path.remove(str(ROOT / "examples" / "support"))
    return build_team(model)


async def support_demo(make: Make) -> Outcome:
    """The support demo team: a duplicate charge goes to billing, which looks it up."""
    result = await Runner.run(support_team(make(None)),
                              "I was charged twice for invoice INV-2041.",
                              context={"customer": "ACME GmbH"})
    facts = _facts(result)
    return Outcome(facts, {
        "routed to billing": facts["handoffs"][:1] == ["triage->billing"],
        "the invoice looked up": "lookup_invoice" in [t for t, _ in facts["tools"]]})


async def run_scenario(name: str, make: Make) -> Outcome:
    """Scenario ``name`` on ``make``'s model; one that raises is a failed outcome saying what
    it raised, not the end of the run (the replay tests see it fail the same way)."""
    try:
        return await SCENARIOS[name](make)
    except Exception as exc:
        return Outcome({"error": f"{type(exc).__name__}: {exc}"[:300]},
                       {"ran without an error": False})


SCENARIOS: dict[str, Callable[[Make], Awaitable[Outcome]]] = {
    "support_demo": support_demo, "one_tool": one_tool, "handoff_two_turns": handoff_two_turns,
    "delegation_report": delegation_report, "output_type": output_type,
    "streaming": streaming, "max_tokens": max_tokens,
    "serve_openai_client": serve_openai_client,
}
"""Every scenario by name, in the order they run."""
