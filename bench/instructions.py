"""Instruction counts of the engine's hot paths (callgrind): the same on a slow or busy machine.

    python bench/instructions.py                    # this checkout's src/
    python bench/instructions.py --src OTHER/src    # another version, to compare
    python bench/instructions.py --free             # each run's cyclic garbage freed and counted

Each figure is differential: the same workload at two sizes, the difference divided by the
extra work, so one-off costs cancel out. Callgrind counts only inside the measured runs (they
are called through a ``ctypes`` callback, and ``--toggle-collect`` names it): the
interpreter's start, the imports and the warm-up run are not counted at all, so the noise of
a process start (a few million instructions, as much as the whole signal) stays out. With
``PYTHONHASHSEED=0``, the cyclic garbage collector off (its collections land at different
points in each size) and address randomization off (``setarch -R``), the counts repeat to
within about 0.1%. Needs ``valgrind`` (Debian: ``apt-get install valgrind``).

- per tool turn: runs of 2 and of 6 model turns that each call one tool (20 runs each);
- per handoff: a chain of 10 and of 20 agents handing over one to the next, each run 3
  times after a warm-up run;
- per run: 20 and 60 runs of one tool turn on fresh memory sessions (everything a run does
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
import asyncio, ctypes, gc, sys
from relayrace import Agent, Runner, tool
from relayrace.testing import FunctionModel, text, tool_call

kind, size, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
free = sys.argv[4:] == ["free"]


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


async def main(n):
    for _ in range(n):
        await Runner.run(agent, "go", max_turns=size + 5, max_handoffs=size + 5)
        if free:  # what the run left in reference cycles is freed (and counted) here
            gc.collect(0)

asyncio.run(main(1))  # warm: first-time paths and caches are not what is measured
gc.collect()
gc.disable()  # a collection lands at a different point in each size: it would blur the difference
# Callgrind counts only inside this callback (``--toggle-collect=_CallPythonObject``).
ctypes.CFUNCTYPE(None)(lambda: asyncio.run(main(repeat)))()
'''


def count(src: Path, script: Path, *args: int | str) -> int:
    """Instructions callgrind counts for one run of the workload."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        # Addresses fixed too (no ASLR): tables keyed by object ids then collide alike each time.
        fixed = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
        done = subprocess.run(
            [*fixed, "valgrind", "--tool=callgrind", "--collect-atstart=no",
             "--toggle-collect=_CallPythonObject", f"--callgrind-out-file={tmp}/out",
             sys.executable, str(script), *map(str, args)],
            env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    if int(found.group(1)) < 1_000_000:  # nothing counted: the toggle never fired
        raise RuntimeError("callgrind counted nothing inside the measured runs: this Python's "
                           "ctypes has no _CallPythonObject for --toggle-collect")
    return int(found.group(1))


def measure(src: Path, free: bool = False) -> dict[str, int]:
    """Instructions per tool turn, per handoff and per run (``free``: each run followed by a
    young-generation collection, so what it left in reference cycles is freed and counted)."""
    more = ("free",) if free else ()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "workload.py"
        script.write_text(WORKLOAD)
        turn = (count(src, script, "turns", 6, 20, *more)
                - count(src, script, "turns", 2, 20, *more)) // 80
        long = count(src, script, "handoff", 20, 3, *more)
        handoff = (long - count(src, script, "handoff", 10, 3, *more)) // 30
        run = (count(src, script, "turns", 1, 60, *more)
               - count(src, script, "turns", 1, 20, *more)) // 40
    return {"per tool turn": turn, "per handoff": handoff, "per run": run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=HERE.parent / "src",
                        help="the src/ directory of the relayrace to measure")
    parser.add_argument("--free", action="store_true",
                        help="follow each run with gc.collect(0) inside the measured region: "
                             "count freeing what a run left in reference cycles, which with "
                             "the collector off is otherwise never paid")
    args = parser.parse_args()
    for name, figure in measure(args.src.resolve(), args.free).items():
        print(f"{name:14} {figure:>10,} instructions")


if __name__ == "__main__":
    main()
