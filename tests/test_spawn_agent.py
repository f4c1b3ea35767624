"""spawn_agent: a model creates a one-off child agent from an allowed menu."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayrace import Agent, ConfigError, DelegationEvent, Runner, UsageLimits, UserError, tool
from relayrace.sessions import MemorySession
from relayrace.teams.meta_tools import spawn_agent
from relayrace.testing import ScriptedModel, text, tool_call


@tool
def lookup(sku: str) -> str:
    """Look up a product."""
    return f"{sku}: 3 in stock"


@tool
def delete_everything() -> str:
    """Never for a spawned agent."""
    return "deleted"


REPORT = "<handoff><summary>3 in stock</summary></handoff>"


def _setup(parent_turns: list, child_turns: list):  # type: ignore[no-untyped-def,type-arg]
    parent_model = ScriptedModel(parent_turns)
    cheap, strong = ScriptedModel(child_turns), ScriptedModel([])
    tool_ = spawn_agent(models={"cheap": cheap, "strong": strong}, tools=[lookup], max_turns=4)
    lead = Agent("lead", instructions="Lead.", model=parent_model,
                 tools=[tool_, delete_everything])
    return lead, parent_model, cheap, strong


async def test_spawned_child_runs_with_its_instructions_model_and_tools() -> None:
    lead, parent, cheap, strong = _setup(
        [tool_call("spawn_agent", {"instructions": "You check stock. {{ secret }}",
                                   "task": "Stock of SKU-9?", "model": "cheap",
                                   "tools": ["lookup"]}),
         text("There are 3.")],
        [tool_call("lookup", {"sku": "SKU-9"}), text(REPORT)])
    session = MemorySession()
    result = await Runner.run(lead, "How many SKU-9?", session=session, context={"secret": "x"})
    assert result.final_output == "There are 3."
    first = cheap.requests[0]
    assert first.instructions.startswith("You check stock. {{ secret }}")  # never rendered
    assert list(first.tools) == ["lookup", "submit_report"]  # its tools, and how it reports
    assert first.messages[-1].content == "Stock of SKU-9?"
    (event,) = [e for e in session.events if isinstance(e, DelegationEvent)]
    assert event.ok and event.child_agent == "spawned_agent"
    assert event.report is not None and "3 in stock" in str(event.report)
    assert not strong.requests
    assert result.usage.per_agent["lead/spawned_agent"].requests == 2


async def test_a_model_off_the_menu_or_a_tool_not_allowed_is_a_tool_error() -> None:
    lead, parent, cheap, _ = _setup(
        [tool_call("spawn_agent", {"instructions": "x", "task": "t", "model": "gpt-9"}),
         tool_call("spawn_agent", {"instructions": "x", "task": "t",
                                   "tools": ["delete_everything"]}),
         tool_call("spawn_agent", {"instructions": " ", "task": "t"}),
         text("I could not.")], [])
    result = await Runner.run(lead, "Go")
    assert result.final_output == "I could not."
    errors = [m.content for m in parent.requests[-1].messages if m.role == "tool"]
    assert "'gpt-9' is not on the menu; choose one of: cheap, strong" in errors[0]
    assert "'delete_everything' may not be given" in errors[1] and "allowed: lookup" in errors[1]
    assert "non-empty strings" in errors[2]
    assert not cheap.requests


async def test_spawned_children_count_against_the_runs_limits() -> None:
    lead, parent, cheap, _ = _setup(
        [tool_call("spawn_agent", {"instructions": "x", "task": "t"}), text("Stopped.")], [])
    result = await Runner.run(lead, "Go", usage_limits=UsageLimits(max_agent_calls=0))
    assert result.final_output == "Stopped."
    assert "not started" in parent.requests[-1].messages[-1].content
    assert not cheap.requests


def test_bad_menus_are_refused() -> None:
    with pytest.raises(UserError, match="menu of models"):
        spawn_agent(models={})
    with pytest.raises(UserError, match="distinct Tools"):
        spawn_agent(models={"m": ScriptedModel()}, tools=[lookup, lookup])


def test_spawn_agent_from_yaml(tmp_path: Path) -> None:
    from relayrace.config import load_team
    from relayrace.teams.meta_tools import SpawnAgentTool

    (tmp_path / "tools.py").write_text(
        "from relayrace import tool\n\n@tool\ndef lookup(sku: str) -> str:\n"
        "    '''Look a SKU up.'''\n    return sku\n")
    head = ("apiVersion: relayrace/v1\nkind: Agent\nmetadata: {name: lead}\nspec:\n"
            "  prompts: {system: Lead.}\n  tools:\n"
            "    - {type: python, function: 'tools:lookup'}\n"
            "    - type: spawn_agent\n      max_turns: 4\n      models:\n"
            "        fast: {provider: openai, model: gpt-4o-mini}\n"
            "        deep: {provider: anthropic, model: claude-sonnet-4-5}\n")
    (tmp_path / "lead.yaml").write_text(head + "      tools: [lookup]\n")
    lead = load_team(tmp_path)["lead"]
    spawn = next(t for t in lead.tools if isinstance(t, SpawnAgentTool))
    assert list(spawn.models) == ["fast", "deep"] and list(spawn.allowed) == ["lookup"]
    (tmp_path / "lead.yaml").write_text(head + "      tools: [lookpu]\n")
    with pytest.raises(ConfigError, match="unknown: 'lookpu'; its tools: lookup"):
        load_team(tmp_path)
    (tmp_path / "lead.yaml").write_text(head.replace("provider: openai", "provider: opnai"))
    with pytest.raises(ConfigError, match="spec.tools.1.models.fast.provider|unknown provider"):
        load_team(tmp_path)
