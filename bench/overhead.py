"""Framework overhead of relayrace, on zero-latency scripted models, with tracing on.

    python3 dev bench            # or: .venv/bin/python bench/overhead.py [--quick]

Prints microseconds of overhead per model turn (50- and 500-turn tool loops), per handoff
(a chain of 10 agents), the wall time and memory of 1,000 concurrent 3-turn sessions, and
the delegation figures (8 children whose model sleeps 50 ms; context growth per delegation).
Each figure is the median of several repetitions, with the best and the spread (min-max).
A repetition of a scenario shorter than a few milliseconds runs it several times (each on
freshly built agents) and takes the mean, so one cold start after a garbage collection does
not stand for the steady state.

The last column reads the machine's speed around each scenario: microseconds per iteration of
a fixed pure-Python workload, before and after. On a shared VM whose speed changes from one
minute to the next, it says which state a figure was measured in (see bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from relayrace import Agent, Runner, tool
from relayrace.models import ModelRequest
from relayrace.sessions import MemorySession, SQLiteSession
from relayrace.testing import FunctionModel, ScriptedModel, Turn, text, tool_call
from relayrace.tracing import InMemoryTraceProcessor, set_trace_processors

TRACES = InMemoryTraceProcessor()


@tool
async def step(i: int) -> str:
    """One step of work.

    Args:
        i: The step number.
    """
    return f"step {i} done"


async def tool_loop(turns: int) -> float:
    """Seconds for one agent making ``turns`` tool calls, then answering."""
    model = ScriptedModel([tool_call("step", {"i": i}) for i in range(turns)] + [text("done")])
    agent = Agent("worker", instructions="Work.", model=model, tools=[step])
    start = time.perf_counter()
    result = await Runner.run(agent, "go", max_turns=turns + 1)
    elapsed = time.perf_counter() - start
    assert result.final_output == "done" and len(result.tool_results) == turns
    return elapsed


async def handoff_chain(length: int = 10) -> float:
    """Seconds for agent 0 handing off to 1, ..., to ``length``, which answers."""
    turns: list[Turn] = [tool_call(f"transfer_to_a{i}", {}) for i in range(1, length + 1)]
    model = ScriptedModel([*turns, text("answer")])
    agent: Agent[None] = Agent(f"a{length}", instructions="Answer.", model=model)
    for i in range(length - 1, -1, -1):
        agent = Agent(f"a{i}", instructions="Route.", model=model, sub_agents=[agent])
    start = time.perf_counter()
    result = await Runner.run(agent, "go")
    elapsed = time.perf_counter() - start
    assert result.last_agent.name == f"a{length}" and len(result.handoffs) == length
    return elapsed


def _chat_model() -> FunctionModel:
    # A load run: the double counts tokens but need not keep its 3,000 requests (``record``).
    return FunctionModel(lambda request: f"reply {len(request.messages)}", record=False)


async def many_sessions(count: int, db: Path | None = None) -> float:
    """Seconds for ``count`` concurrent independent 3-turn conversations."""
    agent = Agent("chat", instructions="Chat.", model=_chat_model())

    async def conversation(n: int) -> None:
        session = SQLiteSession(f"s{n}", db) if db else MemorySession()
        for turn in range(3):
            result = await Runner.run(agent, f"message {turn}", session=session)
            assert result.final_output == f"reply {2 * turn + 1}"

    start = time.perf_counter()
    await asyncio.gather(*(conversation(n) for n in range(count)))
    return time.perf_counter() - start


async def fan_out(children: int = 8, delay: float = 0.05) -> float:
    """Seconds for a parent calling ``children`` agent tools in one turn; each model sleeps."""

    def child_turn(request: ModelRequest) -> Turn:
        return f"<handoff>\nSUMMARY: finding for {request.agent}\n</handoff>"

    kids = [Agent(f"child{i}", instructions="Research.",
                  model=FunctionModel(child_turn, delay=delay)) for i in range(children)]
    parent_model = ScriptedModel([
        [tool_call(f"child{i}", {"query": f"topic {i}"}) for i in range(children)],
        text("combined"),
    ])
    parent = Agent("parent", instructions="Delegate.", model=parent_model,
                   tools=[k.as_tool() for k in kids])
    start = time.perf_counter()
    result = await Runner.run(parent, "go")
    elapsed = time.perf_counter() - start
    assert len(result.delegations) == children and all(d.ok for d in result.delegations)
    return elapsed


@tool
async def read_page(page: int) -> str:
    """Read one page of the incident log.

    Args:
        page: The page number.
    """
    return (f"Page {page}: replica eu-west-{page % 3} reported replication lag of "
            f"{40 + page} s against a threshold of 5 s; the primary was healthy, disk I/O "
            "normal, and the lag grew while a bulk export ran. " * 3)


async def context_growth(child_turns: int = 20) -> tuple[int, int]:
    """Tokens the parent's context grows per delegation, against the child's transcript.

    The child reads ``child_turns - 1`` pages of an incident log, then reports.
    """
    turns: list[Turn] = [tool_call("read_page", {"page": i}) for i in range(child_turns - 1)]
    turns.append(text("The export saturates the eu-west replicas.\n<handoff>\nSUMMARY: eu-west "
                      "replicas lag 40-60 s while the bulk export runs.\nKEY_FINDINGS:\n- lag "
                      "grows with the export\n- primary healthy\nCONFIDENCE: high - seen on "
                      "every page\n</handoff>"))
    child = Agent("researcher", instructions="Research.", model=ScriptedModel(turns),
                  tools=[read_page])
    parent_model = ScriptedModel([tool_call("researcher", {"query": "why lag?"}), text("ok")])
    parent = Agent("parent", instructions="Delegate.", model=parent_model,
                   tools=[child.as_tool()])
    result = await Runner.run(parent, "go", max_turns=5)
    delegated = result.delegations[0]
    child_session = result.session.child_sessions[0]  # type: ignore[attr-defined]
    transcript = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls)
                     for m in (await child_session.view()).messages)
    report_chars = len(result.tool_results[0].message.content)
    assert delegated.ok
    return (report_chars + 3) // 4, (transcript + 3) // 4


class _Probe:
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b


def machine_speed(n: int = 4000) -> float:
    """Microseconds per iteration of a fixed pure-Python workload (best of 3): lower is faster."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for i in range(n):
            _Probe(i, i + 1).a  # noqa: B018 - the read is the workload
        best = min(best, time.perf_counter() - start)
    return best / n * 1e6


def measure(fn: Callable[[], Awaitable[float]], repeat: int, batch: int = 1) -> list[float]:
    """Seconds per run of ``fn`` (which times its own work): one value per repetition."""

    async def runs() -> float:
        total = 0.0
        for _ in range(batch):
            total += await fn()
            TRACES.clear()
        return total / batch

    out = []
    for _ in range(repeat):
        TRACES.clear()
        gc.collect()
        out.append(asyncio.run(runs()))
    return out


def peak_memory(fn: Callable[[], Awaitable[float]]) -> float:
    """Peak traced memory of one run, in MiB (measured apart: tracing slows the run)."""
    TRACES.clear()
    gc.collect()
    tracemalloc.start()
    asyncio.run(fn())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def row(name: str, run: Callable[[], list[float]], scale: float, unit: str,
        target: str) -> str:
    """One table row: ``run()``'s samples scaled, with the machine's speed around the run."""
    before = machine_speed()
    values = [s * scale for s in run()]
    after = machine_speed()
    med, best = statistics.median(values), min(values)
    return (f"| {name} | {med:,.1f} {unit} | {best:,.1f} {unit} | "
            f"{best:,.1f}–{max(values):,.1f} | {target} | {before:.2f} / {after:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 3 if args.quick else 9
    set_trace_processors([TRACES])
    rows = ["| scenario | median | best | spread | target | machine µs/iter before / after |",
            "|---|---|---|---|---|---|"]
    for turns, batch in ((50, 5), (500, 1)):
        rows.append(row(f"tool loop, {turns} turns: per model turn",
                        lambda t=turns, b=batch: measure(  # type: ignore[misc]
                            lambda: tool_loop(t), repeat, b),
                        1e6 / (turns + 1), "µs", "≤ 50 µs"))
    rows.append(row("handoff chain of 10: per handoff",
                    lambda: measure(handoff_chain, repeat, batch=20), 1e6 / 10, "µs", "≤ 50 µs"))
    rows.append(row("1,000 concurrent 3-turn sessions (memory)",
                    lambda: measure(lambda: many_sessions(1000), repeat), 1e3, "ms", "≤ 100 ms"))
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(row("1,000 concurrent 3-turn sessions (SQLite file)",
                        lambda: [asyncio.run(many_sessions(1000, Path(tmp) / f"s{i}.db"))
                                 for i in range(repeat)], 1e3, "ms", "—"))
    mem = peak_memory(lambda: many_sessions(1000))
    rows.append(f"| 1,000 sessions: peak traced memory | {mem:,.1f} MiB | — | — | — | — |")
    rows.append(row("fan-out to 8 children, model 50 ms each: wall",
                    lambda: measure(fan_out, repeat), 1e3, "ms", "≤ 52 ms"))
    report_tokens, transcript_tokens = asyncio.run(context_growth())
    rows.append(f"| parent context growth per delegation | {report_tokens} tokens (the report) | "
                f"— | child's 20-turn transcript: {transcript_tokens} tokens | — | — |")
    print(f"relayrace overhead — Python {sys.version.split()[0]}, tracing on, "
          f"{repeat} repetitions\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
