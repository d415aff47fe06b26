"""Regression (issue 15, found by bench.abuse): with every database connection of a worker
in use, a request waited for the pool's timeout and was answered 500 "unexpected error". It
is the service being busy, not a bug: 503 with Retry-After, nothing written. Both backends."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.storage.db import make_engine
from tests.conftest import StepClock


def test_an_exhausted_connection_pool_is_503_with_retry_after(
    db_url: str, log_key: LogKey, policy_key: Ed25519PrivateKey, tmp_path: Path
) -> None:
    engine = make_engine(db_url, pool_size=1, max_overflow=0, pool_timeout=0.2)
    try:
        ledger = create_ledger(
            engine,
            log_key,
            clock=StepClock(),
            policy_key=policy_key,
            signed_head=tmp_path / "log.key.signed-head",
        )
        client = TestClient(create_app(ApiSettings(dev_mode=True), ledger=ledger))
        assert client.get("/v1/agents/ann").status_code == 404  # a free connection: answered
        held = engine.connect()  # the pool's only connection, as if every request held one
        try:
            r = client.get("/v1/agents/ann")
        finally:
            held.close()
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1"
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["detail"] == "the database failed; nothing was written"
        assert client.get("/v1/agents/ann").status_code == 404  # and served again once free
    finally:
        engine.dispose()
