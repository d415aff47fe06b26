"""Errors raised by the ledger, rooted in the one tree drawn in :mod:`verifier.errors`.

* :class:`ConflictError`: optimistic concurrency on a stream failed; the client refreshes
  its stream head (carried on the error) and retries.
* :class:`StorageError`: the database failed operationally; the write did not happen.
* :class:`ConfigError`: the ledger is not set up (no database, no key, mismatched origin).
* Bad input raises :class:`verifier.errors.VerificationError` subclasses, re-exported here,
  plus :class:`RejectedEventError` for ledger policy (unknown kind, reserved agent id).
"""

from __future__ import annotations

from verifier.errors import (
    CanonicalFormError,
    EngramError,
    KeyStateError,
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    ProofError,
    SignatureError,
    StreamChainError,
    UnknownKeyError,
    VerificationError,
)

__all__ = [
    "AuthError",
    "CanonicalFormError",
    "ConfigError",
    "ConflictError",
    "EngramError",
    "ForbiddenError",
    "KeyStateError",
    "LimitExceededError",
    "LogIntegrityError",
    "MalformedError",
    "NotFoundError",
    "OriginMismatchError",
    "PrevMismatchError",
    "ProofError",
    "RateLimitedError",
    "RejectedEventError",
    "ReplayError",
    "SignatureError",
    "StorageError",
    "StreamChainError",
    "UnknownKeyError",
    "VerificationError",
    "VersionConflictError",
    "VersionGapError",
]


class ConflictError(EngramError):
    """The stream head moved (or the client's view is wrong). Retry with the new head.

    Attributes:
        agent, kind: the stream.
        head_version: the current head's version, or None for an empty stream.
        head_leaf_hash: the current head's leaf hash (hex), or None.
    """

    def __init__(
        self,
        message: str,
        *,
        agent: str,
        kind: str,
        head_version: int | None,
        head_leaf_hash: str | None,
    ) -> None:
        self.agent = agent
        self.kind = kind
        self.head_version = head_version
        self.head_leaf_hash = head_leaf_hash
        super().__init__(message)

    @property
    def next_version(self) -> int:
        return 0 if self.head_version is None else self.head_version + 1


class VersionConflictError(ConflictError):
    """The version is already taken: another writer appended to the stream first."""


class VersionGapError(ConflictError):
    """The version skips ahead of the stream head; versions are dense from 0."""


class PrevMismatchError(ConflictError):
    """``prev`` is not the leaf hash of the stream's current head."""


class StorageError(EngramError):
    """The database failed; nothing was acknowledged. May succeed if retried later."""


class LogIntegrityError(StorageError):
    """The database disagrees with the log it holds (a changed, deleted or inserted row, a
    rolled-back database): the log refuses to extend it and nothing is written. ``check``
    names what disagreed (e.g. ``state.agent_keys``, ``state.last_timestamp``,
    ``signer.fork``); ``engram audit`` names every differing row and column."""

    def __init__(self, message: str, *, check: str) -> None:
        self.check = check
        prefix = f"[{check}] "  # once, as VerificationError puts it
        super().__init__(message if message.startswith(prefix) else prefix + message)


class ConfigError(EngramError):
    """The ledger is not set up as this command needs (database, key, origin)."""


class RejectedEventError(VerificationError):
    """Well-formed input that the ledger's policy refuses (unknown kind, reserved id)."""

    default_check = "ledger.policy"


class AuthError(VerificationError):
    """A request's signature, signer, timestamp or bearer token does not authenticate it."""

    default_check = "auth"


class ReplayError(AuthError):
    """A signed request's nonce was already used within its time window."""

    default_check = "auth.replay"


class ForbiddenError(VerificationError):
    """The caller is authenticated but not allowed this (another agent's memory, scope)."""

    default_check = "auth.scope"


class NotFoundError(VerificationError):
    """The named agent, item, session or entry does not exist (or is not visible)."""

    default_check = "not_found"


class RateLimitedError(EngramError):
    """Too many requests for one key; retry after ``retry_after_s`` seconds."""

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)
