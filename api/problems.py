"""The one mapping from Engram's typed errors to RFC 9457 problem details.

Every error answer is ``application/problem+json`` with a stable ``type`` URI, a short
``title``, the HTTP ``status``, a ``detail`` and, for verification errors, the ``check``
that failed; conflicts also carry the stream's current head so the client can retry.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engram.protocol.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    EngramError,
    ForbiddenError,
    LimitExceededError,
    MalformedError,
    NotFoundError,
    RateLimitedError,
    RejectedEventError,
    ReplayError,
    StorageError,
    VerificationError,
)
from verifier.token import TokenError

__all__ = ["TYPE_BASE", "problem", "problem_for"]

TYPE_BASE = "https://engram.dev/problems/"


def problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> JSONResponse:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra}
    return JSONResponse(body, status_code=status, media_type="application/problem+json")


def problem_for(error: Exception) -> JSONResponse:
    if isinstance(error, ConflictError):
        return problem(
            409,
            "stream-conflict",
            "Stream head moved",
            str(error),
            stream={"agent": error.agent, "kind": error.kind},
            head_version=error.head_version,
            head_leaf_hash=error.head_leaf_hash,
            next_version=error.next_version,
        )
    if isinstance(error, RateLimitedError):
        resp = problem(429, "rate-limited", "Too many requests", str(error))
        resp.headers["Retry-After"] = str(error.retry_after_s)
        return resp
    if isinstance(error, ReplayError):
        return problem(401, "replayed-request", "Request replayed", str(error), check=error.check)
    if isinstance(error, AuthError):
        resp = problem(401, "unauthenticated", "Not authenticated", str(error), check=error.check)
        resp.headers["WWW-Authenticate"] = 'Engram-Signature realm="engram"'
        return resp
    if isinstance(error, TokenError):
        return problem(403, "token-refused", "Share token refused", str(error), check=error.check)
    if isinstance(error, ForbiddenError):
        return problem(403, "forbidden", "Not allowed", str(error), check=error.check)
    if isinstance(error, NotFoundError):
        return problem(404, "not-found", "Not found", str(error), check=error.check)
    if isinstance(error, LimitExceededError):
        return problem(413, "too-large", "Input too large", str(error), check=error.check)
    if isinstance(error, RejectedEventError):
        return problem(422, "rejected", "Refused by the ledger's rules", str(error), check=error.check)
    if isinstance(error, MalformedError):
        return problem(400, "malformed", "Malformed input", str(error), check=error.check)
    if isinstance(error, VerificationError):
        return problem(422, "verification-failed", "Verification failed", str(error), check=error.check)
    if isinstance(error, StorageError):
        return problem(503, "storage", "Storage unavailable", "the database failed; nothing was written")
    if isinstance(error, ConfigError):
        return problem(503, "not-configured", "Service not configured", str(error))
    if isinstance(error, EngramError):  # pragma: no cover - every subclass is mapped above
        return problem(500, "internal", "Internal error", type(error).__name__)
    return problem(500, "internal", "Internal error", "unexpected error")


async def engram_error_handler(_: Request, exc: Exception) -> JSONResponse:
    return problem_for(exc)


_SLUGS = {404: "not-found", 405: "method-not-allowed", 400: "malformed", 413: "too-large"}


async def http_error_handler(_: Request, exc: Exception) -> JSONResponse:
    """Framework errors (unknown route, wrong method, unparsable body) as problems too."""
    status = int(getattr(exc, "status_code", 500))
    detail = str(getattr(exc, "detail", "")) or "error"
    resp = problem(status, _SLUGS.get(status, "http-error"), detail, detail)
    for k, v in (getattr(exc, "headers", None) or {}).items():
        resp.headers[k] = v
    return resp


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
