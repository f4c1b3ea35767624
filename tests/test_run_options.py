"""One options value for every entry point: `RunOptions`, and `run_with` for the entry points
that build it themselves (the durable runner, another engine's adapter)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from relayrace import Agent, Runner, tool
from relayrace.runner import RunOptions, run_with
from relayrace.sessions import MemorySession
from relayrace.sessions.steps import StepRunner
from relayrace.testing import ScriptedModel, tool_call

SRC = Path(__file__).resolve().parent.parent / "src" / "relayrace"


class _Steps(StepRunner):
    """Records steps in a dict, as an engine adapter would in its own store."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.values: dict[str, str] = {}

    async def step(self, key: str, fn: Callable[[], Awaitable[str]]) -> str:
        if key not in self.values:
            self.values[key] = await fn()
        return self.values[key]

    def recorded(self, key: str) -> str | None:
        return self.values.get(key)


def _team(calls: list[str]) -> Agent:
    @tool
    def charge(amount: int) -> str:
        """Charge the card."""
        calls.append(f"charge {amount}")
        return "charged"

    model = ScriptedModel([tool_call("charge", {"amount": 5}, id="c1"), "done"])
    return Agent("billing", instructions="Bill.", model=model, tools=[charge])


async def test_an_adapter_runs_a_team_through_run_with_and_its_own_steps() -> None:
    calls: list[str] = []
    steps = _Steps("run-1")
    session = MemorySession()
    result = await run_with(_team(calls), "charge me", session,
                            RunOptions(max_turns=4, user_id="u1", steps=steps))
    assert result.final_output == "done" and calls == ["charge 5"]
    # The model's two requests and the tool call went through the adapter's steps.
    assert len(steps.values) == 3
    assert any("charged" in v for v in steps.values.values())
    started = (await session.view()).run_id
    assert started == "run-1"


async def test_run_options_check_like_runner_run() -> None:
    team = _team([])
    with pytest.raises(Exception, match="max_turns must be at least 1"):
        await run_with(team, "x", None, RunOptions(max_turns=0))
    with pytest.raises(Exception, match="max_turns must be at least 1"):
        await Runner.run(team, "x", max_turns=0)


def test_run_options_are_one_frozen_value_that_names_a_wrong_option() -> None:
    options = RunOptions(max_turns=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_turns = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="max_turn"):
        RunOptions(max_turn=3)  # type: ignore[call-arg]


def _private_calls_across_packages(path: Path) -> list[str]:
    """Calls like ``Runner._run(...)`` in ``path``: a private method of a name imported from
    another module."""
    tree = ast.parse(path.read_text())
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    return [f"{path.name}:{node.lineno} {node.func.value.id}.{node.func.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id in imported
            and node.func.attr.startswith("_") and not node.func.attr.startswith("__")]


def test_the_durable_runner_calls_no_private_method_of_the_runner() -> None:
    found = [c for p in sorted((SRC / "durable").glob("*.py"))
             for c in _private_calls_across_packages(p)]
    assert found == []
