"""Envelopes, leaves and key history: strict parsing, signatures, tamper resistance."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from verifier.errors import (
    CanonicalFormError,
    KeyStateError,
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    SignatureError,
    UnknownKeyError,
    VerificationError,
)
from verifier.event import (
    POLICY_AGENT,
    Envelope,
    Leaf,
    agent_key_id,
    body_commitment,
    sign_event,
    sign_pop,
    verify_body,
)
from verifier.jcs import canonical_bytes
from verifier.keys import KeyHistory
from verifier.merkle import inclusion_ranges, leaf_hash, root_from_leaf_hashes, verify_inclusion
from verifier.note import VerifierKey, checkpoint_text, format_verifier_key, sign_note, verify_checkpoint

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "specs/vectors/event.json").read_text())
ORIGIN = VECTORS["origin"]
LEAVES = [ev["leaf"].encode() for ev in VECTORS["events"]]
LOG_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
VKEY = VerifierKey.parse(format_verifier_key(ORIGIN, LOG_KEY.public_key().public_bytes_raw()))
HASHES = [leaf_hash(x) for x in LEAVES]
SIZE = len(LEAVES)
NOTE = sign_note(checkpoint_text(ORIGIN, SIZE, root_from_leaf_hashes(HASHES)), ORIGIN, LOG_KEY)
INDEX = 2
PROOF = b"".join(root_from_leaf_hashes(HASHES[lo:hi]) for lo, hi in inclusion_ranges(INDEX, SIZE))


def verify_entry(leaf_bytes: bytes, proof: bytes, note: bytes) -> None:
    """What an offline verifier does with one entry: checkpoint, leaf, key, inclusion."""
    cp = verify_checkpoint(note, VKEY)
    history = KeyHistory()
    for raw in LEAVES[:INDEX]:
        history.check_and_apply(Leaf.from_bytes(raw, origin=ORIGIN))
    leaf = Leaf.from_bytes(leaf_bytes, origin=cp.origin)
    if leaf.index != INDEX:
        raise MalformedError("leaf index is not the proven position", check="leaf.index")
    history.check_and_apply(leaf)
    if len(proof) % 32:
        raise MalformedError("proof is not a list of hashes", check="proof.format")
    hashes = [proof[i : i + 32] for i in range(0, len(proof), 32)]
    verify_inclusion(leaf_hash=leaf.hash, index=leaf.index, size=cp.size, proof=hashes, root=cp.root)


def test_the_untampered_entry_verifies() -> None:
    verify_entry(LEAVES[INDEX], PROOF, NOTE)


def _flip(data: bytes, pos: int, value: int) -> bytes:
    return data[:pos] + bytes([value]) + data[pos + 1 :]


@given(st.data())
def test_flipping_any_byte_of_leaf_proof_or_checkpoint_is_rejected(data: st.DataObject) -> None:
    which = data.draw(st.sampled_from(["leaf", "proof", "checkpoint"]))
    target = {"leaf": LEAVES[INDEX], "proof": PROOF, "checkpoint": NOTE}[which]
    pos = data.draw(st.integers(min_value=0, max_value=len(target) - 1))
    value = data.draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != target[pos]))
    args = {"leaf_bytes": LEAVES[INDEX], "proof": PROOF, "note": NOTE}
    args[{"leaf": "leaf_bytes", "proof": "proof", "checkpoint": "note"}[which]] = _flip(target, pos, value)
    with pytest.raises(VerificationError):
        verify_entry(**args)


@given(st.integers(min_value=0, max_value=63), st.integers(min_value=0, max_value=7))
def test_flipping_any_bit_of_the_agent_signature_is_rejected(byte: int, bit: int) -> None:
    leaf = Leaf.from_bytes(LEAVES[INDEX])
    sig = bytearray(leaf.signature)
    sig[byte] ^= 1 << bit
    forged = Leaf.build(
        index=leaf.index, timestamp_us=leaf.timestamp_us, envelope=leaf.envelope, signature=bytes(sig)
    )
    with pytest.raises(SignatureError):
        verify_entry(forged.raw, PROOF, NOTE)


def _leaf_obj() -> dict:
    return json.loads(LEAVES[INDEX])


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda o: o.update(extra=1), MalformedError),
        (lambda o: o.pop("timestamp_us"), MalformedError),
        (lambda o: o.update(format="engram.leaf/v2"), MalformedError),
        (lambda o: o.update(index=-1), MalformedError),
        (lambda o: o.update(timestamp_us=0), MalformedError),
        (lambda o: o.update(sig=o["sig"][:-4]), MalformedError),
        (lambda o: o["event"].update(v=2), MalformedError),
        (lambda o: o["event"].pop("prev"), MalformedError),
        (lambda o: o["event"].update(prev="00" * 31), MalformedError),
        (lambda o: o["event"].update(agent="Not An Id"), MalformedError),
        (lambda o: o["event"].update(kind="UPPER"), MalformedError),
        (lambda o: o["event"].update(key_id="xyz"), MalformedError),
        (lambda o: o["event"].update(origin="other.example/log"), OriginMismatchError),
        (lambda o: o["event"].update(version=0), MalformedError),  # version 0 has no prev
    ],
)
def test_malformed_leaves_are_rejected(mutate, error: type[VerificationError]) -> None:
    obj = _leaf_obj()
    mutate(obj)
    with pytest.raises(error):
        Leaf.from_bytes(canonical_bytes(obj), origin=ORIGIN)


def test_non_canonical_and_float_leaves_are_rejected() -> None:
    pretty = json.dumps(_leaf_obj(), indent=1).encode()
    with pytest.raises(CanonicalFormError):
        Leaf.from_bytes(pretty)
    with pytest.raises(CanonicalFormError):
        Leaf.from_bytes(LEAVES[INDEX].replace(b'"index":2', b'"index":2.0'))
    with pytest.raises(LimitExceededError):
        Leaf.from_bytes(LEAVES[INDEX], max_bytes=100)


def test_body_commitment_binds_salt_and_bytes() -> None:
    ev = VECTORS["events"][INDEX]
    env = Leaf.from_bytes(LEAVES[INDEX]).envelope
    salt = bytes.fromhex(ev["salt_hex"])
    assert verify_body(env, salt, ev["body_jcs"].encode()) == ev["body"]
    with pytest.raises(SignatureError):
        verify_body(env, bytes(16), ev["body_jcs"].encode())
    with pytest.raises(SignatureError):
        verify_body(env, salt, ev["body_jcs"].encode().replace(b"71", b"99"))
    with pytest.raises(CanonicalFormError):
        verify_body(env, salt, b'{"pact": "p-2"}')


# -- key history rules ------------------------------------------------------------------

A = Ed25519PrivateKey.from_private_bytes(bytes([1]) * 32)
B = Ed25519PrivateKey.from_private_bytes(bytes([2]) * 32)
C = Ed25519PrivateKey.from_private_bytes(bytes([3]) * 32)
P = Ed25519PrivateKey.from_private_bytes(bytes([4]) * 32)


class Log:
    """A tiny in-memory log to exercise key rules entry by entry."""

    def __init__(self) -> None:
        self.history = KeyHistory()
        self.heads: dict[tuple[str, str], tuple[int, str]] = {}
        self.index = 0
        self.appended: list[Leaf] = []

    def leaf(
        self, agent: str, kind: str, signer: Ed25519PrivateKey, new_key: Ed25519PrivateKey | None = None
    ) -> Leaf:
        version, prev = self.heads.get((agent, kind), (-1, None))
        body = canonical_bytes({})
        env = Envelope(
            origin=ORIGIN,
            agent=agent,
            key_id=agent_key_id(signer.public_key().public_bytes_raw()),
            kind=kind,
            version=version + 1,
            prev=prev,
            client_time_us=1,
            body_commitment=body_commitment(bytes(16), body),
            new_key=None if new_key is None else sign_pop(origin=ORIGIN, agent=agent, private_key=new_key),
        )
        return Leaf.build(
            index=self.index, timestamp_us=self.index + 1, envelope=env, signature=sign_event(env, signer)
        )

    def append(
        self, agent: str, kind: str, signer: Ed25519PrivateKey, new_key: Ed25519PrivateKey | None = None
    ) -> Leaf:
        leaf = self.leaf(agent, kind, signer, new_key)
        self.history.check_and_apply(Leaf.from_bytes(leaf.raw))
        self.heads[(agent, kind)] = (leaf.envelope.version, leaf.hash.hex())
        self.index += 1
        self.appended.append(leaf)
        return leaf


def test_rotation_keeps_history_valid_and_retires_the_old_key() -> None:
    log = Log()
    log.append("alice", "key.registered", A, A)
    log.append("alice", "pact.outcome", A)
    log.append("alice", "key.rotated", A, B)
    log.append("alice", "pact.outcome", B)
    with pytest.raises(KeyStateError, match="rotated"):
        log.append("alice", "pact.outcome", A)
    # Replaying the whole log from scratch accepts every entry, including those the old
    # key signed before the rotation.
    replay = KeyHistory()
    for lf in log.appended:
        replay.check_and_apply(lf)
    assert replay.active_key("alice") == agent_key_id(B.public_key().public_bytes_raw())
    assert len(log.appended) == 4


def test_revocation_by_the_agent_and_by_the_policy_key() -> None:
    log = Log()
    log.append(POLICY_AGENT, "key.registered", P, P)
    log.append("alice", "key.registered", A, A)
    log.append("alice", "key.revoked", A)
    with pytest.raises(KeyStateError, match="revoked"):
        log.append("alice", "pact.outcome", A)
    with pytest.raises(KeyStateError):  # a revoked key cannot come back
        log.append("alice", "key.registered", A, A)
    log.append("alice", "key.registered", B, B)  # a new key can be registered afterwards
    log.append("alice", "pact.outcome", B)
    log.append("alice", "key.revoked", P)  # forced revocation by the ledger policy
    with pytest.raises(KeyStateError):
        log.append("alice", "pact.outcome", B)


def test_foreign_unknown_and_self_registered_keys() -> None:
    log = Log()
    log.append("alice", "key.registered", A, A)
    log.append("bob", "key.registered", B, B)
    with pytest.raises(KeyStateError, match="belongs to"):
        log.append("alice", "pact.outcome", B)  # bob's key cannot sign for alice
    with pytest.raises(UnknownKeyError):
        log.append("alice", "pact.outcome", C)  # an unregistered (attacker) key
    with pytest.raises(KeyStateError, match="already has an active key"):
        log.append("alice", "key.registered", C, C)
    with pytest.raises(KeyStateError, match="already registered"):
        log.append("carol", "key.registered", A, A)  # one key, one agent
    with pytest.raises(KeyStateError):
        log.append("bob", "key.revoked", A)  # alice cannot revoke bob


def test_registration_needs_a_valid_proof_of_possession() -> None:
    log = Log()
    leaf = log.leaf("alice", "key.registered", A, A)
    obj = json.loads(leaf.raw)
    obj["event"]["new_key"]["pop"] = base64.b64encode(bytes(64)).decode()
    env = Envelope.from_obj(obj["event"])
    forged = Leaf.build(index=0, timestamp_us=1, envelope=env, signature=sign_event(env, A))
    with pytest.raises(SignatureError, match="possession"):
        KeyHistory().check_and_apply(Leaf.from_bytes(forged.raw))
    # A key.registered signed by a different key than the one it registers.
    env2 = Envelope.from_obj({**json.loads(leaf.raw)["event"]})
    wrong = Leaf.build(index=0, timestamp_us=1, envelope=env2, signature=sign_event(env2, B))
    with pytest.raises(SignatureError):
        KeyHistory().check_and_apply(Leaf.from_bytes(wrong.raw))


def test_pop_is_bound_to_origin_and_agent() -> None:
    nk = sign_pop(origin="other.example/log", agent="alice", private_key=A)
    env = Envelope(
        origin=ORIGIN,
        agent="alice",
        key_id=nk.key_id,
        kind="key.registered",
        version=0,
        prev=None,
        client_time_us=1,
        body_commitment="00" * 32,
        new_key=nk,
    )
    with pytest.raises(SignatureError):
        KeyHistory().check_and_apply(
            Leaf.build(index=0, timestamp_us=1, envelope=env, signature=sign_event(env, A))
        )
