"""The relayrace side of every benchmark scenario runs and does the work (the peers need their
own environment, so they run only in the benchmark itself)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCENARIOS = ["s1_50", "s1_500", "s2", "s3", "s4_mem", "s4_sqlite", "s5"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_compare_worker_runs_the_relayrace_side(scenario: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "compare" / "worker.py"), "relayrace", scenario, "--quick",
         "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stdout + done.stderr
    result = json.loads(line.removeprefix("RESULT "))
    assert result["ok"], result.get("error")  # the worker checked counts, not just timing


def test_overhead_scenarios_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import overhead  # the benchmark module, found via bench/

    assert asyncio.run(overhead.tool_loop(5)) > 0
    assert asyncio.run(overhead.handoff_chain(3)) > 0
    assert asyncio.run(overhead.many_sessions(20)) > 0
    assert asyncio.run(overhead.fan_out(children=3, delay=0.001)) > 0
    report_tokens, transcript_tokens = asyncio.run(overhead.context_growth(child_turns=6))
    assert 0 < report_tokens < transcript_tokens


def test_compression_bench_keeps_requests_near_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import compression  # the benchmark module, found via bench/

    plain, none = asyncio.run(compression.conversation(30, None))
    compressed, summaries = asyncio.run(compression.conversation(30, 3000))
    assert none == 0 and summaries > 0
    assert max(plain) > 30_000 and max(compressed) < 4000
