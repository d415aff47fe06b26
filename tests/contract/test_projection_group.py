"""Concurrent writers of one process share the projection's work (issue 14, Deliver 4):
one of them applies everything committed so far while the others wait for it, and every
writer still reads its own write. On both backends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from sqlalchemy import event

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.contract.test_memory_projection import memory_for


def test_concurrent_writes_share_projection_transactions_and_read_their_writes(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    memory = MemoryService(ledger)
    agents = [memory_for(memory, make_agent(f"writer-{i}")) for i in range(8)]
    per_agent = 5
    cursor_moves: list[str] = []

    def count(_c: object, _cur: object, statement: str, *_: object) -> None:
        if statement.lstrip().upper().startswith("UPDATE MEM_CURSOR SET APPLIED_SIZE"):
            cursor_moves.append(statement)

    event.listen(ledger.store.engine, "before_cursor_execute", count)
    errors: list[BaseException] = []

    def work(agent: AgentMemory, n: int, phase: str) -> None:
        try:
            for i in range(n):
                receipt = agent.write(
                    category="LEARNING", content=f"{agent.agent_id} learned {phase} fact number {i}"
                )
                # Read-your-writes: the item is in the projection when the write returns.
                assert memory.projection.item(agent.agent_id, f"{receipt.index}.0") is not None
        except BaseException as e:
            errors.append(e)

    def run(n: int, phase: str) -> list[threading.Thread]:
        threads = [threading.Thread(target=work, args=(a, n, phase)) for a in agents]
        for t in threads:
            t.start()
        return threads

    try:
        # Eight writes appended while the projector is busy (held here): the first writer to
        # get it applies all eight in one transaction, the other seven find theirs applied.
        size0 = ledger.size()
        with memory.follower._projector:
            threads = run(1, "held")
            deadline = time.monotonic() + 60
            while ledger.size() < size0 + len(agents) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert ledger.size() == size0 + len(agents)
            cursor_moves.clear()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        assert len(cursor_moves) == 1
        # And freely concurrent writers: never more than one projection commit per write.
        cursor_moves.clear()
        for t in run(per_agent, "free"):
            t.join()
    finally:
        event.remove(ledger.store.engine, "before_cursor_execute", count)
    assert not errors, errors[0]
    assert memory.projection.applied_size() == ledger.size()
    assert 0 < len(cursor_moves) <= len(agents) * per_agent
    assert memory.rebuild() == memory.digest()
