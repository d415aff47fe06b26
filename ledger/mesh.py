"""Memory Mesh: agents that share chosen WARM categories, as a log object.

A mesh is made of signed events in its members' own streams (engram.protocol.kinds, group
``mesh``), and its state is folded from them when read: nothing about a mesh lives outside
the log, so anyone holding the log (an auditor, a verifier with the entries) folds the same
state. The mesh id is ``<creator>/<name>``: the creator's streams hold its life
(``mesh.created``, ``mesh.invited``, ``mesh.removed``, ``mesh.dissolved``), and each member's
streams hold its part (``mesh.joined``, ``mesh.granted``, ``mesh.left``).

Rules, applied in log order (an event that breaks one has no effect; the append
preconditions refuse it up front with the rule's check name):

* ``mesh.created``: only by the agent the id names, once (``mesh.exists``); the creator is a
  member from then on.
* ``mesh.invited``, ``mesh.removed``, ``mesh.dissolved``: only by the creator
  (``mesh.policy``); an invitation names an agent that is not a member; the creator is never
  removed; nothing happens in a dissolved mesh (``mesh.dissolved``).
* ``mesh.joined``: only by an agent invited since it last left (``mesh.not_invited``), once
  (``mesh.member``); joining consumes the invitation.
* ``mesh.granted``: only by a member (``mesh.not_member``); it replaces the member's grant:
  the WARM categories it shares and those it reads. A member shares nothing until it grants.
* ``mesh.left``: a member other than the creator (who dissolves instead).

An entry whose body was erased (possible on logs from before such erasures were refused) is
folded, never skipped: verifier.mesh gives it its most restrictive reading for each mesh
folded from its stream (specs/mesh.md, "Entries without a body").

What a member B reads of a member A: A's active WARM memories in a category A shares and B
reads, written at or after the grant that began sharing that category without a break
(``backfill`` in A's current grant: also older memories of those categories). Isolation by
default: HOT, COLD, other tiers and categories, and every memory of a non-member, never flow.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.storage.store import SqlStore
from verifier.jcs import parse_strict
from verifier.mesh import (
    CREATOR_KINDS,
    MEMBER_KINDS,
    MESH_KINDS,
    Member,
    Mesh,
    MeshRuleError,
    apply_event,
    creator_of,
    fold,
)
from verifier.tiers import DISCLOSED_STATUS_KINDS, EXEMPT_KIND, USE_KIND, names_memory

__all__ = [
    "MESH_KINDS",
    "Member",
    "Mesh",
    "MeshCache",
    "MeshReader",
    "MeshRuleError",
    "Share",
    "apply_event",
    "cache_of",
    "creator_of",
]

#: The kinds whose entries can name a memory, read to build a mesh-read index.
_NAMING_KINDS = (*DISCLOSED_STATUS_KINDS, EXEMPT_KIND, USE_KIND)


@dataclass(frozen=True, slots=True)
class Share:
    """What ``reader`` reads of ``author`` through ``mesh``: WARM memories of ``categories``,
    each category from its log index on."""

    mesh: str
    author: str
    since: Mapping[str, int]


Row = tuple[int, dict[str, Any] | None]


@dataclass(slots=True)
class _Stream:
    """One mesh stream as cached: its rows in log order, and by the mesh each body names."""

    rows: list[Row] = field(default_factory=list)
    by_mesh: dict[str, list[Row]] = field(default_factory=dict)
    bodyless: list[Row] = field(default_factory=list)

    def add(self, index: int, body: dict[str, Any] | None) -> None:
        self.rows.append((index, body))
        if body is None:
            self.bodyless.append((index, None))
        elif isinstance(body.get("mesh"), str):
            self.by_mesh.setdefault(body["mesh"], []).append((index, body))


#: The kinds whose entries delete stored bodies (engram.protocol.kinds: only memory.erased
#: erases; tests/contract/test_mesh_cache.py holds this to the registry).
ERASING_KINDS = ("memory.erased",)


class MeshCache:
    """The parsed bodies of the mesh streams this process has read, kept up to the log's
    size (every recall re-read and parsed every mesh body of every
    member, so 300 unrelated meshes of a creator made a member's recall several times
    slower). One per store, shared by every reader (recall, the mesh list, the append rules).

    Before each read it catches up with one range read of the entries appended since it last
    looked (``SqlStore.entries_of_kinds``): new mesh entries join the streams it holds, and an
    erasure drops every stream of the erasing agent (an erasure deletes bodies of its own
    agent's entries only), which are read again when next asked for. A stream is read whole
    the first time it is asked for. So what it answers at a size is what reading the tables
    at that size answers, at the cost of the entries appended meanwhile."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._synced = 0  # every entry below this index is reflected in the streams held
        self._deleted = store.bodies_deleted

    def _catch_up(self) -> None:
        if self.store.bodies_deleted != self._deleted:  # a body deleted outside an erasure
            self._streams.clear()
            self._deleted = self.store.bodies_deleted
        state = self.store.state()
        size = 0 if state is None else state.size
        if not self._streams:
            self._synced = size
            return
        if size <= self._synced:
            return
        for index, agent, kind, raw in self.store.entries_of_kinds(
            (*MESH_KINDS, *ERASING_KINDS), self._synced, size
        ):
            if kind in ERASING_KINDS:
                for stream in [st for st in self._streams if st[0] == agent]:
                    del self._streams[stream]
                continue
            held = self._streams.get((agent, kind))
            if held is not None:
                held.add(index, None if raw is None else parse_strict(raw, max_bytes=1 << 16))
        self._synced = size

    def _stream(self, agent: str, kind: str) -> _Stream:
        held = self._streams.get((agent, kind))
        if held is None:
            held = self._streams[(agent, kind)] = _Stream()
            for index, raw in self.store.stream_bodies(agent, kind, self._synced):
                held.add(index, None if raw is None else parse_strict(raw, max_bytes=1 << 16))
        return held

    def catch_up(self) -> None:
        """Take in what was appended since the last look (see the class docstring)."""
        with self._lock:
            self._catch_up()

    def rows(self, agent: str, kind: str, size: int, mesh: str | None = None) -> list[Row]:
        """The stream's entries below ``size`` with their bodies (None where erased; shared,
        read-only), as of the last :meth:`catch_up`; with ``mesh``, only the entries of that
        mesh and the body-less ones, in log order."""
        with self._lock:
            if self.store.bodies_deleted != self._deleted:
                self._catch_up()
            st = self._stream(agent, kind)
            if mesh is None:
                picked = st.rows
            else:
                picked = sorted([*st.by_mesh.get(mesh, []), *st.bodyless], key=lambda r: r[0])
            return [r for r in picked if r[0] < size]


_CACHES: weakref.WeakKeyDictionary[SqlStore, MeshCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(store: SqlStore) -> MeshCache:
    """The store's one :class:`MeshCache` in this process."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = MeshCache(store)
        return cache


class MeshReader:
    """Meshes folded from the store's streams as of a log size (through the store's
    :class:`MeshCache`)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.cache = cache_of(store)
        self._caught_up = False  # a reader serves one operation: it catches up once

    def _bodies(self, agent: str, kind: str, size: int, mesh: str | None = None) -> list[Row]:
        """A stream's entries below ``size`` with their bodies, None where erased; with
        ``mesh``, the entries of that mesh and the body-less ones."""
        if kind in MESH_KINDS:
            if not self._caught_up:
                self.cache.catch_up()
                self._caught_up = True
            return self.cache.rows(agent, kind, size, mesh)
        return [
            (i, None if raw is None else parse_strict(raw, max_bytes=1 << 16))
            for i, raw in self.store.stream_bodies(agent, kind, size)
        ]

    def events(self, mesh: str, size: int) -> list[tuple[int, str, str, dict[str, Any] | None]]:
        """The entries a fold of ``mesh`` reads: the creator's mesh streams and those of every
        agent it invited, each entry of this mesh, and every entry whose body is erased (it
        may have been of this mesh: the fold gives it its most restrictive reading, never
        none; verifier.mesh)."""
        creator = creator_of(mesh)
        out: list[tuple[int, str, str, dict[str, Any] | None]] = []
        for kind in CREATOR_KINDS:
            out += [(i, creator, kind, b) for i, b in self._bodies(creator, kind, size, mesh)]
        invited = {str(b["agent"]) for _, _, k, b in out if k == "mesh.invited" and b is not None} - {creator}
        for agent in sorted(invited):
            for kind in MEMBER_KINDS:
                out += [(i, agent, kind, b) for i, b in self._bodies(agent, kind, size, mesh)]
        return out

    def mesh(self, mesh: str, size: int) -> Mesh | None:
        return fold(self.events(mesh, size), mesh=mesh)

    def read_index(self, statement: Mapping[str, Any], size: int) -> list[tuple[str, int]]:
        """The entries that bear on a ``mesh_read`` statement as of ``size``, each with its
        role (verifier.mesh_index): the memory's entry; the author's entries that name the
        memory (status changes with their bodies; exemptions, and the latest use before each
        status change, without); every entry of the mesh in the creator's mesh streams and
        the author's and reader's member streams, and every one of those whose body is
        erased (it may have been of this mesh)."""
        ref, mesh = str(statement["ref"]), str(statement["mesh"])
        author, reader, creator = str(statement["author"]), str(statement["agent"]), creator_of(mesh)
        memory = int(ref.split(".")[0])
        out: list[tuple[str, int]] = [("memory", memory)]
        uses: list[int] = []
        for kind in _NAMING_KINDS:
            for i, b in self._bodies(author, kind, size):
                if i <= memory or b is None or not names_memory(kind, b, ref):
                    continue
                if kind == USE_KIND:
                    uses.append(i)
                else:
                    out.append(("exempt" if kind == EXEMPT_KIND else "status", i))
        for status in [i for role, i in out if role == "status"]:
            before = [u for u in uses if u < status]
            if before and ("use", before[-1]) not in out:
                out.append(("use", before[-1]))
        streams = {(creator, k) for k in CREATOR_KINDS} | {
            (a, k) for a in (author, reader) for k in MEMBER_KINDS
        }
        for agent, kind in sorted(streams):
            out += [("mesh", i) for i, _ in self._bodies(agent, kind, size, mesh)]
        return sorted(out, key=lambda e: e[1])

    def meshes_of(self, agent: str, size: int) -> list[Mesh]:
        """The meshes ``agent`` is an active member of (not dissolved)."""
        ids = {str(b["mesh"]) for _, b in self._bodies(agent, "mesh.created", size) if b is not None}
        ids |= {str(b["mesh"]) for _, b in self._bodies(agent, "mesh.joined", size) if b is not None}
        out = []
        for mesh_id in sorted(ids):
            m = self.mesh(mesh_id, size)
            if m is not None and not m.dissolved and agent in m.members and m.members[agent].active:
                out.append(m)
        return out

    def shares_for(self, reader: str, size: int, only: Sequence[str] | None = None) -> list[Share]:
        """What ``reader`` reads through its meshes (``only``: these meshes), per author."""
        out = []
        for m in self.meshes_of(reader, size):
            if only is not None and m.mesh not in only:
                continue
            reads = m.members[reader].reads
            for author in m.active_members():
                if author.agent == reader:
                    continue
                since = {c: i for c, i in author.shared_since().items() if c in reads}
                if since:
                    out.append(Share(mesh=m.mesh, author=author.agent, since=since))
        return out
