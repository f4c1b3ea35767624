#!/usr/bin/env python3
"""Serving under load: ``relayrace serve`` against Google ADK's ``adk api_server``.

    python3 bench/serve.py [--quick] [--levels 1,50,500] [--seconds 10] [--rounds 3]
                           [--json out.json]

Runs in ``bench/compare/.venv`` (created by ``bench/compare/run.py``'s bootstrap, with the
pinned peers and relayrace editable). Each server runs in its own process on 127.0.0.1 (one
uvicorn worker, sessions in memory for both: ``--db memory://`` and ADK's
``--session_service_uri memory://``), serving an equivalent one-agent team on a zero-latency
fake model that answers every message with the same text. ``wrk`` (C, one thread; Debian's
package) drives them in turn, in the same run, so the client is never the bottleneck (a
Python client caps near 200 (httpx) or 900 (aiohttp) requests/s here):

- one-shot runs: relayrace ``POST /v1/chat/completions``; ADK ``POST /run``;
- streamed runs: relayrace ``POST /v1/chat/completions`` with ``stream: true``; ADK
  ``POST /run_sse``; each read to its end;

at 1, 50 and 500 concurrent connections, for ``--seconds`` each, ``--rounds`` times (the
sides alternating, each round starting with the other; medians reported). A relayrace run is
a new session (the header names a fresh one each time); an ADK run goes to one of 2,000
sessions created before timing (ADK's API needs one; creating it is not timed, in ADK's
favour). Reported: runs per second, p50 and p99 latency of a run, the server's CPU time per
run (user + system, from ``/proc``: the figure a busy shared machine disturbs least), and
first, on the fresh servers, the memory per open stream (the server's RSS with 200 streams
held open on a slow agent, minus its RSS before, over 200).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "compare"))

RELAYRACE_TEAM = '''
import asyncio

from relayrace import Agent
from relayrace.testing import FunctionModel, text


async def slowly(request):
    await asyncio.sleep(30)
    return text("ok")


agent = Agent("bench", instructions="Answer.", model=FunctionModel(lambda r: text("ok"),
                                                                    record=False))
sleepy = Agent("sleepy", instructions="Answer.", model=FunctionModel(slowly, record=False))
'''

ADK_AGENT = '''
import asyncio
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.genai import types

USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=1, candidates_token_count=1, total_token_count=2)


class FakeLlm(BaseLlm):
    delay: float = 0.0

    async def generate_content_async(self, llm_request, stream: bool = False
                                     ) -> AsyncGenerator[LlmResponse, None]:
        if self.delay:
            await asyncio.sleep(self.delay)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="ok")]),
                          usage_metadata=USAGE)


root_agent = LlmAgent(name="{name}", model=FakeLlm(model="bench-fake", delay={delay}),
                      instruction="Answer.")
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """Seconds of CPU (user + system) the process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Served:
    """A server in its own process."""

    def __init__(self, name: str, command: list[str], port: int, cwd: Path) -> None:
        self.name = name
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = cwd / f"{name}.log"  # the server's own output, for its errors
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=out,
                                            env=os.environ | {"ADK_DISABLE_TELEMETRY": "1"})
        started = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() - started > 60:
                    raise SystemExit(f"{name} did not start: {' '.join(command)}") from None
                time.sleep(0.05)
        self.startup_s = time.monotonic() - started

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(15)
        errors = [line for line in self.log.read_text(errors="replace").splitlines()
                  if "Error" in line or "Exception" in line]
        if errors:
            print(f"{self.name}'s log: {len(errors)} error lines, the last: {errors[-1][:300]}",
                  flush=True)


class Relayrace:
    """The relayrace side of the memory measurement: streamed chat completions."""

    label = "relayrace"

    def __init__(self, served: Served) -> None:
        self.served = served

    async def session(self, client: Any, n: int, agent: str = "bench") -> dict[str, str]:
        return {"X-Relayrace-Session": f"bench-{agent}-{n}-{time.time_ns()}"}


    async def streamed(self, client: Any, session: dict[str, str], agent: str = "bench"
                       ) -> None:
        async with client.post("/v1/chat/completions", headers=session, json={
                "model": agent, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}) as r:
            body = (await r.read()).decode()
        assert r.status == 200 and body.rstrip().endswith("data: [DONE]"), body[-300:]


class Adk:
    """The ADK side of the memory measurement: ``/run_sse``."""

    label = "google-adk"

    def __init__(self, served: Served) -> None:
        self.served = served

    async def session(self, client: Any, n: int, agent: str = "bench") -> dict[str, str]:
        async with client.post(f"/apps/{agent}/users/u{n}/sessions", json={}) as r:
            made = await r.json()
        assert r.status == 200, made
        return {"app_name": agent, "user_id": f"u{n}", "session_id": made["id"]}

    def _body(self, session: dict[str, str], streaming: bool) -> dict[str, Any]:
        return {**session, "streaming": streaming,
                "new_message": {"role": "user", "parts": [{"text": "hi"}]}}


    async def streamed(self, client: Any, session: dict[str, str], agent: str = "bench"
                       ) -> None:
        async with client.post("/run_sse", json=self._body(session, True)) as r:
            body = (await r.read()).decode()
        assert r.status == 200 and '"ok"' in body, body[-300:]


RELAYRACE_LUA = """
counter = 0
request = function()
  counter = counter + 1
  local headers = {["Content-Type"] = "application/json",
                   ["X-Relayrace-Session"] = "w" .. math.random(1, 1e9) .. "-" .. counter}
  return wrk.format("POST", "/v1/chat/completions", headers,
                    '{"model":"bench","stream":STREAM,"messages":[{"role":"user","content":"hi"}]}')
end
"""

ADK_LUA = """
sessions = {SESSIONS}
counter = 0
request = function()
  counter = counter + 1
  local id = sessions[(counter % #sessions) + 1]
  local body = '{"app_name":"bench","user_id":"u","session_id":"' .. id ..
               '","streaming":STREAM,"new_message":{"role":"user","parts":[{"text":"hi"}]}}'
  return wrk.format("POST", "PATH", {["Content-Type"] = "application/json"}, body)
end
"""


def _ms(text: str) -> float:
    value = float(text.rstrip("mus"))
    return value * 1000 if text.endswith("s") and not text.endswith(("ms", "us")) else (
        value / 1000 if text.endswith("us") else value)


def parse_wrk(out: str, seconds: float) -> dict[str, Any]:
    """``wrk``'s report as figures. A server that answered nothing in the cell (wrk prints no
    ``Requests/sec`` then, or 0) is a row of the table with 0 runs and a note, never a crash of
    the benchmark: a peer that fails a cell is a result too."""
    figures: dict[str, Any] = {"runs_per_s": 0.0, "p50_ms": 0.0, "p99_ms": 0.0,
                               "errors": 0.0, "note": ""}
    for line in out.splitlines():
        parts = line.split()
        if line.startswith("Requests/sec:"):
            figures["runs_per_s"] = float(parts[1])
        elif parts[:1] == ["50%"]:
            figures["p50_ms"] = _ms(parts[1])
        elif parts[:1] == ["99%"]:
            figures["p99_ms"] = _ms(parts[1])
        elif "Non-2xx" in line:
            figures["errors"] += float(parts[-1])
        elif line.strip().startswith("Socket errors"):
            figures["errors"] += sum(float(x.rstrip(",")) for x in parts[3::2])
        elif " requests in " in line:
            figures["note"] = line.strip().split(",")[0]  # "0 requests in 3.00s"
    # Failed requests are not runs: only the answered ones count.
    total = figures["runs_per_s"] * seconds
    figures["runs_per_s"] = max(0.0, total - figures["errors"]) / seconds
    if not figures["runs_per_s"]:
        figures["note"] = figures["note"] or "wrk gave no figures"
    else:
        figures["note"] = ""
    return figures


def wrk(served: Served, script: str, clients: int, seconds: float, tmp: Path
        ) -> dict[str, Any]:
    """``wrk`` (C, one thread) against ``served`` with the Lua ``script``: runs/s, p50, p99,
    and the server's CPU µs per run."""
    path = tmp / f"load-{time.time_ns()}.lua"
    path.write_text(script)
    used = cpu_s(served.process.pid)
    try:
        done = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds:g}s", "--latency",
                               "--timeout", "60s", "-s", str(path), served.base],
                              capture_output=True, text=True, timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        return {**parse_wrk(f"0 requests in {seconds:g}s (wrk timed out)", seconds),
                "cpu_us": 0.0}
    figures = parse_wrk(done.stdout, seconds)
    runs = figures["runs_per_s"] * seconds
    figures["cpu_us"] = (cpu_s(served.process.pid) - used) / runs * 1e6 if runs else 0.0
    return figures


def median(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over ``rounds`` (the note of the first round that has one)."""
    figures: dict[str, Any] = {key: statistics.median(r[key] for r in rounds)
                               for key in ("runs_per_s", "p50_ms", "p99_ms", "errors", "cpu_us")}
    figures["note"] = "" if figures["runs_per_s"] else next(
        (r["note"] for r in rounds if r["note"]), "")
    figures["rounds"] = rounds
    return figures


def ratio(ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """relayrace's throughput over the peer's, or why there is none."""
    if not theirs["runs_per_s"]:
        return f"   --   (google-adk: {theirs['note']})"
    return f"{ours['runs_per_s'] / theirs['runs_per_s']:5.1f}x"


async def adk_sessions(base: str, count: int) -> list[str]:
    import aiohttp

    async with aiohttp.ClientSession(base) as c:
        async def one(_: int) -> str:
            async with c.post("/apps/bench/users/u/sessions", json={}) as r:
                return str((await r.json())["id"])
        return list(await asyncio.gather(*[one(n) for n in range(count)]))


async def stream_memory(side: Any, streams: int) -> float:
    """KB of server memory per open stream: ``streams`` streamed runs on a slow agent."""
    import aiohttp

    pid = side.served.process.pid
    connector = aiohttp.TCPConnector(limit=streams + 10)
    async with aiohttp.ClientSession(side.served.base, connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=120)) as c:
        sessions = [await side.session(c, 10_000 + n, agent="sleepy") for n in range(streams)]
        await asyncio.sleep(0.5)
        before = rss_kb(pid)
        tasks = [asyncio.ensure_future(side.streamed(c, s, agent="sleepy")) for s in sessions]
        await asyncio.sleep(5)  # every stream open, every run waiting on its model
        during = rss_kb(pid)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return (during - before) / streams


def start_servers(tmp: Path) -> tuple[Served, Served]:
    tmp.mkdir(exist_ok=True)
    team = tmp / "relayrace_team.py"
    team.write_text(RELAYRACE_TEAM)
    port = free_port()
    relayrace = Served("relayrace", [sys.executable, "-m", "relayrace.cli", "serve", str(team),
                                     "--agent", "bench", "--agent", "sleepy", "--port",
                                     str(port), "--db", "memory://"], port, tmp)
    agents = tmp / "adk_agents"
    for name, delay in (("bench", 0.0), ("sleepy", 30.0)):
        package = agents / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("from . import agent\n")
        (package / "agent.py").write_text(textwrap.dedent(ADK_AGENT).replace(
            "{name}", name).replace("{delay}", str(delay)))
    port = free_port()
    adk = Served("google-adk", [str(Path(sys.executable).with_name("adk")), "api_server",
                                "--session_service_uri", "memory://", str(agents), "--host",
                                "127.0.0.1", "--port", str(port)], port, tmp)
    return relayrace, adk


def report(key: str, label: str, figure: dict[str, Any]) -> None:
    failed = f"  ({figure['errors']:.0f} failed)" if figure["errors"] else ""
    note = f"  ({figure['note']})" if figure["note"] else ""
    print(f"{key:>16} {label:>10}: {figure['runs_per_s']:8.0f} runs/s  p50 "
          f"{figure['p50_ms']:7.1f} ms  p99 {figure['p99_ms']:7.1f} ms  CPU "
          f"{figure['cpu_us']:7.0f} µs/run{failed}{note}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    parser.add_argument("--levels", default="1,50,500")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per cell and side")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reinstall", action="store_true")
    args = parser.parse_args()
    import run as compare  # bench/compare/run.py: the peers' venv

    if not compare._in_venv():
        compare.bootstrap(args, Path(__file__))
    levels = [int(x) for x in args.levels.split(",")]
    seconds = 3.0 if args.quick else args.seconds
    if shutil.which("wrk") is None:
        raise SystemExit("bench/serve.py drives the servers with wrk: apt-get install wrk")
    results: dict[str, Any] = {"levels": {}, "memory_kb_per_stream": {}, "startup_s": {}}
    with tempfile.TemporaryDirectory() as tmp:
        relayrace, adk = start_servers(Path(tmp))
        sides = [Relayrace(relayrace), Adk(adk)]
        try:
            for side in sides:
                results["startup_s"][side.label] = side.served.startup_s
            streams = 20 if args.quick else args.streams
            for side in sides:  # on the fresh servers, before any load grew their heaps
                kb = asyncio.run(stream_memory(side, streams))
                results["memory_kb_per_stream"][side.label] = kb
                print(f"{'memory/stream':>16} {side.label:>10}: {kb:8.1f} KB "
                      f"({streams} open streams)", flush=True)
            # Fresh servers for the load: the slow runs left above must not wake up in it.
            for side in sides:
                side.served.stop()
            relayrace, adk = start_servers(Path(tmp) / "load")
            sides = [Relayrace(relayrace), Adk(adk)]
            adk_ids = asyncio.run(adk_sessions(adk.base, 2000))
            for mode in ("one-shot", "streamed"):
                stream = "true" if mode == "streamed" else "false"
                scripts = {
                    "relayrace": RELAYRACE_LUA.replace("STREAM", stream),
                    "google-adk": ADK_LUA.replace("STREAM", stream).replace(
                        "PATH", "/run_sse" if mode == "streamed" else "/run").replace(
                        "{SESSIONS}", "{" + ",".join(f'"{i}"' for i in adk_ids) + "}"),
                }
                for clients in levels:
                    key = f"{mode} x{clients}"
                    rounds: dict[str, list[dict[str, Any]]] = {s.label: [] for s in sides}
                    for n in range(args.rounds):  # side by side, alternating who goes first
                        for side in sides if n % 2 == 0 else sides[::-1]:
                            figure = wrk(side.served, scripts[side.label], clients, seconds,
                                         Path(tmp))
                            rounds[side.label].append(figure)
                            report(key, side.label, figure)
                    for label, measured in rounds.items():
                        results["levels"].setdefault(key, {})[label] = median(measured)
        finally:
            for side in sides:
                side.served.stop()
    print(f"\nmedians of {args.rounds}:")
    for key, pair in results["levels"].items():
        for label, figure in pair.items():
            report(key, label, figure)
    print("\nrelayrace / ADK throughput (and CPU per run, ADK's over relayrace's):")
    for key, pair in results["levels"].items():
        ours, theirs = pair["relayrace"], pair["google-adk"]
        cpu = (f"{theirs['cpu_us'] / ours['cpu_us']:5.1f}x" if ours["cpu_us"] and
               theirs["cpu_us"] else "   --")
        print(f"  {key:>16}: {ratio(ours, theirs)}   CPU {cpu}   (p99 {ours['p99_ms']:.1f} "
              f"ms vs {theirs['p99_ms']:.1f} ms)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
