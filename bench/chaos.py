"""Kill harness: SIGKILL a run at random points, resume it in a new process, count the damage.

    python bench/chaos.py                 # the long form: 100 trials
    python bench/chaos.py --trials 8      # a short form (the test suite runs one)
    python bench/chaos.py --workers       # durable runs: 3 workers on PostgreSQL, 50 kills
                                          # (bench/chaos_workers.py)

Each trial runs one team on a fresh ``SQLiteSession``: ``triage`` transfers to ``ops``, which
calls two side-effecting tools in parallel beside a delegated ``researcher`` child (itself
calling a side-effecting tool), then a tool that needs a person's approval, then answers. A
worker process runs (or resumes) the team; the harness kills it with SIGKILL at a random moment
and starts a new worker, which resumes from the session log, approving what waits for approval
(or, now and then, the user writes again instead), until the run completes. Every side effect
is written to a ledger file before the tool returns.

Counted, each target zero: corrupt stores, committed events lost (a later snapshot of the store
that does not extend an earlier one), side effects duplicated (one call's effect in the ledger
twice), calls told "not executed" that had run, orphaned child sessions, histories a provider
would refuse, and failed resumes (a worker that stopped with an error, or a run that never
completed). A child session is an orphan when its parent's log does not account for it (no
delegation names it, and its call was not answered as cut short), or when one child of one call
has two sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relayrace import Agent, RunContext, Runner, TransferPolicy, tool
from relayrace.agents.approvals import PendingRun
from relayrace.core.events import DelegationEvent, ToolResultEvent, load_events
from relayrace.core.messages import Message
from relayrace.models.interface import ModelRequest
from relayrace.sessions import SQLiteSession
from relayrace.sessions.base import LogView
from relayrace.testing import FunctionModel, tool_call

HERE = Path(__file__).resolve()
COMPLETE, AWAITING = 0, 3  # a worker's exit codes: the run finished; it waits for approval
MAX_ATTEMPTS = 40
LEASE_TTL, WAIT = 0.5, 5.0  # seconds
Effect = Callable[[RunContext[Any], str], None]
FOLLOW_UP_RATE = 0.25  # after a kill, how often the user writes again instead of resuming


# -- the worker: one process running or resuming the team ------------------------------------


def _ledger_effect(ledger: Path) -> Effect:
    def effect(ctx: RunContext[Any], name: str) -> None:
        line = json.dumps([ctx.session.session_id, ctx.tool_call_id, name]) + "\n"
        with ledger.open("a") as f:  # the side effect: durable before the tool returns
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    return effect


def team(effect: Effect, answered: Callable[[ModelRequest], None] | None = None,
         delay: float = 0.01) -> Agent[Any]:
    """The chaos team; ``effect`` records each side effect, ``answered`` each model answer."""

    @tool
    async def work(ctx: RunContext[Any], tag: str) -> str:
        """Do some work with a side effect.

        Args:
            tag: Which work.
        """
        await asyncio.sleep(random.uniform(0.0, 0.01) if tag == "fast" else 0.06)
        effect(ctx, f"work-{tag}")
        await asyncio.sleep(0.005)
        return f"{tag} done"

    @tool
    async def fetch(ctx: RunContext[Any], url: str) -> str:
        """Fetch a document.

        Args:
            url: What to fetch.
        """
        await asyncio.sleep(0.02)
        effect(ctx, "fetch")
        return f"contents of {url}"

    @tool(requires_approval=True)
    async def charge(ctx: RunContext[Any], amount: int) -> str:
        """Charge the customer's card.

        Args:
            amount: Euros.
        """
        effect(ctx, "charge")
        await asyncio.sleep(0.005)
        return f"charged {amount} EUR"

    def called(messages: list[Message], name: str) -> bool:
        return any(m.role == "tool" and m.name == name for m in messages)

    def uid() -> str:  # unique across processes, as a real provider's call ids are
        return "call_" + os.urandom(6).hex()

    def play(request: ModelRequest) -> Any:
        turn = _turn(request)
        if answered is not None:
            answered(request)
        return turn

    def _turn(request: ModelRequest) -> Any:
        seen = list(request.messages)
        if request.agent == "triage":
            if not called(seen, "transfer_to_ops"):
                return tool_call("transfer_to_ops", {"reason": "ops work"}, id=uid())
            return "Ops has it."
        if request.agent == "researcher":
            if not called(seen, "fetch"):
                return tool_call("fetch", {"url": "https://example.org/doc"}, id=uid())
            return ("<handoff>\nSUMMARY: read the doc\nKEY_FINDINGS:\n- it exists\n"
                    "SOURCES:\n- https://example.org/doc\nCONFIDENCE: high (read it)\n"
                    "GAPS:\n- none\n</handoff>")
        if not called(seen, "work"):
            return [tool_call("work", {"tag": "fast"}, id=uid()),
                    tool_call("work", {"tag": "slow"}, id=uid()),
                    tool_call("researcher", {"query": "find the doc"}, id=uid())]
        if not called(seen, "charge"):
            return tool_call("charge", {"amount": 42}, id=uid())
        return "All done."

    model = FunctionModel(play, delay=delay)
    researcher = Agent("researcher", instructions="Research.", model=model, tools=[fetch])
    ops = Agent("ops", instructions="Do the work.", model=model,
                tools=[work, charge, researcher.as_tool()],
                transfer_policy=TransferPolicy(to_parent=True))
    return Agent("triage", instructions="Route.", model=model, sub_agents=[ops])


async def _work(db: Path, ledger: Path, follow_up: bool) -> int:
    chaos_team = team(_ledger_effect(ledger))
    # A killed worker's lease on the session lapses after LEASE_TTL; the next one waits it out.
    session = SQLiteSession("chaos", db, lease_ttl=LEASE_TTL)
    print("ready", flush=True)
    if follow_up and await session.get_events():
        # The user writes again instead of resuming: what the crash cut short is answered.
        result = await Runner.run(chaos_team, "Any news?", session=session,
                                  wait_for_session=WAIT)
        return AWAITING if result.pending is not None else COMPLETE
    pending = await PendingRun.from_session(session, entry=chaos_team)
    if pending is not None:
        # The person approves each call, except one whose earlier attempt's outcome is unknown
        # and whose effect they find already done (they check, as the note asks).
        done = _effects(ledger)
        result = await Runner.resume(pending, wait_for_session=WAIT, approvals={
            a.call_id: not (a.note and (a.session_id, a.call_id) in done)
            for a in pending.approvals})
    else:
        events = await session.get_events()
        finished = [e for e in events if e.kind == "run_finished"]
        if finished and finished[-1].status == "completed":  # type: ignore[attr-defined]
            return COMPLETE
        result = await Runner.run(chaos_team, None if events else "Charge me after the work.",
                                  session=session, wait_for_session=WAIT)
    return AWAITING if result.pending is not None else COMPLETE


def _effects(ledger: Path) -> set[tuple[str, str]]:
    """The calls whose side effect the ledger holds, as (session id, call id)."""
    if not ledger.exists():
        return set()
    return {tuple(json.loads(line)[:2]) for line in ledger.read_text().splitlines()}


# -- the checks ------------------------------------------------------------------------------


def _snapshot(db: Path) -> dict[str, list[str]]:
    """Every session's events as stored (id order)."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT session_id, data FROM events ORDER BY id").fetchall()
    except sqlite3.OperationalError:
        return {}
    finally:
        conn.close()
    out: dict[str, list[str]] = {}
    for sid, data in rows:
        out.setdefault(sid, []).append(data)
    return out


def _extends(before: dict[str, list[str]], after: dict[str, list[str]]) -> int:
    """How many events of ``before`` are missing or changed in ``after``."""
    lost = 0
    for sid, events in before.items():
        now = after.get(sid, [])
        lost += sum(1 for a, b in zip(events, now, strict=False) if a != b)
        lost += max(0, len(events) - len(now))
    return lost


def _history_problems(messages: list[Any]) -> list[str]:
    """Why a provider would refuse this conversation (empty if it would not)."""
    problems: list[str] = []
    open_calls: list[str] = []
    seen_ids: Counter[str] = Counter()
    for i, m in enumerate(messages):
        if m.role == "tool":
            if m.tool_call_id not in open_calls:
                problems.append(f"message {i}: a result for {m.tool_call_id}, which is not open")
            else:
                open_calls.remove(m.tool_call_id)
            continue
        if open_calls:
            problems.append(f"message {i}: a {m.role} message while {open_calls} are open")
            open_calls = []
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            seen_ids.update(ids)
            open_calls = list(ids)
    problems.extend(f"call id {k} used {n} times" for k, n in seen_ids.items() if n > 1)
    return problems


@dataclass
class Figures:
    trials: int = 0
    kills: int = 0
    corrupt_stores: int = 0
    lost_events: int = 0
    duplicated_effects: int = 0
    told_not_executed_but_ran: int = 0
    orphaned_children: int = 0
    refused_histories: int = 0
    failed_resumes: int = 0
    notes: list[str] = field(default_factory=list)

    def damage(self) -> int:
        return (self.corrupt_stores + self.lost_events + self.duplicated_effects
                + self.told_not_executed_but_ran + self.orphaned_children
                + self.refused_histories + self.failed_resumes)


def _check(db: Path, ledger: Path, figures: Figures, trial: int) -> None:
    conn = sqlite3.connect(db)
    try:
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        sessions = conn.execute("SELECT session_id, parent_id, parent_tool_call_id, child_key "
                                "FROM sessions").fetchall()
    finally:
        conn.close()
    if not ok:
        figures.corrupt_stores += 1
        figures.notes.append(f"trial {trial}: integrity_check failed")
    snapshot = _snapshot(db)
    try:
        logs = {sid: load_events(lines) for sid, lines in snapshot.items()}
    except Exception as exc:
        figures.corrupt_stores += 1
        figures.notes.append(f"trial {trial}: events do not load: {exc}")
        return
    effects = [tuple(json.loads(line)) for line in ledger.read_text().splitlines()] \
        if ledger.exists() else []
    dup = [k for k, n in Counter(effects).items() if n > 1]
    figures.duplicated_effects += len(dup)
    if dup:
        figures.notes.append(f"trial {trial}: duplicated {dup}")
    ran = {(sid, call) for sid, call, _ in effects}
    named: set[str] = set()
    abandoned: set[tuple[str, str]] = set()  # (session, call) answered "outcome unknown"
    for sid, events in logs.items():
        for e in events:
            if isinstance(e, ToolResultEvent) and e.message.content.startswith("Outcome unknown"):
                abandoned.add((sid, e.message.tool_call_id or ""))
            if isinstance(e, ToolResultEvent) and e.message.content.startswith("Not executed") \
                    and (sid, e.message.tool_call_id) in ran:
                figures.told_not_executed_but_ran += 1
                figures.notes.append(f"trial {trial}: {e.tool_name} told not executed, but ran")
            if isinstance(e, DelegationEvent):
                named.add(e.child_session_id)
        view = LogView()
        view.fold(events)
        problems = _history_problems(view.messages)
        if problems:
            figures.refused_histories += 1
            figures.notes.append(f"trial {trial}: session {sid}: {problems[:2]}")
    # A child session is accounted for by its parent's log: a delegation that names it, or
    # its call answered as cut short; and one call's child ``key`` has one session.
    keys = Counter((parent, call, key) for _, parent, call, key in sessions if parent)
    for sid, parent, call, key in sessions:
        if parent is None:
            continue
        if (sid not in named and (parent, call) not in abandoned) or keys[parent, call, key] > 1:
            figures.orphaned_children += 1
            figures.notes.append(f"trial {trial}: orphaned child session {sid}")


def _trial(trial: int, rng: random.Random, figures: Figures, kill_rate: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db, ledger = Path(tmp) / "chaos.db", Path(tmp) / "ledger.txt"
        killed = False
        for _attempt in range(MAX_ATTEMPTS):
            before = _snapshot(db)
            follow_up = killed and rng.random() < FOLLOW_UP_RATE
            proc = subprocess.Popen(
                [sys.executable, str(HERE), "worker", str(db), str(ledger),
                 "follow-up" if follow_up else "resume"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            proc.stdout.readline()  # "ready": imports done, the team built
            killed = rng.random() < kill_rate
            if killed:
                try:
                    proc.wait(rng.uniform(0.0, 0.25))
                    killed = False  # it finished first
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    figures.kills += 1
            _, err = proc.communicate()
            lost = _extends(before, _snapshot(db))
            if lost:
                figures.lost_events += lost
                figures.notes.append(f"trial {trial}: {lost} committed events lost")
            if killed:
                continue
            if proc.returncode == COMPLETE:
                break
            if proc.returncode != AWAITING:
                figures.failed_resumes += 1
                figures.notes.append(f"trial {trial}: worker failed: {err.strip()[-400:]}")
        else:
            figures.failed_resumes += 1
            figures.notes.append(f"trial {trial}: no completion in {MAX_ATTEMPTS} attempts")
        _check(db, ledger, figures, trial)
        figures.trials += 1


def run(trials: int, *, seed: int = 0, kill_rate: float = 0.8) -> Figures:
    """Run ``trials`` trials; return the figures."""
    rng = random.Random(seed)
    figures = Figures()
    for t in range(trials):
        _trial(t, rng, figures, kill_rate)
    return figures


def main(argv: list[str]) -> int:
    if argv[:1] == ["worker"]:
        return asyncio.run(_work(Path(argv[1]), Path(argv[2]), argv[3] == "follow-up"))
    if any(a == "--workers" or a.startswith("--workers=") for a in argv):
        import chaos_workers  # durable runs: worker processes on PostgreSQL (DBOS)

        return chaos_workers.main(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args(argv)
    started = time.perf_counter()
    figures = run(args.trials, seed=args.seed)
    print(f"seed {args.seed}, {figures.trials} trials, {figures.kills} kills, "
          f"{time.perf_counter() - started:.0f} s")
    for name in ("corrupt_stores", "lost_events", "duplicated_effects",
                 "told_not_executed_but_ran", "orphaned_children", "refused_histories",
                 "failed_resumes"):
        print(f"  {name:28} {getattr(figures, name)}")
    for note in figures.notes[:30]:
        print("  -", note)
    return 1 if figures.damage() else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
