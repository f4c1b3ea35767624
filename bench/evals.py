"""``relayrace eval`` on the support example: 50 cases x 3 repeats on scripted models.

    .venv/bin/python bench/evals.py [--rounds 5]

Prints (1) the wall time of the whole command, ``relayrace eval run`` in a fresh process
(start-up, imports and the SQLite store included), for the cases stored in SQLite and in
memory; (2) the time per case run of ``run_eval`` against the same conversations had with
plain ``Runner.run`` calls, one after another, and their ratio: what evaluating adds to each
conversation (checking expectations, the trajectory, the store's eval-run log); (3) the same
for a case with a person's decisions (``tests/fixtures/eval_approvals.py``'s refund: an answer
and an approval, so two ``Runner.resume`` calls per conversation, and a delegation). Medians
of ``--rounds`` rounds, the best in brackets.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from relayrace import Runner
from relayrace.evals import Case, load_cases, parse_case, run_eval
from relayrace.evals.cases import CASE_ADAPTER
from relayrace.sessions import MemorySession, MemoryStore

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "examples" / "support"
sys.path.insert(0, str(SUPPORT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import eval_approvals  # noqa: E402
from eval_models import scripted  # noqa: E402
from team import build_team  # noqa: E402

CASES, REPEAT = 50, 3


def fifty_cases(path: Path) -> list[Case]:
    """The support cases, cycled to 50 (``id~n``: the scripted model plays ``id``)."""
    base = load_cases(SUPPORT / "evals.yaml")
    data = []
    for n in range(CASES):
        item = CASE_ADAPTER.dump_python(base[n % len(base)], mode="json", exclude_defaults=True)
        item.pop("where", None)
        item.pop("lines", None)
        data.append({**item, "id": f"{item['id']}~{n}"})
    path.write_text(yaml.safe_dump({"cases": data}, sort_keys=False))
    return load_cases(path)


def command(cases: Path, db: str) -> tuple[float, float]:
    """Seconds of ``relayrace eval run`` in a fresh process, and of the eval in it."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "relayrace.cli", "eval", "run", f"{SUPPORT / 'team.py'}:triage",
         str(cases), "--model", f"{SUPPORT / 'eval_models.py'}:scripted", "--repeat",
         str(REPEAT), "--db", db, "--min-pass-rate", "1"],
        capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    found = re.search(r"eval run eval-\w+ · ([\d.]+) s", done.stdout)
    assert found is not None, done.stdout[-500:]
    return seconds, float(found.group(1))


async def plain(cases: list[Case]) -> float:
    """Seconds per conversation had with Runner.run alone."""
    team = build_team("openai:gpt-4o-mini")
    started = time.perf_counter()
    for case in cases:
        for _ in range(REPEAT):
            session, model = MemorySession(), scripted(case)
            for said in case.messages:
                await Runner.run(team, said, session=session, model=model, context=case.context)
    return (time.perf_counter() - started) / (len(cases) * REPEAT)


async def evaluated(cases: list[Case], store: bool) -> float:
    """Seconds per case run of run_eval (one at a time, like ``plain``)."""
    team = build_team("openai:gpt-4o-mini")
    started = time.perf_counter()
    result = await run_eval(team, cases, model=scripted, repeat=REPEAT, concurrency=1,
                            store=MemoryStore() if store else None)
    assert result.pass_rate == 1.0, [r.error for r in result.runs if not r.passed][:3]
    return (time.perf_counter() - started) / (len(cases) * REPEAT)


REFUND = {"id": "refund", "input": "I was charged twice for INV-2041.",
          "approvals": {"issue_refund": "approve"}, "answers": ["card"],
          "expect": {"path": ["triage", "billing"],
                     "delegations": [{"child": "researcher", "confidence": "high"}],
                     "final": {"agent": "billing", "contains": "Refunded"}}}


async def plain_decided(cases: list[Case]) -> float:
    """Seconds per refund conversation with Runner.run and two Runner.resume calls."""
    team = eval_approvals.build()
    started = time.perf_counter()
    for case in cases:
        for _ in range(REPEAT):
            result = await Runner.run(team, case.messages[0], session=MemorySession(),
                                      model=eval_approvals.scripted(case))
            assert result.pending is not None
            result = await Runner.resume(result.pending,
                                         answers={result.pending.questions[0].id: "card"})
            assert result.pending is not None
            result = await Runner.resume(
                result.pending, approvals={result.pending.approvals[0].call_id: True})
            assert result.pending is None
    return (time.perf_counter() - started) / (len(cases) * REPEAT)


async def evaluated_decided(cases: list[Case]) -> float:
    """Seconds per case run of run_eval on the refund case, decisions given by the case."""
    started = time.perf_counter()
    result = await run_eval(eval_approvals.build(), cases, model=eval_approvals.scripted,
                            repeat=REPEAT, concurrency=1)
    assert result.pass_rate == 1.0, [r.checks for r in result.runs if not r.passed][:3]
    return (time.perf_counter() - started) / (len(cases) * REPEAT)


def line(label: str, values: list[float], unit: str, scale: float = 1.0) -> str:
    return (f"{label:<46} {statistics.median(values) * scale:9.2f} {unit} "
            f"({min(values) * scale:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.yaml"
        cases = fifty_cases(path)
        sqlite = [command(path, str(Path(tmp) / f"s{i}.db")) for i in range(args.rounds)]
        memory = [command(path, "memory://") for _ in range(args.rounds)]
        startup = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "relayrace.cli", "--help"],
                           capture_output=True, check=True)
            startup.append(time.perf_counter() - started)
        refunds = [parse_case({**REFUND, "id": f"refund~{n}"}) for n in range(CASES)]
        runs: dict[str, list[float]] = {"plain": [], "eval": [], "eval+store": [],
                                        "plain+decisions": [], "eval+decisions": []}
        for _ in range(args.rounds):  # alternated, so a change of machine speed hits all
            runs["plain"].append(asyncio.run(plain(cases)))
            runs["eval"].append(asyncio.run(evaluated(cases, store=False)))
            runs["eval+store"].append(asyncio.run(evaluated(cases, store=True)))
            runs["plain+decisions"].append(asyncio.run(plain_decided(refunds)))
            runs["eval+decisions"].append(asyncio.run(evaluated_decided(refunds)))
    print(f"relayrace eval run, {CASES} cases x {REPEAT} repeats, scripted models:")
    print(line("  whole command, SQLite store", [s[0] for s in sqlite], "s"))
    print(line("    of which the eval (cases stored in SQLite)", [s[1] for s in sqlite], "s"))
    print(line("  whole command, memory://", [s[0] for s in memory], "s"))
    print(line("    of which the eval", [s[1] for s in memory], "s"))
    print(line("  for scale: `relayrace --help` (start-up alone)", startup, "s"))
    print("per case run, one at a time:")
    print(line("  Runner.run alone", runs["plain"], "ms", 1000))
    print(line("  run_eval, no store", runs["eval"], "ms", 1000))
    print(line("  run_eval, eval run stored (MemoryStore)", runs["eval+store"], "ms", 1000))
    base = statistics.median(runs["plain"])
    print(f"  ratio to Runner.run: {statistics.median(runs['eval']) / base:.2f}x (no store), "
          f"{statistics.median(runs['eval+store']) / base:.2f}x (stored)")
    print("per case run with a person's decisions (an answer, an approval, a delegation):")
    print(line("  Runner.run + 2 x Runner.resume", runs["plain+decisions"], "ms", 1000))
    print(line("  run_eval, decisions from the case", runs["eval+decisions"], "ms", 1000))
    ratio = statistics.median(runs["eval+decisions"]) / statistics.median(runs["plain+decisions"])
    print(f"  ratio: {ratio:.2f}x")


if __name__ == "__main__":
    main()
