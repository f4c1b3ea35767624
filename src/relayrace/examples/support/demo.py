"""The support demo: the customer-support team answers two customer messages in one stored
session, offline on its scripted model unless a real one is named.

    relayrace demo                                 # offline, no key, no network
    relayrace demo --model openai:gpt-4o-mini      # or set OPENAI_API_KEY / OPENAI_BASE_URL
    relayrace demo --model ollama:llama3.2         # any OpenAI-compatible local server

The conversation is stored in SQLite (.relayrace/sessions.db by default); inspect it
afterwards with ``relayrace sessions show <id>``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.rule import Rule

from ...cli import check_credentials, describe_models, print_run
from ...models import Model
from ...sessions import new_session_id, open_store
from ...testing import ScriptedModel
from .script import CONVERSATION, scripted_model
from .team import build_team, configured_model

__all__ = ["run_demo"]


async def run_demo(model: Model | str | None = None, *, db: str = ".relayrace/sessions.db",
                   console: Console | None = None) -> str:
    """Play the demo conversation on ``model`` (default: the environment's, else scripted)
    in a new session of the store ``db`` (a SQLite file or a store URL); returns its id.

    A missing API key raises ``UserError`` before the session exists, so it stores nothing.
    """
    model = model or configured_model() or scripted_model()
    triage = build_team(model)
    console = console or Console()
    console.print(f"[bold]relayrace support demo[/] · {describe_models(triage)}", soft_wrap=True)
    check_credentials(triage)
    store = open_store(db)
    session = store.session(f"support-{new_session_id()[:8]}")
    console.print(f"session {session.session_id}\n")
    try:
        for i, message in enumerate(CONVERSATION, 1):
            console.print(Rule(f"customer message {i}"))
            result = await print_run(triage, message, session=session,
                                     context={"customer": "ACME GmbH"},
                                     trace=i == len(CONVERSATION), console=console)
            console.print(f"\n[dim]answered by[/] [bold]{result.last_agent.name}[/] · "
                          f"{len(result.handoffs)} handoff(s) · "
                          f"{result.usage.total.requests} model request(s)\n")
    finally:
        await store.aclose()
    if isinstance(model, ScriptedModel):
        model.assert_complete()
    # A command to copy: never wrapped, and runnable without an activated environment.
    command = "relayrace" if shutil.which("relayrace") else _beside_python("relayrace")
    print(f"Inspect the stored conversation: {command} sessions show {session.session_id} "
          f"--db {db}")
    return session.session_id


def _beside_python(script: str) -> str:
    """``script`` as installed next to this Python (.venv/bin/relayrace), relative if short."""
    path = Path(sys.executable).parent / script
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
