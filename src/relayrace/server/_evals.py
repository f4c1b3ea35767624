"""The console's eval view API: an eval run read back from the session store (with
relayrace.evals' own loading and summary code), its routing confusion matrix, and each case
run's first divergence; and "Save as eval case": a session as a case that expects what
happened (`relayrace eval capture`), returned as YAML and, when the server was started with
a case file, appended to that file (the browser never names a path)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ..core.exceptions import UserError
from ..evals.capture import append_case, capture_case, capture_note, case_yaml, child_logs
from ..evals.confusion import ConfusionMatrix
from ..evals.storage import load_eval_run
from ._api import _session
from ._errors import ApiError

__all__ = ["CaseFile", "router"]

router = APIRouter(prefix="/api")


@dataclass(slots=True)
class CaseFile:
    """The one case file the server appends captured cases to (given when it starts)."""

    path: Path
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one append at a time


class Capture(BaseModel):
    """A session to make an eval case of."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(None, description="The case's id (default: session-ID).")
    append: bool = Field(False, description="Also add it to the server's case file.")


@router.get("/sessions/{session_id}/eval",
            summary="A session's eval results (null unless it is an eval run): pass rates per "
            "case, confusion matrix, first divergences")
async def eval_run(request: Request, session_id: str) -> dict[str, Any]:
    session, made = await _session(request, session_id)  # 404 for another key's session
    if made is not None:
        return {"session_id": session_id, "eval": None}
    try:
        result = await load_eval_run(request.app.state.relayrace.store, session.session_id)
    except UserError:  # not an eval run
        return {"session_id": session_id, "eval": None}
    matrix = ConfusionMatrix.of(result.runs)
    data = result.to_dict()
    data["confusion"] = {
        "expected": matrix.expected, "reached": matrix.reached, "accuracy": matrix.accuracy,
        "summary": matrix.summary(),
        "rows": [[matrix.count(e, r) for r in matrix.reached] for e in matrix.expected]}
    for run in data["runs"]:
        failed = next((c for c in run["checks"] if not c["passed"]), None)
        run["first_failure"] = failed
    return {"session_id": session_id, "eval": data}


@router.post("/sessions/{session_id}/eval-case",
             summary="A session as an eval case (YAML), optionally added to the case file")
async def save_eval_case(request: Request, session_id: str, body: Capture) -> dict[str, Any]:
    session, made = await _session(request, session_id)
    events = [] if made is not None else await session.get_events()
    children = await child_logs(request.app.state.relayrace.store, events)
    case = capture_case(events, body.id or f"session-{session_id}",  # 400 when it cannot
                        children=children)
    note = capture_note(session_id, events)
    into: CaseFile | None = request.app.state.eval_cases
    if body.append:
        if into is None:
            raise ApiError(400, "This server has no case file to add cases to; start it with "
                           "one (`relayrace serve --eval-cases cases.yaml`), or copy the "
                           "YAML instead.", "invalid_request_error")
        async with into.lock:
            await asyncio.to_thread(append_case, into.path, case, note=note)
    return {"case_id": case.id, "yaml": case_yaml(case, note=note),
            "appended_to": str(into.path) if body.append and into is not None else None,
            "case_file": str(into.path) if into is not None else None}
