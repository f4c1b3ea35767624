"""A fast start: `import relayrace` and `relayrace --help` load only what they use."""

from __future__ import annotations

import subprocess
import sys

import pytest

THIRD_PARTY = ("jsonschema", "jinja2", "yaml", "typer", "rich", "openai", "anthropic", "httpx",
               "fastapi", "starlette", "uvicorn", "dbos", "mcp", "a2a", "psycopg",
               "opentelemetry.sdk")
# provider, server, store and protocol modules: none is needed to print the help
HEAVY = ("relayrace.models.openai", "relayrace.models.anthropic", "relayrace.server",
         "relayrace.connect.mcp", "relayrace.connect.a2a", "relayrace.connect.asgi",
         "relayrace.sessions.sqlite", "relayrace.sessions.store", "relayrace.sessions.postgres",
         "relayrace.durable", "relayrace.config", "relayrace.evals")


def _modules(code: str) -> set[str]:
    listing = "\nimport sys\nprint('\\n'.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code + listing], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_import_relayrace_loads_no_optional_library() -> None:
    loaded = _modules("import relayrace")
    assert "relayrace" in loaded
    assert sorted(m for m in THIRD_PARTY if m in loaded) == []


def test_relayrace_help_loads_no_provider_server_store_or_protocol() -> None:
    loaded = _modules("import sys, runpy\nsys.argv = ['relayrace', '--help']\n"
                      "try:\n    runpy.run_module('relayrace.cli', run_name='__main__')\n"
                      "except SystemExit:\n    pass")
    assert "typer" in loaded  # the help was printed
    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


@pytest.mark.parametrize(("module", "name"), [
    ("relayrace", "MCPServer"), ("relayrace", "ask_user"), ("relayrace", "read_result"),
    ("relayrace.sessions", "SQLiteSession"), ("relayrace.sessions", "open_store"),
    ("relayrace.agents.delegation", "submit_report")])
def test_names_made_on_first_use_are_one_object(module: str, name: str) -> None:
    imported = __import__(module, fromlist=[name])
    first = getattr(imported, name)
    assert getattr(imported, name) is first
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = imported.nothing_here


def test_python_m_relayrace_prints_the_help() -> None:
    done = subprocess.run([sys.executable, "-m", "relayrace", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "demo" in done.stdout and "serve" in done.stdout
