"""The HTTP service's first slice, driven through real HTTP semantics (TestClient) on both
backends: transparency endpoints, proofs, the auditor's export, event submission."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.sdk import Agent
from engram.protocol.errors import ConfigError
from engram.protocol.signer import AgentSigner
from ledger.log import Ledger
from ledger.tiles import export_tiles
from verifier.merkle import leaf_hash, verify_consistency, verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint

OPERATOR = "2KszfFVxSihaUFeuDLDTyjZFHFyM2i4VjKml0tK_"


@pytest.fixture
def client(ledger: Ledger) -> TestClient:
    settings = ApiSettings(operator_token=OPERATOR, max_request_bytes=200_000)
    return TestClient(create_app(settings, ledger=ledger))


def _wire(sub) -> dict:
    return {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}


def test_settings_refuse_default_secrets() -> None:
    # a repeated character or piece is no secret, however long (issue 13: "aaaa..." passed)
    for token in ("", "changeme", "short", "a" * 40, "op-" + "e2e" * 10, "abcdefghijklmnop" * 3):
        with pytest.raises(ConfigError, match="OPERATOR_TOKEN"):
            ApiSettings(operator_token=token)
    assert ApiSettings(operator_token="", dev_mode=True).dev_mode


def test_events_registration_and_receipts(client: TestClient, ledger: Ledger) -> None:
    signer = AgentSigner("web-agent", Ed25519PrivateKey.generate(), origin=ledger.origin)
    reg = {"events": [_wire(signer.registration(client_time_us=1))]}
    refused = client.post("/v1/events", json=reg)
    assert refused.status_code == 422 and refused.json()["check"] == "ledger.registration"
    assert refused.headers["content-type"] == "application/problem+json"
    ok = client.post("/v1/events", json=reg, headers={"Authorization": f"Bearer {OPERATOR}"})
    assert ok.status_code == 201, ok.text
    r = ok.json()["receipts"][0]
    cp = verify_checkpoint(r["checkpoint"].encode(), VerifierKey.parse(ledger.vkey))
    verify_inclusion(
        leaf_hash=bytes.fromhex(r["leaf_hash"]),
        index=r["index"],
        size=cp.size,
        proof=[base64.b64decode(h) for h in r["proof"]],
        root=cp.root,
    )
    first = signer.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1)
    assert client.post("/v1/events", json={"events": [_wire(first)]}).status_code == 201
    stale = signer.event("commitment", {"promise": "q"}, version=0, prev=None, client_time_us=1)
    conflict = client.post("/v1/events", json={"events": [_wire(stale)]})
    assert conflict.status_code == 409 and conflict.json()["next_version"] == 1
    forged = {**_wire(stale), "signature": base64.b64encode(bytes(64)).decode()}
    assert client.post("/v1/events", json={"events": [forged]}).status_code == 422


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"events": []}, 400),
        ({"events": [{"envelope": "!!", "signature": "", "body": "", "salt": ""}]}, 400),
        ({"nope": 1}, 400),
    ],
)
def test_malformed_requests_get_problem_details_and_write_nothing(
    client: TestClient, ledger: Ledger, payload: dict, status: int
) -> None:
    before = ledger.size()
    res = client.post("/v1/events", json=payload)
    assert res.status_code == status and res.headers["content-type"] == "application/problem+json"
    assert res.json()["type"].startswith("https://engram.dev/problems/")
    assert ledger.size() == before


def test_oversized_requests_are_refused_before_parsing(client: TestClient, ledger: Ledger) -> None:
    before = ledger.size()
    res = client.post(
        "/v1/events", content=b"{" + b" " * 300_000 + b"}", headers={"Content-Type": "application/json"}
    )
    assert res.status_code == 413 and ledger.size() == before


def test_transparency_endpoints_serve_what_the_export_writes(
    client: TestClient, ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    alice = make_agent("alice")
    for i in range(300):
        alice.append("commitment", {"promise": f"p{i}"})
    export_tiles(ledger.store, tmp_path / "t")
    cp = client.get("/checkpoint")
    assert cp.status_code == 200 and cp.content == (tmp_path / "t" / "checkpoint").read_bytes()
    size = ledger.size()
    for rel in (
        "tile/0/000",
        f"tile/0/001.p/{size - 256}",
        "tile/1/000.p/1",
        "tile/entries/000",
        f"tile/entries/001.p/{size - 256}",
    ):
        res = client.get("/" + rel)
        assert res.status_code == 200, rel
        assert res.content == (tmp_path / "t" / rel).read_bytes(), rel
        assert ("immutable" in res.headers["cache-control"]) == (".p/" not in rel)
    for bad in ("/tile/0/002", "/tile/0/001.p/255", "/tile/0/000.p/256", "/tile/0/../x", "/tile/9/000"):
        assert client.get(bad).status_code in (400, 404), bad


def test_proofs_and_the_auditor_export(
    client: TestClient, ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    for i in range(20):
        alice.append("commitment", {"promise": f"p{i}"})
    key = VerifierKey.parse(ledger.vkey)
    cp = verify_checkpoint(client.get("/checkpoint").content, key)
    lines = [json.loads(x) for x in client.get("/v1/log/entries", params={"start": 0}).text.splitlines()]
    assert [x["index"] for x in lines] == list(range(cp.size))
    leaf = base64.b64decode(lines[7]["leaf"])
    assert leaf_hash(leaf).hex() == lines[7]["leaf_hash"]
    by_hash = client.get("/v1/proofs/inclusion", params={"leaf_hash": lines[7]["leaf_hash"]}).json()
    verify_inclusion(
        leaf_hash=leaf_hash(leaf),
        index=7,
        size=cp.size,
        proof=[base64.b64decode(h) for h in by_hash["proof"]],
        root=cp.root,
    )
    cons = client.get("/v1/proofs/consistency", params={"old": 3}).json()
    old = verify_checkpoint(ledger.store.checkpoint(3).note, key)
    verify_consistency(
        old_size=3,
        new_size=cp.size,
        old_root=old.root,
        new_root=cp.root,
        proof=[base64.b64decode(h) for h in cons["proof"]],
    )
    assert client.get("/v1/proofs/inclusion", params={"index": cp.size + 5}).status_code == 400
    assert client.get("/v1/proofs/inclusion").status_code == 400


def test_tiles_are_served_only_at_ascii_addresses(client: TestClient) -> None:
    """Finding 10: Unicode digits matched the tile path."""
    assert client.get("/tile/0/000.p/1").status_code == 200
    assert client.get("/tile/0/\u0660\u0660\u0660.p/1").status_code == 400


def test_huge_tile_paths_are_refused_not_crashed(client: TestClient) -> None:
    """Second review, finding 2: int() of a 4,300+ digit tile index raised a 500."""
    r = client.get("/tile/entries/" + "x000/" * 1500 + "000")
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json"
