"""What a run on a memory session does once, counted: its lease is taken and given back without
an await (no ``acquire_lease``/``release_lease`` coroutine), while a store with a shared lease
record still goes through them; the log gets one append per run."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, RunContext, Runner, tool
from relayrace.agents.delegation import run_child
from relayrace.core.exceptions import SessionInUseError, UserError
from relayrace.core.usage import Usage
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.sessions.base import _leases
from relayrace.testing import FunctionModel, text


def _chat() -> Agent[Any]:
    return Agent("a0", instructions="Chat.", model=FunctionModel(lambda r: text("ok")))


class _Counted:
    """Counts the lease coroutines and appends a session object goes through."""

    def __init__(self, session: Any) -> None:
        self.calls = {"acquire_lease": 0, "release_lease": 0, "append": 0}
        for name in self.calls:
            real = getattr(session, name)

            async def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
                self.calls[_name] += 1
                return await _real(*args)

            setattr(session, name, counted)


async def test_a_memory_run_takes_its_lease_without_the_lease_coroutines() -> None:
    session = MemorySession()
    counted = _Counted(session)
    for turn in range(3):
        result = await Runner.run(_chat(), f"t{turn}", session=session)
        assert result.final_output == "ok"
    assert counted.calls == {"acquire_lease": 0, "release_lease": 0, "append": 3}
    assert session not in _leases  # given back


async def test_a_sqlite_run_still_takes_its_lease_row(tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "s.db")
    counted = _Counted(session)
    for turn in range(3):
        await Runner.run(_chat(), f"t{turn}", session=session)
    # The input is written before the model is called, then the answer and the run's end.
    assert counted.calls == {"acquire_lease": 3, "release_lease": 3, "append": 6}


async def test_a_held_memory_lease_still_refuses_or_waits() -> None:
    session = MemorySession()
    lease = session.lease()
    assert lease.take()
    try:
        with pytest.raises(SessionInUseError):
            await Runner.run(_chat(), "x", session=session)
    finally:
        lease.give_back()
    assert (await Runner.run(_chat(), "y", session=session)).final_output == "ok"


class _CountedLock:
    """Stands in for the process's lease lock, counting who takes it."""

    def __init__(self) -> None:
        self.taken = 0

    def __enter__(self) -> None:
        self.taken += 1

    def __exit__(self, *exc_info: object) -> None:
        pass


async def test_a_memory_run_takes_no_lock_for_its_lease(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    lock = _CountedLock()
    monkeypatch.setattr("relayrace.sessions.base._leases_lock", lock)
    session = MemorySession()
    for turn in range(3):
        assert (await Runner.run(_chat(), f"t{turn}", session=session)).final_output == "ok"
    assert lock.taken == 0
    assert session not in _leases
    # A store whose lease key is its own (a file and an id) still takes the lock.
    await Runner.run(_chat(), "x", session=SQLiteSession("s", tmp_path / "s.db"))
    assert lock.taken == 2  # held, then given back


def test_a_session_with_its_own_equality_takes_its_lease_the_locked_way() -> None:
    class Equal(MemorySession):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, Equal) and other.session_id == self.session_id

        __hash__ = MemorySession.__hash__  # type: ignore[assignment]

        def _lease_key(self) -> Any:
            return ("equal", self.session_id)

    assert MemorySession._lease_here and not Equal._lease_here
    assert not Equal("a").lease().take()  # then entered with ``async with``


def test_a_request_adds_its_tokens_to_its_model_and_to_its_agent_under_that_model() -> None:
    from relayrace.core.usage import RunUsage

    usage = RunUsage()
    used = Usage(input_tokens=3, output_tokens=2)
    local = Usage()
    usage.count_request("a0", "m", used)
    usage.count_request("a0", "m", Usage(input_tokens=3, output_tokens=2, cache_read_tokens=1),
                        local)
    assert usage.per_model["m"] == Usage(requests=2, input_tokens=6, output_tokens=4,
                                         cache_read_tokens=1)
    assert usage.per_agent_model["a0"]["m"] == usage.per_model["m"]
    # The requests themselves are counted when admitted (``Budget.open_request``); the tokens
    # go to the total, the agent and a delegated loop's own tally here.
    assert usage.total == usage.per_agent["a0"] == Usage(input_tokens=6, output_tokens=4,
                                                         cache_read_tokens=1)
    assert local == Usage(input_tokens=3, output_tokens=2, cache_read_tokens=1)


async def test_a_memory_run_leaves_no_cycles_for_the_garbage_collector() -> None:
    # A run's state (its loop and the loop's child runner, a session and its store) is freed
    # by reference counting when the run ends; cycles would leave it all to the collector,
    # which then ran every few runs of a busy process.
    agent = _chat()
    await Runner.run(agent, "warm", session=MemorySession())
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            session = MemorySession()
            for turn in range(3):
                assert (await Runner.run(agent, f"t{turn}", session=session)).final_output == "ok"
        del session
        assert gc.collect() == 0
    finally:
        gc.enable()


async def test_a_child_started_after_its_run_ended_is_refused() -> None:
    kept: list[RunContext[Any]] = []

    @tool
    def keep(ctx: RunContext[Any]) -> str:
        """Keep the context."""
        kept.append(ctx)
        return "kept"

    def answer(request: Any) -> Any:
        from relayrace.testing import tool_call

        done = any(m.role == "tool" for m in request.messages)
        return text("ok") if done else tool_call("keep", {})

    agent = Agent("a0", instructions="Chat.", model=FunctionModel(answer), tools=[keep])
    assert (await Runner.run(agent, "go")).final_output == "ok"
    with pytest.raises(UserError, match="the run whose context started it has ended"):
        await run_child(kept[0], _chat(), "late")


async def test_an_agent_that_ran_is_freed_once_dropped() -> None:
    # The engine keeps what it derives from an agent (its offered tools, whether its tree
    # has memory) on the agent: a map keyed by agents kept every agent ever run alive.
    import weakref

    agent = _chat()
    assert (await Runner.run(agent, "x", session=MemorySession())).final_output == "ok"
    gone = weakref.ref(agent)
    del agent
    gc.collect()
    assert gone() is None
