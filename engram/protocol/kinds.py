"""The closed, versioned registry of event kinds (specs/event-envelope.md §4): the one home of
what Engram knows about each kind.

Each entry names the kind's group, who signs it, its body schema (a function of
:mod:`engram.protocol.schemas`), the body members the write gate must see, the memory items
it makes, and which stored bodies it erases. Every other table keyed by kind is a table of
small functions that must have a row for every kind here (tests/unit/test_kind_tables.py):

* the projection's ``evolve`` handlers (``ledger/memory/state.py`` ``EVOLVE``),
* the append preconditions (``ledger/memory/preconditions.py`` ``PRECONDITIONS``),
* the HTTP client's routes (``engram/client/http.py`` ``ROUTES``).

Stored data names kinds; code never imports or dispatches on anything stored data names
beyond a lookup in this table. A kind not listed here is rejected before anything is signed
or stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engram.protocol import schemas
from engram.protocol.errors import RejectedEventError

__all__ = [
    "ERASABLE_KINDS",
    "GATED_KINDS",
    "KINDS",
    "NAMES_ITEM",
    "REGISTRY_VERSION",
    "KindSpec",
    "gated_texts",
    "kinds_where",
    "require_kind",
    "validate_body",
    "verbatim_texts",
]

REGISTRY_VERSION = 2

Group = Literal["key", "session", "memory", "record", "share", "mesh"]
#: ``agent``: the agent's own key (a ``key.registered`` is self-signed and needs operator
#: authorization); ``policy``: the ledger's policy agent, on the agent's stream.
Signer = Literal["agent", "policy"]
#: How an event of the kind becomes memory items: ``body`` (one item, the body's content),
#: ``entries`` (one item per entry), ``record`` (one COLD item, text from
#: :func:`engram.protocol.records.record_content`), or None.
Items = Literal["body", "entries", "record"] | None


def _no_texts(body: Mapping[str, Any]) -> list[str]:
    return []


def _members(*names: str) -> Callable[[Mapping[str, Any]], list[str]]:
    def texts(body: Mapping[str, Any]) -> list[str]:
        return [str(body[f]) for f in names if body.get(f)]

    return texts


def _entry_texts(body: Mapping[str, Any]) -> list[str]:
    entries = body.get("entries") or []
    return [
        str(e[f]) for e in entries for f in ("content", "evidence") if isinstance(e, Mapping) and e.get(f)
    ]


def _erases_nothing(body: Mapping[str, Any]) -> tuple[int, ...]:
    return ()


def _erases_index(body: Mapping[str, Any]) -> tuple[int, ...]:
    return (int(body["index"]), *(int(i) for i in body.get("also") or ()))


@dataclass(frozen=True, slots=True, kw_only=True)
class KindSpec:
    name: str
    group: Group
    description: str
    schema: Callable[[schemas.BodyReader], None]
    signer: Signer = "agent"
    #: The texts of a body that become recalled memory, and so pass the write gate.
    gated: Callable[[Mapping[str, Any]], list[str]] = _no_texts
    #: Texts kept verbatim (turns, titles, summaries): never scanned for directives, but
    #: refused if they carry an unredacted secret.
    verbatim: Callable[[Mapping[str, Any]], list[str]] = _no_texts
    items: Items = None
    #: The log indices whose bodies an accepted event erases, in the same transaction
    #: (right to be forgotten: the leaves and every proof stay).
    erases: Callable[[Mapping[str, Any]], tuple[int, ...]] = _erases_nothing
    #: Its body is content an erasure may remove (what was said, remembered or recorded).
    #: Otherwise the entry is a **control** entry (keys, meshes, policy decisions, exemptions,
    #: revocations, erasures): its body is state, and erasing it is refused
    #: (``memory.erase_control``; specs/memory-events.md, "Erasure removes text, never
    #: state"). A new kind is a control entry unless it says otherwise.
    erasable: bool = False
    #: Its body names an existing item of the same agent (``item``, ``confirms``, ``by``):
    #: the projection reads that item before folding the entry.
    names_item: bool = False


_SPECS = (
    KindSpec(
        name="key.registered",
        group="key",
        description="an agent key, self-signed, with proof of possession",
        schema=schemas.key_event,
    ),
    KindSpec(
        name="key.rotated",
        group="key",
        description="the active key hands over to a new key",
        schema=schemas.key_event,
    ),
    KindSpec(
        name="key.revoked",
        group="key",
        description="the active key stops signing (by the agent or the policy key)",
        schema=schemas.key_event,
    ),
    KindSpec(
        name="session.opened",
        group="session",
        description="a working session starts",
        schema=schemas.session_opened,
        verbatim=_members("title"),
        erasable=True,
    ),
    KindSpec(
        name="session.turn",
        group="session",
        description="a message or tool call, full fidelity",
        schema=schemas.session_turn,
        verbatim=_members("content"),
        erasable=True,
    ),
    KindSpec(
        name="session.closed",
        group="session",
        description="a working session ends",
        schema=schemas.session_closed,
        verbatim=_members("summary"),
        erasable=True,
    ),
    KindSpec(
        name="memory.written",
        group="memory",
        description="a structured memory",
        schema=schemas.memory_written,
        gated=_members("content", "evidence"),
        items="body",
        erasable=True,
    ),
    KindSpec(
        name="memory.distilled",
        group="memory",
        description="a session distilled into memories",
        schema=schemas.memory_distilled,
        signer="policy",
        gated=_entry_texts,
        items="entries",
        erasable=True,
    ),
    KindSpec(
        name="memory.tier_changed",
        group="memory",
        description="a policy moved a memory between tiers",
        schema=schemas.memory_tier_changed,
        signer="policy",
        names_item=True,
    ),
    KindSpec(
        name="memory.superseded",
        group="memory",
        description="an append-only correction of an entry",
        schema=schemas.memory_superseded,
        gated=_members("content", "reason"),
        items="body",
        erasable=True,
        names_item=True,
    ),
    KindSpec(
        name="memory.decay_exempted",
        group="memory",
        description="a memory exempt from decay",
        schema=schemas.memory_decay_exempted,
        gated=_members("reason"),
        names_item=True,
    ),
    KindSpec(
        name="memory.archived",
        group="memory",
        description="a memory at the end of its decay window",
        schema=schemas.memory_archived,
        signer="policy",
        names_item=True,
    ),
    KindSpec(
        name="memory.replaced",
        group="memory",
        description="a policy found that a newer memory states a new value of the same fact",
        schema=schemas.memory_replaced,
        signer="policy",
        names_item=True,
    ),
    KindSpec(
        name="memory.accessed",
        group="memory",
        description="a memory used by recall",
        schema=schemas.memory_accessed,
        signer="policy",
    ),
    KindSpec(
        name="memory.erased",
        group="memory",
        description="a body erased; the leaf stays",
        schema=schemas.memory_erased,
        erases=_erases_index,
    ),
    KindSpec(
        name="pact.outcome",
        group="record",
        description="a pact fulfilled or violated, with quality",
        schema=schemas.pact_outcome,
        gated=_members("evidence"),
        items="record",
        erasable=True,
    ),
    KindSpec(
        name="eval.outcome",
        group="record",
        description="an evaluation result",
        schema=schemas.eval_outcome,
        gated=_members("evidence"),
        items="record",
        erasable=True,
    ),
    KindSpec(
        name="boundary.event",
        group="record",
        description="scope violation, safety intervention, anomaly",
        schema=schemas.boundary_event,
        gated=_members("description"),
        items="record",
        erasable=True,
    ),
    KindSpec(
        name="commitment",
        group="record",
        description="a cross-session promise",
        schema=schemas.commitment,
        gated=_members("promise", "counterparty"),
        items="record",
        erasable=True,
    ),
    KindSpec(
        name="share.revoked",
        group="share",
        description="a share token revoked by its id",
        schema=schemas.share_revoked,
    ),
    KindSpec(
        name="mesh.created",
        group="mesh",
        description="a Memory Mesh created by the agent its id names",
        schema=schemas.mesh_created,
        verbatim=_members("title"),
    ),
    KindSpec(
        name="mesh.invited",
        group="mesh",
        description="the mesh's creator invited an agent",
        schema=schemas.mesh_member,
    ),
    KindSpec(
        name="mesh.joined",
        group="mesh",
        description="an invited agent joined the mesh",
        schema=schemas.mesh_only,
    ),
    KindSpec(
        name="mesh.granted",
        group="mesh",
        description="a member's grant: the WARM categories it shares and reads",
        schema=schemas.mesh_granted,
    ),
    KindSpec(
        name="mesh.left",
        group="mesh",
        description="a member left the mesh",
        schema=schemas.mesh_only,
    ),
    KindSpec(
        name="mesh.removed",
        group="mesh",
        description="the mesh's creator removed a member",
        schema=schemas.mesh_member,
    ),
    KindSpec(
        name="mesh.dissolved",
        group="mesh",
        description="the mesh's creator dissolved it",
        schema=schemas.mesh_only,
    ),
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


def kinds_where(
    *, group: Group | None = None, signer: Signer | None = None, items: tuple[Items, ...] | None = None
) -> frozenset[str]:
    """The registered kinds matching every given attribute (sets derive from the registry)."""
    return frozenset(
        s.name
        for s in _SPECS
        if (group is None or s.group == group)
        and (signer is None or s.signer == signer)
        and (items is None or s.items in items)
    )


def validate_body(kind: str, body: object) -> Mapping[str, Any]:
    """Validate ``body`` against the schema of ``kind``; return it unchanged."""
    spec = KINDS.get(kind)
    if spec is None:
        raise RejectedEventError(f"no body schema for kind {kind!r}", check="ledger.kind")
    b = schemas.BodyReader(kind, body)
    spec.schema(b)
    b.done()
    return b.body


def verbatim_texts(kind: str, body: Mapping[str, Any]) -> list[str]:
    """The texts of a body kept verbatim, which must carry no unredacted secret."""
    spec = KINDS.get(kind)
    return [] if spec is None else spec.verbatim(body)


def gated_texts(kind: str, body: Mapping[str, Any]) -> list[str]:
    """The texts of a body that the write gate must see (empty for ungated kinds)."""
    spec = KINDS.get(kind)
    return [] if spec is None else spec.gated(body)


#: Kinds with text the write gate checks.
GATED_KINDS = frozenset(s.name for s in _SPECS if s.gated is not _no_texts)
#: Kinds whose body an erasure may remove; every other kind is a control entry.
ERASABLE_KINDS = frozenset(s.name for s in _SPECS if s.erasable)

#: Kinds whose memory answer names the item the entry made or confirmed (a memory, a
#: correction, a record): ``Outcome.ref`` over HTTP and in process.
NAMES_ITEM = kinds_where(group="memory", items=("body",)) | kinds_where(group="record")
