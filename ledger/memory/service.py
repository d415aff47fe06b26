"""The memory application service: sessions, writes, distillation, compaction, recall.

This is the impure shell around the pure parts (schemas, gate, evolve, policy, distill,
recall): it reads the clock (or takes ``now_us``), signs agent events through the SDK,
signs policy decisions with the ledger's policy key, appends, and keeps the projection in
step with the log: in process every operation syncs past its own appends; while the
background follower runs (``engram serve``), writes answer on durability and a reader names
the entry it must see (``Engram-Min-Index``, :meth:`MemoryService.sync_through`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from engram.protocol.answers import EntryProof, ItemProof, ItemRow
from engram.protocol.erasure import ErasurePlan
from engram.protocol.errors import (
    ConflictError,
    EngramError,
    ForbiddenError,
    MalformedError,
    NotFoundError,
    RejectedEventError,
    StorageError,
    VerificationError,
)
from engram.protocol.kinds import NAMES_ITEM, kinds_where, validate_body
from engram.protocol.redact import count_redactions
from engram.protocol.schemas import CATEGORIES, MAX_QUERY_CHARS, parse_ref
from engram.protocol.scopes import GLOBAL, parse_scopes, scope_of
from engram.protocol.wire import Outcome
from ledger.log import Ledger, PolicyEvent, Prepared, Receipt, Submission
from ledger.memory.access import AccessLog, Use, query_key
from ledger.memory.distill import MAX_KNOWN, Distiller, RuleBasedDistiller, Turn, distill_stats, run_distiller
from ledger.memory.embed import Embedder
from ledger.memory.facts import asked_fact_keys, fact_of, time_intent
from ledger.memory.policy import (
    Decision,
    PolicyConfig,
    decide_caps,
    decide_replacements,
    decide_session_end,
    decide_sweep,
    decide_updates,
)
from ledger.memory.projection import Projection, SqlState
from ledger.memory.recall import (
    Recalled,
    RecallResult,
    block_overhead,
    day_of,
    envelope_matches,
    fuse_signals,
    heading_tokens,
    hot_within_budget,
    line_tokens,
    merge_pools,
    recalled_item,
    section_of,
    to_recalled,
)
from ledger.memory.report import DistillRow, distill_rows
from ledger.memory.state import RECORD, Item, Session
from ledger.memory.terms import content_terms
from ledger.memory.tokens import count_tokens
from ledger.memory.vectors import VectorIndex
from ledger.mesh import Mesh, MeshReader
from verifier.event import PER_ENTRY, Leaf
from verifier.jcs import canonical_bytes, parse_strict
from verifier.merkle import leaf_hash

__all__ = ["CloseResult", "MemoryService", "Submitted"]

_log = logging.getLogger("engram.memory")

MAX_RECALL_LIMIT = 100
#: How long a caller waits for the background follower's round before it applies the log
#: itself (MemoryService.sync): a few rounds under load; a stalled follower costs this once.
FOLLOWER_WAIT_S = 2.0
#: Candidates each signal brings per pool (full text, vectors, facets), at least 4 x limit.
CANDIDATES = 100


#: What the projection folds: the kinds whose arrival the memory rules follow.
FOLDED_KINDS = kinds_where(group="session") | kinds_where(group="memory") | kinds_where(group="record")
#: Agent-signed changes to HOT: the caps are held after each.
CAPPED_KINDS = frozenset({"memory.written", "memory.superseded"})
#: The kinds whose item is named by the entry alone (``<index>.0``: a record is never a
#: duplicate of another), so that their answer needs no projection (ledger.memory.state).
OWN_ITEM = kinds_where(group="record")


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseResult:
    closed: Receipt
    distilled: Receipt | None
    entries: int
    decisions: list[Receipt] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """What :meth:`MemoryService.submit` did with one agent-signed event: its receipt and
    parsed body, the item it made or confirmed (kinds of :data:`NAMES_ITEM`), and what a
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


class MemoryService:
    """Memory operations over one ledger: one door for agent-signed events (:meth:`accept`,
    :meth:`submit`), queries, and the policy operations it signs itself. Agents sign their
    events elsewhere (the client's ``AgentMemory``, over HTTP or in process); the service
    never holds an agent's key."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        config: PolicyConfig | None = None,
        distiller: Distiller | None = None,
        embedder: Embedder | None = None,
        access_log: str = "async",
        rand: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        """``embedder``: the semantic ranking's model (None: recall ranks without vectors).
        ``access_log``: ``"async"`` (uses are appended by a background writer, off the
        reader's path), ``"sync"`` (each recall appends its use before it returns) or
        ``"off"``. ``rand``: random bytes (the nonces of distilled entries)."""
        if access_log not in ("async", "sync", "off"):
            raise ValueError(f"access_log must be async, sync or off, not {access_log!r}")
        self.ledger = ledger
        self.config = config or PolicyConfig()
        self.distiller: Distiller = distiller or RuleBasedDistiller()
        self._rand = rand
        self.gate = ledger.gate  # one gate for the log and the memory service (ledger.compose)
        self.projection = Projection(ledger.store)
        self.vectors = None if embedder is None else VectorIndex(ledger.store.engine, embedder)
        self.access_mode = access_log
        self.access = AccessLog(
            lambda agent, bodies: self._append_policy_retrying(agent, "memory.accessed", *bodies),
            key=None if ledger.policy_key is None else query_key(ledger.policy_key),
        )
        #: Log indices of this service's own access records appended but not yet applied to
        #: the projection: recall does not queue behind the writer applying them (uses never
        #: change what recall returns).
        self._unapplied_uses: set[int] = set()
        self._uses_lock = threading.Lock()
        #: held while this process applies the log to the projection (see sync)
        self._projector = threading.Lock()
        #: held while this process embeds new items; never held with the projector
        self._embedding = threading.Lock()
        #: Set while :meth:`follow` runs: the door then answers on durability and leaves the
        #: projection and the HOT caps to the follower (issue 28, Deliver 2).
        self._following = False
        #: wakes the follower when the door appended something it folds
        self._wake = threading.Event()
        #: agents whose HOT changed since the follower last held their caps
        self._caps_due: set[str] = set()
        self._due_lock = threading.Lock()
        #: The follower's thread, and the size its last round applied, announced on
        #: ``_applied_cv``: while it runs, a caller that needs the projection at a size waits
        #: for a round instead of applying the log itself (issue 28, Deliver 5).
        self._follower: int | None = None
        self._follower_applied = 0
        self._applied_cv = threading.Condition()

    # -- consistency with the log ----------------------------------------------------

    def sync(self, min_size: int | None = None) -> int:
        """Bring the projection to at least ``min_size`` (default: the latest checkpoint),
        then embed what it added (an embedder failure never fails the caller).

        Concurrent callers of one process share the work (issue 14): one at a time holds
        the projector, and it applies everything committed so far, so the callers queued
        behind it (whose entries were committed before it read the log's size) find their
        entries applied and return after one read. One projection transaction per group of
        writes instead of one per write; across processes the cursor row is the lock.

        While the background follower runs (:meth:`follow`), a caller other than the
        follower waits for the follower's round to reach the size it needs (at most
        ``FOLLOWER_WAIT_S``; then it applies the log itself): a read under load then takes no
        projection write transaction, which would queue on the writer lock the appends hold
        (issue 28, Deliver 5), and the appends wait for no reader."""
        if self._following and threading.get_ident() != self._follower:
            applied = self._by_follower(min_size)
            if applied is not None:
                self._embed_pending()
                return applied
        with self._projector:
            applied = self.projection.sync()
            if min_size is not None and applied < min_size:
                applied = self.projection.sync(min_size)
        self._embed_pending()
        return applied

    def _by_follower(self, min_size: int | None) -> int | None:
        """The applied size once the projection holds ``min_size`` entries (default: the
        latest checkpoint), applied by the follower; None if it did not within
        ``FOLLOWER_WAIT_S`` or stopped."""
        target = self.ledger.store.latest_checkpoint().size if min_size is None else min_size
        applied = self.projection.applied_size()
        if applied >= target:
            return applied
        deadline = time.monotonic() + FOLLOWER_WAIT_S
        self._wake.set()
        with self._applied_cv:
            while self._follower_applied < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._following:
                    return None
                self._applied_cv.wait(left)
            return self._follower_applied

    def _applied(self, size: int) -> None:
        with self._applied_cv:
            self._follower_applied = max(self._follower_applied, size)
            self._applied_cv.notify_all()

    def _embed_pending(self) -> None:
        """Embed what the projection added, outside the projector lock (issue 25, finding 7:
        an embedder call inside it made every write and recall of the process wait on a slow
        endpoint). One thread embeds at a time; another finding it busy does not wait (recall
        ranks the few items not embedded yet without vectors, and says so)."""
        if self.vectors is None or not self._embedding.acquire(blocking=False):
            return
        try:
            self.vectors.embed_pending()
        finally:
            self._embedding.release()

    def follow(self, stop: threading.Event, interval_s: float = 0.5) -> None:
        """The service's background projector (issues 14 and 28) until ``stop`` is set.

        While it runs, the door answers a write as soon as its entry is durable in the log
        (:meth:`_accept`) and wakes it; each round applies everything committed since the
        last one in one projection transaction, then holds the HOT caps of the agents whose
        HOT the door changed. At start-up it catches up a lagging projection and holds every
        agent's caps once: a process that died between a write and its caps leaves nothing
        undone (the caps are a function of the log, decided again from it). A round
        otherwise wakes every ``interval_s`` (other processes' writes). A failing round is
        logged and retried; a reader that must see a write names it (``Engram-Min-Index``)
        and syncs through it itself, so no read depends on this thread's progress."""
        self._follower = threading.get_ident()
        self._following = True
        try:
            self._round(everyone=True)
            while not stop.is_set():
                self._wake.wait(interval_s)
                self._wake.clear()
                if not stop.is_set():
                    self._round()
        finally:
            self._following = False
            with self._applied_cv:
                self._applied_cv.notify_all()  # whoever waits for a round applies the log itself
            self._round()  # what was acknowledged while following gets its caps now
            self._follower = None

    def _round(self, *, everyone: bool = False) -> None:
        try:
            with self._projector:
                applied = self.projection.sync()
            self._applied(applied)  # the callers waiting for this round go on
            self._embed_pending()
            with self._due_lock:
                due, self._caps_due = self._caps_due, set()
            for agent in self.projection.agents() if everyone else sorted(due):
                self.hold_caps(agent)
        except Exception:  # the follower must never die; requests still sync themselves
            _log.exception("the projection follower's round failed")

    def sync_through(self, index: int | None) -> int:
        """Read-your-writes for a reader that names the last entry it must see (its own
        latest write): return at once if the projection already holds entry ``index``
        (the background follower usually has applied it), else apply up to it. With None,
        :meth:`sync` to the latest checkpoint. Returns the applied size."""
        if index is None:
            return self.sync()
        applied = self.projection.applied_size()
        if applied > index:
            return applied
        size = self.ledger.size()
        if index >= size:
            raise RejectedEventError(
                f"entry {index} is not in the log (its size is {size})", check="request.min_index"
            )
        return self.sync(index + 1)

    def _sync_for_recall(self) -> int:
        """:meth:`sync`, except when the only entries the projection lacks are this service's
        own access records, which the access writer is applying at that moment: then recall
        reads as of the applied size instead of waiting for the writer's transaction."""
        target = self.ledger.store.latest_checkpoint().size
        applied = self.projection.applied_size()
        if applied < target:
            with self._uses_lock:
                own = all(i in self._unapplied_uses for i in range(applied, target))
            if not own:
                return self.sync(target)
        self._embed_pending()
        return applied

    # -- queries (what the routes ask; issue 27, finding 5: they read the projection) --

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

    def flush_access(self) -> None:
        """Wait until every use recorded so far is in the log (see ledger.memory.access)."""
        self.access.flush()

    # -- the door ----------------------------------------------------------------------

    def accept(self, subs: Sequence[Submission | Prepared], *, operator: bool = False) -> list[Receipt]:
        """The one door for signed events (issue 27, finding 4): append ``subs`` atomically,
        then apply the memory rules after every write, whichever way the events came
        (``POST /v1/events``, the memory routes, the in-process transport):

        1. the projection is synced past them when it folds any (read-your-writes);
        2. after a ``memory.written`` or ``memory.superseded``, the agent's HOT caps hold
           (what no longer fits moves to WARM: policy-signed decisions);
        3. after a ``session.closed``, the session is distilled and the session-end rules
           apply (``compact_on_session_end``).

        While the background follower runs (:meth:`follow`, ``engram serve``), 1 and 2 are
        its work: the door answers once the entries are durable in the log, and a reader
        that must see them names the last one (``Engram-Min-Index``, :meth:`sync_through`).
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
        # (issue 40, finding 11: a close whose distillation failed was answered with a
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
        if self._following:
            # Answer on durability (issue 28, Deliver 2): the follower applies the entries
            # and holds the caps; a reader that must see them names them (Engram-Min-Index).
            with self._due_lock:
                self._caps_due.update(capped)
            self._wake.set()
        else:
            self.sync(max(r.index for r in folded) + 1)
            for agent in capped:
                self.hold_caps(agent)
        for p, r in zip(prepared, receipts, strict=True):
            if r.kind == "session.closed":  # the close's answer is its distillation
                closes[r.index] = self.after_close(r, r.agent, str(p.body["session"]))

    # -- sessions ----------------------------------------------------------------------

    def after_close(self, closed: Receipt, agent_id: str, session: str) -> CloseResult:
        """What follows an appended ``session.closed``: distill and compact (per config)."""
        self.sync(closed.index + 1)
        if not self.config.compact_on_session_end:
            return CloseResult(closed=closed, distilled=None, entries=0)
        distilled, entries, decisions = self.finish_session(agent_id, session)
        return CloseResult(closed=closed, distilled=distilled, entries=entries, decisions=decisions)

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
            if self._following:
                # The follower may not have taken the agent's pending decisions yet (a write
                # answers on durability): take them first, so the answer says what is current.
                self.hold_caps(agent)
            chains = self._chains_of(agent, body.get("refs") or ())
        [receipt], closes = self._accept([p], operator=operator)
        ref: str | None = None
        if receipt.kind in OWN_ITEM:
            ref = f"{receipt.index}.0"  # named by the entry: no projection needed
        elif receipt.kind in NAMES_ITEM:
            try:  # a duplicate confirms an older item: ask the projection
                self.sync_through(receipt.index)
                ref = self.ref_for(agent, receipt.index)
            except EngramError as e:  # committed: answered with its receipt, the item unnamed
                self.ledger.report_problem(
                    "memory.after_commit", f"the item of entry {receipt.index} could not be named: {e}"
                )
        current: tuple[tuple[str, str | None], ...] = ()
        if chains:
            try:  # committed: what became current is told when it can be read
                self.sync_through(receipt.index)
                current = tuple(
                    (erased, self._first_active(agent, older)) for erased, older in chains.items()
                )
            except EngramError as e:
                self.ledger.report_problem(
                    "memory.after_commit", f"what entry {receipt.index} made current could not be read: {e}"
                )
        return Submitted(
            receipt=receipt, body=body, ref=ref, close=closes.get(receipt.index), current=current
        )

    #: How far back an erasure's answer follows a replacement chain.
    MAX_CHAIN = 64

    def _chains_of(self, agent: str, refs: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``refs`` that is the current value of a fact that changed (active, and
        it replaced an older one): the older values, newest first (what may become current
        once it is erased; issue 40, finding 5)."""
        self.sync()
        out: dict[str, list[str]] = {}
        for ref in refs:
            it = self.projection.item(agent, ref)
            if it is None or it.status != "active" or not it.replaces:
                continue
            older: list[str] = []
            prev: str | None = it.replaces
            while prev is not None and prev not in older and prev != ref and len(older) < self.MAX_CHAIN:
                older.append(prev)
                p = self.projection.item(agent, prev)
                prev = None if p is None else p.replaces
            out[ref] = older
        return out

    def _first_active(self, agent: str, refs: Sequence[str]) -> str | None:
        for ref in refs:
            it = self.projection.item(agent, ref)
            if it is not None and it.status == "active":
                return ref
        return None

    def finish_session(self, agent_id: str, session: str) -> tuple[Receipt | None, int, list[Receipt]]:
        """Distill a closed session (unless done) and apply the session-end rules."""
        self.flush_access()
        s = self.projection.session(agent_id, session)
        if s is None or s.status != "closed":
            raise RejectedEventError(f"session {session} of {agent_id} is not closed", check="memory.session")
        distilled, entries = (None, 0) if s.distilled else self.distill(agent_id, session)

        def decide(state: SqlState) -> list[Decision]:
            filed = decide_session_end(state, agent_id, session, self.config, self.ledger.clock())
            found = state.changed_facts(agent_id)
            return [
                *filed,
                *decide_replacements(state, found, leaf_hash=self._leaf_hash, moving=_moves(filed)),
            ]

        decisions = self._decide_and_append(agent_id, decide)
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
        # Per-entry form (issue 40): each entry gets its own random nonce and the body's
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
        budget = self.ledger.max_body_bytes - len(canonical_bytes(body)) - 256  # 256: the stats
        updates: dict[int, str] = {}  # entry position -> the known fact it states a new value of
        for e in proposed:
            try:
                text, _ = self.gate.prepare(e["content"])
                entry = {k: v for k, v in e.items() if k not in ("updates", "nonce")} | {
                    "content": text,
                    "nonce": self._rand(16).hex(),
                }
                validate_body("memory.distilled", {**body, "entries": [entry]})
                self.gate.check_not_verbatim(text, [t.content for t in turns])
            except RejectedEventError:
                continue  # a poisoned, malformed or copied entry adds nothing: drop it
            cost = len(canonical_bytes(entry)) + 1
            if cost > budget:
                break
            budget -= cost
            if isinstance(e.get("updates"), str):
                updates[len(body["entries"])] = e["updates"]
            body["entries"].append(entry)
        body["stats"] = distill_stats(turns, body["entries"], latency_us, usage)
        receipt = self._append_distillation(agent_id, session, body)
        if receipt is not None and updates:
            self._append_updates(agent_id, receipt.index, body["entries"], updates)
        return receipt, 0 if receipt is None else len(body["entries"])

    def _append_updates(
        self, agent_id: str, index: int, entries: Sequence[Mapping[str, Any]], updates: Mapping[int, str]
    ) -> list[Receipt]:
        """The distiller said these entries state new values of known facts: policy-signed
        ``memory.replaced`` entries (rule ``distiller_update``) link each to the fact it
        replaces, where the replacement rules allow it (ledger.memory.policy.decide_updates:
        the owner's own word; never a COLD or decay-exempt memory; a HOT one only by its own
        speaker). Replayed only if both are still active memories then."""
        pairs = [(old_ref, f"{index}.{n}") for n, old_ref in sorted(updates.items()) if n < len(entries)]
        return self._decide_and_append(
            agent_id, lambda state: decide_updates(state, agent_id, pairs, leaf_hash=self._leaf_hash)
        )

    def _leaf_hash(self, index: int) -> str:
        """The leaf hash (hex) of entry ``index``, as the log's tree holds it."""
        raw = self.ledger.store.leaf(index)
        if raw is None:
            raise StorageError(f"entry {index} is not in the log")
        return leaf_hash(raw).hex()

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
                self.sync(head.index + 1)
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
            self.sync(receipt.index + 1)
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
        self.sync()
        agents = [agent_id] if agent_id is not None else self.projection.agents()
        rows: list[DistillRow] = []
        for a in agents:
            rows += distill_rows(a, self.ledger.stream_bodies(a, "memory.distilled"))
        return rows

    # -- memories ----------------------------------------------------------------------

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
                    state, state.changed_facts(agent_id), leaf_hash=self._leaf_hash, moving=_moves(capped)
                ),
            ]

        return self._decide_and_append(agent_id, decide)

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
        self.sync()
        return self.projection.erasure_plan(agent_id, index)

    # -- policy ----------------------------------------------------------------------

    def _decide_and_append(self, agent_id: str, decide: Any, attempts: int = 8) -> list[Receipt]:
        """Decide on a synced projection and append with expected stream heads; on a
        conflict (a concurrent decision moved a stream), re-sync and decide again."""
        for attempt in range(attempts):
            applied = self.sync()
            with self.projection.engine.connect() as conn:
                decisions: list[Decision] = decide(SqlState(conn))
            if not decisions:
                return []
            expect: dict[str, int | None] = {}
            for kind in {d.kind for d in decisions}:
                head = self.ledger.stream_head(agent_id, kind)
                if head is not None and head.index >= applied:
                    break  # the projection is behind this stream: sync and decide again
                expect[kind] = None if head is None else head.index
            else:
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
                self.sync(receipts[-1].index + 1)
                return receipts
        raise ConflictError(
            f"policy decisions for {agent_id} kept conflicting",
            agent=agent_id,
            kind="memory.*",
            head_version=None,
            head_leaf_hash=None,
        )

    def plan(self, agent_id: str, now_us: int) -> list[Decision]:
        """The decisions a sweep at ``now_us`` would take (nothing is appended)."""
        self.flush_access()
        self.sync()
        with self.projection.engine.connect() as conn:
            return decide_sweep(SqlState(conn), self.projection.items(agent_id), now_us, self.config)

    def compact(self, agent_id: str) -> list[Receipt]:
        """Apply the time-based rules (inactive preferences, WARM->COLD, decay) now.

        "Now" is the ledger's clock, the same clock that stamps the entries: a decision
        whose window has not ended by its entry's server time has no effect on replay.
        """
        self.flush_access()
        return self._decide_and_append(
            agent_id,
            lambda state: decide_sweep(
                state, self.projection.items(agent_id), self.ledger.clock(), self.config
            ),
        )

    # -- recall ------------------------------------------------------------------------

    def recall(
        self,
        agent_id: str,
        query: str,
        *,
        include_cold: bool = False,
        include_archived: bool = False,
        budget_tokens: int | None = None,
        session: str | None = None,
        now_us: int | None = None,
        limit: int = 10,
        record_access: bool = True,
        sources: str = "all",
        scopes: Sequence[str] | None = None,
        min_index: int | None = None,
        meshes: Sequence[str] | None = None,
    ) -> RecallResult:
        """HOT (the session's frozen snapshot inside a session), then up to ``limit`` memories
        and raw records ranked for ``query`` within ``budget_tokens`` (ledger.memory.recall).

        ``sources``: ``"all"`` (memories and records in one ranking), ``"memories"`` (distilled
        memories only) or ``"records"`` (logged turns only), e.g. to compare what distillation
        keeps with what was said.

        ``scopes`` (engram.protocol.scopes): keep only memories of these scopes (``global``,
        ``project:<name>``, ``user:<name>``), HOT included; None searches every scope.

        ``min_index``: recall as soon as the projection holds this entry (:meth:`sync_through`)
        instead of bringing it to the latest checkpoint first.

        ``meshes`` (issue 30, ledger.mesh): the Memory Meshes whose shared memories join the
        ranking, each labelled with its author and mesh (None: every mesh the agent is an
        active member of; empty: none). Only WARM memories of the categories the author
        shares and this agent reads flow; HOT stays private."""
        try:
            wanted = parse_scopes(scopes)
        except MalformedError as e:
            raise RejectedEventError(str(e), check="request.scopes") from e
        if sources not in ("all", "memories", "records"):
            raise RejectedEventError("sources must be all, memories or records", check="request.sources")
        if len(query) > MAX_QUERY_CHARS:
            raise RejectedEventError(
                f"a recall query is at most {MAX_QUERY_CHARS} characters", check="request.query"
            )
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise RejectedEventError(f"limit must be 1-{MAX_RECALL_LIMIT}", check="request.limit")
        applied = self._sync_for_recall() if min_index is None else self.sync_through(min_index)
        now = self.ledger.clock() if now_us is None else now_us
        budget = self.config.hot_max_tokens * 2 if budget_tokens is None else budget_tokens
        snap = self.projection.session(agent_id, session) if session else None
        if session and snap is None:
            raise RejectedEventError(f"no session {session} for {agent_id}", check="memory.session")
        hot_items = self.projection.items(agent_id, tiers=["HOT"])
        if snap is not None:
            hot_src = [
                to_recalled(
                    h["index"],
                    h["ref"],
                    "HOT",
                    h["category"],
                    h["content"],
                    h["tags"],
                    0,
                    h["created_us"],
                    snap.opened_us,
                    0.0,
                )
                for h in snap.hot_snapshot
            ]
        else:
            hot_src = [recalled_item(i, now, 0.0) for i in hot_items]
        if wanted is not None:
            hot_src = [h for h in hot_src if scope_of(h.tags) in wanted]
        notes: list[str] = []
        ranked_items = self._rank(agent_id, query, include_cold, include_archived, limit, notes, sources)
        mesh_of: dict[tuple[str, str], str] = {}  # (author, ref) -> the mesh that shared it
        if sources != "records" and (meshes is None or meshes):
            shared = self._shared(agent_id, query, applied, meshes, limit, notes, mesh_of)
            if shared:
                ranked_items = sorted(
                    [*ranked_items, *shared],
                    key=lambda cs: (-cs[1], -cs[0].created_us, cs[0].agent, cs[0].ref),
                )
        # Every line of the block counts against the budget (issue 29, finding 3): the frame
        # with its notes and this size, each entry, and each section's heading.
        hot, used = hot_within_budget(
            hot_src,
            min(budget, self.config.hot_max_tokens),
            self.config.hot_max_items,
            overhead=block_overhead(agent_id, self.ledger.origin, size=applied, notes=notes),
        )
        if wanted is not None:
            ranked_items = [
                (it, score)
                for it, score in ranked_items
                if (GLOBAL if it.tier == RECORD else scope_of(it.tags)) in wanted
            ]
        ranked: list[Recalled] = []
        total = used
        opened: set[str] = set()
        for it, score in ranked_items:
            r = recalled_item(it, now, score)
            heading = section_of(r, query)
            if heading is None:
                continue  # not shown in the block
            if it.agent != agent_id:  # another agent's memory, shared through a mesh
                r = dataclasses.replace(r, author=it.agent, mesh=mesh_of.get((it.agent, it.ref)))
            if r.replaces:  # a current value says what it replaced, on its line
                [r] = self._with_earlier(it.agent, [r])
            cost = line_tokens(r) + (0 if heading in opened else heading_tokens(heading))
            if len(ranked) >= limit:
                break
            if total + cost > budget:
                continue  # a long item does not crowd out shorter ones that still fit
            ranked.append(r)
            opened.add(heading)
            total += cost
        result = RecallResult(
            agent=agent_id,
            origin=self.ledger.origin,
            query=query,
            as_of_size=applied,
            session=session,
            hot=tuple(hot),
            ranked=tuple(ranked),
            hot_tokens=used,
            total_tokens=total,
            notes=tuple(notes),
        )
        # The lines were counted one by one; the block is held to the budget as the encoder
        # counts it whole (a token may span a line break): the lowest-ranked entries go first.
        while result.ranked and count_tokens(result.render()) > budget:
            result = dataclasses.replace(result, ranked=result.ranked[:-1])
        if result.ranked != tuple(ranked):
            result = dataclasses.replace(result, total_tokens=count_tokens(result.render()))
        if record_access and self.access_mode != "off":
            refs = [
                *self._used_hot(agent_id, query, hot, hot_items),
                *(r.ref for r in result.ranked if not r.is_record and r.author is None),
            ]
            if refs:
                use = Use(agent=agent_id, refs=tuple(refs[:100]), query=query, session=session)
                if self.access_mode == "sync":
                    self.access.record(use)
                    self.access.flush()
                else:
                    self.access.record(use)
        return result

    def _rank(
        self,
        agent_id: str,
        query: str,
        include_cold: bool,
        include_archived: bool,
        limit: int,
        notes: list[str],
        sources: str = "all",
    ) -> list[tuple[Item, float]]:
        """Memories and records for ``query``, best first (ledger.memory.recall's fusion over
        candidates each signal brings from the database or the vector index)."""
        tiers = ["WARM", "COLD"] if include_cold else ["WARM"]
        intent = time_intent(query)
        # Past values (replaced by a newer memory) are candidates only for questions about
        # the past; the current value is the default (issue 29).
        statuses = ["active", "archived", *(["superseded"] if intent.mode == "then" else [])]
        if not query.strip():
            return [
                (it, 1 / (60 + r))
                for r, it in enumerate(
                    self.projection.newest(agent_id, tiers=tiers, statuses=["active"], limit=limit), start=1
                )
            ]
        n = max(CANDIDATES, 4 * limit)
        words = content_terms(query)
        categories = [c for c in CATEGORIES if c.casefold() in words or c.casefold() + "s" in words]
        mem_similar: list[tuple[Item, float]] = []
        rec_similar: list[tuple[Item, float]] = []
        if self.vectors is not None:
            try:
                mem_hits, rec_hits = self.vectors.search(agent_id, query, n)
            except EngramError as e:
                notes.append(f"semantic ranking unavailable ({e}); ranked by words and facets only")
            else:
                mems = self.projection.items_by_refs(
                    agent_id, [h.ref for h in mem_hits], tiers=tiers, statuses=statuses
                )
                recs = self.projection.items_by_refs(
                    agent_id, [h.ref for h in rec_hits], tiers=[RECORD], statuses=["active"]
                )
                mem_similar = [(mems[h.ref], h.similarity) for h in mem_hits if h.ref in mems]
                rec_similar = [(recs[h.ref], h.similarity) for h in rec_hits if h.ref in recs]
            if self.vectors.last_error is not None:
                notes.append(f"some items are not embedded yet ({self.vectors.last_error})")
        fact_tiers = ["HOT", *tiers]  # the value of a fact the query asks about, wherever it is
        memories = fuse_signals(
            query,
            fulltext=_past_values_only(
                self.projection.search_fulltext(agent_id, query, tiers=tiers, statuses=statuses, limit=n)
            ),
            similar=_past_values_only(mem_similar),
            facets=_past_values_only(
                self.projection.search_facets(
                    agent_id, categories=categories, words=words, tiers=tiers, statuses=statuses, limit=n
                )
            ),
            facts=_past_values_only(
                self.projection.search_facts(
                    agent_id, asked_fact_keys(query), tiers=fact_tiers, statuses=statuses, limit=n
                )
            ),
            intent=intent,
        )
        records = fuse_signals(
            query,
            fulltext=self.projection.search_fulltext(
                agent_id, query, tiers=[RECORD], statuses=["active"], limit=n
            ),
            similar=rec_similar,
            facets=self.projection.search_facets(
                agent_id, categories=[], words=words, tiers=[RECORD], statuses=["active"], limit=n
            ),
        )
        if sources == "memories":
            records = []
        elif sources == "records":
            memories = []
        return merge_pools(memories, records, include_archived=include_archived)

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

        index, _ = parse_ref(ref)
        refused = RejectedEventError(
            f"memory {ref} is not shared with {reader} through {mesh}", check="mesh.not_shared"
        )
        size = self.sync()
        raw = self.ledger.store.leaf(index) if index < size else None
        if raw is None:
            raise refused
        author = Leaf.from_bytes(raw).envelope.agent
        it = self.projection.item(author, ref)
        # The projection first (it knows what the proof's fold cannot: a duplicate folded
        # into another memory, a replacement's other side), then the mesh.
        if it is None or it.status != "active" or it.tier != "WARM" or it.index != index:
            raise refused
        share = next(
            (
                sh
                for sh in MeshReader(self.ledger.store).shares_for(reader, size, [mesh])
                if sh.author == author
            ),
            None,
        )
        since = None if share is None else share.since.get(it.category)
        if since is None or since > index:
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

    def meshes_of(self, agent_id: str) -> list[Mesh]:
        """The Memory Meshes ``agent_id`` is an active member of, folded from the log."""
        return MeshReader(self.ledger.store).meshes_of(agent_id, self.ledger.size())

    def _shared(
        self,
        agent_id: str,
        query: str,
        applied: int,
        meshes: Sequence[str] | None,
        limit: int,
        notes: list[str],
        mesh_of: dict[tuple[str, str], str],
    ) -> list[tuple[Item, float]]:
        """The memories ``agent_id``'s meshes share with it for ``query``: each author's own
        ranking, kept to the WARM memories of the categories it shares and this agent reads,
        from the index each category began flowing (ledger.mesh)."""
        out: list[tuple[Item, float]] = []
        for share in MeshReader(self.ledger.store).shares_for(agent_id, applied, meshes):
            for it, score in self._rank(share.author, query, False, False, limit, notes, "memories"):
                since = share.since.get(it.category)
                if (it.agent, it.ref) in mesh_of:
                    continue  # shared through two meshes: once
                if it.tier == "WARM" and it.status == "active" and since is not None and it.index >= since:
                    mesh_of.setdefault((it.agent, it.ref), share.mesh)
                    out.append((it, score))
        return out

    def _with_earlier(self, agent_id: str, ranked: Sequence[Recalled]) -> list[Recalled]:
        """Each current value that replaced another says what that was ("earlier: nurse,
        until 2024-03-05"): one lookup by primary key for the ranked rows that replaced one."""
        olds = self.projection.items_by_refs(
            agent_id,
            [r.replaces for r in ranked if r.replaces],
            tiers=["HOT", "WARM", "COLD"],
            statuses=["superseded"],
        )
        out = []
        for r in ranked:
            old = olds.get(r.replaces or "")
            if old is not None and old.replaced_by == r.ref:
                fact = fact_of(old.content)
                what = fact.value if fact is not None else old.content[:80]
                until = old.valid_until_us or r.valid_from_us
                r = dataclasses.replace(r, earlier=f"{what}, until {day_of(until)} (ref {old.ref})")
            out.append(r)
        return out

    def _used_hot(
        self, agent_id: str, query: str, hot: Sequence[Recalled], hot_items: Sequence[Item]
    ) -> list[str]:
        """HOT is injected, not searched: a HOT item counts as used only when the query is
        about it (envelope or full-text match), else idle preferences would never age."""
        if not query.strip() or not hot:
            return []
        hits = set(self.projection.fulltext(agent_id, query, ["HOT"], limit=200))
        by_ref = {i.ref: i for i in hot_items}
        return [
            r.ref
            for r in hot
            if r.ref in hits or (r.ref in by_ref and envelope_matches(by_ref[r.ref], query) > 0)
        ]

    def _append_policy_retrying(self, agent_id: str, kind: str, *bodies: Mapping[str, Any]) -> Receipt:
        """Append policy entries of one stream in one batch, retrying stream conflicts; the
        projection is synced past them. Returns the last receipt."""
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
                self.sync(receipts[-1].index + 1)
                return receipts[-1]
            own = {r.index for r in receipts}
            with self._uses_lock:
                self._unapplied_uses |= own
            try:
                self.sync(receipts[-1].index + 1)
            finally:
                with self._uses_lock:
                    self._unapplied_uses -= own
            return receipts[-1]
        raise AssertionError("unreachable")  # pragma: no cover

    # -- rebuild -------------------------------------------------------------------------

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> tuple[int, str]:
        """Drop the projection (and its vectors) and replay the whole log, then re-embed
        (``progress(done, total)`` as it goes: entries read and replayed, then embedded);
        return (size, digest)."""
        self.flush_access()
        self.projection.rebuild(progress)
        if self.vectors is not None:
            self.vectors.embed_pending(progress)
        return self.projection.digest()

    def digest(self) -> tuple[int, str]:
        self.flush_access()
        self.sync()
        return self.projection.digest()


def _moves(decisions: Sequence[Decision]) -> dict[str, str]:
    """Item -> the tier these decisions move it to."""
    return {str(d.body["item"]): str(d.body["to"]) for d in decisions if d.kind == "memory.tier_changed"}


_T = TypeVar("_T", Item, tuple[Item, float])


def _past_values_only(found: Sequence[_T]) -> list[_T]:
    """Superseded candidates that are past values (a ``memory.replaced`` named a newer one);
    corrections and confirmed duplicates are never recalled."""
    out = []
    for x in found:
        it = x[0] if isinstance(x, tuple) else x
        if it.status != "superseded" or it.valid_until_us is not None:
            out.append(x)
    return out
