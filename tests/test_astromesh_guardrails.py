"""Astromesh's content_filter and cost_limit guardrails, from Python and from YAML."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from relayrace import Agent, ConfigError, GuardrailTriggeredEvent, Runner, UserError
from relayrace.agents.guardrails import ContentFilterGuardrail, CostLimit
from relayrace.config import load_team
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel, text, tool_call


async def test_content_filter_redacts_patterns_and_whole_keywords() -> None:
    rail = ContentFilterGuardrail(patterns=[r"sk-[a-z0-9]{6,}"], keywords=["project x"])
    model = ScriptedModel([text("Key sk-abc12345 for Project  X, not project xy.")])
    agent = Agent("a", instructions="Help.", model=model, output_guardrails=[rail])
    session = MemorySession()
    result = await Runner.run(agent, "Hi", session=session)
    assert result.final_output == "Key [FILTERED] for [FILTERED], not project xy."
    (event,) = [e for e in session.events if isinstance(e, GuardrailTriggeredEvent)]
    assert event.action == "redact" and event.message == "2 filtered matches"


async def test_content_filter_block_withholds_the_answer() -> None:
    rail = ContentFilterGuardrail(keywords=["internal"], action="block")
    model = ScriptedModel([text("This is INTERNAL only.")])
    agent = Agent("a", instructions="Help.", model=model, output_guardrails=[rail])
    result = await Runner.run(agent, "Hi")
    assert "INTERNAL" not in result.final_output and "content_filter" in result.final_output


@pytest.mark.parametrize("options", [
    {}, {"patterns": ["("]}, {"keywords": [""]}, {"keywords": "secret"},
    {"keywords": ["x"], "action": "warn"},
])
def test_content_filter_bad_options(options: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(UserError, match="ContentFilterGuardrail"):
        ContentFilterGuardrail(**options)


def _long(n: int) -> str:
    return "x" * (4 * n)  # the scripted model counts 4 characters as one token


async def test_cost_limit_counts_delegated_children_and_blocks_as_an_answer() -> None:
    model = ScriptedModel([tool_call("research", {"query": "q"}), text(_long(50)),
                           text("never requested")])
    researcher = Agent("research", instructions="Research.", model=model)
    lead = Agent("lead", instructions="Lead.", model=model,
                 tools=[researcher.as_tool(report=False)],
                 output_guardrails=[CostLimit(40, count="output")])
    session = MemorySession()
    result = await Runner.run(lead, "Go", session=session)
    assert result.final_output.startswith("I have to stop here")
    assert "limit 40" in result.final_output
    assert model.remaining == 1  # the lead's next request was never made
    (event,) = [e for e in session.events if isinstance(e, GuardrailTriggeredEvent)]
    assert event.guardrail == "cost_limit" and event.action == "block"
    assert [e.kind for e in session.events][-1] == "run_finished"


async def test_cost_limit_total_counts_input_too_and_takes_a_message() -> None:
    model = ScriptedModel([tool_call("noop"), text("unused")])
    from relayrace import tool

    @tool
    def noop() -> str:
        """Do nothing."""
        return "done"

    rail = CostLimit(5, count="total", message="Budget reached; ask again later.")
    agent = Agent("a", instructions="Help " * 40, model=model, tools=[noop],
                  input_guardrails=[rail])
    result = await Runner.run(agent, "Go")
    assert result.final_output == "Budget reached; ask again later."
    output_only = Agent("b", instructions="Help " * 40, model=ScriptedModel(
        [tool_call("noop"), text("fine")]), tools=[noop], output_guardrails=[CostLimit(5)])
    assert (await Runner.run(output_only, "Go")).final_output == "fine"


@pytest.mark.parametrize("options", [
    {"max_tokens_per_turn": 0}, {"max_tokens_per_turn": True},
    {"max_tokens_per_turn": 10, "count": "inputs"}, {"max_tokens_per_turn": 10, "message": ""},
])
def test_cost_limit_bad_options(options: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(UserError, match="CostLimit"):
        CostLimit(**options)


def test_yaml_guardrails_build_without_warnings(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(textwrap.dedent("""\
        apiVersion: astromesh/v1
        kind: Agent
        metadata: {name: a}
        spec:
          prompts: {system: Help.}
          guardrails:
            output:
              - type: content_filter
                action: block
                blocked_patterns: ["\\\\bpassword\\\\b"]
                forbidden_keywords: [secret]
              - type: cost_limit
                max_tokens_per_turn: 4000
                count: total
        """))
    loaded = load_team(tmp_path)
    assert loaded.warnings == []
    content, cost = loaded["a"].output_guardrails
    assert isinstance(content, ContentFilterGuardrail) and content.action == "block"
    assert isinstance(cost, CostLimit) and cost.count == "total"
    assert cost.max_tokens_per_turn == 4000


@pytest.mark.parametrize(("rule", "error"), [
    ("{type: cost_limit}", "needs 'max_tokens_per_turn'"),
    ("{type: cost_limit, max_tokens_per_turn: 10, count: inputs}", "count"),
    ("{type: content_filter, blocked_patterns: ['(']}", "not a valid regular expression"),
    ("{type: content_filter, blocked_keywords: [x]}", "Unknown key 'blocked_keywords'"),
])
def test_yaml_guardrail_errors_name_the_rule(tmp_path: Path, rule: str, error: str) -> None:
    (tmp_path / "a.yaml").write_text(
        "apiVersion: astromesh/v1\nkind: Agent\nmetadata: {name: a}\nspec:\n"
        f"  prompts: {{system: Help.}}\n  guardrails:\n    output:\n      - {rule}\n")
    with pytest.raises(ConfigError, match="a.yaml:8: spec.guardrails.output\\[0\\]") as info:
        load_team(tmp_path)
    assert error in str(info.value)


async def test_a_streamed_run_shows_the_cost_block_answer() -> None:
    from relayrace import TextDeltaEvent

    model = ScriptedModel([tool_call("research", {"query": "q"}), text(_long(50)), text("no")])
    researcher = Agent("research", instructions="Research.", model=model)
    lead = Agent("lead", instructions="Lead.", model=model,
                 tools=[researcher.as_tool(report=False)], output_guardrails=[CostLimit(40)])
    stream = Runner.stream(lead, "Go")
    shown = "".join([e.delta async for e in stream if isinstance(e, TextDeltaEvent)
                     and e.agent == "lead"])
    assert shown.startswith("I have to stop here")
