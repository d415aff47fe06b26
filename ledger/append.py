"""The log's append pipeline: serialize, assign index and timestamp, store, prove.

The only impure piece of the log core. Its steps for a batch of signed events
(specs/leaf.md §3), all-or-nothing:

1. Stateless checks, before any lock (the prepare edge, :mod:`ledger.edge`): the envelope is
   canonical JCS and well-formed, names this log's origin and a registered kind; the body is
   a canonical JSON object within the size limit whose salted commitment matches;
   ledger-reserved agent ids are refused.
2. Under the log's writer lock (ledger.storage.store): the signing key is the one valid for
   the agent at this index (verifier.keys.authorize) and the agent signature verifies over
   the exact signed bytes; only then the stream's ``version`` must be the head's + 1 and
   ``prev`` the head's leaf hash, else a :class:`ConflictError` carrying the current head.
   The stored Merkle state must reproduce the last signed checkpoint's root before anything
   is signed (a process that itself committed the tree at this size extends its in-memory
   frontier instead of re-reading it: the log only grows, so that tree is the tree of this
   size).
3. The server assigns the index (the log size) and a timestamp strictly greater than the
   previous one, builds the leaf (bounded by ``max_leaf_bytes``), extends the Merkle
   frontier, signs a checkpoint of the new size and commits everything in one transaction.
4. Receipts carry an inclusion proof to that checkpoint, verified with :mod:`verifier`
   before they are returned; the proof material comes from the batch itself and the
   process's cache of committed nodes (ledger.storage.store.ProofCache), not a new read.

Any failure raises a typed error and writes nothing.

The commit hook (:attr:`Appender.on_commit_tx`): what the composition root hands the log to
write in the append's own transaction once the batch's rows are written (the memory service
applies its projection there, ledger.memory.in_pass). The log never imports what it runs. It
runs inside a SAVEPOINT: a hook that raises is rolled back to it, logged, and the append
still commits (what the hook writes is derived from the log and is written again later);
a savepoint that cannot be rolled back fails the append (the transaction is unusable, so
nothing is acknowledged). Its announcement runs only once the transaction committed.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import (
    ConfigError,
    ConflictError,
    LimitExceededError,
    LogIntegrityError,
    MalformedError,
    PrevMismatchError,
    VersionConflictError,
    VersionGapError,
)
from engram.protocol.keyfiles import LogKey
from engram.protocol.kinds import require_kind, validate_body
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import InclusionProof, Receipt, Submission
from ledger.edge import AppendRules, Clock, PolicyEvent, PrepareEdge
from ledger.envelopes import Prepared
from ledger.groupcommit import GroupCommit, SingleAppends
from ledger.reader import inclusion_proofs
from ledger.signed_head import ForkRefusedError, SignedHead, SignedHeadRecord
from ledger.storage.store import SqlStore, StoredCheckpoint, StreamHead, WriteTx, cross_check_keys
from ledger.witness import WitnessSubmitter
from verifier.errors import VerificationError
from verifier.event import POLICY_AGENT, Envelope, Leaf, agent_key_id, verify_event_signature
from verifier.keys import KeyChange, KeyRecord, authorize
from verifier.merkle import (
    CompactRange,
    consistency_ranges,
    inclusion_ranges,
    leaf_hash,
    range_hash,
    range_nodes,
    verify_consistency,
    verify_inclusion,
)
from verifier.note import VerifierKey, checkpoint_text, sign_note, verify_checkpoint

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["Appender", "CommitHook", "CommittedBatch"]

_log = logging.getLogger("engram.log")


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedBatch:
    """What one append transaction wrote, as the commit hook sees it (built from the batch in
    memory, nothing read back): its leaves in index order, the body bytes stored for each
    (same positions), and the indices whose stored bodies the batch deleted (erasures)."""

    leaves: tuple[Leaf, ...]
    bodies: tuple[bytes, ...]
    erased: frozenset[int]

    @property
    def start(self) -> int:
        """The first index the batch wrote (the log's size before it)."""
        return self.leaves[0].index

    @property
    def end(self) -> int:
        """The log's size after the batch."""
        return self.leaves[-1].index + 1


#: ``hook(connection, batch)`` runs in the append's transaction after the batch's rows are
#: written (inside a SAVEPOINT); it may return an announcement, called once the transaction
#: committed (never if it rolled back).
CommitHook = Callable[["Connection", CommittedBatch], Callable[[], None] | None]


@dataclass(slots=True)
class _BatchKeys:
    """Key state seen by the entries of one batch: what the database held when the batch
    took the lock (preloaded for every key id and agent the batch names, and the agents'
    active keys), plus the changes of the batch's earlier entries, in order."""

    keys: dict[str, KeyRecord]
    active: dict[str, str | None]
    added: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)

    def key(self, key_id: str) -> KeyRecord | None:
        return self.keys.get(key_id)

    def active_key(self, agent: str) -> str | None:
        if agent not in self.active:  # pragma: no cover - every named agent is preloaded
            raise KeyError(agent)
        return self.active[agent]

    def apply(self, change: KeyChange | None, index: int) -> None:
        if change is None:
            return
        if change.retire_key_id is not None:
            old = self.keys[change.retire_key_id]
            self.keys[old.key_id] = KeyRecord(
                key_id=old.key_id,
                agent=old.agent,
                public_key=old.public_key,
                added_at=old.added_at,
                retired_at=index,
                retired_how=change.retire_how,
            )
            self.active[change.agent] = None
            self.changed.add(old.key_id)
        if change.add is not None:
            self.keys[change.add.key_id] = change.add
            self.active[change.add.agent] = change.add.key_id
            self.added.add(change.add.key_id)

    def final_writes(self) -> tuple[list[KeyRecord], list[KeyRecord]]:
        """(keys to insert with their final state, pre-existing keys retired in this batch).

        Writing final states, not changes in arrival order, is what makes "add then retire
        within one batch" store a retired key."""
        inserts = [self.keys[k] for k in sorted(self.added)]
        retirements = [self.keys[k] for k in sorted(self.changed - self.added)]
        return inserts, retirements


@dataclass(slots=True)
class _Batch:
    """One batch under the writer lock: the tree and clock it extends, the keys and stream
    heads it sees, and the rows it will write."""

    size: int
    last_ts: int
    border: CompactRange
    start_nodes: list[tuple[tuple[int, int], bytes]]
    keys: _BatchKeys
    db_heads: dict[tuple[str, str], StreamHead]
    heads: dict[tuple[str, str], StreamHead] = field(default_factory=dict)
    leaf_rows: list[dict[str, Any]] = field(default_factory=list)
    body_rows: list[dict[str, Any]] = field(default_factory=list)
    node_rows: list[dict[str, Any]] = field(default_factory=list)
    built: list[Leaf] = field(default_factory=list)
    erased_bodies: list[int] = field(default_factory=list)
    start_size: int = 0  # the size the batch extends: the previous checkpoint's
    #: the signer's record as the batch found it (checked: the tree extends it)
    record_seen: SignedHead | None = None


def _frontier_hashes(tx: WriteTx, size: int) -> list[bytes]:
    if size == 0:
        return []
    coords = range_nodes(0, size)
    got = tx.nodes(coords)
    return [got[c] for c in coords]


def _check_stream(env: Envelope, head: StreamHead | None) -> None:
    head_version = None if head is None else head.version
    head_hash = None if head is None else head.leaf_hash.hex()
    expected = 0 if head is None else head.version + 1
    error: type[ConflictError] | None = None
    if env.version < expected:
        error, why = VersionConflictError, f"already has version {env.version}; next is {expected}"
    elif env.version > expected:
        error, why = VersionGapError, f"version {env.version} skips ahead; next is {expected}"
    elif head is not None and env.prev != head_hash:
        error, why = PrevMismatchError, f"prev {env.prev} is not the head {head_hash}"
    if error is not None:
        raise error(
            f"stream {env.agent}/{env.kind} {why}",
            agent=env.agent,
            kind=env.kind,
            head_version=head_version,
            head_leaf_hash=head_hash,
        )


def _receipts(
    store: SqlStore, log_key: VerifierKey, batch: _Batch, note: bytes, root: bytes
) -> list[Receipt]:
    """Committed: acknowledge with proofs checked by the trusted core.

    The proofs are made from the batch's own nodes (the border of the tree it extended,
    read in its transaction, and every node its leaves completed), not read back: once the
    commit returned, a failing read must not turn written entries into an error their
    callers would retry. A node not among them (the path of a new
    leaf needs none) is read from the store."""
    size = batch.size
    verify_checkpoint(note, log_key)
    known = dict(batch.start_nodes)
    known.update(((r["level"], r["idx"]), r["hash"]) for r in batch.node_rows)
    proofs = []
    for lf in batch.built:
        try:
            hashes = tuple(
                range_hash([known[c] for c in range_nodes(lo, hi)])
                for lo, hi in inclusion_ranges(lf.index, size)
            )
            proofs.append(
                InclusionProof(
                    index=lf.index,
                    size=size,
                    leaf_hash=known[(0, lf.index)],
                    root=root,
                    hashes=hashes,
                    checkpoint=note,
                )
            )
        except KeyError:  # pragma: no cover - see the docstring
            proofs.extend(inclusion_proofs(store, [lf.index], size))
    receipts = []
    for lf, proof in zip(batch.built, proofs, strict=True):
        verify_inclusion(leaf_hash=proof.leaf_hash, index=lf.index, size=size, proof=proof.hashes, root=root)
        receipts.append(
            Receipt(
                index=lf.index,
                timestamp_us=lf.timestamp_us,
                leaf_hash=proof.leaf_hash,
                leaf=lf.raw,
                agent=lf.envelope.agent,
                kind=lf.envelope.kind,
                version=lf.envelope.version,
                checkpoint=note,
                proof=proof,
            )
        )
    return receipts


class Appender(PrepareEdge):
    """The write side of one log: its prepare edge, its signing key, its limits, its clock,
    the frontier of the tree this process last committed and the signer's own record."""

    def __init__(
        self,
        store: SqlStore,
        log_key: LogKey,
        *,
        clock: Clock,
        max_leaf_bytes: int,
        max_body_bytes: int,
        policy_key: Ed25519PrivateKey | None,
        rules: AppendRules,
        signed_head: Path | None,
    ) -> None:
        PrepareEdge.__init__(self, store, log_key.name, max_body_bytes=max_body_bytes, rules=rules)
        self.log_key = log_key
        self.verifier_key = VerifierKey.parse(log_key.vkey)
        self.clock = clock
        self.max_leaf_bytes = max_leaf_bytes
        self.policy_key = policy_key
        #: (size, border hashes) of the tree this process last committed (see _open_batch)
        self._frontier: tuple[int, list[bytes], int] | None = None
        #: the signer's own record of the last checkpoint it signed (ledger.signed_head)
        self.signed_head = None if signed_head is None else SignedHeadRecord(signed_head, log_key.name)
        #: concurrent single appends of this process share one transaction (ledger.groupcommit)
        self.group_commit: GroupCommit | None = GroupCommit(self.append_batch, record=self.record_signed)
        #: ENGRAM_SEQUENCER=host: the host's sequencer in front of the group commit
        #: (ledger.sequencer); None: this process's group commit alone
        self.sequencer: SingleAppends | None = None
        #: Witnesses this log submits its checkpoints to (``ENGRAM_WITNESS_POLICY``), or None.
        self.witnesses: WitnessSubmitter | None = None
        #: operational problems reported after commits (:meth:`report_problem`)
        self._problems: dict[str, str] = {}
        #: Written in each append's transaction after its rows (module docstring); set by the
        #: composition root (the memory service: ledger.memory.in_pass), never by the log.
        self.on_commit_tx: CommitHook | None = None

    def append(
        self,
        submissions: Sequence[Submission | Prepared | PolicyEvent],
        *,
        operator: bool = False,
        system: bool = False,
    ) -> list[Receipt]:
        """Append a batch of signed events atomically; return verified receipts.

        The steps (module docstring; specs/leaf.md §3), one method each:

        1. :meth:`_check_batch`: bounds, then every event's stateless checks, before any lock.
        2. :meth:`_validate`: the composition root's validators (memory preconditions).
        3. Under the writer lock, :meth:`_open_batch`: the stored tree must reproduce the last
           signed root; load the keys and stream heads the batch names.
        4. :meth:`_integrate`, per event: authorize the key and verify the signature, check
           the stream's version and ``prev``, assign index and timestamp, build the leaf.
        5. :meth:`_commit`: sign the new checkpoint and write everything in one transaction.
        6. :func:`_receipts`: inclusion proofs to that checkpoint, checked by the verifier.

        Args:
            submissions: the signed events, in the order they are to be appended.
            operator: the caller is the operator (allows ``key.registered``).
            system: the caller is the ledger itself (allows reserved ``engram.*`` agents).

        A single signed event goes through the process's group commit
        (:mod:`ledger.groupcommit`): concurrent callers share one transaction, checkpoint and
        fsync, each with its own receipt or error; with ``ENGRAM_SEQUENCER=host``, through the
        host's sequencer (:mod:`ledger.sequencer`), whose group commit takes every process's.

        Raises:
            VerificationError subclasses: bad input (nothing written).
            ConflictError subclasses: a stream's head moved; carries the current head.
            StorageError: the database failed (nothing acknowledged).
        """
        single = self.sequencer or self.group_commit
        if len(submissions) == 1 and isinstance(submissions[0], Submission | Prepared) and single is not None:
            one = submissions[0]
            if isinstance(one, Submission):
                # The stateless checks in the caller's thread, before it queues: a leader
                # appends what is already checked, and callers check their own events
                # while a batch commits (a bad event is refused here, alone, as before).
                one = self.prepare(one, operator=operator, system=system)
            return [single.append(one, operator=operator, system=system)]
        return self.append_batch(submissions, operator=operator, system=system)

    def append_batch(
        self,
        submissions: Sequence[Submission | Prepared | PolicyEvent],
        *,
        operator: bool = False,
        system: bool = False,
        record: bool = True,
    ) -> list[Receipt]:
        """:meth:`append` of exactly this batch, now (what :mod:`ledger.groupcommit` calls).
        ``record=False``: the caller records the signed checkpoint itself
        (:meth:`record_signed`) before it acknowledges the receipts (the group commit does,
        after giving up the leadership, so the next batch commits meanwhile)."""
        pending = self._check_batch(submissions, operator=operator, system=system)  # 1
        self._validate(pending)  # 2
        with self.store.write() as tx:
            batch = self._open_batch(tx, pending)  # 3
            for item in pending:
                self._integrate(batch, item)  # 4
            note, root = self._commit(tx, batch)  # 5
            announce = self._run_commit_hook(tx, batch)
        # Committed (the transaction's exit returned): only now may the new frontier and
        # the batch's nodes stand for the log's state in this process.
        self._frontier = (batch.size, [h for _, _, h in batch.border.nodes], batch.last_ts)
        if announce is not None:
            try:
                announce()
            except Exception:  # committed: the receipts are answered whatever it did
                _log.exception("the commit hook's announcement after entry %d failed", batch.size - 1)
        self.store.key_streams.appended(batch.built)
        if record:
            self.record_signed(batch.size, root)
        self.store.cache.committed(
            batch.node_rows,
            StoredCheckpoint(size=batch.size, root=root, note=note, signed_at_us=batch.last_ts),
            batch.start_nodes,
        )
        return _receipts(self.store, self.verifier_key, batch, note, root)  # 6

    def _run_commit_hook(self, tx: WriteTx, batch: _Batch) -> Callable[[], None] | None:
        """:attr:`on_commit_tx` on the batch, in a SAVEPOINT of the append's transaction
        (module docstring): its failure is rolled back to the savepoint and logged, and the
        append goes on to commit; a rollback that itself fails raises (the append fails,
        nothing is acknowledged). Returns the hook's announcement."""
        hook = self.on_commit_tx
        if hook is None:
            return None
        committed = CommittedBatch(
            leaves=tuple(batch.built),
            bodies=tuple(r["body"] for r in batch.body_rows),
            erased=frozenset(batch.erased_bodies),
        )
        conn = tx.connection
        savepoint = conn.begin_nested()
        try:
            announce = hook(conn, committed)
        except Exception:
            savepoint.rollback()  # raises if the transaction is unusable: the append fails
            _log.exception(
                "the commit hook failed on entries %d..%d; rolled back to its savepoint, the entries commit",
                committed.start,
                committed.end - 1,
            )
            return None
        savepoint.commit()
        return announce

    def record_signed(self, size: int, root: bytes) -> None:
        """After a commit: the signer's own record (ledger.signed_head) names the checkpoint
        it signed at ``size`` (a record already further is left alone). Durable when it
        returns; a failure never raises (the entries are committed and are answered with
        their receipts): it is logged, shown by :meth:`problems`, and the next append is
        refused until the record can be written."""
        if self.signed_head is not None and not self.signed_head.before_commit:
            self.signed_head.advance_quietly(SignedHead(size, root))

    def report_problem(self, check: str, detail: str) -> None:
        """An operational problem found after a commit (the write stands and was answered with
        its receipt): logged here, and named by :meth:`problems` (``/healthz``) until
        :meth:`clear_problem`."""
        _log.error("%s: %s", check, detail)
        with self._keys_lock:
            self._problems[check] = detail
            while len(self._problems) > 32:
                self._problems.pop(next(iter(self._problems)))

    def clear_problem(self, check: str) -> None:
        with self._keys_lock:
            self._problems.pop(check, None)

    def problems(self) -> dict[str, str]:
        """What is wrong with this process's service of the log now, by check name (empty:
        nothing): a signer's record a commit could not advance (no entry is signed until it
        is: ``signer.record_unwritable``), and the problems reported after commits."""
        with self._keys_lock:
            found = dict(self._problems)
        if self.signed_head is not None and self.signed_head.stale is not None:
            found["signer.record_unwritable"] = (
                f"the signer's record {self.signed_head.path} could not be advanced to size "
                f"{self.signed_head.stale.size} ({self.signed_head.stale_reason}); appends are refused until it can"
            )
        return found

    def _check_batch(
        self, submissions: Sequence[Submission | Prepared | PolicyEvent], *, operator: bool, system: bool
    ) -> list[Prepared | PolicyEvent]:
        if not submissions:
            raise MalformedError("a batch holds at least one event", check="submission.empty")
        if len(submissions) > 10_000:
            raise LimitExceededError("a batch holds at most 10000 events", check="submission.batch")
        pending: list[Prepared | PolicyEvent] = []
        for s in submissions:
            if isinstance(s, PolicyEvent):
                if self.policy_key is None:
                    raise ConfigError("this ledger has no policy key; policy events are unavailable")
                validate_body(s.kind, s.body)
                pending.append(s)
            elif isinstance(s, Prepared) and (operator or not s.operator) and (system or not s.system):
                pending.append(s)  # checked at the edge, under no more authority than this call's
            else:
                sub = s.sub if isinstance(s, Prepared) else s
                pending.append(self.prepare(sub, operator=operator, system=system))
        return pending

    def _validate(self, pending: Sequence[Prepared | PolicyEvent]) -> None:
        checked = [(p.envelope, p.body) for p in pending if isinstance(p, Prepared)]
        for validator in self.rules.validators:
            validator(self.store, checked)

    def _open_batch(self, tx: WriteTx, pending: Sequence[Prepared | PolicyEvent]) -> _Batch:
        state = tx.lock_state()
        size = state.size
        frontier = self._frontier
        if frontier is not None and frontier[0] == size:
            # The in-memory frontier (compact range) of the tree this process committed at
            # this very size: the log only grows, so a tree of this size is that tree, and
            # nothing needs re-reading. Set only after a commit returned (append_batch).
            border = CompactRange(size, frontier[1])
            start_root = border.root()
            if state.last_timestamp_us != frontier[2]:
                raise LogIntegrityError(
                    f"log_state.last_timestamp_us is {state.last_timestamp_us}, but this log's last entry "
                    f"(index {size - 1}) was stamped {frontier[2]}; refusing to stamp entries from it "
                    "(run `engram audit`)",
                    check="state.last_timestamp",
                )
        else:
            # Another process appended, or this one just started: read the right edge, and
            # never extend a tree whose stored hashes disagree with what the log already
            # signed: that would sign a checkpoint inconsistent with an earlier one. The
            # checkpoint row counts only if the log key signed it (SqlStore.trust), and the
            # clock continues from the last entry's own timestamp, proven in that tree.
            border = CompactRange(size, _frontier_hashes(tx, size))
            start_root = border.root()
            signed_root = tx.checkpoint_root(size)
            if signed_root is None or not hmac.compare_digest(signed_root, start_root):
                raise LogIntegrityError(
                    f"stored Merkle nodes at size {size} (log_state.size) disagree with the checkpoint "
                    "signed at that size, or none is signed; refusing to sign a new one (run `engram audit`)",
                    check="state.nodes",
                )
            self._check_last_entry(tx, size, start_root, state.last_timestamp_us)
        record_seen = self._check_signed_head(tx, size, start_root)
        start_nodes = [((lv, i), h) for lv, i, h in border.nodes]
        envs = [p.envelope for p in pending if isinstance(p, Prepared)]
        key_ids = [e.key_id for e in envs] + [e.new_key.key_id for e in envs if e.new_key is not None]
        key_ids += [self._policy_key_id] if len(envs) < len(pending) else []
        streams = [e.stream for e in envs] + [
            (p.agent, p.kind) for p in pending if isinstance(p, PolicyEvent)
        ]
        # Active keys are loaded too: a forced revocation retires a key it does not name.
        loaded, active = tx.load_key_state(key_ids, [a for a, _ in streams] + [POLICY_AGENT])
        # Decisions use the key state the log's own key entries give (the table can be
        # changed behind the log), and a table that disagrees stops the append.
        agents = {a for a, _ in streams} | {POLICY_AGENT} | {k.agent for k in loaded.values()}
        log_keys, log_active = tx.derive_keys(agents, size)
        cross_check_keys(loaded, active, log_keys, log_active)
        keys = _BatchKeys(keys=log_keys, active=log_active)
        return _Batch(
            start_size=size,
            size=size,
            last_ts=state.last_timestamp_us,
            border=border,
            start_nodes=start_nodes,
            keys=keys,
            db_heads=tx.load_heads(streams),
            record_seen=record_seen,
        )

    def _integrate(self, batch: _Batch, item: Prepared | PolicyEvent) -> None:
        index = batch.size
        p = item if isinstance(item, Prepared) else self._sign_policy(item, batch.heads, batch.db_heads)
        env = p.envelope
        # Authenticate first: a forged or unauthorized event is refused before any
        # stream state is consulted. (Heads are not secret: the leaves are public.)
        decision = authorize(batch.keys, env, index)
        if p.verified_with is None or not hmac.compare_digest(p.verified_with, decision.signer_public_key):
            verify_event_signature(
                env, p.sub.signature, decision.signer_public_key, envelope_jcs=p.sub.envelope
            )
        _check_stream(env, batch.heads.get(env.stream) or batch.db_heads.get(env.stream))
        batch.keys.apply(decision.change, index)

        ts = max(self.clock(), batch.last_ts + 1)
        leaf = Leaf.build(index=index, timestamp_us=ts, envelope=env, signature=p.sub.signature)
        if len(leaf.raw) > self.max_leaf_bytes:
            raise LimitExceededError(
                f"leaf of {len(leaf.raw)} bytes exceeds the limit of {self.max_leaf_bytes}",
                check="leaf.size",
            )
        lh = leaf_hash(leaf.raw)
        batch.leaf_rows.append(
            {
                "idx": index,
                "leaf_hash": lh,
                "agent": env.agent,
                "kind": env.kind,
                "version": env.version,
                "key_id": env.key_id,
                "timestamp_us": ts,
                "leaf": leaf.raw,
            }
        )
        batch.body_rows.append({"idx": index, "salt": p.sub.salt, "body": p.sub.body})
        # Right to be forgotten, in the same transaction as the logged erasure: the
        # bodies and salts its kind names go, the leaf and every proof stay.
        batch.erased_bodies.extend(require_kind(env.kind).erases(p.body))
        # Every perfect subtree this leaf completes becomes a stored, immutable node.
        batch.node_rows.extend({"level": lv, "idx": i, "hash": h} for lv, i, h in batch.border.append(lh))
        batch.heads[env.stream] = StreamHead(
            agent=env.agent, kind=env.kind, version=env.version, leaf_hash=lh, index=index
        )
        batch.built.append(leaf)
        batch.size += 1
        batch.last_ts = ts

    def _commit(self, tx: WriteTx, batch: _Batch) -> tuple[bytes, bytes]:
        root = batch.border.root()
        key_inserts, key_retirements = batch.keys.final_writes()
        note = sign_note(
            checkpoint_text(self.origin, batch.size, root), self.origin, self.log_key.private_key
        )
        tx.write_batch(
            leaf_rows=batch.leaf_rows,
            body_rows=batch.body_rows,
            node_rows=batch.node_rows,
            heads=batch.heads,
            key_inserts=key_inserts,
            key_retirements=key_retirements,
            new_size=batch.size,
            last_timestamp_us=batch.last_ts,
            checkpoint=StoredCheckpoint(size=batch.size, root=root, note=note, signed_at_us=batch.last_ts),
            prev_size=batch.start_size,
            erase_bodies=batch.erased_bodies,
        )
        if self.signed_head is not None and self.signed_head.before_commit:
            # Several hosts (ENGRAM_SIGNER_RECORD_WRITE=before-commit): the shared record
            # names this checkpoint before the commit can release it, and only if no other
            # host moved the record since this batch checked it; else the transaction rolls
            # back and nothing is signed that a client could see. A commit that fails after
            # this leaves the record ahead of the database: signing stops until an operator
            # re-anchors (fail closed; docs/reliability.md, several hosts).
            self.signed_head.claim(SignedHead(batch.size, root), seen=batch.record_seen)
        return note, root

    @property
    def _policy_key_id(self) -> str:
        if self.policy_key is None:
            raise ConfigError("this ledger has no policy key")
        return agent_key_id(self.policy_key.public_key().public_bytes_raw())

    def _sign_policy(
        self,
        ev: PolicyEvent,
        heads: Mapping[tuple[str, str], StreamHead],
        db_heads: Mapping[tuple[str, str], StreamHead],
    ) -> Prepared:
        """Sign a policy event under the lock, chained to its stream's current head."""

        if self.policy_key is None:  # pragma: no cover - checked before the lock
            raise ConfigError("this ledger has no policy key")
        head = heads.get((ev.agent, ev.kind)) or db_heads.get((ev.agent, ev.kind))
        head_index = None if head is None else head.index
        in_batch = (ev.agent, ev.kind) in heads
        if not in_batch and head_index != ev.expect_head:
            raise VersionConflictError(
                f"stream {ev.agent}/{ev.kind} moved since the decision (head {head_index}, expected {ev.expect_head})",
                agent=ev.agent,
                kind=ev.kind,
                head_version=None if head is None else head.version,
                head_leaf_hash=None if head is None else head.leaf_hash.hex(),
            )
        signer = AgentSigner(ev.agent, self.policy_key, origin=self.origin)
        sub = signer.event(
            ev.kind,
            ev.body,
            version=0 if head is None else head.version + 1,
            prev=None if head is None else head.leaf_hash.hex(),
            client_time_us=self.clock(),
        )
        return self.prepare(sub, operator=False, system=True)

    @staticmethod
    def _check_last_entry(tx: WriteTx, size: int, root: bytes, last_timestamp_us: int) -> None:
        """``log_state.last_timestamp_us`` must be the timestamp of the last entry, read from
        that entry's bytes, proven in the tree of ``root`` (a state set into the future would
        stamp every later entry in the future)."""
        if size == 0:
            stamped = 0
        else:
            raw = tx.leaf(size - 1)
            ranges = inclusion_ranges(size - 1, size)
            got = tx.nodes([c for lo, hi in ranges for c in range_nodes(lo, hi)])
            hashes = tuple(range_hash([got[c] for c in range_nodes(lo, hi)]) for lo, hi in ranges)
            try:
                if raw is None:
                    raise MalformedError("missing", check="state.leaves")
                verify_inclusion(leaf_hash=leaf_hash(raw), index=size - 1, size=size, proof=hashes, root=root)
                stamped = Leaf.from_bytes(raw).timestamp_us
            except VerificationError as e:
                raise LogIntegrityError(
                    f"leaves row {size - 1} (the last entry) is missing or not the entry the signed tree "
                    "holds; refusing to append (run `engram audit`)",
                    check="state.leaves",
                ) from e
        if last_timestamp_us != stamped:
            raise LogIntegrityError(
                f"log_state.last_timestamp_us is {last_timestamp_us}, but the last entry (index {size - 1}) "
                f"was stamped {stamped}; refusing to stamp entries from it (run `engram audit`)",
                check="state.last_timestamp",
            )

    def _check_signed_head(self, tx: WriteTx, size: int, root: bytes) -> SignedHead | None:
        """The tree about to be extended (``size``, ``root``) must extend the last checkpoint
        this signer recorded signing (ledger.signed_head): the same root at the same size, or
        a consistency proof from the stored nodes. Anything else is a rolled-back or forked
        database, and signing on would publish a fork. Returns the record as read."""
        if self.signed_head is None:
            return None
        if self.signed_head.stale is not None:
            # The last commit could not be recorded: retry now, and sign nothing until it is,
            # or a rollback to any size at or above the old record would pass.
            self.signed_head.advance_quietly(self.signed_head.stale)
            if self.signed_head.stale is not None:
                raise ForkRefusedError(
                    f"the signer's record {self.signed_head.path} cannot be written "
                    f"({self.signed_head.stale_reason}); refusing to sign until it can (a record that "
                    "stops moving would let a rolled-back database fork the log)",
                    check="signer.record_unwritable",
                )
        head = self.signed_head.read()
        if head is None:
            if size == 0:
                return None  # a new log: its first checkpoint creates the record
            raise ForkRefusedError(
                f"the signer's record {self.signed_head.path} is missing, but the database's log has "
                f"{size} entries: without it a rolled-back database could make this key sign a fork. "
                "Re-anchor it knowingly: `engram log reanchor` (from a checkpoint you trust, e.g. a "
                "witness-cosigned one)",
                check="signer.record_missing",
            )
        if head.size > size:
            raise ForkRefusedError(
                f"the database's log has {size} entries, but this signer already signed a checkpoint of "
                f"size {head.size} ({self.signed_head.path}): the database was rolled back or restored; "
                "refusing to sign a fork (run `engram audit`)"
            )
        if head.size == size:
            same = hmac.compare_digest(head.root, root)
            proof_ok = same
        else:
            ranges = consistency_ranges(head.size, size)
            got = tx.nodes([c for lo, hi in ranges for c in range_nodes(lo, hi)])
            hashes = tuple(range_hash([got[c] for c in range_nodes(lo, hi)]) for lo, hi in ranges)
            try:
                verify_consistency(
                    old_size=head.size, new_size=size, old_root=head.root, new_root=root, proof=hashes
                )
                proof_ok = True
            except VerificationError:
                proof_ok = False
        if not proof_ok:
            raise ForkRefusedError(
                f"the database's tree of size {size} does not extend the checkpoint of size {head.size} this "
                f"signer signed ({self.signed_head.path}); refusing to sign a fork (run `engram audit`)"
            )
        return head
