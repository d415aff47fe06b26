"""Issue 30, Memory Mesh, on both backends: a swarm shares chosen WARM categories. A's
learning reaches B and C in their next recall and not D; a withdrawn category stops flowing;
an erased memory vanishes for every member; only the creator administers; a non-member's
events are refused with typed checks; HOT stays private; incremental == rebuild."""

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

LEARNING = "The client Northwind prefers low-risk bond portfolios over equities."


def _swarm(make_agent: Callable[..., Agent], memory_of: MemoryOf) -> tuple[str, dict[str, AgentMemory]]:
    mems = {name: memory_of(make_agent(name)) for name in ("ada", "bob", "cy", "dee")}
    ada, bob, cy = mems["ada"], mems["bob"], mems["cy"]
    mesh = ada.mesh_create("advisors", title="client advisors")
    for who in ("bob", "cy"):
        ada.mesh_invite(mesh, who)
    bob.mesh_join(mesh)
    cy.mesh_join(mesh)
    ada.mesh_grant(mesh, share=["LEARNING", "PREFERENCE"], read=["LEARNING"])
    bob.mesh_grant(mesh, share=[], read=["LEARNING", "PREFERENCE"])
    cy.mesh_grant(mesh, share=["LEARNING"], read=["LEARNING"])
    return mesh, mems


def _shared(memory: MemoryService, reader: str, query: str) -> list[tuple[str | None, str | None, str]]:
    res = memory.recall(reader, query, record_access=False)
    return [(r.author, r.mesh, r.content) for r in res.ranked if r.author is not None]


def test_a_learning_reaches_the_members_who_read_it_and_no_one_else(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    mesh, mems = _swarm(make_agent, memory_of)
    ada = mems["ada"]
    ada.write(category="LEARNING", content=LEARNING, tier="WARM")
    ada.write(category="CONTEXT", content="Northwind's account manager is on leave.", tier="WARM")
    ada.write(category="PREFERENCE", content="Northwind wants weekly bond reports.", tier="HOT")
    query = "what risk does Northwind prefer for bonds?"
    for reader in ("bob", "cy"):
        shared = _shared(memory, reader, query)
        assert ("ada", mesh, LEARNING) in shared, (reader, shared)
        assert all(a == "ada" for a, _, _ in shared)
        assert not any(
            "account manager" in c or "weekly bond reports" in c for _, _, c in shared
        )  # CONTEXT, HOT
    assert _shared(memory, "dee", query) == []  # not a member
    block = memory.recall("bob", query, record_access=False).render()
    assert "## MESH" in block and f"by ada via mesh {mesh}" in block
    # the author's own memory is never rewritten into the reader's
    assert not any(LEARNING in it.content for it in memory.projection.items("bob", status=None))


def test_a_withdrawn_category_stops_flowing_and_an_erased_memory_vanishes(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    mesh, mems = _swarm(make_agent, memory_of)
    ada, cy = mems["ada"], mems["cy"]
    w = ada.write(category="LEARNING", content=LEARNING, tier="WARM")
    cy_note = cy.write(
        category="LEARNING", content="Northwind's CFO signs off bond trades on Fridays.", tier="WARM"
    )
    query = "Northwind bonds"
    assert {a for a, _, _ in _shared(memory, "bob", query)} == {"ada", "cy"}
    cy.mesh_grant(mesh, share=[], read=["LEARNING"])  # withdrawn
    assert {a for a, _, _ in _shared(memory, "bob", query)} == {"ada"}
    ada.erase(w.index, reason="wrong client")
    for reader in ("bob", "cy"):
        assert not any(LEARNING in c for _, _, c in _shared(memory, reader, query))
    assert cy_note.ref is not None
    before = memory.digest()
    assert memory.rebuild() == before


def test_joining_never_exposes_older_memories_unless_the_grant_says_so(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    ada = memory_of(make_agent("ada"))
    bob = memory_of(make_agent("bob"))
    old = "Northwind rejected the equity proposal in March."
    ada.write(category="LEARNING", content=old, tier="WARM")
    mesh = ada.mesh_create("late")
    ada.mesh_invite(mesh, "bob")
    bob.mesh_join(mesh)
    bob.mesh_grant(mesh, share=[], read=["LEARNING"])
    ada.mesh_grant(mesh, share=["LEARNING"], read=[])
    assert _shared(memory, "bob", "Northwind equity proposal") == []
    ada.mesh_grant(mesh, share=["LEARNING"], read=[], backfill=True)
    assert [c for _, _, c in _shared(memory, "bob", "Northwind equity proposal")] == [old]
    bob.mesh_leave(mesh)
    assert _shared(memory, "bob", "Northwind equity proposal") == []  # revoked from the next recall


@pytest.mark.parametrize(
    ("who", "kind", "check"),
    [
        ("dee", "join", "mesh.not_invited"),
        ("dee", "grant", "mesh.not_member"),
        ("bob", "invite", "mesh.policy"),
        ("bob", "create-other", "mesh.policy"),
        ("ada", "create-again", "mesh.exists"),
        ("ada", "leave", "mesh.policy"),
    ],
)
def test_the_log_enforces_the_mesh_policy_with_typed_refusals(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf, who: str, kind: str, check: str
) -> None:
    mesh, mems = _swarm(make_agent, memory_of)
    m = mems[who]
    size = ledger.size()
    attempt: dict[str, Callable[[], object]] = {
        "join": lambda: m.mesh_join(mesh),
        "grant": lambda: m.mesh_grant(mesh, share=["LEARNING"], read=["LEARNING"]),
        "invite": lambda: m.mesh_invite(mesh, "dee"),
        "create-other": lambda: m.agent.append("mesh.created", {"mesh": "ada/other"}),
        "create-again": lambda: m.mesh_create("advisors"),
        "leave": lambda: m.mesh_leave(mesh),
    }
    with pytest.raises(RejectedEventError) as e:
        attempt[kind]()
    assert e.value.check == check
    assert ledger.size() == size  # nothing written


def test_the_mesh_folds_from_the_log_as_anyone_reads_it(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    mesh, mems = _swarm(make_agent, memory_of)
    mems["ada"].mesh_remove(mesh, "cy")
    folded = MeshReader(ledger.store).mesh(mesh, ledger.size())
    assert folded is not None
    shown = folded.to_json()
    assert [(m["agent"], m["left_index"] is None) for m in shown["members"]] == [
        ("ada", True),
        ("bob", True),
        ("cy", False),
    ]
    assert shown["members"][1]["grant"]["read"] == ["LEARNING", "PREFERENCE"]
    mems["ada"].mesh_dissolve(mesh)
    assert MeshReader(ledger.store).meshes_of("bob", ledger.size()) == []


def test_over_http_a_member_recalls_the_mesh_and_reads_only_its_own_meshes(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.settings import ApiSettings
    from engram.client.http import HttpTransport

    token = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"
    memory = MemoryService(ledger, access_log="off")
    client = TestClient(create_app(ApiSettings(operator_token=token), ledger=ledger, memory_service=memory))
    http = HttpTransport("http://testserver", operator_token=token, http=client)
    mems = {}
    for name in ("ada", "bob", "dee"):
        agent = make_agent(name)
        agent.transport = http
        mems[name] = AgentMemory(agent)
    ada, bob, dee = mems["ada"], mems["bob"], mems["dee"]
    mesh = ada.mesh_create("ops")
    ada.mesh_invite(mesh, "bob")
    bob.mesh_join(mesh)
    ada.mesh_grant(mesh, share=["LEARNING"], read=[])
    bob.mesh_grant(mesh, share=[], read=["LEARNING"])
    ada.write(
        category="LEARNING", content="The staging cluster needs a warm cache before load tests.", tier="WARM"
    )
    got = bob.recall("staging cluster cache")
    rows = [r for r in got.ranked if r.author == "ada"]
    assert rows and rows[0].mesh == mesh and f"by ada via mesh {mesh}" in got.context
    assert [r for r in bob.recall("staging cluster cache", meshes=[]).ranked if r.author] == []
    assert [m.mesh for m in bob.meshes()] == [mesh] and dee.meshes() == []
    with pytest.raises(RejectedEventError) as e:  # a non-member's signed event is refused
        dee.mesh_grant(mesh, share=["LEARNING"], read=["LEARNING"])
    assert e.value.check == "mesh.not_member"
    assert [r for r in dee.recall("staging cluster cache").ranked if r.author] == []
    # the reader fetches the proof over HTTP and checks it offline; a non-reader is refused
    from verifier.bundle import verify_bundle
    from verifier.note import VerifierKey

    proven = verify_bundle(bob.mesh_proof(mesh, rows[0].ref or ""), VerifierKey.parse(ledger.vkey))
    assert proven.claims[0].holds
    with pytest.raises(RejectedEventError) as e:
        dee.mesh_proof(mesh, rows[0].ref or "")
    assert e.value.check == "mesh.not_shared"


def _verify(ledger: Ledger, data: bytes) -> list[tuple[str, str]]:
    from verifier.bundle import verify_bundle
    from verifier.note import VerifierKey

    steps: list[tuple[str, str]] = []
    verify_bundle(data, VerifierKey.parse(ledger.vkey), steps=steps)
    return steps


def test_a_shared_memory_is_provable_offline_to_its_author_and_grant(
    ledger: Ledger, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    import base64
    import json

    from ledger.bundle import create_bundle, mesh_read_claim
    from verifier.errors import VerificationError
    from verifier.event import Leaf

    mesh, mems = _swarm(make_agent, memory_of)
    ada = mems["ada"]
    shared = ada.write(category="LEARNING", content=LEARNING, tier="WARM")
    assert shared.ref is not None
    steps = _verify(ledger, create_bundle(ledger, mesh_read_claim(ledger, "bob", mesh, shared.ref)))
    claim = dict(steps)["claim"]
    assert f"mesh_read of ada's memory.written {shared.ref} by bob through mesh {mesh} = true" in claim

    def fails(data: bytes) -> str:
        with pytest.raises(VerificationError) as e:
            _verify(ledger, data)
        return e.value.check

    # not shared: a CONTEXT memory, a reader outside the mesh
    other = ada.write(category="CONTEXT", content="Northwind's office moved to the harbour.", tier="WARM")
    assert other.ref is not None
    # (built as an older builder would hand them out: create_bundle refuses them, issue 40)
    assert fails(unchecked_bundle(ledger, mesh_read_claim(ledger, "bob", mesh, other.ref))) == "claim.mesh"
    assert fails(unchecked_bundle(ledger, mesh_read_claim(ledger, "dee", mesh, shared.ref))) == "claim.mesh"
    with pytest.raises(VerificationError) as refused:
        create_bundle(ledger, mesh_read_claim(ledger, "dee", mesh, shared.ref))
    assert refused.value.check == "bundle.claim.mesh"
    # withdrawn: a later grant stops it; leaving the withdrawal out of the bundle is caught
    ada.mesh_grant(mesh, share=["PREFERENCE"], read=["LEARNING"])
    honest = unchecked_bundle(ledger, mesh_read_claim(ledger, "bob", mesh, shared.ref))
    assert fails(honest) == "claim.mesh"
    doc = json.loads(honest)
    grants = [
        e
        for e in doc["entries"]
        if Leaf.from_bytes(base64.b64decode(e["leaf"])).envelope.stream == ("ada", "mesh.granted")
    ]
    doc["entries"] = [e for e in doc["entries"] if e is not grants[-1]]
    assert fails(json.dumps(doc).encode()) == "index.missing"  # the log's index lists it (issue 40)
    # a forged grant body (the withdrawal rewritten to share LEARNING) fails its commitment
    doc = json.loads(honest)
    last = next(e for e in doc["entries"] if e["index"] == grants[-1]["index"])
    forged = {"backfill": False, "mesh": mesh, "read": ["LEARNING"], "share": ["LEARNING", "PREFERENCE"]}
    last["body"] = base64.b64encode(
        json.dumps(forged, separators=(",", ":"), sort_keys=True).encode()
    ).decode()
    assert fails(json.dumps(doc).encode()) == "body.commitment"


def test_concurrent_writers_in_one_mesh_never_lose_each_others_writes(
    ledger: Ledger, make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    import threading

    _, mems = _swarm(make_agent, memory_of)  # ada and cy share LEARNING, bob reads it
    errors: list[BaseException] = []

    def write(who: str) -> None:
        try:
            for n in range(8):
                mems[who].write(
                    category="LEARNING", content=f"Northwind bond lesson {n} noted by {who}.", tier="WARM"
                )
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in ("ada", "cy")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    res = memory.recall(
        "bob", "Northwind bond lesson noted", limit=100, budget_tokens=100_000, record_access=False
    )
    got = {(r.author, r.content) for r in res.ranked if r.author}
    assert got == {(w, f"Northwind bond lesson {n} noted by {w}.") for w in ("ada", "cy") for n in range(8)}
