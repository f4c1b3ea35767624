"""What every ``relayrace`` command shares: exit codes, the options spelled the same on every
command (``--db``, ``--json``, the target, ``--agent``, ``--model``, ``--context``), the
consoles, and how errors become a red message and an exit code."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from ..core.exceptions import RelayraceError
from ..sessions import DEFAULT_DB_PATH

if TYPE_CHECKING:
    from ..sessions import SessionStore

__all__ = ["DEFAULT_DB", "EXIT_APPROVAL", "EXIT_CODES", "MODEL_HELP", "AgentOption",
           "ContextOption", "DbOption", "JsonOption", "ModelOption", "TargetArgument",
           "err_console", "errors", "fail", "known", "out_console", "parse_answers",
           "parse_context", "sync", "unknown_session"]

EXIT_APPROVAL = 3
"""The exit code of ``run`` and ``resume`` when the run stopped for a person: approval, or an
answer it could not ask for (no terminal)."""

EXIT_CODES = ("Exit codes: 0 done; 1 error; 2 bad command line; 3 the run stopped for "
              "approval or an answer (decide or answer with `relayrace resume`); "
              "130 interrupted.")
"""The exit codes, as the help of the commands that run a team lists them."""

DbOption = Annotated[
    str,
    typer.Option(
        "--db", envvar="RELAYRACE_DB", show_default=True,
        help="Where sessions live: a SQLite file, or a store URL (sqlite:///PATH, "
        "postgresql://USER@HOST/DB).",
    ),
]
DEFAULT_DB = str(DEFAULT_DB_PATH)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON lines instead.")]
TargetArgument = Annotated[str, typer.Argument(
    help="The agent to run: path/to/team.py:variable, or a YAML team (a team with one entry "
    "point needs no variable nor --agent).")]
AgentOption = Annotated[str | None, typer.Option(
    "--agent", "-a", help="The agent to run, by name (when the team has several entry "
    "points).")]
MODEL_HELP = ("Use this model for every agent: provider:model, path/to/file.py:VARIABLE naming "
              "a Model object, or scripted:FILE.yaml (scripted answers, offline).")
"""What ``--model`` takes, on every command that runs a team."""
ModelOption = Annotated[str | None, typer.Option("--model", "-m", help=MODEL_HELP)]
ContextOption = Annotated[list[str] | None, typer.Option(
    "--context", "-c", help="A context variable KEY=VALUE (repeatable).")]

T = TypeVar("T")


def out_console() -> Console:
    """The console of a command's output."""
    return Console(highlight=False)


def err_console() -> Console:
    """The console of a command's errors and notes."""
    return Console(stderr=True, highlight=False)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``message`` as an error; the exit (with ``code``) to raise."""
    err_console().print(Text(f"Error: {message}", style="bold red"), soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def errors() -> Iterator[None]:
    """Turn relayrace errors into a red message and exit code 1, Ctrl-C into 130."""
    try:
        yield
    except RelayraceError as exc:
        raise fail(str(exc)) from None
    except sqlite3.Error as exc:
        raise fail(f"The session database could not be used: {exc}. Check the --db path, "
                   "or move the file aside to start afresh.") from None
    except KeyboardInterrupt:
        err_console().print(Text("Interrupted.", style="bold yellow"))
        raise typer.Exit(130) from None


def sync(store: SessionStore, work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` in an event loop of its own, the store's connections closed after it."""
    async def go() -> T:
        try:
            return await work()
        finally:
            await store.aclose()

    return asyncio.run(go())


def known(store: SessionStore, session_id: str) -> bool:
    """Whether ``store`` holds the session ``session_id``."""
    return sync(store, lambda: store.exists(session_id))


def unknown_session(session_id: str, db: str) -> typer.Exit:
    """Say that ``db`` has no session ``session_id``, and how to list those it has."""
    db_hint = "" if db == DEFAULT_DB else f" --db {db}"
    return fail(
        f"No session {session_id!r} in {db}. List the session ids with "
        f"`relayrace sessions list{db_hint}`."
    )


def parse_context(items: list[str] | None) -> dict[str, str] | None:
    """The ``--context KEY=VALUE`` options as context variables (None when none)."""
    if not items:
        return None
    context: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}.", param_hint="--context")
        context[key.strip()] = value
    return context


def parse_answers(items: list[str] | None) -> dict[str, str]:
    """The ``--answer ID=TEXT`` options as answers by question id."""
    answers: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected ID=TEXT, got {item!r}.", param_hint="--answer")
        answers[key.strip()] = value
    return answers
