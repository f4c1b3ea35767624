"""Eval runs in the console (Chromium via Playwright): pass rates per case, the routing
confusion matrix, each case run's first divergence and a link into its session; case names
and answers stay text."""

from __future__ import annotations

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("playwright.sync_api")

from relayrace import UserError  # noqa: E402
from relayrace.evals import Case, Expect, ExpectFinal, load_cases, run_eval  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from relayrace.testing import ScriptedModel, text, tool_call  # noqa: E402
from server_team import front  # noqa: E402
from test_console import browser, pytestmark, shot  # noqa: E402
from test_server import uvicorn_server  # noqa: E402

__all__ = ["browser", "pytestmark"]

HOSTILE = '<img src=x id=injected onerror="document.title=1"><b id=bold>hi</b>'
SUPPORT = Path(__file__).resolve().parent.parent / "examples" / "support"


def _team() -> Any:
    sys.path.insert(0, str(SUPPORT))
    try:
        sys.modules.pop("team", None)
        return __import__("team").build_team("openai:gpt-4o-mini")
    finally:
        sys.path.remove(str(SUPPORT))


def _model(case: Case) -> ScriptedModel:
    """Billing questions reach billing; everything else is misrouted to technical."""
    to = "billing" if case.id == "refund" else "technical"
    return ScriptedModel(by_agent={"triage": [tool_call(f"transfer_to_{to}", {})],
                                   to: [text(HOSTILE)]})


def test_an_eval_run_opens_with_pass_rates_matrix_divergences_and_links(
        browser: Any, tmp_path: Path) -> None:
    team = _team()
    cases = [Case(id="refund", input="charged twice",
                  expect=Expect(path=["triage", "billing"], final=ExpectFinal(agent="billing"))),
             Case(id=HOSTILE, input="charged again",
                  expect=Expect(path=["triage", "billing"], final=ExpectFinal(agent="billing")))]

    async def evaluate() -> Any:
        store = SQLiteStore(tmp_path / "s.db")
        try:
            return await run_eval(team, cases, model=_model, repeat=2, store=store,
                                  cases_file="cases.yaml")
        finally:
            await store.aclose()
    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        result = pool.submit(asyncio.run, evaluate()).result()
    app = create_app(team, store=SQLiteStore(tmp_path / "s.db"))
    with uvicorn_server(app) as url:
        data = httpx.get(f"{url}/api/sessions/{result.run_id}/eval").json()["eval"]
        assert data["pass_rate"] == 0.5
        assert data["confusion"] == {"expected": ["billing"], "reached": ["billing", "technical"],
                                     "accuracy": 0.5, "rows": [[2, 2]],
                                     "summary": "50% right"}
        child = data["runs"][0]["session_id"]
        assert httpx.get(f"{url}/api/sessions/{child}/eval").json()["eval"] is None
        assert httpx.get(f"{url}/api/sessions/nosuch/eval").status_code == 404

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator(f"#sessions li[data-session='{result.run_id}']").click()
        page.locator("#eval-summary").wait_for()
        rates = page.locator("#eval-summary tr[data-case]").evaluate_all(
            "rs => rs.map(r => [r.dataset.case, r.children[1].textContent])")
        assert rates == [["refund", "100%"], [HOSTILE, "0%"]]
        assert "Routing: 50% right" in page.locator("#eval h3").all_text_contents()
        cells = page.locator("#eval-confusion td").all_text_contents()
        assert cells == ["2", "2"]
        diffs = page.locator("#eval-runs tr.eval-run.failed .eval-diff").all_text_contents()
        assert diffs == ["path:   triage\n- billing\n+ technical"] * 2
        assert page.locator("#injected, #bold").count() == 0  # case names and answers are text
        shot(page, tmp_path / "eval.png")
        page.click("#tab-history")  # another tab hides the eval view
        assert page.locator("#eval").is_hidden() and page.locator("#history").is_visible()
        page.click("#tab-eval")
        assert page.locator("#eval").is_visible()

        page.locator("#eval-runs tr.eval-run.failed button.link").first.click()
        page.wait_for_function("() => document.querySelector('#tab-eval').hidden")
        assert page.locator("#conversation").is_visible()
        assert page.locator("#session-title").text_content().endswith(data["runs"][2]["session_id"])
        assert not errors


def test_save_as_eval_case_shows_the_yaml_and_adds_only_to_the_servers_case_file(
        browser: Any, tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    app = create_app(front, store=SQLiteStore(tmp_path / "s.db"), eval_cases=cases)
    with uvicorn_server(app) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": HOSTILE}, timeout=30)
        bad = httpx.post(f"{url}/api/sessions/{sid}/eval-case", json={"into": "/etc/x.yaml"})
        assert bad.status_code == 422  # a path is not the browser's to give

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator(f"#sessions li[data-session='{sid}']").click()
        page.locator("#conversation .msg").first.wait_for()
        page.click("#save-eval-case")
        yaml_text = page.locator("#eval-case .eval-yaml").text_content()
        assert f"- id: session-{sid}" in yaml_text and "path:\n      - front" in yaml_text
        assert "# Echo: " + HOSTILE in yaml_text  # the answer, as a comment, as text
        assert page.locator("#eval-case a").get_attribute("download") == f"session-{sid}.yaml"
        assert not cases.exists()  # shown, not written, until asked
        page.fill("#eval-case input", "greeting")
        page.click("#eval-case-append")
        page.locator("#eval-case .eval-saved").wait_for()
        assert page.locator("#injected, #bold").count() == 0
        shot(page, tmp_path / "capture.png")
        assert [c.id for c in load_cases(cases)] == ["greeting"]
        page.click("#eval-case-append")  # the same id again: refused, the file kept
        page.locator("#error").wait_for()
        assert "is there already" in page.locator("#error").text_content()
        assert [c.id for c in load_cases(cases)] == ["greeting"]
        assert not errors

    plain = create_app(front, store=SQLiteStore(tmp_path / "t.db"))
    with uvicorn_server(plain) as url:
        sid = httpx.post(f"{url}/api/sessions", json={}).json()["session_id"]
        httpx.post(f"{url}/api/sessions/{sid}/runs", json={"input": "hello"}, timeout=30)
        shown = httpx.post(f"{url}/api/sessions/{sid}/eval-case", json={}).json()
        assert shown["case_file"] is None and "input: hello" in shown["yaml"]
        refused = httpx.post(f"{url}/api/sessions/{sid}/eval-case", json={"append": True})
        assert refused.status_code == 400 and "--eval-cases" in refused.text
    with pytest.raises(UserError, match="case file"):
        create_app(front, eval_cases=tmp_path / "cases.txt")
