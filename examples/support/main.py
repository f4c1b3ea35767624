"""Run the customer-support team: offline on a scripted model, or on a real one.

    python3 dev demo                                  # offline, no key, no network
    python3 dev demo --model openai:gpt-4o-mini       # or set OPENAI_API_KEY / OPENAI_BASE_URL
    python3 dev demo --model ollama:llama3.2          # any OpenAI-compatible local server

The conversation is stored in SQLite (.relayrace/sessions.db); inspect it afterwards with
`relayrace sessions show <id>`.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.rule import Rule
from script import CONVERSATION, scripted_model
from team import build_team, configured_model

from relayrace import UserError
from relayrace.cli import check_credentials, describe_models, print_run
from relayrace.sessions import SQLiteSession, new_session_id
from relayrace.testing import ScriptedModel


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="provider:model to use instead of the scripted model")
    parser.add_argument("--db", default=".relayrace/sessions.db", help="the session store")
    args = parser.parse_args()
    model = args.model or configured_model() or scripted_model()
    triage = build_team(model)
    console = Console()
    console.print(f"[bold]relayrace support demo[/] · {describe_models(triage)}", soft_wrap=True)
    try:
        check_credentials(triage)  # before the session exists: a missing key stores nothing
    except UserError as exc:
        sys.exit(f"Error: {exc}")
    session = SQLiteSession(f"support-{new_session_id()[:8]}", args.db)
    console.print(f"session {session.session_id}\n")
    for i, message in enumerate(CONVERSATION, 1):
        console.print(Rule(f"customer message {i}"))
        result = await print_run(triage, message, session=session,
                                 context={"customer": "ACME GmbH"},
                                 trace=i == len(CONVERSATION), console=console)
        console.print(f"\n[dim]answered by[/] [bold]{result.last_agent.name}[/] · "
                      f"{len(result.handoffs)} handoff(s) · "
                      f"{result.usage.total.requests} model request(s)\n")
    if isinstance(model, ScriptedModel):
        model.assert_complete()
    # A command to copy: never wrapped, and runnable without an activated environment.
    command = "relayrace" if shutil.which("relayrace") else _beside_python("relayrace")
    print(f"Inspect the stored conversation: {command} sessions show {session.session_id} "
          f"--db {args.db}")


def _beside_python(script: str) -> str:
    """``script`` as installed next to this Python (.venv/bin/relayrace), relative if short."""
    path = Path(sys.executable).parent / script
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    asyncio.run(main())
