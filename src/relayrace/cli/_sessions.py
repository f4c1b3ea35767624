"""``relayrace sessions``: the stored sessions listed, and one shown with its conversation and
the tree of its child sessions."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from .. import sessions
from ..core.events import HandoffEvent
from ._common import (
    DEFAULT_DB,
    DbOption,
    JsonOption,
    errors,
    known,
    out_console,
    sync,
    unknown_session,
)
from ._render import EventPrinter, format_time, session_label, session_tree, sessions_table

if TYPE_CHECKING:
    from ..sessions import SessionInfo, SessionStore

__all__ = ["sessions_app"]

sessions_app = typer.Typer(help="List and inspect stored sessions.", no_args_is_help=True)


async def _children(store: SessionStore, session_id: str) -> dict[str, list[SessionInfo]]:
    """Every descendant of ``session_id``, as a map from a parent id to its children."""
    found: dict[str, list[SessionInfo]] = {}
    todo = [session_id]
    while todo:
        parent = todo.pop()
        if parent in found:
            continue
        kids = await store.list_sessions(parent_id=parent, limit=100_000)
        found[parent] = sorted(kids, key=lambda i: i.created_at)
        todo.extend(c.session_id for c in found[parent])
    return found


@sessions_app.command("list")
def list_sessions(db: DbOption = DEFAULT_DB, json_output: JsonOption = False) -> None:
    """List the top-level sessions with their sizes and child-session counts."""
    if "://" not in db and not Path(db).exists():
        if not json_output:
            out_console().print(f"No sessions yet (no database at {db}).")
        return
    with errors():
        store = sessions.open_store(db)

        async def listed() -> list[tuple[SessionInfo, int]]:
            infos = await store.list_sessions(limit=100_000)
            rows = []
            for info in sorted(infos, key=lambda i: i.created_at):
                tree = await _children(store, info.session_id)
                rows.append((info, sum(len(v) for v in tree.values())))
            return rows

        rows = sync(store, listed)
    if json_output:
        for info, count in rows:
            typer.echo(json.dumps({**dataclasses.asdict(info), "child_sessions": count}))
        return
    out = out_console()
    if not rows:
        out.print(f"No sessions in {db}.")
        return
    out.print(sessions_table(rows, str(db)))


@sessions_app.command("show")
def show_session(
    session_id: Annotated[str, typer.Argument(help="The session id (see `sessions list`).")],
    db: DbOption = DEFAULT_DB,
    json_output: JsonOption = False,
) -> None:
    """Show a session's conversation and the tree of its child sessions."""
    with errors():
        store = sessions.open_store(db)
        if not known(store, session_id):
            raise unknown_session(session_id, db)
        session = store.session(session_id)
        if json_output:
            sys.stdout.write(sync(store, session.export_jsonl))
            return
        events = sync(store, session.get_events)
        children = sync(store, lambda: _children(store, session_id))
    out = out_console()
    info = session.info
    out.print(Text.assemble(("session ", "dim"), session_label(info),
                            (f"  created {format_time(info.created_at)}", "dim"),
                            (f", updated {format_time(info.updated_at)}", "dim")))
    base = info.path.count("/") if info.path else 0
    printer = EventPrinter(
        out,
        handoff_call_ids=[e.tool_call_id for e in events if isinstance(e, HandoffEvent)],
        base_depth=base,
    )
    printer.print_all(events)
    out.print()
    if any(children.values()):
        out.print(Text("Child sessions", style="bold"))
        out.print(session_tree(info, children))
    else:
        out.print(Text("No child sessions.", style="dim"))
