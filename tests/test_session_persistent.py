"""`Session.persistent`: whether a session's log outlives the process (the word `durable` is
for `relayrace.durable`'s runs; `Session.durable` stays as a deprecated alias)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayrace import Agent, Runner
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import FunctionModel, text


def test_a_session_says_whether_its_log_outlives_the_process(tmp_path: Path) -> None:
    assert SQLiteSession("s", tmp_path / "db.sqlite").persistent is True
    assert MemorySession().persistent is False


def test_the_old_name_still_answers_and_names_the_new_one(tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "db.sqlite")
    with pytest.warns(DeprecationWarning, match="Session.persistent"):
        assert session.durable is True
    memory = MemorySession()
    with pytest.warns(DeprecationWarning, match="Session.persistent"):
        memory.durable = True
    assert memory.persistent is True


async def test_a_subclass_that_says_durable_the_old_way_keeps_its_meaning(
        tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match="Session.persistent"):
        class Batched(SQLiteSession):
            durable = False  # written before the rename: write in batches, as memory does

    session = Batched("b", tmp_path / "db.sqlite")
    assert session.persistent is False
    seen: list[int] = []

    async def answer(request: object) -> object:
        seen.append(len(await SQLiteSession("b", tmp_path / "db.sqlite").get_events()))
        return text("ok")

    await Runner.run(Agent("a", instructions="x", model=FunctionModel(answer)), "hi",
                     session=session)
    assert seen == [0]  # not persistent: the input waits for the batch after the model call
