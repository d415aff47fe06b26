"""Memory tiers as a projection of the log: items, sessions and ``evolve``.

``evolve(state, event)`` folds one logged event into the per-agent memory view. It is
deterministic: it reads only the state (through the :class:`MemoryState` port) and the
event (its index, server timestamp, kind, agent and body), never a clock, a config file or
the network. The same log therefore always yields the same projection, whether it is
applied incrementally or rebuilt from index 0 (``tests/contract/test_memory_projection.py``
checks this under hypothesis on both backends), and :func:`digest` lets two replays be
compared.

Items are referenced as ``"<log index>.<n>"``: ``n`` is 0 for events that carry one item
and the entry's position for ``memory.distilled``. Every item is thus traceable to the
signed log entry it came from.

Every ``session.turn`` also projects one item of the **records tier** (:data:`RECORD`): the
turn's text as logged (secrets were redacted before signing), searchable by recall as a
raw record. Records never move between tiers, decay, or take part in dedup; erasing the
turn's entry tombstones its record like any item.

Decisions that depend on time or configuration (tier changes, archiving) are *events* the
policy emits (ledger.memory.policy); ``evolve`` only applies them, re-checking their
preconditions in log order so that a stale or concurrent decision has no effect instead of
a wrong one (no double promotion, no lost decay-exemption flag).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from engram.protocol.bodies import DEFAULT_TIER_V2_FROM_US, default_tier
from engram.protocol.gate import normalize_text
from engram.protocol.records import RECORD_KINDS, record_content
from engram.protocol.schemas import REPLACED_BY_DIGEST
from ledger.memory.facts import fact_of
from verifier.jcs import canonical_bytes, canonical_bytes_of_values

__all__ = [
    "EVOLVE",
    "RECORD",
    "RECORD_KINDS",
    "InMemoryState",
    "Item",
    "LoggedEvent",
    "MemoryState",
    "Session",
    "digest",
    "digest_sorted",
    "evolve",
    "ref_key",
    "stand_in",
    "stand_ins",
    "tokens",
]


#: The tier of session-turn records (searchable raw turns; never a memory tier).
RECORD = "RECORD"


def tokens(text: str) -> int:
    """A conservative token estimate (about four characters per token)."""
    return len(text) // 4 + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggedEvent:
    """What evolve needs of one log entry; ``body`` is None when withheld or erased."""

    index: int
    timestamp_us: int
    agent: str
    kind: str
    body: Mapping[str, Any] | None


#: Kinds whose erased body still names its session, through the erasure that took it.
SESSION_ENTRY_KINDS = frozenset({"session.opened", "session.closed"})
#: Kinds an erasure may take whose effect a replay keeps through its stand-in.
STANDS_IN_KINDS = SESSION_ENTRY_KINDS | {"memory.replaced"}


def stand_ins(erasures: Iterable[Mapping[str, Any] | None]) -> dict[int, dict[str, Any]]:
    """Erased entries whose effect stays -> the body a replay folds in their place, from the
    bodies of ``memory.erased`` events:

    * a session's title (``session.opened``) and closing summary (``session.closed``) are
      erasable; the erasure names the session of the entry it erases
      (checked against the body before it went, ledger.memory.preconditions), and the entry
      replays as one that held only its session id: the session keeps its turns and its
      closed state, and its title and summary are gone;
    * a version 1 ``memory.replaced`` copied the values of the memories it names; an erasure
      takes it with either memory and names its decision,
      ``{item, by}``, which replays in its place: the decision stays, the values go."""
    out: dict[int, dict[str, Any]] = {}
    for b in erasures:
        if b is None or type(b.get("index")) is not int:
            continue
        if isinstance(b.get("session"), str):
            out[b["index"]] = {"session": b["session"]}
        for r in b.get("replaced") or ():
            out[r["index"]] = {"item": r["item"], "by": r["by"]}
    return out


def stand_in(ev: LoggedEvent, stand_ins: Mapping[int, Mapping[str, Any]]) -> LoggedEvent:
    """``ev``, or for an erased entry named in ``stand_ins`` (see :func:`stand_ins`), the same
    entry with its stand-in body."""
    if ev.body is not None or ev.kind not in STANDS_IN_KINDS or ev.index not in stand_ins:
        return ev
    return LoggedEvent(
        index=ev.index,
        timestamp_us=ev.timestamp_us,
        agent=ev.agent,
        kind=ev.kind,
        body=dict(stand_ins[ev.index]),
    )


@dataclass(slots=True, kw_only=True)
class Item:
    agent: str
    ref: str
    index: int
    source_kind: str
    tier: str
    status: str  # active | superseded | archived | erased
    category: str
    content: str
    tags: list[str] = field(default_factory=list)
    confidence: int = 0
    #: Sightings: the entry that made the item is the first (1); each duplicate adds its own.
    confirmations: int = 1
    access_count: int = 0
    last_access_us: int | None = None
    created_us: int = 0
    decay_exempt: bool = False
    linked_action: bool = False
    provenance: list[dict[str, str]] = field(default_factory=list)
    tier_history: list[dict[str, Any]] = field(default_factory=list)
    session: str | None = None
    superseded_by: str | None = None
    supersedes: str | None = None
    #: When the fact became true (the body's ``valid_from_us``, else the entry's server
    #: time) and, once a newer memory replaced it (``memory.replaced``), until when.
    valid_from_us: int = 0
    valid_until_us: int | None = None
    #: The ``memory.replaced`` links: the newer memory that states the current value, and
    #: the older one this memory replaced (kept apart from corrections and duplicates).
    replaced_by: str | None = None
    replaces: str | None = None
    #: The version 1 ``memory.replaced`` entries whose bodies still copy this memory's value
    #: (``{index, item, by}``): an erasure of the memory takes them with it.
    copies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def since_us(self) -> int:
        """When the memory's fact became true."""
        return self.valid_from_us or self.created_us

    @property
    def norm(self) -> str:
        return normalize_text(self.content)

    @property
    def last_activity_us(self) -> int:
        return max(self.created_us, self.last_access_us or 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True, kw_only=True)
class Session:
    agent: str
    session: str
    opened_index: int
    opened_us: int
    status: str = "open"  # open | closed
    title: str | None = None
    closed_index: int | None = None
    turns: int = 0
    last_index: int = 0
    distilled: bool = False
    #: HOT as it was when the session opened: frozen for the session (prompt caches hold).
    hot_snapshot: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class MemoryState(Protocol):
    """The state port evolve reads and writes (in memory, or the SQL projection tables)."""

    def item(self, agent: str, ref: str) -> Item | None: ...

    def put_item(self, item: Item) -> None: ...

    def record_uses(self, agent: str, refs: Iterable[str], at_us: int) -> None:
        """Count one use of each existing item among ``refs`` (distinct), last used ``at_us``."""
        ...

    def session(self, agent: str, session: str) -> Session | None: ...

    def put_session(self, session: Session) -> None: ...

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None: ...

    def hot_items(self, agent: str) -> list[Item]: ...

    def fileable_warm(self, agent: str) -> list[Item]:
        """Active WARM items the filing rules move: decisions and tasks (category COMMITMENT,
        or tagged ``task``/``decision``) and blockers, in log order."""
        ...

    def agent_sessions(self, agent: str) -> list[Session]: ...


def ref_key(ref: str) -> tuple[int, int]:
    """Sort key of an item reference: (log index, position), numerically."""
    index, pos = ref.split(".")
    return int(index), int(pos)


def _linked(provenance: Iterable[Mapping[str, str]]) -> bool:
    return any(p.get("source_type") in ("pact", "eval") for p in provenance)


def _new_memory(ev: LoggedEvent, n: int, entry: Mapping[str, Any], *, tier: str, session: str | None) -> Item:
    prov = [dict(p) for p in entry.get("provenance") or []]
    return Item(
        agent=ev.agent,
        ref=f"{ev.index}.{n}",
        index=ev.index,
        source_kind=ev.kind,
        tier=tier,
        status="active",
        category=entry["category"],
        content=entry["content"],
        tags=list(entry.get("tags") or []),
        confidence=entry["confidence"],
        created_us=ev.timestamp_us,
        decay_exempt=bool(entry.get("decay_exempt", False)),
        linked_action=_linked(prov),
        provenance=prov,
        session=session,
        valid_from_us=entry.get("valid_from_us", ev.timestamp_us),
    )


def _add_or_confirm(state: MemoryState, item: Item) -> None:
    """Dedup at the target tier: a normalized duplicate confirms the existing item."""
    dup = state.find_duplicate(item.agent, item.tier, item.norm)
    if dup is not None:
        _confirm(dup, item)
        state.put_item(dup)
        return
    state.put_item(item)


MAX_MERGED_PROVENANCE = 32


def _confirm(target: Item, other: Item) -> None:
    """``other`` says the same as ``target``: count it, and keep what it adds (flags, sources)."""
    target.confirmations += other.confirmations
    target.confidence = max(target.confidence, other.confidence)
    target.decay_exempt = target.decay_exempt or other.decay_exempt
    target.linked_action = target.linked_action or other.linked_action
    for p in [*other.provenance, {"source_type": "log", "source_ref": str(other.index)}]:
        if p not in target.provenance and len(target.provenance) < MAX_MERGED_PROVENANCE:
            target.provenance.append(p)


def evolve(state: MemoryState, ev: LoggedEvent) -> None:
    """Apply one logged event to the memory projection (deterministic; see module doc)."""
    if ev.body is None:
        return  # a withheld or erased body: the leaf stays, the memory projection has nothing to add
    EVOLVE[ev.kind](state, ev, ev.body)


Handler = Callable[[MemoryState, LoggedEvent, Mapping[str, Any]], None]


def _nothing(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    """key.*, share.revoked: nothing to project into memory."""


def _session_opened(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    hot = sorted(state.hot_items(ev.agent), key=lambda i: ref_key(i.ref))
    state.put_session(
        Session(
            agent=ev.agent,
            session=b["session"],
            opened_index=ev.index,
            opened_us=ev.timestamp_us,
            title=b.get("title"),
            last_index=ev.index,
            hot_snapshot=[
                {
                    "ref": i.ref,
                    "index": i.index,
                    "category": i.category,
                    "content": i.content,
                    "created_us": i.created_us,
                    "tags": i.tags,
                }
                for i in hot
            ],
        )
    )


def _session_turn(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    s = state.session(ev.agent, b["session"])
    if s is None:  # not opened (refused on append; tolerated on replay)
        return
    s.last_index = ev.index
    s.turns += 1
    state.put_session(s)
    state.put_item(
        Item(
            agent=ev.agent,
            ref=f"{ev.index}.0",
            index=ev.index,
            source_kind=ev.kind,
            tier=RECORD,
            status="active",
            category="CONTEXT",
            content=b["content"],
            tags=[b["role"]],
            created_us=ev.timestamp_us,
            provenance=[
                {"source_type": "turn", "source_ref": str(ev.index)},
                {"source_type": "session", "source_ref": b["session"]},
            ],
            session=b["session"],
        )
    )


def _session_closed(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    s = state.session(ev.agent, b["session"])
    if s is None:  # not opened (refused on append; tolerated on replay)
        return
    s.last_index = ev.index
    s.status, s.closed_index = "closed", ev.index
    state.put_session(s)


def _memory_written(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    tier = b.get("tier") or (
        default_tier(b["category"], b.get("tags") or [], b.get("session"))
        if ev.timestamp_us >= DEFAULT_TIER_V2_FROM_US
        else "HOT"  # memory events v1: entries before the v2 rule replay as they were filed
    )
    _add_or_confirm(state, _new_memory(ev, 0, b, tier=tier, session=b.get("session")))


def _memory_distilled(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    for n, entry in enumerate(b["entries"]):
        _add_or_confirm(state, _new_memory(ev, n, entry, tier="HOT", session=b["session"]))
    s = state.session(ev.agent, b["session"])
    if s is not None:
        s.distilled = True
        state.put_session(s)


def _memory_superseded(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    old = state.item(ev.agent, b["item"])
    if old is None or old.status != "active" or old.tier == RECORD:
        return
    new = Item(
        agent=ev.agent,
        ref=f"{ev.index}.0",
        index=ev.index,
        source_kind=ev.kind,
        tier=old.tier,
        status="active",
        category=old.category,
        content=b["content"],
        tags=list(b.get("tags") or old.tags),
        confidence=b.get("confidence", old.confidence),
        created_us=ev.timestamp_us,
        decay_exempt=old.decay_exempt,
        linked_action=old.linked_action,
        provenance=[*old.provenance, {"source_type": "log", "source_ref": str(old.index)}],
        session=old.session,
        supersedes=old.ref,
        valid_from_us=old.since_us,  # a correction states the same fact, true since then
    )
    old.status, old.superseded_by = "superseded", new.ref
    state.put_item(old)
    state.put_item(new)


#: The ``source_kind`` of a stand-in for a memory a replacement names whose body is gone: it is
#: erased later in the log (its erasure turns the stand-in into the canonical tombstone).
GONE_LATER = "memory.replaced"


def _named(state: MemoryState, ev: LoggedEvent, ref: str) -> Item:
    """The item ``ref`` names, or, when the log holds no body for it any more (its entry is
    erased later in the log: a replay reads the entries as they are stored now), a stand-in
    that keeps its place in a replacement chain until its erasure (:func:`_splice`)."""
    it = state.item(ev.agent, ref)
    if it is not None:
        return it
    return Item(
        agent=ev.agent,
        ref=ref,
        index=ref_key(ref)[0],
        source_kind=GONE_LATER,
        tier="NONE",
        status="erased",
        category="CONTEXT",
        content="",
        created_us=ev.timestamp_us,
    )


def _gone_later(it: Item) -> bool:
    return it.status == "erased" and it.source_kind == GONE_LATER


def _memory_replaced(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    """``by`` states the current value of the fact ``item`` stated: ``item`` is true until
    ``by`` became true, and is no longer current (re-checked in log order: each must still
    be an active memory, e.g. not corrected meanwhile).

    A memory whose body an erasure later in the log took keeps its place in the chain as a
    stand-in (:func:`_named`): erasure removes text, never the decision,
    and that erasure closes the chain over it (:func:`_splice`)."""
    old, new = _named(state, ev, b["item"]), _named(state, ev, b["by"])
    if old.ref == new.ref or RECORD in (old.tier, new.tier):
        return
    if "was" in b:  # a version 1 body copies both values: an erasure of either takes it
        copy = {"index": ev.index, "item": old.ref, "by": new.ref}
        for it in (old, new):
            it.copies.append(copy)
            state.put_item(it)
    if not (old.status == "active" or _gone_later(old)) or not (new.status == "active" or _gone_later(new)):
        return
    if b.get("policy_version", 1) >= REPLACED_BY_DIGEST and (old.tier == "COLD" or old.decay_exempt):
        return  # policy v2: COLD and decay-exempt memories change only by their owner's act
    if old.status == "active":
        # True until the new value became true; a value whose text is gone became true, as
        # far as the log still says, when the decision was taken.
        became = new.since_us if new.status == "active" else ev.timestamp_us
        old.status, old.valid_until_us = "superseded", max(old.since_us, became)
    old.replaced_by, new.replaces = new.ref, old.ref
    state.put_item(old)
    state.put_item(new)


def _splice(state: MemoryState, agent: str, it: Item) -> None:
    """``it`` is erased: its replacement chain closes over it. The value before it is replaced
    by the value after it (erasing a middle value leaves the newer one current and the older
    one past); with no value after it (it was the current one), the value before it is
    current again; the value after it, with none before, replaces nothing."""
    before = state.item(agent, it.replaces) if it.replaces else None
    after = state.item(agent, it.replaced_by) if it.replaced_by else None
    if before is not None and before.replaced_by != it.ref:
        before = None
    if after is not None and after.replaces != it.ref:
        after = None
    if before is not None:
        if after is not None:
            before.replaced_by = after.ref
        else:
            before.replaced_by, before.valid_until_us = None, None
            if before.status == "superseded":
                before.status = "active"
        state.put_item(before)
    if after is not None:
        after.replaces = None if before is None else before.ref
        state.put_item(after)


def _memory_decay_exempted(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    it = state.item(ev.agent, b["item"])
    if it is None or it.tier == RECORD:
        return
    it.decay_exempt = True
    if it.status == "archived":
        # An exemption that races with decay wins: archiving never deleted the item,
        # so it comes back rather than losing the flag's intent.
        it.status = "active"
        it.tier_history.append({"index": ev.index, "from": "archived", "to": it.tier, "rule": "exemption"})
    state.put_item(it)


def _memory_archived(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    it = state.item(ev.agent, b["item"])
    # Preconditions re-checked in log order: an exemption, a link or a use that arrived
    # first wins, and the window must really have ended by this entry's server time.
    if it is None or it.status != "active" or it.tier != "WARM" or it.decay_exempt or it.linked_action:
        return
    if not _time_basis_holds(it, ev, b):
        return
    it.status = "archived"
    it.tier_history.append({"index": ev.index, "from": "WARM", "to": "archived", "rule": b["rule"]})
    state.put_item(it)


def _memory_accessed(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    state.record_uses(ev.agent, dict.fromkeys(b["items"]), ev.timestamp_us)


def _memory_erased(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    # A canonical tombstone, whatever the item held: the projection is the same whether
    # the erased body is still stored or already gone (then the item never existed, or a
    # replacement kept its place: state._named). A session entry's erasure names no item:
    # its replay is the stand-in (stand_ins). What a tombstone keeps is the version 1
    # replacement entries that still copy its value (an erasure made before issue 40 left
    # them): erasing one of those entries alone finds it there (engram.protocol.erasure).
    taken = {r["index"] for r in b.get("replaced") or ()}
    _drop_copies(state, ev.agent, b.get("replaced") or (), taken)
    for ref in b.get("refs") or ():
        _tombstone(state, ev, ref, taken)
    _forget_in_sessions(state, ev.agent, set(b.get("refs") or ()), set(b.get("sessions") or ()))


def _drop_copies(
    state: MemoryState, agent: str, replaced: Iterable[Mapping[str, Any]], taken: set[int]
) -> None:
    """The memories a version 1 replacement decision named no longer list its copy."""
    for r in replaced:
        for ref in (r["item"], r["by"]):
            it = state.item(agent, ref)
            if it is not None and any(c["index"] in taken for c in it.copies):
                it.copies = [c for c in it.copies if c["index"] not in taken]
                state.put_item(it)


def _tombstone(state: MemoryState, ev: LoggedEvent, ref: str, taken: set[int]) -> None:
    """Item ``ref`` becomes a canonical tombstone (spliced out of its chains first)."""
    it = state.item(ev.agent, ref)
    if it is not None and it.tier != RECORD:
        _splice(state, ev.agent, it)
    state.put_item(
        Item(
            agent=ev.agent,
            ref=ref,
            index=ref_key(ref)[0],
            source_kind="memory.erased",
            tier="NONE",
            status="erased",
            category="CONTEXT",
            content="",
            created_us=ev.timestamp_us,
            copies=[] if it is None else [c for c in it.copies if c["index"] not in taken],
        )
    )


def _forget_in_sessions(state: MemoryState, agent: str, erased: set[str], distilled: set[str]) -> None:
    """Frozen HOT blocks forget the erased items; an erased distillation stays done (the
    session is never distilled again)."""
    for s in state.agent_sessions(agent):
        kept = [h for h in s.hot_snapshot if h["ref"] not in erased]
        if len(kept) != len(s.hot_snapshot) or (s.session in distilled and not s.distilled):
            s.hot_snapshot = kept
            s.distilled = s.distilled or s.session in distilled
            state.put_session(s)


def _record(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    """pact.outcome, eval.outcome, boundary.event, commitment: one COLD item, write-once."""
    kind = ev.kind
    state.put_item(
        Item(
            agent=ev.agent,
            ref=f"{ev.index}.0",
            index=ev.index,
            source_kind=kind,
            tier="COLD",
            status="active",
            category=RECORD_KINDS[kind],
            content=record_content(kind, b),
            tags=[kind.split(".")[0]],
            confidence=100,
            created_us=ev.timestamp_us,
            linked_action=kind in ("pact.outcome", "eval.outcome"),
            provenance=[{"source_type": "log", "source_ref": str(ev.index)}],
        )
    )


def _tier_changed(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    _apply_tier_change(state, ev, b)


#: One handler per registered kind (engram.protocol.kinds.KINDS; a test checks the rows).
EVOLVE: dict[str, Handler] = {
    "key.registered": _nothing,
    "key.rotated": _nothing,
    "key.revoked": _nothing,
    "session.opened": _session_opened,
    "session.turn": _session_turn,
    "session.closed": _session_closed,
    "memory.written": _memory_written,
    "memory.distilled": _memory_distilled,
    "memory.tier_changed": _tier_changed,
    "memory.superseded": _memory_superseded,
    "memory.decay_exempted": _memory_decay_exempted,
    "memory.archived": _memory_archived,
    "memory.replaced": _memory_replaced,
    "memory.accessed": _memory_accessed,
    "memory.erased": _memory_erased,
    "pact.outcome": _record,
    "eval.outcome": _record,
    "boundary.event": _record,
    "commitment": _record,
    "share.revoked": _nothing,
    # A mesh is folded from its members' streams when read (ledger.mesh), not projected.
    "mesh.created": _nothing,
    "mesh.invited": _nothing,
    "mesh.joined": _nothing,
    "mesh.granted": _nothing,
    "mesh.left": _nothing,
    "mesh.removed": _nothing,
    "mesh.dissolved": _nothing,
}


def _time_basis_holds(it: Item, ev: LoggedEvent, b: Mapping[str, Any]) -> bool:
    """A time-based decision applies only if the item was not used since it was decided and
    the server time of this entry has reached the decision's ``not_before_us``."""
    if "last_activity_us" in b and it.last_activity_us != b["last_activity_us"]:
        return False
    return not ("not_before_us" in b and ev.timestamp_us < b["not_before_us"])


def _apply_tier_change(state: MemoryState, ev: LoggedEvent, b: Mapping[str, Any]) -> None:
    it = state.item(ev.agent, b["item"])
    if it is None or it.status != "active" or it.tier != b["from"] or it.tier == "COLD":
        return  # stale or concurrent decision: COLD is write-once, moves only from where it is
    if not _time_basis_holds(it, ev, b):
        return
    entry = {"index": ev.index, "from": b["from"], "to": b["to"], "rule": b["rule"]}
    target_ref = b.get("confirms")
    if target_ref is not None:
        target = state.item(ev.agent, target_ref)
        if target is not None and target.status == "active" and target.tier == b["to"]:
            _confirm(target, it)
            it.status, it.superseded_by = "superseded", target.ref
            it.tier_history.append({**entry, "confirms": target.ref})
            state.put_item(target)
            state.put_item(it)
            return
    dup = state.find_duplicate(ev.agent, b["to"], it.norm)
    if dup is not None and dup.ref != it.ref:  # the target tier gained a duplicate meanwhile
        _confirm(dup, it)
        it.status, it.superseded_by = "superseded", dup.ref
        it.tier_history.append({**entry, "confirms": dup.ref})
        state.put_item(dup)
        state.put_item(it)
        return
    it.tier = b["to"]
    it.tier_history.append(entry)
    state.put_item(it)


class InMemoryState:
    """The state port in memory: for pure tests, policy decisions and reference replays."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Item] = {}
        self.sessions: dict[tuple[str, str], Session] = {}

    def item(self, agent: str, ref: str) -> Item | None:
        it = self.items.get((agent, ref))
        return None if it is None else _clone(it)

    def put_item(self, item: Item) -> None:
        self.items[(item.agent, item.ref)] = _clone(item)

    def record_uses(self, agent: str, refs: Iterable[str], at_us: int) -> None:
        for ref in refs:
            it = self.item(agent, ref)
            if it is not None:
                it.access_count += 1
                it.last_access_us = at_us
                self.put_item(it)

    def session(self, agent: str, session: str) -> Session | None:
        s = self.sessions.get((agent, session))
        return None if s is None else Session(**{k: _copy(v) for k, v in asdict(s).items()})

    def put_session(self, session: Session) -> None:
        self.sessions[(session.agent, session.session)] = Session(
            **{k: _copy(v) for k, v in asdict(session).items()}
        )

    def changed_facts(self, agent: str) -> list[Item]:
        """As SqlState.changed_facts: active memories sharing a fact key with another."""
        keyed = [
            (f.key, it)
            for (a, _), it in sorted(self.items.items(), key=lambda kv: ref_key(kv[0][1]))
            if a == agent and it.status == "active" and it.tier != RECORD and (f := fact_of(it.content))
        ]
        counts: dict[str, int] = {}
        for k, _ in keyed:
            counts[k] = counts.get(k, 0) + 1
        return [_clone(it) for k, it in keyed if counts[k] > 1]

    def find_duplicate(self, agent: str, tier: str, norm: str) -> Item | None:
        best = None
        for (a, _), it in self.items.items():
            same = a == agent and it.status == "active" and it.tier == tier and it.norm == norm
            if same and (best is None or ref_key(it.ref) < ref_key(best.ref)):
                best = it
        return None if best is None else _clone(best)

    def fileable_warm(self, agent: str) -> list[Item]:
        refs = sorted(
            (
                ref
                for (a, ref), it in self.items.items()
                if a == agent
                and it.status == "active"
                and it.tier == "WARM"
                and (it.category == "COMMITMENT" or {"task", "decision", "blocker"} & set(it.tags))
            ),
            key=ref_key,
        )
        return [_clone(self.items[(agent, ref)]) for ref in refs]

    def hot_items(self, agent: str) -> list[Item]:
        refs = sorted(
            (
                ref
                for (a, ref), it in self.items.items()
                if a == agent and it.status == "active" and it.tier == "HOT"
            ),
            key=ref_key,
        )
        return [_clone(self.items[(agent, ref)]) for ref in refs]

    def agent_sessions(self, agent: str) -> list[Session]:
        return [
            Session(**{k: _copy(v) for k, v in asdict(s).items()})
            for (a, _), s in sorted(self.sessions.items())
            if a == agent
        ]

    def all_items(self) -> list[Item]:
        return [self.items[k] for k in sorted(self.items)]

    def all_sessions(self) -> list[Session]:
        return [self.sessions[k] for k in sorted(self.sessions)]


def _clone(item: Item) -> Item:
    return Item(**{k: _copy(v) for k, v in asdict(item).items()})


def _copy(v: Any) -> Any:
    return json.loads(json.dumps(v)) if isinstance(v, list | dict) else v


_DIGEST_PREFIX = b"engram/projection/v1\x00"
_ITEM_FIELDS = tuple(Item.__dataclass_fields__)
_SESSION_FIELDS = tuple(Session.__dataclass_fields__)


def digest(items: Iterable[Item], sessions: Iterable[Session], applied_size: int) -> str:
    """SHA-256 of the canonical projection: two replays of the same log give the same value.

    The hashed bytes are ``engram/projection/v1\\0`` followed by the RFC 8785 form of
    ``{"applied_size": n, "items": [...], "sessions": [...]}``, items sorted by (agent, ref)
    and sessions by (agent, session), each as its :meth:`Item.to_json` object."""
    return digest_sorted(
        sorted(items, key=lambda i: (i.agent, i.ref)),
        sorted(sessions, key=lambda s: (s.agent, s.session)),
        applied_size,
    )


def digest_sorted(items: Iterable[Item], sessions: Iterable[Session], applied_size: int) -> str:
    """:func:`digest` of items and sessions already in its order, hashed as they stream by
    (the SQL projection's digest holds no more than one row in memory)."""
    h = hashlib.sha256(_DIGEST_PREFIX)
    h.update(canonical_bytes({"applied_size": applied_size})[:-1] + b',"items":[')
    for n, it in enumerate(items):
        if n:
            h.update(b",")
        h.update(canonical_bytes_of_values({f: getattr(it, f) for f in _ITEM_FIELDS}))
    h.update(b'],"sessions":[')
    for n, se in enumerate(sessions):
        if n:
            h.update(b",")
        h.update(canonical_bytes_of_values({f: getattr(se, f) for f in _SESSION_FIELDS}))
    h.update(b"]}")
    return h.hexdigest()
