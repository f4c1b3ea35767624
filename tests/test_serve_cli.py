"""``relayrace serve`` as a user meets it: a port already taken, and the server stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from test_cli import TEAM, assert_clean_error, invoke

pytest.importorskip("fastapi")


def test_a_port_in_use_is_named_with_a_free_one_to_try_and_nothing_is_served(
        tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke("serve", f"{TEAM}:triage", "--port", str(port), "--db", tmp_path / "s.db")
        assert_clean_error(result, f"port {port} is in use; try --port ")
        suggested = int(result.stderr.split("try --port ")[1].split(".")[0])
        assert suggested > port
        with socket.socket() as probe:  # the port suggested was free
            probe.bind(("127.0.0.1", suggested))
    assert "Serving" not in result.output
    assert "Errno" not in result.output


def test_an_address_that_cannot_be_bound_is_a_clean_error(tmp_path: Path) -> None:
    result = invoke("serve", f"{TEAM}:triage", "--host", "192.0.2.1", "--port", "0",
                    "--db", tmp_path / "s.db")  # TEST-NET-1: no interface of this machine
    assert_clean_error(result, "Cannot listen on 192.0.2.1:0", "--host")
    assert "Serving" not in result.output


def test_the_server_says_where_it_serves_and_that_it_stopped_on_sigterm(tmp_path: Path) -> None:
    here = Path(__file__).resolve().parent
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(here.parent / "src"), str(here)])}
    process = subprocess.Popen(
        [sys.executable, "-m", "relayrace.cli", "serve", f"{TEAM}:triage", "--port", "0",
         "--db", str(tmp_path / "s.db")], stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    try:
        first = process.stderr.readline()
        # --port 0: the line names the port the system gave.
        assert first.startswith("Serving triage at http://127.0.0.1:"), first
        url = first.split(" at ")[1].split(" ")[0]
        assert not url.endswith(":0/")
        started = time.monotonic()
        while True:
            try:
                assert httpx.get(url + "api/sessions", timeout=1).status_code == 200
                break
            except httpx.TransportError:
                assert time.monotonic() - started < 60, "the server did not answer"
                time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0
        rest = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
    assert f"Stopped serving triage at {url} (SIGTERM)." in rest
    assert "Traceback" not in rest
