"""Wire types client and server agree on: a signed submission, the receipt an acknowledged
append returns with its inclusion proof, consistency proofs and a stream's head.

Plain frozen values; the bytes they carry are checked by :mod:`verifier` where they are
used (specs/leaf.md, specs/http-api.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConsistencyProof", "InclusionProof", "Receipt", "StreamState", "Submission"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Submission:
    """A signed event as an agent submits it: exact envelope bytes, signature, body, salt."""

    envelope: bytes
    signature: bytes
    body: bytes
    salt: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class InclusionProof:
    index: int
    size: int
    leaf_hash: bytes
    root: bytes
    hashes: tuple[bytes, ...]
    checkpoint: bytes | None  # the signed note for ``size``, when one was published


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsistencyProof:
    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    hashes: tuple[bytes, ...]
    old_checkpoint: bytes | None
    new_checkpoint: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """What an acknowledged append returns: where the event is and the proof of it."""

    index: int
    timestamp_us: int
    leaf_hash: bytes
    leaf: bytes
    agent: str
    kind: str
    version: int
    checkpoint: bytes
    proof: InclusionProof
    #: What the service answered along with this receipt, unverified (HTTP routes: the item
    #: ``ref`` a memory or record write made, a session close's ``distilled`` and ``decisions``
    #: receipts); None in process. Whoever uses it verifies it first.
    answer: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class StreamState:
    """A stream's head as a client tracks it: its version and leaf hash (hex)."""

    version: int
    leaf_hash: str
