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

from ledger.errors import (
    ConfigError,
    ConflictError,
    EngramError,
    LimitExceededError,
    MalformedError,
    RejectedEventError,
    StorageError,
    VerificationError,
)

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


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return problem(
        400,
        "malformed",
        "Malformed request",
        "the request does not match the API's schema",
        errors=[{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in errors[:20]],
    )
