"""Per-handoff cost, warm, side by side: relayrace against LangGraph's ``StateGraph``.

    python3 bench/handoff_side.py [--rounds 3] [--slices 20] [--runs 3] [--python PY]

A chain of agents, each making one fake model call that hands over to the next. Per handoff is
differential: (time of a run of the 20-agent chain - time of a run of the 10-agent chain) / 10,
so what a run costs once (its state, its session, the graph's start) cancels out. Each side runs
in a warm worker process of its own, built once and run once before timing; in each round the
sides take turns, ``--slices`` times each, a slice being ``--runs`` runs of each chain size
(sizes alternating; relayrace twenty times as many, its runs being short, so a slice takes a
fraction of a second on either side). This machine's speed flips within seconds: slices that
short and that interleaved give both sides the same mix of fast and slow moments, which a
side timed whole after the other does not. The ratio is taken per round (fresh workers each
round), and the median of the rounds reported. The sides run in the peers' environment
(``bench/compare/.venv``, made by ``bench/compare/run.py``; ``--python`` names another) with
this checkout's ``src/`` first on the path.

- relayrace: ``bench/instructions.py``'s chain: ``Agent``s a0..aN with ``sub_agents``, a
  ``FunctionModel(record=False)`` that calls ``transfer_to_a{i+1}``, ``Runner.run`` on a fresh
  ``MemorySession`` each run. Each run is checked: N handoffs, the last agent answered.
- LangGraph: a ``StateGraph`` over ``MessagesState`` with one node per agent; each node calls a
  minimal ``BaseChatModel`` (``ainvoke``, so LangChain's callback path runs as it does for a
  real model) on the conversation so far, which answers with a ``transfer_to_a{i+1}`` tool
  call; the node appends that message and the tool's answer and hands over. Two ways of
  handing over, both measured in the same process: ``Command(goto=...)`` returned from the node
  (LangGraph's documented multi-agent handoff) and a conditional edge that reads the last tool
  call. The faster is the LangGraph figure. Each run is checked: the last node saw the whole
  history (2 messages per handoff plus the question).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS = HERE / "compare" / ".venv" / "bin" / "python"
SIZES = (10, 20)


def relayrace_chain(size: int) -> Any:
    """The run of one chain: a0 hands to a1 ... to a{size}, which answers (checked)."""
    from relayrace import Agent, Runner
    from relayrace.sessions import MemorySession
    from relayrace.testing import FunctionModel, text, tool_call

    def chain(req: Any) -> Any:
        i = int(req.agent[1:])
        return tool_call(f"transfer_to_a{i + 1}", {"reason": "next"}) if i < size else text("done")

    agent = Agent(f"a{size}", instructions="x", model=FunctionModel(chain, record=False))
    for i in range(size - 1, -1, -1):
        agent = Agent(f"a{i}", instructions="x", model=FunctionModel(chain, record=False),
                      sub_agents=[agent])

    async def run() -> None:
        result = await Runner.run(agent, "go", session=MemorySession(), max_turns=size + 5,
                                  max_handoffs=size + 5)
        if len(result.handoffs) != size or result.last_agent.name != f"a{size}":
            raise RuntimeError(f"relayrace ran {len(result.handoffs)} handoffs, not {size}")
    return run


def langgraph_chain(size: int, way: str) -> Any:
    """The run of one ``StateGraph`` chain handing over by ``Command`` or a conditional edge."""
    for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        os.environ.pop(var, None)
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.types import Command

    class FakeChat(BaseChatModel):
        """Answers agent a{i} with a call of transfer_to_a{i+1}, the last with text."""

        index: int

        @property
        def _llm_type(self) -> str:
            return "bench-fake"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            raise RuntimeError("the benchmark calls the model asynchronously")

        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            if len(messages) != 1 + 2 * self.index:  # the target sees the whole history
                raise RuntimeError(f"a{self.index} saw {len(messages)} messages")
            if self.index < size:
                message = AIMessage(content="", tool_calls=[{
                    "name": f"transfer_to_a{self.index + 1}", "args": {"reason": "next"},
                    "id": f"call_{self.index}"}])
            else:
                message = AIMessage(content="done")
            return ChatResult(generations=[ChatGeneration(message=message)])

    def node(i: int) -> Any:
        model = FakeChat(index=i)

        async def agent(state: Any) -> Any:
            reply = await model.ainvoke(state["messages"])
            if not reply.tool_calls:
                return {"messages": [reply]}
            call = reply.tool_calls[0]
            answer = ToolMessage(content=f"Transferred to a{i + 1}", tool_call_id=call["id"],
                                 name=call["name"])
            update = {"messages": [reply, answer]}
            if way == "command":
                return Command(goto=call["name"].removeprefix("transfer_to_"), update=update)
            return update
        return agent

    def route(state: Any) -> str:
        last = state["messages"][-1]
        return last.name.removeprefix("transfer_to_") if isinstance(last, ToolMessage) else END

    graph = StateGraph(MessagesState)
    for i in range(size + 1):
        if way == "command" and i < size:
            graph.add_node(f"a{i}", node(i), destinations=(f"a{i + 1}",))
        else:
            graph.add_node(f"a{i}", node(i))
        if way == "edge" and i < size:
            graph.add_conditional_edges(f"a{i}", route, [f"a{i + 1}", END])
    graph.add_edge(START, "a0")
    graph.add_edge(f"a{size}", END)
    app = graph.compile()
    config = {"recursion_limit": size + 10}

    async def run() -> None:
        state = await app.ainvoke({"messages": [HumanMessage(content="go")]}, config)
        if len(state["messages"]) != 2 + 2 * size:
            raise RuntimeError(f"LangGraph's state has {len(state['messages'])} messages")
    return run


async def timed(runs: dict[int, Any], repeat: int) -> dict[int, float]:
    """Seconds spent on ``repeat`` runs of each size, sizes alternating."""
    spent = dict.fromkeys(runs, 0.0)
    for _ in range(repeat):
        for size, run in runs.items():
            start = time.perf_counter()
            await run()
            spent[size] += time.perf_counter() - start
    return spent


def per_handoff(seconds: dict[int, float], runs: int) -> float:
    """Microseconds per handoff: the difference between the two chain sizes, per run."""
    short, long = SIZES
    return (seconds[long] - seconds[short]) / runs / (long - short) * 1e6


def ways_of(name: str) -> dict[str, dict[int, Any]]:
    """The chains of one side (for LangGraph, one set per way of handing over)."""
    if name == "relayrace":
        return {"relayrace": {n: relayrace_chain(n) for n in SIZES}}
    return {f"langgraph-{way}": {n: langgraph_chain(n, way) for n in SIZES}
            for way in ("command", "edge")}


def serve(name: str, runs: int) -> None:
    """A worker: one side, warm, timing one slice (``runs`` runs of each size and way) for
    each line it reads, answering with the seconds spent, by way and size."""
    ways = ways_of(name)
    loop = asyncio.new_event_loop()
    for runs_of in ways.values():  # warm: first-time paths and caches are not measured
        loop.run_until_complete(timed(runs_of, 1))
    print("ready", flush=True)
    for _ in sys.stdin:
        print(json.dumps({way: loop.run_until_complete(timed(runs_of, runs))
                          for way, runs_of in ways.items()}), flush=True)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--slices", type=int, default=20,
                        help="turns each side takes per round, the sides alternating")
    parser.add_argument("--runs", type=int, default=3,
                        help="runs of each chain size per slice (relayrace: 20 times as many)")
    parser.add_argument("--python", default=str(PEERS), help="the peers' Python")
    parser.add_argument("--side", choices=("relayrace", "langgraph"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    # A relayrace run is short: twenty times the runs make its slice as long as LangGraph's
    # (a fraction of a second each), so both sides see the machine's speed flip alike.
    runs = {"relayrace": 20 * args.runs, "langgraph": args.runs}
    if args.side:  # a worker: one side, one fresh process
        serve(args.side, runs[args.side])
        return
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    figures: dict[str, list[float]] = {}
    for _ in range(args.rounds):  # fresh workers each round
        workers = {name: subprocess.Popen(
            [args.python, str(Path(__file__).resolve()), "--side", name, "--runs",
             str(args.runs)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for name in ("relayrace", "langgraph")}
        spent: dict[str, dict[str, float]] = {}
        try:
            for worker in workers.values():
                assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
            for _ in range(args.slices):
                for worker in workers.values():
                    assert worker.stdin is not None and worker.stdout is not None
                    worker.stdin.write("go\n")
                    worker.stdin.flush()
                    for way, by_size in json.loads(worker.stdout.readline()).items():
                        total = spent.setdefault(way, {})
                        for size, seconds in by_size.items():
                            total[size] = total.get(size, 0.0) + seconds
        finally:
            for worker in workers.values():
                assert worker.stdin is not None
                worker.stdin.close()
                if worker.wait(timeout=60):
                    raise RuntimeError(f"a worker failed (exit {worker.returncode})")
        for way, total in spent.items():
            side = "relayrace" if way == "relayrace" else "langgraph"
            figures.setdefault(way, []).append(per_handoff(
                {int(size): seconds for size, seconds in total.items()},
                runs[side] * args.slices))
    ratios = {way: [other / mine for mine, other in zip(figures["relayrace"], values, strict=True)]
              for way, values in figures.items() if way != "relayrace"}
    print(f"per handoff, warm (chains of {SIZES[0]} and {SIZES[1]}; {args.rounds} rounds of "
          f"{args.slices} slices a side, alternating; a slice is {args.runs} runs of each size "
          f"(relayrace {runs['relayrace']}); load average {os.getloadavg()[0]:.1f})")
    print("| side | µs per handoff: median (min-max) | LangGraph / relayrace |")
    print("|---|---|---|")
    for way, values in figures.items():
        ratio = (f"{statistics.median(ratios[way]):.1f}x ({min(ratios[way]):.1f}-"
                 f"{max(ratios[way]):.1f})") if way in ratios else ""
        print(f"| {way} | {spread(values)} | {ratio} |")
    fastest = min(ratios, key=lambda way: statistics.median(figures[way]))
    print(f"LangGraph's fastest handoff here: {fastest.removeprefix('langgraph-')}; "
          f"ratio {statistics.median(ratios[fastest]):.1f}x")


if __name__ == "__main__":
    main()
