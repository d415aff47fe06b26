"""The narrow memory port bounds a query value however it was built: one made by its bare
constructor in process (not by its ``of``) is refused by the dispatcher naming the check,
as the query route refuses its JSON, before anything is read or recorded (no ``memory.accessed``
entry, no list index out of range, no integer overflow in the database). On every backend.

Issue 41 (attack round on the narrow memory port).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from engram.protocol.queries import (
    EntryQuery,
    HotBlockQuery,
    ItemQuery,
    ItemsQuery,
    MeshProofQuery,
    RecallQuery,
    SessionQuery,
)
from ledger.memory.asking import Asker, ask
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from tests.contract.conftest import MemoryOf

HAND_BUILT: list[tuple[str, Any, str]] = [
    ("recall-limit-huge", RecallQuery(text="deploys", limit=10**9), "request.limit"),
    ("recall-limit-bool", RecallQuery(text="deploys", limit=True), "request.limit"),
    ("recall-text-long", RecallQuery(text="x" * 100_000), "request.query"),
    ("recall-budget-negative", RecallQuery(text="deploys", budget_tokens=-5), "request.budget"),
    ("recall-flag-int", RecallQuery(text="deploys", include_cold=1), "request.include_cold"),  # type: ignore[arg-type]
    ("recall-mesh-not-id", RecallQuery(text="deploys", meshes=("m1",)), "request.meshes"),
    ("recall-sources", RecallQuery(text="deploys", sources="everything"), "request.sources"),
    ("items-limit-huge", ItemsQuery(limit=10**12), "request.limit"),
    ("items-limit-negative", ItemsQuery(limit=-1), "request.limit"),
    ("items-cursor-negative", ItemsQuery(after="-1.0"), "request.ref"),
    ("item-ref-bad", ItemQuery(ref="zz"), "request.ref"),
    ("entry-negative", EntryQuery(index=-1), "request.index"),
    ("entry-past-2-63", EntryQuery(index=2**70), "request.index"),
    ("session-path", SessionQuery(session="../x"), "request.session"),
    ("mesh-not-id", MeshProofQuery(mesh="x", ref="1.0"), "request.mesh"),
    ("hot-scope-bad", HotBlockQuery(scopes=frozenset({"nope:"})), "request.scopes"),
    ("hot-scope-mixed", HotBlockQuery(scopes=frozenset({"global", 5})), "request.members"),  # type: ignore[arg-type]
    ("not-a-query", "items", "request.ask"),
]


@pytest.mark.parametrize(("label", "query", "check"), HAND_BUILT, ids=[h[0] for h in HAND_BUILT])
def test_a_hand_built_query_value_is_bounded_before_anything_is_read(
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    label: str,
    query: Any,
    check: str,
) -> None:
    ada = make_agent("ada")
    memory_of(ada).write(category="LEARNING", content="Deploys happen on Tuesdays")
    size = memory.ledger.size()
    for asking in (
        lambda: ask(memory, Asker(agent="ada"), query),
        lambda: InProcessMemory(memory).ask(ada.signer, query),
    ):
        with pytest.raises(RejectedEventError) as e:
            asking()
        assert e.value.check == check, label
    assert memory.ledger.size() == size  # no memory.accessed, nothing else


def test_a_well_built_value_is_answered_as_built(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = make_agent("ada")
    memory_of(ada).write(category="LEARNING", content="Deploys happen on Tuesdays")
    page = ask(memory, Asker(agent="ada"), ItemsQuery(limit=1, status="all"))
    assert [i.content for i in page.items] == ["Deploys happen on Tuesdays"]
    recalled = ask(memory, Asker(agent="ada"), RecallQuery(text="deploys", scopes=frozenset({"global"})))
    assert "Tuesdays" in recalled.context


def test_the_service_recall_bounds_a_hand_built_value_before_recording_a_use(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """``MemoryService.recall`` takes a RecallQuery as its first stage's input: bounded there
    too, so a recall past the bounds records no ``memory.accessed``."""
    ada = make_agent("ada")
    memory_of(ada).write(category="LEARNING", content="Deploys happen on Tuesdays")
    size = memory.ledger.size()
    for query, check in [
        (RecallQuery(text="deploys", limit=10**9), "request.limit"),
        (RecallQuery(text="x" * 100_000), "request.query"),
        (RecallQuery(text="deploys", scopes=frozenset({"global", 5})), "request.members"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(RejectedEventError) as e:
            memory.recall("ada", query)
        assert e.value.check == check
    assert memory.ledger.size() == size
    assert "Tuesdays" in memory.recall("ada", RecallQuery(text="deploys", limit=3)).render()
