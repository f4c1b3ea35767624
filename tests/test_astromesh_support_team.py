"""The Astromesh docs' complete example team ("Customer Support Pipeline"), as written.

``fixtures/teams/astromesh_support`` holds the seed's ``triage.agent.yaml`` and
``billing.agent.yaml`` verbatim, and the ``tech-support`` agent they name (which the page does
not show). The triage swarm's ``technical-specialist`` member has a ``context_transform``: it
shapes what the member receives when the conversation is transferred to it.
"""

from __future__ import annotations

import json
from pathlib import Path

from relayrace import Agent, HandoffEvent, Runner, TransferPolicy, handoff
from relayrace.config import load_team
from relayrace.core.events import dump_events, load_events
from relayrace.core.messages import Message
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call

TEAM = Path(__file__).parent / "fixtures" / "teams" / "astromesh_support"
PROBLEM = ("The desktop app crashes every time I export a report to PDF, since the update "
           "of last Tuesday; reinstalling did not help and the log says 'renderer gone'.")


def _transfer_note(messages: list[Message]) -> str:
    return next(m.content for m in messages if m.role == "tool"
                and m.content.startswith("Transferred from triage"))


def test_the_seed_team_loads_with_only_its_builtin_tools_ignored() -> None:
    team = load_team(TEAM, model=ScriptedModel())
    assert set(team) == {"triage", "billing", "tech-support"}
    assert sorted(w.key for w in team.warnings) == ["spec.tools[0]", "spec.tools[2]"]
    assert all("'builtin' is not supported" in w.message for w in team.warnings)
    triage = team["triage"]
    assert isinstance(triage, Agent)
    members = {h.tool_name: h for h in triage.handoffs if h.agent.name != "triage"}
    assert set(members) == {"billing-specialist", "technical-specialist"}
    assert members["technical-specialist"].context_transform is not None
    assert members["billing-specialist"].context_transform is None


async def test_a_swarm_members_context_transform_replaces_the_reason_it_receives() -> None:
    model = ScriptedModel([
        tool_call("technical-specialist", {"reason": PROBLEM}),
        text("Let us clear the renderer cache."),
    ])
    triage = load_team(TEAM, model=model)["triage"]
    result = await Runner.run(triage, "My app crashes on PDF export.")
    assert result.final_output == "Let us clear the renderer cache."
    assert result.last_agent.name == "tech-support"
    seen = model.requests[1]
    assert seen.agent == "tech-support"
    note = _transfer_note(seen.messages)
    prefix = "Transferred from triage to tech-support. Context: "
    assert note.startswith(prefix)
    # The template's object, its value the reason cut by Jinja's truncate(100).
    context = json.loads(note[len(prefix):])
    assert list(context) == ["issue_category"]
    assert PROBLEM.startswith(context["issue_category"].removesuffix("..."))
    assert len(context["issue_category"]) <= 100
    assert PROBLEM not in note and "Reason:" not in note
    # The handoff itself keeps the model's reason for whoever audits the run.
    [moved] = [e for e in result.new_events if isinstance(e, HandoffEvent)]
    assert moved.to_agent == "tech-support" and moved.reason == PROBLEM


async def test_the_transformed_context_reaches_the_members_prompt_template() -> None:
    """The seed: the transform's object "is then available in the target agent's Jinja2
    system prompt template"; tech-support's prompt reads ``issue_category``."""
    model = ScriptedModel([tool_call("technical-specialist", {"reason": PROBLEM}),
                           text("Let us clear the renderer cache."), text("Try safe mode.")])
    triage = load_team(TEAM, model=model)["triage"]
    session = MemorySession()
    await Runner.run(triage, "My app crashes on PDF export.", session=session)
    [shown] = [line for line in model.requests[1].instructions.splitlines()
               if line.startswith("Issue: ")]
    category = shown.removeprefix("Issue: ")
    assert PROBLEM.startswith(category.removesuffix("...")) and len(category) <= 100
    # The next user turn is tech-support's too: the transfer's record gives it the context
    # again (the session holds it on the HandoffEvent).
    [moved] = [e for e in await session.get_events() if isinstance(e, HandoffEvent)]
    assert moved.context == {"issue_category": category}
    assert load_events(dump_events([moved])) == [moved]  # a stored log keeps it
    again = await Runner.run(triage, "Still broken.", session=session)
    assert again.last_agent.name == "tech-support"
    assert f"Issue: {category}" in model.requests[2].instructions


async def test_the_seeds_sales_qualifier_reads_the_transform_of_the_transfer_to_it() -> None:
    """The seed's own example, as a swarm member: the sales manager transfers with the
    arguments the page gives, the page's transform reshapes them and the page's prompt
    template shows them (as ``{{ company }}`` or ``{{ context.company }}``)."""
    from pydantic import BaseModel

    class Lead(BaseModel):
        query: str
        company: str
        contact: str
        deal_size: str

    model = ScriptedModel([
        tool_call("qualify-lead", {"query": "Qualify this lead", "company": "Acme Corp",
                                   "contact": "Jane Doe", "deal_size": "50000"}),
        text("Budget confirmed.")])
    qualifier = Agent("sales-qualifier", model=model, instructions=(
        "You are a sales lead qualifier using BANT methodology.\n"
        "{% if company %}Company: {{ company }}{% endif %}\n"
        "{% if contact_name %}Contact: {{ contact_name }}{% endif %}\n"
        "{% if estimated_value %}Deal value: ${{ estimated_value }}{% endif %}\n"
        "Evaluate Budget, Authority, Need, and Timeline. ({{ context.company }})"))
    # A YAML swarm member is this handoff (config builds `type: agent` under swarm as one).
    manager = Agent("sales-manager", model=model, instructions="Manage the pipeline.",
                    sub_agents=[handoff(
                        qualifier, tool_name="qualify-lead", input_type=Lead,
                        context_transform=(
                            '{ "company": "{{ data.company }}", "contact_name": '
                            '"{{ data.contact }}", "estimated_value": "{{ data.deal_size }}" }'))])
    result = await Runner.run(manager, "New lead: Acme.")
    assert result.final_output == "Budget confirmed."
    assert model.requests[1].instructions == (
        "You are a sales lead qualifier using BANT methodology.\nCompany: Acme Corp\n"
        "Contact: Jane Doe\nDeal value: $50000\n"
        "Evaluate Budget, Authority, Need, and Timeline. (Acme Corp)")


async def test_the_context_stays_with_the_member_the_transform_reached() -> None:
    model = ScriptedModel([tool_call("transfer_to_tech", {"reason": "crash"}),
                           tool_call("transfer_to_triage", {"reason": "not mine"}),
                           text("Done.")])
    tech = Agent("tech", model=model, transfer_policy=TransferPolicy(to_parent=True),
                 instructions="Tech. {{ ticket | default('no ticket') }}")
    transform = '{"ticket": "T-{{ data.reason }}"}'
    triage = Agent("triage", model=model, instructions="Route. {{ ticket | default('none') }}",
                   sub_agents=[handoff(tech, context_transform=transform)])
    await Runner.run(triage, "help")
    assert [r.instructions for r in model.requests] == [
        "Route. none", "Tech. T-crash", "Route. none"]


async def test_a_member_without_a_transform_receives_the_reason() -> None:
    model = ScriptedModel([tool_call("billing-specialist", {"reason": "refund for INV-7"}),
                           text("Refund issued.")])
    result = await Runner.run(load_team(TEAM, model=model)["triage"], "refund please")
    assert result.last_agent.name == "billing"
    assert _transfer_note(model.requests[1].messages) == (
        "Transferred from triage to billing. Reason: refund for INV-7")


async def test_a_transform_failing_on_the_arguments_is_a_tool_error_and_no_transfer() -> None:
    model = ScriptedModel([tool_call("transfer_to_tech", {"reason": "crash"}),
                           text("I will ask again.")])
    tech = Agent("tech", instructions="Tech.", model=model)
    triage = Agent("triage", instructions="Route.", model=model, sub_agents=[
        handoff(tech, context_transform='{"ticket": "{{ data.ticket }}"}')])
    result = await Runner.run(triage, "help")
    assert result.last_agent is triage and not result.handoffs
    error = model.requests[1].messages[-1]
    assert error.role == "tool" and error.content.startswith("Not performed: ")
    assert "ticket" in error.content and "Call the transfer again" in error.content


async def test_a_transform_reads_the_transfers_typed_input_too() -> None:
    from pydantic import BaseModel

    class Ticket(BaseModel):
        order: str
        query: str

    model = ScriptedModel([
        tool_call("transfer_to_tech", {"order": "A1", "query": "PDF export", "reason": "crash"}),
        text("On it.")])
    tech = Agent("tech", instructions="Tech.", model=model)
    triage = Agent("triage", instructions="Route.", model=model, sub_agents=[handoff(
        tech, input_type=Ticket,
        context_transform='{"ticket": "{{ data.order }}: {{ data.query }} ({{ data.reason }})"}')])
    await Runner.run(triage, "help")
    assert model.requests[1].messages[-1].content == (
        'Transferred from triage to tech. Context: {"ticket": "A1: PDF export (crash)"}')
