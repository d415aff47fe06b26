"""Session closing: the transcript of a closed session, its one distillation, and the
session-end rules.

After a ``session.closed`` (:meth:`Closing.after_close`, called by the door) the session is
distilled exactly once under any concurrency (:meth:`Closing.distill`: entries the write
gate refuses or that only copy a turn are dropped), then the session-end decisions follow
(:mod:`ledger.memory.decisions`): compaction per config, and replacements of facts the
distillation stated new values of.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.protocol.errors import ConflictError, RejectedEventError
from engram.protocol.kinds import validate_body
from ledger.log import Ledger, PolicyEvent, Receipt
from ledger.memory.decisions import Decisions, moves
from ledger.memory.distill import MAX_KNOWN, Distiller, Turn, distill_stats, run_distiller
from ledger.memory.follower import Follower
from ledger.memory.policy import (
    Decision,
    PolicyConfig,
    decide_replacements,
    decide_session_end,
    decide_updates,
)
from ledger.memory.projection import Projection, SqlState
from ledger.memory.report import DistillRow, distill_rows
from verifier.event import PER_ENTRY, Leaf
from verifier.jcs import canonical_bytes, parse_strict

__all__ = ["CloseResult", "Closing"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseResult:
    """What a ``session.closed`` closed: its distillation (None: not distilled, or already),
    the memories it distilled and the policy decisions that followed."""

    closed: Receipt
    distilled: Receipt | None
    entries: int
    decisions: list[Receipt] = field(default_factory=list)


class Closing:
    """Distill closed sessions and apply the session-end rules."""

    def __init__(
        self,
        ledger: Ledger,
        projection: Projection,
        follower: Follower,
        decisions: Decisions,
        *,
        config: PolicyConfig,
        distiller: Distiller,
        flush_access: Callable[[], None],
        rand: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        """``rand``: random bytes (the nonces of distilled entries)."""
        self.ledger = ledger
        self.projection = projection
        self.follower = follower
        self.decisions = decisions
        self.config = config
        self.distiller = distiller
        self.gate = ledger.gate  # one gate for the log and the memory service (ledger.compose)
        self._flush_access = flush_access
        self._rand = rand

    def after_close(self, closed: Receipt, agent_id: str, session: str) -> CloseResult:
        """What follows an appended ``session.closed``: distill and compact (per config)."""
        self.follower.sync(closed.index + 1, embed=False)
        if not self.config.compact_on_session_end:
            return CloseResult(closed=closed, distilled=None, entries=0)
        distilled, entries, decisions = self.finish_session(agent_id, session)
        return CloseResult(closed=closed, distilled=distilled, entries=entries, decisions=decisions)

    def finish_session(self, agent_id: str, session: str) -> tuple[Receipt | None, int, list[Receipt]]:
        """Distill a closed session (unless done) and apply the session-end rules."""
        self._flush_access()
        s = self.projection.session(agent_id, session)
        if s is None or s.status != "closed":
            raise RejectedEventError(f"session {session} of {agent_id} is not closed", check="memory.session")
        distilled, entries = (None, 0) if s.distilled else self.distill(agent_id, session)

        def decide(state: SqlState) -> list[Decision]:
            filed = decide_session_end(state, agent_id, session, self.config, self.ledger.clock())
            found = state.changed_facts(agent_id)
            return [
                *filed,
                *decide_replacements(state, found, leaf_hash=self.decisions.leaf_hash, moving=moves(filed)),
            ]

        decisions = self.decisions.decide_and_append(agent_id, decide)
        return distilled, entries, decisions

    def transcript(self, agent_id: str, session: str) -> list[Turn]:
        s = self.projection.session(agent_id, session)
        if s is None:
            raise RejectedEventError(f"no session {session} for {agent_id}", check="memory.session")
        turns = []
        for idx, raw in self.ledger.store.leaves_iter(s.opened_index, s.last_index + 1):
            leaf = Leaf.from_bytes(raw)
            if leaf.envelope.agent != agent_id or leaf.envelope.kind != "session.turn":
                continue
            sb = self.ledger.store.body(idx)
            if sb is None:
                continue
            b = parse_strict(sb[1], max_bytes=1 << 24)
            if b.get("session") == session:
                turns.append(
                    Turn(
                        index=idx,
                        turn=b["turn"],
                        role=b["role"],
                        content=b["content"],
                        timestamp_us=leaf.timestamp_us,
                    )
                )
        return turns

    def distill(self, agent_id: str, session: str) -> tuple[Receipt | None, int]:
        """Run the distiller over the session and record the result (an empty one too).

        Entries the write gate refuses, or that only copy a turn, are dropped (the rest of
        the session's memories still count); entries that would push the body over the size
        limit are dropped from the end. The body's ``stats`` record what it cost and kept:
        turns kept (cited by an entry) and dropped, input and output tokens (as the model's
        endpoint reported them, else estimated), and the distiller's latency.
        """
        s = self.projection.session(agent_id, session)
        if s is None:
            raise RejectedEventError(f"no session {session} for {agent_id}", check="memory.session")
        turns = self.transcript(agent_id, session)
        digest = hashlib.sha256(
            b"engram/transcript/v1\x00" + canonical_bytes([[t.index, t.role, t.content] for t in turns])
        ).hexdigest()
        # Per-entry form: each entry gets its own random nonce and the body's
        # commitment is over the entries' digests, so a mesh proof can disclose one memory
        # of the session and none of the others (verifier.event.commitment_of).
        body: dict[str, Any] = {
            "session": session,
            "input": {"start": s.opened_index, "end": s.last_index, "digest": digest},
            "distiller": {"name": self.distiller.name, "version": self.distiller.version},
            "disclosure": PER_ENTRY,
            "entries": [],
        }
        started = time.perf_counter_ns()
        known = [
            (it.ref, it.content)
            for it in self.projection.current_facts(agent_id, limit=MAX_KNOWN)
            if getattr(self.distiller, "takes_known", False)
        ]
        proposed, usage = run_distiller(self.distiller, session, turns, known)
        latency_us = (time.perf_counter_ns() - started) // 1000
        updates = self._keep_entries(body, proposed, turns)
        body["stats"] = distill_stats(turns, body["entries"], latency_us, usage)
        receipt = self._append_distillation(agent_id, session, body)
        if receipt is not None and updates:
            self._append_updates(agent_id, receipt.index, body["entries"], updates)
        return receipt, 0 if receipt is None else len(body["entries"])

    def _keep_entries(
        self, body: dict[str, Any], proposed: Sequence[Mapping[str, Any]], turns: Sequence[Turn]
    ) -> dict[int, str]:
        """Add to ``body`` the proposed entries the gate admits, while the body fits the
        size limit; return entry position -> the known fact it states a new value of."""
        budget = self.ledger.max_body_bytes - len(canonical_bytes(body)) - 256  # 256: the stats
        updates: dict[int, str] = {}
        forms = self.gate.verbatim_forms(t.content for t in turns)  # once, not once per entry
        for e in proposed:
            entry = self._admitted(body, e, forms)
            if entry is None:
                continue  # a poisoned, malformed or copied entry adds nothing: drop it
            cost = len(canonical_bytes(entry)) + 1
            if cost > budget:
                break
            budget -= cost
            if isinstance(e.get("updates"), str):
                updates[len(body["entries"])] = e["updates"]
            body["entries"].append(entry)
        return updates

    def _admitted(
        self, body: Mapping[str, Any], e: Mapping[str, Any], forms: Collection[str]
    ) -> dict[str, Any] | None:
        """The entry as it is signed (gated text, its own nonce), or None when the write gate
        refuses it, the body schema does, or it only copies a turn."""
        try:
            text, _ = self.gate.prepare(e["content"])
            entry = {k: v for k, v in e.items() if k not in ("updates", "nonce")} | {
                "content": text,
                "nonce": self._rand(16).hex(),
            }
            validate_body("memory.distilled", {**body, "entries": [entry]})
            self.gate.check_not_among(text, forms)  # the turns' verbatim_forms
        except RejectedEventError:
            return None
        return entry

    def _append_updates(
        self, agent_id: str, index: int, entries: Sequence[Mapping[str, Any]], updates: Mapping[int, str]
    ) -> list[Receipt]:
        """The distiller said these entries state new values of known facts: policy-signed
        ``memory.replaced`` entries (rule ``distiller_update``) link each to the fact it
        replaces, where the replacement rules allow it (ledger.memory.policy.decide_updates:
        the owner's own word; never a COLD or decay-exempt memory; a HOT one only by its own
        speaker). Replayed only if both are still active memories then."""
        pairs = [(old_ref, f"{index}.{n}") for n, old_ref in sorted(updates.items()) if n < len(entries)]
        return self.decisions.decide_and_append(
            agent_id, lambda state: decide_updates(state, agent_id, pairs, leaf_hash=self.decisions.leaf_hash)
        )

    def _append_distillation(self, agent_id: str, session: str, body: Mapping[str, Any]) -> Receipt | None:
        """Append the session's one ``memory.distilled`` entry, or nothing (None) if another
        process or thread distilled the session first.

        Exactly once under any concurrency, on both backends, through the stream's optimistic
        concurrency: the session is checked on a projection synced past the stream head the
        append then expects; a distillation appended meanwhile moves that head, so the append
        conflicts, and the next round sees the session distilled. (Retrying a conflict by
        re-appending the same body distilled a session twice.)"""
        for _ in range(16):
            head = self.ledger.stream_head(agent_id, "memory.distilled")
            if head is not None:
                self.follower.sync(head.index + 1, embed=False)
            s = self.projection.session(agent_id, session)
            if s is None or s.distilled:
                return None
            event = PolicyEvent(
                agent=agent_id,
                kind="memory.distilled",
                body=body,
                expect_head=None if head is None else head.index,
            )
            try:
                [receipt] = self.ledger.append([event])
            except ConflictError:
                continue
            self.follower.sync(receipt.index + 1, embed=False)
            return receipt
        raise ConflictError(
            f"the distillation of {agent_id}'s session {session} kept conflicting",
            agent=agent_id,
            kind="memory.distilled",
            head_version=None,
            head_leaf_hash=None,
        )

    def distill_report(self, agent_id: str | None = None) -> list[DistillRow]:
        """One row per ``memory.distilled`` entry (of one agent, or of every agent), with the
        figures its body recorded (ledger.memory.report)."""
        self.follower.sync()
        agents = [agent_id] if agent_id is not None else self.projection.agents()
        rows: list[DistillRow] = []
        for a in agents:
            rows += distill_rows(a, self.ledger.stream_bodies(a, "memory.distilled"))
        return rows
