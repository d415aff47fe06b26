"""Recall finds what was said (issue 11), on every backend: semantic ranking with the default
embedder, the records tier of logged turns, archived memories as a fallback, degradation
when the embedder fails, a model change, and access logging off the reader's path."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from sqlalchemy import text

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from ledger.log import Ledger
from ledger.memory.embed import EmbedderError, Vectors, WordLlamaEmbedder
from ledger.memory.service import MemoryService
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from tests.contract.test_memory_projection import memory_for

pytestmark = pytest.mark.filterwarnings("ignore")

DAY = 86_400_000_000
EMBEDDER = WordLlamaEmbedder()


@pytest.fixture
def memory(ledger: Ledger) -> MemoryService:
    return MemoryService(ledger, embedder=EMBEDDER)


def _warm(agent: AgentMemory, content: str) -> str:
    return f"{agent.write(category='CONTEXT', content=content, tier='WARM').index}.0"


def test_semantic_recall_finds_a_paraphrase_with_no_shared_word(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """No content word of the query is in the memory: only the embedding ranking finds it."""
    ada = memory_of(make_agent("ada"))
    want = _warm(ada, "Caroline adopted a greyhound and named him Biscuit")
    for t in ("The quarterly report is due on Friday", "Melanie repainted the kitchen blue"):
        _warm(ada, t)
    res = memory.recall("ada", "Which dog does she have?", record_access=False)
    assert [r.ref for r in res.ranked][:1] == [want]
    assert not res.notes


def test_without_an_embedder_the_paraphrase_is_not_found(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """The same case with semantic ranking off: the test above fails without vectors."""
    memory = MemoryService(ledger)
    ada = memory_for(memory, make_agent("ada"))
    _warm(ada, "Caroline adopted a greyhound and named him Biscuit")
    assert memory.recall("ada", "Which dog does she have?", record_access=False).ranked == ()


def test_logged_turns_are_recalled_as_records_marked_apart(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session(title="catch-up")
    turn = ada.turn(sid, "user", "Melanie: we went camping at Lake Tahoe with the kids last weekend")
    ada.turn(sid, "assistant", "Sounds like fun!")
    res = memory.recall("ada", "Where did Melanie go camping?", record_access=False)
    records = [r for r in res.ranked if r.is_record]
    assert [r.index for r in records][:1] == [turn.index]
    assert {"source_type": "turn", "source_ref": str(turn.index)} in records[0].provenance
    block = res.render()
    assert "## RECORDS (raw session turns" in block
    assert f"[turn | user | session {sid} | log {turn.index} |" in block
    # Records are not memories: tier views, compaction and supersession leave them alone.
    assert all(i.tier != "RECORD" for i in memory.projection.items("ada", status=None))
    with pytest.raises(RejectedEventError) as e:
        ada.supersede(f"{turn.index}.0", content="rewritten history", reason="no")
    assert e.value.check == "memory.item_state"


def test_a_record_cited_by_a_returned_memory_is_left_out(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    turn = ada.turn(sid, "user", "Jonas: I started pottery lessons at the community center")
    ada.write(
        category="CONTEXT",
        content="Jonas takes pottery lessons at the community center",
        tier="WARM",
        provenance=[{"source_type": "turn", "source_ref": str(turn.index)}],
    )
    res = memory.recall("ada", "pottery lessons", record_access=False)
    assert [r.is_record for r in res.ranked] == [False]


def test_erased_turns_are_never_recalled_and_lose_their_vectors(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, ledger: Ledger
) -> None:
    ada = memory_of(make_agent("ada"))
    w = ada.write(category="CONTEXT", content="Tomas lives on Rua Augusta in Lisbon", tier="WARM")
    assert memory.recall("ada", "Lisbon street", record_access=False).ranked
    ada.erase(w.index, reason="right to be forgotten")
    assert memory.recall("ada", "Lisbon street", record_access=False).ranked == ()
    with ledger.store.engine.connect() as conn:
        assert (
            conn.execute(
                text("SELECT count(*) FROM mem_vectors WHERE ref = :r"), {"r": f"{w.index}.0"}
            ).scalar()
            == 0
        )


def test_archived_memories_stay_searchable(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    """Decay never hides evidence: a month later, compaction archives the memory, and recall
    still finds it (marked archived), at full weight with include_archived."""
    ada = memory_of(make_agent("ada"))
    ref = _warm(ada, "Priya registered for a 10 km run in April")
    clock.now += 120 * DAY
    memory.compact("ada")
    assert memory.projection.item("ada", ref).status == "archived"
    for include in (False, True):
        res = memory.recall("ada", "How long is Priya's race?", include_archived=include, record_access=False)
        assert [(r.ref, r.status) for r in res.ranked] == [(ref, "archived")]
        assert "## ARCHIVED" in res.render()


def test_live_match_ranks_above_an_equal_archived_one(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    ada = memory_of(make_agent("ada"))
    old = _warm(ada, "Odile plays the cello in an orchestra")
    clock.now += 120 * DAY
    memory.compact("ada")
    new = _warm(ada, "Odile plays the cello at the conservatory")
    res = memory.recall("ada", "Odile cello", record_access=False)
    assert [r.ref for r in res.ranked] == [new, old]
    res = memory.recall("ada", "Odile cello orchestra", include_archived=True, record_access=False)
    assert res.ranked[0].ref == old


class _Broken:
    """An embedder that works for writes until told to fail (an endpoint that went down)."""

    def __init__(self) -> None:
        self.fail = False
        self.model_id = EMBEDDER.model_id
        self.dim = EMBEDDER.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.fail:
            raise EmbedderError("embedding endpoint unreachable")
        return EMBEDDER.embed(texts)


def test_an_embedder_outage_degrades_recall_and_never_fails_a_write(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    broken = _Broken()
    memory = MemoryService(ledger, embedder=broken)
    ada = memory_for(memory, make_agent("ada"))
    _warm(ada, "Samir bakes sourdough bread every Sunday")
    broken.fail = True
    _warm(ada, "Samir's sourdough starter is called Bubbles")  # the write succeeds
    res = memory.recall("ada", "sourdough", record_access=False)
    assert len(res.ranked) == 2  # full text still ranks both
    assert any("semantic ranking unavailable" in n for n in res.notes)
    assert "(note: semantic ranking unavailable" in res.render()
    broken.fail = False
    assert memory.vectors is not None
    memory.vectors._failed_at = 0.0  # the back-off has passed
    res = memory.recall("ada", "sourdough", record_access=False)
    assert not res.notes
    with ledger.store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM mem_vectors")).scalar() == 2  # caught up


class _Other:
    """Another model: a different id and dimension."""

    model_id = "test/other:8"
    dim = 8

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), 8), dtype=np.float32)
        out[:, 0] = 1.0
        return out


def test_a_model_change_re_embeds_and_never_mixes_dimensions(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    ada = make_agent("ada")
    first = MemoryService(ledger, embedder=EMBEDDER)
    _warm(memory_for(first, ada), "Aiko collects vintage cameras")
    first.recall("ada", "cameras", record_access=False)
    second = MemoryService(ledger, embedder=_Other())
    second.recall("ada", "cameras", record_access=False)
    with ledger.store.engine.connect() as conn:
        rows = conn.execute(text("SELECT model, length(vec) FROM mem_vectors")).all()
    assert [(m, n) for m, n in rows] == [("test/other:8", 16)]  # 8 float16 numbers
    # The first process's cache sees the generation move and reloads (and re-embeds).
    assert first.recall("ada", "cameras", record_access=False).ranked


def test_recall_bounds_its_inputs(memory: MemoryService, make_agent: Callable[..., Agent]) -> None:
    make_agent("ada")
    with pytest.raises(RejectedEventError):
        memory.recall("ada", "x" * 1001)
    with pytest.raises(RejectedEventError):
        memory.recall("ada", "x", limit=0)
    assert memory.recall("nobody", "anything").ranked == ()


def test_access_logging_is_off_the_readers_path(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """A recall appends nothing itself; the background writer records the use as a signed
    policy entry, and compaction waits for it."""
    ada = memory_of(make_agent("ada"))
    ref = _warm(ada, "Rafael is learning Italian")
    size = memory.ledger.size()
    gate = threading.Event()
    original = memory.access._append

    def slow(agent: str, bodies: list[dict[str, object]]) -> object:
        gate.wait(10)
        return original(agent, bodies)

    memory.access._append = slow
    res = memory.recall("ada", "Italian lessons")
    assert [r.ref for r in res.ranked] == [ref]
    assert memory.ledger.size() == size  # the reader returned before the use was appended
    gate.set()
    memory.flush_access()
    memory.sync()
    assert memory.projection.item("ada", ref).access_count == 1


def test_the_default_embedder_leaves_logging_alone() -> None:
    """Regression: importing the wordllama package reconfigures the root logger (INFO), which
    flooded the CLI and the benchmarks with library logs; the embedder loads its files
    without importing it."""
    level = logging.getLogger().level
    WordLlamaEmbedder().embed(["hello there"])
    assert logging.getLogger().level == level
    assert not any(m == "wordllama" or m.startswith("wordllama.") for m in sys.modules)


def test_vectors_are_stored_as_float16_and_older_float32_rows_still_recall(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """Issue 42: a vector takes half the bytes of float32; a log whose vectors an older
    version wrote as float32 keeps them and recalls the paraphrase as before."""
    memory = MemoryService(ledger, embedder=EMBEDDER)
    ada = memory_for(memory, make_agent("ada"))
    want = _warm(ada, "Caroline adopted a greyhound and named him Biscuit")
    _warm(ada, "The quarterly report is due on Friday")
    assert [r.ref for r in memory.recall("ada", "Which dog does she have?", record_access=False).ranked][
        :1
    ] == [want]
    with ledger.store.engine.connect() as conn:
        sizes = {n for (n,) in conn.execute(text("SELECT length(vec) FROM mem_vectors"))}
    assert sizes == {2 * EMBEDDER.dim}
    # An older version's rows: the same vectors as float32, read by a fresh process.
    full = EMBEDDER.embed(
        ["Caroline adopted a greyhound and named him Biscuit", "The quarterly report is due on Friday"]
    )
    with ledger.store.engine.begin() as conn:
        refs = [r for (r,) in conn.execute(text("SELECT ref FROM mem_vectors ORDER BY ref"))]
        for ref, v in zip(refs, full, strict=True):
            conn.execute(
                text("UPDATE mem_vectors SET vec = :v WHERE ref = :r"),
                {"v": v.astype("<f4").tobytes(), "r": ref},
            )
    older = MemoryService(ledger, embedder=EMBEDDER)
    assert [r.ref for r in older.recall("ada", "Which dog does she have?", record_access=False).ranked][
        :1
    ] == [want]
    with ledger.store.engine.connect() as conn:
        assert {n for (n,) in conn.execute(text("SELECT length(vec) FROM mem_vectors"))} == {4 * EMBEDDER.dim}
