"""The relayrace side of every benchmark scenario runs and does the work (the peers need their
own environment, so they run only in the benchmark itself)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def test_reopen_bench_measures_each_length_and_plots_the_curve(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """bench/reopen.py's memory and SQLite cells run (the PostgreSQL one starts a server: the
    PostgreSQL tests of tests/test_reopen_cost.py run its turns), and the plot is drawn."""
    monkeypatch.syspath_prepend(str(BENCH))
    import reopen  # the benchmark module, found via bench/

    from relayrace.sessions import open_store

    async def cell(url: str) -> tuple[dict[int, float], dict[int, float]]:
        async with open_store(url) as store:
            return await reopen.measure(store, [8, 40], turns=2, rounds=1)

    curves = {name: asyncio.run(cell(url))[0]
              for name, url in (("memory", "memory://"), ("SQLite", str(tmp_path / "s.db")))}
    assert all(set(c) == {8, 40} and min(c.values()) > 0 for c in curves.values())
    reopen.svg(curves, tmp_path / "curve.svg")
    drawn = (tmp_path / "curve.svg").read_text()
    assert drawn.startswith("<svg") and drawn.count("<polyline") == 2 and "SQLite" in drawn


def test_compression_bench_keeps_requests_near_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import compression  # the benchmark module, found via bench/

    plain, none = asyncio.run(compression.conversation(30, None))
    compressed, summaries = asyncio.run(compression.conversation(30, 3000))
    assert none == 0 and summaries > 0
    assert max(plain) > 30_000 and max(compressed) < 4000


def test_serve_bench_records_a_cell_with_no_answers_as_a_row(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer that served nothing in a cell (wrk prints "0 requests in 3.00s" and no
    Requests/sec) is a row with 0 runs and the reason, not a crash of the benchmark."""
    monkeypatch.syspath_prepend(str(BENCH))
    import serve  # the benchmark module, found via bench/

    silent = ("Running 3s test @ http://127.0.0.1:1\n  1 threads and 500 connections\n"
              "  0 requests in 3.00s, 0.00B read\n  Socket errors: connect 0, read 0, "
              "write 0, timeout 500\n")
    cell = serve.parse_wrk(silent, 3.0)
    assert cell["runs_per_s"] == 0.0 and cell["note"] == "0 requests in 3.00s"
    answered = ("  Latency Distribution\n     50%    1.50ms\n     99%   12.00ms\n"
                "  3000 requests in 3.00s, 1.00MB read\n  Non-2xx or 3xx responses: 300\n"
                "Requests/sec:   1000.00\n")
    ok = serve.parse_wrk(answered, 3.0)
    assert ok["runs_per_s"] == 900.0 and ok["p50_ms"] == 1.5 and ok["p99_ms"] == 12.0
    assert ok["note"] == ""
    assert serve.ratio(ok, cell).strip().startswith("--")
    assert "0 requests in 3.00s" in serve.ratio(ok, cell)
    assert serve.ratio(ok, ok).strip() == "1.0x"


def test_serve_bench_reports_each_figure_s_median_over_its_rounds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell is measured in rounds, the sides alternating; each figure reported is its median
    over the rounds, and a cell no round answered keeps the reason."""
    monkeypatch.syspath_prepend(str(BENCH))
    import serve

    def measured(runs: float, p99: float, cpu: float, note: str = "") -> dict[str, Any]:
        return {"runs_per_s": runs, "p50_ms": 1.0, "p99_ms": p99, "errors": 0.0,
                "cpu_us": cpu, "note": note}

    cell = serve.median([measured(900, 3.0, 700), measured(300, 90.0, 1500),
                         measured(1000, 2.0, 650)])
    assert (cell["runs_per_s"], cell["p99_ms"], cell["cpu_us"]) == (900, 3.0, 700)
    assert cell["note"] == "" and len(cell["rounds"]) == 3
    silent = serve.median([measured(0, 0, 0, "0 requests in 3.00s")] * 3)
    assert silent["runs_per_s"] == 0 and silent["note"] == "0 requests in 3.00s"


def test_handoff_side_times_the_relayrace_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/handoff_side.py's relayrace side runs its checked chains (the LangGraph side needs
    the peers' environment) and times each size."""
    monkeypatch.syspath_prepend(str(BENCH))
    import handoff_side  # the benchmark module, found via bench/

    runs = {n: handoff_side.relayrace_chain(n) for n in (2, 4)}  # each run checks its handoffs
    seconds = asyncio.run(handoff_side.timed(runs, 2))
    assert sorted(seconds) == [2, 4] and all(s > 0 for s in seconds.values())
    # 2 runs of each size: 2 ms more for the 10 extra handoffs of each run, 100 µs each
    assert handoff_side.per_handoff({10: 0.002, 20: 0.004}, 2) == pytest.approx(100.0)


def test_handoff_side_worker_times_a_slice_for_each_line_it_reads() -> None:
    """The relayrace worker of bench/handoff_side.py: ready once warm, then one slice's seconds
    by way and chain size for each line, until its input ends."""
    src = str(BENCH.parent / "src")
    done = subprocess.run(
        [sys.executable, str(BENCH / "handoff_side.py"), "--side", "relayrace", "--runs", "1"],
        input="go\ngo\n", capture_output=True, text=True, timeout=120, check=True,
        env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"})
    ready, *slices = done.stdout.splitlines()
    assert ready == "ready" and len(slices) == 2
    for line in slices:
        spent = json.loads(line)["relayrace"]
        assert sorted(spent) == ["10", "20"] and all(s > 0 for s in spent.values())


def test_s4_memory_counts_cycles_and_collector_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/s4_memory.py's counts that need no valgrind: a run leaves nothing in cycles."""
    monkeypatch.syspath_prepend(str(BENCH))
    import s4_memory  # the benchmark module, found via bench/

    figures = s4_memory.measure(BENCH.parent / "src", callgrind=False)
    assert figures["objects left in cycles per run"] == "0.0"
    assert int(figures["collector passes, 1,000 conversations"]) >= 0


def test_deep_teams_bench_runs_and_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import deep_teams  # the benchmark module, found via bench/

    costs = deep_teams.per_handoff([5, 20], rounds=1)
    assert all(cpu > 0 and wall > 0 for cpu, wall in costs.values())
    svg = deep_teams.line_chart("t", "x", "y", {"a": [(5, 1.0), (20, 2.0)]})
    assert svg.startswith("<svg") and svg.count("<circle") == 2
