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

from relayrace.evals import Case, Expect, ExpectFinal, run_eval  # noqa: E402
from relayrace.server import create_app  # noqa: E402
from relayrace.sessions import SQLiteStore  # noqa: E402
from relayrace.testing import ScriptedModel, text, tool_call  # noqa: E402
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
        data = httpx.get(f"{url}/api/evals/{result.run_id}").json()
        assert data["pass_rate"] == 0.5
        assert data["confusion"] == {"expected": ["billing"], "reached": ["billing", "technical"],
                                     "accuracy": 0.5, "rows": [[2, 2]]}
        child = data["runs"][0]["session_id"]
        assert httpx.get(f"{url}/api/evals/{child}").status_code == 404
        assert httpx.get(f"{url}/api/evals/nosuch").status_code == 404

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator(f"#sessions li[data-session='{result.run_id}']").click()
        page.locator("#eval-summary").wait_for()
        rates = page.locator("#eval-summary tr[data-case]").evaluate_all(
            "rs => rs.map(r => [r.dataset.case, r.children[1].textContent])")
        assert rates == [["refund", "100%"], [HOSTILE, "0%"]]
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
