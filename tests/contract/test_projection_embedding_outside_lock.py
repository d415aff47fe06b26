"""Issue 25, finding 7, on both backends: the embedding ran inside the projector lock, so a
slow embedder endpoint made every write and recall of the process wait behind it. Now the
projection is applied under the lock and the embedding runs after it is released. (A write's
own sync leaves the embedding to a batch: issue 42, Deliver 5; the recall that follows embeds
what is pending, so here the recall is the one held inside the embedder.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.contract.test_memory_projection import memory_for


class SlowEmbedder:
    model_id = "slow:test:8"
    dim = 8

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not self.entered.is_set():  # the first call hangs, as a trickling endpoint does
            self.entered.set()
            self.release.wait(10)
        out = np.zeros((len(texts), 8), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def test_embedding_runs_outside_the_projector_lock(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    slow = SlowEmbedder()
    memory = MemoryService(ledger, embedder=slow, access_log="off")
    ada = memory_for(memory, make_agent("ada"))

    def write_and_recall() -> None:
        ada.write(category="LEARNING", content="Staging restarts nightly")
        memory.recall("ada", "staging", record_access=False)

    writer = threading.Thread(target=write_and_recall)
    writer.start()
    try:
        assert slow.entered.wait(10)  # the writer's recall is inside the embedder now
        bob = memory_for(memory, make_agent("bob"))
        t0 = time.monotonic()
        bob.write(category="LEARNING", content="Deploys happen on Tuesdays")
        result = memory.recall("bob", "deploys", record_access=False)
        waited = time.monotonic() - t0
        assert waited < 5, waited  # not behind the embedder (it holds on for 10 s)
        assert [r.content for r in result.ranked][:1] == ["Deploys happen on Tuesdays"]
    finally:
        slow.release.set()
        writer.join(30)
