"""The memory door and its queries: every agent-signed event goes in here.

``POST /v1/events``, the memory routes and the in-process transport all call
:meth:`Door.accept` or :meth:`Door.submit`, so the memory rules follow every write whichever
way it came: the projection is synced past it (read-your-writes), the HOT caps hold after a
change to HOT (:mod:`ledger.memory.decisions`), a closed session is distilled
(:mod:`ledger.memory.closing`). The queries the routes ask read the projection, never the
store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from engram.protocol.answers import EntryProof, ItemProof, ItemRow
from engram.protocol.erasure import ErasurePlan
from engram.protocol.errors import EngramError, ForbiddenError, NotFoundError, RejectedEventError
from engram.protocol.kinds import NAMES_ITEM, kinds_where
from engram.protocol.redact import count_redactions
from engram.protocol.wire import Outcome
from ledger.log import Ledger, Prepared, Receipt, Submission
from ledger.memory.closing import CloseResult, Closing
from ledger.memory.decisions import Decisions
from ledger.memory.follower import Follower
from ledger.memory.projection import Projection
from ledger.memory.state import Item, Session
from verifier.event import Leaf

__all__ = ["CAPPED_KINDS", "DEFERRED_KINDS", "FOLDED_KINDS", "NAMES_ITEM", "OWN_ITEM", "Door", "Submitted"]

_log = logging.getLogger("engram.memory")

#: What the projection folds: the kinds whose arrival the memory rules follow.
FOLDED_KINDS = kinds_where(group="session") | kinds_where(group="memory") | kinds_where(group="record")
#: Agent-signed changes to HOT: the caps are held after each.
CAPPED_KINDS = frozenset({"memory.written", "memory.superseded"})
#: Folded kinds whose answer reads nothing from the projection and whose arrival no rule
#: follows at once (a session's opening and its turns, the ingest path): in process the door
#: leaves them to the next sync (a read, a close, a write that needs the projection, or the
#: lag bound :data:`ledger.memory.follower.MAX_LAG`), which applies and embeds them in one
#: batch. Every read syncs first (read-your-writes); the log entry is durable before the
#: answer, so nothing acknowledged waits on the projection.
DEFERRED_KINDS = frozenset({"session.opened", "session.turn"})
#: The kinds whose item is named by the entry alone (``<index>.0``: a record is never a
#: duplicate of another), so that their answer needs no projection (ledger.memory.state).
OWN_ITEM = kinds_where(group="record")


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """What :meth:`Door.submit` did with one agent-signed event: its receipt and parsed
    body, the item it made or confirmed (kinds of :data:`NAMES_ITEM`), and what a
    ``session.closed`` closed."""

    receipt: Receipt
    body: dict[str, Any]
    ref: str | None = None
    close: CloseResult | None = None
    #: A ``memory.erased``: (erased memory that was current, the value current now or None).
    current: tuple[tuple[str, str | None], ...] = ()

    @property
    def redacted(self) -> int:
        """The redaction markers the signed body carries: the secrets its signer redacted
        (the write answers' ``redacted``; specs/memory-events.md section 3)."""
        return count_redactions(self.body)

    def outcome(self) -> Outcome:
        """The answer beside the receipt, as the memory routes give it over HTTP."""
        c = self.close
        return Outcome(
            named=self.receipt.kind in NAMES_ITEM,
            ref=self.ref,
            distilled=None if c is None else c.distilled,
            entries=0 if c is None else c.entries,
            decisions=() if c is None else tuple(c.decisions),
            current=self.current,
        )


class Door:
    """One door for agent-signed events, and the queries the routes ask of the projection."""

    #: How far back an erasure's answer follows a replacement chain.
    MAX_CHAIN = 64

    def __init__(
        self,
        ledger: Ledger,
        projection: Projection,
        follower: Follower,
        decisions: Decisions,
        closing: Closing,
    ) -> None:
        self.ledger = ledger
        self.projection = projection
        self.follower = follower
        self.decisions = decisions
        self.closing = closing

    # -- queries (what the routes ask: they read the projection) --

    def sessions(self, agent: str) -> list[Session]:
        """Every session of ``agent``, in id order."""
        return self.projection.sessions(agent)

    def session(self, agent: str, session: str) -> Session | None:
        return self.projection.session(agent, session)

    def items(self, agent: str, **query: Any) -> list[Item]:
        """``agent``'s items (``Projection.items``: tiers, status, source kinds, a page)."""
        return self.projection.items(agent, **query)

    def item_counts(self, agent: str) -> dict[tuple[str, str], int]:
        """``agent``'s items per (tier, status) (``Projection.item_counts``)."""
        return self.projection.item_counts(agent)

    def item(self, agent: str, ref: str) -> Item | None:
        return self.projection.item(agent, ref)

    def item_proof(self, agent: str, ref: str, *, visible: Callable[[str], bool] | None = None) -> ItemProof:
        """``agent``'s item ``ref`` with the leaf that made it, that leaf's inclusion proof in
        the latest checkpoint and the entry's salt and body (None once erased); NotFound when
        there is no such item or ``visible`` refuses its source kind (a share token's)."""
        it = self.projection.item(agent, ref)
        if it is None or (visible is not None and not visible(it.source_kind)):
            raise NotFoundError(f"no item {ref} of {agent} visible to this caller", check="memory.item")
        leaf = self.ledger.leaf(it.index)
        assert leaf is not None  # an item is made by a logged entry
        inc = self.ledger.prove_inclusion(it.index)
        assert inc.checkpoint is not None  # the latest checkpoint is always published
        sb = self.ledger.body(it.index)
        return ItemProof(
            item=ItemRow.of(asdict(it)),
            entry=EntryProof(
                index=it.index,
                leaf=leaf,
                leaf_hash=inc.leaf_hash,
                size=inc.size,
                root=inc.root,
                proof=inc.hashes,
                checkpoint=inc.checkpoint,
            ),
            salt=None if sb is None else sb[0],
            body=None if sb is None else sb[1],
        )

    def accept(self, subs: Sequence[Submission | Prepared], *, operator: bool = False) -> list[Receipt]:
        """The one door for signed events: append ``subs`` atomically,
        then apply the memory rules after every write, whichever way the events came
        (``POST /v1/events``, the memory routes, the in-process transport):

        1. the projection is synced past them when it folds any (read-your-writes), except
           a session's opening and turns (:data:`DEFERRED_KINDS`), which the next sync applies
           in one batch: every read syncs first, so a reader still sees them;
        2. after a ``memory.written`` or ``memory.superseded``, the agent's HOT caps hold
           (what no longer fits moves to WARM: policy-signed decisions);
        3. after a ``session.closed``, the session is distilled and the session-end rules
           apply (``compact_on_session_end``).

        While the background follower runs (:meth:`Follower.follow`, ``engram serve``), 1 and 2 are
        its work: the door answers once the entries are durable in the log, and a reader
        that must see them names the last one (``Engram-Min-Index``, :meth:`Follower.sync_through`).
        A close still answers with its distillation (3)."""
        receipts, _ = self._accept(subs, operator=operator)
        return receipts

    def _accept(
        self, subs: Sequence[Submission | Prepared], *, operator: bool = False
    ) -> tuple[list[Receipt], dict[int, CloseResult]]:
        """:meth:`accept`, also returning what each ``session.closed`` closed (by index).
        Each event is prepared once (``Ledger.prepare``) unless the edge did it already."""
        prepared = [s if isinstance(s, Prepared) else self.ledger.prepare(s, operator=operator) for s in subs]
        receipts = self.ledger.append(prepared, operator=operator)
        # Committed: whatever fails from here on, the entries are answered with their receipts
        # (a close whose distillation failed was once answered with a
        # refusal, so a client retried an entry that was in the log). The failure is logged
        # and named by /healthz (Ledger.problems); what it left undone is done again later
        # (the follower's next round holds the caps; ``engram session distill`` distills).
        closes: dict[int, CloseResult] = {}
        try:
            self._after_commit(prepared, receipts, closes)
        except Exception as e:
            if not isinstance(e, EngramError):
                _log.exception("the memory rules after a committed write failed")
            self.ledger.report_problem(
                "memory.after_commit", f"the memory rules after entry {receipts[-1].index} failed: {e}"
            )
        else:
            self.ledger.clear_problem("memory.after_commit")
        for r in receipts:
            if r.kind == "session.closed" and r.index not in closes:
                closes[r.index] = CloseResult(closed=r, distilled=None, entries=0)
        return receipts, closes

    def _after_commit(
        self, prepared: Sequence[Prepared], receipts: Sequence[Receipt], closes: dict[int, CloseResult]
    ) -> None:
        """The memory rules after committed entries (:meth:`accept`, 1-3)."""
        folded = [r for r in receipts if r.kind in FOLDED_KINDS]
        if not folded:
            return
        capped = dict.fromkeys(r.agent for r in receipts if r.kind in CAPPED_KINDS)
        if self.follower.following:
            # Answer on durability: the follower applies the entries
            # and holds the caps; a reader that must see them names them (Engram-Min-Index).
            self.follower.due(capped)
        elif all(r.kind in DEFERRED_KINDS for r in folded):
            self.follower.defer(max(r.index for r in folded) + 1)
        else:
            self.follower.sync(max(r.index for r in folded) + 1, embed=False)
            for agent in capped:
                self.decisions.hold_caps(agent)
        for p, r in zip(prepared, receipts, strict=True):
            if r.kind == "session.closed":  # the close's answer is its distillation
                closes[r.index] = self.closing.after_close(r, r.agent, str(p.body["session"]))

    # -- the door: submissions ---

    def submit(
        self,
        sub: Submission | Prepared,
        *,
        agent: str,
        kinds: Collection[str],
        session: str | None = None,
        operator: bool = False,
    ) -> Submitted:
        """Append one event an agent signed (over HTTP, or in process: the same call), after
        checking it is ``agent``'s, of one of ``kinds`` and (if given) about ``session``,
        through the door (:meth:`accept`). ``sub`` may come prepared by the edge (parsed
        once there). Returns the receipt, the body, the item it made or confirmed and, for a
        ``session.closed``, what its close did."""
        p = sub if isinstance(sub, Prepared) else self.ledger.prepare(sub, operator=operator)
        env = p.envelope
        if env.agent != agent:
            raise ForbiddenError(
                f"this event is signed for agent {env.agent}, not {agent}", check="auth.agent"
            )
        if env.kind not in kinds:
            raise RejectedEventError(
                f"a {env.kind} event does not belong here (expected {', '.join(sorted(kinds))})",
                check="request.kind",
            )
        body = dict(p.body)
        if session is not None and body.get("session") != session:
            raise RejectedEventError(f"the event is not about session {session}", check="request.session")
        chains: dict[str, list[str]] = {}
        if env.kind == "memory.erased":
            if self.follower.following:
                # The follower may not have taken the agent's pending decisions yet (a write
                # answers on durability): take them first, so the answer says what is current.
                self.decisions.hold_caps(agent)
            chains = self._chains_of(agent, body.get("refs") or ())
        [receipt], closes = self._accept([p], operator=operator)
        return Submitted(
            receipt=receipt,
            body=body,
            ref=self._named(agent, receipt),
            close=closes.get(receipt.index),
            current=self._now_current(agent, receipt, chains),
        )

    def _named(self, agent: str, receipt: Receipt) -> str | None:
        """The item a committed entry made or confirmed (kinds of NAMES_ITEM), else None."""
        if receipt.kind in OWN_ITEM:
            return f"{receipt.index}.0"  # named by the entry: no projection needed
        if receipt.kind not in NAMES_ITEM:
            return None
        try:  # a duplicate confirms an older item: ask the projection
            self.follower.sync_through(receipt.index)
            return self.ref_for(agent, receipt.index)
        except EngramError as e:  # committed: answered with its receipt, the item unnamed
            self.ledger.report_problem(
                "memory.after_commit", f"the item of entry {receipt.index} could not be named: {e}"
            )
            return None

    def _now_current(
        self, agent: str, receipt: Receipt, chains: Mapping[str, Sequence[str]]
    ) -> tuple[tuple[str, str | None], ...]:
        """For each erased memory that was a fact's current value: the value current now."""
        if not chains:
            return ()
        try:  # committed: what became current is told when it can be read
            self.follower.sync_through(receipt.index)
            return tuple((erased, self._first_active(agent, older)) for erased, older in chains.items())
        except EngramError as e:
            self.ledger.report_problem(
                "memory.after_commit", f"what entry {receipt.index} made current could not be read: {e}"
            )
            return ()

    def _chains_of(self, agent: str, refs: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``refs`` that is the current value of a fact that changed (active, and
        it replaced an older one, itself or through the memory it corrects): the older values
        and the memories corrected on the way, newest first (what may become current once it
        is erased)."""
        self.follower.sync()
        out: dict[str, list[str]] = {}
        for ref in refs:
            it = self.projection.item(agent, ref)
            if it is None or it.status != "active":
                continue
            # Back through replacements and through corrections (a current value the owner
            # corrected is current as its correction: erasing the correction takes the value
            # it corrected, and the value before that is current again).
            older: list[str] = []
            changed = bool(it.replaces)
            prev: str | None = it.replaces or it.supersedes
            while prev is not None and prev not in older and prev != ref and len(older) < self.MAX_CHAIN:
                older.append(prev)
                p = self.projection.item(agent, prev)
                changed = changed or bool(p is not None and p.replaces)
                prev = None if p is None else p.replaces or p.supersedes
            if changed:
                out[ref] = older
        return out

    def _first_active(self, agent: str, refs: Sequence[str]) -> str | None:
        for ref in refs:
            it = self.projection.item(agent, ref)
            if it is not None and it.status == "active":
                return ref
        return None

    def ref_for(self, agent_id: str, index: int) -> str | None:
        """The item an entry made, or, if it was a duplicate, the item it confirmed."""
        if self.projection.item(agent_id, f"{index}.0") is not None:
            return f"{index}.0"
        mark = {"source_type": "log", "source_ref": str(index)}
        for it in self.projection.items(agent_id, status=None):
            if mark in it.provenance and it.source_kind != "memory.superseded":
                return it.ref
        return None

    def erasure_plan(self, agent_id: str, index: int) -> ErasurePlan:
        """What erasing ``agent_id``'s entry ``index`` takes with it (see :meth:`erase`)."""
        leaf_bytes = self.ledger.store.leaf(index)
        if leaf_bytes is None or Leaf.from_bytes(leaf_bytes).envelope.agent != agent_id:
            raise RejectedEventError(f"entry {index} is not one of {agent_id}'s", check="memory.erase")
        self.follower.sync()
        return self.projection.erasure_plan(agent_id, index)
