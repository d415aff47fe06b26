"""Erasure that stays erased (issue 12), on every backend: one erasure takes the bodies that
said the same thing with it, rebuild == incremental after it, an erased distillation is never
redone, turns are erasable and take the memories distilled from them, and nothing of another
agent can be named."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.bodies import erased_body
from engram.protocol.errors import RejectedEventError
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf
from tests.contract.test_log_contract import replay
from tests.contract.test_memory_projection import pure_replay_digest


def _texts(memory: MemoryService, agent: str) -> list[str]:
    live = memory.projection.items(agent, status=None)
    return [i.content for i in live if i.status != "erased" and i.content]


def _same_after_rebuild(memory: MemoryService) -> None:
    incremental = memory.digest()
    assert pure_replay_digest(memory.ledger) == incremental
    assert memory.rebuild() == incremental


def test_erasing_a_memory_also_erases_the_duplicate_that_confirmed_it(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Regression (hypothesis found it): write X, write X again (a confirmation), erase the
    first. The duplicate's body still held the text, so a rebuild brought it back as a new
    item that the incremental projection did not have."""
    ada = memory_of(make_agent("ada"))
    first = ada.write(category="LEARNING", content="Customer prefers email")
    dup = ada.write(category="LEARNING", content="customer prefers email!")
    other = ada.write(category="LEARNING", content="Deploys freeze on Fridays")
    assert memory.projection.item("ada", f"{first.index}.0").confirmations == 2
    plan = memory.erasure_plan("ada", first.index)
    assert plan.also == (dup.index,) and plan.refs == (f"{first.index}.0",)
    ada.erase(first.index, reason="asked to forget")
    assert memory.ledger.store.body(first.index) is None and memory.ledger.store.body(dup.index) is None
    assert memory.ledger.store.body(other.index) is not None
    assert _texts(memory, "ada") == ["Deploys freeze on Fridays"]
    _same_after_rebuild(memory)
    assert _texts(memory, "ada") == ["Deploys freeze on Fridays"]
    replay(memory.ledger)  # every proof and stream chain still verifies


def test_erasing_the_duplicate_entry_erases_the_memory_it_confirmed(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """A confirming entry made no item of its own; erasing it erases what it said."""
    ada = memory_of(make_agent("ada"))
    first = ada.write(category="LEARNING", content="Odile lives in Porto")
    dup = ada.write(category="LEARNING", content="Odile lives in Porto")
    ada.erase(dup.index, reason="asked to forget")
    assert memory.ledger.store.body(first.index) is None and memory.ledger.store.body(dup.index) is None
    assert _texts(memory, "ada") == []
    _same_after_rebuild(memory)


def test_an_erased_distillation_is_never_distilled_again(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Regression: after erasing a memory.distilled entry, rebuild forgot the session was
    distilled and `engram session distill` brought the erased text back under a new ref."""
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    ada.turn(sid, "user", "Jo: I moved to Lisbon with my partner Ana in March.")
    closed = ada.close_session(sid)
    assert closed.entries == 1
    ada.erase(closed.distilled, reason="asked to forget")
    assert memory.ledger.store.body(closed.distilled) is None
    _same_after_rebuild(memory)
    assert memory.projection.session("ada", sid).distilled
    distilled, entries, _ = memory.finish_session("ada", sid)
    assert distilled is None and entries == 0  # never distilled again
    assert not [
        r for r in memory.recall("ada", "Lisbon partner", record_access=False).ranked if not r.is_record
    ]


def test_a_turn_is_erasable_and_takes_the_memories_distilled_from_it(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session()
    keep = ada.turn(sid, "user", "Jo: I started pottery lessons at the community center.")
    ada.turn(sid, "assistant", "Ana: Wow, lovely!")  # another speaker: Jo's turns do not merge
    secret = ada.turn(sid, "user", "Jo: My home address is 12 Rua Augusta in Lisbon.")
    closed = ada.close_session(sid)
    assert closed.entries == 2
    plan = memory.erasure_plan("ada", secret.index)
    assert plan.also == (closed.distilled,) and plan.sessions == (sid,)
    ada.erase(secret.index, reason="pasted by mistake")
    for gone in (secret.index, closed.distilled):
        assert memory.ledger.store.body(gone) is None
    assert memory.ledger.store.body(keep.index) is not None  # the other turn is still a record
    recalled = memory.recall("ada", "Rua Augusta address Lisbon", record_access=False).ranked
    assert all("Augusta" not in r.content for r in recalled)
    assert [r.index for r in memory.recall("ada", "pottery lessons", record_access=False).ranked] == [
        keep.index
    ]
    _same_after_rebuild(memory)
    assert memory.finish_session("ada", sid)[0] is None  # the session stays distilled
    replay(memory.ledger)


def test_erasing_a_memory_erases_its_corrections(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    w = ada.write(category="CONTEXT", content="Samir's phone number is 555 0101", tier="WARM")
    s = ada.supersede(f"{w.index}.0", content="Samir's phone number is 555 0199", reason="new number")
    ada.erase(w.index, reason="asked to forget")
    assert memory.ledger.store.body(s.index) is None
    assert _texts(memory, "ada") == []
    _same_after_rebuild(memory)


def test_an_erasure_never_reaches_another_agents_entry(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    mine = ada.write(category="CONTEXT", content="Ada's note", tier="WARM")
    theirs = bob.write(category="CONTEXT", content="Bob's private note", tier="WARM")
    size = memory.ledger.size()
    with pytest.raises(RejectedEventError) as e:
        ada.erase(theirs.index, reason="x")  # the client reads the entry's (verified) leaf first
    assert e.value.check == "memory.erase" and "not one of ada's" in str(e.value)
    with pytest.raises(RejectedEventError) as e:
        memory.erasure_plan("ada", theirs.index)  # the plan the service checks
    assert e.value.check == "memory.erase"
    assert memory.ledger.size() == size
    forged = erased_body(mine.index, [f"{mine.index}.0"], reason="x", also=[theirs.index])
    with pytest.raises(RejectedEventError) as e:
        ada.agent.append("memory.erased", forged)
    assert e.value.check == "memory.erase"
    assert memory.ledger.size() == size and memory.ledger.store.body(theirs.index) is not None
