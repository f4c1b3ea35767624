"""YAML teams: loading, every error path, Astromesh warnings, the schema and the drawings."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest

from relayrace import (
    Agent,
    CircularReferenceError,
    ConfigError,
    FunctionTool,
    Permissions,
    RateLimit,
    Runner,
    UserError,
)
from relayrace.agents.delegation import AgentTool
from relayrace.agents.guardrails import (
    ContentFilterGuardrail,
    CostLimit,
    MaxLengthGuardrail,
    PIIGuardrail,
    TopicDenyListGuardrail,
)
from relayrace.config import LoadedTeam, load_team, to_dot, to_mermaid, write_svg
from relayrace.config import cli as config_cli
from relayrace.config.schema import json_schema, render
from relayrace.config.schema import main as schema_main
from relayrace.models.fallback import FallbackModel
from relayrace.models.openai import OpenAIChatModel
from relayrace.teams.patterns import PlanAndExecute
from relayrace.teams.routing import (
    AgentTarget,
    FromSpeaker,
    Rule,
    Stay,
    TerminateTarget,
    ToolCalled,
)
from relayrace.teams.team import Team
from relayrace.teams.workflows import Chain, LoopAgent, ParallelAgent, SequentialAgent
from relayrace.testing import ScriptedModel, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "teams"
VALID = FIXTURES / "valid"
EXAMPLE = ROOT / "examples" / "yaml_team"


def agent_doc(name: str, body: str = "", *, system: str = "You help.") -> str:
    """One ``kind: Agent`` document; ``body`` is YAML under ``spec``, from line 8."""
    return (f"apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n  name: {name}\nspec:\n"
            f"  prompts:\n    system: {system}\n{textwrap.indent(textwrap.dedent(body), '  ')}")


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    return tmp_path


def load_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_team(path)
    return str(info.value)


# -- a valid team -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def team() -> LoadedTeam:
    return load_team(VALID)


def test_loads_every_document(team: LoadedTeam) -> None:
    assert sorted(team) == sorted(["triage", "billing", "tech", "researcher", "writer",
                                   "critic", "editor", "desk", "review_team", "pipeline",
                                   "polish", "everything"])
    assert team.warnings == []
    assert {d.name: d.kind for d in team.documents}["review_team"] == "Team"
    info = next(d for d in team.documents if d.name == "triage")
    assert (info.file, info.line, info.api_version) == (str(VALID / "triage.agent.yaml"), 1,
                                                        "relayrace/v1")
    assert info.labels == {"team": "support"}
    assert set(team.entry_points) == {"triage", "editor", "desk", "review_team", "polish",
                                      "everything"}


def test_agent_fields(team: LoadedTeam) -> None:
    triage = team["triage"]
    assert isinstance(triage, Agent)
    assert triage.description == "Routes customer requests to the right specialist"
    assert triage.instructions.startswith("You are the support triage agent for {{ company")
    assert triage.model == "openai:gpt-4o-mini"
    assert triage.model_settings is not None
    assert (triage.model_settings.temperature, triage.model_settings.max_tokens) == (0.2, 512)
    assert (triage.max_turns, triage.timeout, triage.pattern) == (8, 120, "react")
    assert triage.handoff_tools == "per_agent" and triage.mode == "chat"
    assert [a.name for a in triage.sub_agents] == ["billing", "tech"]
    billing, tech = team["billing"], team["tech"]
    assert billing.parent is triage and tech.parent is triage
    assert billing.transfer_policy.to_parent and billing.transfer_policy.to_peers
    assert tech.transfer_policy.to_parent and not tech.transfer_policy.to_peers
    assert tech.mode == "task"
    assert [type(g) for g in triage.input_guardrails] == [PIIGuardrail, MaxLengthGuardrail]
    assert [type(g) for g in triage.output_guardrails] == [TopicDenyListGuardrail]


def test_agent_tool(team: LoadedTeam) -> None:
    triage = team["triage"]
    assert [t.name for t in triage.tools] == ["research", "lookup_order"]
    research = triage.tools[0]
    assert isinstance(research, AgentTool)
    assert research.agent is team["researcher"]
    assert research.description == "Research a customer's question in the knowledge base"
    assert research.parameters["required"] == ["query", "product"]
    assert research.transform is not None
    assert research.transform.render({"query": "q", "product": "kettle"}) == {
        "product": "kettle"}
    assert research.rate_limit == RateLimit(5, 60)
    assert (research.max_turns, research.include_history, research.report) == (4, True, True)
    assert research.requires_approval


def test_python_tools(team: LoadedTeam) -> None:
    lookup = team["triage"].tools[1]
    assert isinstance(lookup, FunctionTool)
    assert lookup.description == "Look up an order's status."
    assert lookup("A1") == "order A1: shipped"
    (refund,) = team["billing"].tools
    assert isinstance(refund, FunctionTool)
    assert refund.name == "refund_order"  # YAML name wins over the decorator's
    assert refund.sequential and refund.requires_approval  # approval kept from the decorator
    assert refund.rate_limit == RateLimit(2, 30)
    assert refund.definition.name == "refund_order"
    import support_desk_tools  # the fixture module, imported next to the YAML file

    assert support_desk_tools.refund.name == "issue_refund"  # the module's tool is not modified


def test_model_from_endpoint(team: LoadedTeam) -> None:
    researcher = team["researcher"]
    assert isinstance(researcher.model, OpenAIChatModel)
    assert researcher.model.model == "llama3.1:8b"
    assert researcher.model._base_url == "http://localhost:11434/v1"  # Ollama's OpenAI API
    assert researcher.model._client is None  # nothing contacted, no client built
    settings = researcher.model_settings
    assert settings is not None and settings.top_p == 0.9
    assert settings.extra == {"num_ctx": 8192}


def test_patterns(team: LoadedTeam) -> None:
    editor = team["editor"]
    assert editor.pattern == "supervisor" and editor.max_turns == 6
    assert [t.name for t in editor.tools] == ["writer", "review"]
    desk = team["desk"]
    assert desk.name == "desk-swarm" and desk.pattern == "swarm" and desk.max_handoffs == 2
    assert [a.name for a in desk.sub_agents] == ["desk", "writer", "critic"]
    assert desk.sub_agents[0].instructions == "Answer or hand off."
    assert all(a.transfer_policy.to_peers for a in desk.sub_agents)
    assert desk.handoffs[1].input_filter is not None  # transcript: {turns, chars}


def test_team_and_workflows(team: LoadedTeam) -> None:
    review = team["review_team"]
    assert isinstance(review, Team)
    assert list(review.rules) == [
        Rule(FromSpeaker("writer"), AgentTarget("critic")),
        Rule(ToolCalled("lookup_order"), Stay(), -1),
        Rule(FromSpeaker("critic"), TerminateTarget("reviewed")),
    ]
    assert review.initial == "writer" and review.team_turns == 6
    assert [type(g) for g in review.team_input] == [MaxLengthGuardrail]
    assert [a.name for a in review.sub_agents] == ["writer", "critic"]
    pipeline, polish, everything = team["pipeline"], team["polish"], team["everything"]
    assert isinstance(pipeline, SequentialAgent) and isinstance(polish, LoopAgent)
    assert isinstance(everything, ParallelAgent)
    assert [a.name for a in pipeline.sub_agents] == ["researcher", "writer"]
    assert polish.max_iterations == 3
    assert polish.until is not None and polish.until("ok, APPROVED") and not polish.until("no")
    assert everything.sub_agents[0] is pipeline
    # `tech` is triage's sub-agent: the workflow gets its own copy, the tree rule holds.
    copy = everything.sub_agents[1]
    assert copy.name == "tech" and copy is not team["tech"] and copy.parent is everything
    assert team["tech"].parent is team["triage"]


def test_model_override_runs_offline() -> None:
    model = ScriptedModel([text("done")])
    loaded = load_team(VALID, model=model)
    assert all(loaded[n].model is model for n in ("triage", "researcher", "writer"))
    result = Runner.run_sync(loaded["writer"], "hi")
    assert result.final_output == "done"


def test_one_file_with_several_documents(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(agent_doc("a", "  tools:\n    - {type: agent, agent: b}\n")
                    + "---\n" + agent_doc("b") + "---\n")
    loaded = load_team(path)
    assert list(loaded) == ["a", "b"]
    assert loaded["a"].tools[0].name == "b"
    assert loaded.documents[1].line == 11  # after a's 9 lines and the ---


def test_example_loads_without_warnings() -> None:
    loaded = load_team(EXAMPLE)
    assert loaded.warnings == []
    lead = loaded["lead"]
    assert lead.pattern == "supervisor"
    assert [t.name for t in lead.tools] == ["research", "write"]
    research = lead.tools[0]
    assert isinstance(research, AgentTool) and research.transform is not None
    assert loaded.entry_points == ["lead"]
    assert research.transform.render({"query": "q", "topic": "tides"}) == {
        "topic": "tides", "depth": "quick"}


def test_example_runs_offline(capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio
    import runpy

    script = runpy.run_path(str(EXAMPLE / "run.py"), run_name="example")
    asyncio.run(script["main"]())
    out = capsys.readouterr().out
    assert "warning:" not in out and 'lead ==>|"delegates: research"| researcher' in out
    # Its answer: the last one scripts/handoff.yaml gives (lead's, from the writer's text).
    assert out.rstrip().endswith("A handoff passes the conversation on (note 1).")


# -- errors -----------------------------------------------------------------------------------


def test_unknown_key_names_file_line_and_suggests(tmp_path: Path) -> None:
    write(tmp_path, {"support.agent.yaml": agent_doc("support", """\
          orchestration:
            pattern: react
            max_iteration: 3
        """)})
    message = load_error(tmp_path)
    assert message == (f"{tmp_path / 'support.agent.yaml'}:10: unknown key "
                       "'spec.orchestration.max_iteration'; did you mean 'max_iterations'?")


def test_several_errors_and_bad_values(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", """\
          orchestration:
            pattern: superviser
          tools:
            - type: pythn
              function: m:f
            - type: agent
              agnt: b
        """)})
    message = load_error(tmp_path)
    f = tmp_path / "a.yaml"
    assert f"{f}:9: spec.orchestration.pattern: Input should be" in message
    assert "did you mean 'supervisor'?" in message
    assert f"{f}:11: spec.tools[0].type: unknown value 'pythn'; did you mean 'python'?" in message
    assert f"{f}:13: missing required key 'spec.tools[1].agent'" in message
    assert f"{f}:14: unknown key 'spec.tools[1].agnt'; did you mean 'agent'?" in message


def test_unknown_top_level_key_and_kind(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": "apiVersion: relayrace/v1\nkind: Agnet\nmetadata: {name: a}\n"})
    assert "a.yaml:2: kind: unknown kind 'Agnet'; did you mean 'Agent'?" in load_error(tmp_path)
    write(tmp_path, {"a.yaml": agent_doc("a") + "specs: {}\n"})
    assert "a.yaml:8: unknown key 'specs'; did you mean 'spec'?" in load_error(tmp_path)
    write(tmp_path, {"a.yaml": agent_doc("a").replace("relayrace/v1", "relayrace/v2")})
    assert "a.yaml:1: apiVersion: Input should be 'relayrace/v1' or 'astromesh/v1'" \
        in load_error(tmp_path)


def test_typo_in_model_parameters(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", """\
          model:
            primary: {provider: openai, model: m, parameters: {temprature: 0.5, seed: 1}}
        """)})
    assert ("unknown key 'spec.model.primary.parameters.temprature'; did you mean "
            "'temperature'?") in load_error(tmp_path)


def test_unknown_provider(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", """\
          model:
            primary: {provider: openia, model: m}
        """)})
    message = load_error(tmp_path)
    assert "a.yaml:9: spec.model.primary.provider: unknown provider 'openia'" in message
    assert "did you mean 'openai'?; valid: openai, anthropic, ollama, vllm, lmstudio" in message
    with pytest.raises(ConfigError, match="unknown provider"):  # even when models are replaced
        load_team(tmp_path, model="openai:gpt-4o-mini")


def test_bad_yaml_syntax(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": "apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n"
                               "  name: [unclosed\nspec: {}\n"})
    message = load_error(tmp_path)
    assert message.startswith(f"{tmp_path / 'a.yaml'}:5: invalid YAML:")
    write(tmp_path, {"a.yaml": agent_doc("a") + "kind: Agent\n"})
    assert "a.yaml:8: duplicate key 'kind' (first at line 2)" in load_error(tmp_path)


def test_undefined_agent(tmp_path: Path) -> None:
    write(tmp_path, {
        "lead.yaml": agent_doc("lead", """\
          tools:
            - {type: agent, agent: resercher}
        """),
        "researcher.yaml": agent_doc("researcher"),
    })
    assert load_error(tmp_path) == (f"{tmp_path / 'lead.yaml'}:9: spec.tools[0].agent: "
                                    "undefined agent 'resercher'; did you mean 'researcher'?")


@pytest.mark.parametrize("body, key", [
    ("  sub_agents: [ghost]\n", "spec.sub_agents[0]"),
    ("  specialists: [ghost]\n", "spec.specialists[0]"),
])
def test_undefined_sub_agent_or_specialist(tmp_path: Path, body: str, key: str) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", body)})
    assert f"a.yaml:8: {key}: undefined agent 'ghost'" in load_error(tmp_path)


def test_undefined_team_member_step_and_rule(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("writer"), "t.yaml": textwrap.dedent("""\
        apiVersion: relayrace/v1
        kind: Workflow
        metadata: {name: flow}
        spec:
          type: sequential
          steps: [writer, writr]
        """)})
    assert ("t.yaml:6: spec.steps[1]: undefined agent, team or workflow 'writr'; did you mean "
            "'writer'?") in load_error(tmp_path)
    (tmp_path / "t.yaml").write_text(textwrap.dedent("""\
        apiVersion: relayrace/v1
        kind: Team
        metadata: {name: team}
        spec:
          agents: [writer]
          rules:
            - when: {from_speaker: writer}
              then: {agent: critic}
        """))
    assert "t.yaml:8: spec.rules[0].then.agent: undefined agent 'critic'" in load_error(tmp_path)


def test_wrong_kind_reference(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", "  tools:\n    - {type: agent, agent: flow}\n"),
                     "w.yaml": "apiVersion: relayrace/v1\nkind: Workflow\nmetadata: {name: flow}\n"
                               "spec: {type: sequential, steps: [b]}\n",
                     "b.yaml": agent_doc("b")})
    assert "a.yaml:9: spec.tools[0].agent: 'flow' is a Workflow" in load_error(tmp_path)


def test_swarm_cannot_be_a_sub_agent(tmp_path: Path) -> None:
    write(tmp_path, {"s.yaml": agent_doc("s", "orchestration: {pattern: swarm}\n"
                                              "tools: [{type: agent, agent: b}]\n"),
                     "b.yaml": agent_doc("b"), "p.yaml": agent_doc("p", "sub_agents: [s]\n")})
    assert "p.yaml:8: spec.sub_agents[0]: 's' is a swarm" in load_error(tmp_path)


def test_duplicate_name_names_both_files(tmp_path: Path) -> None:
    write(tmp_path, {"one.yaml": agent_doc("same"), "two.yaml": agent_doc("same")})
    assert load_error(tmp_path) == (
        f"{tmp_path / 'two.yaml'}:4: metadata.name: duplicate name 'same'; already defined at "
        f"{tmp_path / 'one.yaml'}:4")


def test_cycle_shows_the_whole_cycle(tmp_path: Path) -> None:
    tool = "  tools:\n    - {{type: agent, agent: {}}}\n"
    write(tmp_path, {"a.yaml": agent_doc("a", tool.format("b")),
                     "b.yaml": agent_doc("b", tool.format("c")),
                     "c.yaml": agent_doc("c", tool.format("a")),
                     "x.yaml": agent_doc("x", tool.format("a"))})  # leads into the cycle
    with pytest.raises(CircularReferenceError) as info:
        load_team(tmp_path)
    assert str(info.value) == "Circular agent reference detected: a -> b -> c -> a"
    assert info.value.cycle == ["a", "b", "c", "a"]


def test_cycle_through_sub_agents_teams_and_workflows(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", "  sub_agents: [b]\n"),
                     "b.yaml": agent_doc("b", "  specialists: [a]\n")})
    with pytest.raises(CircularReferenceError, match="a -> b -> a"):
        load_team(tmp_path)
    write(tmp_path, {"a.yaml": agent_doc("a", "  tools:\n    - {type: agent, agent: b}\n"),
                     "b.yaml": agent_doc("b"),
                     "w.yaml": "apiVersion: relayrace/v1\nkind: Workflow\nmetadata: {name: w}\n"
                               "spec: {type: sequential, steps: [a, w]}\n"})
    with pytest.raises(CircularReferenceError) as info:
        load_team(tmp_path)
    assert str(info.value) == "Circular agent reference detected: w -> w"
    assert info.value.__notes__ == [f"Defined at: w ({tmp_path / 'w.yaml'}:1)"]


def test_self_reference_is_a_cycle(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", "  tools:\n    - {type: agent, agent: a}\n")})
    with pytest.raises(CircularReferenceError) as info:
        load_team(tmp_path)
    assert str(info.value) == "Circular agent reference detected: a -> a"


def test_diamond_loads(tmp_path: Path) -> None:
    tool = "    - {{type: agent, agent: {}}}\n"
    write(tmp_path, {"a.yaml": agent_doc("a", "  tools:\n" + tool.format("b") + tool.format("c")),
                     "b.yaml": agent_doc("b", "  tools:\n" + tool.format("d")),
                     "c.yaml": agent_doc("c", "  tools:\n" + tool.format("d")),
                     "d.yaml": agent_doc("d")})
    loaded = load_team(tmp_path)
    b_tool, c_tool = loaded["b"].tools[0], loaded["c"].tools[0]
    assert isinstance(b_tool, AgentTool) and isinstance(c_tool, AgentTool)
    assert b_tool.agent is c_tool.agent is loaded["d"]  # d is also standalone
    assert loaded.entry_points == ["a"]


def test_two_parents(tmp_path: Path) -> None:
    write(tmp_path, {"p1.yaml": agent_doc("p1", "  sub_agents: [child]\n"),
                     "p2.yaml": agent_doc("p2", "  sub_agents: [child]\n"),
                     "child.yaml": agent_doc("child")})
    message = load_error(tmp_path)
    assert f"{tmp_path / 'p2.yaml'}:8: spec.sub_agents[0]: agent 'child' is already a " \
           f"sub-agent of 'p1' ({tmp_path / 'p1.yaml'}:8)" in message
    assert "at most one parent" in message


def test_rule_cycle_without_exit(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a"), "b.yaml": agent_doc("b"),
                     "team.yaml": textwrap.dedent("""\
                         apiVersion: relayrace/v1
                         kind: Team
                         metadata: {name: pingpong}
                         spec:
                           agents: [a, b]
                           rules:
                             - {when: {from_speaker: a}, then: {agent: b}}
                             - {when: {from_speaker: b}, then: {agent: a}}
                         """)})
    message = load_error(tmp_path)
    assert message.startswith(f"{tmp_path / 'team.yaml'}:6: team 'pingpong': Routing cycle "
                              "with no exit: a -> b -> a")


def test_bad_rule_and_target(tmp_path: Path) -> None:
    team = ("apiVersion: relayrace/v1\nkind: Team\nmetadata: {name: t}\nspec:\n  agents: [a]\n"
            "  rules:\n    - {when: {from: a}, then: {stay: true}}\n")
    write(tmp_path, {"a.yaml": agent_doc("a"), "t.yaml": team})
    assert "t.yaml:7: spec.rules[0]: Unknown rule condition 'from'" in load_error(tmp_path)
    (tmp_path / "t.yaml").write_text(team.replace("  rules:\n    - {when: {from: a}, then: "
                                                  "{stay: true}}\n", "  default_target: {x: 1}\n"))
    assert "t.yaml:6: spec.default_target: Unknown rule target 'x'" in load_error(tmp_path)


def test_module_name_clash_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "json.py").write_text("def f() -> None: ...\n")  # shadowed by the stdlib json
    write(tmp_path, {"a.yaml": agent_doc("a", "tools: [{type: python, function: 'json:f'}]")})
    assert "a.yaml:8: spec.tools[0].function: 'json' is already imported from" \
        in load_error(tmp_path)


def test_python_tool_errors(tmp_path: Path) -> None:
    (tmp_path / "tools_here.py").write_text("VALUE = 1\n\ndef ok(x: int) -> int:\n    return x\n")
    for function, expected in [
        ("no_such_module:f", "cannot import 'no_such_module'"),
        ("tools_here:missing", "module 'tools_here' has no attribute 'missing'"),
        ("tools_here:VALUE", "'tools_here:VALUE' is a int, not a relayrace Tool or a function"),
    ]:
        write(tmp_path, {"a.yaml": agent_doc("a", f"  tools:\n    - type: python\n"
                                                  f"      function: {function}\n")})
        message = load_error(tmp_path)
        assert f"a.yaml:10: spec.tools[0].function: {expected}" in message, message
    write(tmp_path, {"a.yaml": agent_doc("a", "  tools:\n    - {type: python, function: "
                                              "tools_here:ok}\n")})
    assert load_team(tmp_path)["a"].tools[0].name == "ok"


def test_build_errors_are_located(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", """\
          tools:
            - type: agent
              agent: b
              context_transform: '{"x": "{{ data.x }"}'
        """), "b.yaml": agent_doc("b")})
    message = load_error(tmp_path)
    assert "a.yaml:9: spec.tools[0]:" in message and "syntax error" in message


def test_template_syntax_error_line(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", system="|\n      line one\n      {% if x %}oops\n")})
    message = load_error(tmp_path)
    assert "a.yaml:9: spec.prompts.system: template syntax error" in message


def test_invalid_guardrail_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", """\
          guardrails:
            input:
              - {type: pii_detection, action: explode}
        """)})
    assert "a.yaml:10: spec.guardrails.input[0]:" in load_error(tmp_path)


def test_pattern_needs_workers(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", "  orchestration: {pattern: swarm}\n")})
    assert "a.yaml:8: spec.orchestration.pattern: pattern 'swarm' needs at least one tool of " \
           "type 'agent'" in load_error(tmp_path)


def test_loop_workflow_checks(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a"),
                     "w.yaml": "apiVersion: relayrace/v1\nkind: Workflow\nmetadata: {name: w}\n"
                               "spec:\n  type: loop\n  steps: [a]\n"})
    assert "w.yaml:5: a loop workflow needs 'spec.max_iterations'" in load_error(tmp_path)
    (tmp_path / "w.yaml").write_text("apiVersion: relayrace/v1\nkind: Workflow\nmetadata: "
                                     "{name: w}\nspec:\n  type: sequential\n  steps: [a]\n"
                                     "  max_iterations: 2\n")
    assert "w.yaml:7: 'spec.max_iterations' applies only to type 'loop'" in load_error(tmp_path)


def test_not_a_mapping_and_missing_path(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": "- just\n- a list\n"})
    assert "a.yaml:1: a document must be a mapping" in load_error(tmp_path)
    assert "no such file or directory" in load_error(tmp_path / "nope")


# -- Astromesh files --------------------------------------------------------------------------


def test_astromesh_keys_are_warnings() -> None:
    loaded = load_team(FIXTURES / "astromesh")
    found = {w.key: w for w in loaded.warnings}
    assert set(found) == {
        "metadata.namespace", "spec.model.routing",
        "spec.prompts.templates", "spec.tools[0]",
        "spec.tools[1]", "spec.memory.conversational.backend",
    }
    file = str(FIXTURES / "astromesh" / "sales.agent.yaml")
    assert all(w.file == file and "ignored" in w.message for w in loaded.warnings)
    assert str(found["spec.memory.conversational.backend"]) == (
        f"{file}:43: spec.memory.conversational.backend: not supported by relayrace; ignored "
        "(Astromesh memory backend; relayrace keeps memory in the session store).")
    assert "'builtin'" in found["spec.tools[0]"].message
    chain = loaded["sales-qualifier"]
    assert isinstance(chain, Chain) and [link.agent.name for link in chain.links] == [
        "email-composer"]
    pattern = chain.agent
    assert isinstance(pattern, PlanAndExecute) and pattern.max_steps == 6
    agent = pattern.worker
    assert agent.pattern == "react" and agent.tools == ()
    assert [type(g) for g in agent.input_guardrails] == [PIIGuardrail]
    assert [type(g) for g in agent.output_guardrails] == [CostLimit, ContentFilterGuardrail]
    assert agent.permissions == Permissions(allow=["lookup_company"])
    # openai_compat with an endpoint, then Astromesh's fallback model
    assert isinstance(agent.model, FallbackModel)
    primary, fallback = agent.model.models
    assert isinstance(primary, OpenAIChatModel) and isinstance(fallback, OpenAIChatModel)
    assert fallback.name.endswith("llama3.1:8b")
    assert "sales_qualifier ==>|\"delegates: chain\"| email_composer" in to_mermaid(loaded.graph)


def test_swarm_keys_on_other_patterns_warn(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", "  orchestration: {max_handoffs: 2}\n")})
    (warning,) = load_team(tmp_path).warnings
    assert warning.key == "spec.orchestration.max_handoffs" and "ignored" in warning.message


def test_missing_api_key_env_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RR_TEST_KEY", raising=False)
    write(tmp_path, {"a.yaml": agent_doc("a", """\
          model:
            primary: {provider: openai, model: m, api_key_env: RR_TEST_KEY}
        """)})
    (warning,) = load_team(tmp_path).warnings
    assert warning.key == "spec.model.primary.api_key_env" and "RR_TEST_KEY" in warning.message
    monkeypatch.setenv("RR_TEST_KEY", "sk-test")
    model = load_team(tmp_path)["a"].model
    assert isinstance(model, OpenAIChatModel) and model._api_key == "sk-test"


# -- schema, drawings, CLI helpers ------------------------------------------------------------


def test_schema_file_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "agent.schema.json").read_text()
    assert committed == render(), "run: python -m relayrace.config.schema"
    schema = json_schema()
    assert {ref["$ref"].split("/")[-1] for ref in schema["oneOf"]} == {
        "AgentDocument", "TeamDocument", "WorkflowDocument"}
    orchestration = schema["$defs"]["OrchestrationSpec"]["properties"]
    assert orchestration["max_iterations"]["description"]
    memory = schema["$defs"]["ConversationalMemorySpec"]["properties"]
    assert memory["backend"]["x-relayrace-ignored"]


def test_schema_main_writes(tmp_path: Path) -> None:
    target = tmp_path / "schema.json"
    assert schema_main([str(target)]) == 0
    assert json.loads(target.read_text())["$id"].endswith("agent.schema.json")


def test_mermaid(team: LoadedTeam) -> None:
    text = to_mermaid(team)
    assert text.startswith("flowchart TD\n")
    for line in [
        'triage["triage<br/><i>react · openai:gpt-4o-mini</i>"]',
        'editor["editor<br/><i>supervisor</i>"]',
        'tech["tech<br/><i>react · task</i>"]',
        'tech -.->|"returns"| triage',
        'triage -->|"transfer"| billing',
        'billing -.->|"transfer back"| triage',
        'billing -.->|"transfer"| tech',
        'triage ==>|"delegates: research"| researcher',
        'editor ==>|"delegates: review"| critic',
        'desk -.->|"transfer: writer"| writer',
        'review_team ---|"member"| writer',
        'writer -->|"from writer"| critic',
        'critic -->|"from critic"| review_team_end',
        'pipeline -->|"step 1"| researcher',
        'pipeline -->|"step 2"| writer',
    ]:
        assert f"    {line}\n" in text, line
    assert 'tech -.->|"transfer"|' not in text  # tech may not transfer to peers


def test_dot_and_svg(team: LoadedTeam, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dot = to_dot(team)
    assert dot.startswith("digraph team {")
    assert '"billing" -> "triage" [label="transfer back", style=dashed];' in dot
    assert '"triage" -> "researcher" [label="delegates: research", penwidth=2];' in dot
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert write_svg(team, tmp_path / "team.svg") is False
    with pytest.raises(UserError, match="needs Graphviz's 'dot'.*Install Graphviz.*Mermaid"):
        config_cli.graph(VALID, tmp_path / "team.svg")
    assert not (tmp_path / "team.svg").exists()


def test_mermaid_of_an_agent_tree_built_in_python() -> None:
    billing = Agent("billing", instructions="Bills.", model="openai:gpt-4o-mini", mode="task",
                    tools=[FunctionTool(lambda invoice: invoice, name="lookup")])
    researcher = Agent("researcher", instructions="Researches.", model="anthropic:claude")
    expert = Agent("expert", instructions="Knows.", description="An expert.")
    triage = Agent("triage", instructions="Routes.", sub_agents=[billing],
                   tools=[researcher.as_tool(name="research")], specialists=[expert])
    pipeline = SequentialAgent("pipeline", steps=[triage, Agent("writer", instructions="W.")])
    text = to_mermaid(pipeline)
    for line in [
        'pipeline[/"pipeline<br/><i>sequential</i>"/]',
        'billing["billing<br/><i>react · task · openai:gpt-4o-mini</i>"]',
        'tool_lookup(["lookup"])',
        'pipeline -->|"step 1"| triage',
        'triage -->|"transfer"| billing',
        'billing -.->|"returns"| triage',
        'billing -->|"uses"| tool_lookup',
        'triage ==>|"delegates: research"| researcher',
        'triage ==>|"delegates (meta-tool)"| expert',
    ]:
        assert f"    {line}\n" in text, text
    assert "consult" not in text  # meta-tools are drawn as the specialists they reach
    assert '"triage" -> "billing" [label="transfer"];' in to_dot(triage)


def test_cli_validate(tmp_path: Path) -> None:
    ok, report = config_cli.validate(VALID)
    assert ok
    assert "12 documents" in report and "Entry points:" in report and "No warnings." in report
    assert "swarm of desk, writer, critic" in report
    ok, report = config_cli.validate(FIXTURES / "astromesh")
    assert ok and "6 warnings:" in report and "spec.memory" in report
    assert "plan_and_execute: react" in report and "then sequential: email-composer" in report
    write(tmp_path, {"a.yaml": agent_doc("a", "  toolz: []\n")})
    ok, report = config_cli.validate(tmp_path)
    assert not ok and "unknown key 'spec.toolz'; did you mean 'tools'?" in report


def test_swarm_member_tool_settings_reach_the_transfer(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("desk", """\
          orchestration: {pattern: swarm}
          tools:
            - type: agent
              agent: billing
              name: ask_billing
              description: Invoices and refunds.
              requires_approval: true
        """, system="Answer or hand off."), "b.yaml": agent_doc("billing", system="Bills.")})
    model = ScriptedModel([tool_call("ask_billing", {"reason": "refund"})])
    desk = load_team(tmp_path, model=model)["desk"]
    transfer = desk.handoffs[1]
    assert transfer.agent.name == "billing" and transfer.requires_approval
    assert transfer.default_description() == "Invoices and refunds."
    result = asyncio.run(Runner.run(desk, "I want a refund"))
    assert [t for t in model.requests[0].tools if "billing" in t] == ["ask_billing"]
    assert result.pending is not None  # the transfer waits for its approval


@pytest.mark.parametrize(("key", "value", "why"), [
    ("rate_limit", "{max_calls: 1, window_seconds: 60}", "orchestration.max_handoffs"),
    ("parameters", "{type: object}", "takes only a reason"),
    ("max_turns", "3", "max_iterations"),
    ("report", "false", "not with a report"),
])
def test_swarm_member_keys_a_transfer_cannot_use_are_refused(
        tmp_path: Path, key: str, value: str, why: str) -> None:
    write(tmp_path, {"a.yaml": agent_doc("desk", f"""\
          orchestration: {{pattern: swarm}}
          tools:
            - type: agent
              agent: billing
              {key}: {value}
        """), "b.yaml": agent_doc("billing")})
    message = load_error(tmp_path)
    assert f"a.yaml:12: spec.tools[0].{key}: not available for a member of a swarm" in message
    assert why in message, message


# -- model fallback and model parameters -------------------------------------------------------


def test_model_fallback_list_and_parameters_build(tmp_path: Path) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", """\
        model:
          primary:
            provider: openai
            model: gpt-4o-mini
            parameters: {strict_tools: true, deadline: 30, text_tool_calls: parse}
          fallback:
            - {provider: anthropic, model: claude-sonnet-4-5}
            - {provider: ollama, model: llama3.2}
        """)})
    agent = load_team(tmp_path)["a"]
    assert isinstance(agent.model, FallbackModel)
    names = [m.name for m in agent.model.models]
    # Ollama is reached through its OpenAI-compatible API.
    assert names == ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5", "openai:llama3.2"]
    assert agent.model_settings is not None
    assert agent.model_settings.strict_tools is True and agent.model_settings.deadline == 30
    assert agent.model_settings.text_tool_calls == "parse" and not agent.model_settings.extra


@pytest.mark.parametrize(("model", "expected"), [
    ("  fallback: {provider: openai, model: x}\n",
     "a.yaml:9: spec.model.fallback needs spec.model.primary"),
    ("  primary: {provider: openai, model: x}\n  fallback: [{provider: opneai, model: y}]\n",
     "spec.model.fallback[0].provider: unknown provider 'opneai'; did you mean 'openai'?"),
    ("  primary: {provider: openai, model: x, parameters: {deadline: -1}}\n",
     "spec.model.primary.parameters.deadline"),
    ("  primary: {provider: openai, model: x}\n  fallback: 7\n", "spec.model.fallback"),
])
def test_bad_model_fallback_is_a_located_error(tmp_path: Path, model: str, expected: str) -> None:
    write(tmp_path, {"a.yaml": agent_doc("a", "model:\n" + textwrap.indent(model, "  "))})
    assert expected in load_error(tmp_path)
