"""The package's layer folders: every moved module path fails naming its new one, and every
subpackage says in its docstring what lives there and what it may import."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import relayrace
from relayrace._moved import MOVED


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_a_moved_path_names_its_new_one(old: str, new: str) -> None:
    assert importlib.import_module(new).__name__ == new
    with pytest.raises(ImportError, match=rf"{old} moved to {new}\b") as caught:
        importlib.import_module(old)
    assert caught.value.name == old


def test_a_moved_path_fails_the_same_in_a_fresh_interpreter() -> None:
    # ``import relayrace.agent`` loads relayrace first: the finder must be in place by then
    done = subprocess.run([sys.executable, "-c", "import relayrace.agent"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "relayrace.agent moved to relayrace.agents.agent" in done.stderr


def test_an_unknown_path_is_still_a_plain_missing_module() -> None:
    with pytest.raises(ModuleNotFoundError) as caught:
        importlib.import_module("relayrace.no_such_module")
    assert "moved" not in str(caught.value)


SUBPACKAGES = sorted(info.name for info in pkgutil.iter_modules(relayrace.__path__)
                     if info.ispkg)


def test_the_folders_are_the_layers() -> None:
    assert SUBPACKAGES == ["_engine", "agents", "cli", "config", "connect", "core", "durable",
                           "evals", "examples", "models", "server", "sessions", "teams",
                           "tracing"]
    flat = sorted(info.name for info in pkgutil.iter_modules(relayrace.__path__)
                  if not info.ispkg)
    assert flat == ["__main__", "_moved", "_version", "runner", "testing"]


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_each_subpackage_says_what_lives_there_and_what_it_may_import(name: str) -> None:
    doc = importlib.import_module(f"relayrace.{name}").__doc__ or ""
    head = "\n".join(doc.strip().splitlines()[:4])
    assert "import" in head.lower(), f"relayrace.{name}'s docstring: {head!r}"
