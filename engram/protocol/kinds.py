"""The closed, versioned registry of event kinds (specs/event-envelope.md §4).

Stored data names kinds; code never imports or dispatches on anything stored data names
beyond a lookup in this table. A kind not listed here is rejected before anything is signed
or stored. Each kind's body schema is in engram/protocol/schemas.py (specs/memory-events.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engram.protocol.errors import RejectedEventError

__all__ = ["KINDS", "REGISTRY_VERSION", "KindSpec", "require_kind"]

REGISTRY_VERSION = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class KindSpec:
    name: str
    group: str  # "key" | "session" | "memory" | "record" | "share"
    description: str
    #: The log indices whose bodies an accepted event of this kind erases, in the same
    #: transaction (right to be forgotten: the leaves and every proof stay).
    erases: Callable[[Mapping[str, Any]], tuple[int, ...]] = lambda body: ()


_SPECS = (
    KindSpec(
        name="key.registered", group="key", description="an agent key, self-signed, with proof of possession"
    ),
    KindSpec(name="key.rotated", group="key", description="the active key hands over to a new key"),
    KindSpec(
        name="key.revoked",
        group="key",
        description="the active key stops signing (by the agent or the policy key)",
    ),
    KindSpec(name="session.opened", group="session", description="a working session starts"),
    KindSpec(name="session.turn", group="session", description="a message or tool call, full fidelity"),
    KindSpec(name="session.closed", group="session", description="a working session ends"),
    KindSpec(name="memory.written", group="memory", description="a structured memory"),
    KindSpec(name="memory.distilled", group="memory", description="a session distilled into memories"),
    KindSpec(name="memory.tier_changed", group="memory", description="a policy moved a memory between tiers"),
    KindSpec(name="memory.superseded", group="memory", description="an append-only correction of an entry"),
    KindSpec(name="memory.decay_exempted", group="memory", description="a memory exempt from decay"),
    KindSpec(name="memory.archived", group="memory", description="a memory at the end of its decay window"),
    KindSpec(name="memory.accessed", group="memory", description="a memory used by recall"),
    KindSpec(
        name="memory.erased",
        group="memory",
        description="a body erased; the leaf stays",
        erases=lambda body: (int(body["index"]),),
    ),
    KindSpec(name="pact.outcome", group="record", description="a pact fulfilled or violated, with quality"),
    KindSpec(name="eval.outcome", group="record", description="an evaluation result"),
    KindSpec(
        name="boundary.event", group="record", description="scope violation, safety intervention, anomaly"
    ),
    KindSpec(name="commitment", group="record", description="a cross-session promise"),
    KindSpec(name="share.revoked", group="share", description="a share token revoked by its id"),
)

KINDS: dict[str, KindSpec] = {s.name: s for s in _SPECS}


def require_kind(kind: str) -> KindSpec:
    """Return the registered kind or raise :class:`RejectedEventError` naming it."""
    spec = KINDS.get(kind)
    if spec is None:
        raise RejectedEventError(
            f"unknown event kind {kind!r}; registry v{REGISTRY_VERSION} knows " + ", ".join(sorted(KINDS)),
            check="ledger.kind",
        )
    return spec
