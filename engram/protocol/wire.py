"""Wire types client and server agree on: a signed submission, the receipt an acknowledged
append returns with its inclusion proof, consistency proofs and a stream's head.

Plain frozen values; the bytes they carry are checked by :mod:`verifier` where they are
used (specs/leaf.md, specs/http-api.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ConsistencyProof", "InclusionProof", "Outcome", "Receipt", "StreamState", "Submission"]


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
    #: What the memory service did with this event beside appending it (the item a write
    #: made, what a close distilled), unverified; None from a bare log or the generic
    #: ``POST /v1/events``. Whoever uses it verifies it first.
    answer: Outcome | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What the memory service answered for one agent-signed event, the same over HTTP (the
    memory routes' answers) and in process (``MemoryService.submit``).

    ``named``: the event's kind makes or confirms an item, and ``ref`` is that item (None:
    the write was refused as an item, e.g. a near-duplicate of an erased memory). A
    ``session.closed`` carries its distillation's receipt, the memories it distilled and
    the policy decisions that followed (policy-signed receipts, unverified). A
    ``memory.erased`` says, for each erased memory that was the current value of a fact that
    changed, which value is current now (``current``: (erased ref, current ref or None when
    no earlier value is left))."""

    named: bool = False
    ref: str | None = None
    distilled: Receipt | None = None
    entries: int = 0
    decisions: tuple[Receipt, ...] = ()
    current: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class StreamState:
    """A stream's head as a client tracks it: its version and leaf hash (hex)."""

    version: int
    leaf_hash: str
