"""Recall over one frozen query value, on every backend: ``MemoryService.recall`` given a
``RecallQuery`` answers exactly as given the old text and keywords, and a query value with
keywords beside it is refused rather than half read (issue 41: recall as numbered stages
over one RecallQuery)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from engram.protocol.queries import RecallQuery
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf


def test_a_query_value_recalls_what_the_old_keywords_recall(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    ada.write(category="LEARNING", content="Deploys happen on Tuesdays", tier="WARM", tags=["project-alpha"])
    ada.write(category="LEARNING", content="Deploys freeze in December", tier="WARM")
    ada.write(category="PREFERENCE", content="The user prefers short answers")
    now = memory.ledger.clock()
    options = {"limit": 1, "scopes": ["project:alpha"], "include_cold": True, "budget_tokens": 900}
    old = memory.recall("ada", "deploys", now_us=now, record_access=False, **options)  # type: ignore[arg-type]
    q = RecallQuery.of("deploys", **options)  # type: ignore[arg-type]
    new = memory.recall("ada", q, now_us=now, record_access=False)
    assert new == old
    assert [r.content for r in new.ranked] == ["Deploys happen on Tuesdays"]
    assert new.render() == old.render()


def test_a_query_value_carries_its_options_and_bad_options_are_refused_by_name(memory: MemoryService) -> None:
    with pytest.raises(TypeError, match="limit"):
        memory.recall("ada", RecallQuery.of("deploys"), limit=3)
    with pytest.raises(RejectedEventError) as e:
        memory.recall("ada", "deploys", sources="everything")
    assert e.value.check == "request.sources"
