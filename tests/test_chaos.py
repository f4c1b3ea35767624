"""The kill harness's short form: SIGKILL at random points, resume in a new process, no damage.

The long form (``python bench/chaos.py``, 100 trials) is recorded in bench/README.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_short_chaos_run_finds_no_damage() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "chaos.py"), "--trials", "6", "--seed",
                           "11"], capture_output=True, text=True, timeout=600, check=False)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "6 trials" in report
    kills = int(report.split(" kills")[0].rsplit(" ", 1)[1])
    assert kills >= 3, report  # the runs were really killed, several times
