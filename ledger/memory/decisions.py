"""Policy decisions the memory service signs itself: the HOT caps, the time-based sweep,
replacements of facts that changed.

Each decision is taken by the pure rules of :mod:`ledger.memory.policy` on a synced
projection, then appended with the ledger's policy key and the stream heads it was decided
at: a concurrent decision moves a head, the append conflicts, and the rules are asked again
(:meth:`Decisions.decide_and_append`). Time comes from the ledger's clock, the one that
stamps the entries: replay never reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engram.protocol.errors import ConflictError, StorageError
from ledger.log import Ledger, PolicyEvent, Receipt
from ledger.memory.follower import Follower
from ledger.memory.policy import Decision, PolicyConfig, decide_caps, decide_replacements, decide_sweep
from ledger.memory.projection import Projection, SqlState
from verifier.merkle import leaf_hash

__all__ = ["Decide", "Decisions", "moves"]

#: The rules asked on a synced projection: the decisions to append (none: nothing to do).
Decide = Callable[[SqlState], list[Decision]]


def moves(decisions: Sequence[Decision]) -> dict[str, str]:
    """Item -> the tier these decisions move it to."""
    return {str(d.body["item"]): str(d.body["to"]) for d in decisions if d.kind == "memory.tier_changed"}


class Decisions:
    """Decide on the projection, append with expected heads, retry on a conflict."""

    def __init__(
        self,
        ledger: Ledger,
        projection: Projection,
        follower: Follower,
        config: PolicyConfig,
        flush_access: Callable[[], None],
    ) -> None:
        """``flush_access``: wait until every recorded use is in the log (a sweep ages
        memories by their uses)."""
        self.ledger = ledger
        self.projection = projection
        self.follower = follower
        self.config = config
        self._flush_access = flush_access

    def hold_caps(self, agent_id: str) -> list[Receipt]:
        """The HOT caps after a change to HOT outside a compaction (a write, a correction):
        what no longer fits moves to WARM (policy-signed ``hot_cap`` decisions); nothing is
        appended while HOT fits. Then, as after a distillation, a memory that states a new
        value of a fact replaces the ones that state an older value (``memory.replaced``)."""

        def decide(state: SqlState) -> list[Decision]:
            capped = decide_caps(state, agent_id, self.config)
            return [
                *capped,
                *decide_replacements(
                    state, state.changed_facts(agent_id), leaf_hash=self.leaf_hash, moving=moves(capped)
                ),
            ]

        return self.decide_and_append(agent_id, decide)

    def plan(self, agent_id: str, now_us: int) -> list[Decision]:
        """The decisions a sweep at ``now_us`` would take (nothing is appended)."""
        self._flush_access()
        self.follower.sync()
        with self.projection.engine.connect() as conn:
            return decide_sweep(SqlState(conn), self.projection.items(agent_id), now_us, self.config)

    def compact(self, agent_id: str) -> list[Receipt]:
        """Apply the time-based rules (inactive preferences, WARM->COLD, decay) now.

        "Now" is the ledger's clock, the same clock that stamps the entries: a decision
        whose window has not ended by its entry's server time has no effect on replay.
        """
        self._flush_access()
        return self.decide_and_append(
            agent_id,
            lambda state: decide_sweep(
                state, self.projection.items(agent_id), self.ledger.clock(), self.config
            ),
        )

    def decide_and_append(self, agent_id: str, decide: Decide, attempts: int = 8) -> list[Receipt]:
        """Decide on a synced projection and append with expected stream heads; on a
        conflict (a concurrent decision moved a stream), re-sync and decide again."""
        for attempt in range(attempts):
            applied = self.follower.sync(embed=False)
            with self.projection.engine.connect() as conn:
                decisions = decide(SqlState(conn))
            if not decisions:
                return []
            expect = self._heads(agent_id, decisions, applied)
            if expect is None:
                continue  # the projection is behind a stream: sync and decide again
            try:
                receipts = self.ledger.append(
                    [
                        PolicyEvent(agent=agent_id, kind=d.kind, body=d.body, expect_head=expect[d.kind])
                        for d in decisions
                    ]
                )
            except ConflictError:
                if attempt == attempts - 1:
                    raise
                continue
            self.follower.sync(receipts[-1].index + 1, embed=False)
            return receipts
        raise ConflictError(
            f"policy decisions for {agent_id} kept conflicting",
            agent=agent_id,
            kind="memory.*",
            head_version=None,
            head_leaf_hash=None,
        )

    def _heads(
        self, agent_id: str, decisions: Sequence[Decision], applied: int
    ) -> dict[str, int | None] | None:
        """The stream heads the decisions were taken at, or None when a stream moved past
        the projection's applied size."""
        expect: dict[str, int | None] = {}
        for kind in {d.kind for d in decisions}:
            head = self.ledger.stream_head(agent_id, kind)
            if head is not None and head.index >= applied:
                return None
            expect[kind] = None if head is None else head.index
        return expect

    def append_retrying(self, agent_id: str, kind: str, *bodies: Mapping[str, Any]) -> Receipt:
        """Append policy entries of one stream in one batch, retrying stream conflicts; the
        projection is synced past them. Returns the last receipt. The access writer's own
        records do not hold recall back while they are applied."""
        for attempt in range(8):
            head = self.ledger.stream_head(agent_id, kind)
            try:
                receipts = self.ledger.append(
                    [
                        PolicyEvent(
                            agent=agent_id,
                            kind=kind,
                            body=body,
                            expect_head=None if head is None else head.index,
                        )
                        for body in bodies
                    ]
                )
            except ConflictError:
                if attempt == 7:
                    raise
                continue
            if kind != "memory.accessed":
                self.follower.sync(receipts[-1].index + 1, embed=False)
                return receipts[-1]
            with self.follower.applying_uses(r.index for r in receipts):
                self.follower.sync(receipts[-1].index + 1, embed=False)
            return receipts[-1]
        raise AssertionError("unreachable")  # pragma: no cover

    def leaf_hash(self, index: int) -> str:
        """The leaf hash (hex) of entry ``index``, as the log's tree holds it."""
        raw = self.ledger.store.leaf(index)
        if raw is None:
            raise StorageError(f"entry {index} is not in the log")
        return leaf_hash(raw).hex()
