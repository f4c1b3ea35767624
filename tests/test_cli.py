"""Tests for the ``relayrace`` command line (offline: the fixture team runs on scripted models)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from relayrace import __version__
from relayrace.cli import EXIT_APPROVAL, app
from relayrace.cli import _run as cli
from relayrace.cli._render import EventPrinter
from relayrace.cli._target import resolve_target
from relayrace.core.events import (
    AgentEvent,
    ApprovalRequestedEvent,
    DelegationEvent,
    GuardrailTriggeredEvent,
    HandoffEvent,
    MessageEvent,
    RunFinishedEvent,
    TextDeltaEvent,
    ToolResultEvent,
    load_events,
)
from relayrace.core.exceptions import UserError
from relayrace.core.messages import Message
from relayrace.tracing import get_trace_processors

TEAM = Path(__file__).parent / "fixtures" / "cli_team.py"
runner = CliRunner(env={"COLUMNS": "200", "RELAYRACE_DB": None})


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


def run_team(db: Path | str, *extra: str, agent: str = "triage", prompt: str = "hi") -> Result:
    return invoke("run", f"{TEAM}:{agent}", prompt, "--db", db, *extra)


def assert_clean_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "Error:" in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def table_rows(text: str) -> list[list[str]]:
    """The cells of each body row of a rich table."""
    return [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in text.splitlines()
        if line.startswith("│")
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


# -- run ----------------------------------------------------------------------------------------


def test_run_shows_handoff_tools_answer_trace_and_usage(db: Path) -> None:
    result = run_team(db, "--session", "s1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "user → triage: hi" in out
    assert "↪ handoff triage → billing: billing question" in out
    assert '⚙ lookup_invoice({"invoice_id": "INV-7"})' in out
    assert "→ lookup_invoice: Invoice INV-7: 42.00 EUR" in out
    # The answer streamed as text deltas is printed once, not again with its message.
    assert out.count("Your invoice INV-7 is paid.") == 1
    assert "billing: Your invoice INV-7 is paid." in out
    # The transfer tool call itself is shown as the handoff line only.
    assert "transfer_to_billing" not in out
    # Trace tree: kinds, names, durations and model tokens.
    assert "run triage" in out
    assert "agent billing" in out
    assert "handoff triage -> billing" in out
    assert "tool lookup_invoice" in out
    assert "model scripted" in out
    assert " ms" in out
    assert re.search(r"model scripted .* ms  tokens \d+ in / \d+ out", out)
    # Usage table per agent path with a total.
    usage = out[out.index("Usage") :]
    for word in ("requests", "input tokens", "output tokens", "tool calls", "billing", "triage"):
        assert word in usage
    cells = {row[0]: row[1:] for row in table_rows(usage)}
    requests, input_tokens, output_tokens, tool_calls = cells["total"]
    assert (requests, tool_calls) == ("3", "1")
    assert int(input_tokens) > 0 and int(output_tokens) > 0
    assert cells["triage"][0] == "1" and cells["billing"][0] == "2"
    assert "answered by billing" in out


def test_run_streams_a_guarded_answer_and_says_what_the_guardrail_did_after_it(
    db: Path,
) -> None:
    result = run_team(db, agent="guarded")
    assert result.exit_code == 0, result.output
    assert ("guarded: Thanks for waiting. Write to [EMAIL] today.\nBye\n"
            "⛨ guardrail pii (output) redact: 1 e-mail address\n") in result.stdout
    assert "jane@example.com" not in result.stdout


def test_run_restores_trace_processors(db: Path) -> None:
    before = get_trace_processors()
    assert run_team(db, "--session", "s1").exit_code == 0
    assert get_trace_processors() == before


def test_run_without_session_prints_a_new_session_id(db: Path) -> None:
    result = run_team(db)
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[1]  # after the model line
    assert first.startswith("session ") and "--session" in first
    session_id = first.split()[1]
    listed = invoke("sessions", "list", "--db", db, "--json")
    assert [json.loads(line)["session_id"] for line in listed.stdout.splitlines()] == [session_id]


def test_run_continues_a_session(db: Path) -> None:
    assert run_team(db, "--session", "s1").exit_code == 0
    # Each run loads the team file afresh, so its scripted model starts over.
    again = run_team(db, "--session", "s1", prompt="and the next one?")
    assert again.exit_code == 0, again.output
    assert "continuing session s1" in again.stdout
    assert "user → billing: and the next one?" in again.stdout  # billing is still active


def test_run_default_db_is_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("run", f"{TEAM}:triage", "hi", "--session", "s1")
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".relayrace" / "sessions.db").is_file()


def test_run_json_prints_only_event_lines(db: Path) -> None:
    result = run_team(db, "--json")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    events = load_events(lines)
    assert all(isinstance(json.loads(line), dict) for line in lines)
    kinds = [e.kind for e in events]  # type: ignore[attr-defined]
    assert "handoff" in kinds
    assert "text_delta" in kinds
    assert kinds[0] == "run_started"
    handoff = next(e for e in events if isinstance(e, HandoffEvent))
    assert (handoff.agent, handoff.to_agent) == ("triage", "billing")
    last = events[-1]
    assert isinstance(last, RunFinishedEvent)
    assert last.status == "completed"
    assert last.output == "Your invoice INV-7 is paid."
    assert "session " in result.stderr  # the generated id goes to stderr, not stdout


def test_run_with_delegation_indents_child_events(db: Path) -> None:
    result = run_team(db, "--session", "d1", agent="coordinator", prompt="refund policy?")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "  user → researcher: Find the refund policy." in out
    assert "  researcher: Refunds are possible within 30 days." in out
    assert "⇢ coordinator delegated to researcher ok" in out
    assert "delegation coordinator/researcher" in out  # its spans nest in the one trace
    assert "coordinator/researcher" in out[out.index("Usage") :]


def test_run_context_and_max_turns(db: Path) -> None:
    ok = run_team(db, "--context", "user=Ann", "-c", "plan=pro")
    assert ok.exit_code == 0, ok.output
    bad = run_team(db, "--context", "no-equals-sign")
    assert bad.exit_code == 2
    assert "KEY=VALUE" in bad.output
    limited = run_team(db, "--max-turns", "1")
    assert_clean_error(limited, "1 model turns")
    assert "trace" in limited.stdout  # the trace of the failed run is still shown


def test_run_stops_for_approval_and_resume_continues(db: Path) -> None:
    target = f"{TEAM}:cashier"
    stopped = runner.invoke(app, ["run", target, "refund INV-7", "--db", str(db),
                                  "--session", "s9"])
    assert stopped.exit_code == EXIT_APPROVAL == 3, stopped.output
    assert "waiting for approval" in stopped.stdout
    assert 'cashier issue_refund({"invoice_id": "INV-7"}) [call call_9]' in stopped.stdout
    assert "answered by" not in stopped.stdout

    unknown = runner.invoke(app, ["resume", target, "--session", "s9", "--approve", "nope",
                                  "--db", str(db)])
    assert unknown.exit_code == 1
    assert "call_9" in unknown.stderr

    resumed = runner.invoke(app, ["resume", target, "--session", "s9", "--approve", "call_9",
                                  "--db", str(db)])
    assert resumed.exit_code == 0, resumed.output
    assert "Refunded INV-7." in resumed.stdout


def test_the_pause_names_who_waits_and_the_resume_command_as_the_run_was_given(
        db: Path) -> None:
    target = f"{TEAM}:desk"
    stopped = invoke("run", target, "refund INV-7", "--db", db, "--session", "w4",
                     "-c", "customer=ACME GmbH")
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    assert "⏸ desk paused: cashier waits for approval" in stopped.stdout
    assert "desk interrupted" not in stopped.stdout
    [hint] = [line for line in stopped.stdout.splitlines() if line.startswith("Go on with: ")]
    assert "TARGET" not in hint
    command = hint.removeprefix("Go on with: ").removesuffix(" (or --reject ID).")
    assert command == (f"relayrace resume {TEAM}:desk --session w4 --db {db} "
                       "-c 'customer=ACME GmbH' --approve call_9")
    words = shlex.split(command)
    assert words[:2] == ["relayrace", "resume"]
    resumed = invoke(*words[1:])  # pasted as printed, it goes on
    assert resumed.exit_code == 0, resumed.output
    assert "Done: Refunded INV-7." in resumed.stdout


def test_a_delegated_childs_pause_names_the_child(db: Path) -> None:
    stopped = invoke("run", f"{TEAM}:refund_coordinator", "refund INV-7", "--db", db)
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    lines = stopped.stdout.splitlines()
    assert "  ⏸ refund_coordinator/cashier waits for approval" in lines
    assert "⏸ refund_coordinator paused: refund_coordinator/cashier waits for approval" in lines
    # The child's request is shown once, though its parent's pause carries it again.
    assert sum("approval requested: issue_refund" in line for line in lines) == 1


def test_print_run_tells_a_python_caller_to_call_runner_resume() -> None:
    from relayrace.cli import print_run
    from relayrace.cli._target import load_module

    team = load_module(TEAM)
    console = Console(file=io.StringIO(), width=200)
    result = asyncio.run(print_run(team.desk, "refund INV-7", console=console, trace=False))
    assert result.pending is not None
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Go on with: Runner.resume(result.pending, approvals={'call_9': True}) " \
           "(False rejects a call)." in said


def test_a_team_with_one_entry_point_needs_no_agent_to_run_and_resume(
        db: Path, tmp_path: Path) -> None:
    one = TEAM.parent / "one_entry_team.py"
    stopped = invoke("run", one, "refund INV-7", "--db", db, "--session", "p1")
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    assert f"Go on with: relayrace resume {one} --session p1 --db {db} --approve call_9" \
        in stopped.stdout
    resumed = invoke("resume", one, "--session", "p1", "--approve", "call_9", "--db", db)
    assert resumed.exit_code == 0, resumed.output
    assert "Done: Refunded INV-7." in resumed.stdout and "answered by cashier" in resumed.stdout
    # A YAML team whose one entry point is the agent whose call waits.
    team = tmp_path / "team"
    team.mkdir()
    (team / "refunds.py").write_text(
        "def issue_refund(invoice_id: str) -> str:\n"
        "    \"\"\"Refund an invoice.\n\n    Args:\n        invoice_id: The invoice.\n    \"\"\"\n"
        "    return f'Refunded {invoice_id}.'\n")
    (team / "cashier.agent.yaml").write_text(
        "apiVersion: relayrace/v1\nkind: Agent\nmetadata: {name: cashier}\nspec:\n"
        "  prompts: {system: You issue refunds.}\n"
        "  tools: [{type: python, function: 'refunds:issue_refund', requires_approval: true}]\n")
    model = f"{TEAM}:approval_model"
    stopped = invoke("run", team, "refund INV-7", "--db", db, "--session", "y1", "--model", model)
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    resumed = invoke("resume", team, "--session", "y1", "--approve", "call_9", "--db", db,
                     "--model", model)
    assert resumed.exit_code == 0, resumed.output
    assert "Done: Refunded INV-7." in resumed.stdout


def test_a_file_with_several_entry_points_still_asks_which(db: Path) -> None:
    result = invoke("run", TEAM, "hi", "--db", db)
    assert_clean_error(result, "names no agent and has", "entry points", f"{TEAM}:VARIABLE",
                       "triage")


def test_a_run_waiting_for_approval_exits_3_as_help_says(db: Path) -> None:
    for json_flag in ([], ["--json"]):
        stopped = invoke("run", f"{TEAM}:cashier", "refund INV-7", "--db", db, *json_flag)
        assert stopped.exit_code == 3, stopped.output
    for command in ("run", "resume"):
        assert "3 the run stopped for approval" in " ".join(
            invoke(command, "--help").stdout.split())


def test_a_question_stops_the_run_and_resume_answers_it(db: Path) -> None:
    target = f"{TEAM}:planner"
    stopped = invoke("run", target, "plan", "--db", db, "--session", "q1")
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    assert "waiting for an answer" in stopped.stdout
    [line] = [ln for ln in stopped.stdout.splitlines() if "[question q_" in ln and "asks" in ln]
    assert "planner asks: Which invoice? (one of: INV-7, INV-8)" in line
    qid = line.rsplit("[question ", 1)[1].rstrip("]")
    assert f"--answer {qid}=TEXT" in stopped.stdout

    missing = invoke("resume", target, "--session", "q1", "--db", db)
    assert missing.exit_code == 1 and qid in missing.stderr  # never answered: named
    wrong = invoke("resume", target, "--session", "q1", "--answer", f"{qid}=INV-9", "--db", db)
    assert wrong.exit_code == 1 and "'INV-7', 'INV-8'" in wrong.stderr
    unknown = invoke("resume", target, "--session", "q1", "--answer", "q_nope=x", "--db", db)
    assert unknown.exit_code == 1 and "q_nope" in unknown.stderr
    malformed = invoke("resume", target, "--session", "q1", "--answer", "no-equals", "--db", db)
    assert malformed.exit_code == 2 and "ID=TEXT" in malformed.output

    done = invoke("resume", target, "--session", "q1", "--answer", f"{qid}=INV-8", "--db", db)
    assert done.exit_code == 0, done.output
    assert "You picked INV-8." in done.stdout


def test_on_a_terminal_run_asks_the_question_and_goes_on(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_interactive", lambda: True)
    result = runner.invoke(app, ["run", f"{TEAM}:planner", "plan", "--db", str(db)],
                           input="INV-9\nINV-7\n")  # a choice not offered is asked again
    assert result.exit_code == 0, result.output
    assert "planner asks: Which invoice?" in result.stdout
    assert "You picked INV-7." in result.stdout
    assert "answered by" in result.stdout


def test_an_approval_given_in_one_process_is_not_replayed_on_the_next_call(db: Path) -> None:
    """Each command loads the team afresh, as a new process would: after the approved
    call_1 ran, the model's next call is numbered call_1 again. It must ask, not run."""
    target = f"{TEAM}:repeat_cashier"
    assert invoke("run", target, "refund INV-7 twice", "--db", db,
                  "--session", "r1").exit_code == 3
    resumed = invoke("resume", target, "--session", "r1", "--approve", "call_1", "--db", db)
    assert resumed.exit_code == 3, resumed.output
    assert resumed.stdout.count("→ issue_refund: Refunded INV-7.") == 1
    assert "⏸ approval requested: issue_refund" in resumed.stdout
    again = invoke("resume", target, "--session", "r1", "--approve", "call_1", "--db", db)
    assert again.exit_code == 0, again.output
    assert again.stdout.count("→ issue_refund: Refunded INV-7.") == 1
    assert "Refunded twice." in again.stdout


def test_run_says_which_model_runs(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = run_team(db)
    assert scripted.stdout.splitlines()[0].startswith(
        "model scripted · a scripted offline model (no API key, no network)")
    (tmp_path / "real.py").write_text(
        "from relayrace import Agent\n"
        "a = Agent('a', instructions='x', model='ollama:llama3.2')\n"
        "b = Agent('b', instructions='x', model='openai:gpt-4o-mini', sub_agents=[a])\n")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    models = invoke("run", f"{tmp_path / 'real.py'}:a", "hi", "--db", db)
    assert models.stdout.splitlines()[0] == ("models openai:gpt-4o-mini (b), "
                                             "ollama:llama3.2 (a)")
    assert_clean_error(models, "openai:gpt-4o-mini needs an API key: set OPENAI_API_KEY")


@pytest.mark.parametrize("model", ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5"])
def test_a_missing_api_key_fails_before_a_session_is_created(
    db: Path, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    result = run_team(db, "--session", "k1", "--model", model)
    assert_clean_error(result, "needs an API key")
    assert not db.exists() or invoke("sessions", "list", "--db", db, "--json").stdout == ""


def test_run_interrupted_exits_130(db: Path) -> None:
    # Ctrl-C as at a terminal. A shell starts background jobs (`python3 dev test &`) with
    # SIGINT ignored, which Python and asyncio.run respect: the signal would never arrive.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        result = run_team(db, "--session", "i1", agent="interrupted")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.exit_code == 130
    assert "Interrupted; continue with --session i1" in result.stderr


# -- run errors ---------------------------------------------------------------------------------


def test_run_bad_target_path(db: Path, tmp_path: Path) -> None:
    result = invoke("run", f"{tmp_path}/missing.py:triage", "hi", "--db", db)
    assert_clean_error(result, "missing.py", "does not exist", "path/to/team.py:agent_variable")
    assert not db.exists()


def test_run_missing_attribute(db: Path) -> None:
    result = run_team(db, agent="nobody")
    assert_clean_error(result, "no variable 'nobody'", "billing, triage, researcher, coordinator")


def test_run_attribute_that_is_not_an_agent(db: Path) -> None:
    result = run_team(db, agent="greeting")
    assert_clean_error(result, "cli_team.py:greeting is a str", "not an Agent", "triage")


def test_run_target_without_variable(db: Path) -> None:
    result = invoke("run", str(TEAM), "hi", "--db", db)
    assert_clean_error(result, "names no agent", "triage")


def test_run_target_file_that_fails_to_import(db: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import nonexistent_module_xyz\n")
    result = invoke("run", f"{broken}:agent", "hi", "--db", db)
    assert_clean_error(result, "broken.py", "ModuleNotFoundError", "nonexistent_module_xyz")


def test_run_bad_model_string(db: Path) -> None:
    result = run_team(db, "--model", "nope")
    assert_clean_error(result, "Model 'nope' is not of the form 'provider:model'")
    assert not db.exists()  # rejected before any session was created


def test_a_misspelt_provider_gets_a_did_you_mean(db: Path) -> None:
    result = run_team(db, "--model", "opneai:gpt-4o")
    assert_clean_error(result, "Model 'opneai:gpt-4o'", "did you mean 'openai:gpt-4o'?")
    assert not db.exists()


def test_a_model_file_without_the_attribute_names_its_model_objects(
        db: Path, tmp_path: Path) -> None:
    models = tmp_path / "models.py"
    models.write_text("from relayrace.testing import ScriptedModel, text\n"
                      "model = ScriptedModel([text('hi')])\n"
                      "backup = ScriptedModel([text('hi')])\n"
                      "greeting = 'hello'\n")
    missing = run_team(db, "--model", f"{models}:nothere")
    assert_clean_error(missing, "models.py has no attribute 'nothere'.",
                       "Model objects in models.py: model, backup.")
    assert "NoneType" not in missing.stderr
    misspelt = run_team(db, "--model", f"{models}:modle")
    assert_clean_error(misspelt, "no attribute 'modle'; did you mean 'model'?")
    not_a_model = run_team(db, "--model", f"{models}:greeting")
    assert_clean_error(not_a_model, "greeting is a str ('hello'), not a Model.",
                       "Model objects in models.py: model, backup.")
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert_clean_error(run_team(db, "--model", f"{empty}:model"),
                       "empty.py defines no Model object at its top level.")
    # eval's --model takes a function too; it names the Model objects the same way.
    cases = tmp_path / "cases.yaml"
    cases.write_text("cases:\n  - id: one\n    input: hi\n")
    evaluated = invoke("eval", "run", f"{TEAM}:triage", cases, "--model", f"{models}:nothere",
                       "--db", db)
    assert_clean_error(evaluated, "models.py has no attribute 'nothere'.",
                       "Model objects in models.py: model, backup.")


def test_a_misspelt_agent_gets_a_did_you_mean(db: Path, tmp_path: Path) -> None:
    assert_clean_error(run_team(db, "--agent", "trige"),
                       "No agent named 'trige' in cli_team.py; did you mean 'triage'?")
    assert_clean_error(run_team(db, agent="trige"),
                       "no variable 'trige'; did you mean 'triage'?")
    assert_clean_error(invoke("run", YAML_TEAM, "hi", "--agent", "leed", "--db", db),
                       "has no agent 'leed'; did you mean 'lead'?", "lead, researcher, writer")
    assert_clean_error(invoke("run", YAML_TEAM, "hi", "--agent", "zzz", "--db", db),
                       "has no agent 'zzz'. Agents: lead, researcher, writer.")


def test_resolve_target_selects_agents_by_name() -> None:
    assert resolve_target(f"{TEAM}:triage", agent="billing").name == "billing"
    with pytest.raises(UserError, match="No agent named 'ghost'"):
        resolve_target(f"{TEAM}:triage", agent="ghost")
    with pytest.raises(UserError, match="directory"):
        resolve_target(str(TEAM.parent))


# -- sessions -----------------------------------------------------------------------------------


def test_sessions_list(db: Path) -> None:
    assert run_team(db, "--session", "s1").exit_code == 0
    assert run_team(db, "--session", "d1", agent="coordinator").exit_code == 0
    result = invoke("sessions", "list", "--db", db)
    assert result.exit_code == 0, result.output
    rows = {row[0]: row for row in table_rows(result.stdout)}
    assert set(rows) == {"s1", "d1"}  # the child session is not top-level
    assert rows["s1"][3:] == ["10", "0"]  # events, child sessions
    assert rows["d1"][4] == "1"
    listed = invoke("sessions", "list", "--db", db, "--json")
    data = {d["session_id"]: d for d in map(json.loads, listed.stdout.splitlines())}
    assert data["s1"]["event_count"] == 10
    assert data["d1"]["child_sessions"] == 1


def test_sessions_list_without_database(tmp_path: Path) -> None:
    result = invoke("sessions", "list", "--db", tmp_path / "none.db")
    assert result.exit_code == 0
    assert "No sessions yet" in result.stdout
    assert not (tmp_path / "none.db").exists()


def test_sessions_show(db: Path) -> None:
    assert run_team(db, "--session", "s1").exit_code == 0
    result = invoke("sessions", "show", "s1", "--db", db)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "user → triage: hi" in out
    assert "↪ handoff triage → billing: billing question" in out
    assert "⚙ lookup_invoice" in out
    assert "→ lookup_invoice: Invoice INV-7" in out
    assert "billing: Your invoice INV-7 is paid." in out
    assert "No child sessions." in out


def test_sessions_show_child_tree(db: Path) -> None:
    assert run_team(db, "--session", "d1", agent="coordinator").exit_code == 0
    result = invoke("sessions", "show", "d1", "--db", db)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "⇢ coordinator delegated to researcher ok" in out
    tree = out[out.index("Child sessions") :]
    child = next(line for line in tree.splitlines() if "coordinator/researcher" in line)
    assert "d1." in child
    assert "tool call call_1" in child
    child_id = child.split("d1.", 1)[1].split()[0]
    shown = invoke("sessions", "show", f"d1.{child_id}", "--db", db)
    assert shown.exit_code == 0, shown.output
    assert "user → researcher: Find the refund policy." in shown.stdout


def test_sessions_show_json(db: Path) -> None:
    assert run_team(db, "--session", "s1").exit_code == 0
    result = invoke("sessions", "show", "s1", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    events = load_events(result.stdout.splitlines())
    assert len(events) == 10
    assert any(isinstance(e, HandoffEvent) for e in events)
    assert not any(e.kind == "text_delta" for e in events)  # type: ignore[attr-defined]


def test_sessions_show_unknown_id(db: Path) -> None:
    assert run_team(db, "--session", "s1").exit_code == 0
    result = invoke("sessions", "show", "nope", "--db", db)
    assert_clean_error(result, "No session 'nope'", "relayrace sessions list")
    listed = invoke("sessions", "list", "--db", db, "--json")
    assert "nope" not in listed.stdout  # looking it up did not create it


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"relayrace {__version__}"


# -- rendering ----------------------------------------------------------------------------------


def render(events: list[AgentEvent], **options: Any) -> str:
    buffer = io.StringIO()
    EventPrinter(Console(file=buffer, width=200, color_system=None), **options).print_all(events)
    return buffer.getvalue()


def test_printer_renders_every_event_kind() -> None:
    events: list[AgentEvent] = [
        GuardrailTriggeredEvent(agent="a", path="a", guardrail="pii", action="redact",
                                message="1 card number"),
        ApprovalRequestedEvent(agent="a", path="a", tool_call_id="c1", tool_name="refund",
                               arguments='{"amount": 5}'),
        ToolResultEvent(agent="a", path="a", message=Message.tool("c2", "boom", name="t"),
                        tool_name="t", is_error=True),
        DelegationEvent(agent="a", path="a", child_agent="b", child_session_id="x.1",
                        ok=False, error="timed out after 1 s"),
        RunFinishedEvent(agent="b", path="a/b", status="failed", output="Boom"),
    ]
    out = render(events)
    assert "⛨ guardrail pii (input) redact: 1 card number" in out
    assert '⏸ approval requested: refund({"amount": 5}) [call c1]' in out
    assert "✗ t: boom" in out
    assert "⇢ a delegated to b failed: timed out after 1 s [session x.1]" in out
    assert "  ✗ a/b failed: Boom" in out


def test_a_delegation_line_shows_the_reports_summary_not_its_json(db: Path) -> None:
    done = invoke("run", YAML_TEAM, "What is a handoff?", "--db", db,
                  "--model", f"{TEAM}:yaml_model")
    assert done.exit_code == 0, done.output
    [line] = [ln for ln in done.stdout.splitlines() if "delegated to researcher" in ln]
    assert line.startswith("⇢ lead delegated to researcher ok: A handoff moves the live "
                           "conversation to another agent (note 1). (1 source) [session ")
    assert '"raw"' not in done.stdout and '"summary"' not in done.stdout
    out = render([DelegationEvent(
        agent="a", path="a", child_agent="b", child_session_id="x.1", report={
            "summary": "Refunds take 5 days.", "key_findings": ["5 days", "card only"],
            "sources": ["policy.md"], "confidence": "high", "gaps": ["weekends"],
            "raw": "<handoff>...</handoff>"})])
    assert out.strip() == ("⇢ a delegated to b ok: Refunds take 5 days. (confidence high, "
                           "2 findings, 1 source, 1 gap) [session x.1]")


def test_printer_streams_interleaved_paths_without_repeating() -> None:
    def delta(path: str, text: str) -> TextDeltaEvent:
        return TextDeltaEvent(agent=path.rsplit("/", 1)[-1], path=path, delta=text)

    def answer(path: str, text: str) -> MessageEvent:
        name = path.rsplit("/", 1)[-1]
        return MessageEvent(agent=name, path=path, message=Message.assistant(text, name=name))

    out = render([
        delta("p/x", "one"), delta("p/y", "two"), delta("p/x", " three"),
        answer("p/x", "one three"), answer("p/y", "two (redacted)"),
    ])
    assert out.splitlines() == [
        "  x: one",
        "  y: two",
        "  x:  three",
        "  y (as kept): two (redacted)",
    ]


YAML_TEAM = Path(__file__).parent.parent / "examples" / "yaml_team"


def test_validate_reports_a_good_team_and_fails_on_a_bad_key(tmp_path: Path) -> None:
    ok = invoke("validate", YAML_TEAM)
    assert ok.exit_code == 0, ok.output
    assert "lead" in ok.stdout and "No warnings." in ok.stdout
    bad = tmp_path / "bad.agent.yaml"
    bad.write_text("apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n  name: x\nspec:\n"
                   "  prompts:\n    system: hi\n  orchestration:\n    max_iteration: 3\n")
    failed = invoke("validate", bad)
    assert failed.exit_code == 1
    assert "bad.agent.yaml:9" in failed.stderr and "max_iterations" in failed.stderr


def test_validate_reports_every_problem_of_a_team_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "invoice_tools.py").write_text(
        "def lookup_invoice(invoice_id: str) -> str:\n"
        "    \"\"\"Look an invoice up.\n\n    Args:\n        invoice_id: The invoice.\n"
        "    \"\"\"\n    return invoice_id\n\n\n"
        "def lookup_customer(name: str) -> str:\n"
        "    \"\"\"Look a customer up.\n\n    Args:\n        name: The name.\n"
        "    \"\"\"\n    return name\n")
    (tmp_path / "billing.agent.yaml").write_text(
        "apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n  name: billing\nspec:\n"
        "  prompts:\n    system: You bill.\n  orchestration:\n    max_iteration: 3\n"
        "  tools:\n    - type: python\n      function: invoice_tools:lookup_invoce\n"
        "    - type: python\n      function: invoice_tools:lookup_customer\n")
    (tmp_path / "triage.agent.yaml").write_text(
        "apiVersion: relayrace/v1\nkind: Agent\nmetadata:\n  name: triage\nspec:\n"
        "  prompts:\n    system: You route.\n  sub_agents: [biling]\n")
    failed = invoke("validate", tmp_path)
    assert failed.exit_code == 1
    problems = [line for line in failed.stderr.splitlines() if ".agent.yaml:" in line]
    assert problems == [
        f"{tmp_path}/billing.agent.yaml:9: unknown key 'spec.orchestration.max_iteration'; "
        "did you mean 'max_iterations'?",
        f"{tmp_path}/billing.agent.yaml:12: spec.tools[0].function: module 'invoice_tools' has no "
        "attribute 'lookup_invoce'; did you mean 'lookup_invoice'?",
        f"{tmp_path}/triage.agent.yaml:8: spec.sub_agents[0]: undefined agent 'biling'; "
        "did you mean 'billing'?",
    ]
    assert "(3 problems)" in failed.stderr
    # Fixed, the same team validates.
    for name, wrong, right in [("billing", "max_iteration", "max_iterations"),
                               ("billing", "lookup_invoce\n", "lookup_invoice\n"),
                               ("triage", "biling", "billing")]:
        file = tmp_path / f"{name}.agent.yaml"
        file.write_text(file.read_text().replace(wrong, right))
    fixed = invoke("validate", tmp_path)
    assert fixed.exit_code == 0, fixed.output


def test_graph_prints_mermaid_edges() -> None:
    drawn = invoke("graph", YAML_TEAM)
    assert drawn.exit_code == 0, drawn.output
    assert drawn.stdout.startswith("flowchart")
    assert 'lead ==>|"delegates: research"| researcher' in drawn.stdout


def test_graph_draws_a_python_team() -> None:
    drawn = invoke("graph", f"{TEAM}:triage")
    assert drawn.exit_code == 0, drawn.output
    assert 'triage["triage<br/><i>react · scripted</i>"]' in drawn.stdout
    assert 'triage -->|"transfer"| billing' in drawn.stdout
    assert 'billing -->|"uses"| tool_lookup_invoice' in drawn.stdout
    coordinator = invoke("graph", f"{TEAM}:coordinator")
    assert coordinator.exit_code == 0, coordinator.output
    assert '==>|"delegates: researcher"| researcher' in coordinator.stdout


def test_graph_svg_without_graphviz_fails_and_says_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    drawn = invoke("graph", YAML_TEAM, "--svg", tmp_path / "team.svg")
    assert drawn.exit_code == 1
    assert "Install Graphviz" in drawn.stderr and "Mermaid" in drawn.stderr
    assert "'dot', which is not installed" in drawn.stderr
    assert not (tmp_path / "team.svg").exists()
    # The Mermaid text is printed all the same, as without --svg.
    assert drawn.stdout == invoke("graph", YAML_TEAM).stdout
    assert 'lead ==>|"delegates: research"| researcher' in drawn.stdout


def test_run_a_yaml_team_by_agent_name(db: Path, tmp_path: Path) -> None:
    done = invoke("run", YAML_TEAM, "What is a handoff?", "--agent", "lead", "--db", db,
                  "--model", f"{TEAM}:yaml_model")
    assert done.exit_code == 0, done.output
    assert "Handoffs pass the conversation on (note 1)." in done.stdout
    assert "answered by lead" in done.stdout
    # One entry point (lead: nothing refers to it) is what runs without --agent.
    entry = invoke("run", YAML_TEAM, "What is a handoff?", "--db", db,
                   "--model", f"{TEAM}:yaml_model")
    assert entry.exit_code == 0, entry.output
    assert "answered by lead" in entry.stdout
    two = tmp_path / "two"
    two.mkdir()
    for name in ("alpha", "beta"):
        (two / f"{name}.agent.yaml").write_text(
            (YAML_TEAM / "writer.agent.yaml").read_text().replace("name: writer", f"name: {name}"))
    assert_clean_error(invoke("run", two, "hi", "--db", db), "several entry points", "--agent",
                       "alpha, beta")


def test_the_cli_runs_lists_shows_and_resumes_sessions_on_postgresql(postgres_url: str) -> None:
    pytest.importorskip("psycopg")
    first = run_team(postgres_url, "--session", "pg1")
    assert first.exit_code == 0, first.output
    again = run_team(postgres_url, "--session", "pg1",
                     prompt="and the next one?")
    assert "continuing session pg1" in again.stdout
    assert "user → billing: and the next one?" in again.stdout  # billing is still active
    listed = invoke("sessions", "list", "--db", postgres_url, "--json")
    assert [json.loads(line)["session_id"] for line in listed.stdout.splitlines()] == ["pg1"]
    shown = invoke("sessions", "show", "pg1", "--db", postgres_url)
    assert shown.exit_code == 0 and "and the next one?" in shown.stdout
    stopped = invoke("run", f"{TEAM}:cashier", "refund INV-7", "--db", postgres_url,
                     "--session", "pg2")
    assert stopped.exit_code == EXIT_APPROVAL, stopped.output
    resumed = invoke("resume", f"{TEAM}:cashier", "--session", "pg2", "--approve", "call_9",
                     "--db", postgres_url)
    assert resumed.exit_code == 0 and "Refunded INV-7." in resumed.stdout
    missing = invoke("sessions", "show", "nope", "--db", postgres_url)
    assert_clean_error(missing, "No session 'nope'")


def test_a_store_url_the_cli_cannot_open_is_a_clean_error(tmp_path: Path) -> None:
    assert_clean_error(invoke("sessions", "show", "x", "--db", "mysql://h/db"),
                       "Unknown session store")
