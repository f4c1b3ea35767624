"""Cases from real conversations: a stored session becomes a case whose expectations are
what happened, for a person to edit (loosen what may vary, keep what must not)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from relayrace.core.events import AgentEvent, DelegationEvent, MessageEvent, RunFinishedEvent
from relayrace.sessions import SessionStore

from .cases import (
    CASE_ADAPTER,
    Case,
    Expect,
    ExpectCall,
    ExpectDelegation,
    ExpectFinal,
    ExpectTools,
)
from .decisions import decided_in
from .loading import CaseFileError, load_cases
from .trajectory import read_trajectory

__all__ = ["append_case", "capture_case", "capture_note", "case_yaml", "child_logs",
           "user_turns"]


def user_turns(events: Sequence[AgentEvent]) -> list[str]:
    """What the user said in a session's log, in order."""
    return [e.message.content for e in events
            if isinstance(e, MessageEvent) and e.message.role == "user"]


def capture_case(events: Sequence[AgentEvent], case_id: str, *,
                 context: dict[str, Any] | None = None,
                 children: Mapping[str, Sequence[AgentEvent]] | None = None) -> Case:
    """A case that expects what ``events`` (a session's log) shows: the exact path, the same
    tool calls with the same arguments in any order, each delegation with its report's
    confidence, the agent that answered last and its answer; with the person's decisions
    (approvals, answers) the log shows, and, for a session still waiting for a person,
    ``expect.pending``. ``children`` holds delegated children's logs by session id (where a
    request inside a child was decided): `child_logs` reads them."""
    said = user_turns(events)
    if not said:
        raise CaseFileError("The session holds no user message to make a case of.")
    trajectory = read_trajectory(events)
    decided = decided_in(events, children)
    calls: list[ExpectCall | list[ExpectCall]] = [
        ExpectCall(name=c.name, args=c.args if isinstance(c.args, dict) else None)
        for c in trajectory.calls]
    delegations = [ExpectDelegation(child=d.child_agent, by=d.agent, ok=d.ok,
                                    confidence=(d.report or {}).get("confidence"))
                   for d in trajectory.delegations]
    final = None
    if trajectory.last_agent and decided.pending is None:
        final = ExpectFinal(agent=trajectory.last_agent, equals=_answer(trajectory.final))
    expect = Expect(path=list(trajectory.path),
                    tools=ExpectTools(calls=calls, mode="unordered") if calls else None,
                    delegations=delegations, final=final, pending=decided.pending)
    return Case(id=case_id, input=said[0] if len(said) == 1 else None,
                turns=said if len(said) > 1 else None, context=context, expect=expect,
                approvals=decided.approvals, answers=decided.answers)


def _answer(final: Any) -> Any:
    """The answer as ``final.equals`` compares it: JSON data, or the text (``None``: none)."""
    if not isinstance(final, str):
        return final
    if not final:
        return None
    try:
        return json.loads(final)
    except json.JSONDecodeError:
        return final


async def child_logs(store: SessionStore, events: Sequence[AgentEvent],
                     ) -> dict[str, list[AgentEvent]]:
    """The logs of every child session ``events`` delegated to, theirs too, by session id."""
    found: dict[str, list[AgentEvent]] = {}
    todo = [e.child_session_id for e in events if isinstance(e, DelegationEvent)]
    while todo:
        session_id = todo.pop()
        if session_id in found or not session_id or not await store.exists(session_id):
            continue
        found[session_id] = log = await store.session(session_id).get_events()
        todo.extend(e.child_session_id for e in log if isinstance(e, DelegationEvent))
    return found


def _case_data(case: Case) -> dict[str, Any]:
    data: dict[str, Any] = CASE_ADAPTER.dump_python(case, mode="json", exclude_defaults=True)
    data.pop("where", None)
    data.pop("lines", None)
    return data


def _yaml_item(case: Case, note: str, indent: str) -> str:
    body = yaml.safe_dump([_case_data(case)], sort_keys=False, allow_unicode=True, width=96)
    lines = [f"{indent}# {line}".rstrip() for line in note.splitlines()]
    lines += [f"{indent}{line}" for line in body.splitlines()]
    return "\n".join(lines) + "\n"


def capture_note(session_id: str, events: Sequence[AgentEvent]) -> str:
    """The comment a captured case carries: where it came from, and the answer it got."""
    answer = next((e.output for e in reversed(events) if isinstance(e, RunFinishedEvent)
                   and e.status == "completed" and isinstance(e.output, str)), "")
    return (f"captured from session {session_id}; edit what may vary. The answer was:\n"
            f"{answer[:300]}")


def case_yaml(case: Case, *, note: str = "") -> str:
    """``case`` as a case file of its own (YAML), ``note`` above it as a comment."""
    return "cases:\n" + _yaml_item(case, note, "  ")


def append_case(path: str | Path, case: Case, *, note: str = "") -> None:
    """Add ``case`` to the case file at ``path`` (created if missing), keeping what is there
    (comments included); ``note`` goes above it as a comment. The file is checked after, and
    left as it was if the result does not load."""
    path = Path(path)
    if path.suffix not in (".yaml", ".yml", ".jsonl"):
        raise CaseFileError(f"{path}: a case file is YAML (.yaml, .yml) or JSONL (.jsonl).")
    before = path.read_text(encoding="utf-8") if path.exists() else None
    if before is not None and before.strip():
        ids = {c.id for c in load_cases(path)}
        if case.id in ids:
            raise CaseFileError(f"{path}: a case {case.id!r} is there already; give another "
                                "id (--id).")
    if path.suffix == ".jsonl":
        text = (before or "").rstrip("\n")
        text = (text + "\n" if text else "") + json.dumps(_case_data(case)) + "\n"
    elif before is None or not before.strip():
        text = case_yaml(case, note=note)
    else:
        items = re.findall(r"^( *)- ", before, flags=re.MULTILINE)
        indent = items[0] if items else ""
        text = before.rstrip("\n") + "\n\n" + _yaml_item(case, note, indent)
    path.write_text(text, encoding="utf-8")
    try:
        load_cases(path)
    except CaseFileError:
        if before is None:
            path.unlink()
        else:
            path.write_text(before, encoding="utf-8")
        raise
