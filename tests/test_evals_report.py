"""The eval run's HTML report in a real headless Chromium (the system's), driven by
Playwright: self-contained, with its figures in the rendered page, and a screenshot."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from relayrace.evals import load_cases, run_eval
from relayrace.evals.baseline import compare
from relayrace.evals.html import html_report

playwright_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "examples" / "support"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("RELAYRACE_REQUIRE_CHROMIUM"):  # CI: never skipped
    raise RuntimeError("The eval report's browser test needs the system's Chromium, and CI "
                       "requires it: install Debian's chromium package.")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no system Chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def report(path: Path) -> str:
    """The report of the support cases x 3 on a model that misroutes now and then."""
    sys.path.insert(0, str(SUPPORT))
    sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
    try:
        from eval_misroute import flaky
        from team import build_team
    finally:
        sys.path.remove(str(SUPPORT))
        sys.path.remove(str(Path(__file__).parent / "fixtures"))
    import asyncio

    team = build_team("openai:gpt-4o-mini")
    cases = load_cases(SUPPORT / "evals.yaml")
    baseline = asyncio.run(run_eval(team, cases, model=flaky, repeat=1, concurrency=1))
    result = asyncio.run(run_eval(team, cases, model=flaky, repeat=3, concurrency=1,
                                  prices={"*": (0.15, 0.60)}, label="examples/support",
                                  cases_file="examples/support/evals.yaml"))
    page = html_report(result, baseline=compare(baseline, result))
    path.write_text(page, encoding="utf-8")
    return page


def test_the_report_renders_its_figures_offline(tmp_path: Path) -> None:
    html = report(tmp_path / "report.html")
    # Self-contained: nothing to fetch, no script.
    assert "<script" not in html and "<link" not in html and "src=" not in html
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto((tmp_path / "report.html").as_uri())
            assert requests == [(tmp_path / "report.html").as_uri()]  # nothing else loaded
            check(page)
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            data = shot.read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
        finally:
            browser.close()


def check(page: Any) -> None:
    assert page.locator("h1").inner_text() == "Eval of examples/support"
    # Pass rates as bars: one per case, drawn with a width, the misrouted cases below 100%.
    bars = page.locator("#pass-rates g.bar")
    assert bars.count() == 13
    rates = [float(bars.nth(i).get_attribute("data-rate")) for i in range(13)]
    assert min(rates) < 1.0 and max(rates) == 1.0
    box = page.locator("#pass-rates").bounding_box()
    assert box is not None and box["width"] > 400 and box["height"] > 200
    # The confusion matrix as a heat map: the diagonal, and the misroutes to technical.
    cells = page.locator("#confusion g.cell")
    assert cells.count() > 0
    misrouted = page.locator('#confusion g.cell[data-expected="billing"][data-reached="technical"]')
    assert int(misrouted.get_attribute("data-count")) > 0
    right = page.locator('#confusion g.cell[data-expected="account"][data-reached="account"]')
    assert int(right.get_attribute("data-count")) > 0
    assert page.locator("#confusion").bounding_box()["width"] > 200
    # Token and latency distributions as histograms.
    for figure in ("#tokens", "#latency"):
        counts = [int(b.get_attribute("data-count"))
                  for b in page.locator(f"{figure} g.bin").all()]
        assert sum(counts) > 30 and page.locator(figure).bounding_box()["height"] > 100
    # The failures with their first divergence, and the comparison with the baseline.
    failures = page.locator("#failures").inner_text()
    assert "- billing" in failures and "+ technical" in failures
    assert page.locator("#baseline tr").count() == 14
    # Every failing run listed, each linking to its case's drill-down.
    failed = page.locator("details.run[data-status=failed]").count()
    assert failed > 1 and page.locator("#failures tr").count() == failed + 1
    # Per case a <details> with every run; a failing one open, its first divergence marked.
    assert page.locator("details.case").count() == 13
    assert page.locator("details.run").count() == 39
    run = page.locator("details.run[data-status=failed]").first
    assert run.get_attribute("open") is not None
    diverged = run.locator("tr.diverged")
    assert diverged.count() == 1 and "◀ first divergence" in diverged.inner_text()
    assert "technical" in diverged.inner_text()
    assert "ms" in run.locator("summary").inner_text()
    # Readable: no text drawn smaller than 11 px (an SVG scaled down counts as drawn).
    smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll(
        'text, td, th, p, li, summary, b, span, figcaption')].filter(e =>
        e.getBoundingClientRect().width > 0).map(e => {
            const svg = e.closest('svg'); let size = parseFloat(getComputedStyle(e).fontSize);
            if (svg && svg.viewBox.baseVal && svg.viewBox.baseVal.width)
                size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
            return size; }))""")
    assert smallest >= 11, smallest
    latency = page.locator("#latency").locator("xpath=..").inner_text()
    assert " ms" in latency and " s " not in latency
