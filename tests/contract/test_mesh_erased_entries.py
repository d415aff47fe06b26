"""Erasure removes text, never mesh state (issue 40, finding 2), on both backends: a mesh
entry whose body is gone keeps its effect in every fold the ledger makes (recall, the mesh
list, the append rules, proofs). The logs below are old logs on which erasing one's own mesh
entries was possible: the body is deleted as that erasure deleted it, the leaf stays."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.mesh import MeshReader
from tests.contract.conftest import MemoryOf, unchecked_bundle

LESSON = "Northwind's CFO signs off bond trades on Fridays only."


def _pair(make_agent: Callable[..., Agent], memory_of: MemoryOf) -> tuple[str, AgentMemory, AgentMemory]:
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    mesh = ada.mesh_create("desk")
    ada.mesh_invite(mesh, "bob")
    bob.mesh_join(mesh)
    ada.mesh_grant(mesh, share=["LEARNING"], read=[])
    bob.mesh_grant(mesh, share=[], read=["LEARNING"])
    return mesh, ada, bob


def _erase_body_as_an_old_log_did(ledger: Ledger, index: int) -> None:
    assert ledger.store.delete_body(index)
    assert ledger.store.body(index) is None and ledger.store.leaf(index) is not None


def _from_ada(memory: MemoryService, reader: str) -> list[str]:
    res = memory.recall(reader, "Northwind CFO bond trades", record_access=False)
    return [r.content for r in res.ranked if r.author == "ada"]


def test_a_left_member_cannot_read_again_by_erasing_its_leave(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 40, finding 2: bob left, erased his own ``mesh.left`` and read ada's new
    memories again without an invitation."""
    mesh, ada, bob = _pair(make_agent, memory_of)
    left = bob.mesh_leave(mesh)
    _erase_body_as_an_old_log_did(ledger, left.index)
    written = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    memory = MemoryService(ledger, access_log="off")  # a fresh reader of the log as it is now
    assert _from_ada(memory, "bob") == []
    assert [m.mesh for m in memory.meshes_of("bob")] == []
    folded = MeshReader(ledger.store).mesh(mesh, ledger.size())
    assert folded is not None and folded.members["bob"].left_index == left.index
    with pytest.raises(RejectedEventError) as e:  # the append rules fold the same way
        bob.mesh_grant(mesh, share=[], read=["LEARNING"])
    assert e.value.check == "mesh.not_member"
    with pytest.raises(RejectedEventError) as e:
        memory.mesh_proof("bob", mesh, written.ref or "")
    assert e.value.check == "mesh.not_shared"


def test_a_creators_erased_dissolution_keeps_the_mesh_dissolved(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 40, finding 2: the creator erased ``mesh.dissolved`` and the grants flowed again."""
    mesh, ada, _ = _pair(make_agent, memory_of)
    dissolved = ada.mesh_dissolve(mesh)
    _erase_body_as_an_old_log_did(ledger, dissolved.index)
    written = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    memory = MemoryService(ledger, access_log="off")
    assert _from_ada(memory, "bob") == []
    assert memory.meshes_of("bob") == [] and memory.meshes_of("ada") == []
    with pytest.raises(RejectedEventError) as e:
        ada.mesh_invite(mesh, "cy")
    assert e.value.check == "mesh.dissolved"
    with pytest.raises(RejectedEventError) as e:  # nor can it be created anew
        ada.mesh_create("desk")
    assert e.value.check == "mesh.exists"
    with pytest.raises(RejectedEventError) as e:
        memory.mesh_proof("bob", mesh, written.ref or "")
    assert e.value.check == "mesh.not_shared"


def test_an_erased_grant_shares_nothing_and_an_erased_removal_removes_every_member(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    mesh, ada, _ = _pair(make_agent, memory_of)
    ada.write(category="LEARNING", content=LESSON, tier="WARM")
    memory = MemoryService(ledger, access_log="off")
    assert _from_ada(memory, "bob") == [LESSON]
    withdrawal = ada.mesh_grant(mesh, share=[], read=[])
    _erase_body_as_an_old_log_did(ledger, withdrawal.index)
    assert _from_ada(MemoryService(ledger, access_log="off"), "bob") == []
    ada.mesh_grant(mesh, share=["LEARNING"], read=[])  # shares again, from here
    assert _from_ada(MemoryService(ledger, access_log="off"), "bob") == []  # the lesson is older
    cy = memory_of(make_agent("cy"))
    ada.mesh_invite(mesh, "cy")
    cy.mesh_join(mesh)
    removal = ada.mesh_remove(mesh, "cy")
    _erase_body_as_an_old_log_did(ledger, removal.index)
    folded = MeshReader(ledger.store).mesh(mesh, ledger.size())
    assert folded is not None and [m.agent for m in folded.active_members()] == ["ada"]


def test_a_bundle_that_withholds_a_departure_proves_nothing_for_the_member_who_left(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """Issue 40, finding 2, the crafted-bundle side: a member who left hands a buyer a bundle
    with its ``mesh.left`` body withheld; the verifier folds it as a departure, not as nothing."""
    import base64
    import json

    from ledger.bundle import mesh_read_claim
    from verifier.bundle import verify_bundle
    from verifier.errors import VerificationError
    from verifier.event import Leaf
    from verifier.note import VerifierKey

    mesh, ada, bob = _pair(make_agent, memory_of)
    ada.mesh_grant(mesh, share=["LEARNING"], read=[], backfill=True)
    written = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    left = bob.mesh_leave(mesh)
    # the bundle as an older builder would hand it out (create_bundle now refuses it, issue 40)
    doc = json.loads(unchecked_bundle(ledger, mesh_read_claim(ledger, "bob", mesh, written.ref or "")))
    entry = next(e for e in doc["entries"] if e["index"] == left.index)
    assert Leaf.from_bytes(base64.b64decode(entry["leaf"])).envelope.kind == "mesh.left"
    entry.pop("body", None)
    entry.pop("salt", None)
    with pytest.raises(VerificationError) as e:
        verify_bundle(json.dumps(doc).encode(), VerifierKey.parse(ledger.vkey))
    assert e.value.check == "claim.mesh"
