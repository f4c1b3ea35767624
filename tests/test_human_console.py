"""The console with a person holding the conversation: the takeover shows a reply box and a
hand-back control, in a real headless Chromium (the system's), with a screenshot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")

from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from test_console import CHROMIUM, browser, shot  # noqa: E402, F401
from test_human_server import desk  # noqa: E402
from test_server import uvicorn_server  # noqa: E402

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium")


def test_the_console_replies_as_the_person_and_hands_back(browser: Any,  # noqa: F811
                                                          tmp_path: Path) -> None:
    app = create_app(desk(), store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "I want a person"},
                   timeout=30)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator("#sessions li").first.click()
        marker = page.locator("#conversation [data-kind=takeover]")
        marker.wait_for()
        assert marker.inner_text() == "support-desk (a person) holds the conversation"
        takeover = page.locator("#pending .item[data-kind=takeover]")
        takeover.wait_for()
        assert "Reply as support-desk" in takeover.inner_text()

        # The person replies from the page: the reply is the human agent's message.
        takeover.locator("input").fill("Hi, Ana from support here.")
        takeover.get_by_role("button", name="Reply").click()
        page.locator("#conversation .msg.assistant").get_by_text(
            "Hi, Ana from support here.").first.wait_for()
        page.locator("#session-status.finished").wait_for()

        # The user writes again: it reaches the person, who hands back to the agent that
        # transferred; that agent answers the user's message.
        page.fill("#input", "still there?")
        page.click("#send")
        page.locator("#pending .item[data-kind=takeover]").wait_for()
        shot(page, tmp_path / "takeover.png")
        if os.environ.get("RELAYRACE_KEEP_SHOTS"):
            shot(page, Path(os.environ["RELAYRACE_KEEP_SHOTS"]) / "takeover.png")
        takeover.get_by_role("button", name="Hand back to triage").click()
        page.locator("#conversation .msg.assistant").get_by_text(
            "Back with triage: anything else?").first.wait_for()
        page.locator("#session-status.finished").wait_for()
        assert "support-desk → triage" in \
            page.locator("#conversation .handoff").last.inner_text()
        assert errors == []
        page.close()
