"""The one exception tree of Engram.

Trust role: every failure a caller can see is one of these types, so that callers can tell
"the input is bad, never retry" apart from "the stream moved, retry with the new head" and
"the system failed, maybe retry later". Third-party errors are translated once, at the
adapter that called the third party, with ``raise ... from e``.

::

    EngramError
    ├── VerificationError            untrusted input failed a check; never retry
    │   ├── MalformedError           bytes do not parse under the strict grammar
    │   │   ├── CanonicalFormError   JSON that is not RFC 8785 canonical / has floats, big ints
    │   │   └── LimitExceededError   an input is over its size or count bound
    │   ├── SignatureError           an Ed25519 signature does not verify
    │   ├── UnknownKeyError          no trusted key matches the key id / name
    │   ├── KeyStateError            the key exists but is not valid at that log position
    │   ├── OriginMismatchError      the log origin is not the expected one
    │   ├── ProofError               an inclusion or consistency proof fails
    │   └── StreamChainError         a stream's version / prev chain is broken
    ├── ConflictError                optimistic concurrency (defined in engram.protocol.errors)
    └── StorageError                 operational failure (defined in engram.protocol.errors)

Every ``VerificationError`` carries ``check``, a stable dotted name of the check that failed
(for example ``"note.signature"`` or ``"inclusion.root"``) so that reports can name it.
"""

from __future__ import annotations

__all__ = [
    "CanonicalFormError",
    "EngramError",
    "KeyStateError",
    "LimitExceededError",
    "MalformedError",
    "OriginMismatchError",
    "ProofError",
    "SignatureError",
    "StreamChainError",
    "UnknownKeyError",
    "VerificationError",
]


class EngramError(Exception):
    """Root of every error Engram raises on purpose."""


class VerificationError(EngramError):
    """Untrusted input failed a check. Retrying with the same input cannot succeed.

    Attributes:
        check: stable dotted name of the failed check, e.g. ``"inclusion.root"``.
    """

    default_check = "verification"

    def __init__(self, message: str, *, check: str | None = None) -> None:
        self.check = check or self.default_check
        # The one place a check name is put in front of a message, once: a message that
        # already starts with it (a service's problem detail decoded by the client, an error
        # re-raised with its own check) is kept as it is, never "[c] [c] ...".
        prefix = f"[{self.check}] "
        super().__init__(message if message.startswith(prefix) else prefix + message)


class MalformedError(VerificationError):
    """The bytes do not parse under the strict grammar of their format."""

    default_check = "parse"


class CanonicalFormError(MalformedError):
    """JSON is not in the one canonical form (RFC 8785, no floats, safe integers only)."""

    default_check = "canonical"


class LimitExceededError(MalformedError):
    """An input exceeds its size or count bound; it was rejected before further work."""

    default_check = "limit"


class SignatureError(VerificationError):
    """An Ed25519 signature does not verify over the exact signed bytes."""

    default_check = "signature"


class UnknownKeyError(VerificationError):
    """No trusted key matches the key id or name the input refers to."""

    default_check = "key.unknown"


class KeyStateError(VerificationError):
    """The key is known but is not valid at that position of the log (revoked, rotated out)."""

    default_check = "key.state"


class OriginMismatchError(VerificationError):
    """The input names a different log origin than the one being verified."""

    default_check = "origin"


class ProofError(VerificationError):
    """An RFC 9162 inclusion or consistency proof does not verify."""

    default_check = "proof"


class StreamChainError(VerificationError):
    """A stream's version sequence or ``prev`` link is broken."""

    default_check = "stream.chain"
