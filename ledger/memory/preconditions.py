"""State-dependent refusals for memory events, handed to every :class:`~ledger.log.Ledger` by
the composition root (:mod:`ledger.compose`) as a batch validator.

Body schemas and the write gate are stateless and run in the append path itself. These
checks need the memory projection, so they run before the append lock on a synced
projection (and every ledger runs them, whatever path submitted the events: the SDK, the
CLI's ``event append``, later the HTTP API). ``evolve`` re-checks what matters in log
order, so an event that slips through a race has no effect rather than a wrong one.

Refused (``RejectedEventError``): a session opened twice; turns or a close for a session
that is not open; supersession of a missing or inactive item; exemption of a missing item
or one that is neither active nor archived; erasure of items that do not exist or are
already erased; a memory that repeats one of its provenance sources word for word.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engram.protocol.errors import RejectedEventError
from engram.protocol.gate import WriteGate
from ledger.memory.projection import Projection
from ledger.storage.store import SqlStore
from verifier.event import Envelope, Leaf
from verifier.jcs import parse_strict

__all__ = ["MemoryPreconditions"]

_NEEDS_STATE = frozenset(
    {
        "session.opened",
        "session.turn",
        "session.closed",
        "memory.superseded",
        "memory.decay_exempted",
        "memory.erased",
    }
)


class MemoryPreconditions:
    """Callable batch validator: the store and ``(envelope, body)`` pairs in, raises to refuse."""

    def __init__(self, gate: WriteGate) -> None:
        self.gate = gate

    @staticmethod
    def source_texts(store: SqlStore, provenance: Sequence[Mapping[str, str]], agent: str) -> list[str]:
        """Texts of the agent's own log records a memory cites (turns, records), for the
        verbatim check. Another agent's entries are never read: whether a write is refused
        must not depend on bodies the writer cannot see (else a refusal would confirm a
        guess of another agent's private text)."""
        texts = []
        for p in provenance:
            if p["source_type"] in ("log", "turn", "pact", "eval"):
                index = int(p["source_ref"])
                leaf = store.leaf(index)
                if leaf is None or Leaf.from_bytes(leaf).envelope.agent != agent:
                    continue
                sb = store.body(index)
                if sb is None:
                    continue
                body = parse_strict(sb[1], max_bytes=1 << 24)
                for f in ("content", "promise", "description", "evidence"):
                    if isinstance(body.get(f), str):
                        texts.append(body[f])
        return texts

    def __call__(self, store: SqlStore, batch: Sequence[tuple[Envelope, Mapping[str, Any]]]) -> None:
        projection = Projection(store)
        if any(e.kind in _NEEDS_STATE for e, _ in batch):
            projection.sync()  # memory.written alone reads only stored bodies, not the projection
        opened: dict[tuple[str, str], str] = {}  # sessions opened or closed earlier in this batch
        for env, body in batch:
            kind = env.kind
            if kind == "session.opened":
                key = (env.agent, body["session"])
                if key in opened or projection.session(*key) is not None:
                    raise RejectedEventError(
                        f"session {body['session']} already exists", check="memory.session"
                    )
                opened[key] = "open"
            elif kind in ("session.turn", "session.closed"):
                key = (env.agent, body["session"])
                s = projection.session(*key)
                status = opened.get(key) or (None if s is None else s.status)
                if status != "open":
                    raise RejectedEventError(
                        f"session {body['session']} of {env.agent} is not open", check="memory.session"
                    )
                if kind == "session.closed":
                    opened[key] = "closed"
            elif kind in ("memory.superseded", "memory.decay_exempted"):
                it = projection.item(env.agent, body["item"])
                if it is None:
                    raise RejectedEventError(
                        f"{kind} names item {body['item']}, which does not exist", check="memory.missing_item"
                    )
                restorable = kind == "memory.decay_exempted" and it.status == "archived"
                if it.status != "active" and not restorable:
                    raise RejectedEventError(f"item {it.ref} is {it.status}", check="memory.item_state")
            elif kind == "memory.erased":
                for ref in body["refs"]:
                    it = projection.item(env.agent, ref)
                    if it is None or it.status == "erased":
                        raise RejectedEventError(f"nothing to erase at {ref}", check="memory.missing_item")
            elif kind == "memory.written" and body.get("provenance"):
                self.gate.check_not_verbatim(
                    body["content"], self.source_texts(store, body["provenance"], env.agent)
                )
