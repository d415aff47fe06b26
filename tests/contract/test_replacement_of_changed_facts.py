"""Issue 29, Deliver 1 and 2, on both backends: a memory that states a new value of a fact
(same subject, same attribute, different value) replaces the older one through a
policy-signed ``memory.replaced`` entry that cites both; both stay in the log; recall answers
with the current value and says what it replaced, answers questions about the past with the
value true then, and incremental == rebuild holds with replacements and erasures. (Date
questions ranked by the dates memories state, also Deliver 2, are in test_recall_relevance.py.)"""

from __future__ import annotations

from collections.abc import Callable

from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from verifier.event import Leaf
from verifier.merkle import leaf_hash

DAY = 86_400_000_000


def _leaf_hash(ledger: Ledger, index: int) -> str:
    raw = ledger.store.leaf(index)
    assert raw is not None
    return leaf_hash(raw).hex()


def _replaced(ledger: Ledger, agent: str) -> list[tuple[int, dict[str, object]]]:
    return [(i, b) for i, b in ledger.stream_bodies(agent, "memory.replaced") if b is not None]


def test_a_changed_fact_replaces_the_old_one_through_a_policy_signed_entry(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory: MemoryService,
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    ada = memory_of(make_agent("ada"))
    nurse = ada.write(category="CONTEXT", content="Caroline works as a nurse at the children's hospital.")
    clock.now += 200 * DAY
    dog = ada.write(category="CONTEXT", content="Caroline adopted a greyhound named Biscuit.")
    clock.now += 200 * DAY
    pilot = ada.write(
        category="CONTEXT", content="Caroline started working as a pilot at a regional airline."
    )
    [(index, body)] = _replaced(ledger, "ada")
    # Policy v2 (issue 40, finding 4): the memories by reference and leaf hash, no value.
    assert body == {
        "item": nurse.ref,
        "item_leaf": _leaf_hash(ledger, nurse.index),
        "by": pilot.ref,
        "by_leaf": _leaf_hash(ledger, pilot.index),
        "rule": "same_fact",
        "policy_version": 2,
    }
    leaf = ledger.store.leaf(index)
    assert leaf is not None
    signer = Leaf.from_bytes(leaf).envelope.key_id
    assert signer == ledger.store.active_key_id("engram.policy")  # the policy's, not the agent's
    old, new = memory.item("ada", nurse.ref), memory.item("ada", pilot.ref)
    assert old is not None and new is not None and memory.item("ada", dog.ref) is not None
    assert (old.status, old.replaced_by, new.replaces) == ("superseded", pilot.ref, nurse.ref)
    assert old.valid_until_us == new.since_us  # true until the new value became true
    assert memory.item("ada", dog.ref).status == "active"  # type: ignore[union-attr]

    now = memory.recall("ada", "What is Caroline's job now?", record_access=False)
    refs = [r.ref for r in now.ranked]
    assert pilot.ref in refs and nurse.ref not in refs
    block = now.render()
    assert "earlier: nurse, until" in block and "since " in block

    then = memory.recall("ada", "What was Caroline's job before?", record_access=False)
    assert then.ranked[0].ref == nurse.ref
    assert "## EARLIER" in then.render() and "replaced by ref " + str(pilot.ref) in then.render()
    year = memory.item("ada", nurse.ref).since_us  # type: ignore[union-attr]
    from datetime import UTC, datetime

    in_year = datetime.fromtimestamp(year / 1e6, tz=UTC).year
    past = memory.recall("ada", f"What did Caroline do for work in {in_year}?", record_access=False)
    assert past.ranked[0].ref == nurse.ref


def test_weak_matches_never_replace(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory: MemoryService,
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    ada = memory_of(make_agent("ada"))
    kept = [
        ada.write(category="CONTEXT", content="Caroline works as a nurse at the children's hospital."),
        ada.write(category="CONTEXT", content="Melanie works as a teacher at the primary school."),
        ada.write(category="CONTEXT", content="The team uses PostgreSQL for storage."),
    ]
    clock.now += 30 * DAY
    for text in (
        "Caroline wants to work as a pilot.",  # a wish
        "Caroline's cousin works as a pilot.",  # someone else
        "Melanie is a nurse, she said, and works as a baker too. She also runs marathons.",  # two things
        "Does Melanie work as a pilot?",  # a question
        "Caroline is working as a nurse again this year.",  # the same value agrees
        "Caroline no longer works as a baker.",  # a negation
    ):
        ada.write(category="CONTEXT", content=text)
    clock.now += 30 * DAY
    ada.write(category="CONTEXT", content="The team uses SQLite for storage.", tags=["project-other"])
    assert _replaced(ledger, "ada") == []
    assert all(memory.item("ada", w.ref).status == "active" for w in kept)  # type: ignore[union-attr]


def test_replacement_survives_rebuild_and_erasure_restores_the_old_value(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory: MemoryService,
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    ada = memory_of(make_agent("ada"))
    lisbon = ada.write(category="CONTEXT", content="Melanie lives in Lisbon.")
    clock.now += 10 * DAY
    kyoto = ada.write(category="CONTEXT", content="Melanie moved to Kyoto.")
    clock.now += 10 * DAY
    hobart = ada.write(category="CONTEXT", content="Melanie relocated to Hobart.")
    assert len(_replaced(ledger, "ada")) == 2
    assert memory.item("ada", kyoto.ref).replaced_by == hobart.ref  # type: ignore[union-attr]
    before = memory.digest()
    assert memory.rebuild() == before
    ada.erase(hobart.index, reason="wrong")
    restored = memory.item("ada", kyoto.ref)
    assert restored is not None and restored.status == "active" and restored.valid_until_us is None
    assert memory.item("ada", lisbon.ref).status == "superseded"  # type: ignore[union-attr]
    after = memory.digest()
    assert memory.rebuild() == after
    res = memory.recall("ada", "Where does Melanie live now?", record_access=False)
    assert [r.ref for r in res.ranked][:1] == [kyoto.ref]


def test_distilled_sessions_replace_a_changed_fact(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory: MemoryService,
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    ada = memory_of(make_agent("ada"))
    for said in (
        "I started working as a nurse at the children's hospital.",
        "Big news: I started working as a pilot at a regional airline.",
    ):
        sid = ada.open_session(title="chat")
        ada.turn(sid, "user", f"Caroline: {said}")
        ada.turn(sid, "assistant", "Melanie: Wow, congrats!")
        ada.close_session(sid)
        clock.now += 60 * DAY
    [(_, body)] = _replaced(ledger, "ada")
    was, now = memory.item("ada", str(body["item"])), memory.item("ada", str(body["by"]))
    assert was is not None and now is not None
    assert "as a nurse" in was.content and "as a pilot" in now.content
    res = memory.recall("ada", "What is Caroline's latest occupation?", record_access=False)
    memories = [r for r in res.ranked if not r.is_record]  # the turns stay what was said
    assert "pilot" in memories[0].content and "nurse" not in " ".join(r.content for r in memories)
