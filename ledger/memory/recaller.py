"""Recall's hub: the numbered stages of :mod:`ledger.memory.stages` over one query value,
the reads they need, and the use a recall records.

Also the proof that a memory was shared through a mesh (:meth:`Recaller.mesh_proof`): what a
reader who recalled another agent's memory can hand to anyone to check offline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engram.protocol.errors import MalformedError, RejectedEventError, VerificationError
from engram.protocol.queries import RecallQuery
from engram.protocol.schemas import parse_ref
from ledger.log import Ledger
from ledger.memory.access import AccessLog, Use
from ledger.memory.block import RecallLine, RecallResult, block_overhead, hot_within_budget
from ledger.memory.follower import Follower
from ledger.memory.policy import PolicyConfig
from ledger.memory.projection import Projection
from ledger.memory.recall import envelope_matches
from ledger.memory.stages import (
    Scored,
    fit_budget,
    fuse_pools,
    gather,
    hot_lines,
    keep_shared,
    merge_meshes,
    render_within,
    to_lines,
    with_earlier,
)
from ledger.memory.state import Item
from ledger.memory.vectors import VectorIndex
from ledger.mesh import Mesh, MeshReader
from verifier.event import Leaf

__all__ = ["Recaller"]


class Recaller:
    """Recall for one ledger's agents: HOT, then the ranked rows within a token budget."""

    def __init__(
        self,
        ledger: Ledger,
        projection: Projection,
        follower: Follower,
        vectors: VectorIndex | None,
        *,
        config: PolicyConfig,
        access: AccessLog,
        access_mode: str,
    ) -> None:
        self.ledger = ledger
        self.projection = projection
        self.follower = follower
        self.vectors = vectors
        self.config = config
        self.access = access
        self.access_mode = access_mode

    def recall(
        self,
        agent: str,
        q: RecallQuery,
        *,
        now_us: int | None = None,
        record_access: bool = True,
        min_index: int | None = None,
    ) -> RecallResult:
        """HOT (the session's frozen snapshot inside a session), then up to ``q.limit``
        memories and raw records ranked for ``q.text`` within the token budget, as of the
        latest checkpoint (or as soon as the projection holds entry ``min_index``)."""
        applied = (
            self.follower.sync_for_recall() if min_index is None else self.follower.sync_through(min_index)
        )
        now = self.ledger.clock() if now_us is None else now_us
        notes: list[str] = []  # what degraded this recall, said in the block
        # 1. parse and bound: ``q`` is a RecallQuery (RecallQuery.of, at the face: as_query)
        hot = self._hot(agent, q, now)  # HOT is the standing context, not a candidate
        # 2. gather candidates per signal, 3. fuse
        scored = fuse_pools(gather(self.projection, self.vectors, agent, q, notes), q)
        # 4. merge meshes
        mesh_of: dict[tuple[str, str], str] = {}  # (author, ref) -> the mesh that shared it
        scored = merge_meshes(scored, self._shared(agent, q, applied, notes, mesh_of))
        # 5. apply time and supersession
        lines = to_lines(scored, agent=agent, now=now, query=q.text, wanted=q.scopes, mesh_of=mesh_of)
        lines = self._with_earlier(agent, lines)
        # 6. fit the budget
        result = self._fit(agent, q, hot, lines, applied, notes)
        # 7. render: the block held to the budget as it is counted whole
        result = render_within(result, self._budget(q))
        if record_access and self.access_mode != "off":
            self._record_use(agent, q, result)
        return result

    def _budget(self, q: RecallQuery) -> int:
        return self.config.hot_max_tokens * 2 if q.budget_tokens is None else q.budget_tokens

    def _fit(
        self,
        agent: str,
        q: RecallQuery,
        hot_src: Sequence[RecallLine],
        lines: Sequence[RecallLine],
        applied: int,
        notes: Sequence[str],
    ) -> RecallResult:
        """Stage 6: every line of the block counts against the budget: the frame with its
        notes and this size, HOT (within its own cap), then each ranked row and each
        section's heading."""
        budget = self._budget(q)
        hot, used = hot_within_budget(
            hot_src,
            min(budget, self.config.hot_max_tokens),
            self.config.hot_max_items,
            overhead=block_overhead(agent, self.ledger.origin, size=applied, notes=notes),
        )
        ranked, total = fit_budget(lines, query=q.text, limit=q.limit, budget=budget, used=used)
        return RecallResult(
            agent=agent,
            origin=self.ledger.origin,
            query=q.text,
            as_of_size=applied,
            session=q.session,
            hot=tuple(hot),
            ranked=tuple(ranked),
            hot_tokens=used,
            total_tokens=total,
            notes=tuple(notes),
        )

    def _hot(self, agent: str, q: RecallQuery, now: int) -> list[RecallLine]:
        snap = self.projection.session(agent, q.session) if q.session else None
        if q.session and snap is None:
            raise RejectedEventError(f"no session {q.session} for {agent}", check="memory.session")
        hot_items = [] if snap is not None else self.projection.items(agent, tiers=["HOT"])
        return hot_lines(snap, hot_items, now, q.scopes)

    def _rank(self, agent: str, q: RecallQuery, notes: list[str]) -> list[Scored]:
        """Stages 2 and 3: ``agent``'s memories and records for ``q``, best first."""
        return fuse_pools(gather(self.projection, self.vectors, agent, q, notes), q)

    def _shared(
        self, agent: str, q: RecallQuery, applied: int, notes: list[str], mesh_of: dict[tuple[str, str], str]
    ) -> list[Scored]:
        """The memories ``agent``'s meshes share with it for ``q``: each author's own
        ranking of its WARM memories, kept to what its share lets through."""
        if q.sources == "records" or q.meshes == ():
            return []
        own = dataclasses.replace(q, include_cold=False, include_archived=False, sources="memories")
        out: list[Scored] = []
        for share in MeshReader(self.ledger.store).shares_for(agent, applied, q.meshes):
            out += keep_shared(share, self._rank(share.author, own, notes), mesh_of)
        return out

    def _with_earlier(self, agent: str, lines: Sequence[RecallLine]) -> list[RecallLine]:
        """Stage 5b with its reads: one lookup by primary key per author of the rows that
        replaced a memory."""
        wanted: dict[str, list[str]] = {}
        for r in lines:
            if r.replaces:
                wanted.setdefault(r.author or agent, []).append(r.replaces)
        olds: dict[str, Item] = {}
        for author, refs in wanted.items():
            olds |= self.projection.items_by_refs(
                author, refs, tiers=["HOT", "WARM", "COLD"], statuses=["superseded"]
            )
        return with_earlier(lines, olds)

    def _record_use(self, agent: str, q: RecallQuery, result: RecallResult) -> None:
        """The refs this recall used (HOT the query is about, the agent's own memories
        ranked), recorded for the aging rules (ledger.memory.access)."""
        refs = [
            *self._used_hot(agent, q.text, result.hot),
            *(r.ref for r in result.ranked if not r.is_record and r.author is None),
        ]
        if not refs:
            return
        self.access.record(Use(agent=agent, refs=tuple(refs[:100]), query=q.text, session=q.session))
        if self.access_mode == "sync":
            self.access.flush()

    def _used_hot(self, agent: str, query: str, hot: Sequence[RecallLine]) -> list[str]:
        """HOT is injected, not searched: a HOT item counts as used only when the query is
        about it (envelope or full-text match), else idle preferences would never age."""
        if not query.strip() or not hot:
            return []
        hits = set(self.projection.fulltext(agent, query, ["HOT"], limit=200))
        by_ref = {i.ref: i for i in self.projection.items(agent, tiers=["HOT"])}
        return [
            r.ref
            for r in hot
            if r.ref in hits or (r.ref in by_ref and envelope_matches(by_ref[r.ref], query) > 0)
        ]

    # -- meshes --------------------------------------------------------------------------

    def meshes_of(self, agent_id: str) -> list[Mesh]:
        """The Memory Meshes ``agent_id`` is an active member of, folded from the log."""
        return MeshReader(self.ledger.store).meshes_of(agent_id, self.ledger.size())

    def mesh_proof(self, reader: str, mesh: str, ref: str) -> bytes:
        """A bundle proving, offline, that memory ``ref`` was shared with ``reader`` through
        ``mesh`` under grants valid at the latest checkpoint (specs/bundle.md ``mesh_read``):
        the memory was active and WARM then, of a category its author's grant shared and the
        reader's read, and the bundle discloses that memory and the entries that bear on it,
        nothing else. Refused unless all of that holds (``mesh.not_shared``, the same answer
        whatever the reason, so a refusal says nothing of the author's memories), and for a
        memory of a distillation made before per-entry commitments, which cannot be disclosed
        alone (``mesh.not_disclosable``)."""
        from ledger.bundle import create_bundle, mesh_read_claim
        from verifier.bundle import verify_bundle
        from verifier.note import VerifierKey

        refused = RejectedEventError(
            f"memory {ref} is not shared with {reader} through {mesh}", check="mesh.not_shared"
        )
        if not self._is_shared(reader, mesh, ref):
            raise refused
        try:
            data = create_bundle(self.ledger, mesh_read_claim(self.ledger, reader, mesh, ref))
        except MalformedError as e:
            if e.check == "bundle.disclosure":
                raise RejectedEventError(
                    f"memory {ref} is shared with {reader}, but it is in a distillation made before "
                    "per-entry commitments: it cannot be proven without disclosing the session's other "
                    "memories",
                    check="mesh.not_disclosable",
                ) from e
            raise refused from e
        try:
            verify_bundle(data, VerifierKey.parse(self.ledger.vkey))
        except VerificationError as e:
            raise refused from e
        return data

    def _is_shared(self, reader: str, mesh: str, ref: str) -> bool:
        """Whether memory ``ref`` is shared with ``reader`` through ``mesh`` at the latest
        checkpoint: the projection first (it knows what the proof's fold cannot: a duplicate
        folded into another memory, a replacement's other side), then the mesh's grants."""
        index, _ = parse_ref(ref)
        size = self.follower.sync()
        raw = self.ledger.store.leaf(index) if index < size else None
        if raw is None:
            return False
        author = Leaf.from_bytes(raw).envelope.agent
        it = self.projection.item(author, ref)
        if it is None or it.status != "active" or it.tier != "WARM" or it.index != index:
            return False
        shares = MeshReader(self.ledger.store).shares_for(reader, size, [mesh])
        since = next((sh.since.get(it.category) for sh in shares if sh.author == author), None)
        return since is not None and since <= index
