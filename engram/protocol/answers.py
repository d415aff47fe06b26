"""What one agent's memory answers, the same from the embedded log and from a service.

:class:`engram.client.agent_memory.AgentMemory` returns these frozen values (issue 27,
finding 3: its answers were ``dict[str, Any]``, spelled again by every caller). Each has
``to_json()``, the plain JSON the MCP tools and the CLI's ``--json`` print (the shapes of
specs/http-api.md's memory answers).

A write's answer says how many secrets were redacted out of what the caller gave
(``redacted``): the ``[REDACTED:<rule>]`` markers the signed body carries beyond
those already in the caller's text (specs/memory-events.md section 3).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engram.protocol.errors import MalformedError
from engram.protocol.scopes import GLOBAL, scope_of

__all__ = [
    "ROW_FIELDS",
    "Appended",
    "Closed",
    "EntryProof",
    "Erased",
    "ItemPage",
    "ItemProof",
    "ItemRow",
    "MeshGrant",
    "MeshMember",
    "MeshRow",
    "NowCurrent",
    "Proven",
    "RecallRow",
    "Recalled",
    "SessionRow",
    "Shown",
    "Written",
]


class _Json:
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dataclasses.asdict(self)  # type: ignore[call-overload]  # a dataclass
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Written(_Json):
    """A memory, record or correction appended: its entry, and the item it made, or the
    item it confirmed (``duplicate``: a near-duplicate confirmed an existing memory)."""

    index: int
    ref: str | None
    duplicate: bool
    #: Secrets redacted before signing (markers added to what the caller gave).
    redacted: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Appended(_Json):
    """An entry appended that makes no item of its own (a turn, an erasure)."""

    index: int
    #: Secrets redacted before signing (markers added to what the caller gave).
    redacted: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class NowCurrent(_Json):
    """An erased memory was the current value of a fact that changed: which value is current
    now (``current``: an earlier value, or None when none is left)."""

    erased: str
    current: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Erased(Appended):
    """An erasure appended, and for each erased memory that was a fact's current value, the
    value current now."""

    current: list[NowCurrent]


@dataclass(frozen=True, slots=True, kw_only=True)
class Closed(_Json):
    """A session closed: its entry, its distillation's (None: not distilled, or already),
    the memories it distilled and the policy decisions that followed."""

    closed: int
    distilled: int | None
    entries: int
    decisions: int
    #: Secrets redacted out of the closing summary before signing.
    redacted: int = 0


#: The fields of a recall row, the same from either backend (then its scope).
ROW_FIELDS = (
    "ref",
    "index",
    "tier",
    "category",
    "content",
    "tags",
    "confidence",
    "score",
    "status",
    "session",
)
#: Optional recall-row fields: validity and what the memory replaced.
TIME_FIELDS = ("valid_from_us", "valid_until_us", "replaces", "replaced_by", "earlier", "author", "mesh")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallRow(_Json):
    """One recalled memory or session turn (tier ``RECORD``), labelled with its scope."""

    ref: str | None
    index: int | None
    tier: str | None
    category: str | None
    content: str | None
    tags: list[str]
    confidence: int | None
    score: float | None
    status: str | None
    session: str | None
    scope: str
    #: When the memory's fact became true and (a past value) until when; the memory it
    #: replaced and what that said ("earlier"), or the one that replaced it.
    valid_from_us: int | None = None
    valid_until_us: int | None = None
    replaces: str | None = None
    replaced_by: str | None = None
    earlier: str | None = None
    #: Another agent's memory shared through a Memory Mesh: its author and the mesh.
    author: str | None = None
    mesh: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> RecallRow:
        """A row of either backend's answer (missing fields are None; session turns are
        global)."""
        tags = list(row.get("tags") or ())
        return cls(
            **{k: row.get(k) for k in (*ROW_FIELDS, *TIME_FIELDS) if k != "tags"},
            tags=tags,
            scope=GLOBAL if row.get("tier") == "RECORD" else scope_of(tags),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Recalled(_Json):
    """A recall: the ``<memory-context>`` block, its HOT rows and ranked rows, notes, and
    the log size it answers as of."""

    context: str
    hot: list[RecallRow]
    ranked: list[RecallRow]
    notes: list[str]
    as_of_size: int | None

    @classmethod
    def of(
        cls,
        *,
        context: str,
        hot: Sequence[Mapping[str, Any]],
        ranked: Sequence[Mapping[str, Any]],
        notes: Sequence[str],
        as_of_size: int | None,
    ) -> Recalled:
        return cls(
            context=context,
            hot=[RecallRow.of(r) for r in hot],
            ranked=[RecallRow.of(r) for r in ranked],
            notes=list(notes),
            as_of_size=as_of_size,
        )

    def results_json(self) -> dict[str, Any]:
        """The one JSON shape of a recall, for ``engram memory recall --json`` and the MCP tool
        ``memory_recall`` alike (issue 44): ``context`` (the block), ``results`` (the HOT rows
        first, then the ranked ones; each row says its ``tier``), ``notes`` and ``as_of_size``.
        The CLI also answers ``hot`` and ``ranked``, its old keys, for one release."""
        return {
            "context": self.context,
            "results": [r.to_json() for r in (*self.hot, *self.ranked)],
            "notes": list(self.notes),
            "as_of_size": self.as_of_size,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Proven(_Json):
    """Entry ``index`` is in the checkpoint of ``size`` the log key signed: the verified
    inclusion proof, base64 hashes, for anyone to check again."""

    index: int
    size: int
    leaf_hash: str
    root: str
    proof: list[str]
    checkpoint: str
    agent: str
    kind: str
    timestamp_us: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRow(_Json):
    """One memory item as an agent reads it (``GET /v1/agents/{agent}/memory``'s rows):
    where it came from (``index``, ``source_kind``, ``provenance``), where it lives
    (``tier``, ``status``, ``tier_history``) and what it says."""

    ref: str
    index: int
    source_kind: str
    tier: str
    status: str
    category: str
    content: str
    tags: list[str]
    confidence: int
    confirmations: int
    access_count: int
    last_access_us: int | None
    created_us: int
    decay_exempt: bool
    provenance: list[dict[str, str]]
    tier_history: list[dict[str, Any]]
    session: str | None
    superseded_by: str | None
    supersedes: str | None
    #: Validity and replacement links (absent from older servers' rows).
    valid_from_us: int | None = None
    valid_until_us: int | None = None
    replaced_by: str | None = None
    replaces: str | None = None
    #: The version 1 replacement entries that still copy this memory's value (issue 40;
    #: absent from older servers' rows): an erasure plan takes them with the memory.
    copies: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> ItemRow:
        """The row's fields out of a larger mapping (a service's JSON, a projection item);
        a missing field is an error, not a default (the validity fields may be absent)."""
        try:
            return cls(**{f: row[f] for f in _ITEM_FIELDS if f in row or f not in _OPTIONAL_ITEM_FIELDS})
        except KeyError as e:
            raise MalformedError(f"an item row lacks {e.args[0]!r}", check="item.row") from None


_ITEM_FIELDS = tuple(f.name for f in dataclasses.fields(ItemRow))
_OPTIONAL_ITEM_FIELDS = frozenset(("valid_from_us", "valid_until_us", "replaced_by", "replaces", "copies"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemPage(_Json):
    """A page of items in log order; ``next`` is the ``after`` of the following page (None
    at the end)."""

    items: list[ItemRow]
    next: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshGrant(_Json):
    """A member's latest grant: the WARM categories it shares and those it reads."""

    index: int
    share: list[str]
    read: list[str]
    backfill: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshMember(_Json):
    agent: str
    joined_index: int
    left_index: int | None
    grant: MeshGrant | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshRow(_Json):
    """A Memory Mesh as a member reads it, folded from the log: creator, members and each
    member's grant, pending invitations (agent -> the invitation's index)."""

    mesh: str
    creator: str
    created_index: int
    title: str | None
    dissolved_index: int | None
    invited: dict[str, int]
    members: list[MeshMember]

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> MeshRow:
        """A mesh's JSON (``verifier.mesh.Mesh.to_json``, the service's answer)."""
        try:
            return cls(
                mesh=str(row["mesh"]),
                creator=str(row["creator"]),
                created_index=int(row["created_index"]),
                title=None if row.get("title") is None else str(row["title"]),
                dissolved_index=None if row.get("dissolved_index") is None else int(row["dissolved_index"]),
                invited={str(a): int(i) for a, i in dict(row.get("invited") or {}).items()},
                members=[_member(m) for m in row["members"]],
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise MalformedError(f"a mesh row is malformed: {e}", check="mesh.row") from None


def _member(m: Mapping[str, Any]) -> MeshMember:
    g = m.get("grant")
    return MeshMember(
        agent=str(m["agent"]),
        joined_index=int(m["joined_index"]),
        left_index=None if m.get("left_index") is None else int(m["left_index"]),
        grant=None
        if g is None
        else MeshGrant(
            index=int(g["index"]),
            share=[str(c) for c in g["share"]],
            read=[str(c) for c in g["read"]],
            backfill=bool(g["backfill"]),
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRow(_Json):
    """A session as its agent reads it: the next turn is number ``turns``."""

    agent: str
    session: str
    status: str
    title: str | None
    opened_index: int
    closed_index: int | None
    turns: int
    distilled: bool

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> SessionRow:
        try:
            return cls(**{f: row[f] for f in _SESSION_FIELDS})
        except KeyError as e:
            raise MalformedError(f"a session row lacks {e.args[0]!r}", check="session.row") from None


_SESSION_FIELDS = tuple(f.name for f in dataclasses.fields(SessionRow))


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryProof:
    """What a log serves to prove entry ``index``: its leaf and the inclusion proof in the
    signed checkpoint of ``size`` (unverified: :func:`engram.client.agent_memory.verify_proof`)."""

    index: int
    leaf: bytes
    leaf_hash: bytes
    size: int
    root: bytes
    proof: tuple[bytes, ...]
    checkpoint: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemProof:
    """An item with what proves it (``GET /v1/agents/{agent}/memory/{ref}``): the leaf that
    made it, its inclusion proof, and the entry's salt and body (None once erased);
    unverified (:func:`engram.client.http.verify_item_proof`)."""

    item: ItemRow
    entry: EntryProof
    salt: bytes | None
    body: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Shown(_Json):
    """One item (provenance, tier history) with the verified proof of the entry that made it."""

    item: ItemRow
    proof: Proven
