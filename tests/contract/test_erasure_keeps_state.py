"""Erasure removes text, never state (issue 40, finding 2, the ledger's half), on both
backends: an erasure whose ``also`` (or ``refs``, ``sessions``) is not its plan is refused,
and erasing a control entry (a mesh, key or policy entry, an exemption, a revocation, an
erasure) is refused, each with its named check, through the SDK and over HTTP, and neither
writes anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.agent_memory import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.bodies import erased_body
from engram.protocol.errors import RejectedEventError
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf
from tests.contract.test_memory_projection import pure_replay_digest

OPERATOR = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"


def _same_after_rebuild(memory: MemoryService) -> None:
    incremental = memory.digest()
    assert pure_replay_digest(memory.ledger) == incremental
    assert memory.rebuild() == incremental


def _refused(ledger: Ledger, am: AgentMemory, body: dict[str, Any], check: str) -> None:
    size, stored = ledger.size(), {i: ledger.store.body(i) for i in _entries(body)}
    with pytest.raises(RejectedEventError) as e:
        am.agent.append("memory.erased", body)
    assert e.value.check == check, e.value
    assert ledger.size() == size
    assert {i: ledger.store.body(i) for i in _entries(body)} == stored  # nothing erased


def _entries(body: dict[str, Any]) -> list[int]:
    return [body["index"], *(body.get("also") or ())]


def test_an_erasure_with_an_also_list_other_than_its_plan_is_refused_and_writes_nothing(
    ledger: Ledger, memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 40, finding 2: the service did not check an erasure's ``also`` against the
    plan, so any of the agent's entries could ride along (a control entry's body went, and
    the fold read it as absent)."""
    ada = memory_of(make_agent("ada"))
    first = ada.write(category="LEARNING", content="Customer prefers email")
    dup = ada.write(category="LEARNING", content="customer prefers email!")
    other = ada.write(category="LEARNING", content="Deploys freeze on Fridays")
    ref = f"{first.index}.0"
    plan = memory.erasure_plan("ada", first.index)
    assert plan.also == (dup.index,) and plan.refs == (ref,)
    # an unrelated entry rides along
    _refused(
        ledger,
        ada,
        erased_body(first.index, [ref], reason="x", also=[dup.index, other.index]),
        "memory.erase_plan",
    )
    # the duplicate that holds the same text is left behind
    _refused(ledger, ada, erased_body(first.index, [ref], reason="x"), "memory.erase_plan")
    # a live item of an erased entry is not named
    _refused(
        ledger,
        ada,
        erased_body(other.index, [f"{other.index}.0"], reason="x", also=[first.index, dup.index]),
        "memory.erase_plan",
    )
    _same_after_rebuild(memory)
    ada.erase(first.index, reason="the plan itself is accepted")
    assert ledger.store.body(first.index) is None and ledger.store.body(dup.index) is None
    assert ledger.store.body(other.index) is not None
    _same_after_rebuild(memory)


def test_erasing_a_control_entry_is_refused_and_writes_nothing(
    ledger: Ledger, memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 40, finding 2: a member who left erased his own ``mesh.left`` and read the
    author's memories again; any control entry of the agent's streams (keys, meshes,
    policy decisions, exemptions, revocations, erasures) could lose its body the same way."""
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    mesh = ada.mesh_create("team")
    ada.mesh_invite(mesh, "bob")
    bob.mesh_join(mesh)
    left = bob.mesh_leave(mesh)
    note = bob.write(category="CONTEXT", content="Bob keeps notes here", tier="WARM")
    w = ada.write(category="CONTEXT", content="The build runs nightly at two", tier="HOT")
    ada.write(category="CONTEXT", content="A second note about the build", tier="HOT")
    exempt = ada.exempt(w.ref, reason="keep")
    ada.compact()  # policy decisions in ada's streams
    memory.recall("ada", "build", record_access=True)  # a memory.accessed entry
    ada.agent.append("share.revoked", {"token_id": "t" * 32})
    spare = ada.write(category="CONTEXT", content="A spare note to erase", tier="WARM")
    gone = ada.erase(spare.index, reason="x")
    controls: dict[str, int] = {"memory.decay_exempted": exempt.index, "memory.erased": gone.index}
    for kind in ("memory.tier_changed", "memory.accessed", "share.revoked", "mesh.created", "key.registered"):
        [(index, _)] = ledger.stream_bodies("ada", kind)[-1:]
        controls[kind] = index
    other = ada.write(category="CONTEXT", content="Ada's ordinary note", tier="WARM")
    assert set(controls) >= {"memory.tier_changed", "memory.accessed", "mesh.created", "key.registered"}
    for index in controls.values():
        body = erased_body(index, [other.ref], reason="x", also=[other.index])
        _refused(ledger, ada, body, "memory.erase_control")
        body = erased_body(other.index, [other.ref], reason="x", also=[index])  # riding along
        _refused(ledger, ada, body, "memory.erase_control")
    _refused(
        ledger,
        bob,
        erased_body(left.index, [note.ref], reason="x", also=[note.index]),
        "memory.erase_control",
    )
    assert [m.mesh for m in memory.meshes_of("bob")] == []  # still gone from the mesh
    _same_after_rebuild(memory)


def test_erasing_a_control_entry_over_http_is_refused_and_writes_nothing(ledger: Ledger) -> None:
    """Issue 40, finding 2, through the memories route and the shipped HTTP client."""
    client = TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))
    transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    agent = Agent.generate("ada", log_vkey=ledger.vkey, transport=transport)
    agent.register()
    ada = AgentMemory(agent, transport)
    mesh = ada.mesh_create("solo")
    [(created, _)] = ledger.stream_bodies("ada", "mesh.created")
    note = ada.write(category="CONTEXT", content="An ordinary note", tier="WARM")
    _refused(
        ledger,
        ada,
        erased_body(created, [note.ref], reason="x", also=[int(note.ref.split(".")[0])]),
        "memory.erase_control",
    )
    assert [m.mesh for m in ada.meshes()] == [mesh]
