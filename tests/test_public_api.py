"""The public API: exports, the error hierarchy, and strict configuration objects."""

from __future__ import annotations

import importlib
import inspect

import pytest

import relayrace
import relayrace.core.exceptions


def test_all_is_sorted() -> None:
    assert relayrace.__all__ == sorted(relayrace.__all__)


def test_all_has_no_duplicates() -> None:
    assert len(relayrace.__all__) == len(set(relayrace.__all__))


def test_every_name_in_all_is_importable() -> None:
    module = importlib.import_module("relayrace")
    for name in relayrace.__all__:
        assert hasattr(module, name), name
        exec(f"from relayrace import {name}", {})


def _public_exceptions() -> list[type[BaseException]]:
    return [
        obj for name, obj in vars(relayrace.core.exceptions).items()
        if inspect.isclass(obj) and issubclass(obj, BaseException) and not name.startswith("_")
        and obj.__module__ == relayrace.core.exceptions.__name__
    ]


def test_exception_module_exports() -> None:
    found = _public_exceptions()
    assert len(found) >= 10
    assert sorted(e.__name__ for e in found) == sorted(relayrace.core.exceptions.__all__)


@pytest.mark.parametrize("exc", _public_exceptions(), ids=lambda e: e.__name__)
def test_every_public_exception_is_exported_and_rooted(exc: type[BaseException]) -> None:
    assert exc.__name__ in relayrace.__all__
    assert getattr(relayrace, exc.__name__) is exc
    assert issubclass(exc, relayrace.RelayraceError)


def test_documented_imports() -> None:
    from relayrace import Agent, Runner, RunResult, TransferPolicy, handoff, tool
    from relayrace.sessions import MemorySession, SQLiteSession
    from relayrace.testing import FunctionModel, ScriptedModel, text, tool_call

    for obj in (Agent, Runner, RunResult, TransferPolicy, handoff, tool, MemorySession,
                SQLiteSession, FunctionModel, ScriptedModel, text, tool_call):
        assert obj is not None
    assert callable(Runner.run) and callable(Runner.run_sync) and callable(Runner.stream)


def test_transfer_policy_rejects_misspelled_option() -> None:
    from relayrace import TransferPolicy

    with pytest.raises(TypeError, match="to_parnet"):
        TransferPolicy(to_parnet=True)  # type: ignore[call-arg]


def test_transfer_policy_is_keyword_only() -> None:
    from relayrace import TransferPolicy

    with pytest.raises(TypeError):
        TransferPolicy(True)  # type: ignore[misc]


def test_agent_rejects_misspelled_option() -> None:
    from relayrace import Agent

    with pytest.raises(TypeError, match="toolz"):
        Agent("a", instructions="x", toolz=[])  # type: ignore[call-arg]


def test_agent_options_after_name_are_keyword_only() -> None:
    from relayrace import Agent

    with pytest.raises(TypeError):
        Agent("a", "instructions")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("factory", "bad"),
    [
        ("handoff", "input_filtre"),
        ("tool", "sequentail"),
    ],
)
def test_builders_reject_misspelled_options(factory: str, bad: str) -> None:
    from relayrace import Agent

    fn = getattr(relayrace, factory)
    with pytest.raises(TypeError, match=bad):
        if factory == "handoff":
            fn(Agent("a", instructions="x"), **{bad: None})
        else:
            fn(**{bad: True})


async def test_runner_rejects_misspelled_option() -> None:
    from relayrace import Agent, Runner
    from relayrace.testing import ScriptedModel, text

    agent = Agent("a", instructions="x", model=ScriptedModel([text("x")]))
    with pytest.raises(TypeError, match="max_turn"):
        await Runner.run(agent, "hi", max_turn=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="contxt"):
        Runner.run_sync(agent, "hi", contxt={})


def test_version() -> None:
    assert isinstance(relayrace.__version__, str) and relayrace.__version__
