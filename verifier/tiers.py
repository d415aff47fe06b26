"""The tier and status of one memory at a checkpoint, folded from the entries that name it
(specs/mesh.md, "Proof"; a ``mesh_read`` once proved the author's HOT memories and
replaced values, because nothing checked the memory's tier or status at the checkpoint).

Trust role: the offline verifier recomputes, from entries the log proved and listed as the
ones that bear on the memory (verifier.mesh_index), whether the memory was **active and
WARM** at the checkpoint. It reads nothing but those entries, so it cannot see what the
projection learns from other memories (a duplicate that confirmed this one and brought a
decay exemption along, the state of the memory a replacement or a confirmation names): where
such a fact could only keep the memory out of WARM, the fold assumes it does (a replacement
supersedes, a confirmation supersedes); where it could only keep it in, the service, which
checks its projection before it asks the log to sign anything, refuses instead.

The fold, in log order from the memory's entry (the rules of specs/memory-events.md §4):

* initial tier: a ``memory.written`` in its ``tier``, else by :func:`default_tier` at or
  after :data:`DEFAULT_TIER_V2_FROM_US`, else HOT; a ``memory.distilled`` entry in HOT;
* ``memory.accessed`` naming it (its body withheld): a use, at the entry's server time;
* ``memory.decay_exempted`` naming it (withheld): exempt; an archived memory is restored;
* ``memory.tier_changed`` (``item``): applies if the memory is active, in ``from``, not
  COLD, and its time basis holds (``last_activity_us`` equals the memory's last activity,
  the entry's time has reached ``not_before_us``); with ``confirms`` it supersedes;
* ``memory.archived`` (``item``): an active, WARM, not exempt, not linked memory whose time
  basis holds is archived;
* ``memory.superseded`` / ``memory.replaced`` (``item``): an active memory is superseded;
* ``memory.erased`` naming it (``refs``, ``index`` or ``also``): erased.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CATEGORIES",
    "DEFAULT_TIER_V2_FROM_US",
    "DISCLOSED_STATUS_KINDS",
    "EXEMPT_KIND",
    "USE_KIND",
    "MemoryStatus",
    "default_tier",
    "fold_status",
    "names_memory",
]

#: From this server time on (2026-11-24T00:00:00Z; memory events v2), a ``memory.written``
#: without ``tier`` is filed by :func:`default_tier`; before it the log filed it in HOT.
DEFAULT_TIER_V2_FROM_US = 1_795_478_400_000_000

CATEGORIES = frozenset(
    ("COMMITMENT", "PERFORMANCE", "LEARNING", "FAILURE", "PREFERENCE", "ANOMALY", "CONTEXT")
)

#: Entries of the author that change a memory's status or tier, disclosed in a proof.
DISCLOSED_STATUS_KINDS = (
    "memory.tier_changed",
    "memory.archived",
    "memory.superseded",
    "memory.replaced",
    "memory.erased",
)
#: Entries of the author that name a memory and are listed without their bodies (their
#: text is not the memory's: an exemption's reason, a recall's query): the log's index says
#: which memory they name.
EXEMPT_KIND = "memory.decay_exempted"
USE_KIND = "memory.accessed"


def default_tier(category: str, tags: Sequence[str], session: str | None) -> str:
    """The one default tier of a memory written without one (specs/memory-events.md): HOT is
    the working set (a session's memories, compacted when it ends; preferences; blockers),
    anything else is WARM."""
    return "HOT" if session or category == "PREFERENCE" or "blocker" in tags else "WARM"


def _ref_index(ref: str) -> int:
    return int(ref.split(".", 1)[0])


def names_memory(kind: str, body: Mapping[str, Any], ref: str) -> bool:
    """Whether an entry of ``kind`` with ``body`` names memory ``ref`` (item ``<index>.<n>``)
    the way its kind changes a memory: ``item`` for decisions, corrections, replacements,
    exemptions; ``items`` for uses; ``refs``, ``index`` or ``also`` for erasures."""
    if kind in (
        "memory.tier_changed",
        "memory.archived",
        "memory.superseded",
        "memory.replaced",
        EXEMPT_KIND,
    ):
        return body.get("item") == ref
    if kind == USE_KIND:
        items = body.get("items")
        return isinstance(items, list) and ref in items
    if kind == "memory.erased":
        refs, also, index = body.get("refs"), body.get("also"), _ref_index(ref)
        return (
            (isinstance(refs, list) and ref in refs)
            or (type(body.get("index")) is int and body["index"] == index)
            or (isinstance(also, list) and any(type(a) is int and a == index for a in also))
        )
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryStatus:
    """What the fold says of a memory at the checkpoint (``category`` None: unreadable)."""

    ref: str
    category: str | None
    tier: str
    status: str  # active | superseded | archived | erased | unknown
    why: str

    @property
    def shareable(self) -> bool:
        """Active and WARM: the only memories a mesh ever shares."""
        return self.status == "active" and self.tier == "WARM" and self.category is not None


@dataclass(slots=True)
class _State:
    tier: str
    status: str
    exempt: bool
    linked: bool
    created_us: int
    last_use_us: int = 0
    why: str = ""

    @property
    def last_activity_us(self) -> int:
        return max(self.created_us, self.last_use_us)


def _initial(
    ref: str, kind: str, timestamp_us: int, body: Mapping[str, Any] | None
) -> tuple[str | None, _State | None, str]:
    """The memory as its entry made it: (category, state, why when unreadable)."""
    pos = int(ref.split(".", 1)[1])
    if body is None:
        return None, None, f"the body of entry {_ref_index(ref)} is not disclosed (erased?)"
    if kind == "memory.distilled":
        entries = body.get("entries")
        if not isinstance(entries, list) or pos >= len(entries):
            return None, None, f"entry {_ref_index(ref)} has no memory {pos}"
        entry = entries[pos]
        if not isinstance(entry, Mapping):
            return None, None, f"memory {ref} is not disclosed"
        tier = "HOT"
    elif kind == "memory.written" and pos == 0:
        entry = body
        tier_value = body.get("tier")
        if isinstance(tier_value, str):
            tier = tier_value
        elif timestamp_us >= DEFAULT_TIER_V2_FROM_US:
            tags = body.get("tags")
            session = body.get("session")
            tier = default_tier(
                str(body.get("category")),
                [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
                session if isinstance(session, str) else None,
            )
        else:
            tier = "HOT"  # memory events v1
    else:
        return None, None, f"entry {_ref_index(ref)} has no memory {pos}"
    category = entry.get("category")
    if not isinstance(category, str) or category not in CATEGORIES:
        return None, None, f"memory {ref} has no category"
    provenance = entry.get("provenance")
    linked = isinstance(provenance, list) and any(
        isinstance(p, Mapping) and p.get("source_type") in ("pact", "eval") for p in provenance
    )
    state = _State(
        tier=tier,
        status="active",
        exempt=entry.get("decay_exempt") is True,
        linked=linked,
        created_us=timestamp_us,
        why=f"{ref} written {tier}",
    )
    return category, state, ""


def _time_basis_holds(st: _State, timestamp_us: int, body: Mapping[str, Any]) -> bool:
    """A time-based decision applies only if the memory was not used since it was decided
    and the entry's server time has reached the decision's ``not_before_us``."""
    la, nb = body.get("last_activity_us"), body.get("not_before_us")
    if "last_activity_us" in body and (type(la) is not int or la != st.last_activity_us):
        return False
    return not ("not_before_us" in body and (type(nb) is not int or timestamp_us < nb))


def _apply(st: _State, index: int, timestamp_us: int, kind: str, body: Mapping[str, Any] | None) -> None:
    if kind == USE_KIND:
        st.last_use_us = timestamp_us
        return
    if kind == EXEMPT_KIND:
        st.exempt = True
        if st.status == "archived":
            st.status, st.why = "active", f"restored by the exemption at entry {index}"
        return
    if body is None:  # a disclosed kind without its body: nothing can be said (the caller refuses it)
        st.status, st.why = "unknown", f"entry {index} names the memory but its body is not disclosed"
        return
    step = _WITH_BODY.get(kind)
    if step is not None:
        step(st, index, timestamp_us, kind, body)


def _erased(st: _State, index: int, timestamp_us: int, kind: str, body: Mapping[str, Any]) -> None:
    st.status, st.why = "erased", f"erased by entry {index}"


def _superseded(st: _State, index: int, timestamp_us: int, kind: str, body: Mapping[str, Any]) -> None:
    if st.status == "active":
        how = "corrected" if kind == "memory.superseded" else "replaced"
        st.status, st.why = "superseded", f"{how} by entry {index}"


def _tier_changed(st: _State, index: int, timestamp_us: int, kind: str, body: Mapping[str, Any]) -> None:
    src, dst = body.get("from"), body.get("to")
    if not isinstance(src, str) or not isinstance(dst, str):
        st.status, st.why = "unknown", f"entry {index} is a tier change without from and to"
        return
    if (
        st.status != "active"
        or st.tier != src
        or st.tier == "COLD"
        or not _time_basis_holds(st, timestamp_us, body)
    ):
        return
    if "confirms" in body:
        st.status, st.why = "superseded", f"confirmed into another memory by entry {index}"
    else:
        st.tier, st.why = dst, f"moved {src} to {dst} by entry {index}"


def _archived(st: _State, index: int, timestamp_us: int, kind: str, body: Mapping[str, Any]) -> None:
    held = st.status == "active" and st.tier == "WARM" and not st.exempt and not st.linked
    if held and _time_basis_holds(st, timestamp_us, body):
        st.status, st.why = "archived", f"archived by entry {index}"


#: What each disclosed kind that names a memory does to its status (one function per kind).
_WITH_BODY: dict[str, Callable[[_State, int, int, str, Mapping[str, Any]], None]] = {
    "memory.erased": _erased,
    "memory.superseded": _superseded,
    "memory.replaced": _superseded,
    "memory.tier_changed": _tier_changed,
    "memory.archived": _archived,
}


def fold_status(
    ref: str,
    memory: tuple[int, int, str, Mapping[str, Any] | None],
    entries: Sequence[tuple[int, int, str, Mapping[str, Any] | None]],
) -> MemoryStatus:
    """Memory ``ref``'s status at the checkpoint: ``memory`` is its entry (index, server
    time, kind, body as disclosed), ``entries`` the entries that name it (index, server
    time, kind, body or None where withheld), in any order; each is taken to name it."""
    index, timestamp_us, kind, body = memory
    category, st, why = _initial(ref, kind, timestamp_us, body)
    if st is None:
        return MemoryStatus(ref=ref, category=None, tier="NONE", status="unknown", why=why)
    for i, ts, k, b in sorted(entries, key=lambda e: e[0]):
        if i > index:  # nothing before the memory's own entry can change it
            _apply(st, i, ts, k, b)
    return MemoryStatus(ref=ref, category=category, tier=st.tier, status=st.status, why=st.why)
