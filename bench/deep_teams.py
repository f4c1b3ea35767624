"""Deep teams (issue 43 item 3): the cost of a handoff against the depth of the chain it is
in, and of building a chain or a tree, in one run.

    .venv/bin/python bench/deep_teams.py [--quick] [--rounds 7] [--depths 10,30,100,300,1000]
                                         [--svg bench/deep_teams.svg]

A chain of N agents (a0 hands off to a1, ..., to a<N-1>, which answers) on a zero-latency
scripted model, tracing off: per handoff is the run's time over its N-1 handoffs. The depths
take turns within each round (a round runs each depth on a freshly built chain, the short
ones several times so each takes about as long as the deepest), and each figure is the median
of the rounds: CPU time of the process (what the work costs; the machine's other jobs move
it less than wall time) and wall time. The ratio to the shallowest depth is the figure to
read. Then the build: microseconds per agent for a chain of each depth and for a tree of
11,111 agents (10 children per agent, 4 levels). The plot (SVG, per-handoff CPU against depth,
log scale) is written to ``--svg``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from relayrace import Agent, Runner
from relayrace.testing import ScriptedModel, text, tool_call

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plot import line_chart  # noqa: E402 - bench/'s own helper, found via bench/


def chain(length: int, model: ScriptedModel | None = None) -> Agent[Any]:
    """a0 -> a1 -> ... -> a<length-1>, built from the leaf up."""
    agent: Agent[Any] = Agent(f"a{length - 1}", instructions="Answer.", model=model)
    for i in range(length - 2, -1, -1):
        agent = Agent(f"a{i}", instructions="Route.", model=model, sub_agents=[agent])
    return agent


def tree(fanout: int, depth: int) -> Agent[Any]:
    """A full tree, ``fanout`` children an agent, ``depth`` levels below the root."""
    level = [Agent(f"t{i}", instructions="Leaf.") for i in range(fanout ** depth)]
    for d in range(depth - 1, -1, -1):
        level = [Agent(f"t{d}_{i}", instructions="Route.",
                       sub_agents=level[i * fanout:(i + 1) * fanout])
                 for i in range(fanout ** d)]
    return level[0]


async def handoffs(length: int) -> tuple[float, float]:
    """(CPU seconds, wall seconds) per handoff of one run down a fresh chain of ``length``."""
    model = ScriptedModel([*(tool_call(f"transfer_to_a{i}", {}) for i in range(1, length)),
                           text("answered")])
    root = chain(length, model)
    cpu, wall = time.process_time(), time.perf_counter()
    result = await Runner.run(root, "go", max_turns=length + 1)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert result.final_output == "answered" and len(result.handoffs) == length - 1
    return cpu / (length - 1), wall / (length - 1)


def per_handoff(depths: list[int], rounds: int) -> dict[int, tuple[float, float]]:
    """Median (CPU, wall) seconds per handoff at each depth, the depths taking turns."""
    cpu: dict[int, list[float]] = {d: [] for d in depths}
    wall: dict[int, list[float]] = {d: [] for d in depths}
    deepest = max(depths)
    asyncio.run(handoffs(min(depths)))  # warm: the first run in a process compiles more
    for _ in range(rounds):
        for depth in depths:
            repeat = max(1, deepest // depth)
            gc.collect()
            runs = [asyncio.run(handoffs(depth)) for _ in range(repeat)]
            cpu[depth].append(statistics.mean(c for c, _ in runs))
            wall[depth].append(statistics.mean(w for _, w in runs))
    return {d: (statistics.median(cpu[d]), statistics.median(wall[d])) for d in depths}


def build_cost(depths: list[int], rounds: int) -> dict[str, float]:
    """Median seconds per agent to build a chain of each depth, and the 11,111-agent tree."""
    costs: dict[str, list[float]] = {f"chain of {d:,}": [] for d in depths}
    costs["tree of 11,111 (10 x 4 levels)"] = []
    for _ in range(rounds):
        for d in depths:
            gc.collect()
            start = time.process_time()
            chain(d)
            costs[f"chain of {d:,}"].append((time.process_time() - start) / d)
        gc.collect()
        start = time.process_time()
        root = tree(10, 4)
        costs["tree of 11,111 (10 x 4 levels)"].append((time.process_time() - start) / 11_111)
        assert sum(1 for _ in root.walk()) == 11_111
    return {k: statistics.median(v) for k, v in costs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds, depths up to 300")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--depths", default="10,30,100,300,1000")
    parser.add_argument("--svg", type=Path, default=Path(__file__).with_name("deep_teams.svg"))
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    rounds = args.rounds
    if args.quick:
        depths, rounds = [d for d in depths if d <= 300], 3
    load = os.getloadavg()
    print(f"deep teams: Python {sys.version.split()[0]}, {rounds} rounds, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the start\n")
    costs = per_handoff(depths, rounds)
    base_cpu, base_wall = costs[depths[0]]
    print("| chain depth | per handoff, CPU | x depth "
          f"{depths[0]} | per handoff, wall | x depth {depths[0]} |")
    print("|---|---|---|---|---|")
    for d in depths:
        c, w = costs[d]
        print(f"| {d:,} | {c * 1e6:.1f} µs | {c / base_cpu:.2f}x | {w * 1e6:.1f} µs | "
              f"{w / base_wall:.2f}x |")
    print("\n| built | CPU per agent |\n|---|---|")
    for name, cost in build_cost(depths, rounds).items():
        print(f"| {name} | {cost * 1e6:.1f} µs |")
    load = os.getloadavg()
    print(f"\nload average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end")
    args.svg.write_text(line_chart(
        "relayrace: CPU per handoff against the depth of a handoff chain",
        "chain depth (agents, log scale)", "µs per handoff (CPU)",
        {"per handoff": [(d, costs[d][0] * 1e6) for d in depths],
         f"2x depth {depths[0]} (the bound)": [(d, 2 * base_cpu * 1e6) for d in depths]}))
    print(f"plot: {args.svg}")


if __name__ == "__main__":
    main()
