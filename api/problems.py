"""The one mapping from Engram's typed errors to RFC 9457 problem details.

Every error answer is ``application/problem+json`` with a stable ``type`` URI, a short
``title``, the HTTP ``status``, a ``detail`` and, for verification errors, the ``check``
that failed; conflicts also carry the stream's current head so the client can retry.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engram.protocol.errors import (
    AuthError,
    ConflictError,
    LogIntegrityError,
    RateLimitedError,
    ReplayError,
    StorageError,
    VerificationError,
)
from engram.protocol.problems import TYPE_BASE, problem_type_for

__all__ = ["TYPE_BASE", "busy_handler", "problem", "problem_for"]


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def problem_for(error: Exception) -> JSONResponse:
    """The problem for ``error``, from the one table shared with the client
    (:data:`engram.protocol.problems.PROBLEMS`), plus what some rows carry."""
    row = problem_type_for(error)
    if row is None:
        return problem(500, "internal", "Internal error", "unexpected error")
    extra: dict[str, Any] = {}
    detail = str(error)
    if isinstance(error, ConflictError):
        extra = {
            "stream": {"agent": error.agent, "kind": error.kind},
            "head_version": error.head_version,
            "head_leaf_hash": error.head_leaf_hash,
            "next_version": error.next_version,
        }
    elif isinstance(error, VerificationError):
        extra = {"check": error.check}
    elif isinstance(error, LogIntegrityError):
        extra = {"check": error.check}  # the operator's lead: engram audit names the rows
        detail = f"the log refuses to extend this database until an operator resolves it ({error.check})"
    elif isinstance(error, StorageError):
        detail = "the database failed; nothing was written"  # never the driver's message
    resp = problem(row.status, row.slug, row.title, detail, **extra)
    if isinstance(error, RateLimitedError):
        resp.headers["Retry-After"] = str(error.retry_after_s)
    if isinstance(error, AuthError) and not isinstance(error, ReplayError):
        resp.headers["WWW-Authenticate"] = 'Engram-Signature realm="engram"'
    return resp


async def engram_error_handler(_: Request, exc: Exception) -> JSONResponse:
    return problem_for(exc)


async def busy_handler(_: Request, exc: Exception) -> JSONResponse:
    """No database connection became free in time (the connection pool's timeout): the
    service is busy, not broken. 503 with Retry-After, as for any storage failure (nothing
    was written: the request never had a connection)."""
    resp = problem_for(StorageError("no database connection became free in time"))
    resp.headers["Retry-After"] = "1"
    return resp


_SLUGS = {404: "not-found", 405: "method-not-allowed", 400: "malformed", 413: "too-large"}


async def http_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """Framework errors (unknown route, wrong method, unparsable body) as problems too."""
    status = int(getattr(exc, "status_code", 500))
    detail = str(getattr(exc, "detail", "")) or "error"
    resp = problem(status, _SLUGS.get(status, "http-error"), detail, detail)
    for k, v in (getattr(exc, "headers", None) or {}).items():
        resp.headers[k] = v
    if status == 405:
        # Every documented method at this path: the router names only the first route's
        # (GET and POST /v1/agents/{a}/sessions are two routes).
        methods = _documented_methods(request)
        if methods:
            resp.headers["Allow"] = ", ".join(methods)
    return resp


_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _documented_methods(request: Request) -> list[str]:
    """The methods the OpenAPI document lists for the request's path (empty if none)."""
    table = getattr(request.app.state, "allow_table", None)
    if table is None:
        table = [
            (re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)) + "$"), ops)
            for path, ops in request.app.openapi().get("paths", {}).items()
        ]
        request.app.state.allow_table = table
    path = request.url.path
    return sorted({m.upper() for rx, ops in table if rx.match(path) for m in ops if m in _HTTP_METHODS})


async def unexpected_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """A bug, not bad input: a problem detail without internals (the traceback is logged)."""
    import logging

    logging.getLogger("engram.api").error("unexpected error", exc_info=exc)
    return problem(500, "internal", "Internal error", "unexpected error")


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return problem(
        400,
        "malformed",
        "Malformed request",
        "the request does not match the API's schema",
        errors=[{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in errors[:20]],
    )


_DESCRIPTIONS = {
    405: "method not allowed",
    400: "malformed request",
    401: "not authenticated (signature, time window, nonce or operator token)",
    403: "not allowed (another agent's memory, share token out of scope)",
    404: "not found",
    409: "the stream head moved; the problem carries the current head",
    413: "request too large",
    422: "refused by the ledger's rules or a verification",
    429: "rate limited; see Retry-After",
    503: "storage unavailable; nothing was written",
}

_PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "check": {"type": "string"},
    },
}


def problem_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for RFC 9457 problems with these status codes."""
    return {
        c: {
            "description": _DESCRIPTIONS[c],
            "content": {"application/problem+json": {"schema": _PROBLEM_SCHEMA}},
        }
        for c in sorted({400, 413, 422, 429, 503, *codes})
    }
