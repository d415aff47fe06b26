"""Compaction races (issue 15, Deliver 3), on every backend: three services on their own
connection pools (three workers, or the CLI beside the server) compacting one agent at the
same moment, each having decided on the same state before any appends. Every decision lands
once (one memory.archived per item, never two), every racer returns without error (the
losers re-sync and find nothing left to do), and the projection equals a sequential replay."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import memory_rules
from ledger.log import Ledger, Receipt
from ledger.memory.policy import DAY_US, PolicyConfig
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import StepClock
from tests.contract.test_memory_projection import memory_for, pure_replay_digest
from verifier.event import Leaf

RACERS = 3


class RendezvousService(MemoryService):
    """Decides as usual, but its first decision waits until every racer has decided: they
    all read the same state before any of them appends (the worst interleaving)."""

    def __init__(self, *args: Any, barrier: threading.Barrier, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.barrier = barrier
        self.waited = False

    def _decide_and_append(self, agent_id: str, decide: Any, attempts: int = 8) -> list[Receipt]:
        def rendezvous(state: Any) -> Any:
            decisions = decide(state)
            if not self.waited:
                self.waited = True
                self.barrier.wait(30)
            return decisions

        return super()._decide_and_append(agent_id, rendezvous, attempts)


def _decisions(ledger: Ledger, agent: str) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for index, raw in ledger.store.leaves_iter(0, ledger.size()):
        env = Leaf.from_bytes(raw).envelope
        if env.agent == agent and env.kind in ("memory.archived", "memory.tier_changed"):
            stored = ledger.store.body(index)
            assert stored is not None
            out[(env.kind, json.loads(stored[1])["item"])] += 1
    return out


def test_three_compactions_at_once_land_each_decision_once(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    db_url: str,
    log_key: LogKey,
    clock: StepClock,
    policy_key: Ed25519PrivateKey,
) -> None:
    config = PolicyConfig(compact_on_session_end=False)
    first = MemoryService(ledger, config=config)
    ada = memory_for(first, make_agent("ada"))
    for i in range(6):
        ada.write(category="LEARNING", content=f"Lesson {i}: the staging database resets nightly.")
    clock.now += 400 * DAY_US  # every WARM memory is past its retention window
    engines = [make_engine(db_url) for _ in range(RACERS)]  # each racer its own pool, as a worker
    try:
        barrier = threading.Barrier(RACERS)
        racers = [
            RendezvousService(
                Ledger(SqlStore(e), log_key, clock=clock, policy_key=policy_key, rules=memory_rules()),
                config=config,
                barrier=barrier,
            )
            for e in engines
        ]
        results: list[Any] = [None] * RACERS
        errors: list[BaseException] = []

        def run(n: int) -> None:
            try:
                results[n] = racers[n].compact("ada")
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(RACERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        decided = _decisions(ledger, "ada")
        assert len(decided) == 6, decided  # every memory got its decision ...
        assert set(decided.values()) == {1}, decided  # ... once
        assert sorted(len(r) > 0 for r in results) == [False] * (RACERS - 1) + [True]  # one appended
        first.sync()
        assert {i.status for i in first.projection.items("ada", status=None)} == {"archived"}
        assert pure_replay_digest(ledger) == first.digest()
        assert first.compact("ada") == []  # nothing left to decide
    finally:
        for e in engines:
            e.dispose()
