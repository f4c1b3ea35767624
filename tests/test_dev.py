"""`python3 dev test` tells a person what it is doing and how far along it is."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType, SimpleNamespace
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


def test_dev_test_fast_says_at_its_end_how_many_slow_tests_it_left_out(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    dev = _dev()
    envs: list[dict[str, str]] = []

    def fake_run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        envs.append(kwargs.get("env") or {})
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "ensure_venv", lambda extras: Path("python"))
    monkeypatch.setattr(dev, "ensure_chromium", lambda: None)
    monkeypatch.setattr(dev.subprocess, "run", fake_run)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    recorded = tmp_path / ".pytest_cache" / "v" / "relayrace" / "slow_left_out"
    recorded.parent.mkdir(parents=True)
    recorded.write_text("192")  # as the conftest records it
    dev.main(["test", "--fast"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "left out: 192 tests marked slow" in last and "CI runs them" in last, last
    pytest_env = envs[-1]
    assert pytest_env["HYPOTHESIS_PROFILE"] == "fast"  # fewer examples per property test
    assert "PYTHONDONTWRITEBYTECODE" not in pytest_env  # compiled tests kept between runs
    dev.main(["test"])  # CI: every test, as the environment says, hypothesis' own examples
    assert "HYPOTHESIS_PROFILE" not in envs[-1] and envs[-1]["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "left out" not in capsys.readouterr().out


def test_integration_tests_are_found_slow_wherever_they_are() -> None:
    import conftest
    import test_docs
    import test_server

    def item(function: Any, name: str = "test_x", file: str = "test_x.py",
             fixtures: tuple[str, ...] = (), params: dict[str, Any] | None = None) -> Any:
        callspec = SimpleNamespace(id="-".join(map(str, params or {})), params=params or {})
        return SimpleNamespace(path=Path(file), name=name, originalname=name,
                               fixturenames=fixtures, function=function,
                               callspec=callspec if params else None)

    def plain() -> None:
        assert 1 + 1 == 2

    assert not conftest._is_slow(item(plain))
    # A real uvicorn, another process, the browser, PostgreSQL: slow.
    assert conftest._is_slow(item(test_server.test_the_openai_client_talks_to_a_served_agent))
    assert conftest._is_slow(item(test_server.test_relayrace_serve_starts_and_answers))
    assert conftest._is_slow(item(plain, fixtures=("tmp_path", "browser")))
    assert conftest._is_slow(item(plain, file="test_durable.py"))
    assert conftest._is_slow(item(plain, name="test_hostile_file_is_a_located_config_error"
                                  "[a long text repeated through aliases]",
                                  file="test_config_hostile.py"))
    # A docs example is slow when it starts a server or another process.
    blocks = dict(test_docs.BLOCKS)
    run = test_docs.test_doc_example_runs
    assert conftest._is_slow(item(run, params={"name": "mcp.md#1", "code": blocks["mcp.md#1"]}))
    assert not conftest._is_slow(item(run, params={"name": "README.md#1",
                                                   "code": blocks["README.md#1"]}))


def test_each_single_slow_test_named_exists() -> None:
    import conftest

    tests = Path(__file__).resolve().parent
    for entry in conftest.SLOW_TESTS:
        file, _, name = entry.partition("::")
        source = (tests / file).read_text()
        assert f"def {name.partition('[')[0]}(" in source, f"SLOW_TESTS names {entry}: gone"
        if "[" in name:
            assert name.partition("[")[2].rstrip("]") in source, f"{entry}: no such parameter"
