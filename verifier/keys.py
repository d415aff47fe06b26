"""Agent key history: which key may sign which event at which log position.

Trust role: the log itself is the key registry. An event's signature is checked against the
key that was valid for its agent *at that index*, derived only from earlier log entries, so
a verifier never trusts a key shipped beside the data (the attack that breaks verifiers
that read keys from the bundle or from the row being checked).

Rules (specs/event-envelope.md §5), applied in log order to entry ``i``:

1. ``key.registered``: the envelope's ``key_id`` is the new key's id (self-signed, so the
   signature plus the proof of possession show control of the key); the agent has no active
   key; the key id was never seen before. Afterwards the key is the agent's active key.
2. ``key.rotated``: signed by the agent's active key; introduces a never-seen key with a
   valid proof of possession. Afterwards the old key is retired at ``i`` and the new key is
   active; events after ``i`` signed by the old key are rejected.
3. ``key.revoked``: signed by the agent's active key, or by the active key of the ledger's
   policy agent (forced revocation of a lost or compromised key). Afterwards the agent has
   no active key until a new ``key.registered``.
4. Policy kinds (``memory.distilled``, ``memory.tier_changed``, ``memory.archived``,
   ``memory.replaced``, ``memory.accessed``): decisions the ledger takes about an agent's memory, written in that
   agent's streams and signed by the active key of the ledger's policy agent, never by the
   agent. ``memory.decay_exempted`` may be signed by either.
5. Every other kind: signed by the agent's active key. The policy key can never sign an
   agent's records (pact outcomes, evaluations, commitments, memories it wrote).

Events signed before a rotation or revocation stay valid: history does not break when a key
is retired (the failure that makes some peers reject their own past after a rotation).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field, replace
from typing import Protocol

from verifier.errors import KeyStateError, MalformedError, UnknownKeyError
from verifier.event import (
    AGENT_OR_POLICY_KINDS,
    POLICY_AGENT,
    POLICY_KINDS,
    Envelope,
    Leaf,
    agent_key_id,
    verify_event_signature,
    verify_pop,
)

__all__ = [
    "KeyChange",
    "KeyDecision",
    "KeyHistory",
    "KeyRecord",
    "KeyView",
    "authorize",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRecord:
    """An agent key and the log span in which it may sign."""

    key_id: str
    agent: str
    public_key: bytes
    added_at: int
    retired_at: int | None = None
    retired_how: str | None = None  # "rotated" | "revoked"


class KeyView(Protocol):
    """Read access to key state *before* the entry being checked."""

    def key(self, key_id: str) -> KeyRecord | None: ...

    def active_key(self, agent: str) -> str | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyChange:
    """State change caused by a key event: a new active key and/or a retired key."""

    add: KeyRecord | None = None
    retire_key_id: str | None = None
    retire_how: str | None = None
    agent: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyDecision:
    """The key that must have signed the entry, and what applying the entry changes."""

    signer_public_key: bytes
    change: KeyChange | None


def authorize(view: KeyView, envelope: Envelope, index: int) -> KeyDecision:
    """Decide which key must sign ``envelope`` at ``index`` and what it changes.

    Raises:
        UnknownKeyError: the signing key id was never registered.
        KeyStateError: the key is retired, belongs to another agent, or the agent's key
            state does not allow this key event.
        SignatureError: a new key's proof of possession fails.
    """
    # 1. a registration is signed by the key it registers (no key to look up yet)
    if envelope.kind == "key.registered":
        return _registered(view, envelope, index)
    # 2. every other entry names a registered key that is not retired
    signer = _live_signer(view, envelope)
    # 3. a revocation: the agent's active key, or the ledger's policy key by force
    if envelope.kind == "key.revoked":
        return _revoked(view, envelope, signer)
    # 4. a policy decision about an agent's memory: the ledger's active policy key only
    policy_signed = signer.agent == POLICY_AGENT and envelope.agent != POLICY_AGENT
    if envelope.kind in POLICY_KINDS or (envelope.kind in AGENT_OR_POLICY_KINDS and policy_signed):
        if signer.agent != POLICY_AGENT or view.active_key(POLICY_AGENT) != signer.key_id:
            raise KeyStateError(
                f"{envelope.kind} is signed by the ledger's active policy key only", check="key.authority"
            )
        return KeyDecision(signer_public_key=signer.public_key, change=None)
    # 5. anything else: the agent's own active key (a rotation also proves the new key)
    if signer.agent != envelope.agent:
        raise KeyStateError(
            f"key {signer.key_id} belongs to {signer.agent}, not {envelope.agent}", check="key.owner"
        )
    if view.active_key(envelope.agent) != signer.key_id:
        raise KeyStateError(f"key {signer.key_id} is not the agent's active key", check="key.state")
    if envelope.kind == "key.rotated":
        return _rotated(view, envelope, signer, index)
    if envelope.new_key is not None:  # pragma: no cover - Envelope.from_obj forbids this
        raise MalformedError("only key events carry new_key", check="envelope.new_key")
    return KeyDecision(signer_public_key=signer.public_key, change=None)


def _registered(view: KeyView, envelope: Envelope, index: int) -> KeyDecision:
    nk = verify_pop(envelope)
    if envelope.key_id != nk.key_id:
        raise KeyStateError("key.registered must be signed by the key it registers", check="key.registered")
    if view.key(nk.key_id) is not None:
        raise KeyStateError(f"key {nk.key_id} is already registered", check="key.registered")
    if view.active_key(envelope.agent) is not None:
        raise KeyStateError(
            f"agent {envelope.agent} already has an active key; rotate it instead",
            check="key.registered",
        )
    record = KeyRecord(key_id=nk.key_id, agent=envelope.agent, public_key=nk.public_key, added_at=index)
    return KeyDecision(signer_public_key=nk.public_key, change=KeyChange(add=record, agent=envelope.agent))


def _live_signer(view: KeyView, envelope: Envelope) -> KeyRecord:
    signer = view.key(envelope.key_id)
    if signer is None:
        raise UnknownKeyError(f"key {envelope.key_id} is not registered in this log", check="key.unknown")
    if signer.retired_at is not None:
        raise KeyStateError(
            f"key {signer.key_id} was {signer.retired_how} at index {signer.retired_at}",
            check=f"key.{signer.retired_how}",
        )
    return signer


def _revoked(view: KeyView, envelope: Envelope, signer: KeyRecord) -> KeyDecision:
    target = view.active_key(envelope.agent)
    if target is None:
        raise KeyStateError(f"agent {envelope.agent} has no active key to revoke", check="key.revoked")
    own = signer.agent == envelope.agent and signer.key_id == target
    forced = signer.agent == POLICY_AGENT and view.active_key(POLICY_AGENT) == signer.key_id
    if not (own or forced):
        raise KeyStateError(
            "key.revoked must be signed by the agent's active key or the ledger policy key",
            check="key.revoked",
        )
    return KeyDecision(
        signer_public_key=signer.public_key,
        change=KeyChange(retire_key_id=target, retire_how="revoked", agent=envelope.agent),
    )


def _rotated(view: KeyView, envelope: Envelope, signer: KeyRecord, index: int) -> KeyDecision:
    nk = verify_pop(envelope)
    if view.key(nk.key_id) is not None:
        raise KeyStateError(f"key {nk.key_id} is already registered", check="key.rotated")
    record = KeyRecord(key_id=nk.key_id, agent=envelope.agent, public_key=nk.public_key, added_at=index)
    return KeyDecision(
        signer_public_key=signer.public_key,
        change=KeyChange(add=record, retire_key_id=signer.key_id, retire_how="rotated", agent=envelope.agent),
    )


@dataclass(slots=True)
class KeyHistory:
    """In-memory key state, advanced entry by entry in log order (used for replay)."""

    keys: dict[str, KeyRecord] = field(default_factory=dict)
    active: dict[str, str] = field(default_factory=dict)

    def key(self, key_id: str) -> KeyRecord | None:
        return self.keys.get(key_id)

    def active_key(self, agent: str) -> str | None:
        return self.active.get(agent)

    def apply(self, change: KeyChange | None, index: int) -> None:
        """Apply a decision's change as of entry ``index``."""
        if change is None:
            return
        if change.retire_key_id is not None:
            old = self.keys[change.retire_key_id]
            self.keys[old.key_id] = replace(old, retired_at=index, retired_how=change.retire_how)
            if self.active.get(old.agent) == old.key_id:
                del self.active[old.agent]
        if change.add is not None:
            self.keys[change.add.key_id] = change.add
            self.active[change.add.agent] = change.add.key_id

    def check_and_apply(self, leaf: Leaf, *, verified_with: bytes | None = None) -> KeyDecision:
        """Authorize the leaf, verify its agent signature, then advance the state.

        ``verified_with``: a public key this leaf's signature was already verified under
        (verifier.parallel); the Ed25519 check is skipped only if it is exactly the key
        authorized here and the key the envelope names."""
        decision = authorize(self, leaf.envelope, leaf.index)
        key = decision.signer_public_key
        if not (
            verified_with is not None
            and hmac.compare_digest(verified_with, key)
            and hmac.compare_digest(agent_key_id(key), leaf.envelope.key_id)
        ):
            verify_event_signature(leaf.envelope, leaf.signature, key, envelope_jcs=leaf.envelope_jcs())
        self.apply(decision.change, leaf.index)
        return decision
