"""A worker process of tests/test_durable.py: ``python durable_worker.py DB WORKER_ID``.

It works tests/durable_team.py's team (heartbeat 0.2 s, dead after 1 s) and prints ``ready``.
``RELAYRACE_TEST_CRASH=step:model:AGENT`` (or ``step:tool:TOOL``) kills it (``os._exit``, as a
SIGKILL would) right after DBOS recorded the first such step, before the session log took it;
``ended`` right after a run's end is logged, before DBOS records the workflow's outcome;
``effect:NAME`` is durable_team's own crash. ``pause:tool:NAME`` stops the heartbeat when the
first such step begins and holds the step until the test deletes the file ``PAUSED`` (beside
the ledger); then both go on, as in a worker a loaded machine starved past ``dead_after``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from durable_team import team
from relayrace.durable import runs as durable
from relayrace.durable.workers import Heartbeat

CRASH = os.environ.get("RELAYRACE_TEST_CRASH", "")
HEARTBEAT, DEAD_AFTER = 0.2, 1.0


def _crash_after_step(kind: str, name: str) -> None:
    recorded = durable._DbosSteps.step

    async def step(self: Any, key: str, fn: Any) -> str:
        value = await recorded(self, key, fn)
        if f"/{kind}/" in key and key.endswith(f"/{name}"):
            os._exit(9)
        return value

    durable._DbosSteps.step = step  # type: ignore[method-assign]


def _pause_at_step(name: str) -> None:
    """Hold the step ``name`` and the heartbeat while the file ``PAUSED`` exists."""
    paused = Path(os.environ["RELAYRACE_TEST_LEDGER"]).with_name("PAUSED")
    recorded, beat = durable._DbosSteps.step, Heartbeat.beat
    held = []

    async def step(self: Any, key: str, fn: Any) -> str:
        if "/tool/" in key and key.endswith(f"/{name}") and not held:
            held.append(key)
            paused.touch()
            while paused.exists():
                await asyncio.sleep(0.05)
        return await recorded(self, key, fn)

    def silent(self: Any) -> bool:
        return True if paused.exists() else beat(self)

    durable._DbosSteps.step = step  # type: ignore[method-assign]
    Heartbeat.beat = silent  # type: ignore[method-assign]


def _crash_after_run() -> None:
    execute = durable.DurableRunner._execute

    async def run(self: Any, run_id: str, spec: Any) -> Any:
        await execute(self, run_id, spec)
        os._exit(9)

    durable.DurableRunner._execute = run  # type: ignore[method-assign]


async def main(db: str, worker_id: str) -> None:
    if CRASH == "ended":
        _crash_after_run()
    if CRASH.startswith("pause:"):
        _pause_at_step(CRASH.split(":")[2])
    if CRASH.startswith("step:"):
        _, kind, name = CRASH.split(":")
        _crash_after_step(kind, name)
    runner = durable.DurableRunner(team, db=db, executor_id=worker_id, heartbeat=HEARTBEAT,
                                   dead_after=DEAD_AFTER, worker_concurrency=4)
    await runner.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
