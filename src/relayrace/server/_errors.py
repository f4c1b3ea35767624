"""Errors as JSON with a clear message, never a stack trace."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from ..core.exceptions import (
    AnswerError,
    RelayraceError,
    SessionConflictError,
    SessionInUseError,
    SessionStoreBusy,
    SessionStoreUnavailable,
    UserError,
)

__all__ = ["NO_RETRY", "ApiError", "error_body", "install", "run_failed"]

NO_RETRY = {"x-should-retry": "false"}
"""The header that tells OpenAI's (and Anthropic's) clients not to retry a response: a run
that failed may have done things (its tools) that a second run would do again."""

log = logging.getLogger("relayrace.server")


class ApiError(Exception):
    """A request the server refuses: its HTTP status, message and type."""

    def __init__(self, status: int, message: str, kind: str,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.headers = headers


def error_body(message: str, kind: str) -> dict[str, Any]:
    """The JSON of an error (OpenAI's shape, which its clients read)."""
    return {"error": {"message": message, "type": kind}}


def run_failed(status: str, error: str | None, *, headers: dict[str, str] | None = None,
               run: dict[str, Any] | None = None) -> JSONResponse:
    """The answer to a request whose run ended without a result (``status``: ``failed``,
    ``cancelled`` or ``busy``; ``error``: why; ``run``: the run's summary, added to the body).

    A run refused because another process holds its session is 409: it did nothing, and may
    be tried again. Any other is 500 with ``x-should-retry: false``: a retry would start a
    second run, and the first may have called tools already.
    """
    extra = {} if run is None else {"run": run}
    if status == "busy":
        return JSONResponse({**error_body(f"The session is busy: {error}", "conflict"),
                             **extra}, status_code=409, headers=headers)
    kind = "run_cancelled" if status == "cancelled" else "run_failed"
    return JSONResponse({**error_body(f"The run {status}: {error}", kind), **extra},
                        status_code=500, headers={**(headers or {}), **NO_RETRY})


def _status_of(exc: RelayraceError) -> int:
    if isinstance(exc, SessionInUseError | SessionConflictError):
        return 409
    if isinstance(exc, SessionStoreBusy | SessionStoreUnavailable):
        return 503
    if isinstance(exc, AnswerError | UserError):
        return 400
    return 500


def install(app: Any) -> None:
    """Register the handlers that turn every failure into a JSON error."""

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return JSONResponse(error_body(exc.message, exc.kind), status_code=exc.status,
                            headers=exc.headers)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        return JSONResponse(error_body(str(exc.detail), "http_error"),
                            status_code=exc.status_code, headers=exc.headers)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
            for e in exc.errors())
        return JSONResponse(error_body(f"Invalid request: {problems}.", "invalid_request"),
                            status_code=422)

    async def relayrace_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RelayraceError)
        return JSONResponse(error_body(f"{type(exc).__name__}: {exc}", type(exc).__name__),
                            status_code=_status_of(exc))

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("Unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body("Internal error; the server's log has the details.",
                                       "internal_error"), status_code=500)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(RelayraceError, relayrace_error)
    app.add_exception_handler(Exception, unexpected)
