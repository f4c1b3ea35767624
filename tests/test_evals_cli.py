"""``relayrace eval``: run, compare, capture and replay from the command line, on the support
example's scripted models (offline)."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner, Result

from relayrace.cli import app

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "examples" / "support"
TEAM = f"{SUPPORT / 'team.py'}:triage"
CASES = SUPPORT / "evals.yaml"
SCRIPTED = f"{SUPPORT / 'eval_models.py'}:scripted"
MISROUTE = Path(__file__).parent / "fixtures" / "eval_misroute.py"
runner = CliRunner(env={"COLUMNS": "200", "RELAYRACE_DB": None})


def invoke(*args: str | Path) -> Result:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


def test_eval_run_reports_pass_rates_routing_and_distributions_and_writes_ci_files(
        db: Path, tmp_path: Path) -> None:
    result = invoke("eval", "run", TEAM, CASES, "--model", SCRIPTED, "--repeat", "2",
                    "--db", db, "--json", tmp_path / "r.json", "--junit", tmp_path / "r.xml",
                    "--price", "*=0.15/0.60", "--min-pass-rate", "1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "100% of 26 case run(s) passed" in out
    assert "│ charged-twice-then-email │ 2/2    │ triage → billing → triage → account" in out
    assert "Routing (expected ↓, reached →): 100% right" in out
    assert "cost (USD)" in out and "tokens" in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["pass_rate"] == 1.0 and len(data["runs"]) == 26
    assert data["distributions"]["cost"]["mean"] > 0
    suite = ET.parse(tmp_path / "r.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("26", "0", "0")
    # Stored: the eval run and each case run are sessions `relayrace sessions show` opens.
    run_id = data["run_id"]
    assert f"each case run is a session: relayrace sessions show {run_id}" in out
    shown = invoke("sessions", "show", run_id, "--db", db)
    assert shown.exit_code == 0 and shown.stdout.count("eval delegated to triage ok") == 26
    case_run = data["runs"][0]["session_id"]
    shown = invoke("sessions", "show", case_run, "--db", db)
    assert "↪ handoff triage → billing" in shown.stdout


def test_a_worse_run_against_its_baseline_and_the_exit_code(db: Path, tmp_path: Path) -> None:
    good = invoke("eval", "run", TEAM, CASES, "--model", SCRIPTED, "--db", db,
                  "--json", tmp_path / "good.json")
    assert good.exit_code == 0, good.output
    run_id = json.loads((tmp_path / "good.json").read_text())["run_id"]
    # The issue's own form: `relayrace eval TEAM CASES` is `eval run`.
    bad = invoke("eval", TEAM, CASES, "--model", f"{MISROUTE}:misroute", "--db", db,
                 "--baseline", run_id, "--min-pass-rate", "0.9", "--junit", tmp_path / "b.xml")
    assert bad.exit_code == 1
    out = bad.stdout
    # The first divergence, as a diff of expected against actual path.
    rows = [line.split("│")[-2].rstrip() for line in out.splitlines()
            if line.startswith(("│ refund-duplicate-charge", "│   "))][:4]
    assert rows == [" path:", "   triage", " - billing", " + technical"]
    assert "Routing (expected ↓, reached →)" in out
    assert f"Against baseline {run_id}" in out
    against = out[out.index(f"Against baseline {run_id}"):]
    row = next(line for line in against.splitlines() if "refund-duplicate-charge" in line)
    assert [cell.strip() for cell in row.split("│")[1:4]] == [
        "refund-duplicate-charge", "worse", "100% → 0%"]
    assert "✗ pass rate" in out and "below --min-pass-rate 90.0%" in out
    failures = ET.parse(tmp_path / "b.xml").getroot().findall("testcase/failure")
    assert failures and "path:" in (failures[0].get("message") or "")
    # Two result files compare the same way.
    invoke("eval", "run", TEAM, CASES, "--model", f"{MISROUTE}:misroute", "--db", "memory://",
           "--json", tmp_path / "bad.json")
    compared = invoke("eval", "compare", tmp_path / "good.json", tmp_path / "bad.json")
    assert compared.exit_code == 0 and "│ cheap-routing" in compared.stdout
    assert "worse" in compared.stdout


def test_a_bad_case_file_is_a_clean_error_with_file_and_line(tmp_path: Path) -> None:
    cases = tmp_path / "c.yaml"
    cases.write_text("- id: a\n  input: hi\n  expct: {}\n")
    result = invoke("eval", "run", TEAM, cases, "--db", "memory://", "--model", SCRIPTED)
    assert result.exit_code == 1
    assert f"{cases}:3: unknown key 'expct'; did you mean 'expect'?" in result.stderr
    assert "Traceback" not in result.output


def test_a_shared_scripted_model_is_refused_with_what_to_give_instead() -> None:
    result = invoke("eval", "run", TEAM, CASES, "--db", "memory://",
                    "--model", f"{MISROUTE}:shared")
    assert result.exit_code == 1
    assert "is a ScriptedModel, which plays one conversation" in result.stderr
    assert "def shared(case) -> Model" in result.stderr


def test_a_team_on_its_scripted_demo_model_is_refused_without_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "RELAYRACE_MODEL"):
        monkeypatch.delenv(name, raising=False)  # the example falls back to its demo model
    result = invoke("eval", "run", TEAM, CASES, "--db", "memory://")
    assert result.exit_code == 1
    assert "runs on a scripted model, which plays one conversation" in result.stderr


def test_capture_then_replay(db: Path, tmp_path: Path) -> None:
    ran = invoke("eval", "run", TEAM, CASES, "--model", SCRIPTED, "--db", db,
                 "--json", tmp_path / "r.json")
    assert ran.exit_code == 0
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    session = next(r["session_id"] for r in runs if r["case_id"] == "refund-duplicate-charge")
    into = tmp_path / "captured.yaml"
    captured = invoke("eval", "capture", session, "--into", into, "--id", "refund", "--db", db)
    assert captured.exit_code == 0, captured.output
    assert "case refund added to" in captured.stdout and "triage → billing" in captured.stdout
    text = into.read_text()
    assert text.startswith("cases:\n  # captured from session ")
    assert "The answer was:" in text and "name: issue_refund" in text
    # The captured case passes when the same conversation is had again.
    again = invoke("eval", "run", TEAM, into, "--db", "memory://", "--model",
                   f"{MISROUTE}:as_refund", "--min-pass-rate", "1")
    assert again.exit_code == 0, again.output
    # Replay on a model that routes elsewhere: where the trajectory diverged.
    replayed = invoke("eval", "replay", session, "--team", TEAM, "--db", db,
                      "--model", f"{MISROUTE}:misroute")
    assert replayed.exit_code == 1, replayed.output  # a divergence fails CI
    out = replayed.stdout
    assert "✗ the replay diverged at step 2:" in out
    assert "- → billing   (stored)" in out and "+ → technical   (replayed)" in out
    same = invoke("eval", "replay", session, "--team", TEAM, "--db", db,
                  "--model", f"{MISROUTE}:as_refund")
    assert same.exit_code == 0, same.output
    assert "✓ the replay took the same" in same.stdout
    missing = invoke("eval", "capture", "nope", "--into", into, "--db", db)
    assert missing.exit_code == 1 and "No session 'nope'" in missing.stderr


def test_output_paths_are_checked_before_any_case_runs(db: Path, tmp_path: Path) -> None:
    for option, name in (("--html", "report.html"), ("--json", "r.json"),
                         ("--junit", "j.xml")):
        bad = tmp_path / "missing" / name
        result = invoke("eval", "run", TEAM, CASES, "--model", SCRIPTED, "--db", db,
                        option, bad)
        assert result.exit_code == 2, result.output
        assert f"cannot write {bad}: No such file or directory" in result.stderr
        assert "Traceback" not in result.output
    assert not db.exists()  # refused before the eval run began: nothing stored
    directory = invoke("eval", "run", TEAM, CASES, "--model", SCRIPTED, "--db", db,
                       "--html", tmp_path)
    assert directory.exit_code == 2 and f"cannot write {tmp_path}" in directory.stderr


def test_the_report_path_is_printed_and_latency_is_in_ms(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    result = invoke("eval", "run", TEAM, CASES, "--model", SCRIPTED, "--db", "memory://",
                    "--html", report, "--junit", tmp_path / "j.xml")
    assert result.exit_code == 0, result.output
    assert f"wrote JUnit {tmp_path / 'j.xml'} · report {report}" in result.stdout
    assert "latency (ms)" in result.stdout and "┃ ms " in result.stdout
    assert report.read_text().startswith("<!doctype html>")


def test_off_a_terminal_the_table_is_wide_enough_for_the_ids(tmp_path: Path) -> None:
    plain = CliRunner(env={"COLUMNS": None, "RELAYRACE_DB": None})
    result = plain.invoke(app, ["eval", "run", TEAM, str(CASES), "--model", SCRIPTED,
                                "--db", "memory://"])
    assert result.exit_code == 0, result.output
    assert "│ charged-twice-then-email │" in result.stdout  # whole, on one line
    assert max(len(line) for line in result.stdout.splitlines()) <= 200


def test_a_yaml_team_with_one_entry_point_needs_no_agent(tmp_path: Path) -> None:
    cases = tmp_path / "c.yaml"
    cases.write_text("- id: handoff\n  input: What is a handoff?\n"
                     "  expect: {path: [lead], final: {agent: lead, contains: handoff}}\n")
    result = invoke("eval", ROOT / "examples" / "yaml_team", cases, "--db", "memory://",
                    "--model", f"{MISROUTE}:yaml_team", "--min-pass-rate", "1")
    assert result.exit_code == 0, result.output


def test_approvals_in_a_case_file_get_a_suggestion_before_any_case_runs(tmp_path: Path) -> None:
    cases = tmp_path / "c.yaml"
    cases.write_text("- id: a\n  input: hi\n  approvals: {issue_refnd: approve}\n")
    result = invoke("eval", "run", TEAM, cases, "--db", "memory://", "--model", SCRIPTED)
    assert result.exit_code == 1
    assert (f"{cases}:3: approvals: the team has no tool 'issue_refnd'; did you mean "
            "'issue_refund'?") in result.stderr


def test_a_redos_regex_is_bounded_and_timeout_ends_a_slow_case_run(tmp_path: Path) -> None:
    cases = tmp_path / "c.yaml"
    cases.write_text("- id: refund-duplicate-charge\n  input: I was charged twice.\n"
                     "  expect: {final: {regex: '(a+)+$'}}\n")
    result = invoke("eval", "run", TEAM, cases, "--db", "memory://", "--model",
                    f"{MISROUTE}:long_answer", "--timeout", "5", "--json", "-")
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)["runs"][0]
    assert run["status"] == "failed" and "does not match /(a+)+$/" in run["checks"][0]["detail"]
    assert run["metrics"]["seconds"] < 5
    slow = invoke("eval", "run", TEAM, cases, "--db", "memory://", "--model",
                  f"{MISROUTE}:slow", "--timeout", "0.2", "--json", "-")
    run = json.loads(slow.stdout)["runs"][0]
    assert (run["status"], run["error"]) == ("error", "the case run took longer than 0.2 s "
                                                      "(--timeout)")


def test_a_run_stopped_for_a_person_is_named_in_the_summary(tmp_path: Path) -> None:
    cases = tmp_path / "c.yaml"
    cases.write_text("- id: refund\n  input: I was charged twice.\n  answers: [card]\n"
                     "  expect: {path: [triage, billing], final: {agent: billing}}\n")
    team = f"{Path(__file__).parent / 'fixtures' / 'eval_approvals.py'}:team"
    result = invoke("eval", "run", team, cases, "--db", "memory://", "--model",
                    f"{Path(__file__).parent / 'fixtures' / 'eval_approvals.py'}:scripted")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "0% of 1 case run(s) passed (1 stopped for a person)" in out
    assert "pending:" in out and "stopped for approval of issue_refund" in out
    assert "Routing (expected ↓, reached →): 100% right" in out  # it reached billing


def test_replay_on_a_yaml_team_with_one_entry_point_needs_no_agent(db: Path) -> None:
    cli_team = Path(__file__).parent / "fixtures" / "cli_team.py"
    yaml_team = ROOT / "examples" / "yaml_team"
    ran = invoke("run", yaml_team, "What is a handoff?", "--db", db, "--model",
                 f"{cli_team}:yaml_model", "--session", "y1")
    assert ran.exit_code == 0, ran.output
    # lead answering at once: no research delegated, so the replay parts from the stored run.
    replayed = invoke("eval", "replay", "y1", "--team", yaml_team, "--db", db,
                      "--model", f"{MISROUTE}:yaml_team")
    assert replayed.exit_code == 1, replayed.output
    assert "✗ the replay diverged at step" in replayed.stdout


def test_a_python_team_file_with_one_entry_point_needs_no_agent(db: Path, tmp_path: Path) -> None:
    one = Path(__file__).parent / "fixtures" / "one_entry_team.py"
    cases = tmp_path / "c.yaml"
    cases.write_text("- id: refund\n  input: refund INV-7\n  approvals: {issue_refund: approve}\n"
                     "  expect: {path: [desk, cashier], final: {agent: cashier, "
                     "contains: Refunded INV-7}}\n")
    result = invoke("eval", "run", one, cases, "--db", db, "--min-pass-rate", "1")
    assert result.exit_code == 0, result.output
    ran = invoke("run", one, "refund INV-7", "--db", db, "--session", "p1")
    assert ran.exit_code == 3, ran.output  # stopped for the refund's approval
    replayed = invoke("eval", "replay", "p1", "--team", one, "--db", db)
    assert replayed.exit_code == 0, replayed.output
    assert "✓ the replay took the same" in replayed.stdout
