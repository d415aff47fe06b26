"""The one table between Engram's typed errors and RFC 9457 problem details (specs/http-api.md §4).

The service (:mod:`api.problems`) answers an error with the first row whose error class it
is an instance of; the client (:mod:`engram.client.http`) raises the class of the row the
answer's ``type`` names. Both read this table, so the two directions cannot drift apart.
Rows go from the most specific class to the most general.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.protocol.errors import (
    AuthError,
    ConfigError,
    ConflictError,
    EngramError,
    ForbiddenError,
    LimitExceededError,
    LogIntegrityError,
    MalformedError,
    NotFoundError,
    RateLimitedError,
    RejectedEventError,
    ReplayError,
    StorageError,
    VerificationError,
)
from verifier.token import TokenError

__all__ = ["PROBLEMS", "TYPE_BASE", "ProblemType", "problem_type_for", "problem_type_named"]

TYPE_BASE = "https://engram.dev/problems/"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProblemType:
    slug: str
    status: int
    title: str
    error: type[EngramError]

    @property
    def uri(self) -> str:
        return TYPE_BASE + self.slug


PROBLEMS: tuple[ProblemType, ...] = (
    ProblemType(slug="stream-conflict", status=409, title="Stream head moved", error=ConflictError),
    ProblemType(slug="rate-limited", status=429, title="Too many requests", error=RateLimitedError),
    ProblemType(slug="replayed-request", status=401, title="Request replayed", error=ReplayError),
    ProblemType(slug="unauthenticated", status=401, title="Not authenticated", error=AuthError),
    ProblemType(slug="token-refused", status=403, title="Share token refused", error=TokenError),
    ProblemType(slug="forbidden", status=403, title="Not allowed", error=ForbiddenError),
    ProblemType(slug="not-found", status=404, title="Not found", error=NotFoundError),
    ProblemType(slug="too-large", status=413, title="Input too large", error=LimitExceededError),
    ProblemType(slug="rejected", status=422, title="Refused by the ledger's rules", error=RejectedEventError),
    ProblemType(slug="malformed", status=400, title="Malformed input", error=MalformedError),
    ProblemType(slug="verification-failed", status=422, title="Verification failed", error=VerificationError),
    # Before "storage" (its subclass): a permanent integrity stop, which needs an operator
    # (engram audit), must not read as a passing outage.
    ProblemType(slug="log-integrity", status=500, title="Log integrity stop", error=LogIntegrityError),
    ProblemType(slug="storage", status=503, title="Storage unavailable", error=StorageError),
    ProblemType(slug="not-configured", status=503, title="Service not configured", error=ConfigError),
)

_BY_SLUG = {p.slug: p for p in PROBLEMS}


def problem_type_for(error: BaseException) -> ProblemType | None:
    """The row the service answers ``error`` with (None: not an Engram error, a bug)."""
    return next((p for p in PROBLEMS if isinstance(error, p.error)), None)


def problem_type_named(type_uri: str) -> ProblemType | None:
    """The row a problem's ``type`` URI names (None: unknown to this client)."""
    if not type_uri.startswith(TYPE_BASE):
        return None
    return _BY_SLUG.get(type_uri[len(TYPE_BASE) :])
