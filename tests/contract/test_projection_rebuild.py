"""A projection rebuild writes in batches and indexes full text in bulk (issue 14, Deliver 6),
and gives the same projection and search results as applying the log entry by entry. On
both backends; the bulk full-text step is SQLite's (PostgreSQL's index is an expression)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import text

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import LogIntegrityError
from ledger.log import Ledger
from ledger.memory.projection import Projection
from ledger.memory.service import MemoryService
from tests.contract.test_memory_projection import memory_for


def _deferred(memory: MemoryService) -> int:
    with memory.projection.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT fts_deferred FROM mem_cursor WHERE id = 1").scalar_one())


def _fill(agent: AgentMemory) -> None:
    for i in range(30):
        agent.write(category="LEARNING", content=f"the heron nests by river {i}")
    agent.write(category="LEARNING", content="the heron nests by river 3")  # a duplicate
    agent.write(category="LEARNING", content="kingfishers dive for minnows")


def test_rebuild_matches_the_incremental_projection_and_search(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    memory = MemoryService(ledger)
    agent = memory_for(memory, make_agent("rebuilt"))
    _fill(agent)
    before = memory.digest()
    hits = memory.projection.fulltext(agent.agent_id, "kingfishers minnows", ["HOT", "WARM", "COLD"])
    assert len(hits) == 1

    assert memory.rebuild() == before
    assert _deferred(memory) == 0
    assert memory.projection.fulltext(agent.agent_id, "kingfishers minnows", ["HOT", "WARM", "COLD"]) == hits
    assert len(memory.projection.fulltext(agent.agent_id, "heron", ["HOT", "WARM", "COLD"], limit=100)) == 30


def test_a_rebuild_interrupted_after_the_reset_indexes_full_text_on_the_next_catch_up(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = MemoryService(ledger)
    agent = memory_for(memory, make_agent("interrupted"))
    _fill(agent)
    before = memory.digest()

    def crash(self: Projection, upto: int | None = None) -> int:
        raise RuntimeError("killed after the reset")

    with monkeypatch.context() as m:
        m.setattr(Projection, "sync", crash)
        with pytest.raises(RuntimeError):
            memory.projection.rebuild()
    sqlite = ledger.store.engine.dialect.name == "sqlite"
    assert _deferred(memory) == (1 if sqlite else 0)
    assert memory.projection.applied_size() == 0

    # Any catch-up that reaches its target indexes what it applied (readers of "at least
    # index N" search it) and turns the triggers back on; the rest is indexed row by row.
    memory.projection.sync(ledger.size() // 2)
    assert _deferred(memory) == 0
    assert memory.digest() == before
    assert len(memory.projection.fulltext(agent.agent_id, "kingfishers", ["HOT", "WARM", "COLD"])) == 1
    assert len(memory.projection.fulltext(agent.agent_id, "heron", ["HOT", "WARM", "COLD"], limit=100)) == 30


def test_a_body_changed_in_the_table_is_named_not_projected(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """Issue 15, Deliver 5: the projector checks each body against the commitment its entry
    signed and names the entry, instead of folding the changed text into recall."""
    memory = MemoryService(ledger)
    agent = memory_for(memory, make_agent("changed"))
    receipt = agent.write(category="LEARNING", content="the original text")
    before = memory.digest()
    with ledger.store.engine.begin() as conn:  # bodies are erasable: the service role may UPDATE them
        body = conn.execute(text("SELECT body FROM bodies WHERE idx = :i"), {"i": receipt.index}).scalar_one()
        changed = bytes(body).replace(b"the original text", b"a planted lie here")
        conn.execute(text("UPDATE bodies SET body = :b WHERE idx = :i"), {"b": changed, "i": receipt.index})
    with pytest.raises(LogIntegrityError) as e:
        memory.rebuild()
    assert e.value.check == "state.bodies" and f"bodies row {receipt.index}" in str(e.value)
    assert not memory.projection.fulltext(agent.agent_id, "planted lie", ["HOT", "WARM", "COLD"])
    with ledger.store.engine.begin() as conn:
        conn.execute(text("UPDATE bodies SET body = :b WHERE idx = :i"), {"b": body, "i": receipt.index})
    assert memory.rebuild() == before
