"""What `import relayrace` costs, against `from pydantic import BaseModel`, in one run.

    python bench/startup.py [--runs 7]

Each statement runs in a fresh interpreter under ``python -X importtime``; its cost is the sum
of the top-level imports it adds to a bare interpreter's, the median of ``--runs``. The target
(issue 36) is at most 3x pydantic's.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$")


def _top_level(code: str) -> dict[str, int]:
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                         text=True, check=True).stderr
    return {m[2]: int(m[1]) for m in map(_LINE.match, err.splitlines()) if m}


def cost_ms(code: str) -> float:
    """The microseconds of imports ``code`` adds to a bare interpreter, in milliseconds."""
    bare = _top_level("pass")
    return sum(us for name, us in _top_level(code).items() if name not in bare) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    pydantic, relayrace = [], []
    for _ in range(runs):  # interleaved, so both see the machine's same moments
        pydantic.append(cost_ms("from pydantic import BaseModel"))
        relayrace.append(cost_ms("import relayrace"))
    p, r = statistics.median(pydantic), statistics.median(relayrace)
    print(f"from pydantic import BaseModel  {p:7.1f} ms")
    print(f"import relayrace                {r:7.1f} ms  ({r / p:.2f}x pydantic; target <= 3x)")


if __name__ == "__main__":
    main()
