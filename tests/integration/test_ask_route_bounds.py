"""The query route ``POST /v1/agents/{agent}/ask`` bounds every input before reading it: a
body that is not a query object, a member of the wrong type or size, a mesh name the recall
route would refuse, JSON nested or numbered past reason, is refused with a typed problem
naming its check (never a 500), before the request's nonce is spent or anything is written.

Issue 41 (attack round on the narrow memory port).
"""

from __future__ import annotations

import json
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
from engram.protocol.httpsign import sign_request
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


def _raw(client: TestClient, ada: AgentMemory, data: bytes, *, path: str = "/v1/agents/ada/ask") -> Any:
    """``data`` as sent, signed by ada over exactly those bytes (what a hostile client can do)."""
    me = ada.agent.signer
    headers = sign_request(
        me.private_key, origin=me.origin, method="POST", target=path, signer="agent:ada", body=data
    )
    return client.post(path, content=data, headers={"content-type": "application/json", **headers})


RAW_BODIES: list[tuple[str, bytes]] = [
    ("deep-json", b"[" * 50_000 + b"]" * 50_000),
    ("deep-member", b'{"ask":"recall","text":"x","scopes":' + b"[" * 50_000 + b"]" * 50_000 + b"}"),
    ("long-number", b'{"ask":"items","limit":' + b"9" * 5000 + b"}"),
    ("nan", b'{"ask":"entry","index":NaN}'),
    ("infinity", b'{"ask":"items","limit":Infinity}'),
    ("not-json", b"ask=items"),
    ("not-utf8", b'{"ask":"\xff\xfe"}'),
    ("empty", b""),
]


@pytest.mark.parametrize(("label", "data"), RAW_BODIES, ids=[b[0] for b in RAW_BODIES])
def test_unreadable_json_is_refused_typed_before_any_nonce_is_spent(
    client: TestClient, ledger: Ledger, label: str, data: bytes
) -> None:
    ada, _ = _connect(client, ledger, "ada")
    size, before = ledger.size(), _nonces(ledger)
    resp = _raw(client, ada, data)
    assert 400 <= resp.status_code < 500, (label, resp.status_code, resp.text[:200])
    assert resp.headers["content-type"].startswith("application/problem+json"), label
    assert "Traceback" not in resp.text
    assert _nonces(ledger) == before and ledger.size() == size


def test_a_signed_query_is_good_once_for_its_own_body_and_path(client: TestClient, ledger: Ledger) -> None:
    """Replayed, re-bodied or re-pathed, a signed query is refused (issue 41)."""
    ada, _ = _connect(client, ledger, "ada")
    me = ada.agent.signer
    data = b'{"ask":"sessions"}'
    headers = {
        "content-type": "application/json",
        **sign_request(
            me.private_key,
            origin=me.origin,
            method="POST",
            target="/v1/agents/ada/ask",
            signer="agent:ada",
            body=data,
        ),
    }
    assert client.post("/v1/agents/ada/ask", content=data, headers=headers).status_code == 200
    replay = client.post("/v1/agents/ada/ask", content=data, headers=headers)
    assert replay.status_code == 401 and replay.json()["check"].startswith("auth."), replay.text
    fresh = {
        "content-type": "application/json",
        **sign_request(
            me.private_key,
            origin=me.origin,
            method="POST",
            target="/v1/agents/ada/ask",
            signer="agent:ada",
            body=data,
        ),
    }
    before = _nonces(ledger)
    swapped = client.post("/v1/agents/ada/ask", content=b'{"ask":"compact"}', headers=fresh)
    assert swapped.status_code == 401 and swapped.json()["check"].startswith("auth."), swapped.text
    moved = client.post("/v1/agents/bob/ask", content=data, headers=fresh)
    assert moved.status_code == 401 and moved.json()["check"].startswith("auth."), moved.text
    assert _nonces(ledger) == before


EXTREMES: list[tuple[str, dict[str, Any], int]] = [
    ("entry-past-the-log", {"ask": "entry", "index": 2**63 - 1}, 404),
    ("item-past-the-log", {"ask": "item", "ref": "9999999999999999.99"}, 404),
    ("session-unknown", {"ask": "session", "session": "nope"}, 404),
    ("mesh-proof-unknown", {"ask": "mesh_proof", "mesh": "bob/team", "ref": "9999999999999999.0"}, 0),
]


@pytest.mark.parametrize(("label", "body", "status"), EXTREMES, ids=[e[0] for e in EXTREMES])
def test_a_well_formed_query_past_the_log_is_a_typed_answer(
    client: TestClient, ledger: Ledger, label: str, body: dict[str, Any], status: int
) -> None:
    ada, _ = _connect(client, ledger, "ada")
    size = ledger.size()
    resp = _raw(client, ada, json.dumps(body).encode())
    assert 400 <= resp.status_code < 500 and (status == 0 or resp.status_code == status), (label, resp.text)
    assert resp.json()["check"], label
    assert ledger.size() == size


def test_an_items_cursor_past_the_log_is_an_empty_page(client: TestClient, ledger: Ledger) -> None:
    ada, _ = _connect(client, ledger, "ada")
    ada.write(category="CONTEXT", content="a fact")
    resp = _raw(client, ada, b'{"ask":"items","after":"9999999999999999.99","limit":1000}')
    assert resp.status_code == 200 and resp.json()["answer"] == {"items": [], "next": None}, resp.text


def test_an_oversized_or_misdeclared_query_is_refused_typed_before_any_nonce_is_spent(
    client: TestClient, ledger: Ledger
) -> None:
    ada, _ = _connect(client, ledger, "ada")
    size, before = ledger.size(), _nonces(ledger)
    huge = _raw(client, ada, b'{"ask":"recall","text":"' + b"x" * 2_000_000 + b'"}')
    assert huge.status_code == 413 and huge.headers["content-type"].startswith("application/problem+json")
    me = ada.agent.signer
    data = b'{"ask":"sessions"}'
    signed = sign_request(
        me.private_key,
        origin=me.origin,
        method="POST",
        target="/v1/agents/ada/ask",
        signer="agent:ada",
        body=data,
    )
    plain = client.post("/v1/agents/ada/ask", content=data, headers={"content-type": "text/plain", **signed})
    assert 400 <= plain.status_code < 500 and plain.headers["content-type"].startswith(
        "application/problem+json"
    )
    got = client.get("/v1/agents/ada/ask")
    assert got.status_code == 405 and got.headers["content-type"].startswith("application/problem+json")
    assert _nonces(ledger) == before and ledger.size() == size
