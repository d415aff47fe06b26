"""Recall at scale (issue 11), on every backend: bounded full-text cost, item lookup by key,
the full-text index kept right when only an item's counters change, read-your-writes for
entries appended outside the memory service, and recall restricted to memories or records."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.bodies import written_body
from engram.protocol.errors import RejectedEventError
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory import projection as projection_module
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf
from tests.contract.test_memory_projection import memory_for


def _warm(agent: AgentMemory, content: str) -> str:
    return f"{agent.write(category='CONTEXT', content=content, tier='WARM').index}.0"


def test_common_terms_are_left_out_of_the_match_past_the_budget(
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 11 scale: bm25 is paid per matching document, so past the budget the most common
    terms are dropped from the MATCH (rarest kept); within it, every term matches."""
    ada = memory_of(make_agent("ada"))
    common = [_warm(ada, f"Caroline mentioned the weather on day {n}") for n in range(6)]
    rare = _warm(ada, "Caroline adopted a greyhound named Biscuit")
    items = memory.projection.search_fulltext
    found = items("ada", "Caroline greyhound", tiers=["WARM"], statuses=["active"], limit=50)
    assert {i.ref for i in found} == {rare, *common}  # within budget: both terms match
    monkeypatch.setattr(projection_module, "FTS_DOC_BUDGET", 3)
    memory.projection._df_cache.clear()
    found = items("ada", "Caroline greyhound", tiers=["WARM"], statuses=["active"], limit=50)
    if memory.ledger.store.engine.dialect.name == "sqlite":
        assert [i.ref for i in found] == [rare]  # "caroline" (7 documents) is left out
    else:
        assert found[0].ref == rare  # PostgreSQL ranks every match (no budget there)


def test_items_by_refs_checks_tier_and_status(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    warm = _warm(ada, "Jonas moved to Porto")
    hot = f"{ada.write(category='CONTEXT', content='Jonas likes tea', tier='HOT').index}.0"
    got = memory.projection.items_by_refs("ada", [warm, hot, "999.0"], tiers=["WARM"], statuses=["active"])
    assert set(got) == {warm}
    assert memory.projection.items_by_refs("ada", [warm], tiers=["WARM"], statuses=["archived"]) == {}
    assert memory.projection.items_by_refs("bob", [warm], tiers=["WARM"], statuses=["active"]) == {}


def test_full_text_stays_right_when_only_counters_change_and_drops_erased_text(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Regression for migration 0006: the index is rewritten only when an item's text changes;
    uses (access counts) leave it findable, and an erasure (text emptied) removes it."""
    ada = memory_of(make_agent("ada"))
    ref = _warm(ada, "Odile teaches ceramics on Thursdays")
    for _ in range(3):
        assert [r.ref for r in memory.recall("ada", "ceramics").ranked] == [ref]  # each use is logged
    assert memory.projection.item("ada", ref).access_count == 3
    assert memory.projection.fulltext("ada", "ceramics Thursdays", ["WARM"]) == [ref]
    ada.erase(int(ref.split(".")[0]), reason="asked to forget")
    assert memory.projection.fulltext("ada", "ceramics", ["WARM"]) == []
    assert memory.recall("ada", "ceramics", record_access=False).ranked == ()


def test_recall_reads_an_entry_appended_outside_the_memory_service(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """An event appended straight to the log (as `engram event append` or POST /v1/events
    do, without a projection sync) is in the very next recall."""
    ada = make_agent("ada")
    _warm(memory_of(ada), "Samir plays the cello")
    # the same agent's key on the bare log: the event bypasses the memory service's door
    outside = Agent(
        ada.signer,
        log_vkey=memory.ledger.vkey,
        transport=InProcess(memory.ledger, log_only=True),
        clock=ada.clock,
    )
    outside.append(
        "memory.written",
        written_body(memory.gate, category="CONTEXT", content="Samir bought a kayak", tier="WARM"),
    )
    assert [r.content for r in memory.recall("ada", "kayak", record_access=False).ranked] == [
        "Samir bought a kayak"
    ]


def test_recall_can_be_restricted_to_memories_or_records(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    turn = ada.turn(sid, "user", "Rafael: the boat trip to Hobart got cancelled")
    mem = _warm(ada, "Rafael planned a boat trip to Hobart")
    both = memory.recall("ada", "boat trip Hobart", record_access=False)
    assert {r.ref for r in both.ranked} == {mem, f"{turn.index}.0"}
    only_mem = memory.recall("ada", "boat trip Hobart", record_access=False, sources="memories")
    assert [r.ref for r in only_mem.ranked] == [mem]
    only_rec = memory.recall("ada", "boat trip Hobart", record_access=False, sources="records")
    assert [r.index for r in only_rec.ranked] == [turn.index] and only_rec.ranked[0].is_record
    with pytest.raises(RejectedEventError) as e:
        memory.recall("ada", "boat", sources="everything")
    assert e.value.check == "request.sources"


def test_recall_does_not_queue_behind_the_writer_applying_its_own_uses(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """While the access writer applies the use records it appended, a recall reads as of the
    applied size instead of applying (and waiting for) them itself; other entries it applies."""
    memory = MemoryService(ledger)  # asynchronous access logging (the default)
    ada = memory_for(memory, make_agent("ada"))
    ref = _warm(ada, "Aiko paints watercolours on Sundays")
    entered, release = threading.Event(), threading.Event()
    reader_applied: list[int | None] = []
    original = memory.projection.sync

    def sync(upto: int | None = None) -> int:
        if threading.current_thread().name == "engram-access-log":
            entered.set()
            release.wait(10)
        else:
            reader_applied.append(upto)
        return original(upto)

    memory.projection.sync = sync  # type: ignore[method-assign]
    try:
        memory.recall("ada", "watercolours")  # queues one use
        assert entered.wait(10)  # the writer appended it and is about to apply it
        res = memory.recall("ada", "watercolours", record_access=False)
        assert [r.ref for r in res.ranked] == [ref]
        assert reader_applied == []  # the reader left the writer's own entry to the writer
        other = _warm(ada, "Aiko moved to Kyoto")  # a write syncs itself past its entry
        assert reader_applied  # ... and other entries are applied by whoever needs them
        assert [r.ref for r in memory.recall("ada", "Kyoto", record_access=False).ranked] == [other]
    finally:
        release.set()
        memory.flush_access()
    assert memory.projection.item("ada", ref).access_count == 1
