"""POST /v1/proofs/inclusion/batch (issue 14, Deliver 5): many inclusion proofs in one request,
each the same as the single proof and valid against the checkpoint; bad requests are
problems. On both backends."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.sdk import Agent
from ledger.log import Ledger
from verifier.merkle import verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint

OPERATOR = "2KszfFVxSihaUFeuDLDTyjZFHFyM2i4VjKml0tK_"


@pytest.fixture
def client(ledger: Ledger, make_agent: Callable[..., Agent]) -> TestClient:
    alice = make_agent("alice")
    for i in range(40):
        alice.append("commitment", {"promise": f"p{i}"})
    return TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))


def test_a_batch_of_proofs_equals_the_single_proofs(client: TestClient, ledger: Ledger) -> None:
    size = ledger.size()
    indices = [0, 7, size - 1, 13, 31]
    r = client.post("/v1/proofs/inclusion/batch", json={"indices": indices})
    assert r.status_code == 200, r.text
    proofs = r.json()["proofs"]
    assert [p["index"] for p in proofs] == indices
    cp = verify_checkpoint(proofs[0]["checkpoint"].encode(), VerifierKey.parse(ledger.vkey))
    for p in proofs:
        assert p == client.get("/v1/proofs/inclusion", params={"index": p["index"]}).json()
        verify_inclusion(
            leaf_hash=bytes.fromhex(p["leaf_hash"]),
            index=p["index"],
            size=cp.size,
            proof=[base64.b64decode(h) for h in p["proof"]],
            root=cp.root,
        )
    older = client.post("/v1/proofs/inclusion/batch", json={"indices": [0, 1], "size": 10}).json()["proofs"]
    assert [p["size"] for p in older] == [10, 10]


@pytest.mark.parametrize(
    ("body", "status", "check"),
    [
        ({"indices": [1, 1]}, 400, "request.indices"),
        ({"indices": list(range(257))}, 400, None),
        ({"indices": []}, 400, None),
        ({"indices": [10_000]}, 400, "proof.index"),
        ({"indices": [0], "size": 10_000}, 400, "proof.size"),
        ({"indices": [0], "extra": 1}, 400, None),
    ],
    ids=["duplicate", "too-many", "empty", "beyond-size", "size-beyond-log", "unknown-member"],
)
def test_bad_batches_are_problems(client: TestClient, body: dict, status: int, check: str | None) -> None:
    r = client.post("/v1/proofs/inclusion/batch", json=body)
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"] == "application/problem+json"
    if check is not None:
        assert r.json()["check"] == check
