"""A mesh proof discloses exactly what the grant shares (issue 40, finding 1), on both
backends. Entry indexes are public, so a member can ask for a proof of any of the author's
entries: the service refuses, and the offline verifier fails with a named check, a
``mesh_read`` of a memory that was not active, WARM and of a shared category at the
checkpoint; proving one distilled memory discloses none of the session's others; a bundle for
one mesh carries no body of the creator's other meshes."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from ledger.bundle import mesh_read_claim
from ledger.log import Ledger, PolicyEvent
from ledger.memory.service import MemoryService
from tests.conftest import StepClock
from tests.contract.conftest import MemoryOf, unchecked_bundle
from verifier.bundle import verify_bundle
from verifier.errors import VerificationError
from verifier.event import Leaf
from verifier.note import VerifierKey

LESSON = "Northwind's treasury team approves bond trades only on Fridays."
DAY_US = 86_400_000_000


def _desk(make_agent: Callable[..., Agent], memory_of: MemoryOf) -> tuple[str, AgentMemory, AgentMemory]:
    """ada shares LEARNING, PREFERENCE and CONTEXT through ada/desk; bob reads them."""
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    mesh = ada.mesh_create("desk", title="trading desk")
    ada.mesh_invite(mesh, "bob")
    bob.mesh_join(mesh)
    cats = ["LEARNING", "PREFERENCE", "CONTEXT"]
    ada.mesh_grant(mesh, share=cats, read=[])
    bob.mesh_grant(mesh, share=[], read=cats)
    return mesh, ada, bob


def _bundle(ledger: Ledger, reader: str, mesh: str, ref: str) -> bytes:
    """The log's bundle for the claim as an older or crafted builder would hand it out
    (create_bundle refuses a claim its verifier would fail)."""
    return unchecked_bundle(ledger, mesh_read_claim(ledger, reader, mesh, ref))


def _check(ledger: Ledger, data: bytes) -> str:
    """The verifier's verdict: VERIFIED or the failed check."""
    try:
        verify_bundle(data, VerifierKey.parse(ledger.vkey))
    except VerificationError as e:
        return e.check
    return "VERIFIED"


def _refused(memory: MemoryService, reader: str, mesh: str, ref: str) -> RejectedEventError:
    with pytest.raises(RejectedEventError) as e:
        memory.mesh_proof(reader, mesh, ref)
    return e.value


def _leaf(entry: dict[str, Any]) -> Leaf:
    return Leaf.from_bytes(base64.b64decode(entry["leaf"]))


def _disclosed_text(data: bytes) -> str:
    """Every body a bundle discloses, decoded."""
    doc = json.loads(data)
    return "\n".join(base64.b64decode(e["body"]).decode() for e in doc["entries"] if "body" in e)


def test_a_member_cannot_prove_the_authors_hot_memory(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    """Issue 40, finding 1: `engram mesh prove --ref` built, and engram-verify accepted, a
    proof of ada's HOT preference (category and grant were checked, never the tier)."""
    mesh, ada, _ = _desk(make_agent, memory_of)
    hot = ada.write(category="PREFERENCE", content="Ada prefers to be called Addie at home.", tier="HOT")
    shared = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    assert _refused(memory, "bob", mesh, hot.ref or "").check == "mesh.not_shared"
    assert _check(ledger, _bundle(ledger, "bob", mesh, hot.ref or "")) == "claim.status"
    proof = memory.mesh_proof("bob", mesh, shared.ref or "")
    assert _check(ledger, proof) == "VERIFIED"
    assert "Addie" not in _disclosed_text(proof)


def test_a_member_cannot_prove_a_replaced_or_corrected_past_value(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    """Issue 40, finding 1: a replaced (past) value was provable as shared."""
    mesh, ada, _ = _desk(make_agent, memory_of)
    old = ada.write(
        category="CONTEXT", content="Caroline works as a nurse at the children's hospital.", tier="WARM"
    )
    new = ada.write(category="CONTEXT", content="Caroline works as a pilot for a cargo airline.", tier="WARM")
    memory.sync()
    replaced = memory.projection.item("ada", old.ref or "")
    assert replaced is not None and replaced.status == "superseded" and replaced.replaced_by == new.ref
    assert _refused(memory, "bob", mesh, old.ref or "").check == "mesh.not_shared"
    assert _check(ledger, _bundle(ledger, "bob", mesh, old.ref or "")) == "claim.status"
    assert _check(ledger, memory.mesh_proof("bob", mesh, new.ref or "")) == "VERIFIED"
    # a correction by the author's own word: the original is past too
    wrong = ada.write(category="LEARNING", content="Northwind settles bond trades in two days.", tier="WARM")
    ada.supersede(wrong.ref or "", content="Northwind settles bond trades in one day.", reason="checked")
    assert _refused(memory, "bob", mesh, wrong.ref or "").check == "mesh.not_shared"
    assert _check(ledger, _bundle(ledger, "bob", mesh, wrong.ref or "")) == "claim.status"


def test_a_member_cannot_prove_an_archived_or_erased_memory(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    memory: MemoryService,
    memory_of: MemoryOf,
    clock: StepClock,
) -> None:
    mesh, ada, _ = _desk(make_agent, memory_of)
    idle = ada.write(category="LEARNING", content="Northwind once asked for a quarterly review.", tier="WARM")
    gone = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    assert _check(ledger, memory.mesh_proof("bob", mesh, idle.ref or "")) == "VERIFIED"
    clock.now += 200 * DAY_US
    memory.compact("ada")
    archived = memory.projection.item("ada", idle.ref or "")
    assert archived is not None and archived.status == "archived"
    assert _refused(memory, "bob", mesh, idle.ref or "").check == "mesh.not_shared"
    assert _check(ledger, _bundle(ledger, "bob", mesh, idle.ref or "")) == "claim.status"
    # an exemption restores it: provable again, the exemption's reason never disclosed
    ada.exempt(idle.ref or "", reason="keep: the auditor's private remark about Northwind")
    proof = memory.mesh_proof("bob", mesh, idle.ref or "")
    assert _check(ledger, proof) == "VERIFIED" and "auditor" not in _disclosed_text(proof)
    ada.erase(gone.index, reason="wrong client")
    assert _refused(memory, "bob", mesh, gone.ref or "").check == "mesh.not_shared"
    assert _check(ledger, _bundle(ledger, "bob", mesh, gone.ref or "")) == "claim.undisclosed"


def test_proving_one_distilled_memory_discloses_none_of_the_sessions_others(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    """Issue 40, finding 1: proving one shared memory of a distilled session handed over the
    whole memory.distilled body (the author's other memories, a home address)."""
    mesh, ada, _ = _desk(make_agent, memory_of)
    sid = ada.open_session()
    ada.turn(sid, "user", "Jo: I started pottery lessons at the community center.")
    ada.turn(sid, "assistant", "Ana: Wow, lovely!")
    ada.turn(sid, "user", "Jo: My home address is 12 Rua Augusta in Lisbon.")
    closed = ada.close_session(sid)
    memory.sync()
    items = {
        it.content: it for it in memory.projection.items("ada", status=None) if it.index == closed.distilled
    }
    pottery = next(it for text, it in items.items() if "pottery" in text)
    home = next(it for text, it in items.items() if "Rua Augusta" in text)
    assert pottery.tier == "WARM" and pottery.status == "active"
    proof = memory.mesh_proof("bob", mesh, pottery.ref)
    assert _check(ledger, proof) == "VERIFIED"
    text = _disclosed_text(proof)
    assert "pottery" in text and "Rua Augusta" not in text and "Ana" not in text
    # the verifier refuses a bundle that discloses the session's other memories
    stored = ledger.store.body(closed.distilled or 0)
    assert stored is not None
    doc = json.loads(proof)
    entry = next(e for e in doc["entries"] if e["index"] == closed.distilled)
    entry["body"] = base64.b64encode(stored[1]).decode()
    assert _check(ledger, json.dumps(doc).encode()) == "claim.disclosure"
    assert home.ref != pottery.ref


def test_a_distillation_made_before_per_entry_commitments_is_never_proven_to_a_reader(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    mesh, ada, _ = _desk(make_agent, memory_of)
    sid = ada.open_session()
    body = {
        "session": sid,
        "input": {"start": 0, "end": 1, "digest": "ab" * 32},
        "distiller": {"name": "old", "version": "1"},
        "entries": [
            {"category": "LEARNING", "content": LESSON, "confidence": 70},
            {"category": "CONTEXT", "content": "Jo lives at 12 Rua Augusta in Lisbon.", "confidence": 70},
        ],
    }
    [distilled] = ledger.append(
        [PolicyEvent(agent="ada", kind="memory.distilled", body=body, expect_head=None)]
    )
    ref = f"{distilled.index}.0"
    decision = {"item": ref, "from": "HOT", "to": "WARM", "rule": "test", "policy_version": 1}
    ledger.append([PolicyEvent(agent="ada", kind="memory.tier_changed", body=decision, expect_head=None)])
    memory.sync()
    item = memory.projection.item("ada", ref)
    assert item is not None and item.tier == "WARM" and item.status == "active"
    assert _refused(memory, "bob", mesh, ref).check == "mesh.not_disclosable"
    assert _refused(memory, "bob", mesh, f"{distilled.index}.1").check == "mesh.not_shared"  # still HOT


def test_a_bundle_for_one_mesh_carries_no_body_of_the_creators_other_meshes(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    """Issue 40, finding 1: the mesh streams are per agent and kind, so a bundle for one mesh
    carried the creator's other meshes' names, titles, invitees and grants."""
    mesh, ada, _ = _desk(make_agent, memory_of)
    cy = memory_of(make_agent("cy"))
    other = ada.mesh_create("falcon", title="Project Falcon acquisition")
    ada.mesh_invite(other, "cy")
    cy.mesh_join(other)
    ada.mesh_grant(other, share=["COMMITMENT"], read=["COMMITMENT"])
    shared = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    proof = memory.mesh_proof("bob", mesh, shared.ref or "")
    assert _check(ledger, proof) == "VERIFIED"
    text = _disclosed_text(proof)
    assert "falcon" not in text.casefold() and '"cy"' not in text and "COMMITMENT" not in text
    doc = json.loads(proof)
    kinds = {_leaf(e).envelope.kind for e in doc["entries"]}
    assert not {"memory.accessed", "memory.decay_exempted"} & {
        _leaf(e).envelope.kind for e in doc["entries"] if "body" in e
    }
    assert "mesh.created" in kinds
    # every other-mesh entry is absent, leaf and all
    others = {
        i for i in range(ledger.size()) if (b := ledger.store.body(i)) is not None and b"ada/falcon" in b[1]
    }
    assert others and not others & {e["index"] for e in doc["entries"]}


def test_a_refusal_says_nothing_of_the_authors_memories(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    """Attacking the fix: a refusal that named the reason (HOT, not a shared category,
    superseded) would tell any agent that signs a request what ada's entries are."""
    mesh, ada, _ = _desk(make_agent, memory_of)
    dee = memory_of(make_agent("dee"))
    hot = ada.write(category="PREFERENCE", content="Ada prefers window seats.", tier="HOT")
    commit = ada.write(category="COMMITMENT", content="Ada will call Northwind on Monday.", tier="WARM")
    shared = ada.write(category="LEARNING", content=LESSON, tier="WARM")
    answers = set()
    for reader, ref in (
        ("bob", hot.ref),
        ("bob", commit.ref),
        ("dee", shared.ref),
        ("bob", f"{ledger.size() + 5}.0"),
        ("bob", f"{shared.index}.3"),
        ("bob", "0.0"),  # a key event, not a memory
    ):
        e = _refused(memory, reader, mesh, ref or "")
        answers.add((e.check, str(e).replace(ref or "", "REF").replace(reader, "READER")))
    assert len(answers) == 1, answers
    assert dee.meshes() == []
