"""Policy bodies copy no erasable text (issue 40, finding 4), on both backends: a
``memory.replaced`` names the two memories by reference and leaf hash, never by value; after
both memories are erased no copy of either value is left anywhere the owner or anyone can
look (every stored body, the projection, recall, the owner's web view, an export, the SQLite
file); a version 1 body (logs written before issue 40 copied both values) goes with either
memory and keeps its decision, and one an older erasure left behind can be erased alone.
Rebuild == incremental after each step."""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.app import create_app
from api.settings import ApiSettings
from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.harness.transfer import export_memories
from engram.protocol.bodies import erased_body
from engram.protocol.errors import RejectedEventError
from engram.protocol.kinds import validate_body
from engram.protocol.uiticket import make_ticket
from ledger.log import Ledger, PolicyEvent
from ledger.memory.service import MemoryService
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf
from tests.contract.test_erasure_database_files import _sqlite_bytes
from tests.contract.test_memory_projection import pure_replay_digest
from verifier.merkle import leaf_hash

DAY = 86_400_000_000
OLD, NEW = "ophthalmologist", "cartographer"
TOKEN = "replacement-bodies-operator-token-0123456789"


def _same_after_rebuild(memory: MemoryService) -> None:
    incremental = memory.digest()
    assert pure_replay_digest(memory.ledger) == incremental
    assert memory.rebuild() == incremental


def _bodies(ledger: Ledger) -> list[bytes]:
    with ledger.store.engine.connect() as conn:
        return [bytes(r[0]) for r in conn.execute(text("SELECT body FROM bodies"))]


def _rows(ledger: Ledger) -> list[str]:
    with ledger.store.engine.connect() as conn:
        return [r[0] for r in conn.execute(text("SELECT content FROM mem_items"))]


def _owner_view(ledger: Ledger, agent: Agent, indices: list[int]) -> str:
    client = TestClient(
        create_app(
            ApiSettings(operator_token=TOKEN),
            ledger=ledger,
            memory_service=MemoryService(ledger, access_log="off"),
        )
    )
    ticket = make_ticket(ledger.origin, agent.agent_id, agent.signer.private_key, now_s=int(time.time()))
    assert client.get(f"/ui/login?ticket={ticket}", follow_redirects=False).status_code == 303
    pages = [client.get(f"/ui/agents/{agent.agent_id}/memory?tier={t}").text for t in ("HOT", "WARM", "past")]
    pages += [client.get(f"/ui/entries/{i}").text for i in indices]
    pages.append(client.get(f"/ui/entries?agent={agent.agent_id}").text)
    return "\n".join(pages)


def _nowhere(ledger: Ledger, memory: MemoryService, ada: AgentMemory, agent: Agent, words: tuple[str, ...],
             tmp_path: Path, backend: str) -> None:  # fmt: skip
    """No copy of ``words`` in a stored body, a projection row, recall, the owner's view, an
    export or (SQLite) the database file."""
    size = ledger.size()
    places = {
        "bodies": b"\n".join(_bodies(ledger)).decode("utf-8", "replace"),
        "projection": "\n".join(_rows(ledger)),
        "recall": memory.recall(
            "ada", "What is Caroline's job?", record_access=False, include_cold=True
        ).render(),
        "owner view": _owner_view(ledger, agent, list(range(size))),
    }
    files, _, _ = export_memories(ada, "mem0", tmp_path / f"export-{size}.json")
    places["export"] = "\n".join(f.read_text() for f in files)
    if backend == "sqlite":
        places["database file"] = _sqlite_bytes(tmp_path / "engram.db").decode("latin-1")
    for where, held in places.items():
        for w in words:
            assert w not in held.casefold(), f"{w} is still in the {where}"


def _ada(make_agent: Callable[..., Agent], memory_of: MemoryOf) -> tuple[Agent, AgentMemory]:
    agent = make_agent("ada")
    return agent, memory_of(agent)


def test_a_replacement_body_names_the_memories_by_reference_and_leaf_hash_never_by_value(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, finding 4: ``memory.replaced`` copied ``was`` and ``now``."""
    _, ada = _ada(make_agent, memory_of)
    old = ada.write(category="CONTEXT", content=f"Caroline works as an {OLD}.")
    clock.now += DAY
    new = ada.write(category="CONTEXT", content=f"Caroline works as a {NEW}.")
    [(index, body)] = [(i, b) for i, b in ledger.stream_bodies("ada", "memory.replaced")]
    assert body is not None and set(body) == {"item", "item_leaf", "by", "by_leaf", "rule", "policy_version"}
    for ref, digest in ((old.ref, body["item_leaf"]), (new.ref, body["by_leaf"])):
        raw = ledger.store.leaf(int(str(ref).split(".")[0]))
        assert raw is not None and digest == leaf_hash(raw).hex()
    stored = ledger.store.body(index)
    assert stored is not None and OLD.encode() not in stored[1] and NEW.encode() not in stored[1]
    with pytest.raises(RejectedEventError):  # a version 2 body that copies a value is refused
        validate_body("memory.replaced", {**body, "was": OLD})


def test_erasing_both_memories_leaves_no_copy_of_either_value_anywhere(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
    tmp_path: Path,
    backend: str,
) -> None:
    """Issue 40, finding 4: after both memories were erased, the policy entry still held both
    values and the owner's view showed them."""
    agent, ada = _ada(make_agent, memory_of)
    old = ada.write(category="CONTEXT", content=f"Caroline works as an {OLD}.")
    clock.now += DAY
    new = ada.write(category="CONTEXT", content=f"Caroline works as a {NEW}.")
    assert OLD in _owner_view(ledger, agent, [old.index]).casefold()  # the check can fail
    ada.erase(old.index, reason="asked to forget")
    _same_after_rebuild(memory)
    ada.erase(new.index, reason="asked to forget")
    _same_after_rebuild(memory)
    _nowhere(ledger, memory, ada, agent, (OLD, NEW), tmp_path, backend)


def _v1_log(
    ledger: Ledger, memory: MemoryService, ada: AgentMemory, clock: StepClock
) -> tuple[str, str, int]:
    """A log written before issue 40: two memories and the version 1 decision that the second
    replaces the first, copying both values (texts the detector of today does not pair, so
    that no version 2 decision joins it)."""
    old = ada.write(category="CONTEXT", content=f"Caroline is an {OLD} at the eye clinic.")
    clock.now += DAY
    new = ada.write(category="CONTEXT", content=f"Caroline became a {NEW} for the survey office.")
    assert old.ref is not None and new.ref is not None
    head = ledger.stream_head("ada", "memory.replaced")
    body = {
        "item": old.ref,
        "by": new.ref,
        "rule": "same_fact",
        "policy_version": 1,
        "subject": "Caroline",
        "attribute": "job",
        "was": OLD,
        "now": NEW,
    }
    [r] = ledger.append(
        [
            PolicyEvent(
                agent="ada",
                kind="memory.replaced",
                body=body,
                expect_head=None if head is None else head.index,
            )
        ]
    )
    memory.sync()
    assert memory.item("ada", old.ref).replaced_by == new.ref  # type: ignore[union-attr]
    return old.ref, new.ref, r.index


def test_erasing_a_memory_takes_the_version_1_decision_that_copied_its_value_and_keeps_the_decision(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
    tmp_path: Path,
    backend: str,
) -> None:
    """Issue 40, finding 4: old entries that quote an erased value are erased with it, and
    old logs replay to the same projection (the decision stays)."""
    agent, ada = _ada(make_agent, memory_of)
    old, new, decision = _v1_log(ledger, memory, ada, clock)
    third = ada.write(category="CONTEXT", content="Caroline keeps bees on the roof.")
    _same_after_rebuild(memory)
    plan = ada.erasure_plan(int(new.split(".")[0]))
    assert plan.also == (decision,) and plan.replaced == ((decision, old, new),)
    ada.erase(int(new.split(".")[0]), reason="asked to forget")
    assert ledger.store.body(decision) is None
    assert memory.item("ada", old).status == "active"  # type: ignore[union-attr]  # current again
    _same_after_rebuild(memory)
    ada.erase(int(old.split(".")[0]), reason="asked to forget")
    _same_after_rebuild(memory)
    _nowhere(ledger, memory, ada, agent, (OLD, NEW), tmp_path, backend)
    assert memory.item("ada", str(third.ref)).status == "active"  # type: ignore[union-attr]


def test_erasing_the_middle_of_a_version_1_chain_keeps_it_linear(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """The decisions an erasure takes replay as their stand-ins: the chain around the erased
    memory closes (issue 40, findings 4 and 5 on a log written before issue 40)."""
    _, ada = _ada(make_agent, memory_of)
    old, mid, _ = _v1_log(ledger, memory, ada, clock)
    clock.now += DAY
    last = ada.write(category="CONTEXT", content="Caroline turned baker at the harbour.")
    head = ledger.stream_head("ada", "memory.replaced")
    assert head is not None and last.ref is not None
    body = {"item": mid, "by": last.ref, "rule": "same_fact", "policy_version": 1,
            "subject": "Caroline", "attribute": "job", "was": NEW, "now": "baker"}  # fmt: skip
    ledger.append([PolicyEvent(agent="ada", kind="memory.replaced", body=body, expect_head=head.index)])
    ada.erase(int(mid.split(".")[0]), reason="asked to forget")
    assert memory.item("ada", old).status == "superseded"  # type: ignore[union-attr]
    assert memory.item("ada", old).replaced_by == last.ref  # type: ignore[union-attr]
    assert memory.item("ada", last.ref).status == "active"  # type: ignore[union-attr]
    assert all(b is None for _, b in ledger.stream_bodies("ada", "memory.replaced"))
    _same_after_rebuild(memory)


def _without_plan_checks(ledger: Ledger, ada: AgentMemory, body: dict[str, Any]) -> None:
    """An erasure as the service before issue 40 accepted it (no plan check, no decision
    taken along): what old logs hold."""
    rules = ledger.rules
    ledger.rules = dataclasses.replace(rules, validators=())  # type: ignore[misc]
    try:
        ada.agent.append("memory.erased", body)
    finally:
        ledger.rules = rules  # type: ignore[misc]


def test_a_version_1_decision_an_older_erasure_left_behind_can_be_erased_alone(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
    tmp_path: Path,
    backend: str,
) -> None:
    """Issue 40, finding 4: both memories erased (before issue 40), the policy entry still
    held both values, and ``memory erase`` refused that entry."""
    agent, ada = _ada(make_agent, memory_of)
    old, new, decision = _v1_log(ledger, memory, ada, clock)
    for ref in (new, old):
        i = int(ref.split(".")[0])
        _without_plan_checks(ledger, ada, erased_body(i, [ref], reason="asked to forget"))
    memory.sync()
    stored = ledger.store.body(decision)
    assert stored is not None and OLD.encode() in stored[1]  # what the finding saw
    _same_after_rebuild(memory)
    plan = ada.erasure_plan(decision)
    assert (plan.refs, plan.also, plan.replaced) == ((), (), ((decision, old, new),))
    ada.erase(decision, reason="the copy too")
    assert ledger.store.body(decision) is None
    _same_after_rebuild(memory)
    _nowhere(ledger, memory, ada, agent, (OLD, NEW), tmp_path, backend)


def test_a_version_2_decision_is_a_control_entry_an_erasure_never_takes(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Issue 40, findings 2 and 4: a decision that copies no value keeps its body, whether
    named alone or as a version 1 decision."""
    _, ada = _ada(make_agent, memory_of)
    old = ada.write(category="CONTEXT", content=f"Caroline works as an {OLD}.")
    clock.now += DAY
    ada.write(category="CONTEXT", content=f"Caroline works as a {NEW}.")
    [(index, body)] = ledger.stream_bodies("ada", "memory.replaced")
    assert body is not None
    forged = erased_body(index, [], reason="x", replaced=[(index, body["item"], body["by"])])
    size = ledger.size()
    with pytest.raises(RejectedEventError) as e:
        ada.agent.append("memory.erased", forged)
    assert e.value.check == "memory.erase_control" and ledger.size() == size
    with pytest.raises(RejectedEventError) as e:
        ada.erasure_plan(index)
    assert e.value.check == "memory.missing_item"
    assert ledger.store.body(index) is not None and memory.item("ada", str(old.ref)).status == "superseded"  # type: ignore[union-attr]


def test_the_migration_fills_the_copies_a_replay_gives(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Migration 0012 brings a projection made before it (no ``copies``) to what a rebuild
    gives, without a rebuild."""
    _, ada = _ada(make_agent, memory_of)
    _, new, _ = _v1_log(ledger, memory, ada, clock)
    _without_plan_checks(ledger, ada, erased_body(int(new.split(".")[0]), [new], reason="x"))
    memory.sync()
    want = memory.rebuild()
    with ledger.store.engine.begin() as conn:
        conn.execute(text("UPDATE mem_items SET copies = '[]'"))
    assert memory.projection.digest() != want
    path = Path(__file__).parents[2] / "migrations" / "versions" / "0012_replacement_copies.py"
    spec = importlib.util.spec_from_file_location("migration_0012", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with ledger.store.engine.begin() as conn:
        module.fill_copies(conn)
    assert memory.projection.digest() == want


def test_the_client_plans_the_version_1_decisions_over_http(ledger: Ledger, clock: StepClock) -> None:
    """The plan is the same on client and server (issue 40, finding 4): over HTTP the item
    rows carry ``copies``, and the shipped client's erasure takes the version 1 decision."""
    from engram.client.http import HttpTransport

    memory = MemoryService(ledger, access_log="off")
    client = TestClient(create_app(ApiSettings(operator_token=TOKEN), ledger=ledger, memory_service=memory))
    transport = HttpTransport("http://testserver", operator_token=TOKEN, http=client)
    agent = Agent.generate("ada", log_vkey=ledger.vkey, transport=transport, clock=clock)
    agent.register()
    ada = AgentMemory(agent, transport)
    old, new, decision = _v1_log(ledger, memory, ada, clock)
    [row] = [i for i in ada.items(status="all") if i.ref == new]
    assert row.copies == [{"index": decision, "item": old, "by": new}]
    ada.erase(int(new.split(".")[0]), reason="asked to forget")
    assert ledger.store.body(decision) is None
    assert [i.status for i in ada.items(status="all") if i.ref == old] == ["active"]


def test_an_erasure_that_forges_or_leaves_out_a_version_1_decision_is_refused_and_writes_nothing(
    ledger: Ledger,
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    """Attack on issue 40, finding 4: the decision an erasure carries is what replays fold, so
    a forged one would rewrite state; leaving the copy out would leave the value behind."""
    _, ada = _ada(make_agent, memory_of)
    old, new, decision = _v1_log(ledger, memory, ada, clock)
    other = ada.write(category="CONTEXT", content="Caroline keeps bees on the roof.")
    i = int(new.split(".")[0])
    size = ledger.size()
    for body, check in (
        (erased_body(i, [new], reason="x"), "memory.erase_plan"),  # the copy left behind
        (
            erased_body(i, [new], reason="x", also=[decision], replaced=[(decision, new, old)]),
            "memory.erase_plan",
        ),
        (
            erased_body(i, [new], reason="x", also=[decision], replaced=[(decision, old, str(other.ref))]),
            "memory.erase_plan",
        ),
        (erased_body(decision, [], reason="x", replaced=[(decision, new, old)]), "memory.erase_plan"),
        (
            erased_body(
                i,
                [new, str(other.ref)],
                reason="x",
                also=[decision, other.index],
                replaced=[(decision, old, new), (other.index, old, new)],
            ),
            "memory.erase_plan",
        ),
    ):
        with pytest.raises(RejectedEventError) as e:
            ada.agent.append("memory.erased", body)
        assert e.value.check == check, (body, e.value)
        assert ledger.size() == size and ledger.store.body(decision) is not None
    assert memory.item("ada", old).replaced_by == new  # type: ignore[union-attr]
    _same_after_rebuild(memory)
