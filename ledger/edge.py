"""The log's prepare edge: every stateless check of a signed event, before any lock.

In order of cost (specs/leaf.md §3, step 1): the bytes' shapes; the envelope, parsed once,
is canonical JCS, well-formed, names this log's origin and a registered kind; the caller's
authority (ledger-reserved agent ids, operator-only registrations); the signature under the
key the envelope names (a key this process has seen; else the writer checks it under the
lock); the composition root's admission (rate limits); then the body: its size, its salted
commitment, its kind's schema, and the write gate. The first failure raises a typed error
naming its check; nothing is written. What depends on log state (the key valid at the
entry's index, the stream's version and ``prev``) is the append pipeline's
(:mod:`ledger.append`).

Also here: the small values the log is handed (:class:`AppendRules`, :class:`PolicyEvent`,
the :data:`Clock`), so that the append side and the composition root share them without
importing each other.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.protocol.errors import (
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    RejectedEventError,
    UnknownKeyError,
)
from engram.protocol.gate import WriteGate
from engram.protocol.kinds import gated_texts, require_kind, validate_body
from engram.protocol.redact import iter_strings
from engram.protocol.wire import Submission
from ledger.envelopes import Prepared, parse_envelope
from ledger.storage.store import SqlStore
from verifier.event import SALT_SIZE, Envelope, verify_body, verify_event_signature

__all__ = [
    "Admit",
    "AppendRules",
    "BatchValidator",
    "Clock",
    "PolicyEvent",
    "PrepareEdge",
    "system_clock_us",
]

Clock = Callable[[], int]

#: (agent, public key) of the keys this process has seen, by key id. A key id is a
#: domain-separated hash of the public key itself (verifier.event.agent_key_id) and is
#: registered for one agent once (its table's primary key), so this map can never be
#: wrong: it says which key a key id names, never whether that key is valid (authorize
#: decides that, under the lock, from the key state at the entry's index).
_KEY_CACHE_ENTRIES = 65_536


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


#: What :meth:`PrepareEdge.prepare` calls once the signature verified, before the body is read:
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


class PrepareEdge:
    """The stateless checks of one log (its origin, body limit and rules), with the caches
    that spare repeated work: the public keys seen, by key id, and the signatures already
    verified for exactly these bytes."""

    def __init__(self, store: SqlStore, origin: str, *, max_body_bytes: int, rules: AppendRules) -> None:
        self.store = store
        self.origin = origin
        self.max_body_bytes = max_body_bytes
        self.rules = rules
        self._keys_lock = threading.Lock()
        self._public_keys: dict[str, tuple[str, bytes]] = {}
        #: signature -> (envelope bytes, key) event_signer verified, for the append to come
        self._preverified: OrderedDict[bytes, tuple[bytes, bytes]] = OrderedDict()

    @property
    def gate(self) -> WriteGate:
        """The write gate this log runs (shared with the memory service by the root)."""
        return self.rules.gate

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
        texts = gated_texts(envelope.kind, body)
        # Every string of the body is scanned for secrets once: the gated texts are strings
        # of the body, so the whole-body check covers them (a gated text that is not one of
        # them, e.g. a non-string the schema let through, is checked on its own).
        self.rules.gate.check_stored(texts, secrets=False)
        self.rules.gate.check_body_secrets(body)
        if texts:
            strings = {s for _, s in iter_strings(body)}
            self.rules.gate.check_no_secrets([t for t in texts if t not in strings])
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
        """Check the signature before the lock, with the key the envelope names (the
        writer then only re-checks what depends on log state, i.e. that this key is the
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
