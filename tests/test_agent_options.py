"""`Agent`'s options are declared once (``AgentOptions``): the constructor, ``clone`` and the
static types all follow that one list, and an unknown option is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mypy import api

from relayrace import Agent, Compression, Memory, Permissions, UnknownOptionError, UserError
from relayrace.agents.agent import AgentOptions
from relayrace.agents.handoffs import TransferPolicy
from relayrace.testing import ScriptedModel

# A value other than the default for every option that clone() copies as given.
CHANGED: dict[str, Any] = {
    "description": "d", "model": ScriptedModel([]), "handoff_tools": "single",
    "transfer_policy": TransferPolicy(to_parent=False), "max_turns": 3,
    "model_settings": {"temperature": 0.1}, "mode": "task", "pattern": "react",
    "max_handoffs": 2, "timeout": 5.0, "max_result_tokens": 100,
    "compression": Compression(max_tokens=10_000), "memory": Memory(),
    "permissions": Permissions(deny=["x"]), "sticky": True, "output_mode": "tool",
    "output_retries": 4,
}


def test_every_declared_option_is_accepted_and_kept_by_clone() -> None:
    declared = set(AgentOptions.__annotations__)
    assert {"description", "sub_agents", "specialists", "sticky", "output_retries"} <= declared
    agent = Agent("a", instructions="x", **CHANGED)
    copy = agent.clone()
    for name, value in CHANGED.items():
        assert getattr(copy, name) == value, name


def test_an_unknown_option_is_refused_by_name() -> None:
    with pytest.raises(UnknownOptionError, match=r"'a'.*unknown option\(s\) \['colour'\].*sticky"):
        Agent("a", instructions="x", colour="blue")  # type: ignore[call-arg]
    with pytest.raises(UserError, match=r"\['colour'\]"):
        Agent("a", instructions="x").clone(colour="blue")


def test_the_options_are_typed_for_callers(tmp_path: Path) -> None:
    source = tmp_path / "uses.py"
    source.write_text(
        "from relayrace import Agent\n"
        "Agent('a', instructions='x', sticky=True, max_turns=2)\n"
        "Agent('b', instructions='x', max_turns='two')\n"
        "Agent('c', instructions='x', colour='blue')\n")
    out, _, status = api.run(["--strict", "--no-error-summary", str(source)])
    errors = [line for line in out.splitlines() if ": error: " in line]
    assert status == 1, out
    assert {line.split("uses.py:")[1].split(":")[0] for line in errors} == {"3", "4"}, out
    assert any("uses.py:4:" in e and '"colour"' in e for e in errors), out
