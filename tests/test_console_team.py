"""The console as a new user meets it (issue 39), in the system's Chromium (Playwright): it opens
on the team, each agent with the model it really runs on and people and approval gates marked,
with a box that starts a chat with no session first; sessions are listed with a time and a
title, a new one before its first run; the Trace tab and History draw one waterfall; a fork
starts at any agent with its context edited; who decided an approval shows in the
conversation, History and the inbox (the header's usage while a run streams: the live graph's
test in test_console_workbench.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")

from relayrace import Agent, human  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from relayrace.testing import FunctionModel, text  # noqa: E402
from server_team import front, refund  # noqa: E402
from test_console import browser, pytestmark, shot  # noqa: E402
from test_server import uvicorn_server  # noqa: E402

__all__ = ["browser", "pytestmark"]


def _page(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return page, errors


def _echo(request: Any) -> Any:
    said = next(m.content for m in reversed(request.messages) if m.role == "user")
    return text(f"Echo: {said}")


def test_the_console_opens_on_the_team_and_a_chat_starts_with_no_session(
        browser: Any, tmp_path: Path) -> None:
    desk = Agent("desk", instructions="Help.", description="The desk.",
                 model="openai:gpt-4o-mini", tools=[refund],
                 sub_agents=[human("supervisor", description="A person on call.")])
    override = FunctionModel(_echo, name="models.py:model")  # as `serve --model models.py:model`
    app = create_app([desk], store=SQLiteStore(tmp_path / "s.db"), model=override)
    with uvicorn_server(app) as url:
        page, errors = _page(browser, url)
        page.locator("#home svg.team-graph g.node").first.wait_for()
        assert page.locator("#session").is_hidden() and page.locator("#sessions li").count() == 0
        nodes = page.locator("#home g.node").evaluate_all("""gs => gs.map(g => ({
            name: g.dataset.name, kind: g.dataset.kind, model: g.dataset.model || '',
            classes: g.getAttribute('class'),
            detail: g.querySelector('.node-detail').textContent}))""")
        by = {n["name"]: n for n in nodes}
        # The model the server runs every agent on, not the one the team file names.
        assert by["desk"]["model"] == "models.py:model"
        assert by["desk"]["detail"] == "react · models.py:model"
        assert (by["supervisor"]["kind"], by["supervisor"]["detail"]) == ("human", "a person")
        assert "human" in by["supervisor"]["classes"] and by["supervisor"]["model"] == ""
        assert "gated" in by["tool:refund"]["classes"]
        assert by["tool:refund"]["detail"] == "tool · needs approval"
        assert page.locator("#start-agent option").all_text_contents() == ["desk",
                                                                           "supervisor"]

        # A chat starts from the box: the session is made by the first message.
        page.fill("#start-input", "hello team,\nfrom the first screen")
        page.press("#start-input", "Enter")
        page.locator("#conversation").get_by_text(
            "Echo: hello team,\nfrom the first screen").first.wait_for()
        assert page.locator("#home").is_hidden()
        row = page.locator("#sessions li[data-session]").first
        row.wait_for()
        assert row.locator(".row-title").inner_text() == "hello team, from the first screen"
        assert re.fullmatch(r"\d\d:\d\d( [AP]M)?", row.locator(".when").inner_text())

        # A session made with New is listed before its first run.
        page.click("#new-session")
        page.locator("#sessions li[data-session]").nth(1).wait_for()
        fresh = page.locator("#sessions li[data-session]").first
        assert fresh.locator(".row-title").inner_text() == "(no messages yet)"
        assert fresh.locator(".badge").inner_text() == "idle"
        listed = httpx.get(f"{url}/api/sessions").json()["sessions"]
        assert fresh.get_attribute("data-session") == listed[0]["session_id"]
        page.click("#open-team")  # and back to the team
        page.locator("#home").wait_for()
        assert page.locator("#session").is_hidden()
        assert errors == []


def test_the_team_screen_of_the_example_team(browser: Any, tmp_path: Path) -> None:
    """The README's picture: the served teams, sessions listed with their titles and times."""
    desk = Agent("desk", instructions="Help.", description="The desk.",
                 model=FunctionModel(_echo), tools=[refund],
                 sub_agents=[human("supervisor", description="A person on call.")])
    app = create_app([front, desk], store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        for said in ("research relay races", "refund INV-4", "hello there"):
            sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
        page, errors = _page(browser, url)
        page.locator("#home svg.team-graph[data-team=desk] g.node").first.wait_for()
        page.locator("#sessions li[data-session]").nth(2).wait_for()
        titles = page.locator("#sessions .row-title").all_text_contents()
        assert titles == ["hello there", "refund INV-4", "research relay races"]
        shot(page, tmp_path / "console.png")
        assert errors == []


def test_the_trace_tab_and_history_draw_one_waterfall(browser: Any, tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "research relay races"},
                   timeout=30)
        page, errors = _page(browser, url)
        page.locator(f"#sessions li[data-session='{sid}']").click()
        page.locator("#conversation .msg").first.wait_for()
        read = """rs => rs.map(r => {
            const track = r.querySelector('.span-track').getBoundingClientRect();
            const bar = r.querySelector('.span-bar').getBoundingClientRect();
            return {kind: r.dataset.kind, label: r.querySelector('.span-label').textContent,
                    indent: r.querySelector('.span-label').style.paddingLeft,
                    time: r.lastChild.textContent, inside: bar.left >= track.left - 0.5
                      && bar.right <= track.right + 0.5 && bar.width > 0,
                    track: track.width}; })"""
        page.click("#tab-trace")
        page.locator("#trace .span-row").first.wait_for()
        top = page.locator("#trace .span-row").evaluate_all(read)
        pane = page.locator("#trace").evaluate("e => e.getBoundingClientRect().width")
        page.click("#tab-history")
        run = page.locator("#history details.run").first
        run.get_by_role("button", name="Trace").click()
        run.locator(".span-row").first.wait_for()
        history = run.locator(".span-row").evaluate_all(read)
        same = ["kind", "label", "indent", "time"]
        assert [{k: s[k] for k in same} for s in top] == [{k: s[k] for k in same}
                                                          for s in history]
        labels = [s["label"] for s in top]
        assert "delegation front → researcher" in labels and all("->" not in x for x in labels)
        tool = labels.index("tool researcher")  # the delegation nested under its tool call
        assert labels[tool + 1] == "delegation front → researcher"
        assert float(top[tool + 1]["indent"][:-3]) > float(top[tool]["indent"][:-3])
        assert all(s["inside"] for s in top + history), top + history
        assert all(s["track"] > pane * 0.5 for s in top)  # the track takes the pane's width

        # A model call's detail: the tools it was offered, and its raw JSON.
        run.locator(".span-row[data-kind=model]").first.click()
        detail = run.locator(".span-detail")
        assert "tools offered: 3" in detail.inner_text()
        offered = detail.locator(".tools-offered li").evaluate_all(
            "ls => ls.map(l => l.dataset.tool)")
        assert offered == ["researcher", "ask_user", "transfer_to_billing"]
        assert detail.locator("details.raw pre").is_hidden()
        detail.get_by_text("Raw JSON").click()
        raw = detail.locator("details.raw pre").inner_text()
        assert '"kind": "model"' in raw and '"span_id"' in raw
        shot(page, tmp_path / "waterfall.png")
        assert errors == []


def test_a_fork_starts_at_any_agent_with_its_context_edited(browser: Any,
                                                            tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        for said in ("hello one", "hello two"):
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
        page, errors = _page(browser, url)
        page.locator(f"#sessions li[data-session='{sid}']").click()
        page.locator("#conversation .msg").first.wait_for()
        page.click("#tab-history")
        first = page.locator("#history details.run").first
        first.locator(":scope > summary").click()
        end = first.locator("li.event").last
        at = int(end.get_attribute("data-seq") or 0)
        end.click()
        first.get_by_role("button", name="Fork from here").click()
        form = page.locator("#history .fork-form")
        context = form.locator(".context-message")
        assert context.evaluate_all("ls => ls.map(l => [l.dataset.seq, "
                                    "l.querySelector('.who').textContent, "
                                    "l.querySelector('textarea').value])") == [
            ["2", "#2 user", "hello one"], ["3", "#3 front", "Echo: hello one"]]
        assert "active agent front" in form.inner_text()
        context.first.locator("textarea").fill("refund INV-3, said before")
        form.locator("textarea[name=message]").fill("refund INV-7")
        # Any agent of the team, the served entry point or not.
        options = form.locator("select[name=agent] option").evaluate_all(
            "os => os.map(o => o.value)")
        assert options == ["", "front", "billing", "researcher"]
        form.locator("select[name=agent]").select_option("billing")
        shot(page, tmp_path / "fork-form.png")
        form.get_by_role("button", name="Fork and run").click()
        page.locator("#pending .item[data-kind=approval]").wait_for()
        fork_id = page.locator("#session-title").inner_text().split(" · ")[-1]
        assert fork_id != sid and "INV-7" in page.locator("#pending").inner_text()
        forked = httpx.get(f"{url}/api/sessions/{fork_id}").json()
        assert forked["forked_at"] == at
        assert forked["events"][1]["message"]["content"] == "refund INV-3, said before"
        runs = httpx.get(f"{url}/api/sessions/{fork_id}/runs").json()["runs"]
        assert runs[-1]["agents"] == ["billing"] and runs[-1]["input"] == "refund INV-7"
        origin = httpx.get(f"{url}/api/sessions/{sid}").json()["events"]
        assert origin[1]["message"]["content"] == "hello one"  # the origin as it was
        assert errors == []


def test_who_decided_shows_in_the_conversation_history_and_inbox(browser: Any,
                                                                 tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"), user="alice")
    with uvicorn_server(app) as url:
        made = {}
        for said in ("refund INV-4", "refund INV-5"):
            sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
            made[said] = sid
        page, errors = _page(browser, url)
        page.locator(f"#sessions li[data-session='{made['refund INV-4']}']").click()
        page.locator("#pending .item[data-kind=approval]").get_by_role(
            "button", name="Approve").click()
        page.get_by_text("Done: refund issued for INV-4.").first.wait_for()
        decided = page.locator("#conversation .decided")
        assert re.fullmatch(r"✔ approved refund by alice at .+", decided.inner_text())
        page.click("#tab-history")  # the decision ends the run that stopped for it
        stopped = page.locator("#history details.run").first
        stopped.locator(":scope > summary").click()
        stopped.locator("li.event[data-kind=approval_decided]").wait_for()
        assert page.locator("#history li.event[data-kind=approval_decided] .what").inner_text(
            ) == decided.inner_text()

        page.click("#open-inbox")
        item = page.locator("#inbox .inbox-item")
        item.wait_for()
        assert item.get_attribute("data-session") == made["refund INV-5"]
        assert item.locator(".inbox-user").inner_text() == "user: refund INV-5"
        assert re.fullmatch(r"waiting since .+ \(\d+ min\)",
                            item.locator(".waiting-since").inner_text())
        done = page.locator("#inbox .decided-item")
        assert done.count() == 1 and done.get_attribute("data-session") == made["refund INV-4"]
        assert done.inner_text().startswith("✔ approved refund by alice at ")
        shot(page, tmp_path / "inbox.png")
        assert errors == []
