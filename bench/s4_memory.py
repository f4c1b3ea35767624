"""S4 in memory, counted: what one run of bench/compare's ``s4_mem`` costs, garbage included.

    python bench/s4_memory.py                  # this checkout's src/
    python bench/s4_memory.py --src OTHER/src  # another version, to compare
    python bench/s4_memory.py --no-callgrind   # only the counts that need no valgrind

The workload is bench/compare's S4 in memory: conversations of 3 turns, each on its own
`MemorySession`, sharing one agent, run together (``asyncio.gather``), a fake model, tracing on
(an ``InMemoryTraceProcessor``). It reports per run:

- objects left in reference cycles (``gc.DEBUG_SAVEALL``): what only the garbage collector
  frees;
- the collector's passes over 1,000 conversations (``gc.get_stats``);
- instructions (callgrind, differential between 100 and 300 conversations, counted only
  inside the measured runs as in bench/instructions.py), with the collector off and on.
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
from relayrace import Agent, Runner
from relayrace.sessions import MemorySession
from relayrace.testing import FunctionModel, text
from relayrace.tracing import InMemoryTraceProcessor, add_trace_processor

mode, n = sys.argv[1], int(sys.argv[2])
add_trace_processor(InMemoryTraceProcessor())


async def respond(request):
    return text("a " + request.messages[-1].content)

agent = Agent("a0", instructions="Chat.", model=FunctionModel(respond))


async def conversation(i):
    session = MemorySession()
    for t in range(3):
        result = await Runner.run(agent, f"s{i} t{t}|", session=session, max_turns=8)
        assert result.final_output == f"a s{i} t{t}|", result.final_output


async def main(k):
    await asyncio.gather(*(conversation(i) for i in range(k)))

asyncio.run(main(5))  # warm
gc.collect()
if mode == "cycles":
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    asyncio.run(main(n))
    gc.collect()
    print(len(gc.garbage) / (3 * n))
elif mode == "passes":
    before = sum(g["collections"] for g in gc.get_stats())
    asyncio.run(main(n))
    print(sum(g["collections"] for g in gc.get_stats()) - before)
else:  # "off" / "on": callgrind counts only inside this callback
    if mode == "off":
        gc.disable()
    ctypes.CFUNCTYPE(None)(lambda: asyncio.run(main(n)))()
'''


def _python(src: Path, script: Path, *args: str, valgrind: bool = False) -> str:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    command = [sys.executable, str(script), *args]
    if valgrind:
        fixed = ["setarch", platform.machine(), "-R"] if shutil.which("setarch") else []
        command = [*fixed, "valgrind", "--tool=callgrind", "--collect-atstart=no",
                   "--toggle-collect=_CallPythonObject", "--callgrind-out-file=/dev/null",
                   *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    if not valgrind:
        return done.stdout.strip()
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return found.group(1)


def measure(src: Path, callgrind: bool) -> dict[str, str]:
    """The figures per run (see the module's docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "s4.py"
        script.write_text(WORKLOAD)
        cycles = float(_python(src, script, "cycles", "100"))
        out = {"objects left in cycles per run": f"{cycles:.1f}",
               "collector passes, 1,000 conversations": _python(src, script, "passes", "1000")}
        if callgrind:
            for mode in ("off", "on"):
                small, large = (int(_python(src, script, mode, size, valgrind=True))
                                for size in ("100", "300"))
                out[f"instructions per run, collector {mode}"] = f"{(large - small) // 600:,}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=HERE.parent / "src",
                        help="the src/ directory of the relayrace to measure")
    parser.add_argument("--no-callgrind", action="store_true",
                        help="skip the instruction counts (they need valgrind)")
    args = parser.parse_args()
    for name, figure in measure(args.src.resolve(), not args.no_callgrind).items():
        print(f"{name:40} {figure:>10}")


if __name__ == "__main__":
    main()
