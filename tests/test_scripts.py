"""A scripted model written in YAML (``--model scripted:FILE.yaml``, `load_script`): what it
plays, and every mistake in the file named with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayrace import Agent, Runner, tool
from relayrace.config import load_script
from relayrace.core.events import MessageEvent
from relayrace.core.exceptions import ConfigError
from relayrace.sessions import MemorySession
from relayrace.testing import ScriptedModel
from test_cli import TEAM, assert_clean_error, invoke

ROOT = Path(__file__).resolve().parent.parent
HANDOFF = ROOT / "examples" / "yaml_team" / "scripts" / "handoff.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "script.yaml"
    path.write_text(text)
    return path


def test_the_yaml_example_runs_offline_on_its_script(tmp_path: Path) -> None:
    done = invoke("run", ROOT / "examples" / "yaml_team", "What is a handoff?",
                  "--model", f"scripted:{HANDOFF}", "--db", tmp_path / "s.db")
    assert done.exit_code == 0, done.output
    assert "model scripted:handoff.yaml · a scripted offline model" in done.stdout
    assert "lead: A handoff passes the conversation on (note 1)." in done.stdout
    assert "answered by lead" in done.stdout


async def test_a_script_plays_turns_parts_outputs_per_agent_and_then(tmp_path: Path) -> None:
    model = load_script(write(tmp_path, """
turns:
  - [{text: "Looking."}, {call: lookup, arguments: {id: 7}, id: c1}]
  - The answer is 7.
by_agent:
  helper: [{call: lookup, arguments: '{"id": oops'}]
then: Nothing more.
"""))
    assert isinstance(model, ScriptedModel)  # relayrace.testing's, not a copy
    looked: list[int] = []

    @tool
    def lookup(id: int) -> str:
        """Look it up.

        Args:
            id: The id.
        """
        looked.append(id)
        return str(id)

    agent = Agent("main", instructions="-", model=model, tools=[lookup])
    session = MemorySession()
    result = await Runner.run(agent, "go", session=session)
    assert result.final_output == "The answer is 7." and looked == [7]
    [said] = [e.message for e in result.new_events  # one answer: text and a call
              if isinstance(e, MessageEvent) and e.message.tool_calls]
    assert said.content == "Looking." and said.tool_calls[0].id == "c1"
    again = await Runner.run(agent, "more?", session=session)
    assert again.final_output == "Nothing more."  # `then`, once the turns are spent
    # Another conversation plays from the first turn (a server's sessions do not share).
    other = await Runner.run(agent, "go")
    assert other.final_output == "The answer is 7."
    helper = Agent("helper", instructions="-", model=model, tools=[lookup])
    broken = await Runner.run(helper, "go", max_turns=2)  # its malformed arguments as given
    assert broken.tool_results[0].is_error


def test_every_mistake_of_a_script_is_named_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, """turns:
  - cal: lookup
  - call: lookup
    argumens: {id: 7}
  - {text: a, call: b}
  - 42
  - call: lookup
    arguments: [1, 2]
by_agnet: {}
""")
    with pytest.raises(ConfigError) as info:
        load_script(path)
    assert str(info.value).splitlines() == [
        f"{path}:9: by_agnet: unknown key 'by_agnet'; did you mean 'by_agent'? (a script has "
        "turns:, by_agent: and then:)",
        f"{path}:2: turns[0]: a turn has exactly one of text:, call:, output:; this one has "
        "none of text, call, output (it has 'cal'; did you mean 'call'?)",
        f"{path}:4: turns[1].argumens: unknown key 'argumens' in a call: turn; did you mean "
        "'arguments'? (it takes call, arguments, id)",
        f"{path}:5: turns[2]: a turn has exactly one of text:, call:, output:; this one has "
        "both text and call",
        f"{path}:6: turns[3]: a turn is text (a string, or {{text: ...}}), {{call: TOOL, "
        "arguments: {...}}, {output: VALUE}, or a list of these (one answer of several parts)"
        "; got int 42",
        f"{path}:8: turns[4].arguments: arguments: must be a mapping (sent as JSON) or a "
        "string (sent as it is, e.g. malformed JSON)",
    ]


def test_a_script_that_is_missing_empty_or_not_a_mapping_is_a_clean_error(
        tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    missing = invoke("run", f"{TEAM}:triage", "hi", "--model", "scripted:nope.yaml", "--db", db)
    assert_clean_error(missing, "Script file 'nope.yaml' does not exist",
                       "scripted:path/to/script.yaml")
    assert not db.exists()
    empty = write(tmp_path, "then_: x\n")
    assert_clean_error(invoke("run", f"{TEAM}:triage", "hi", "--model", f"scripted:{empty}",
                              "--db", db), "unknown key 'then_'; did you mean 'then'?")
    listed = write(tmp_path, "- hello\n")
    with pytest.raises(ConfigError, match="a script is a mapping with turns:"):
        load_script(listed)
    none = write(tmp_path, "turns: []\n")
    with pytest.raises(ConfigError, match="the script gives no turns"):
        load_script(none)


async def test_an_output_turn_is_the_structured_answer_the_agent_asks_for(
        tmp_path: Path) -> None:
    from pydantic import BaseModel

    class Score(BaseModel):
        score: int

    model = load_script(write(tmp_path, "turns:\n  - output: {score: 8}\n"))
    result = await Runner.run(Agent("judge", instructions="-", model=model, output_type=Score),
                              "rate it")
    assert result.final_output == Score(score=8)
