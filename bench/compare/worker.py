"""Run ONE framework x scenario measurement in this (fresh) process and print its result.

    python worker.py FRAMEWORK SCENARIO [--quick] [--workdir DIR]

Prints one line ``RESULT {json}`` on stdout. The process imports only the one framework, runs
a small warm-up of the same scenario (lazy imports and first-call costs stay out of the
figures), then the measured run, then checks the counts the fake model and tools recorded.
Exit status 0 with ``"ok": true``, or 1 with ``"ok": false`` and an ``"error"``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import os
import resource
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import (  # noqa: E402
    SCENARIOS,
    WARMUP,
    BenchError,
    Chat,
    Fanout,
    HandoffChain,
    ToolLoop,
    median,
    run_conversation,
)
from frameworks import FRAMEWORKS, NotSupported  # noqa: E402


def _maxrss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


async def measure(fw: Any, scenario: str, params: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Build, run (timed) and check one scenario; return metrics and counts."""
    kind = scenario.split("_")[0]
    app = None
    if kind == "s1":
        script = ToolLoop(params["turns"])
        run = await fw.build_tool_loop(script)
    elif kind == "s2":
        script = HandoffChain(params["handoffs"])
        run = await fw.build_handoff_chain(script)
    elif kind == "s3":
        script = Fanout(params["children"], params["child_sleep"])
        run = await fw.build_fanout(script)
    elif kind in ("s4", "s5"):
        script = Chat(stamp=(kind == "s5"))
        db_path = os.path.join(workdir, f"{scenario}-{time.monotonic_ns()}.sqlite3")
        app = await fw.build_chat(script, params.get("store", "memory"), db_path)
        if kind == "s4":
            n, turns, size = params["sessions"], params["turns"], 0

            async def run():
                await asyncio.gather(
                    *(run_conversation(app, script.rec, sid, turns, size) for sid in range(n))
                )
                return None, None
        else:
            turns, size = params["turns"], params["msg_bytes"]

            async def run():
                await run_conversation(app, script.rec, 0, turns, size)
                return None, None
    else:
        raise ValueError(scenario)

    gc.collect()
    rss0 = _maxrss_kb()
    t0 = time.perf_counter()
    final, last_agent = await run()
    wall = time.perf_counter() - t0
    rss1 = _maxrss_kb()
    if app is not None:
        await app.close()
    if params.get("store", "").startswith("sqlite"):
        # the SQLite store must really have written the file (plus -wal, if it uses WAL)
        size = sum(os.path.getsize(p)  # noqa: ASYNC240 - a check after the timed run
                   for p in (db_path, db_path + "-wal") if os.path.exists(p))  # noqa: ASYNC240
        if size == 0:
            raise BenchError(f"SQLite store wrote nothing to {db_path}")

    rec = script.rec
    if rec.errors:
        raise BenchError(rec.errors[0])
    metrics: dict[str, float] = {"wall_ms": wall * 1e3}
    if kind == "s1":
        counts = script.check(final, last_agent)
        metrics["us_per_turn"] = wall / rec.model_calls * 1e6
    elif kind == "s2":
        counts = script.check(final, last_agent)
        metrics["us_per_handoff"] = wall / script.n * 1e6
    elif kind == "s3":
        counts = script.check(final, last_agent)
        metrics["wall_over_ideal"] = wall / params["child_sleep"] if params["child_sleep"] else 0.0
    elif kind == "s4":
        want = params["sessions"] * params["turns"]
        counts = {"model_calls": rec.model_calls, "runs": want}
        if rec.model_calls != want:
            raise BenchError(f"model calls {rec.model_calls} != {want}")
        metrics["peak_mem_mb"] = (rss1 - rss0) / 1024
    else:
        turns = params["turns"]
        counts = {"model_calls": rec.model_calls}
        if rec.model_calls != turns or len(rec.stamps) != turns:
            raise BenchError(f"model calls {rec.model_calls} != {turns}")
        # delta[k] = time from model call k-1 to model call k (1-based k = 2..turns)
        delta = {k: (rec.stamps[k - 1] - rec.stamps[k - 2]) * 1e6 for k in range(2, turns + 1)}
        lo = [delta[k] for k in range(5, 16) if k in delta]
        hi = [delta[k] for k in range(max(2, turns - 10), turns + 1)]
        metrics["us_turn_10"] = median(lo)
        metrics["us_turn_last"] = median(hi)
    metrics["rss_delta_mb"] = (rss1 - rss0) / 1024
    if params.get("store", "").startswith("sqlite"):
        counts["sqlite_bytes"] = size
    extra = getattr(fw, "extra_counts", None)
    if extra is not None:
        counts.update(extra())  # e.g. relayrace: spans its in-memory trace processor kept
    return {"metrics": metrics, "counts": counts}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"framework": args.framework, "scenario": args.scenario}
    full, quick = SCENARIOS[args.scenario][1:]
    params = quick if args.quick else full
    out["params"] = params
    t0 = time.perf_counter()
    fw = importlib.import_module(FRAMEWORKS[args.framework])
    fw.setup()
    out["import_s"] = time.perf_counter() - t0
    out["versions"] = _versions(fw)
    out["notes"] = getattr(fw, "NOTES", {})
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        try:
            await measure(fw, args.scenario, WARMUP[args.scenario], workdir)
        except NotSupported as exc:
            out.update(ok=False, unsupported=True, error=str(exc))
            return out
        result = await measure(fw, args.scenario, params, workdir)
    out.update(result)
    out["ok"] = True
    out["rss_peak_mb"] = _maxrss_kb() / 1024
    return out


def _versions(fw: Any) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for dist in getattr(fw, "DISTS", []):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = "not installed (source tree)"
    return versions


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("framework", choices=list(FRAMEWORKS))
    ap.add_argument("scenario", choices=list(SCENARIOS))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    try:
        out = asyncio.run(main_async(args))
    except BaseException as exc:  # report every failure as a failed measurement
        out = {
            "framework": args.framework,
            "scenario": args.scenario,
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": traceback.format_exc()[-4000:],
        }
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if out.get("ok") or out.get("unsupported") else 1


if __name__ == "__main__":
    sys.exit(main())
