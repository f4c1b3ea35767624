#!/usr/bin/env python3
"""The console's first paint with many sessions in the store.

    PYTHONPATH=src python3 bench/console_paint.py [--sessions 10000] [--repeat 5] [--db PATH]

Fills a SQLite store with ``--sessions`` sessions (a two-message run each; written once and
kept at ``--db`` for the next runs), serves it with ``create_app`` on a real uvicorn at
127.0.0.1, and opens the console in the system's Chromium (Playwright) ``--repeat`` times.
Reported: per load, the time from navigation start to the first session row painted (the
page, its scripts, ``/api/agents`` and the first page of ``/api/sessions``, all on loopback),
and the median; the target is under 300 ms. The list is paged on the server (100 rows per
request, search on the server), so the page's cost does not grow with the store.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

from relayrace import Agent, Runner
from relayrace.server import create_app
from relayrace.sessions import SQLiteStore
from relayrace.testing import FunctionModel, text


async def fill(path: Path, count: int) -> None:
    """``count`` sessions in the SQLite file ``path`` (only those it does not hold yet)."""
    store = SQLiteStore(path)
    have = len(await store.list_sessions(limit=count))
    echo = Agent("echo", instructions="Echo.",
                 model=FunctionModel(lambda r: text("Echo: " + r.messages[-1].content)))
    for n in range(have, count):
        await Runner.run(echo, f"message {n}", session=store.session(f"s{n:05d}"))
        if n % 1000 == 999:
            print(f"  {n + 1} sessions written", file=sys.stderr)
    await store.aclose()


# When the first session row is in the page (ms from navigation start), noted by the page.
PAINTED = """new MutationObserver((_, seen) => {
  if (document.querySelector('#sessions li')) {
    window.firstRow = performance.now();
    seen.disconnect();
  }
}).observe(document, { childList: true, subtree: true });"""


def serve(path: Path) -> tuple[str, object]:
    import uvicorn

    echo = Agent("echo", instructions="Echo.", model=FunctionModel(lambda r: text("ok")))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(echo, store=SQLiteStore(path)),
                                           log_level="warning", lifespan="on"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--db", type=Path, default=Path(".relayrace/bench-console.db"))
    args = parser.parse_args()
    started = time.perf_counter()
    asyncio.run(fill(args.db, args.sessions))
    print(f"store: {args.sessions} sessions in {args.db} "
          f"(ready in {time.perf_counter() - started:.1f} s)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("The benchmark needs the system's Chromium.")
    from playwright.sync_api import sync_playwright

    url, server = serve(args.db)
    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium,
                                    args=["--headless", "--no-sandbox", "--disable-gpu"])
        for _ in range(args.repeat + 1):  # the first load warms the server: reported apart
            page = browser.new_page()
            page.add_init_script(PAINTED)
            page.goto(url)
            page.wait_for_function("() => window.firstRow !== undefined")
            times.append(page.evaluate("() => window.firstRow"))
            page.close()
        browser.close()
    server.should_exit = True  # type: ignore[attr-defined]
    counted = times[1:]
    print(f"first load (a fresh server, nothing cached): {times[0]:.0f} ms")
    print("first paint, ms: " + ", ".join(f"{t:.0f}" for t in counted))
    print(f"median {statistics.median(counted):.0f} ms (target < 300 ms)")


if __name__ == "__main__":
    main()
