"""Exactly one distillation per session (issue 12), on every backend: two services on their
own connection pools (two workers, or the CLI beside the server) distilling the same closed
session at the same moment append one memory.distilled entry, not two."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.keyfiles import LogKey
from ledger.compose import memory_rules
from ledger.log import Ledger
from ledger.memory.distill import RuleBasedDistiller, Turn
from ledger.memory.policy import PolicyConfig
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.conftest import StepClock
from tests.contract.test_memory_projection import pure_replay_digest
from verifier.event import Leaf


class RendezvousDistiller:
    """The default rules, but each distillation waits until both racers are distilling (a
    slow LLM distiller: both read "not distilled yet" before either appends)."""

    name, version = "test.rendezvous", "1"

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier

    def distill(self, session: str, turns: Sequence[Turn]) -> list[dict[str, Any]]:
        self.barrier.wait(30)
        return RuleBasedDistiller().distill(session, turns)


def _distilled_entries(ledger: Ledger, agent: str) -> list[int]:
    return [
        idx
        for idx, raw in ledger.store.leaves_iter(0, ledger.size())
        if (leaf := Leaf.from_bytes(raw)).envelope.agent == agent and leaf.envelope.kind == "memory.distilled"
    ]


def test_two_distillations_of_one_session_at_once_append_one(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    db_url: str,
    log_key: LogKey,
    clock: StepClock,
    policy_key: Ed25519PrivateKey,
) -> None:
    """Regression: the distil path read the session's flag without a lock and its conflict
    retry re-appended the same body, so two `engram session distill` at once distilled twice
    (and the second copy's memories "confirmed" the first's)."""
    config = PolicyConfig(compact_on_session_end=False)  # closing does not distil: the racers do
    first = MemoryService(ledger, config=config)
    agent = make_agent("ada")
    agent.transport = InProcessMemory(first)
    ada = AgentMemory(agent)
    sid = ada.open_session()
    ada.turn(sid, "user", "Jo: I adopted a greyhound called Pepper last week.")
    ada.turn(sid, "assistant", "Ben: We decided to move the launch to June.")
    ada.close_session(sid)
    other_engine = make_engine(db_url)  # a second worker: its own connection pool
    try:
        other = Ledger(
            SqlStore(other_engine), log_key, clock=clock, policy_key=policy_key, rules=memory_rules()
        )
        barrier = threading.Barrier(2)
        racers = [
            MemoryService(ledger, config=config, distiller=RendezvousDistiller(barrier)),
            MemoryService(other, config=config, distiller=RendezvousDistiller(barrier)),
        ]
        results: list[Any] = [None, None]
        errors: list[BaseException] = []

        def run(n: int) -> None:
            try:
                results[n] = racers[n].finish_session("ada", sid)
            except BaseException as e:  # surfaced below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert len(_distilled_entries(ledger, "ada")) == 1
        assert sorted(r[0] is None for r in results) == [False, True]  # one appended, one saw it done
        items = first.projection.items("ada")
        assert len(items) == 2 and all(i.confirmations == 1 for i in items)
        assert pure_replay_digest(ledger) == first.digest()
    finally:
        other_engine.dispose()
