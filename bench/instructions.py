"""Instruction counts of the engine's hot paths (callgrind): the same on a slow or busy machine.

    python bench/instructions.py                    # this checkout's src/
    python bench/instructions.py --src OTHER/src    # another version, to compare

Each figure is differential: the same workload at two sizes, the difference divided by the
extra work, so start-up and one-off costs cancel out. With ``PYTHONHASHSEED=0`` and the cyclic
garbage collector off (its collections land at different points in each size), and address
randomization off (``setarch -R``), the counts repeat to within a fraction of a percent.
Needs ``valgrind`` (Debian: ``apt-get install
valgrind``).

- per tool turn: runs of 2 and of 6 model turns that each call one tool (50 runs each);
- per handoff: a chain of 10 and of 20 agents handing over one to the next, run 2 and 4
  times (the second and later runs of a chain: warm);
- per run: 100 and 300 runs of one tool turn on fresh memory sessions (everything a run does
  once: its state, the session's lease, the log's checks).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORKLOAD = '''
import asyncio, gc, sys
from relayrace import Agent, Runner, tool
from relayrace.testing import FunctionModel, text, tool_call

kind, size, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
gc.disable()  # a collection lands at a different point in each size: it would blur the difference


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def turns(req):
    done = sum(1 for m in req.messages if m.role == "tool")
    return text("done") if done >= size else tool_call("add", {"a": 1, "b": 2})


def chain(req):
    i = int(req.agent[1:])
    return tool_call(f"transfer_to_a{i + 1}", {"reason": "next"}) if i < size else text("done")


if kind == "handoff":
    agent = Agent(f"a{size}", instructions="x", model=FunctionModel(chain, record=False))
    for i in range(size - 1, -1, -1):
        agent = Agent(f"a{i}", instructions="x", model=FunctionModel(chain, record=False),
                      sub_agents=[agent])
else:
    agent = Agent("a", instructions="x", model=FunctionModel(turns, record=False), tools=[add])


async def main():
    for _ in range(repeat):
        await Runner.run(agent, "go", max_turns=size + 5, max_handoffs=size + 5)

asyncio.run(main())
'''


def count(src: Path, script: Path, *args: int | str) -> int:
    """Instructions callgrind counts for one run of the workload."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        # Addresses fixed too (no ASLR): tables keyed by object ids then collide alike each time.
        fixed = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
        done = subprocess.run(
            [*fixed, "valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out",
             sys.executable, str(script), *map(str, args)],
            env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def measure(src: Path) -> dict[str, int]:
    """Instructions per tool turn, per handoff and per run."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        turn = (count(src, script, "turns", 6, 50) - count(src, script, "turns", 2, 50)) // 200
        short = count(src, script, "handoff", 10, 4) - count(src, script, "handoff", 10, 2)
        long = count(src, script, "handoff", 20, 4) - count(src, script, "handoff", 20, 2)
        handoff = (long - short) // 2 // 10
        run = (count(src, script, "turns", 1, 300) - count(src, script, "turns", 1, 100)) // 200
    return {"per tool turn": turn, "per handoff": handoff, "per run": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=HERE.parent / "src",
                        help="the src/ directory of the relayrace to measure")
    args = parser.parse_args()
    for name, figure in measure(args.src.resolve()).items():
        print(f"{name:14} {figure:>10,} instructions")


if __name__ == "__main__":
    main()
