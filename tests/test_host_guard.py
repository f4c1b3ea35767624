"""The Host and Origin guard of every relayrace HTTP server (``serve``, ``a2a serve``,
``mcp serve``), each started by its CLI in its own process and probed with httpx as a web
page that rebinds its name to 127.0.0.1 (or posts from elsewhere) would: a foreign Host gets
421, a foreign Origin on a POST 403, and ``--allowed-host`` / ``--allowed-origin`` open
exactly what they name. Every response carries the security headers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from relayrace import UserError
from relayrace.connect.asgi import Access

HERE = Path(__file__).resolve().parent
TEAM = str(HERE / "server_team.py") + ":front"
FOREIGN = "attacker.example"

pytest.importorskip("fastapi")
pytest.importorskip("mcp")
pytest.importorskip("a2a")


@contextmanager
def cli(tmp_path: Path, *args: str, host: str = "127.0.0.1") -> Iterator[str]:
    """``relayrace ARGS --port P`` in its own process, on a free port of ``host``: its base
    URL once it answers."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    process = subprocess.Popen([sys.executable, "-m", "relayrace.cli", *args, "--port",
                                str(port)], stderr=subprocess.PIPE, text=True, env=env,
                               cwd=tmp_path)
    url = f"http://{host}:{port}"
    started = time.monotonic()
    try:
        while True:  # up once it answers anything
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None:
                    assert process.stderr is not None
                    pytest.fail(f"relayrace {args[0]} did not start: {process.stderr.read()}")
                assert time.monotonic() - started < 60, "the server did not answer in 60 s"
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(10)
        assert process.stderr is not None
        process.stderr.close()


SERVERS = {  # command, and a POST that changes state (what a rebinding page would send)
    "serve": (["serve", TEAM, "--db", "s.db"], "/api/sessions", {}),
    "a2a serve": (["a2a", "serve", TEAM, "--db", "s.db"], "/",
                  {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}),
    "mcp serve": (["mcp", "serve", TEAM], "/mcp",
                  {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                      "protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "probe", "version": "1"}}}),
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def _refused(response: httpx.Response, status: int, kind: str) -> None:
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["type"] == kind
    flag = "--allowed-host" if status == 421 else "--allowed-origin"
    assert flag in error["message"]  # it says how to open it up


def _secured(response: httpx.Response) -> None:
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("name", list(SERVERS))
def test_by_default_each_server_refuses_a_rebound_host_and_a_foreign_page(
        name: str, tmp_path: Path) -> None:
    command, path, body = SERVERS[name]
    with cli(tmp_path, *command) as url:
        port = url.rsplit(":", 1)[1]
        with httpx.Client(base_url=url, headers=MCP_HEADERS, timeout=30) as http:
            _refused(http.get(path, headers={"Host": f"{FOREIGN}:{port}"}), 421,
                     "misdirected_request")
            _refused(http.post(path, json=body, headers={"Origin": f"http://{FOREIGN}"}), 403,
                     "forbidden_origin")
            _secured(http.post(path, json=body, headers={"Origin": url}))


@pytest.mark.parametrize("name", list(SERVERS))
def test_each_server_answers_only_allowed_hosts_and_origins(name: str, tmp_path: Path) -> None:
    command, path, body = SERVERS[name]
    with cli(tmp_path, *command, "--allowed-host", "relay.example",
             "--allowed-origin", "https://app.example") as url:
        port = url.rsplit(":", 1)[1]
        with httpx.Client(base_url=url, headers=MCP_HEADERS, timeout=30) as http:
            # A page on attacker.example, rebound to 127.0.0.1, reads nothing and runs nothing.
            for method in ("GET", "POST"):
                response = http.request(method, path, json=body,
                                        headers={"Host": f"{FOREIGN}:{port}"})
                _refused(response, 421, "misdirected_request")
                _secured(response)
            _refused(http.get(path, headers={"Host": FOREIGN}), 421, "misdirected_request")
            _refused(http.get(path, headers={"Host": "0.0.0.0"}), 421, "misdirected_request")
            # Loopback names and the allowed host pass, on any port.
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}",
                         f"relay.example:{port}", "relay.example"):
                answered = http.post(path, json=body, headers={"Host": host})
                assert answered.status_code < 400, (host, answered.text)
                _secured(answered)
            # A POST from a foreign page is refused; from the server's own page, a page on
            # another loopback port, or the allowed origin, it passes; without an Origin too.
            for origin in (f"http://{FOREIGN}", f"http://{FOREIGN}:{port}", "null",
                           "https://app.example:8443", "http://relay.example.evil"):
                _refused(http.post(path, json=body, headers={"Origin": origin}), 403,
                         "forbidden_origin")
            for origin in (url, f"http://localhost:{port}", "http://localhost:5173",
                           "https://app.example", "http://relay.example"):
                answered = http.post(path, json=body, headers={"Origin": origin})
                assert answered.status_code < 400, (origin, answered.text)
            # A page's GET is not refused for its Origin (the browser keeps the answer from it).
            assert http.get(path, headers={"Origin": f"http://{FOREIGN}"}).status_code != 403


def test_the_bind_address_is_an_allowed_host_unless_a_wildcard(tmp_path: Path) -> None:
    with cli(tmp_path, "serve", TEAM, "--db", "s.db", "--host", "127.0.0.2",
             host="127.0.0.2") as url:  # a loopback address, but not a LOOPBACK name
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert httpx.get(f"{url}/healthz", headers={"Host": FOREIGN}).status_code == 421
    with cli(tmp_path, "serve", TEAM, "--db", "s.db", "--host", "0.0.0.0") as url:
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert httpx.get(f"{url}/healthz", headers={"Host": "0.0.0.0"}).status_code == 421
        assert httpx.get(f"{url}/healthz", headers={"Host": FOREIGN}).status_code == 421


def test_access_reads_hosts_and_origins_as_browsers_send_them() -> None:
    access = Access(["::1", "10.0.0.5:8000", "0.0.0.0", "", "Relay.Example"],
                    ["https://App.Example:443/", "http://tool.example:3000"])
    assert access.host_ok("[::1]:9") and access.host_ok("LOCALHOST")
    assert access.host_ok("relay.example")
    assert access.host_ok("10.0.0.5:8000") and not access.host_ok("10.0.0.5:8001")
    for host in ("", "0.0.0.0:8000", "localhost.", "evil@localhost", "localhost:x",
                 "127.0.0.1.nip.io", "[::2]:80"):
        assert not access.host_ok(host), host
    assert access.origin_ok("https://app.example") and access.origin_ok("http://tool.example:3000")
    assert not access.origin_ok("http://tool.example:3001")
    assert not access.origin_ok("http://app.example") and not access.origin_ok("null")
    assert access.origin_ok("http://10.0.0.5:8000") and not access.origin_ok("file://")
    opened = Access(["*"], ["*"])
    assert opened.host_ok(FOREIGN) and opened.origin_ok("null")
    with pytest.raises(UserError, match="allowed host is a name"):
        Access(["http://relay.example"])
    with pytest.raises(UserError, match=r"allowed origin is scheme://host\[:port\]"):
        Access([], ["relay.example"])
