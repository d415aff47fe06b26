"""One parse per envelope, and a signed event as the append path hands it down parsed
(:class:`Prepared`, made by ``Ledger.prepare``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from engram.protocol.wire import Submission
from verifier.event import Envelope

__all__ = ["Prepared", "parse_envelope"]


@lru_cache(maxsize=256)
def parse_envelope(data: bytes) -> Envelope:
    """:meth:`Envelope.from_bytes`, remembered for the last 256 envelopes (at most 8 KiB
    each). Sound because Envelope is frozen and parsing is a pure function of the bytes;
    a refusal is raised again each time (exceptions are not cached)."""
    return Envelope.from_bytes(data)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """A signed event after every check that needs no log state (:meth:`Ledger.prepare`):
    its envelope and body parsed once, the body checked against the envelope's commitment,
    its schema and the write gate. The edge makes one and hands it down (one event was parsed four times per request); :meth:`Ledger.append` takes it as it is.
    Only :meth:`Ledger.prepare` makes one."""

    sub: Submission
    envelope: Envelope
    body: Mapping[str, Any]
    #: the public key the signature was verified with before the lock (None: not yet)
    verified_with: bytes | None = None
    #: the authority it was prepared under (append re-prepares it under a narrower one)
    operator: bool = False
    system: bool = False
