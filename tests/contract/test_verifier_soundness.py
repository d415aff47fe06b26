"""Regression tests for the verifier soundness holes of issue 9, one named test per hole
(both backends). Each fails on the verifier before the fix: a forged input VERIFIED, a
crash, or an input read whole before its bound was checked."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import update

from ledger.bundle import create_bundle, pact_claim
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.sdk import Agent
from ledger.storage.schema import log_state
from tests.conftest import StepClock
from verifier.bundle import verify_bundle
from verifier.cli import main
from verifier.errors import VerificationError
from verifier.note import VerifierKey


@pytest.fixture
def world(ledger: Ledger, make_agent: Callable[..., Agent]) -> tuple[Ledger, MemoryService, Agent, Agent]:
    memory = MemoryService(ledger)
    alice, bob = make_agent("alice"), make_agent("bob")
    for i, q in enumerate([94, 40, 88]):  # alice has one violated pact
        memory.record(
            alice,
            "pact.outcome",
            {"pact": f"a-{i}", "result": "violated" if q < 50 else "fulfilled", "quality": q},
        )
        memory.record(bob, "pact.outcome", {"pact": f"b-{i}", "result": "fulfilled", "quality": 90})
    return ledger, memory, alice, bob


def _key(ledger: Ledger) -> VerifierKey:
    return VerifierKey.parse(ledger.vkey)


def _never_violated(agent: str) -> dict:
    return {
        "predicate": "count",
        "agent": agent,
        "kind": "pact.outcome",
        "where": {"result": "violated"},
        "value": 0,
    }


# -- hole 1: completeness proved absence for agents the statement never covered ----------


def test_hole1_a_bundle_about_bob_is_no_proof_that_alice_never_violated_a_pact(world: tuple) -> None:
    ledger, _, _, _ = world
    doc = json.loads(create_bundle(ledger, {"statements": [_never_violated("bob")]}))
    assert verify_bundle(json.dumps(doc).encode(), _key(ledger)).claims[0].holds
    doc["claim"] = {"statements": [_never_violated("alice")]}  # alice has a violated pact
    with pytest.raises(VerificationError) as e:
        verify_bundle(json.dumps(doc).encode(), _key(ledger))
    assert e.value.check == "completeness.coverage"
    assert "alice" in str(e.value)


def test_hole1_a_statement_about_another_agent_cannot_be_slipped_into_a_genuine_bundle(world: tuple) -> None:
    ledger, _, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "bob")))
    doc["claim"]["statements"].append(_never_violated("alice"))
    with pytest.raises(VerificationError) as e:
        verify_bundle(json.dumps(doc).encode(), _key(ledger))
    assert e.value.check == "completeness.coverage"


def test_hole1_an_agent_with_no_records_is_covered_and_proven_empty(world: tuple) -> None:
    ledger, _, _, _ = world
    claim = {"statements": [{"predicate": "count", "agent": "carol", "kind": "pact.outcome", "value": 0}]}
    result = verify_bundle(create_bundle(ledger, claim), _key(ledger))
    assert "carol" in result.covered and result.claims[0].recomputed == 0


def test_hole1_the_claim_line_names_agent_kind_where_and_value(
    world: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, _, _, _ = world
    path = tmp_path / "b.json"
    path.write_bytes(create_bundle(ledger, {"statements": [_never_violated("bob")]}))
    assert main(["bundle", str(path), "--log-key", ledger.vkey]) == 0
    out = capsys.readouterr().out
    assert 'claim: count of bob/pact.outcome where {"result":"violated"} = 0' in out


def test_hole1_v1_bundles_are_refused_with_the_reason(world: tuple) -> None:
    ledger, _, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "bob")))
    doc["media_type"] = "application/vnd.engram.bundle.v1+json"
    with pytest.raises(VerificationError) as e:
        verify_bundle(json.dumps(doc).encode(), _key(ledger))
    assert e.value.check == "format.version" and "cannot prove" in str(e.value)


# -- hole 2: bundles ignored server timestamps ------------------------------------------


def test_hole2_a_backdated_entry_in_a_bundle_is_a_fraud_proof(world: tuple, clock: StepClock) -> None:
    ledger, memory, alice, _ = world
    # A log operator lowers the mutable last-timestamp row and the clock runs backwards:
    # the next outcome is stamped before entries the log already signed.
    with ledger.store.engine.begin() as conn:
        conn.execute(update(log_state).values(last_timestamp_us=1_000))
    clock.now = 2_000
    memory.record(alice, "pact.outcome", {"pact": "late", "result": "fulfilled", "quality": 99})
    with pytest.raises(VerificationError) as e:
        verify_bundle(create_bundle(ledger, pact_claim(ledger, "alice")), _key(ledger))
    assert e.value.check == "timestamps.fraud" and "fraud proof" in str(e.value)


# -- hole 4: inputs read before they were bounded --------------------------------------


def test_hole4_millions_of_empty_objects_are_refused_before_parsing(world: tuple) -> None:
    import tracemalloc

    ledger, _, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "alice")))
    text = json.dumps(doc)
    bomb = text.replace('"entries": [', '"entries": [' + "{}," * 5_000_000, 1).encode()
    assert len(bomb) < 64 * 2**20
    tracemalloc.start()
    try:
        with pytest.raises(VerificationError) as e:
            verify_bundle(bomb, _key(ledger))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert e.value.check == "json.containers"
    assert peak < 4 * len(bomb), peak  # a scan, not 5 million dicts (~1.7 GiB before)


# -- hole 5: a second, weaker JSON parser -----------------------------------------------


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1.5", "1e3"])
def test_hole5_bundles_refuse_nan_infinity_and_floats(world: tuple, constant: str) -> None:
    ledger, _, _, _ = world
    data = create_bundle(ledger, pact_claim(ledger, "alice"))
    doc = json.loads(data)
    doc["claim"]["statements"][0]["where"] = {"quality": "PLACEHOLDER"}
    bad = json.dumps(doc).replace('"PLACEHOLDER"', constant).encode()
    with pytest.raises(VerificationError) as e:
        verify_bundle(bad, _key(ledger))
    assert e.value.check in ("json.syntax", "canonical.float")


@pytest.mark.parametrize(
    "consistency",
    [
        {"old_size": 1, "proof": []},  # v1 shape: an object, not a list
        [{"old_size": -1, "proof": []}],
        [{"old_size": 1, "proof": ["not base64"]}],
        [{"old_size": 1, "proof": [base64.b64encode(b"short").decode()]}],
        [{"old_size": 1, "proof": [], "extra": 1}],
        [{"old_size": 1, "proof": []}, {"old_size": 1, "proof": []}],
        [],
    ],
)
def test_hole5_a_consistency_member_is_validated_without_a_trusted_checkpoint(
    world: tuple, consistency: object
) -> None:
    ledger, _, _, _ = world
    doc = json.loads(create_bundle(ledger, pact_claim(ledger, "alice")))
    doc["consistency"] = consistency
    with pytest.raises(VerificationError) as e:
        verify_bundle(json.dumps(doc).encode(), _key(ledger))
    assert e.value.check.startswith("format")


# -- hole 6: a malformed log-signed share.revoked body crashed the token check ----------


def test_hole6_a_malformed_share_revoked_body_is_a_named_token_check(
    world: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verifier.token import mint

    ledger, _, alice, _ = world
    now = 1_900_000_000
    token = mint(
        seed=alice.signer.private_key.private_bytes_raw(),
        origin=ledger.origin,
        agent="alice",
        audience="buyer-1",
        kinds=["pact.outcome"],
        expires=now + 3600,
    )
    # A log-key holder accepts a share.revoked whose body has no token_id, and builds the
    # bundle without the builder's own token check.
    monkeypatch.setattr("ledger.log.validate_body", lambda kind, body: None)
    alice.append("share.revoked", {"note": "no token id"})
    monkeypatch.setattr("ledger.bundle._check_token_first", lambda *a, **k: None)
    doc = create_bundle(ledger, pact_claim(ledger, "alice"), token=token, audience="buyer-1")
    with pytest.raises(VerificationError) as e:
        verify_bundle(doc, _key(ledger), audience="buyer-1", now=now)
    assert e.value.check == "token.revoked"
