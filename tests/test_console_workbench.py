"""The console's workbench in the system's Chromium (Playwright): a session's runs in the
History tab, and time travel (fork from any event, edit the next message, run on), with
screenshots; agent-written text stays text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")

from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from server_team import front  # noqa: E402
from test_console import browser, pytestmark, shot  # noqa: E402
from test_server import uvicorn_server  # noqa: E402

__all__ = ["browser", "pytestmark"]

HOSTILE = '<img src=x id=injected onerror="document.title=1"><b id=bold>hi</b>'


def test_history_lists_every_run_and_forks_from_any_event(browser: Any, tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        for said in ("hello one", "research relay races", HOSTILE, "refund INV-4"):
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
        origin = httpx.get(f"{url}/api/sessions/{sid}").json()["events"]
        bad = httpx.post(f"{url}/api/sessions/{sid}/fork", json={"at": len(origin) + 1})
        assert bad.status_code == 400 and f"from 1 to {len(origin)}" in bad.text

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator("#sessions li").first.click()
        page.locator("#conversation .handoff").first.wait_for()
        page.click("#tab-history")
        runs = page.locator("#history details.run")
        runs.nth(3).wait_for()
        assert runs.count() == 4
        rows = runs.evaluate_all("""rs => rs.map(r => ({
            input: r.querySelector('.run-input').textContent,
            status: r.querySelector('.badge').textContent,
            path: r.querySelector('.run-path').textContent,
            stats: r.querySelector('summary').textContent}))""")
        assert [r["input"] for r in rows] == ["hello one", "research relay races", HOSTILE,
                                              "refund INV-4"]
        assert [r["status"] for r in rows] == ["completed"] * 3 + ["interrupted"]
        assert rows[3]["path"] == "front → billing" and rows[0]["path"] == "front"
        assert all(" req · " in r["stats"] and " tok" in r["stats"] for r in rows)
        assert page.locator("#injected, #bold").count() == 0  # the hostile input is text
        last = runs.nth(3).locator("li.event")
        assert last.count() > 3 and last.first.get_attribute("data-kind") == "run_started"
        shot(page, tmp_path / "history.png")

        # Any run opens as a waterfall: the delegated child nested under its delegation.
        second = runs.nth(1)
        second.locator(":scope > summary").click()
        second.get_by_role("button", name="Trace").click()
        second.locator(".span-row").first.wait_for()
        page.wait_for_function("""() => {
            const bars = [...document.querySelectorAll('#history .run-trace .span-bar')];
            return bars.length >= 7 && bars.every(b => b.getBoundingClientRect().width > 0);
        }""")
        spans = second.locator(".span-row").evaluate_all("""rs => rs.map(r => ({
            kind: r.dataset.kind, label: r.querySelector('.span-label').textContent,
            indent: parseFloat(r.querySelector('.span-label').style.paddingLeft) || 0,
            left: r.querySelector('.span-bar').getBoundingClientRect().left}))""")
        kinds = [s["kind"] for s in spans]
        assert kinds[:2] == ["run", "agent"] and {"model", "tool", "delegation"} <= set(kinds)
        child = kinds.index("delegation")
        assert spans[child + 1]["label"] == "agent researcher"  # the child, nested under it
        assert spans[child + 1]["indent"] > spans[child]["indent"] > spans[1]["indent"]
        assert spans[-1]["kind"] == "model" and spans[-1]["left"] > spans[2]["left"]
        second.locator(".span-row[data-kind=tool]").click()
        detail = second.locator(".span-detail").inner_text()
        assert '{"query": "relay races"}' in detail and "first finding" in detail
        second.locator(".span-row[data-kind=model]").last.click()
        detail = second.locator(".span-detail").inner_text()
        assert "request: " in detail and "user: research relay races" in detail
        assert "Research done" in detail
        shot(page, tmp_path / "waterfall.png")
        second.locator(":scope > summary").click()  # closed again

        # One fork control per run (none per event). Fork at the end of the first run,
        # picked in its list: the next message is offered for editing.
        assert page.locator("#history .run-tools button.fork").all_text_contents() == [
            "Fork from here"] * 4
        assert page.locator("#history li.event button").count() == 0
        first = runs.nth(0)
        first.locator(":scope > summary").click()
        end = first.locator("li.event").last
        at = int(end.get_attribute("data-seq") or 0)
        assert end.get_attribute("data-kind") == "run_finished"
        end.click()
        first.get_by_role("button", name="Fork from here").click()
        form = page.locator("#history .fork-form")
        assert form.locator("select[name=at]").input_value() == str(at)
        assert form.locator("textarea[name=message]").input_value() == "research relay races"
        form.locator("textarea[name=message]").fill("hello two")
        form.locator("select[name=agent]").select_option("front")
        shot(page, tmp_path / "fork-form.png")
        form.get_by_role("button", name="Fork and run").click()
        page.get_by_text("Echo: hello two").first.wait_for()
        page.locator("#session-status.finished").wait_for()
        fork_id = page.locator("#session-title").inner_text().split(" · ")[-1]
        assert fork_id != sid
        shot(page, tmp_path / "fork.png")

        forked = httpx.get(f"{url}/api/sessions/{fork_id}").json()
        assert (forked["forked_from"], forked["forked_at"]) == (sid, at)
        assert forked["events"][:at] == origin[:at]
        assert forked["events"][at:] != origin[at:]
        listed = {s["session_id"]: s for s in httpx.get(f"{url}/api/sessions").json()["sessions"]}
        assert listed[fork_id]["forked_from"] == sid
        marks = page.locator("#sessions li").evaluate_all(
            "ls => ls.map(l => [l.dataset.session, !!l.querySelector('.fork-mark')])")
        assert sorted(marks) == sorted([[sid, False], [fork_id, True]])  # the fork marked

        # The fork's history names its origin, which opens from there.
        page.click("#tab-history")
        page.locator("#history .origin").wait_for()
        assert page.locator("#history .origin").inner_text() == f"Forked from {sid} at event {at}"
        assert page.locator("#history details.run").count() == 2
        page.locator("#history .origin button").click()
        page.wait_for_function(f"() => document.querySelector('#session-title')"
                               f".textContent.endsWith('{sid}')")
        page.locator("#history details.run").nth(3).wait_for()
        # ... and the origin lists its fork, which opens from there too
        forks = page.locator("#history .forks")
        assert forks.inner_text() == f"Forks of this session (1): {fork_id} at event {at}"
        assert errors == []


def test_usage_and_cost_per_agent_model_and_run(browser: Any, tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text('currency: "<b id=cinj>EUR</b>"\nmodels:\n  function:\n    input: 2.5\n'
                      '    output: 10\n  "<img id=pinj src=x>":\n    input: 1\n    output: 1\n')
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"), prices=str(prices))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        for said in ("hello one", "research relay races", "hello three"):
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
        usage = httpx.get(f"{url}/api/sessions/{sid}/usage").json()["usage"]
        used = usage["by_model"]["function"]
        expected = (used["input_tokens"] * 2.5 + used["output_tokens"] * 10) / 1_000_000
        assert usage["cost"]["total"] == pytest.approx(expected) and expected > 0
        assert set(usage["by_agent"]) == {"front", "researcher"}  # the child included
        assert usage["by_agent"]["researcher"]["requests"] == 1

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator("#sessions li").first.click()
        page.locator("#conversation .msg").first.wait_for()
        page.click("#tab-usage")
        page.locator("#usage .token-chart .turn").nth(2).wait_for()
        assert page.locator("#conversation").is_hidden()
        total = page.locator("#usage .total-cost").inner_text()
        assert total == f"{expected:.6f} <b id=cinj>EUR</b>"  # the currency shown as text
        assert page.locator("#cinj, #pinj").count() == 0
        agents = page.locator("#usage table[data-table=agent] tr[data-name]")
        assert agents.evaluate_all("rs => rs.map(r => r.dataset.name)") == ["front",
                                                                           "researcher"]
        assert page.locator("#usage table[data-table=model] tr[data-name=function] td.cost"
                            ).inner_text() == f"{expected:.6f} <b id=cinj>EUR</b>"
        # The chart: one bar per run, the research run (with its child) the tallest.
        heights = page.locator("#usage .token-chart .turn").evaluate_all(
            "gs => gs.map(g => g.getBoundingClientRect().height)")
        assert len(heights) == 3 and heights[1] == max(heights) and min(heights) > 0
        shot(page, tmp_path / "usage.png")
        page.click("#tab-history")
        page.locator("#history details.run").nth(2).wait_for()
        assert page.locator("#usage").is_hidden()
        assert errors == []


def test_the_graph_draws_every_team_and_numbers_a_runs_path(browser: Any,
                                                             tmp_path: Path) -> None:
    from relayrace import Agent
    from relayrace.teams.workflows import SequentialAgent
    from relayrace.testing import FunctionModel, text

    hostile = Agent('<b id=ninj>drafter</b>', instructions="Draft.",
                    model=FunctionModel(lambda r: text("drafted"), name="<i id=minj>m</i>"))
    reviewer = Agent("reviewer", instructions="Review.", model=FunctionModel(lambda r: text("ok")))
    pipeline = SequentialAgent("pipeline", steps=[hostile, reviewer])
    app = create_app([front, pipeline], store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        for said in ("hello one", "research relay races", "refund INV-4"):
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator("#sessions li").first.click()
        page.locator("#conversation .msg").first.wait_for()
        page.click("#tab-graph")
        page.locator("#graph .step-no").first.wait_for()
        assert page.locator("#graph svg.team-graph").count() == 2
        graph = page.locator("#graph svg[data-team=front]")
        nodes = graph.locator("g.node").evaluate_all(
            "gs => gs.map(g => [g.dataset.name, g.dataset.kind])")
        assert sorted(nodes) == [["billing", "agent"], ["front", "agent"],
                                 ["researcher", "agent"], ["tool:ask_user", "tool"],
                                 ["tool:refund", "tool"]]
        edges = graph.locator("g.edge").evaluate_all("""gs => gs.map(g => [g.dataset.source,
            g.dataset.target, g.dataset.kind, g.ownerSVGElement.querySelector(
              `.edge-label[data-index="${g.dataset.index}"]`).textContent])""")
        assert ["front", "billing", "handoff", "transfer"] in edges
        assert ["front", "researcher", "delegation", "delegates: researcher"] in edges
        # Every node and edge laid out with a size, nodes apart from one another.
        boxes = graph.locator("g.node rect").evaluate_all(
            "rs => rs.map(r => { const b = r.getBoundingClientRect(); "
            "return [b.x, b.y, b.width]; })")
        assert all(w > 100 for _, _, w in boxes) and len({(x, y) for x, y, _ in boxes}) == 5
        # The last run's path: front transferred to billing, step 1.
        taken = graph.locator("g.edge.taken")
        assert taken.count() == 1 and taken.get_attribute("data-target") == "billing"
        assert taken.locator(".step-no").text_content() == "1"
        # Each label whole in the chart and clear of every node; the badge clear of its label.
        clear = graph.evaluate("""svg => {
          const box = (n) => n.getBoundingClientRect();
          const apart = (a, b) => a.right <= b.left || b.right <= a.left || a.bottom <= b.top
            || b.bottom <= a.top;
          const chart = box(svg), nodes = [...svg.querySelectorAll('g.node rect')].map(box);
          const labels = [...svg.querySelectorAll('.edge-label')];
          const badge = box(svg.querySelector('.step-no circle'));
          return labels.map((l) => [l.textContent, box(l).left >= chart.left
            && box(l).right <= chart.right && nodes.every((n) => apart(box(l), n))])
            .concat([['badge', labels.every((l) => apart(box(l), badge))]]);
        }""")
        assert all(ok for _, ok in clear), clear
        shot(page, tmp_path / "graph.png")
        # The research run: the delegation to the researcher, numbered.
        page.locator("#graph select.run-picker").select_option("1")
        page.wait_for_function("() => document.querySelector("
                               "'#graph g.edge.taken')?.dataset.target === 'researcher'")
        assert graph.locator("g.edge.taken .step-no").text_content() == "1"
        # The workflow drawn as a group around its steps; a hostile name stays text.
        flow = page.locator("#graph svg[data-team=pipeline]")
        assert flow.locator("rect.group[data-workflow=pipeline]").count() == 1
        assert flow.locator("g.edge.step").count() == 2
        names = flow.locator(".node-name").evaluate_all("ts => ts.map(t => t.textContent)")
        details = flow.locator(".node-detail").evaluate_all("ts => ts.map(t => t.textContent)")
        assert "<b id=ninj>drafter</b>" in names and any("<i id=minj>m</i>" in d
                                                          for d in details)
        assert page.locator("#ninj, #minj").count() == 0
        assert errors == []


def test_the_inbox_answers_pending_work_across_sessions(browser: Any, tmp_path: Path) -> None:
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        made = {}
        for said in ("refund INV-4", "ask me", "refund INV-5", "hello"):
            sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
            httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": said}, timeout=30)
            made[said] = sid
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.wait_for_function("() => document.querySelector('#open-inbox')"
                               ".textContent === 'Inbox (3)'")
        page.click("#open-inbox")
        items = page.locator("#inbox .inbox-item")
        items.nth(2).wait_for()
        listed = items.evaluate_all("rs => rs.map(r => [r.dataset.session, r.dataset.kind, "
                                    "r.querySelector('.inbox-title').textContent])")
        assert sorted(listed) == sorted([
            [made["refund INV-4"], "approvals", 'Approve refund({"invoice": "INV-4"})'],
            [made["ask me"], "questions", "What is your name?"],
            [made["refund INV-5"], "approvals", 'Approve refund({"invoice": "INV-5"})']])
        shot(page, tmp_path / "inbox.png")

        page.locator(f"#inbox .inbox-item[data-session='{made['refund INV-4']}']").get_by_role(
            "button", name="Approve").click()
        page.wait_for_function("() => document.querySelectorAll('#inbox .inbox-item')"
                               ".length === 2")
        question = page.locator("#inbox .inbox-item[data-kind=questions]")
        question.locator("input").fill("Ada")
        question.get_by_role("button", name="Answer").click()
        page.wait_for_function("() => document.querySelectorAll('#inbox .inbox-item')"
                               ".length === 1")
        page.locator("#inbox .inbox-item").get_by_role("button", name="Reject").click()
        page.get_by_text("Nothing waits for a person.").wait_for()
        assert page.locator("#open-inbox").inner_text() == "Inbox (0)"

        said = {k: [e["message"]["content"] for e in httpx.get(
            f"{url}/api/sessions/{v}").json()["events"] if e["kind"] == "message"][-1]
            for k, v in made.items()}
        assert said["refund INV-4"] == "Done: refund issued for INV-4."
        assert said["ask me"] == "You said: Ada"
        assert said["refund INV-5"].startswith("Done: Rejected")
        assert errors == []


def test_the_graph_follows_a_streaming_run_live(browser: Any, tmp_path: Path) -> None:
    from server_team import slow_front

    app = create_app(slow_front(1.5), store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "hello"}, timeout=30)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator("#sessions li").first.click()
        page.locator("#conversation .msg").first.wait_for()
        page.click("#tab-graph")
        page.locator("#graph svg.team-graph g.node").first.wait_for()
        assert page.locator("#graph g.edge.taken").count() == 0  # "hello": no transfer
        assert page.locator("#session-usage").inner_text().startswith("1 requests · ")
        page.fill("#input", "refund INV-9")
        page.click("#send")
        # While billing's slow model call runs: billing is the active agent, the edge lit.
        page.wait_for_function("() => document.querySelector("
                               "'#graph g.node.active')?.dataset.name === 'billing'")
        assert page.locator("#graph g.edge.taken").get_attribute("data-target") == "billing"
        assert page.locator("#session-status").inner_text() == "running"
        # The header counts usage as the run streams: front's transfer, billing still to come.
        page.wait_for_function("() => document.querySelector('#session-usage').textContent"
                               ".startsWith('2 requests')")
        assert page.locator("#session-status").inner_text() == "running"
        shot(page, tmp_path / "graph-live.png")
        # The run stops for the approval: the path stays, numbered, nothing active.
        page.locator("#session-status.waiting").wait_for()
        page.wait_for_function("() => !document.querySelector('#graph g.node.active') && "
                               "document.querySelector('#graph g.edge.taken .step-no')")
        usage = httpx.get(f"{url}/api/sessions/{sid}").json()["usage"]
        assert usage["requests"] == 3 and page.locator("#session-usage").inner_text() == \
            f"{usage['requests']} requests · {usage['total_tokens']} tokens"
        assert errors == []


def test_the_session_list_is_paged_on_the_server(browser: Any, tmp_path: Path) -> None:
    from relayrace.sessions import MemoryStore

    app = create_app(front, store=MemoryStore())
    with uvicorn_server(app) as url, httpx.Client(base_url=url) as client:
        for n in range(105):
            sid = client.post("/api/sessions", json={}).json()["session_id"]
            client.post(f"/api/sessions/{sid}/runs", json={"input": f"hello {n}"}, timeout=30)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        page.locator("#sessions li.more").wait_for()
        assert page.locator("#sessions li[data-session]").count() == 100
        page.click("#sessions li.more")
        page.wait_for_function("() => document.querySelectorAll('#sessions li[data-session]')"
                               ".length === 105")
        assert page.locator("#sessions li.more").count() == 0
        rows = page.locator("#sessions li[data-session]").evaluate_all(
            "ls => ls.map(l => l.dataset.session)")
        assert len(set(rows)) == 105  # the second page continues the first
        page.fill("#search", "hello 7")  # searched on the server: 7 and 70 to 79
        page.wait_for_function("() => document.querySelectorAll('#sessions li[data-session]')"
                               ".length === 11")
