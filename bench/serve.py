#!/usr/bin/env python3
"""Serving under load: ``relayrace serve`` against Google ADK's ``adk api_server``.

    python3 bench/serve.py [--quick] [--levels 1,50,500] [--runs 1000] [--json out.json]

Runs in ``bench/compare/.venv`` (created by ``bench/compare/run.py``'s bootstrap, with the
pinned peers and relayrace editable). Each server runs in its own process on 127.0.0.1 (one
uvicorn worker, sessions in memory for both), serving an equivalent one-agent team on a
zero-latency fake model that answers every message with the same text. A client process (this
one) drives them in turn, in the same run:

- one-shot runs: relayrace ``POST /v1/chat/completions``; ADK ``POST /run``;
- streamed runs: relayrace ``POST /v1/chat/completions`` with ``stream: true``; ADK
  ``POST /run_sse``; each read to its end;

at 1, 50 and 500 concurrent clients, each client talking in a session of its own (created
before timing). Reported: runs per second, p50 and p99 latency of a run, and the server's
memory per open stream (RSS with 200 streams held open on a slow agent, minus RSS before,
over 200).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
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
    """The relayrace side: ``/v1/chat/completions``, a session per client (by header)."""

    label = "relayrace"

    def __init__(self, served: Served) -> None:
        self.served = served

    async def session(self, client: Any, n: int, agent: str = "bench") -> dict[str, str]:
        return {"X-Relayrace-Session": f"bench-{agent}-{n}-{time.time_ns()}"}

    async def one_shot(self, client: Any, session: dict[str, str]) -> None:
        r = await client.post("/v1/chat/completions", headers=session, json={
            "model": "bench", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok", r.text

    async def streamed(self, client: Any, session: dict[str, str], agent: str = "bench"
                       ) -> None:
        async with client.stream("POST", "/v1/chat/completions", headers=session, json={
                "model": agent, "stream": True,
                "messages": [{"role": "user", "content": "hi"}]}) as r:
            body = "".join([c async for c in r.aiter_text()])
        assert r.status_code == 200 and body.rstrip().endswith("data: [DONE]"), body[-300:]


class Adk:
    """The ADK side: ``/run`` and ``/run_sse``, a session per client."""

    label = "google-adk"

    def __init__(self, served: Served) -> None:
        self.served = served

    async def session(self, client: Any, n: int, agent: str = "bench") -> dict[str, str]:
        r = await client.post(f"/apps/{agent}/users/u{n}/sessions", json={})
        assert r.status_code == 200, r.text
        return {"app_name": agent, "user_id": f"u{n}", "session_id": r.json()["id"]}

    def _body(self, session: dict[str, str], streaming: bool) -> dict[str, Any]:
        return {**session, "streaming": streaming,
                "new_message": {"role": "user", "parts": [{"text": "hi"}]}}

    async def one_shot(self, client: Any, session: dict[str, str]) -> None:
        r = await client.post("/run", json=self._body(session, False))
        assert r.status_code == 200 and r.json()[-1]["content"]["parts"][0]["text"] == "ok", \
            r.text

    async def streamed(self, client: Any, session: dict[str, str], agent: str = "bench"
                       ) -> None:
        async with client.stream("POST", "/run_sse", json=self._body(session, True)) as r:
            body = "".join([c async for c in r.aiter_text()])
        assert r.status_code == 200 and '"ok"' in body, body[-300:]


async def load(side: Any, mode: str, clients: int, runs: int) -> dict[str, float]:
    """``runs`` runs by ``clients`` concurrent clients: runs/s, p50 and p99 latency (ms)."""
    import httpx

    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=side.served.base, limits=limits, timeout=300) as c:
        sessions = [await side.session(c, n) for n in range(clients)]
        call: Callable[[Any, dict[str, str]], Awaitable[None]] = (
            side.one_shot if mode == "one-shot" else side.streamed)
        for s in sessions[:min(clients, 5)]:  # warm up
            await call(c, s)
        latencies: list[float] = []
        errors: list[str] = []
        per_client = max(1, runs // clients)

        async def client_loop(session: dict[str, str]) -> None:
            for _ in range(per_client):
                started = time.perf_counter()
                try:
                    await call(c, session)
                except (AssertionError, httpx.HTTPError) as exc:  # counted, not timed
                    errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*[client_loop(s) for s in sessions])
        wall = time.perf_counter() - started
    latencies.sort()
    if not latencies:
        raise SystemExit(f"{side.label}: every run failed, e.g. {errors[0]}")
    return {"runs": len(latencies), "errors": len(errors), "runs_per_s": len(latencies) / wall,
            "p50_ms": 1000 * statistics.median(latencies),
            "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]}


async def stream_memory(side: Any, streams: int) -> float:
    """KB of server memory per open stream: ``streams`` streamed runs on a slow agent."""
    import httpx

    pid = side.served.process.pid
    limits = httpx.Limits(max_connections=streams + 10)
    async with httpx.AsyncClient(base_url=side.served.base, limits=limits, timeout=120) as c:
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
                                str(agents), "--host", "127.0.0.1", "--port", str(port)],
                 port, tmp)
    return relayrace, adk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    parser.add_argument("--levels", default="1,50,500")
    parser.add_argument("--runs", type=int, default=1000, help="runs per level (1 client: 1/5)")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reinstall", action="store_true")
    args = parser.parse_args()
    import run as compare  # bench/compare/run.py: the peers' venv

    if not compare._in_venv():
        compare.bootstrap(args, Path(__file__))
    levels = [int(x) for x in args.levels.split(",")]
    runs = 100 if args.quick else args.runs
    results: dict[str, Any] = {"levels": {}, "memory_kb_per_stream": {}, "startup_s": {}}
    with tempfile.TemporaryDirectory() as tmp:
        relayrace, adk = start_servers(Path(tmp))
        sides = [Relayrace(relayrace), Adk(adk)]
        try:
            for side in sides:
                results["startup_s"][side.label] = side.served.startup_s
            for mode in ("one-shot", "streamed"):
                for clients in levels:
                    count = max(clients, runs // 5 if clients == 1 else runs)
                    for side in sides:  # side by side, alternating
                        key = f"{mode} x{clients}"
                        figure = asyncio.run(load(side, mode, clients, count))
                        results["levels"].setdefault(key, {})[side.label] = figure
                        failed = f"  ({figure['errors']} failed)" if figure["errors"] else ""
                        print(f"{key:>16} {side.label:>10}: {figure['runs_per_s']:8.0f} runs/s"
                              f"  p50 {figure['p50_ms']:7.1f} ms  p99 {figure['p99_ms']:7.1f} ms"
                              f"{failed}", flush=True)
            streams = 20 if args.quick else args.streams
            for side in sides:
                kb = asyncio.run(stream_memory(side, streams))
                results["memory_kb_per_stream"][side.label] = kb
                print(f"{'memory/stream':>16} {side.label:>10}: {kb:8.1f} KB "
                      f"({streams} open streams)", flush=True)
        finally:
            for side in sides:
                side.served.stop()
    print("\nrelayrace / ADK throughput:")
    for key, pair in results["levels"].items():
        ratio = pair["relayrace"]["runs_per_s"] / pair["google-adk"]["runs_per_s"]
        print(f"  {key:>16}: {ratio:5.1f}x   (p99 {pair['relayrace']['p99_ms']:.1f} ms vs "
              f"{pair['google-adk']['p99_ms']:.1f} ms)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
