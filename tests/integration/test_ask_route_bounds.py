"""The query route ``POST /v1/agents/{agent}/ask`` bounds every input before reading it: a
body that is not a query object, a member of the wrong type or size, a mesh name the recall
route would refuse, JSON nested or numbered past reason, is refused with a typed problem
naming its check (never a 500), before the request's nonce is spent or anything is written.

Issue 41 (attack round on the narrow memory port).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.errors import EngramError, StorageError
from ledger.log import Ledger
from ledger.storage.schema import request_nonces

OPERATOR = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"


@pytest.fixture
def client(ledger: Ledger) -> TestClient:
    return TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))


def _connect(client: TestClient, ledger: Ledger, name: str) -> tuple[AgentMemory, HttpTransport]:
    transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    agent = Agent.generate(name, log_vkey=ledger.vkey, transport=transport)
    agent.register()
    return AgentMemory(agent, transport), transport


def _nonces(ledger: Ledger) -> int:
    with ledger.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(request_nonces)).scalar_one())


_DEEP = "[" * 5000 + "]" * 5000

BAD_BODIES: list[tuple[str, Any]] = [
    ("list", [{"ask": "items"}]),
    ("string", "items"),
    ("false", False),
    ("number", 7),
    ("unknown-query", {"ask": "everything"}),
    ("ask-not-text", {"ask": ["items"]}),
    ("unknown-member", {"ask": "items", "agent": "bob"}),
    ("too-many-members", {"ask": "items", **{f"m{i}": i for i in range(40)}}),
    ("bool-limit", {"ask": "items", "limit": True}),
    ("float-limit", {"ask": "items", "limit": 5.0}),
    ("huge-limit", {"ask": "items", "limit": 10**18}),
    ("negative-limit", {"ask": "items", "limit": -1}),
    ("tier-list", {"ask": "items", "tier": ["HOT"]}),
    ("status-object", {"ask": "items", "status": {"a": 1}}),
    ("cursor-huge", {"ask": "items", "after": "9" * 40 + ".0"}),
    ("cursor-negative", {"ask": "items", "after": "-1.0"}),
    ("ref-number", {"ask": "item", "ref": 5}),
    ("entry-negative", {"ask": "entry", "index": -1}),
    ("entry-huge", {"ask": "entry", "index": 2**64}),
    ("entry-bool", {"ask": "entry", "index": False}),
    ("entry-missing", {"ask": "entry"}),
    ("recall-text-object", {"ask": "recall", "text": {"a": 1}}),
    ("recall-text-long", {"ask": "recall", "text": "x" * 5000}),
    ("recall-flag-int", {"ask": "recall", "text": "x", "include_cold": 1}),
    ("recall-budget-bool", {"ask": "recall", "text": "x", "budget_tokens": True}),
    ("recall-scopes-text", {"ask": "recall", "text": "x", "scopes": "global"}),
    ("recall-scopes-many", {"ask": "recall", "text": "x", "scopes": ["global"] * 10_000}),
    ("recall-scopes-nested", {"ask": "recall", "text": "x", "scopes": [["global"]]}),
    ("recall-scopes-number", {"ask": "recall", "text": "x", "scopes": [5]}),
    ("recall-meshes-many", {"ask": "recall", "text": "x", "meshes": ["ada/team"] * 10_000}),
    ("recall-meshes-not-a-mesh", {"ask": "recall", "text": "x", "meshes": ["../../etc"]}),
    ("recall-meshes-object", {"ask": "recall", "text": "x", "meshes": {"ada/team": 1}}),
    ("recall-session-bad", {"ask": "recall", "text": "x", "session": "../s"}),
    ("recall-sources-list", {"ask": "recall", "text": "x", "sources": ["all"]}),
    ("hot-scopes-nested", {"ask": "hot_block", "scopes": [{"a": 1}]}),
    ("mesh-proof-bad-mesh", {"ask": "mesh_proof", "mesh": "x" * 500, "ref": "1.0"}),
    ("session-missing", {"ask": "session"}),
]


@pytest.mark.parametrize(("label", "body"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES])
def test_a_bad_query_is_a_typed_refusal_that_spends_and_writes_nothing(
    client: TestClient, ledger: Ledger, label: str, body: Any
) -> None:
    ada, http = _connect(client, ledger, "ada")
    size, before = ledger.size(), _nonces(ledger)
    with pytest.raises(EngramError) as e:
        http.signed(ada.agent.signer, "POST", "/v1/agents/ada/ask", body=body)
    assert not isinstance(e.value, StorageError), f"{label}: {e.value}"  # a 500 reads as StorageError
    assert e.value.check, label
    assert _nonces(ledger) == before and ledger.size() == size
