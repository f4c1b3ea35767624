"""Time travel: `Session.fork(at=seq)` on every store (memory, SQLite, PostgreSQL). The fork's
log equals its origin's up to the fork point and diverges after it; the link to the origin is
stored and listed, and survives a restart."""

from __future__ import annotations

import pytest

from conftest import messages_of
from relayrace import Runner, UserError
from relayrace.core.events import dump_events
from relayrace.sessions import SessionStore
from test_store_conformance import restarted, talker


async def test_a_fork_keeps_the_log_up_to_its_point_and_diverges_after(
        store: SessionStore) -> None:
    origin = store.session("origin", owner="k1")
    await Runner.run(talker("first done"), "one", session=origin)
    at = len(await origin.get_events())  # the end of the first run
    await Runner.run(talker("second done"), "two", session=origin)
    before = await origin.get_events()

    fork = await origin.fork(at=at)
    assert fork.session_id != "origin"
    assert dump_events(await fork.get_events()) == dump_events(before[:at])
    await Runner.run(talker("other done"), "another two", session=fork)
    forked = await fork.get_events()
    assert dump_events(forked[:at]) == dump_events(before[:at])  # equal up to the fork point
    assert dump_events(forked[at:]) != dump_events(before[at:])  # and diverges after it
    said = [m.content for m in messages_of(forked) if m.role == "user"]
    assert said == ["one", "another two"]
    assert dump_events(await origin.get_events()) == dump_events(before)  # origin untouched

    again = await restarted(store)
    info = await again.get_info(fork.session_id)
    assert info is not None
    assert (info.forked_from, info.forked_at, info.owner) == ("origin", at, "k1")
    listed = {i.session_id: i for i in await again.list_sessions()}
    assert listed[fork.session_id].forked_from == "origin"
    assert listed["origin"].forked_from is None
    assert await again.delete(fork.session_id)
    assert await again.get_info(fork.session_id) is None
    assert await again.get_info("origin") is not None
    if again is not store:
        await again.aclose()


async def test_a_fork_point_outside_the_log_is_refused(store: SessionStore) -> None:
    origin = store.session("short")
    await Runner.run(talker(), "one", session=origin)
    size = len(await origin.get_events())
    for bad in (0, size + 1, -1):
        with pytest.raises(UserError, match=rf"event seq from 1 to {size}"):
            await origin.fork(at=bad)


async def test_a_fork_may_edit_the_messages_it_copies(store: SessionStore) -> None:
    origin = store.session("edited-origin")
    await Runner.run(talker("first done"), "one", session=origin)
    events = await origin.get_events()
    seqs = {e.kind: i for i, e in enumerate(events, 1)}  # run_started, message, ...
    said = next(i for i, e in enumerate(events, 1) if e.kind == "message"
                and e.message.role == "user")
    fork = await origin.fork(at=len(events), edits={said: "one, said otherwise"})
    copied = await fork.get_events()
    assert copied[said - 1].message.content == "one, said otherwise"
    assert dump_events(copied[:said - 1]) == dump_events(events[:said - 1])
    assert dump_events(copied[said:]) == dump_events(events[said:])
    assert dump_events(await origin.get_events()) == dump_events(events)  # origin untouched
    for bad in ({seqs["run_started"]: "x"}, {len(events) + 1: "x"}, {said: 3}):
        with pytest.raises(UserError, match="maps the seqs of messages"):
            await origin.fork(at=len(events), edits=bad)
