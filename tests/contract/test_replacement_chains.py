"""A replacement chain under erasure, on both backends (issue 40, finding 5): nurse -> pilot
-> chef, erase pilot: chef stays current and nurse stays past (recall gives chef alone);
erasing the current value says, in process and over HTTP, which value is current now. Every
step keeps rebuild == incremental."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.agent_memory import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.answers import NowCurrent
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from tests.contract.test_memory_projection import pure_replay_digest

DAY = 86_400_000_000
OPERATOR = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"
JOBS = (
    "Caroline works as a nurse at the children's hospital.",
    "Caroline started working as a pilot at a regional airline.",
    "Caroline got a new job as a chef at a bistro.",
)


def _same_after_rebuild(memory: MemoryService) -> None:
    incremental = memory.digest()
    assert pure_replay_digest(memory.ledger) == incremental
    assert memory.rebuild() == incremental


def _chain(ada: AgentMemory, clock: StepClock) -> list[str]:
    refs = []
    for text in JOBS:
        refs.append(ada.write(category="CONTEXT", content=text).ref)
        clock.now += 100 * DAY
    return refs


def _status(memory: MemoryService, ref: str) -> str:
    it = memory.item("ada", ref)
    assert it is not None
    return it.status


def _now(memory: MemoryService) -> list[str]:
    res = memory.recall("ada", "What is Caroline's job now?", record_access=False)
    return [r.content for r in res.ranked if not r.is_record]


def test_a_replacement_chain_stays_linear_when_its_middle_is_erased(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    """Issue 40, finding 5: erasing pilot made nurse and chef both current, and recall gave
    both."""
    ada = memory_of(make_agent("ada"))
    nurse, pilot, chef = _chain(ada, clock)
    assert [_status(memory, r) for r in (nurse, pilot, chef)] == ["superseded", "superseded", "active"]
    _same_after_rebuild(memory)
    erased = ada.erase(int(pilot.split(".")[0]), reason="never flew")
    assert erased.current == []  # the current value did not change
    assert (_status(memory, nurse), _status(memory, pilot), _status(memory, chef)) == (
        "superseded",
        "erased",
        "active",
    )
    assert memory.item("ada", nurse).replaced_by == chef  # type: ignore[union-attr]
    assert memory.item("ada", chef).replaces == nurse  # type: ignore[union-attr]
    now = _now(memory)
    assert any("chef" in c for c in now) and not any("nurse" in c for c in now)
    block = memory.recall("ada", "What is Caroline's job now?", record_access=False).render()
    assert "earlier: nurse" in block and "pilot" not in block
    then = memory.recall("ada", "What was Caroline's job before?", record_access=False)
    assert next(r.content for r in then.ranked if not r.is_record).startswith("Caroline works as a nurse")
    _same_after_rebuild(memory)


def test_erasing_the_current_value_says_what_becomes_current(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    """Issue 40, finding 5: erasing the current value silently made the older one current."""
    ada = memory_of(make_agent("ada"))
    nurse, pilot, chef = _chain(ada, clock)
    answer = ada.erase(int(chef.split(".")[0]), reason="wrong")
    assert answer.current == [NowCurrent(erased=chef, current=pilot)]
    assert answer.to_json()["current"] == [{"erased": chef, "current": pilot}]
    assert _status(memory, pilot) == "active" and _status(memory, nurse) == "superseded"
    _same_after_rebuild(memory)
    answer = ada.erase(int(pilot.split(".")[0]), reason="wrong too")
    assert answer.current == [NowCurrent(erased=pilot, current=nurse)]
    assert _status(memory, nurse) == "active"
    assert memory.item("ada", nurse).valid_until_us is None  # type: ignore[union-attr]
    _same_after_rebuild(memory)


def test_erasing_two_values_of_a_chain_at_once_leaves_the_oldest_current(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, clock: StepClock
) -> None:
    """The two later values come from one distilled session, so one erasure takes both:
    the oldest value left is current again, and the answer says so."""
    ada = memory_of(make_agent("ada"))
    nurse = ada.write(category="CONTEXT", content=JOBS[0]).ref
    clock.now += 100 * DAY
    sid = ada.open_session(title="news")
    ada.turn(sid, "user", "Caroline: I started working as a pilot at a regional airline.")
    clock.now += 100 * DAY
    ada.turn(sid, "user", "Caroline: I got a new job as a chef at a bistro.")
    closed = ada.close_session(sid)
    assert closed.distilled is not None
    refs = [i.ref for i in memory.items("ada", status=None) if i.index == closed.distilled]
    later = [
        r for r in refs if "chef" in memory.item("ada", r).content or "pilot" in memory.item("ada", r).content
    ]  # type: ignore[union-attr]
    assert len(later) == 2 and _status(memory, nurse) == "superseded"
    current = [r for r in later if _status(memory, r) == "active"]
    assert len(current) == 1
    _same_after_rebuild(memory)
    answer = ada.erase(closed.distilled, reason="not true")
    assert answer.current == [NowCurrent(erased=current[0], current=nurse)]
    assert _status(memory, nurse) == "active"
    assert memory.item("ada", nurse).replaced_by is None  # type: ignore[union-attr]
    _same_after_rebuild(memory)


@pytest.fixture
def over_http(ledger: Ledger) -> AgentMemory:
    client = TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))
    transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    agent = Agent.generate("ada", log_vkey=ledger.vkey, transport=transport)
    agent.register()
    return AgentMemory(agent, transport)


def test_erasing_the_current_value_says_what_becomes_current_over_http(over_http: AgentMemory) -> None:
    """Issue 40, finding 5, through the HTTP answer (``current`` in the memories route's
    answer) and the shipped client."""
    refs = [over_http.write(category="CONTEXT", content=text).ref for text in JOBS]
    nurse, pilot, chef = refs
    answer = over_http.erase(int(chef.split(".")[0]), reason="wrong")
    assert answer.current == [NowCurrent(erased=chef, current=pilot)]
    answer = over_http.erase(int(nurse.split(".")[0]), reason="not current")
    assert answer.current == []
    [row] = [i for i in over_http.items(status="all") if i.ref == pilot]
    assert row.status == "active" and row.replaces is None
