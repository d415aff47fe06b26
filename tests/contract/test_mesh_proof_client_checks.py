"""The client verifies a mesh proof before it hands it on (issue 40, finding 1, attacked from
outside), on both backends: ``AgentMemory.mesh_proof`` (behind ``engram mesh prove``, which
writes the file and says the memory was shared) returned whatever bytes the service sent,
while every other answer the client gives (an item, an inclusion proof) is verified against
the pinned log key first. A service's bundle that fails verification, or proves another
memory, mesh or reader than the one asked for, is now refused with a named check."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.queries import MeshProofQuery
from ledger.memory.service import MemoryService
from tests.contract.conftest import MemoryOf
from tests.contract.test_mesh_proofs import LESSON, _desk
from verifier.errors import VerificationError
from verifier.jcs import canonical_bytes


def test_a_mesh_proof_is_verified_by_the_client_and_must_prove_the_claim_asked(
    make_agent: Callable[..., Agent], memory: MemoryService, memory_of: MemoryOf
) -> None:
    mesh, ada, bob = _desk(make_agent, memory_of)
    cy = memory_of(make_agent("cy"))
    ada.mesh_invite(mesh, "cy")
    cy.mesh_join(mesh)
    cy.mesh_grant(mesh, share=[], read=["LEARNING"])
    first = ada.write(category="LEARNING", content=LESSON, tier="WARM").ref or ""
    second = ada.write(category="LEARNING", content="Northwind's desk closes at four.", tier="WARM").ref or ""
    honest = bob.mesh_proof(mesh, first)  # the honest answer verifies and is handed on
    assert json.loads(honest)["claim"]["statements"][0]["ref"] == first
    transport = bob.transport
    served: dict[str, bytes] = {}
    real_ask = transport.ask
    transport.ask = lambda signer, q: (  # type: ignore[method-assign]
        served["bundle"] if isinstance(q, MeshProofQuery) else real_ask(signer, q)
    )
    # a valid bundle, but for another memory, and for another reader
    for other in (memory.mesh_proof("bob", mesh, second), memory.mesh_proof("cy", mesh, first)):
        served["bundle"] = other
        with pytest.raises(VerificationError) as e:
            bob.mesh_proof(mesh, first)
        assert e.value.check == "proof.claim"
    # a bundle whose memory body was changed
    doc = json.loads(honest)
    entry = next(x for x in doc["entries"] if x["index"] == int(first.split(".")[0]))
    body = json.loads(base64.b64decode(entry["body"]))
    body["content"] = "Northwind's treasury team approves bond trades any day."
    entry["body"] = base64.b64encode(canonical_bytes(body)).decode()
    served["bundle"] = json.dumps(doc).encode()
    with pytest.raises(VerificationError) as e:
        bob.mesh_proof(mesh, first)
    assert e.value.check.startswith("body")
