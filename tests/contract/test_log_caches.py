"""The append hot path's in-memory state (issue 14, Deliver 2): the frontier of the tree a
process committed and its cache of committed nodes and checkpoints. Several processes on one
log must still make one consistent log, and cached proofs must equal proofs read afresh."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, event

from engram.client.sdk import Agent
from engram.protocol.errors import KeyStateError, SignatureError, UnknownKeyError
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Submission
from ledger.compose import memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.storage.db import make_engine
from ledger.storage.store import ProofCache, SqlStore, StoredCheckpoint
from tests.conftest import StepClock
from tests.contract.test_log_contract import replay
from verifier.errors import VerificationError


def _process(ledger: Ledger, db_url: str) -> Ledger:
    """Another process on the same database: its own engine, store, cache and frontier."""
    return Ledger(
        SqlStore(make_engine(db_url)),
        ledger.log_key,
        clock=ledger.clock,
        policy_key=ledger.policy_key,
        rules=memory_rules(),
    )


def test_processes_interleaving_appends_make_one_consistent_log(
    ledger: Ledger, db_url: str, clock: StepClock, make_agent: Callable[..., Agent]
) -> None:
    other = _process(ledger, db_url)
    try:
        agents = [make_agent("alice"), make_agent("bob")]
        on_other = Agent.generate(
            "carol", log_vkey=ledger.vkey, transport=InProcess(other, log_only=True), clock=clock
        )
        on_other.register()
        agents.append(on_other)
        rng = random.Random(14)
        for i in range(60):
            who = rng.choice(agents)
            receipt = who.append("commitment", {"promise": f"p{i}"})
            # Each receipt was proven against its own checkpoint (verified in the SDK); the
            # other process must see the entry at the index it was given.
            for led in (ledger, other):
                assert led.store.leaf(receipt.index) == receipt.leaf
        replay(ledger)
        size = ledger.size()
        fresh = _process(ledger, db_url)
        try:
            for i in rng.sample(range(size), 20):
                proofs = [led.prove_inclusion(i, size) for led in (ledger, other, fresh)]
                assert proofs[0] == proofs[1] == proofs[2]
            for old in rng.sample(range(size + 1), 10):
                cons = [led.prove_consistency(old, size) for led in (ledger, other, fresh)]
                assert cons[0] == cons[1] == cons[2]
        finally:
            fresh.store.engine.dispose()
    finally:
        other.store.engine.dispose()


def test_a_warm_process_appends_and_proves_without_rereading_the_tree(
    ledger: Ledger, engine: Engine, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "warm up"})
    seen: list[str] = []

    def record(_conn: object, _cur: object, statement: str, *_: object) -> None:
        seen.append(statement)

    event.listen(ledger.store.engine, "before_cursor_execute", record)
    try:
        receipt = alice.append("commitment", {"promise": "hot"})
    finally:
        event.remove(ledger.store.engine, "before_cursor_execute", record)
    assert receipt.proof.size == receipt.index + 1
    reads = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
    # The lock row, the key table, the key entries it is checked against (issue 15) and the
    # stream heads: no Merkle node, no checkpoint row (the lock row carries only the highest
    # checkpoint size, an index probe that spots a forged row ahead: issue 25, finding 10).
    assert len(reads) == 4, reads
    rows_read = [s.replace("(SELECT max(size) FROM checkpoints)", "") for s in reads]
    assert not [s for s in rows_read if "nodes" in s or "checkpoints" in s]
    assert sum(1 for s in seen if s.lstrip().upper().startswith(("INSERT", "UPDATE"))) == 6


def test_the_proof_cache_caches_absence_only_below_the_latest_size() -> None:
    cache = ProofCache(nodes=4, checkpoints=8)
    cp = StoredCheckpoint(size=10, root=b"r" * 32, note=b"n", signed_at_us=1)
    cache.add_checkpoints({10: cp}, [7, 10, 12], latest=10)
    got, unknown = cache.checkpoints([7, 10, 12])
    assert got == {10: cp}
    assert unknown == [12]  # 7 has none for ever; 12 is beyond what is known, so asked again
    assert cache.latest == 10


def test_the_node_cache_is_bounded_and_keeps_the_recently_used() -> None:
    cache = ProofCache(nodes=3, checkpoints=2)
    cache.add_nodes([((0, i), bytes([i]) * 32) for i in range(3)])
    cache.nodes([(0, 0)])  # touch: (0, 1) is now the least recently used
    cache.add_nodes([((0, 3), b"\x03" * 32)])
    got, missing = cache.nodes([(0, i) for i in range(4)])
    assert sorted(got) == [(0, 0), (0, 2), (0, 3)]
    assert missing == [(0, 1)]


def test_a_key_verified_before_the_lock_is_still_refused_if_revoked_in_the_batch(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """The signature is checked before the lock with the key the envelope names; the writer
    still decides whether that key is valid at the entry's index (here: revoked by the
    entry before it in the same batch), so the early check never admits an event."""
    alice = make_agent("alice")
    revoke = alice.signer.event("key.revoked", {"reason": "stolen"}, version=0, prev=None, client_time_us=1)
    after = alice.signer.event("commitment", {"promise": "after"}, version=0, prev=None, client_time_us=1)
    before = ledger.store.counts()
    with pytest.raises(KeyStateError):
        ledger.append([revoke, after])
    assert ledger.store.counts() == before
    # The rate-limit pre-check verified these very bytes; the append is refused all the same.
    ledger.append([revoke])
    assert ledger.event_signer(after) == "alice"
    with pytest.raises(KeyStateError):
        ledger.append([after])
    replay(ledger)


def test_a_key_of_another_agent_is_unknown_to_the_early_check(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice, bob = make_agent("alice"), make_agent("bob")
    alice.append("commitment", {"promise": "warm the key cache"})
    # Bob signs with his own key an event that names Alice's agent id and Bob's key id.
    head = ledger.stream_head("alice", "commitment")
    assert head is not None
    forged = AgentSigner("alice", bob.signer.private_key, origin=ledger.origin).event(
        "commitment", {"promise": "as alice"}, version=1, prev=head.leaf_hash.hex(), client_time_us=1
    )
    with pytest.raises(UnknownKeyError):
        ledger.event_signer(forged)
    before = ledger.store.counts()
    with pytest.raises(VerificationError):
        ledger.append([forged])
    assert ledger.store.counts() == before


def test_a_forged_signature_is_refused_before_the_lock_and_writes_nothing(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = make_agent("alice")
    good = alice.signer.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1)
    forged = Submission(envelope=good.envelope, signature=bytes(64), body=good.body, salt=good.salt)

    def no_lock() -> None:
        raise AssertionError("the writer lock was taken for a forged event")

    monkeypatch.setattr(ledger.store, "write", no_lock)
    with pytest.raises(SignatureError):
        ledger.append([forged])
