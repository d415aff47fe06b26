"""Regression tests for the verifier soundness holes of issue 9, one named test per hole
(both backends). Each fails on the verifier before the fix: a forged input VERIFIED, a
crash, or an input read whole before its bound was checked."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import update

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.bundle import create_bundle, pact_claim
from ledger.compose import create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from ledger.storage.schema import log_state
from ledger.tiles import export_tiles
from tests.conftest import StepClock
from tests.contract.conftest import unchecked_bundle
from verifier.bundle import verify_bundle
from verifier.cli import main
from verifier.errors import VerificationError
from verifier.note import VerifierKey


@pytest.fixture
def world(ledger: Ledger, make_agent: Callable[..., Agent]) -> tuple[Ledger, MemoryService, Agent, Agent]:
    memory = MemoryService(ledger)
    alice, bob = make_agent("alice"), make_agent("bob")
    alice.transport = bob.transport = InProcessMemory(memory)  # the tests use them on it too
    for i, q in enumerate([94, 40, 88]):  # alice has one violated pact
        AgentMemory(alice).record(
            "pact.outcome",
            {"pact": f"a-{i}", "result": "violated" if q < 50 else "fulfilled", "quality": q},
        )
        AgentMemory(bob).record("pact.outcome", {"pact": f"b-{i}", "result": "fulfilled", "quality": 90})
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


def test_hole2_a_backdated_entry_in_a_bundle_is_a_fraud_proof(
    world: tuple, clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, _, alice, _ = world
    # A log operator lowers the mutable last-timestamp row and the clock runs backwards,
    # with the log's own check of that row against the last entry taken out (an honest log
    # refuses: tests/contract/test_state_integrity.py): the next outcome is stamped before
    # entries the log already signed.
    with ledger.store.engine.begin() as conn:
        conn.execute(update(log_state).values(last_timestamp_us=1_000))
    monkeypatch.setattr(Ledger, "_check_last_entry", staticmethod(lambda *_: None))
    ledger._frontier = None
    clock.now = 2_000
    AgentMemory(alice).record("pact.outcome", {"pact": "late", "result": "fulfilled", "quality": 99})
    with pytest.raises(VerificationError) as e:
        verify_bundle(unchecked_bundle(ledger, pact_claim(ledger, "alice")), _key(ledger))
    assert e.value.check == "timestamps.fraud" and "fraud proof" in str(e.value)


# -- hole 3: an auditor could not anchor a replay ---------------------------------------


def _fork(ledger: Ledger, log_key: LogKey, clock: StepClock, url: str, size: int) -> Ledger:
    """A log-key holder's rewrite: same key, other entries, every checkpoint re-signed."""
    fork = create_ledger(make_engine(url), log_key, clock=clock, policy_key=Ed25519PrivateKey.generate())
    mallory = Agent.generate(
        "alice", log_vkey=fork.vkey, transport=InProcess(fork, log_only=True), clock=clock, state_dir=None
    )
    mallory.register()
    while fork.size() < size:
        mallory.append("commitment", {"promise": f"rewritten {fork.size()}"})
    return fork


@pytest.fixture
def fork_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'fork.db'}"
    return str(request.getfixturevalue("pg_server").new_database())


def test_hole3_log_replay_anchored_on_a_held_checkpoint_detects_a_rewritten_history(
    world: tuple,
    log_key: LogKey,
    clock: StepClock,
    fork_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger, _, _, _ = world
    held = tmp_path / "held.checkpoint"
    held.write_bytes(ledger.latest_checkpoint().note)
    fork = _fork(ledger, log_key, clock, fork_url, ledger.size() + 5)
    export_tiles(fork.store, tmp_path / "fork")
    # The rewritten export is self-consistent: its own history verifies ...
    assert main(["log", str(tmp_path / "fork"), "--log-key", ledger.vkey, "--quiet"]) == 0
    # ... but not against the checkpoint the auditor already held ...
    args = ["log", str(tmp_path / "fork"), "--log-key", ledger.vkey, "--quiet", "--json"]
    capsys.readouterr()
    assert main([*args, "--trusted-checkpoint", str(held)]) == 1
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "trusted.fork"
    # ... nor against what the agents' SDK remembered (by default in $ENGRAM_VERIFIER_STATE).
    assert main([*args, "--state-dir", os.environ["ENGRAM_VERIFIER_STATE"]]) == 1
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "state.fork"
    export_tiles(ledger.store, tmp_path / "honest")
    assert (
        main(["log", str(tmp_path / "honest"), "--log-key", ledger.vkey, "--trusted-checkpoint", str(held)])
        == 0
    )


def test_hole3_log_replay_refuses_an_export_older_than_a_held_checkpoint(
    world: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, _, alice, _ = world
    export_tiles(ledger.store, tmp_path / "old")
    AgentMemory(alice).record("commitment", {"promise": "later"})
    held = tmp_path / "held.checkpoint"
    held.write_bytes(ledger.latest_checkpoint().note)
    args = ["log", str(tmp_path / "old"), "--log-key", ledger.vkey, "--quiet", "--json"]
    capsys.readouterr()
    assert main([*args, "--trusted-checkpoint", str(held)]) == 1
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "trusted.stale"


def test_hole3_checkpoint_verification_checks_a_held_checkpoint(
    world: tuple,
    log_key: LogKey,
    clock: StepClock,
    fork_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger, _, alice, _ = world
    held = tmp_path / "held"
    held.write_bytes(ledger.latest_checkpoint().note)
    old_size = ledger.size()
    AgentMemory(alice).record("commitment", {"promise": "later"})
    new = tmp_path / "new"
    new.write_bytes(ledger.latest_checkpoint().note)
    proof = tmp_path / "proof.json"
    p = ledger.prove_consistency(old_size)
    proof.write_text(
        json.dumps(
            {
                "old_size": p.old_size,
                "new_size": p.new_size,
                "proof": [base64.b64encode(h).decode() for h in p.hashes],
            }
        )
    )
    base = ["checkpoint", str(new), "--log-key", ledger.vkey, "--trusted-checkpoint", str(held), "--json"]
    assert main([*base, "--consistency-proof", str(proof)]) == 0
    capsys.readouterr()
    assert main(base) == 1  # no proof: it cannot be shown to extend the held checkpoint
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "trusted.missing"
    forked = tmp_path / "forked"
    forked.write_bytes(_fork(ledger, log_key, clock, fork_url, old_size).latest_checkpoint().note)
    assert (
        main(
            ["checkpoint", str(forked), "--log-key", ledger.vkey, "--trusted-checkpoint", str(held), "--json"]
        )
        == 1
    )
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "trusted.fork"


def test_hole3_remembered_state_detects_rollback_and_fork_without_any_flag(
    world: tuple,
    log_key: LogKey,
    clock: StepClock,
    fork_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ledger, _, alice, _ = world
    state = ["--state-dir", str(tmp_path / "state"), "--json"]
    old = tmp_path / "old.json"
    old.write_bytes(create_bundle(ledger, pact_claim(ledger, "alice")))
    old_size = ledger.size()
    assert main(["bundle", str(old), "--log-key", ledger.vkey, *state]) == 0
    AgentMemory(alice).record("pact.outcome", {"pact": "a-9", "result": "fulfilled", "quality": 70})
    new = tmp_path / "new.json"
    new.write_bytes(create_bundle(ledger, pact_claim(ledger, "alice"), trusted_size=old_size))
    assert main(["bundle", str(new), "--log-key", ledger.vkey, *state]) == 0
    capsys.readouterr()
    assert main(["bundle", str(old), "--log-key", ledger.vkey, *state]) == 1  # rollback
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "state.rollback"
    fork = _fork(ledger, log_key, clock, fork_url, ledger.size())  # same size, other root
    forged = tmp_path / "forged.json"
    forged.write_bytes(create_bundle(fork, {"statements": [_never_violated("alice")]}))
    assert main(["bundle", str(forged), "--log-key", ledger.vkey, *state]) == 1
    assert json.loads(capsys.readouterr().out)["checks"][-1]["failed_check"] == "state.fork"


# -- hole 4: inputs read before they were bounded --------------------------------------


def _run_limited(args: list[str], limit_bytes: int) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "verifier.cli", *args],
        preexec_fn=cap,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("command", ["bundle", "checkpoint"])
def test_hole4_a_huge_input_file_is_refused_without_reading_it(
    world: tuple, tmp_path: Path, command: str
) -> None:
    ledger, _, _, _ = world
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(int(1.1 * 2**30))  # sparse: 1.1 GiB that costs no disk
    run = _run_limited([command, str(big), "--log-key", ledger.vkey, "--json"], 700 * 2**20)
    assert run.returncode == 1, run.stdout + run.stderr
    assert json.loads(run.stdout)["checks"][-1]["failed_check"] in ("input.size", "format.size")


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


def test_hole4_the_history_file_is_streamed_with_bounded_lines(world: tuple, tmp_path: Path) -> None:
    ledger, _, _, _ = world
    export_tiles(ledger.store, tmp_path / "t")
    history = tmp_path / "t" / "engram" / "checkpoints.jsonl"
    with open(history, "ab") as f:
        f.truncate(history.stat().st_size + int(1.1 * 2**30))  # one 1.1 GiB line of NULs
    run = _run_limited(["log", str(tmp_path / "t"), "--log-key", ledger.vkey, "--json"], 700 * 2**20)
    assert run.returncode == 1, run.stdout + run.stderr
    assert json.loads(run.stdout)["checks"][-1]["failed_check"] == "history.format"


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
    monkeypatch.setattr("ledger.edge.validate_body", lambda kind, body: None)
    alice.append("share.revoked", {"note": "no token id"})
    monkeypatch.setattr("ledger.bundle._check_token_first", lambda *a, **k: None)
    doc = unchecked_bundle(ledger, pact_claim(ledger, "alice"), token=token, audience="buyer-1")
    with pytest.raises(VerificationError) as e:
        verify_bundle(doc, _key(ledger), audience="buyer-1", now=now)
    assert e.value.check == "token.revoked"
