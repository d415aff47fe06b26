"""What an erasure says becomes current when the current value is a correction (issue 40,
finding 5, attacked from outside), on both backends, in process and over HTTP: nurse ->
pilot, the owner corrects pilot to co-pilot, then erases the correction. The correction
takes pilot with it, so nurse is current again, and the answer must say so (it said
nothing: only a memory that itself replaced another was followed)."""

from __future__ import annotations

from collections.abc import Callable

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.answers import NowCurrent
from ledger.memory.service import MemoryService
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from tests.contract.test_replacement_chains import DAY, JOBS, _same_after_rebuild, _status, over_http

__all__ = ["over_http"]  # the HTTP fixture, shared with test_replacement_chains

CORRECTED = "Caroline started working as a co-pilot at a regional airline."


def test_erasing_a_corrected_current_value_says_the_older_value_is_current_again(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    ada = memory_of(make_agent("ada"))
    nurse = ada.write(category="CONTEXT", content=JOBS[0]).ref or ""
    clock.now += 100 * DAY
    pilot = ada.write(category="CONTEXT", content=JOBS[1]).ref or ""
    fix = ada.supersede(pilot, content=CORRECTED, reason="precise")
    assert [_status(memory, r) for r in (nurse, pilot, fix.ref or "")] == [
        "superseded",
        "superseded",
        "active",
    ]
    answer = ada.erase(fix.index, reason="none of it was true")
    assert (_status(memory, nurse), _status(memory, pilot)) == ("active", "erased")
    assert answer.current == [NowCurrent(erased=fix.ref or "", current=nurse)]
    _same_after_rebuild(memory)


def test_erasing_a_plain_correction_says_nothing_became_current(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """A correction of a fact that never changed is no chain: nothing to say."""
    ada = memory_of(make_agent("ada"))
    first = ada.write(category="LEARNING", content="Northwind settles bond trades in two days.").ref or ""
    fix = ada.supersede(first, content="Northwind settles bond trades in one day.", reason="checked")
    assert ada.erase(fix.index, reason="wrong").current == []


def test_erasing_a_corrected_current_value_says_what_is_current_over_http(over_http: AgentMemory) -> None:
    nurse = over_http.write(category="CONTEXT", content=JOBS[0]).ref or ""
    pilot = over_http.write(category="CONTEXT", content=JOBS[1]).ref or ""
    fix = over_http.supersede(pilot, content=CORRECTED, reason="precise")
    answer = over_http.erase(fix.index, reason="none of it was true")
    assert answer.current == [NowCurrent(erased=fix.ref or "", current=nurse)]
