"""The append path: validate, serialize, assign index and timestamp, store, prove.

This is the only impure piece of the log core. Its steps for a batch of signed events
(specs/leaf.md §3), all-or-nothing:

1. Stateless checks, before any lock: the envelope is canonical JCS and well-formed, names
   this log's origin and a registered kind; the body is a canonical JSON object within the
   size limit whose salted commitment matches; ledger-reserved agent ids are refused.
2. Under the log's writer lock (store.py): the signing key is the one valid for the agent
   at this index (verifier.keys.authorize) and the agent signature verifies over the exact
   signed bytes; only then the stream's ``version`` must be the head's + 1 and ``prev`` the
   head's leaf hash, else a :class:`ConflictError` carrying the current head. The stored
   Merkle state must reproduce the last signed checkpoint's root before anything is signed
   (a process that itself committed the tree at this size extends its in-memory frontier
   instead of re-reading it: the log only grows, so that tree is the tree of this size).
3. The server assigns the index (the log size) and a timestamp strictly greater than the
   previous one, builds the leaf (bounded by ``max_leaf_bytes``), extends the Merkle
   frontier, signs a checkpoint of the new size and commits everything in one transaction.
4. Receipts carry an inclusion proof to that checkpoint, verified with :mod:`verifier`
   before they are returned; the proof material comes from the batch itself and the
   process's cache of committed nodes (ledger.storage.store.ProofCache), not a new read.

Any failure raises a typed error and writes nothing.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Engine

from engram.protocol.errors import (
    ConfigError,
    ConflictError,
    LimitExceededError,
    LogIntegrityError,
    MalformedError,
    OriginMismatchError,
    PrevMismatchError,
    RejectedEventError,
    StorageError,
    UnknownKeyError,
    VersionConflictError,
    VersionGapError,
)
from engram.protocol.gate import WriteGate
from engram.protocol.keyfiles import (
    LogKey,
    format_agent_key,
    format_log_signer_key,
    load_agent_key,
    load_log_key,
    write_private_file,
)
from engram.protocol.kinds import gated_texts, require_kind, validate_body
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import ConsistencyProof, InclusionProof, Receipt, Submission
from ledger.config import Settings
from ledger.envelopes import Prepared, parse_envelope
from ledger.groupcommit import GroupCommit
from ledger.signed_head import ForkRefusedError, SignedHead, SignedHeadRecord
from ledger.storage.db import current_revision, head_revision, make_engine, migrate
from ledger.storage.store import SqlStore, StoredCheckpoint, StreamHead, WriteTx, cross_check_keys
from ledger.witness import WitnessSubmitter, load_submitter
from verifier.errors import VerificationError
from verifier.event import (
    DEFAULT_MAX_LEAF_BYTES,
    POLICY_AGENT,
    SALT_SIZE,
    Envelope,
    Leaf,
    agent_key_id,
    verify_body,
    verify_event_signature,
)
from verifier.jcs import parse_strict
from verifier.keys import KeyChange, KeyRecord, authorize
from verifier.merkle import (
    EMPTY_ROOT,
    CompactRange,
    consistency_ranges,
    inclusion_ranges,
    leaf_hash,
    range_hash,
    range_nodes,
    verify_consistency,
    verify_inclusion,
)
from verifier.note import VerifierKey, check_origin, checkpoint_text, sign_note, verify_checkpoint

__all__ = [
    "Admit",
    "AppendRules",
    "BatchValidator",
    "ConsistencyProof",
    "InclusionProof",
    "Ledger",
    "PolicyEvent",
    "Prepared",
    "Receipt",
    "Submission",
    "system_clock_us",
]

Clock = Callable[[], int]

#: (agent, public key) of the keys this process has seen, by key id. A key id is a
#: domain-separated hash of the public key itself (verifier.event.agent_key_id) and is
#: registered for one agent once (its table's primary key), so this map can never be
#: wrong: it says which key a key id names, never whether that key is valid (authorize
#: decides that, under the lock, from the key state at the entry's index).
_KEY_CACHE_ENTRIES = 65_536


_log = logging.getLogger("engram.log")


def system_clock_us() -> int:
    """Wall-clock microseconds since the Unix epoch (the outermost layer's clock)."""
    return time.time_ns() // 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyEvent:
    """An event the ledger's policy key signs inside the append lock, once the version and
    ``prev`` of its stream (``agent``, ``kind``) are known.

    ``expect_head`` is the index of the stream head the decision was computed from (None:
    the stream was empty). If the head moved meanwhile, the append fails with a
    :class:`ConflictError` and the caller re-decides on fresh state, so two concurrent
    compactions never both apply the same decision.
    """

    agent: str
    kind: str
    body: Mapping[str, Any]
    expect_head: int | None


#: What :meth:`Ledger.prepare` calls once the signature verified, before the body is read:
#: (agent, the key that verified, whether it is a key of the log's registry). Raises to
#: refuse (rate limits: an agent over budget costs no body parsing).
Admit = Callable[[str, bytes, bool], None]


#: A state-dependent refusal the composition root hands the log (e.g. the memory
#: preconditions): called with the store and the (envelope, body) pairs of a batch before
#: the lock; raises to refuse (e.g. a supersession of a missing item).
BatchValidator = Callable[[SqlStore, Sequence[tuple[Envelope, Mapping[str, Any]]]], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendRules:
    """What the log runs on every append besides its own checks, handed to it by the
    composition root (:mod:`ledger.compose`) so that the log never imports the memory
    subsystem: the write gate (stateless checks of the texts that become memory) and the
    batch validators (state-dependent refusals)."""

    gate: WriteGate = field(default_factory=WriteGate)
    validators: tuple[BatchValidator, ...] = ()


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


class Ledger:
    """One log: its store, its signing key, its limits and its clock."""

    def __init__(
        self,
        store: SqlStore,
        log_key: LogKey,
        *,
        clock: Clock = system_clock_us,
        max_leaf_bytes: int = 65_535,
        max_body_bytes: int = 64 * 1024,
        policy_key: Ed25519PrivateKey | None = None,
        rules: AppendRules | None = None,
        signed_head: Path | None = None,
    ) -> None:
        state = store.state()
        if state is None:
            raise ConfigError("the database holds no log; run `engram init`")
        if state.origin != log_key.name or state.log_vkey != log_key.vkey:
            raise ConfigError(
                f"the log key ({log_key.vkey}) is not the key of this database's log ({state.log_vkey})"
            )
        if not 1 <= max_leaf_bytes <= DEFAULT_MAX_LEAF_BYTES:
            raise ConfigError(f"max_leaf_bytes {max_leaf_bytes} is outside [1, 65535] (the tlog-tiles limit)")
        if max_body_bytes < 1:
            raise ConfigError("max_body_bytes must be positive")
        # Checkpoint rows count only if this log's key signed them (issue 15).
        store.trust(VerifierKey.parse(log_key.vkey))
        if policy_key is not None:
            registered = store.active_key_id(POLICY_AGENT)
            own = agent_key_id(policy_key.public_key().public_bytes_raw())
            if registered is not None and registered != own:
                raise ConfigError("the policy key file is not the policy agent's registered key")
        self.store = store
        self.log_key = log_key
        self.origin = log_key.name
        self.verifier_key = VerifierKey.parse(log_key.vkey)
        self.clock = clock
        self.max_leaf_bytes = max_leaf_bytes
        self.max_body_bytes = max_body_bytes
        self.policy_key = policy_key
        self.rules = rules or AppendRules()
        self._keys_lock = threading.Lock()
        self._public_keys: dict[str, tuple[str, bytes]] = {}
        #: signature -> (envelope bytes, key) event_signer verified, for the append to come
        self._preverified: OrderedDict[bytes, tuple[bytes, bytes]] = OrderedDict()
        #: (size, border hashes) of the tree this process last committed (see _open_batch)
        self._frontier: tuple[int, list[bytes], int] | None = None
        #: the signer's own record of the last checkpoint it signed (ledger.signed_head)
        self.signed_head = None if signed_head is None else SignedHeadRecord(signed_head, log_key.name)
        #: concurrent single appends of this process share one transaction (ledger.groupcommit)
        self.group_commit: GroupCommit | None = GroupCommit(self.append_batch, record=self.record_signed)
        #: Witnesses this log submits its checkpoints to (``ENGRAM_WITNESS_POLICY``), or None.
        self.witnesses: WitnessSubmitter | None = None
        #: operational problems reported after commits (:meth:`report_problem`)
        self._problems: dict[str, str] = {}

    # -- set-up -----------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        engine: Engine,
        log_key: LogKey,
        *,
        clock: Clock = system_clock_us,
        policy_key: Ed25519PrivateKey | None = None,
        rules: AppendRules | None = None,
        signed_head: Path | None = None,
        **limits: int,
    ) -> Ledger:
        """Migrate the database, record the log identity, sign the empty checkpoint, and
        register the ledger's policy agent (index 0) when a policy key is given.
        ``signed_head``: the signer's record file (ledger.signed_head), or None for none."""
        migrate(engine)
        store = SqlStore(engine)
        note = sign_note(checkpoint_text(log_key.name, 0, EMPTY_ROOT), log_key.name, log_key.private_key)
        store.initialise(
            origin=log_key.name,
            log_vkey=log_key.vkey,
            checkpoint=StoredCheckpoint(size=0, root=EMPTY_ROOT, note=note, signed_at_us=clock()),
        )
        ledger = cls(
            store, log_key, clock=clock, policy_key=policy_key, rules=rules, signed_head=signed_head, **limits
        )
        if policy_key is not None:
            signer = AgentSigner(POLICY_AGENT, policy_key, origin=ledger.origin)
            ledger.append([signer.registration(client_time_us=clock())], operator=True, system=True)
        return ledger

    @classmethod
    def init_home(
        cls,
        settings: Settings,
        origin: str | None,
        *,
        clock: Clock = system_clock_us,
        rules: AppendRules | None = None,
    ) -> Ledger:
        """`engram init`: create keys (unless given), the database and the log.

        With ``origin`` None, an existing key file's name is the origin, else a unique
        local origin is made up.
        """
        if settings.log_key_file.exists():
            log_key = load_log_key(settings.log_key_file)
            if origin is not None and log_key.name != origin:
                raise ConfigError(
                    f"{settings.home} already holds the log {log_key.name!r} (key file {settings.log_key_file}), "
                    f"not {origin!r}: to start a new log, point ENGRAM_HOME at an empty directory "
                    "(e.g. export ENGRAM_HOME=$PWD/mylog); to keep this one, run engram init without --origin"
                )
        else:
            if origin is None:
                origin = f"localhost/engram-{secrets.token_hex(4)}"
            check_origin(origin)
            log_key = LogKey(origin, Ed25519PrivateKey.generate())
            write_private_file(settings.log_key_file, format_log_signer_key(log_key))
        if settings.policy_key_file.exists():
            _, policy_key = load_agent_key(settings.policy_key_file)
        else:
            policy_key = Ed25519PrivateKey.generate()
            write_private_file(settings.policy_key_file, format_agent_key(POLICY_AGENT, policy_key))
        engine = make_engine(settings.database_url)
        ledger = cls.create(
            engine,
            log_key,
            clock=clock,
            policy_key=policy_key,
            rules=rules,
            signed_head=settings.signer_record_file,
            max_leaf_bytes=settings.max_leaf_bytes,
            max_body_bytes=settings.max_body_bytes,
        )
        if ledger.signed_head is not None:
            ledger.signed_head.before_commit = settings.signer_record_before_commit
        return ledger

    @classmethod
    def open(
        cls, settings: Settings, *, clock: Clock = system_clock_us, rules: AppendRules | None = None
    ) -> Ledger:
        """Open an initialised ledger; refuses a database whose schema is not current."""
        log_key = load_log_key(settings.log_key_file)
        engine = make_engine(settings.database_url)
        if current_revision(engine) != head_revision():
            raise ConfigError("the database schema is missing or outdated; run `engram init`")
        policy_key = None
        if settings.policy_key_file.exists():
            _, policy_key = load_agent_key(settings.policy_key_file)
        ledger = cls(
            SqlStore(engine),
            log_key,
            clock=clock,
            max_leaf_bytes=settings.max_leaf_bytes,
            max_body_bytes=settings.max_body_bytes,
            policy_key=policy_key,
            rules=rules,
            signed_head=settings.signer_record_file,
        )
        if ledger.signed_head is not None:
            ledger.signed_head.before_commit = settings.signer_record_before_commit
        if settings.witness_policy is not None:
            ledger.witnesses = load_submitter(settings.witness_policy, timeout_s=settings.witness_timeout_s)
        return ledger

    @property
    def gate(self) -> WriteGate:
        """The write gate this log runs (shared with the memory service by the root)."""
        return self.rules.gate

    @property
    def vkey(self) -> str:
        return self.log_key.vkey

    # -- append -----------------------------------------------------------------------

    def prepare(
        self, sub: Submission, *, operator: bool = False, system: bool = False, admit: Admit | None = None
    ) -> Prepared:
        """Every stateless check of one signed event, in order of cost: the bytes' shapes,
        the envelope (parsed once), this log's origin, the kind and the caller's authority;
        then the signature under the key the envelope names (a registration: its own new
        key), then ``admit`` (rate limits), then the body: its size, its commitment, its
        schema, the write gate. Raises the first failure; nothing is written."""
        if not all(isinstance(b, bytes) for b in (sub.envelope, sub.signature, sub.body, sub.salt)):
            raise MalformedError("envelope, signature, body and salt must be bytes", check="submission.type")
        if len(sub.signature) != 64:
            raise MalformedError("an Ed25519 signature is 64 bytes", check="event.signature")
        envelope = parse_envelope(sub.envelope)
        if envelope.origin != self.origin:
            raise OriginMismatchError(
                f"event is for log {envelope.origin!r}, this log is {self.origin!r}", check="envelope.origin"
            )
        require_kind(envelope.kind)
        if envelope.agent.startswith("engram.") and not system:
            raise RejectedEventError(
                f"agent ids beginning with 'engram.' are reserved for the ledger: {envelope.agent}",
                check="ledger.reserved_agent",
            )
        if envelope.kind == "key.registered" and not operator:
            raise RejectedEventError(
                "registering an agent key needs operator authorization", check="ledger.registration"
            )
        verified_with = self._verify_early(sub, envelope)
        if admit is not None:
            agent, public_key, registered = self._signer(sub, envelope, verified_with)
            admit(agent, public_key, registered)
        if len(sub.salt) != SALT_SIZE:
            raise MalformedError(f"salt must be {SALT_SIZE} bytes", check="body.salt")
        if len(sub.body) > self.max_body_bytes:
            raise LimitExceededError(
                f"body of {len(sub.body)} bytes exceeds the limit of {self.max_body_bytes}", check="body.size"
            )
        body = verify_body(envelope, sub.salt, sub.body, max_bytes=self.max_body_bytes)
        validate_body(envelope.kind, body)
        self.rules.gate.check_stored(gated_texts(envelope.kind, body))
        self.rules.gate.check_body_secrets(body)
        return Prepared(
            sub=sub,
            envelope=envelope,
            body=body,
            verified_with=verified_with,
            operator=operator,
            system=system,
        )

    def _signer(self, sub: Submission, env: Envelope, verified_with: bytes | None) -> tuple[str, bytes, bool]:
        """Who signed ``sub``, for ``admit``: the key that verified it before the lock, or a
        registration's own new key (verified here), else the key is unknown."""
        if env.kind == "key.registered" and env.new_key is not None:
            public_key = env.new_key.public_key
            verify_event_signature(env, sub.signature, public_key, envelope_jcs=sub.envelope)
            return env.agent, public_key, False
        if verified_with is None:
            raise UnknownKeyError(
                f"no key {env.key_id} of agent {env.agent} in this log", check="key.unknown"
            )
        return env.agent, verified_with, True

    def _verify_early(self, sub: Submission, env: Envelope) -> bytes | None:
        """Check the signature before the lock, with the key the envelope names (issue 14:
        the writer then only re-checks what depends on log state, i.e. that this key is the
        one valid for the agent at the entry's index). Returns that key, or None when this
        process does not know it yet (the writer then checks everything under the lock)."""
        if env.kind == "key.registered" and env.new_key is not None:
            return None  # self-signed by the key it introduces: authorize decides
        pk = self._key_of(env)
        if pk is None:
            return None
        with self._keys_lock:
            verified = self._preverified.get(sub.signature)
        if verified is not None and verified[0] == sub.envelope and hmac.compare_digest(verified[1], pk):
            return pk  # event_signer checked exactly these bytes with this key
        verify_event_signature(env, sub.signature, pk, envelope_jcs=sub.envelope)
        return pk

    def _key_of(self, env: Envelope) -> bytes | None:
        """The public key ``env.key_id`` names, if it is a key of ``env.agent`` in this log."""
        known = self.public_key(env.key_id)
        if known is None:
            return None
        agent, public_key = known
        return public_key if agent == env.agent else None

    def public_key(self, key_id: str) -> tuple[str, bytes] | None:
        """(agent, public key) of a key id registered in this log, cached (a key id names
        one key forever); None if the log has no such key (one indexed read)."""
        with self._keys_lock:
            known = self._public_keys.get(key_id)
        if known is None:
            known = self.store.public_key(key_id)
            if known is None:
                return None
            with self._keys_lock:
                self._public_keys[key_id] = known
                if len(self._public_keys) > _KEY_CACHE_ENTRIES:
                    self._public_keys.clear()  # rare; refilled from the table on demand
        return known

    def event_signer(self, sub: Submission) -> str:
        """A cheap check before anything else (rate limits): the event's signature verifies
        under the key its envelope names (a registration: its own new key). Returns the
        agent. This is not authorization; :meth:`append` still checks everything."""
        return self.event_signer_key(sub)[0]

    def event_signer_key(self, sub: Submission) -> tuple[str, bytes, bool]:
        """:meth:`event_signer` with the key that verified and whether it is a key of the
        log's registry (False for a registration's own new key)."""
        env = parse_envelope(sub.envelope)
        if env.kind == "key.registered" and env.new_key is not None:
            public_key = env.new_key.public_key
        else:
            found = self._key_of(env)
            if found is None:
                raise UnknownKeyError(
                    f"no key {env.key_id} of agent {env.agent} in this log", check="key.unknown"
                )
            public_key = found
        verify_event_signature(env, sub.signature, public_key, envelope_jcs=sub.envelope)
        self.verified(sub.signature, sub.envelope, public_key)
        return env.agent, public_key, env.kind != "key.registered"

    def verified(self, signature: bytes, envelope: bytes, public_key: bytes) -> None:
        """``verify_event_signature`` passed for exactly these bytes under this key (the
        caller checked it: :meth:`event_signer_key`, or the service's fair admission, which
        verifies an event to know whose it is): the append that follows need not verify
        them again (:meth:`_verify_early` still requires the same envelope bytes and the
        key the log names for them). Bounded: the latest 1,024."""
        with self._keys_lock:
            self._preverified[signature] = (envelope, public_key)
            while len(self._preverified) > 1024:
                self._preverified.popitem(last=False)

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
        6. :meth:`_receipts`: inclusion proofs to that checkpoint, checked by the verifier.

        Args:
            submissions: the signed events, in the order they are to be appended.
            operator: the caller is the operator (allows ``key.registered``).
            system: the caller is the ledger itself (allows reserved ``engram.*`` agents).

        A single signed event goes through the process's group commit
        (:mod:`ledger.groupcommit`): concurrent callers share one transaction, checkpoint and
        fsync, each with its own receipt or error.

        Raises:
            VerificationError subclasses: bad input (nothing written).
            ConflictError subclasses: a stream's head moved; carries the current head.
            StorageError: the database failed (nothing acknowledged).
        """
        if (
            len(submissions) == 1
            and isinstance(submissions[0], Submission | Prepared)
            and self.group_commit is not None
        ):
            return [self.group_commit.append(submissions[0], operator=operator, system=system)]
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
        # Committed (the transaction's exit returned): only now may the new frontier and
        # the batch's nodes stand for the log's state in this process.
        self._frontier = (batch.size, [h for _, _, h in batch.border.nodes], batch.last_ts)
        self.store.key_streams.appended(batch.built)
        if record:
            self.record_signed(batch.size, root)
        self.store.cache.committed(
            batch.node_rows,
            StoredCheckpoint(size=batch.size, root=root, note=note, signed_at_us=batch.last_ts),
            batch.start_nodes,
        )
        return self._receipts(batch, note, root)  # 6

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
            border = CompactRange(size, self._frontier_hashes(tx, size))
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
        # Decisions use the key state the log's own key entries give (issue 15: the table
        # can be changed behind the log), and a table that disagrees stops the append.
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
        self._check_stream(env, batch.heads.get(env.stream) or batch.db_heads.get(env.stream))
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

    def _receipts(self, batch: _Batch, note: bytes, root: bytes) -> list[Receipt]:
        """Committed: acknowledge with proofs checked by the trusted core.

        The proofs are made from the batch's own nodes (the border of the tree it extended,
        read in its transaction, and every node its leaves completed), not read back: once the
        commit returned, a failing read must not turn written entries into an error their
        callers would retry (issue 40, finding 11). A node not among them (the path of a new
        leaf needs none) is read from the store."""
        size = batch.size
        verify_checkpoint(note, self.verifier_key)
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
                proofs.extend(self.prove_inclusion_many([lf.index], size))
        receipts = []
        for lf, proof in zip(batch.built, proofs, strict=True):
            verify_inclusion(
                leaf_hash=proof.leaf_hash, index=lf.index, size=size, proof=proof.hashes, root=root
            )
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
            # or a rollback to any size at or above the old record would pass (issue 25, f8).
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

    @staticmethod
    def _frontier_hashes(tx: WriteTx, size: int) -> list[bytes]:
        if size == 0:
            return []
        coords = range_nodes(0, size)
        got = tx.nodes(coords)
        return [got[c] for c in coords]

    @staticmethod
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

    # -- reads and proofs -------------------------------------------------------------

    def latest_checkpoint(self) -> StoredCheckpoint:
        return self.store.latest_checkpoint()

    def cosigned_note(self, checkpoint: StoredCheckpoint) -> bytes:
        """The checkpoint's signed note followed by the witness cosignatures collected for it."""
        return checkpoint.note + "".join(self.store.cosignature_lines(checkpoint.size)).encode("utf-8")

    def size(self) -> int:
        return self.store.latest_checkpoint().size

    def stream_bodies(
        self, agent: str, kind: str, size: int | None = None, *, max_bytes: int = 1 << 20
    ) -> list[tuple[int, dict[str, Any] | None]]:
        """A stream's entries below ``size`` (default: the log's size), in version order, each
        with its parsed body, or None where the body was erased."""
        return [
            (i, None if raw is None else parse_strict(raw, max_bytes=max_bytes))
            for i, raw in self.store.stream_bodies(agent, kind, self.size() if size is None else size)
        ]

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        return self.store.stream_head(agent, kind)

    # What the HTTP layer reads of the log, asked of the ledger (issue 27, finding 5: the
    # routes reached into its store). Each is one read of the store.

    def stream_heads(self, agent: str) -> list[StreamHead]:
        return self.store.stream_heads(agent)

    def stream_count(self, agent: str, kind: str) -> int:
        """How many entries of ``kind`` ``agent`` has in the latest checkpoint."""
        return len(self.store.stream_indices(agent, kind, self.size()))

    def agent_keys(self, agent: str) -> list[KeyRecord]:
        """An agent's key history (empty: no such agent)."""
        return self.store.keys_of(agent)

    def active_key_id(self, agent: str) -> str | None:
        return self.store.active_key_id(agent)

    def leaf(self, index: int) -> bytes | None:
        return self.store.leaf(index)

    def body(self, index: int) -> tuple[bytes, bytes] | None:
        """Entry ``index``'s (salt, body), or None where it was erased."""
        return self.store.body(index)

    def index_of_leaf_hash(self, leaf_hash: bytes) -> int | None:
        return self.store.index_of_leaf_hash(leaf_hash)

    def leaves_with_hashes(self, start: int, end: int) -> Iterator[tuple[int, bytes, bytes]]:
        return self.store.leaves_with_hashes(start, end)

    def latest_cosigned_note(self) -> bytes:
        """The latest checkpoint's note followed by its witness cosignatures (one read)."""
        cp, lines = self.store.latest_cosigned()
        return cp.note + "".join(lines).encode("utf-8")

    def tile(self, level: int, n: int, width: int) -> bytes:
        """A C2SP tlog-tiles tile: the hash tile at ``level`` (0-7) or, at level -1, the
        entry bundle; ``width`` of its 256 entries."""
        from ledger.tiles import entry_bundle, hash_tile

        return entry_bundle(self.store, n, width) if level < 0 else hash_tile(self.store, level, n, width)

    def root_at(self, size: int) -> bytes:
        self._check_size(size)
        if size == 0:
            return EMPTY_ROOT
        coords = range_nodes(0, size)
        got = self.store.nodes(coords)
        return range_hash([got[c] for c in coords])

    def _check_size(self, size: int, latest: int | None = None) -> int:
        if latest is None:
            latest = self.store.latest_checkpoint().size
        if not 0 <= size <= latest:
            raise MalformedError(
                f"size {size} is not within the latest checkpoint's size {latest}", check="proof.size"
            )
        return latest

    def prove_inclusion_many(self, indices: Sequence[int], size: int) -> list[InclusionProof]:
        """Inclusion proofs for several indices in the tree of ``size``: one read transaction,
        O(log n) stored hashes per proof."""
        if size < 1:
            raise MalformedError(f"size {size} holds no leaf", check="proof.size")
        for i in indices:
            if not 0 <= i < size:
                raise MalformedError(f"index {i} is not below size {size}", check="proof.index")
        plans = [(i, inclusion_ranges(i, size)) for i in indices]
        coords: list[tuple[int, int]] = [(0, i) for i in indices]
        for _, ranges in plans:
            for lo, hi in ranges:
                coords.extend(range_nodes(lo, hi))
        coords.extend(range_nodes(0, size))
        latest, got, cps = self.store.proof_material(coords, [size])
        self._check_size(size, latest)
        root = range_hash([got[c] for c in range_nodes(0, size)])
        cp = cps.get(size)
        if cp is not None and not hmac.compare_digest(cp.root, root):
            raise StorageError(f"stored Merkle nodes disagree with the checkpoint at size {size}")
        out = []
        for i, ranges in plans:
            hashes = tuple(range_hash([got[c] for c in range_nodes(lo, hi)]) for lo, hi in ranges)
            out.append(
                InclusionProof(
                    index=i,
                    size=size,
                    leaf_hash=got[(0, i)],
                    root=root,
                    hashes=hashes,
                    checkpoint=None if cp is None else cp.note,
                )
            )
        return out

    def prove_inclusion_batch(self, indices: Sequence[int], size: int) -> list[InclusionProof]:
        """:meth:`prove_inclusion_many`, each proof checked against the root before it is
        returned (what the batch proof endpoint serves)."""
        proofs = self.prove_inclusion_many(indices, size)
        for p in proofs:
            verify_inclusion(leaf_hash=p.leaf_hash, index=p.index, size=size, proof=p.hashes, root=p.root)
        return proofs

    def prove_inclusion(self, index: int, size: int | None = None) -> InclusionProof:
        """Inclusion proof of leaf ``index`` in the tree of ``size`` (default: latest checkpoint)."""
        if size is None:
            size = self.size()
        proof = self.prove_inclusion_many([index], size)[0]
        verify_inclusion(
            leaf_hash=proof.leaf_hash, index=index, size=size, proof=proof.hashes, root=proof.root
        )
        return proof

    def prove_consistency(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        """Consistency proof from ``old_size`` to ``new_size`` (default: latest checkpoint)."""
        if new_size is None:
            new_size = self.size()
        if not 0 <= old_size <= new_size:
            raise MalformedError(f"old size {old_size} is not within [0, {new_size}]", check="proof.size")
        ranges = consistency_ranges(old_size, new_size)
        coords = [c for lo, hi in ranges for c in range_nodes(lo, hi)]
        if old_size:
            coords += range_nodes(0, old_size)
        if new_size:
            coords += range_nodes(0, new_size)
        latest, got, cps = self.store.proof_material(coords, [old_size, new_size])
        self._check_size(new_size, latest)
        hashes = tuple(range_hash([got[c] for c in range_nodes(lo, hi)]) for lo, hi in ranges)
        old_root = range_hash([got[c] for c in range_nodes(0, old_size)]) if old_size else EMPTY_ROOT
        new_root = range_hash([got[c] for c in range_nodes(0, new_size)]) if new_size else EMPTY_ROOT
        old_cp, new_cp = cps.get(old_size), cps.get(new_size)
        # Roots come from the nodes; where a checkpoint was signed they must be its root.
        for cp, root in ((old_cp, old_root), (new_cp, new_root)):
            if cp is not None and not hmac.compare_digest(cp.root, root):
                raise StorageError(f"stored Merkle nodes disagree with the checkpoint at size {cp.size}")
        verify_consistency(
            old_size=old_size, new_size=new_size, old_root=old_root, new_root=new_root, proof=hashes
        )
        return ConsistencyProof(
            old_size=old_size,
            new_size=new_size,
            old_root=old_root,
            new_root=new_root,
            hashes=hashes,
            old_checkpoint=None if old_cp is None else old_cp.note,
            new_checkpoint=None if new_cp is None else new_cp.note,
        )

    # -- policy authority ---------------------------------------------------------------

    def force_revoke(self, agent: str, reason: str) -> Receipt:
        """Revoke ``agent``'s active key with the ledger policy key (lost or compromised key)."""
        if self.policy_key is None:
            raise ConfigError("this ledger has no policy key; forced revocation is unavailable")
        if agent == POLICY_AGENT:
            raise RejectedEventError(
                "the policy agent cannot be force-revoked (it would end forced revocation)",
                check="ledger.policy_agent",
            )

        head = self.stream_head(agent, "key.revoked")
        signer = AgentSigner(agent, self.policy_key, origin=self.origin)
        sub = signer.event(
            "key.revoked",
            {"reason": reason, "by": POLICY_AGENT},
            version=0 if head is None else head.version + 1,
            prev=None if head is None else head.leaf_hash.hex(),
            client_time_us=self.clock(),
        )
        return self.append([sub], system=True)[0]
