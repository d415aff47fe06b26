"""The append hot path's in-memory state (issue 14, Deliver 2): the frontier of the tree a
process committed and its cache of committed nodes and checkpoints. Several processes on one
log must still make one consistent log, and cached proofs must equal proofs read afresh."""

from __future__ import annotations

import random
from collections.abc import Callable

from sqlalchemy import Engine, event

from engram.client.sdk import Agent
from ledger.compose import memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.storage.db import make_engine
from ledger.storage.store import ProofCache, SqlStore, StoredCheckpoint
from tests.conftest import StepClock
from tests.contract.test_log_contract import replay


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
        on_other = Agent.generate("carol", log_vkey=ledger.vkey, transport=InProcess(other), clock=clock)
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
    # The lock row, the key state and the stream heads: no Merkle node, no checkpoint.
    assert len(reads) == 3, reads
    assert not [s for s in reads if "nodes" in s or "checkpoints" in s]
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
