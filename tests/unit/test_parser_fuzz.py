"""Every parser answers a value or its typed error, whatever the bytes (issue 15, Deliver 4):
envelopes and leaves (arbitrary and mutated valid bytes), signed notes, checkpoints, verifier
and witness keys, witness policies, inclusion and consistency proofs, tile paths and signed-
request headers. "Typed" means a VerificationError (or the API's EngramError) naming a
check, never another exception; every example is bounded (max sizes below) and hypothesis'
deadline catches a parser that hangs. The bundle, tiles export, CLI and share-token fuzzing
is in tests/contract/test_verifier_fuzz.py; API bodies in tests/integration/test_api_schemathesis.py."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.auth import RequestAuthenticator
from api.fastpath import _tile_key
from api.routes.transparency import _tile_index
from engram.protocol.errors import EngramError
from engram.protocol.signer import AgentSigner
from ledger.envelopes import parse_envelope
from verifier.errors import VerificationError
from verifier.event import Envelope, Leaf
from verifier.merkle import verify_consistency, verify_inclusion
from verifier.note import Checkpoint, SignedNote, VerifierKey, sign_note, verify_checkpoint
from verifier.witness import WitnessKey, WitnessPolicy

ORIGIN = "fuzz.example/log"
FUZZ = settings(
    max_examples=int(os.environ.get("ENGRAM_FUZZ_EXAMPLES", "300")),
    deadline=2000,  # milliseconds: a parser that hangs fails the example
    suppress_health_check=[HealthCheck.too_slow],
)
LOG_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def _outcome(parse: Callable[[Any], Any], data: Any) -> None:
    """``parse(data)`` returns, or raises a typed error; anything else fails the example."""
    error: EngramError | None = None
    try:
        parse(data)
    except EngramError as e:
        error = e
    if isinstance(error, VerificationError):
        assert error.check and isinstance(error.check, str)


def _valid_leaf() -> bytes:
    signer = AgentSigner("alice", Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))), origin=ORIGIN)
    sub = signer.event("commitment", {"promise": "fuzz me"}, version=0, prev=None, client_time_us=1)
    env = parse_envelope(sub.envelope)
    return Leaf.build(index=7, timestamp_us=1_900_000_000_000_000, envelope=env, signature=sub.signature).raw


VALID_LEAF = _valid_leaf()
VALID_NOTE = sign_note(Checkpoint(origin=ORIGIN, size=3, root=bytes(32)).text(), ORIGIN, LOG_KEY)


@st.composite
def mutated(draw: st.DrawFn, valid: bytes) -> bytes:
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif data:
            del data[at]
    return bytes(data)


@FUZZ
@given(st.binary(max_size=2048) | mutated(VALID_LEAF))
def test_leaves(data: bytes) -> None:
    _outcome(Leaf.from_bytes, data)


@FUZZ
@given(st.binary(max_size=2048) | mutated(Leaf.from_bytes(VALID_LEAF).envelope_jcs()))
def test_envelopes(data: bytes) -> None:
    _outcome(Envelope.from_bytes, data)


@FUZZ
@given(st.binary(max_size=1024) | mutated(VALID_NOTE))
def test_notes_and_checkpoints(data: bytes) -> None:
    key = VerifierKey.parse(_vkey())
    _outcome(SignedNote.parse, data)
    _outcome(lambda d: verify_checkpoint(d, key), data)
    _outcome(Checkpoint.parse_text, data.decode("utf-8", "replace"))


def _vkey() -> str:
    from engram.protocol.keyfiles import LogKey

    return LogKey(ORIGIN, LOG_KEY).vkey


@FUZZ
@given(st.text(max_size=300) | st.builds(lambda s: _vkey()[: len(s)] + s, st.text(max_size=40)))
def test_verifier_and_witness_keys(text: str) -> None:
    _outcome(VerifierKey.parse, text)
    _outcome(WitnessKey.parse, text)


@FUZZ
@given(st.binary(max_size=1024) | st.text(max_size=400).map(str.encode))
def test_witness_policies(data: bytes) -> None:
    _outcome(WitnessPolicy.parse, data)


hashes = st.lists(st.binary(min_size=0, max_size=40), max_size=70)
sizes = st.integers(min_value=-5, max_value=2**64) | st.integers(min_value=0, max_value=64)


@FUZZ
@given(sizes, sizes, hashes, st.binary(max_size=40), st.binary(max_size=40))
def test_proofs(a: int, b: int, proof: list[bytes], h1: bytes, h2: bytes) -> None:
    _outcome(lambda _: verify_inclusion(leaf_hash=h1, index=a, size=b, proof=proof, root=h2), None)
    _outcome(
        lambda _: verify_consistency(old_size=a, new_size=b, old_root=h1, new_root=h2, proof=proof), None
    )


@FUZZ
@given(st.text(alphabet="0123456789x/.p-entries", max_size=60) | st.text(max_size=60))
def test_tile_paths(rest: str) -> None:
    _outcome(_tile_index, rest)
    assert _tile_key("/tile/" + rest) is None or isinstance(_tile_key("/tile/" + rest), tuple)


class _NoKeys:
    def active_key_id(self, agent: str) -> None:
        return None

    def keys_of(self, agent: str) -> list[Any]:
        return []


header_values = st.text(max_size=200) | st.sampled_from(
    ["agent:alice", "ed25519:" + "ab" * 32, "1900000000", "-1", "AAAA", "", "agent:", "ed25519:zz"]
)


@FUZZ
@given(header_values, header_values, header_values, header_values, st.text(max_size=100))
def test_signed_request_headers(signer: str, ts: str, nonce: str, sig: str, target: str) -> None:
    auth = RequestAuthenticator(_NoKeys(), ORIGIN, clock=lambda: 1_900_000_000.0)  # type: ignore[arg-type]
    headers = {
        "engram-signer": signer,
        "engram-timestamp": ts,
        "engram-nonce": nonce,
        "engram-signature": sig,
    }
    with pytest.raises(VerificationError) as e:  # nothing here is a valid signature
        auth.verify(method="GET", target=target, headers=headers, body=b"")
    assert e.value.check.startswith("auth")
