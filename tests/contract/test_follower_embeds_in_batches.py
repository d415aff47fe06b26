"""On both backends: the background follower's round under load leaves the embedding to a
batch (issue 43, the write path after Deliver 1 and 2: each round of each worker embedded its
few new items, one embedder call and one vector write transaction per round); the round after
a quiet interval embeds everything pending, and a reader still sees every item it can see with
its vector."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.follower import EMBED_LAG
from ledger.memory.service import MemoryService
from tests.contract.test_memory_projection import memory_for


class CountingEmbedder:
    model_id = "counting:test:8"
    dim = 8

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), 8), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def test_a_busy_round_batches_the_embedding_and_a_quiet_one_embeds_it(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    counting = CountingEmbedder()
    memory = MemoryService(ledger, embedder=counting, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    follower = memory.follower
    follower._round(everyone=True)  # the first round embeds what is pending
    assert memory.projection.embedded_size() == memory.projection.applied_size()
    for i in range(3):
        ada.write(category="LEARNING", content=f"the build runner {i} lives on the second disk")
    counting.calls.clear()

    follower._round()  # new entries applied (fewer than EMBED_LAG wait): no embedder call
    applied = memory.projection.applied_size()
    assert EMBED_LAG > 3
    assert counting.calls == []
    assert memory.projection.embedded_size() < applied

    follower._round(embed=True)  # after a quiet interval (follow): everything pending, one call
    assert counting.calls == [3]
    assert memory.projection.embedded_size() == memory.projection.applied_size() == applied


def test_a_reader_embeds_what_a_busy_round_left(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    counting = CountingEmbedder()
    memory = MemoryService(ledger, embedder=counting, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    memory.follower._round(everyone=True)
    ada.write(category="LEARNING", content="deploys happen on Tuesdays")
    memory.follower._round()
    assert memory.projection.embedded_size() < memory.projection.applied_size()
    result = memory.recall("ada", "deploys", record_access=False)
    assert memory.projection.embedded_size() == memory.projection.applied_size()
    assert [r.content for r in result.ranked][:1] == ["deploys happen on Tuesdays"]


def test_the_last_round_embeds_what_is_pending(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    counting = CountingEmbedder()
    memory = MemoryService(ledger, embedder=counting, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    memory.follower._round(everyone=True)
    ada.write(category="LEARNING", content="the staging host restarts nightly")
    memory.follower._round(embed=True)  # as follow() ends with, after a busy round
    assert memory.projection.embedded_size() == memory.projection.applied_size()


def test_the_follower_embeds_after_a_quiet_interval(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    counting = CountingEmbedder()
    memory = MemoryService(ledger, embedder=counting, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    stop = threading.Event()
    thread = threading.Thread(target=memory.follower.follow, args=(stop, 0.05))
    thread.start()
    try:
        for i in range(3):
            ada.write(category="LEARNING", content=f"the nightly job {i} runs on the spare host")
        deadline = time.monotonic() + 30
        while (
            memory.projection.embedded_size() < ledger.size()
            or memory.projection.applied_size() < ledger.size()
        ) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.projection.embedded_size() == memory.projection.applied_size() == ledger.size()
    finally:
        stop.set()
        memory.follower.due(())
        thread.join(30)
    assert not thread.is_alive()
