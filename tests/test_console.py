"""The web console in a real headless Chromium (the system's), driven by Playwright: each view
rendered from a served team's sessions, checked on the rendered page, with a screenshot."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
playwright_api = pytest.importorskip("playwright.sync_api")

from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from server_team import front  # noqa: E402
from test_server import uvicorn_server  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("RELAYRACE_REQUIRE_CHROMIUM"):  # CI: never skipped
    raise RuntimeError("The console's browser tests need the system's Chromium, and CI "
                       "requires them: install Debian's chromium package.")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium (python3 dev test "
                                "installs Debian's chromium when it can)")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--host-resolver-rules=MAP attacker.example 127.0.0.1"]  # a name rebound to loopback


@pytest.fixture(scope="module")
def browser() -> Any:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def shot(page: Any, path: Path) -> None:
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000  # a real, non-blank image


def test_the_console_shows_sessions_conversations_traces_and_steers_runs(
        browser: Any, tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        for said in ("research relay races", "my password is hunter2", "refund INV-4"):
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)

        # The list: the session, its active agent, status and usage.
        row = page.locator("#sessions li").first
        row.wait_for()
        assert page.locator("#sessions li").count() == 1
        assert row.locator(".badge").inner_text() == "waiting"
        assert row.locator("strong").inner_text() == "billing"
        assert "tokens" in row.inner_text()
        shot(page, tmp_path / "list.png")

        # The session: handoff marker, tool calls, the delegation and its report, guardrail.
        row.click()
        page.locator("#conversation .handoff").first.wait_for()
        handoff = page.locator("#conversation .handoff").first.inner_text()
        assert handoff == "↪ front → billing — a refund"
        delegation = page.locator("#conversation details.delegation").first
        assert "front delegated to researcher: ok" in delegation.locator("summary").inner_text()
        delegation.locator("summary").click()
        delegation.locator(".child .msg").first.wait_for()
        assert "first finding" in delegation.locator(".report").inner_text()
        assert "Found it." in delegation.locator(".child").inner_text()
        assert "content_filter" in page.locator("#conversation .guardrail").first.inner_text()
        # What the model saw was redacted (the log keeps what the user said).
        assert page.locator("#conversation .msg.assistant").get_by_text(
            "Echo: my [FILTERED] is hunter2").count() == 1
        tools = page.locator("#conversation .tool").all_inner_texts()
        assert any('⚙ refund({"invoice": "INV-4"})' in t for t in tools)
        pending = page.locator("#pending .item[data-kind=approval]")
        assert pending.count() == 1 and "refund" in pending.inner_text()
        shot(page, tmp_path / "session.png")

        # Approve: the run resumes and the page follows it live.
        pending.get_by_role("button", name="Approve").click()
        page.get_by_text("Done: refund issued for INV-4.").first.wait_for()
        page.locator("#session-status.finished").wait_for()

        # Send the next message; a question asked is answered from the page.
        page.fill("#input", "ask me something")
        page.click("#send")
        question = page.locator("#pending .item[data-kind=question]")
        question.wait_for()
        assert "What is your name?" in question.inner_text()
        question.locator("input").fill("Ada")
        question.get_by_role("button", name="Answer").click()
        page.get_by_text("You said: Ada").first.wait_for()
        page.locator("#session-status.finished").wait_for()  # the run followed to its end

        # The trace of the last run, as a waterfall with bars of real width.
        page.click("#tab-trace")
        page.locator("#trace .span-row").first.wait_for()
        kinds = page.locator("#trace .span-row").evaluate_all(
            "rows => rows.map(r => r.dataset.kind)")
        assert kinds[0] == "run" and {"agent", "model", "tool"} <= set(kinds)
        # Every bar laid out with a real width (measured in the page, once it has settled).
        page.wait_for_function("""() => {
            const bars = [...document.querySelectorAll('#trace .span-bar')];
            return bars.length >= 4 && bars.every(b => b.getBoundingClientRect().width > 0);
        }""")
        assert "ms" in page.locator("#trace").inner_text()
        shot(page, tmp_path / "trace.png")

        # Model and tool output is text on the page, never markup.
        page.click("#tab-conversation")
        page.click("#new-session")
        page.locator("#session-status.idle").wait_for()  # the new, empty session is open
        hostile = "<img src=x onerror=\"window.pwned=1\"><b>bold</b>"
        page.fill("#input", hostile)
        page.click("#send")
        page.get_by_text("Echo: " + hostile).first.wait_for()
        assert page.evaluate("window.pwned") is None
        assert page.locator("#conversation img, #conversation b").count() == 0
        page.locator("#sessions li").nth(1).wait_for()
        page.fill("#search", "research")
        page.wait_for_function("() => document.querySelectorAll('#sessions li').length === 1")
        assert errors == []
        page.close()


def test_the_console_asks_for_an_api_key_when_the_server_needs_one(
        browser: Any, tmp_path: Path) -> None:
    key = "console-key-0123456789"
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"), api_keys=[key])
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={},
                         headers={"X-API-Key": key}).json()["session_id"]
        httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "hello"},
                   headers={"X-API-Key": key}, timeout=30)
        page = browser.new_page()
        page.goto(url)
        page.locator("#error:not([hidden])").wait_for()
        assert "API key" in page.locator("#error").inner_text()
        assert page.locator("#sessions li").count() == 0
        page.fill("#key", key)
        page.locator("#key").dispatch_event("change")
        page.locator("#sessions li").first.wait_for()
        assert "Echo: hello" in page.locator("#sessions li").first.inner_text()
        page.close()


@contextmanager
def framer(target: str) -> Iterator[str]:
    """A page on another loopback port, under a foreign name, that frames ``target``'s
    console and posts to its API (as any web page the user visits could): its URL."""
    page = (f'<!doctype html><title>framer</title><iframe id="framed" src="{target}/" '
            f'onload="window.framed = true"></iframe><script>fetch("{target}/api/sessions", '
            f'{{method: "POST", mode: "no-cors", body: "{{}}"}})'
            '.finally(() => { window.posted = true; });</script>').encode()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://attacker.example:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_console_runs_under_its_policy_and_cannot_be_framed(
        browser: Any, tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        page = browser.new_page()
        said: list[str] = []
        page.on("console", lambda message: said.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda exc: said.append(f"pageerror: {exc}"))
        missing: set[str] = set()
        page.on("response", lambda r: missing.add(r.url) if r.status >= 400 else None)
        answer = page.goto(url)
        assert answer is not None
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert answer.headers["x-frame-options"] == "DENY"
        # The console works under it: it lists, creates, sends and shows the answer (its own
        # POSTs carry its origin, and pass).
        page.click("#new-session")
        page.fill("#input", "hello under a policy")
        page.click("#send")
        page.get_by_text("Echo: hello under a policy").first.wait_for()
        page.locator("#sessions li").first.wait_for()
        # No policy violation, no error (but the favicon the console has none of).
        assert [s for s in said if s.startswith(("error", "pageerror", "warning"))
                and "Failed to load resource" not in s] == []
        assert {u for u in missing if not u.endswith("/favicon.ico")} == set()

        # A page elsewhere frames nothing of it, and its POST is refused for its Origin.
        # (A page on another port of localhost is local software, and may post.)
        with framer(url) as elsewhere, page.expect_response(
                lambda r: r.url == f"{url}/api/sessions" and r.request.method == "POST"
        ) as posted:
            page.goto(elsewhere)
            page.wait_for_function("window.posted === true && window.framed === true")
            assert posted.value.status == 403
            assert page.frame_locator("#framed").locator("#sessions").count() == 0
            framed = [f for f in page.frames if f is not page.main_frame]
            assert len(framed) == 1 and not framed[0].url.startswith(url)
        assert any("frame-ancestors" in s for s in said), said

        # Rebound to 127.0.0.1, the page's own name reaches the server: it is refused.
        rebound = page.goto(url.replace("127.0.0.1", "attacker.example"))
        assert rebound is not None and rebound.status == 421
        assert "DNS rebinding" in rebound.text()

        # /docs loads Swagger UI from its CDN (served here by the test) and runs its inline
        # script under its own policy, and cannot be framed either.
        page.route("https://cdn.jsdelivr.net/**", lambda route: route.fulfill(
            content_type="text/javascript" if route.request.url.endswith(".js") else "text/css",
            body="window.SwaggerUIBundle = function (c) { document.getElementById("
                 "'swagger-ui').textContent = 'schema at ' + c.url; };"
                 "SwaggerUIBundle.presets = {}; SwaggerUIBundle.SwaggerUIStandalonePreset = 1;"
            if route.request.url.endswith(".js") else ""))
        said.clear()
        docs = page.goto(f"{url}/docs")
        assert docs is not None and "frame-ancestors 'none'" in docs.headers[
            "content-security-policy"]
        page.get_by_text("schema at /openapi.json").wait_for()
        assert [s for s in said if "Content Security Policy" in s] == []
        page.close()


def test_the_console_loads_in_three_requests_and_revalidates_them(
        browser: Any, tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        context = browser.new_context()  # one browser cache for both loads
        page = context.new_page()
        asked: list[tuple[str, int]] = []
        page.on("response", lambda r: asked.append((r.url.removeprefix(url), r.status)))
        page.goto(url)
        page.locator("#new-session").wait_for()
        page.wait_for_function("typeof loadGraph === 'function' && typeof loadInbox === "
                               "'function'")  # every module of the bundle ran
        files = [u for u, _ in asked if not u.startswith("/api/")]
        assert sorted(files) == ["/", "/console.css", "/console.js"]
        asked.clear()
        page.reload()
        page.locator("#new-session").wait_for()
        assert {u: s for u, s in asked if u in ("/console.css", "/console.js")} == {
            "/console.css": 304, "/console.js": 304}  # kept, and checked with the server
        context.close()
        script = httpx.get(f"{url}/console.js", headers={"Accept-Encoding": "gzip"})
        assert script.headers["content-encoding"] == "gzip"
        assert script.headers["content-type"].startswith("text/javascript")
        assert script.text.index("// --- app.js") < script.text.index("// --- evals.js")
        assert httpx.get(f"{url}/graph.js").text in script.text  # each module, as it is
        assert httpx.get(f"{url}/nothing.js").status_code == 404
