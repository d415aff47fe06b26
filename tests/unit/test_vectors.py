"""Known-answer vectors in specs/vectors, loaded by both the verifier and the ledger side."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.httpsign import request_signing_input, sign_request
from engram.protocol.signer import AgentSigner
from tests.tools.make_vectors import all_vectors, render
from verifier.errors import ProofError, VerificationError
from verifier.event import Envelope, Leaf, verify_body
from verifier.jcs import canonical_bytes, parse_canonical, parse_strict
from verifier.keys import KeyHistory
from verifier.merkle import (
    EMPTY_ROOT,
    leaf_hash,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)
from verifier.note import Checkpoint, SignedNote, VerifierKey, verify_checkpoint
from verifier.oracle import verify_oracle_statement

VECTORS = Path(__file__).resolve().parents[2] / "specs" / "vectors"


def load(name: str) -> dict:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "name",
    [
        "merkle.json",
        "checkpoint.json",
        "event.json",
        "jcs.json",
        "http-request.json",
        "oracle.json",
        "distilled.json",
    ],
)
def test_committed_vectors_are_what_the_generator_writes(name: str) -> None:
    # A format change must be deliberate: regenerate, review the diff, bump the spec version.
    assert (VECTORS / name).read_text(encoding="utf-8") == render(all_vectors()[name])


def test_rfc6962_roots_for_sizes_0_to_8() -> None:
    v = load("merkle.json")
    hashes = [leaf_hash(bytes.fromhex(x)) for x in v["leaves"]]
    assert EMPTY_ROOT.hex() == v["roots"][0]
    for n, root in enumerate(v["roots"]):
        assert root_from_leaf_hashes(hashes[:n]).hex() == root


def test_inclusion_vectors_verify_and_fail_when_tampered() -> None:
    v = load("merkle.json")
    hashes = [leaf_hash(bytes.fromhex(x)) for x in v["leaves"]]
    assert len(v["inclusion"]) == 36
    for case in v["inclusion"]:
        proof = [bytes.fromhex(h) for h in case["proof"]]
        root = bytes.fromhex(v["roots"][case["size"]])
        ok = verify_inclusion(
            leaf_hash=hashes[case["index"]], index=case["index"], size=case["size"], proof=proof, root=root
        )
        assert ok.root == root
        if proof:
            bad = [bytearray(p) for p in proof]
            bad[-1][0] ^= 1
            with pytest.raises(ProofError):
                verify_inclusion(
                    leaf_hash=hashes[case["index"]],
                    index=case["index"],
                    size=case["size"],
                    proof=[bytes(b) for b in bad],
                    root=root,
                )
        if case["size"] > 1:
            with pytest.raises(ProofError):  # right proof, wrong leaf position
                verify_inclusion(
                    leaf_hash=hashes[case["index"]],
                    index=(case["index"] + 1) % case["size"],
                    size=case["size"],
                    proof=proof,
                    root=root,
                )


def test_consistency_vectors_verify() -> None:
    v = load("merkle.json")
    assert len(v["consistency"]) == 44
    for case in v["consistency"]:
        m, n = case["old_size"], case["new_size"]
        proof = [bytes.fromhex(h) for h in case["proof"]]
        verify_consistency(
            old_size=m,
            new_size=n,
            old_root=bytes.fromhex(v["roots"][m]),
            new_root=bytes.fromhex(v["roots"][n]),
            proof=proof,
        )
        if 0 < m < n:
            with pytest.raises(ProofError):
                verify_consistency(
                    old_size=m,
                    new_size=n,
                    old_root=bytes.fromhex(v["roots"][m - 1]),
                    new_root=bytes.fromhex(v["roots"][n]),
                    proof=proof,
                )


@pytest.mark.parametrize("case", load("merkle.json")["invalid_inclusion"], ids=lambda c: c["why"])
def test_invalid_inclusion_vectors(case: dict) -> None:
    v = load("merkle.json")
    hashes = [leaf_hash(bytes.fromhex(x)) for x in v["leaves"]]
    root = root_from_leaf_hashes(hashes[: case["size"]])
    lh = hashes[min(case["index"], 7)]
    with pytest.raises(ProofError) as e:
        verify_inclusion(
            leaf_hash=lh,
            index=case["index"],
            size=case["size"],
            proof=[bytes.fromhex(h) for h in case["proof"]],
            root=root,
        )
    assert e.value.check == case["check"]


def test_odd_node_is_never_duplicated() -> None:
    v = load("merkle.json")["odd_duplication"]
    assert v["root_abc"] != v["root_abcc"]


def test_c2sp_example_notes_verify() -> None:
    for case in load("checkpoint.json")["external"]:
        key = VerifierKey.parse(case["vkey"])
        assert SignedNote.parse(case["note"].encode()).verify([key]) == (key,)


def test_engram_checkpoint_vectors() -> None:
    v = load("checkpoint.json")
    key = VerifierKey.parse(v["log_vkey"])
    seed = bytes.fromhex(v["log_seed_hex"])
    assert key.public_key == Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    for case in v["checkpoints"]:
        cp = verify_checkpoint(case["note"].encode(), key)
        assert (cp.origin, cp.size, cp.root.hex()) == (case["origin"], case["size"], case["root"])


@pytest.mark.parametrize("case", load("checkpoint.json")["invalid_checkpoints"], ids=lambda c: c["why"])
def test_invalid_checkpoint_texts(case: dict) -> None:
    with pytest.raises(VerificationError) as e:
        Checkpoint.parse_text(case["text"])
    assert e.value.check == case["check"]


def test_event_vectors_verify_with_key_history() -> None:
    v = load("event.json")
    history = KeyHistory()
    for ev in v["events"]:
        leaf = Leaf.from_bytes(ev["leaf"].encode(), origin=v["origin"])
        assert leaf.hash.hex() == ev["leaf_hash"]
        assert leaf.envelope.canonical().decode() == ev["envelope_jcs"]
        history.check_and_apply(leaf)
        verify_body(leaf.envelope, bytes.fromhex(ev["salt_hex"]), ev["body_jcs"].encode())
    assert history.active_key("vector-agent") != v["agent_key_id"]  # rotated at the end


def test_ledger_sdk_reproduces_event_vectors() -> None:
    """The agent SDK, given the vector's seed, salt and time, signs the same bytes."""
    v = load("event.json")
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(v["agent_seed_hex"]))
    for ev in v["events"][1:3]:
        env = Envelope.from_bytes(ev["envelope_jcs"].encode())
        signer = AgentSigner(
            v["agent"], key, origin=v["origin"], rand=lambda n, s=ev["salt_hex"]: bytes.fromhex(s)
        )
        sub = signer.event(
            env.kind, ev["body"], version=env.version, prev=env.prev, client_time_us=env.client_time_us
        )
        assert sub.envelope.decode() == ev["envelope_jcs"]
        assert base64.b64encode(sub.signature).decode() == ev["signature_b64"]
        assert sub.body.decode() == ev["body_jcs"]
        leaf = Leaf.build(
            index=ev["index"], timestamp_us=ev["timestamp_us"], envelope=env, signature=sub.signature
        )
        assert leaf.raw.decode() == ev["leaf"]


def test_jcs_vectors() -> None:
    v = load("jcs.json")
    for case in v["valid"]:
        assert (
            canonical_bytes(parse_strict(case["input"].encode(), max_bytes=1 << 16)).decode()
            == case["canonical"]
        )
        parse_canonical(case["canonical"].encode(), max_bytes=1 << 16)
    for case in v["invalid"]:
        with pytest.raises(VerificationError) as e:
            parse_strict(case["input"].encode(), max_bytes=1 << 16)
        assert e.value.check == case["check"], case
    for text in v["non_canonical"]:
        with pytest.raises(VerificationError):
            parse_canonical(text.encode(), max_bytes=1 << 16)


def test_http_request_vectors_match_the_ledger_signer() -> None:
    v = load("http-request.json")
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96)))
    assert key.public_key().public_bytes_raw().hex() == v["public_key"]
    for c in v["cases"]:
        args = {k: c[k] for k in ("origin", "method", "target", "signer", "timestamp", "nonce")}
        assert request_signing_input(**args, body=c["body"].encode()) == c["signed_bytes"].encode()
        headers = sign_request(
            key,
            origin=c["origin"],
            method=c["method"],
            target=c["target"],
            signer=c["signer"],
            body=c["body"].encode(),
            now_s=c["timestamp"],
            nonce=c["nonce"],
        )
        assert headers["engram-signature"] == c["signature"]
        # any other target, body or origin gives other bytes
        assert (
            request_signing_input(**{**args, "target": c["target"] + "&x=1"}, body=b"")
            != c["signed_bytes"].encode()
        )


def test_oracle_statement_vector_verifies_and_fails_when_tampered() -> None:
    v = load("oracle.json")
    key = VerifierKey.parse(v["vkey"])
    st = verify_oracle_statement(v["note"].encode(), key)
    assert st.size == 5 and st.payload["pacts"]["fulfilled"] == 2
    for old, new in (
        ('"fulfilled":2', '"fulfilled":3'),
        ("size 5", "size 6"),
        ("engram.oracle-agent/v1", "engram.oracle-claim/v1"),
    ):
        with pytest.raises(VerificationError):
            verify_oracle_statement(v["note"].replace(old, new).encode(), key)
    # a checkpoint note is never an oracle statement
    cp = load("checkpoint.json")
    with pytest.raises(VerificationError):
        verify_oracle_statement(cp["checkpoints"][0]["note"].encode(), key)


def _distilled_envelope(commitment: str) -> Envelope:
    return Envelope(
        origin="example.com/engram",
        agent="vector-agent",
        key_id="0" * 32,
        kind="memory.distilled",
        version=0,
        prev=None,
        client_time_us=1,
        body_commitment=commitment,
    )


def test_distilled_vectors_disclose_one_memory_at_a_time() -> None:
    """Issue 40: a distilled body commits to each entry's digest, so any subset of its
    memories opens the commitment with the others given only as digests; the two forms never
    open each other's commitment."""
    from verifier.event import body_commitment, commitment_of, digest_form, entry_digest

    v = load("distilled.json")
    salt = bytes.fromhex(v["salt_hex"])
    body_jcs = v["body_jcs"].encode()
    assert [entry_digest(e) for e in v["body"]["entries"]] == v["entry_digests"]
    assert canonical_bytes(digest_form(v["body"])) == v["digest_form_jcs"].encode()
    assert commitment_of("memory.distilled", salt, body_jcs) == v["commitment"]
    assert v["commitment"] not in (v["whole_body_commitment"], v["digest_form_whole_body_commitment"])
    assert body_commitment(salt, body_jcs) == v["whole_body_commitment"]
    env = _distilled_envelope(v["commitment"])
    assert verify_body(env, salt, body_jcs) == v["body"]
    for d in v["disclosures"]:
        shown = verify_body(env, salt, d["body_jcs"].encode())
        assert [n for n, e in enumerate(shown["entries"]) if isinstance(e, dict)] == d["disclosed"]
        assert all(e == v["entry_digests"][n] for n, e in enumerate(shown["entries"]) if isinstance(e, str))
    legacy = v["legacy"]
    assert verify_body(_distilled_envelope(legacy["commitment"]), salt, legacy["body_jcs"].encode())
    for case in v["invalid"]:
        with pytest.raises(VerificationError) as e:
            verify_body(_distilled_envelope(case["commitment"]), salt, case["body_jcs"].encode())
        assert e.value.check == case["check"], case["name"]
