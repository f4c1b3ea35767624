#!/usr/bin/env python3
"""Compare relayrace with other agent frameworks on the same scripted scenarios.

    python3 bench/compare/run.py [--quick] [--json out.json] [--rounds N]
                                 [--frameworks a,b] [--scenarios s1_50,s2] [--reinstall]

Run with any Python 3.11+: it creates (or reuses) ``bench/compare/.venv``, installs the pinned
peers from ``requirements.txt`` plus relayrace from this repository (editable), and re-executes
itself inside that venv. Every framework x scenario measurement then runs in a fresh worker
process (``worker.py``), in rounds that alternate between frameworks, and one table of medians,
spreads and relayrace's ratios is printed. See README.md next to this file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VENV = HERE / ".venv"
VENV_PY = VENV / "bin" / "python"
REQUIREMENTS = HERE / "requirements.txt"
STAMP = VENV / ".bench-stamp"

sys.path.insert(0, str(HERE))

# --------------------------------------------------------------------------------------------
# venv bootstrap
# --------------------------------------------------------------------------------------------


def _in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def _stamp() -> str:
    h = hashlib.sha256()
    h.update(REQUIREMENTS.read_bytes())
    for name in ("pyproject.toml", "setup.py", "setup.cfg"):
        p = REPO / name
        if p.exists():
            h.update(name.encode() + p.read_bytes())
    h.update(platform.python_version().encode())
    return h.hexdigest()


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bootstrap(args: argparse.Namespace, script: Path | None = None) -> None:
    """Create/refresh the peers' venv and re-exec ``script`` (default: this one) inside it."""
    if not VENV_PY.exists():
        _say(f"[bench] creating virtual environment {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(VENV_PY), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=False
        )
    stamp = _stamp()
    if args.reinstall or not STAMP.exists() or STAMP.read_text().strip() != stamp:
        pip = [str(VENV_PY), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)]
        has_project = any((REPO / n).exists() for n in ("pyproject.toml", "setup.py"))
        if has_project:
            _say(f"[bench] installing pinned peers + relayrace (editable) from {REPO}")
            rc = subprocess.run([*pip, "-e", str(REPO)]).returncode
            if rc != 0:
                _say(
                    "[bench] WARNING: installing relayrace editable failed; installing the peers "
                    "alone and putting src/ on PYTHONPATH for the relayrace worker"
                )
                subprocess.run(pip, check=True)
        else:
            _say(
                f"[bench] WARNING: {REPO} has no pyproject.toml yet; installing the peers only, "
                "relayrace is imported from src/ via PYTHONPATH"
            )
            subprocess.run(pip, check=True)
        STAMP.write_text(stamp + "\n")
    target = script or Path(__file__)
    os.execv(str(VENV_PY), [str(VENV_PY), str(target.resolve()), *sys.argv[1:]])


# --------------------------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------------------------

#: (scenario, metric key, label, unit)
METRICS: list[tuple[str, str, str, str]] = [
    ("s1_50", "us_per_turn", "S1 tool loop, {turns} turns", "us/turn"),
    ("s1_500", "us_per_turn", "S1 tool loop, {turns} turns", "us/turn"),
    ("s2", "us_per_handoff", "S2 handoff chain, {handoffs} handoffs", "us/handoff"),
    ("s3", "wall_ms", "S3 fan-out {children} x {child_sleep_ms} ms (ideal {child_sleep_ms})", "ms"),
    ("s4_mem", "wall_ms", "S4 {sessions} sessions x {turns}, memory: wall", "ms"),
    ("s4_mem", "peak_mem_mb", "S4 {sessions} sessions x {turns}, memory: peak RSS +", "MB"),
    ("s4_sqlite", "wall_ms", "S4 {sessions} sessions x {turns}, SQLite: wall", "ms"),
    ("s4_sqlite", "peak_mem_mb", "S4 {sessions} sessions x {turns}, SQLite: peak RSS +", "MB"),
    ("s4_sqlite_full", "wall_ms", "S4 {sessions} sessions x {turns}, SQLite FULL: wall", "ms"),
    ("s5", "us_turn_10", "S5 {turns} turns x 2 KB: turn 10", "us/turn"),
    ("s5", "us_turn_last", "S5 {turns} turns x 2 KB: turn {turns}", "us/turn"),
]


def run_worker(
    framework: str, scenario: str, quick: bool, timeout: float, env: dict[str, str]
) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "worker.py"), framework, scenario]
    if quick:
        cmd.append("--quick")
    try:
        proc = subprocess.run(
            cmd, cwd=str(HERE), env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"framework": framework, "scenario": scenario, "ok": False,
                "error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (proc.stderr or proc.stdout)[-1500:]
    return {"framework": framework, "scenario": scenario, "ok": False,
            "error": f"worker exited {proc.returncode} without a result: {tail}"}


def fmt(x: float | None) -> str:
    if x is None or x != x:
        return "-"
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def summarize(results: list[dict[str, Any]], frameworks: list[str], scenarios: list[str],
              quick: bool) -> tuple[list[dict[str, Any]], str]:
    from common import SCENARIOS, median

    rows: list[dict[str, Any]] = []
    lines: list[str] = []
    header = (f"{'scenario / metric':<52} {'framework':<14} {'median':>10} "
              f"{'spread (min-max)':>21} {'n':>2}  relayrace is")
    lines += [header, "-" * len(header)]
    for scenario, key, label, unit in METRICS:
        if scenario not in scenarios:
            continue
        params = dict(SCENARIOS[scenario][2 if quick else 1])
        if "child_sleep" in params:
            params["child_sleep_ms"] = f"{params['child_sleep'] * 1000:.0f}"
        title = f"{label.format(**params)} [{unit}]"
        stats: dict[str, dict[str, Any]] = {}
        for fw in frameworks:
            cell = [r for r in results if r["framework"] == fw and r["scenario"] == scenario]
            ok = [r["metrics"][key] for r in cell if r.get("ok")]
            failed = [r for r in cell if not r.get("ok") and not r.get("unsupported")]
            unsupported = any(r.get("unsupported") for r in cell)
            stats[fw] = {
                "values": ok,
                "median": median(ok) if ok else None,
                "min": min(ok) if ok else None,
                "max": max(ok) if ok else None,
                "failed": failed,
                "unsupported": unsupported,
            }
        ref = stats.get("relayrace", {}).get("median")
        for i, fw in enumerate(frameworks):
            st = stats[fw]
            name = title if i == 0 else ""
            row = {"scenario": scenario, "metric": key, "unit": unit, "label": title,
                   "framework": fw, "median": st["median"], "min": st["min"],
                   "max": st["max"], "n": len(st["values"]), "values": st["values"],
                   "ratio_vs_relayrace": None, "status": "ok"}
            if st["unsupported"]:
                row["status"] = "n/a"
                lines.append(f"{name:<52} {fw:<14} {'n/a':>10}   "
                             f"(no native facility)")
            elif st["median"] is None:
                err = st["failed"][0]["error"] if st["failed"] else "not run"
                row["status"] = "FAILED"
                row["error"] = err
                lines.append(f"{name:<52} {fw:<14} {'FAILED':>10}   {err.splitlines()[0][:70]}")
            else:
                spread = f"{fmt(st['min'])} - {fmt(st['max'])}"
                if fw == "relayrace":
                    ratio = "(reference)"
                elif ref:
                    row["ratio_vs_relayrace"] = st["median"] / ref
                    better = "faster" if key != "peak_mem_mb" else "less"
                    ratio = f"{st['median'] / ref:.2f}x {better}"
                else:
                    ratio = "-"
                if st["failed"]:
                    row["status"] = f"ok ({len(st['failed'])} failed)"
                    ratio += f"  [{len(st['failed'])} run(s) FAILED]"
                lines.append(f"{name:<52} {fw:<14} {fmt(st['median']):>10} "
                             f"{spread:>21} {len(st['values']):>2}  {ratio}")
            rows.append(row)
        lines.append("")
    return rows, "\n".join(lines)


def main() -> int:
    from common import SCENARIOS
    from frameworks import FRAMEWORKS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: fewer turns/sessions, 1 round")
    ap.add_argument("--json", metavar="PATH", help="also write all results as JSON")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 5; 1 with --quick)")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS),
                    help=f"comma list (default all: {','.join(FRAMEWORKS)})")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS),
                    help=f"comma list (default all: {','.join(SCENARIOS)})")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per worker (default 600)")
    ap.add_argument("--cell-budget", type=float, default=None, metavar="SECONDS",
                    help="after round 1, repeat a framework x scenario only while its worker "
                         "time so far plus one more run stays under this (default 100; "
                         "0 = no limit). Keeps the slowest peer cells (minutes each) from "
                         "blowing the ~20 minute budget; the table's n column shows the runs.")
    ap.add_argument("--reinstall", action="store_true", help="reinstall the venv's packages")
    ap.add_argument("--no-venv", action="store_true",
                    help="run with the current interpreter (it must have the peers installed)")
    args = ap.parse_args()

    if not args.no_venv and not _in_venv():
        bootstrap(args)  # does not return

    frameworks = [f for f in args.frameworks.split(",") if f]
    scenarios = [s for s in args.scenarios.split(",") if s]
    for f in frameworks:
        if f not in FRAMEWORKS:
            ap.error(f"unknown framework {f!r}; known: {', '.join(FRAMEWORKS)}")
    for s in scenarios:
        if s not in SCENARIOS:
            ap.error(f"unknown scenario {s!r}; known: {', '.join(SCENARIOS)}")
    rounds = args.rounds or (1 if args.quick else 5)
    budget = args.cell_budget if args.cell_budget is not None else 100.0

    env = dict(os.environ)
    for var in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
        env.pop(var, None)
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    import importlib.util

    if importlib.util.find_spec("relayrace") is None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO / "src"), env.get("PYTHONPATH", "")) if p
        )

    started = time.time()
    load0 = os.getloadavg()
    results: list[dict[str, Any]] = []
    skip: dict[tuple[str, str], str] = {}
    total = rounds * len(scenarios) * len(frameworks)
    done = 0
    for rnd in range(rounds):
        for scenario in scenarios:
            # rotate the order every round so drift and warm caches hit every framework alike
            k = rnd % len(frameworks)
            order = frameworks[k:] + frameworks[:k]
            for fw in order:
                done += 1
                if (fw, scenario) in skip:
                    continue
                spent = [r["elapsed_s"] for r in results
                         if r["framework"] == fw and r["scenario"] == scenario]
                if budget and spent and sum(spent) + sum(spent) / len(spent) > budget:
                    continue  # this cell is slow: fewer rounds (n in the table says how many)
                t0 = time.perf_counter()
                res = run_worker(fw, scenario, args.quick, args.timeout, env)
                res["round"] = rnd + 1
                res["elapsed_s"] = time.perf_counter() - t0
                results.append(res)
                if res.get("ok"):
                    shown = ", ".join(f"{k}={fmt(v)}" for k, v in res["metrics"].items())
                    status = f"ok  {shown}"
                elif res.get("unsupported"):
                    status = "n/a " + res.get("error", "")
                    skip[(fw, scenario)] = "n/a"
                else:
                    status = "FAILED " + res.get("error", "").splitlines()[0][:160]
                    skip[(fw, scenario)] = "failed"  # failures are deterministic: don't repeat
                _say(f"[{done:>3}/{total}] round {rnd + 1} {scenario:<9} {fw:<14} "
                     f"{res['elapsed_s']:6.1f}s {status}")

    rows, table = summarize(results, frameworks, scenarios, args.quick)
    versions: dict[str, dict[str, str]] = {}
    notes: dict[str, dict[str, str]] = {}
    for r in results:
        if r.get("versions"):
            versions.setdefault(r["framework"], r["versions"])
        if r.get("notes"):
            notes.setdefault(r["framework"], r["notes"])
    elapsed = time.time() - started
    meta = {
        "quick": args.quick,
        "rounds": rounds,
        "python": platform.python_version(),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": load0,
        "loadavg_end": os.getloadavg(),
        "elapsed_s": elapsed,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
    }

    print()
    print(f"relayrace vs peers: {'QUICK smoke run, ' if args.quick else ''}{rounds} round(s), "
          f"each measurement a fresh process; median and min-max over rounds; "
          f"'relayrace is N x faster' = peer median / relayrace median")
    print("versions: " + "; ".join(
        f"{fw}: " + ", ".join(f"{d} {v}" for d, v in vs.items()) for fw, vs in versions.items()))
    print(f"python {meta['python']}, {meta['cpus']} cpus, load avg {load0[0]:.2f} at start, "
          f"{meta['loadavg_end'][0]:.2f} at end, {elapsed / 60:.1f} min")
    print()
    print(table)
    failed = [r for r in results if not r.get("ok") and not r.get("unsupported")]
    if failed:
        print("FAILED measurements (counts off, crash or timeout):")
        for r in failed:
            print(f"  round {r.get('round')} {r['scenario']} {r['framework']}: "
                  f"{r.get('error', '').splitlines()[0][:300]}")

    if args.json:
        out = {"meta": meta, "versions": versions, "notes": notes, "summary": rows,
               "runs": results}
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"\nJSON written to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
