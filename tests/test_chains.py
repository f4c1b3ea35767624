"""Chains (Astromesh's spec.chain) on workflow agents: conditions, default, retry, on_error,
parallel links, and the load-time checks of YAML chains."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from relayrace import (
    Agent,
    CircularReferenceError,
    ConfigError,
    DelegationEvent,
    Message,
    MessageEvent,
    PatternStepFailed,
    Runner,
    UserError,
)
from relayrace.config import load_team
from relayrace.sessions import MemorySession
from relayrace.teams.workflows import Chain, ChainLink
from relayrace.testing import FunctionModel, ScriptedModel, final_output, text


def _messages(session: MemorySession) -> list[Message]:
    return [e.message for e in session.events if isinstance(e, MessageEvent)]


SCORE = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}


def _qualifier(model: ScriptedModel) -> Agent:
    from relayrace import json_schema_type

    return Agent("qualifier", instructions="Score leads.", model=model,
                 output_type=json_schema_type(SCORE))


@pytest.mark.parametrize(("score", "ran"), [(9, "email"), (3, "nurture")])
async def test_when_picks_a_link_and_default_runs_when_none_held(score: int, ran: str) -> None:
    model = ScriptedModel(by_agent={"qualifier": [final_output({"score": score})],
                                    "email": [text("Dear Acme")], "nurture": [text("Later")]})
    chain = Chain(agent=_qualifier(model), links=[
        ChainLink(agent=Agent("email", instructions="Write.", model=model),
                  when="{{ output.data.score > 7 }}", input="Score {{ output.data.score }}"),
        ChainLink(agent=Agent("nurture", instructions="Nurture.", model=model), default=True),
    ])
    session = MemorySession()
    result = await Runner.run(chain, "Lead: Acme", session=session)
    assert result.final_output == {"score": score}  # the run's answer stays the agent's
    (event,) = [e for e in session.events if isinstance(e, DelegationEvent)]
    assert event.child_agent == ran
    if ran == "email":
        assert model.requests[-1].messages[-1].content == "Score 9"
    notes = [m.content for m in _messages(session) if m.role == "user"]
    assert notes[-1].startswith(f"[chain qualifier: {ran} answered]")


async def test_retry_then_continue_or_fail() -> None:
    calls: list[str] = []

    def flaky(request):  # type: ignore[no-untyped-def]
        calls.append(request.agent)
        if request.agent == "notify":
            raise RuntimeError("SMTP down")
        return text("done")

    model = FunctionModel(flaky)
    root = Agent("root", instructions="Answer.", model=model)
    notify = Agent("notify", instructions="Notify.", model=model)
    chain = Chain(agent=root, links=[ChainLink(agent=notify, attempts=3, retry_delay=0,
                                               on_error="continue")])
    session = MemorySession()
    assert (await Runner.run(chain, "Hi", session=session)).final_output == "done"
    assert calls.count("notify") == 3
    assert "notify failed and the chain went on: RuntimeError: SMTP down" in \
        _messages(session)[-1].content

    strict = Chain(agent=root.clone(), links=[ChainLink(agent=notify.clone(), retry_delay=0)])
    with pytest.raises(PatternStepFailed, match="link 'notify' failed"):
        await Runner.run(strict, "Hi")


async def test_parallel_links_run_at_once() -> None:
    both = asyncio.Barrier(2)

    async def answer(request):  # type: ignore[no-untyped-def]
        if request.agent in ("a", "b"):
            await both.wait()  # returns only when both links are running
        return text(f"{request.agent} ok")

    model = FunctionModel(answer)
    chain = Chain(agent=Agent("root", instructions="x", model=model), mode="parallel",
                  links=[ChainLink(agent=Agent(n, instructions="x", model=model))
                         for n in ("a", "b")])
    session = MemorySession()
    await asyncio.wait_for(Runner.run(chain, "Hi", session=session), 10)
    assert sum(isinstance(e, DelegationEvent) and e.ok for e in session.events) == 2


async def test_a_condition_reading_a_missing_value_fails_loudly() -> None:
    model = ScriptedModel([text("plain text")])
    chain = Chain(agent=Agent("root", instructions="x", model=model), links=[
        ChainLink(agent=Agent("b", instructions="x", model=model), when="output.data.score > 7")])
    with pytest.raises(UserError, match="reads a missing value"):
        await Runner.run(chain, "Hi")


def test_python_chains_check_depth_and_links() -> None:
    model = ScriptedModel()
    inner = Chain(agent=Agent("b", instructions="x", model=model),
                  links=[ChainLink(agent=Agent("c", instructions="x", model=model))])
    with pytest.raises(UserError, match="deeper than max_depth=1 on the path a -> b"):
        Chain(agent=Agent("a", instructions="x", model=model), links=[ChainLink(agent=inner)],
              max_depth=1)
    leaf = Agent("z", instructions="x", model=model)
    with pytest.raises(UserError, match="more than one default"):
        Chain(agent=leaf, links=[ChainLink(agent=leaf, default=True)] * 2)
    with pytest.raises(UserError, match="cannot have a 'when'"):
        Chain(agent=leaf, links=[ChainLink(agent=leaf, default=True, when="true")])
    with pytest.raises(ConfigError, match="syntax error"):
        Chain(agent=leaf, links=[ChainLink(agent=leaf, when="output.answer >")])


def _doc(name: str, chain: str = "") -> str:
    body = f"apiVersion: astromesh/v1\nkind: Agent\nmetadata: {{name: {name}}}\nspec:\n" \
           f"  prompts: {{system: Help.}}\n"
    return body + textwrap.indent(textwrap.dedent(chain), "  ")


def _write(tmp_path: Path, docs: dict[str, str]) -> Path:
    for name, text_ in docs.items():
        (tmp_path / f"{name}.agent.yaml").write_text(text_)
    return tmp_path


async def test_yaml_chain_runs_with_no_warning(tmp_path: Path) -> None:
    _write(tmp_path, {"qualifier": _doc("qualifier", """\
        chain:
          mode: sequential
          on_complete:
            - agent: composer
              when: "{{ 'hot' in output.answer }}"
              input: "Write to: {{ output.answer }}"
              retry: {max_attempts: 2, backoff: exponential, initial_delay_seconds: 0}
              timeout_seconds: 30
              on_error: continue
        """), "composer": _doc("composer")})
    model = ScriptedModel([text("hot lead"), text("Dear lead")])
    team = load_team(tmp_path, model=model)
    assert team.warnings == []
    assert isinstance(team["qualifier"], Chain) and team.entry_points == ["qualifier"]
    result = await Runner.run(team["qualifier"], "Acme")
    assert result.final_output == "hot lead"
    assert model.requests[1].messages[-1].content == "Write to: hot lead"


def test_yaml_chain_cycle_and_depth_are_caught_at_load(tmp_path: Path) -> None:
    link = "chain:\n  on_complete:\n    - agent: {}\n"
    _write(tmp_path, {"a": _doc("a", link.format("b")), "b": _doc("b", link.format("a"))})
    with pytest.raises(CircularReferenceError, match="a -> b -> a"):
        load_team(tmp_path)
    deep = tmp_path / "deep"
    deep.mkdir()
    _write(deep, {"a": _doc("a", "chain:\n  max_depth: 2\n  on_complete:\n    - agent: b\n"),
                  "b": _doc("b", link.format("c")), "c": _doc("c", link.format("d")),
                  "d": _doc("d")})
    with pytest.raises(ConfigError, match=r"a.agent.yaml:\d+: spec.chain: .*max_depth=2 on the "
                                          r"path a -> b -> c"):
        load_team(deep)


@pytest.mark.parametrize(("chain", "error"), [
    ("chain: {on_complete: []}", "spec.chain.on_complete"),
    ("chain: {mode: fanout, on_complete: [{agent: b}]}", "spec.chain.mode"),
    ("chain: {on_complete: [{agent: nobody}]}", "undefined agent 'nobody'"),
    ("chain: {on_complete: [{agent: b, when: 'output.answer >'}]}",
     "spec.chain.on_complete[0].when"),
    ("chain: {on_complete: [{agent: b, default: true, when: 'true'}]}", "cannot have a 'when'"),
    ("chain: {on_complete: [{agent: b, default: true}, {agent: b, default: true}]}",
     "more than one default"),
    ("chain: {on_complete: [{agent: b, on_error: log-and-skip}]}", "on_error"),
    ("chain: {on_complete: [{agent: b, input: '{{ output.answer'}]}", "input: template syntax"),
])
def test_malformed_yaml_chains_are_config_errors(tmp_path: Path, chain: str, error: str) -> None:
    _write(tmp_path, {"a": _doc("a", chain + "\n"), "b": _doc("b")})
    with pytest.raises(ConfigError) as info:
        load_team(tmp_path)
    assert "a.agent.yaml:" in str(info.value) and error in str(info.value)
