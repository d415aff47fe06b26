"""Agent SDK: keys, signed events, stream heads, and submission with verified receipts.

An agent holds an Ed25519 key and the log's verifier key (its trust anchor). It builds
envelopes (specs/event-envelope.md), signs the exact canonical bytes, submits them through
a transport (:class:`~engram.client.http.HttpTransport`, or the service's in-process one), and accepts a receipt only after checking with
:mod:`verifier` that the checkpoint is signed by the log, the leaf carries exactly the
envelope it signed, and the inclusion proof leads to the checkpoint's root.

Stream heads: each event names the leaf hash of its stream's previous entry (``prev``),
which the server only fixes when it assigns the index and timestamp, so one stream's events
are submitted one after another; events of different streams can share a batch. A
:class:`ConflictError` (another writer moved the stream) is retried with the new head.

Example::

    agent = Agent.generate("support-bot", log_vkey=services.ledger.vkey, transport=services.transport())
    agent.register()                       # operator-authorized key registration
    receipt = agent.append("pact.outcome", {"pact": "p-1", "result": "fulfilled", "quality": 94})
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.errors import ConflictError, MalformedError, ProofError, SignatureError
from engram.protocol.keyfiles import format_agent_key, load_agent_key, write_private_file
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt, StreamState, Submission
from verifier.event import (
    Leaf,
)
from verifier.merkle import verify_consistency, verify_inclusion
from verifier.note import VerifiedCheckpoint, VerifierKey, verify_checkpoint
from verifier.state import CheckpointStore, StateError, default_state_dir

_log = logging.getLogger("engram.client")

#: ``state_dir`` default: the remembered-state directory of :func:`verifier.state.default_state_dir`.
DEFAULT_STATE = Path("<default verifier state>")

__all__ = ["DEFAULT_STATE", "Agent", "AgentSigner", "StreamState", "Transport"]


class Transport(Protocol):
    """How an agent reaches a log."""

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]: ...

    def head(self, agent: str, kind: str) -> StreamState | None: ...

    def consistency(self, old_size: int, new_size: int) -> Sequence[bytes]: ...


#: Checkpoint notes this process verified, by (exact note bytes, log key): the agents of one
#: process that a batch answered all carry its checkpoint, and a note's verification is a
#: pure function of those two (a note that fails is checked again each time). Bounded.
_VERIFIED_NOTES = 1024
_verified: dict[tuple[bytes, VerifierKey], VerifiedCheckpoint] = {}
_verified_lock = threading.Lock()


def verified_checkpoint(note: bytes, log_key: VerifierKey) -> VerifiedCheckpoint:
    """:func:`verifier.note.verify_checkpoint`, once per note and key in this process."""
    key = (note, log_key)
    cp = _verified.get(key)
    if cp is None:
        cp = verify_checkpoint(note, log_key)
        with _verified_lock:
            while len(_verified) >= _VERIFIED_NOTES:
                _verified.pop(next(iter(_verified)))
            _verified[key] = cp
    return cp


def _now_us() -> int:
    return time.time_ns() // 1000


class Agent:
    """A stateful agent client: tracks its stream heads and verifies every receipt."""

    def __init__(
        self,
        signer: AgentSigner,
        *,
        log_vkey: str,
        transport: Transport,
        clock: Callable[[], int] = _now_us,
        max_retries: int = 5,
        state_dir: Path | str | None = DEFAULT_STATE,
    ) -> None:
        """``state_dir``: where the newest checkpoint this agent verified for the log is
        remembered across runs (verifier/state.py), so a log that forks or rolls back is
        caught even after a restart; ``None`` keeps it in memory only. Default:
        ``$ENGRAM_VERIFIER_STATE``, else ``~/.local/state/engram/verifier``."""
        self.signer = signer
        self.log_key = VerifierKey.parse(log_vkey)
        if self.log_key.name != signer.origin:
            raise MalformedError("the agent's origin is not the log key's name", check="origin")
        self.transport = transport
        self.clock = clock
        self.max_retries = max_retries
        self.heads: dict[str, StreamState] = {}
        #: The largest checkpoint this agent has verified; every later one must extend it.
        self.checkpoint: VerifiedCheckpoint | None = None
        directory = default_state_dir() if state_dir == DEFAULT_STATE else state_dir
        self.state = None if directory is None else CheckpointStore(directory)

    # -- construction -----------------------------------------------------------------

    @classmethod
    def generate(cls, agent: str, *, log_vkey: str, transport: Transport, **kw: Any) -> Agent:
        origin = VerifierKey.parse(log_vkey).name
        return cls(
            AgentSigner(agent, Ed25519PrivateKey.generate(), origin=origin),
            log_vkey=log_vkey,
            transport=transport,
            **kw,
        )

    @classmethod
    def load(cls, path: Path, *, log_vkey: str, transport: Transport, **kw: Any) -> Agent:
        agent, key = load_agent_key(path)
        origin = VerifierKey.parse(log_vkey).name
        return cls(AgentSigner(agent, key, origin=origin), log_vkey=log_vkey, transport=transport, **kw)

    def save(self, path: Path) -> None:
        """Write the agent key to ``path`` (mode 0600, never overwriting)."""
        write_private_file(path, format_agent_key(self.signer.agent, self.signer.private_key))

    @property
    def agent_id(self) -> str:
        return self.signer.agent

    # -- heads --------------------------------------------------------------------------

    def _head(self, kind: str, *, refresh: bool = False) -> StreamState | None:
        if refresh or kind not in self.heads:
            h = self.transport.head(self.signer.agent, kind)
            if h is None:
                self.heads.pop(kind, None)
                return None
            self.heads[kind] = h
        return self.heads[kind]

    def _next(self, kind: str, *, refresh: bool = False) -> tuple[int, str | None]:
        h = self._head(kind, refresh=refresh)
        return (0, None) if h is None else (h.version + 1, h.leaf_hash)

    # -- receipts ---------------------------------------------------------------------

    def _check_receipt(self, sub: Submission, receipt: Receipt) -> Leaf:
        """Accept a receipt only if the log signed a checkpoint that includes our event and
        that is consistent with every checkpoint this agent saw before (no fork)."""
        cp = verified_checkpoint(receipt.checkpoint, self.log_key)
        leaf = Leaf.from_bytes(receipt.leaf, origin=self.signer.origin)
        if leaf.envelope.canonical() != sub.envelope or leaf.signature != sub.signature:
            raise SignatureError(
                "the receipt's leaf does not carry the event we signed", check="receipt.leaf"
            )
        if leaf.index != receipt.index or receipt.proof.size != cp.size:
            raise ProofError(
                "the receipt's index or size disagrees with its leaf/checkpoint", check="receipt.index"
            )
        verify_inclusion(
            leaf_hash=leaf.hash, index=leaf.index, size=cp.size, proof=receipt.proof.hashes, root=cp.root
        )
        self._advance(cp)
        return leaf

    def observe(self, cp: VerifiedCheckpoint) -> None:
        """Accept a verified checkpoint seen elsewhere (reads, policy receipts) only if it is
        consistent with every checkpoint this agent saw (the log did not fork)."""
        self._advance(cp)

    def _advance(self, cp: VerifiedCheckpoint) -> None:
        if self.state is None:
            self._advance_in_memory(cp)
            return
        # Under the state's lock: what this agent (or any other process sharing the state)
        # verified before must be extended, with proofs from the transport.
        try:
            with self.state.locked(self.log_key) as update:
                remembered = update.remembered
                if self.checkpoint is not None and (
                    remembered is None or remembered.size < self.checkpoint.size
                ):
                    self._advance_in_memory(cp)
                update.advance(cp, self.transport.consistency)
                self.checkpoint = update.remembered
        except StateError as e:
            if e.check != "state.io":
                raise  # a rollback or a fork: the log is not what this agent verified before
            # The directory cannot be used (a sandbox, a full disk). A receipt comes after the
            # service committed the entry, so failing here would answer a write that is in the
            # log as a failure, and a retry would write it twice: check
            # it against this process's last checkpoint instead, as without a state directory.
            _log.warning("verifier state unusable, checking against this process's checkpoints: %s", e)
            self._advance_in_memory(cp)

    def _advance_in_memory(self, cp: VerifiedCheckpoint) -> None:
        last = self.checkpoint
        if last is None:
            self.checkpoint = cp
            return
        old, new = (last, cp) if last.size <= cp.size else (cp, last)
        proof = self.transport.consistency(old.size, new.size)
        verify_consistency(
            old_size=old.size, new_size=new.size, old_root=old.root, new_root=new.root, proof=proof
        )
        self.checkpoint = new

    def _submit(self, subs: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        receipts = self.transport.submit(subs, operator=operator)
        if len(receipts) != len(subs):
            raise ProofError("the log returned a different number of receipts", check="receipt.count")
        for sub, r in zip(subs, receipts, strict=True):
            leaf = self._check_receipt(sub, r)
            # Heads come from the verified leaf, not from the receipt's other fields.
            self.heads[leaf.envelope.kind] = StreamState(leaf.envelope.version, leaf.hash.hex())
        return receipts

    # -- operations -------------------------------------------------------------------

    def _with_retry(
        self, kind: str, build: Callable[[int, str | None], Submission], *, operator: bool = False
    ) -> Receipt:
        version, prev = self._next(kind)
        for attempt in range(self.max_retries + 1):
            try:
                return self._submit([build(version, prev)], operator=operator)[0]
            except ConflictError as e:
                if attempt == self.max_retries:
                    raise
                version = e.next_version
                prev = e.head_leaf_hash
        raise AssertionError("unreachable")  # pragma: no cover

    def register(self, body: Mapping[str, Any] | None = None) -> Receipt:
        """Register this agent's key (the transport must carry operator authority)."""
        return self._with_retry(
            "key.registered",
            lambda v, p: self.signer.registration(client_time_us=self.clock(), version=v, prev=p, body=body),
            operator=True,
        )

    def append(self, kind: str, body: Mapping[str, Any]) -> Receipt:
        """Sign and append one event to stream (this agent, ``kind``); retries conflicts."""
        return self._with_retry(
            kind, lambda v, p: self.signer.event(kind, body, version=v, prev=p, client_time_us=self.clock())
        )

    def append_many(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Receipt]:
        """Append events of *distinct* streams in one atomic batch (no retry)."""
        kinds = [k for k, _ in events]
        if len(set(kinds)) != len(kinds):
            raise MalformedError(
                "one batch holds at most one event per stream: prev is fixed only when the log assigns it",
                check="submission.stream",
            )
        subs = []
        for kind, body in events:
            version, prev = self._next(kind)
            subs.append(
                self.signer.event(kind, body, version=version, prev=prev, client_time_us=self.clock())
            )
        return self._submit(subs)

    def rotate(self, new_key: Ed25519PrivateKey | None = None) -> Receipt:
        """Hand over to a new key (signed by the current one); later events use the new key."""
        new_key = new_key or Ed25519PrivateKey.generate()
        receipt = self._with_retry(
            "key.rotated",
            lambda v, p: self.signer.event(
                "key.rotated", {}, version=v, prev=p, client_time_us=self.clock(), new_key=new_key
            ),
        )
        self.signer = AgentSigner(self.signer.agent, new_key, origin=self.signer.origin)
        return receipt

    def revoke(self, reason: str = "") -> Receipt:
        """Revoke this agent's active key; the agent cannot sign until re-registered."""
        return self._with_retry(
            "key.revoked",
            lambda v, p: self.signer.event(
                "key.revoked", {"reason": reason}, version=v, prev=p, client_time_us=self.clock()
            ),
        )
