"""`python3 dev test` tells a person what it is doing and how far along it is."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

DEV = Path(__file__).resolve().parent.parent / "dev"


def _dev() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("relayrace_dev", str(DEV))
    spec = importlib.util.spec_from_loader("relayrace_dev", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_dev_test_names_each_phase_and_counts_tests(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    dev = _dev()
    commands: list[list[str]] = []

    def fake_run(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        commands.append([str(a) for a in args])
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(dev, "ensure_venv", lambda extras: Path("python"))
    monkeypatch.setattr(dev, "ensure_chromium", lambda: None)
    monkeypatch.setattr(dev.subprocess, "run", fake_run)
    dev.main(["test", "-k", "nothing"])
    out = capsys.readouterr().out
    order = ["[1/5] install", "[2/5] ruff", "[3/5] mypy", "[4/5] import contract",
             "[5/5] pytest", "all 5 phases passed"]
    positions = [out.index(marker) for marker in order]
    assert positions == sorted(positions), out
    assert out.count(" passed in ") == 6, out  # each phase's time, and the total
    pytest_call = commands[-1]
    assert pytest_call[1:3] == ["-m", "pytest"]
    assert "console_output_style=count" in pytest_call  # "[ 120/1425]" as tests pass
    assert pytest_call[-2:] == ["-k", "nothing"]


def test_a_failing_phase_stops_the_command(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    dev = _dev()
    monkeypatch.setattr(dev, "ensure_venv", lambda extras: Path("python"))
    monkeypatch.setattr(dev, "ensure_chromium", lambda: None)
    monkeypatch.setattr(dev.subprocess, "run",
                        lambda args, **_: subprocess.CompletedProcess(args, 3))
    with pytest.raises(SystemExit) as stopped:
        dev.main(["test"])
    assert stopped.value.code == 3
    out = capsys.readouterr().out
    assert "[2/5] ruff" in out and "[3/5]" not in out and "phases passed" not in out


def test_dev_test_fast_leaves_the_slow_tests_out(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    dev = _dev()
    commands: list[list[str]] = []
    monkeypatch.setattr(dev, "ensure_venv", lambda extras: Path("python"))
    monkeypatch.setattr(dev, "ensure_chromium", lambda: None)
    monkeypatch.setattr(dev.subprocess, "run", lambda args, **_: (
        commands.append([str(a) for a in args]), subprocess.CompletedProcess(args, 0))[1])
    dev.main(["test", "--fast", "-x"])
    pytest_call = commands[-1]
    assert pytest_call[-3:] == ["-m", "not slow", "-x"] and "--fast" not in pytest_call
    assert "not marked slow" in capsys.readouterr().out


def test_the_slow_marker_covers_the_integration_tests(pytestconfig: pytest.Config) -> None:
    """The fast loop leaves out what needs other processes, PostgreSQL or a browser."""
    import conftest

    tests = Path(__file__).resolve().parent
    for name in conftest.SLOW_FILES:
        assert (tests / name).exists(), f"SLOW_FILES names {name}, which is gone"
    assert "slow" in "".join(pytestconfig.getini("markers"))
