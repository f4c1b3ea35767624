"""Framework-neutral parts of the comparison: scenarios, scripted model turns and the checks.

Every framework adapter (``frameworks/<name>_impl.py``) drives its own fake model through a
*script* from this module: the fake model hands the script a tiny, O(1) view of the request it
got (how long the history is, the trailing tool results, the last user text) and turns the
action it gets back (``Text``, ``Calls`` or ``Handoff``) into the framework's native response.
Tools and child agents report to the same script. The script counts model calls, tool
executions and agent switches, checks that the framework fed back what it should have (the
previous tool result, the session history) and records timestamps; the worker fails the
measurement if any count or check is off, so a fast wrong run cannot win.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

# --------------------------------------------------------------------------------------------
# Scenarios and their sizes
# --------------------------------------------------------------------------------------------

#: scenario id -> (description, full-size params, --quick params)
SCENARIOS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "s1_50": (
        "S1 tool loop, 50 turns",
        {"turns": 50},
        {"turns": 20},
    ),
    "s1_500": (
        "S1 tool loop, 500 turns",
        {"turns": 500},
        {"turns": 100},
    ),
    "s2": (
        "S2 handoff chain a0 -> a10",
        {"handoffs": 10},
        {"handoffs": 10},
    ),
    "s3": (
        "S3 fan-out, 8 child agents x 50 ms",
        {"children": 8, "child_sleep": 0.05},
        {"children": 8, "child_sleep": 0.05},
    ),
    "s4_mem": (
        "S4 1,000 sessions x 3 turns, in-memory history",
        {"sessions": 1000, "turns": 3, "store": "memory"},
        {"sessions": 100, "turns": 3, "store": "memory"},
    ),
    "s4_sqlite": (
        "S4 1,000 sessions x 3 turns, SQLite session store",
        {"sessions": 1000, "turns": 3, "store": "sqlite"},
        {"sessions": 100, "turns": 3, "store": "sqlite"},
    ),
    # Like for like: relayrace at the durability LangGraph's AsyncSqliteSaver runs at (WAL
    # and SQLite's default synchronous=FULL: every commit syncs the disk).
    "s4_sqlite_full": (
        "S4 1,000 sessions x 3 turns, SQLite session store at synchronous=FULL",
        {"sessions": 1000, "turns": 3, "store": "sqlite_full"},
        {"sessions": 100, "turns": 3, "store": "sqlite_full"},
    ),
    "s4_postgres": (
        "S4 1,000 sessions x 3 turns, PostgreSQL session store",
        {"sessions": 1000, "turns": 3, "store": "postgres"},
        {"sessions": 100, "turns": 3, "store": "postgres"},
    ),
    "s5": (
        "S5 long context, 200 turns x 2 KB",
        {"turns": 200, "msg_bytes": 2048},
        {"turns": 40, "msg_bytes": 2048},
    ),
}

#: Small versions run once in the same process before the measured run, so lazy imports,
#: schema building and other first-call costs of every framework stay out of the figures.
WARMUP: dict[str, dict[str, Any]] = {
    "s1_50": {"turns": 3},
    "s1_500": {"turns": 3},
    "s2": {"handoffs": 2},
    "s3": {"children": 2, "child_sleep": 0.0},
    "s4_mem": {"sessions": 3, "turns": 2, "store": "memory"},
    "s4_sqlite": {"sessions": 3, "turns": 2, "store": "sqlite"},
    "s4_sqlite_full": {"sessions": 3, "turns": 2, "store": "sqlite_full"},
    "s4_postgres": {"sessions": 3, "turns": 2, "store": "postgres"},
    "s5": {"turns": 3, "msg_bytes": 2048},
}


class BenchError(AssertionError):
    """A framework did not do the scripted work (wrong count, missing history, ...)."""


# --------------------------------------------------------------------------------------------
# Actions a scripted model turn can take
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Text:
    """Answer with this text (a final answer)."""

    text: str


@dataclass(slots=True)
class Call:
    """One tool call. ``agent_tool`` calls pass ``query`` to a child agent exposed as a tool;
    the adapter puts it under whatever parameter name its framework's agent tool uses."""

    name: str
    args: dict[str, Any]
    id: str
    query: str | None = None


@dataclass(slots=True)
class Calls:
    """Call these tools, all in one model turn."""

    calls: list[Call]


@dataclass(slots=True)
class Handoff:
    """Hand the conversation to agent ``target`` with the framework's own handoff mechanism."""

    target: str
    id: str


Action = Text | Calls | Handoff


class Script(Protocol):
    async def model(
        self,
        agent: str,
        hist_len: int,
        tool_tail: list[str],
        last_user: str | None,
    ) -> Action: ...


# --------------------------------------------------------------------------------------------
# The record of one measured run
# --------------------------------------------------------------------------------------------


@dataclass
class Record:
    """What the fake models, tools and child agents saw during one run."""

    model_calls: int = 0
    tool_calls: int = 0
    calls_by_agent: Counter[str] = field(default_factory=Counter)
    agent_sequence: list[str] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    inflight: int = 0
    max_inflight: int = 0

    def fail(self, message: str) -> BenchError:
        self.errors.append(message)
        return BenchError(message)


def _agent_switches(sequence: list[str]) -> int:
    return sum(1 for a, b in zip(sequence, sequence[1:], strict=False) if a != b)


# --------------------------------------------------------------------------------------------
# S1: tool loop
# --------------------------------------------------------------------------------------------


class ToolLoop:
    """One agent ``a0``, tool ``lookup(i: int) -> str``: call k asks lookup(i=k) for k < turns,
    then answers "done". Call k > 0 must see the result of call k-1 ("r{k-1}") last."""

    final = "done"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.rec = Record()

    async def model(self, agent, hist_len, tool_tail, last_user):
        rec = self.rec
        k = rec.model_calls
        rec.model_calls = k + 1
        if k and (not tool_tail or tool_tail[-1] != f"r{k - 1}"):
            raise rec.fail(f"model call {k}: expected tool result r{k - 1} last, saw {tool_tail!r}")
        if k < self.turns:
            return Calls([Call("lookup", {"i": k}, f"call_{k}")])
        return Text(self.final)

    def lookup(self, i: int) -> str:
        """The tool body every framework's ``lookup`` tool calls."""
        rec = self.rec
        if i != rec.tool_calls:
            raise rec.fail(f"tool call {rec.tool_calls} got i={i}")
        rec.tool_calls += 1
        return f"r{i}"

    def check(self, final: Any, last_agent: str | None) -> dict[str, Any]:
        rec = self.rec
        counts = {"model_calls": rec.model_calls, "tool_calls": rec.tool_calls}
        expect = {"model_calls": self.turns + 1, "tool_calls": self.turns}
        _expect(rec, counts, expect)
        if str(final) != self.final:
            raise rec.fail(f"final output {final!r} != {self.final!r}")
        return counts


# --------------------------------------------------------------------------------------------
# S2: handoff chain
# --------------------------------------------------------------------------------------------


class HandoffChain:
    """Agents a0..a{n}; each hands off to the next with the framework's handoff, a{n} answers.
    Each agent has its own model, called exactly once, in order."""

    final = "done"

    def __init__(self, handoffs: int) -> None:
        self.n = handoffs
        self.rec = Record()

    async def model(self, agent, hist_len, tool_tail, last_user):
        rec = self.rec
        rec.model_calls += 1
        rec.calls_by_agent[agent] += 1
        rec.agent_sequence.append(agent)
        i = int(agent[1:])
        if i < self.n:
            return Handoff(f"a{i + 1}", f"handoff_{i}")
        return Text(self.final)

    def check(self, final: Any, last_agent: str | None) -> dict[str, Any]:
        rec = self.rec
        expected_seq = [f"a{i}" for i in range(self.n + 1)]
        counts = {
            "model_calls": rec.model_calls,
            "handoffs": _agent_switches(rec.agent_sequence),
        }
        _expect(rec, counts, {"model_calls": self.n + 1, "handoffs": self.n})
        if rec.agent_sequence != expected_seq:
            raise rec.fail(f"agent sequence {rec.agent_sequence} != {expected_seq}")
        if str(final) != self.final:
            raise rec.fail(f"final output {final!r} != {self.final!r}")
        if last_agent is not None and last_agent != f"a{self.n}":
            raise rec.fail(f"last agent {last_agent!r} != a{self.n}")
        return counts


# --------------------------------------------------------------------------------------------
# S3: fan-out
# --------------------------------------------------------------------------------------------


class Fanout:
    """Parent ``parent`` calls child agents child_0..child_{n-1} as tools, all in one turn, then
    answers "done" after seeing all n results "c{j}". Child j's model sleeps ``child_sleep`` and
    answers "c{j}"; it must have been given the query "q{j}"."""

    final = "done"

    def __init__(self, children: int, child_sleep: float) -> None:
        self.n = children
        self.sleep = child_sleep
        self.rec = Record()
        self.parent_calls = 0

    async def model(self, agent, hist_len, tool_tail, last_user):
        rec = self.rec
        rec.model_calls += 1
        rec.calls_by_agent[agent] += 1
        if agent == "parent":
            k = self.parent_calls
            self.parent_calls += 1
            if k == 0:
                return Calls(
                    [
                        Call(f"child_{j}", {"query": f"q{j}"}, f"fan_{j}", query=f"q{j}")
                        for j in range(self.n)
                    ]
                )
            want = sorted(f"c{j}" for j in range(self.n))
            if sorted(tool_tail) != want:
                raise rec.fail(f"parent turn 2 saw tool results {tool_tail!r}, want {want!r}")
            return Text(self.final)
        j = int(agent.rsplit("_", 1)[1])
        if last_user is None or last_user.strip() != f"q{j}":
            raise rec.fail(f"{agent} got input {last_user!r}, want 'q{j}'")
        rec.tool_calls += 1
        rec.inflight += 1
        rec.max_inflight = max(rec.max_inflight, rec.inflight)
        try:
            if self.sleep:
                await asyncio.sleep(self.sleep)
        finally:
            rec.inflight -= 1
        return Text(f"c{j}")

    def check(self, final: Any, last_agent: str | None) -> dict[str, Any]:
        rec = self.rec
        counts = {
            "model_calls": rec.model_calls,
            "parent_calls": self.parent_calls,
            "child_runs": rec.tool_calls,
            "max_concurrent_children": rec.max_inflight,
        }
        expect = {"model_calls": self.n + 2, "parent_calls": 2, "child_runs": self.n}
        _expect(rec, counts, expect)
        for j in range(self.n):
            if rec.calls_by_agent[f"child_{j}"] != 1:
                raise rec.fail(f"child_{j} ran {rec.calls_by_agent[f'child_{j}']} times")
        if str(final) != self.final:
            raise rec.fail(f"final output {final!r} != {self.final!r}")
        return counts


# --------------------------------------------------------------------------------------------
# S4 / S5: multi-turn conversations through a session / history mechanism
# --------------------------------------------------------------------------------------------


def user_message(session: int, turn: int, size: int = 0) -> str:
    """The user text of ``turn`` (1-based) in ``session``, padded to ``size`` bytes."""
    head = f"s{session} t{turn}|"
    if size > len(head):
        return head + "x" * (size - len(head))
    return head


def answer_for(session: int, turn: int) -> str:
    return f"a s{session} t{turn}"


class Chat:
    """Conversations: each user turn is one run of agent ``a0`` on a session, and the model
    answers ``answer_for(session, turn)``. The model checks that the history it is given grew
    by exactly two messages (the previous user message and answer) per turn, so a framework
    that drops the session history fails. With ``stamp`` it timestamps every model call."""

    def __init__(self, stamp: bool = False) -> None:
        self.rec = Record()
        self.base: dict[int, int] = {}
        self.stamp = stamp

    async def model(self, agent, hist_len, tool_tail, last_user):
        rec = self.rec
        if self.stamp:
            rec.stamps.append(time.perf_counter())
        rec.model_calls += 1
        if last_user is None:
            raise rec.fail(f"model call without a user message last (history {hist_len})")
        head = last_user[: last_user.find("|")]
        s, t = head.split(" ")
        session, turn = int(s[1:]), int(t[1:])
        if turn == 1:
            self.base[session] = hist_len
        else:
            want = self.base[session] + 2 * (turn - 1)
            if hist_len != want:
                raise rec.fail(
                    f"session {session} turn {turn}: history has {hist_len} messages, want {want}"
                )
        return Text(answer_for(session, turn))


class ChatSession(Protocol):
    async def send(self, text: str) -> Any: ...


class ChatApp(Protocol):
    """What an adapter builds for S4/S5: one agent and a store of sessions."""

    async def session(self, session_id: int) -> ChatSession: ...

    async def close(self) -> None: ...


async def run_conversation(
    app: ChatApp, rec: Record, session_id: int, turns: int, size: int
) -> None:
    session = await app.session(session_id)
    for turn in range(1, turns + 1):
        out = await session.send(user_message(session_id, turn, size))
        if str(out) != answer_for(session_id, turn):
            raise rec.fail(f"session {session_id} turn {turn}: output {out!r}")
    close = getattr(session, "close", None)
    if close is not None:
        await close()


def _expect(rec: Record, counts: dict[str, Any], expect: dict[str, Any]) -> None:
    bad = {k: (counts.get(k), v) for k, v in expect.items() if counts.get(k) != v}
    if bad:
        detail = ", ".join(f"{k}={got} (expected {want})" for k, (got, want) in bad.items())
        raise rec.fail(f"counts off: {detail}")


def median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    if not n:
        return float("nan")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def postgres_url() -> str:
    """The PostgreSQL server bench/durable.py started (``BENCH_POSTGRES_URL``)."""
    import os

    url = os.environ.get("BENCH_POSTGRES_URL")
    if not url:
        raise NotImplementedError("s4_postgres needs BENCH_POSTGRES_URL: run bench/durable.py")
    return url
