"""Issue 25, finding 10, over HTTP: every ``LogIntegrityError`` became a generic 503
"storage" without its check, so a client could not tell a permanent integrity stop from a
passing outage."""

from __future__ import annotations

import base64

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.errors import LogIntegrityError, StorageError
from ledger.log import Ledger

OPERATOR = "NWPBN-oI1vumxXvM5Ds_huXGpjGHffn7naJfO-87"


def test_integrity_stop_keeps_its_check_over_http(ledger: Ledger) -> None:
    client = TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))
    t = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    agent = Agent.generate("alice", log_vkey=ledger.vkey, transport=t)
    agent.register()
    mem = AgentMemory(agent, t)
    mem.write(category="LEARNING", content="Staging restarts nightly")
    # A role that can UPDATE the key table un-revokes nothing: the log refuses to go on.
    with ledger.store.engine.begin() as conn:
        conn.execute(text("UPDATE agent_keys SET public_key = :p"), {"p": b"\x01" * 32})
    sub = agent.signer.event(
        "commitment", {"promise": "ship it"}, version=0, prev=None, client_time_us=agent.clock()
    )
    wire = {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}
    size = ledger.size()
    r = client.post("/v1/events", json={"events": [wire]})
    assert r.status_code == 500, r.text
    p = r.json()
    assert p["type"] == "https://engram.dev/problems/log-integrity"
    assert p["check"].startswith("state.")
    assert "retry-after" not in {k.lower() for k in r.headers}
    assert ledger.size() == size
    # the client raises the typed error with the check, not a StorageError "outage"
    with pytest.raises(LogIntegrityError) as e:
        mem.write(category="LEARNING", content="Deploys happen on Tuesdays")
    assert e.value.check.startswith("state.")
    assert isinstance(e.value, StorageError)  # still a StorageError for callers that catch those
