"""The console's eval view API: an eval run read back from the session store (with
relayrace.evals' own loading and summary code), its routing confusion matrix, and each case
run's first divergence."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ..evals.confusion import ConfusionMatrix
from ..evals.storage import load_eval_run
from ..exceptions import UserError
from ._api import _session
from ._errors import ApiError

__all__ = ["router"]

router = APIRouter(prefix="/api")


@router.get("/evals/{run_id}",
            summary="An eval run: pass rates per case, confusion matrix, first divergences")
async def eval_run(request: Request, run_id: str) -> dict[str, Any]:
    session, made = await _session(request, run_id)  # 404 for another key's session
    if made is not None:
        raise ApiError(404, f"Session {run_id!r} is not an eval run (it holds no case runs).",
                       "not_found")
    try:
        result = await load_eval_run(request.app.state.relayrace.store, session.session_id)
    except UserError as e:
        raise ApiError(404, str(e), "not_found") from e
    matrix = ConfusionMatrix.of(result.runs)
    data = result.to_dict()
    data["confusion"] = {
        "expected": matrix.expected, "reached": matrix.reached, "accuracy": matrix.accuracy,
        "rows": [[matrix.count(e, r) for r in matrix.reached] for e in matrix.expected]}
    for run in data["runs"]:
        failed = next((c for c in run["checks"] if not c["passed"]), None)
        run["first_failure"] = failed
    return data
