"""One parse per envelope: the append path meets the same signed event several times in
one request (rate limits, the memory route, the group commit, the append)."""

from __future__ import annotations

from functools import lru_cache

from verifier.event import Envelope

__all__ = ["parse_envelope"]


@lru_cache(maxsize=256)
def parse_envelope(data: bytes) -> Envelope:
    """:meth:`Envelope.from_bytes`, remembered for the last 256 envelopes (at most 8 KiB
    each). Sound because Envelope is frozen and parsing is a pure function of the bytes;
    a refusal is raised again each time (exceptions are not cached)."""
    return Envelope.from_bytes(data)
