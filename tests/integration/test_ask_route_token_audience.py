"""A share token's audience reads, through ``POST /v1/agents/{agent}/ask``, the items of the
kinds the token opens and nothing else: no other query, no item of another kind, no other
agent's memory with the token, and a refusal spends no nonce. The query route is no weaker
than the per-read routes it stands beside.

Issue 41 (attack round on the narrow memory port).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import Buyer, HttpTransport
from engram.client.sdk import Agent
from engram.protocol.errors import EngramError, StorageError
from ledger.log import Ledger
from ledger.storage.schema import request_nonces

OPERATOR = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"


@pytest.fixture
def client(ledger: Ledger) -> TestClient:
    return TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))


def _connect(client: TestClient, ledger: Ledger, name: str) -> AgentMemory:
    transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    agent = Agent.generate(name, log_vkey=ledger.vkey, transport=transport)
    agent.register()
    return AgentMemory(agent, transport)


def _nonces(ledger: Ledger) -> int:
    with ledger.store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(request_nonces)).scalar_one())


def _buyer(client: TestClient, ledger: Ledger) -> Buyer:
    return Buyer(
        HttpTransport("http://testserver", http=client),
        log_vkey=ledger.vkey,
        audience_key=Ed25519PrivateKey.generate(),
        state_dir=None,
    )


def _ask(buyer: Buyer, agent: str, token: str, body: dict[str, Any]) -> Any:
    return buyer._signed("POST", f"/v1/agents/{agent}/ask", token, body=body).json()


AGENT_ONLY = [
    {"ask": "recall", "text": "release"},
    {"ask": "hot_block"},
    {"ask": "sessions"},
    {"ask": "session", "session": "s1"},
    {"ask": "meshes"},
    {"ask": "mesh_proof", "mesh": "ada/team", "ref": "1.0"},
    {"ask": "compact"},
    {"ask": "checkpoint"},
    {"ask": "entry", "index": 0},
]


def test_a_token_audience_asks_only_for_items_of_its_kinds(client: TestClient, ledger: Ledger) -> None:
    ada = _connect(client, ledger, "ada")
    _connect(client, ledger, "bob")
    sid = ada.open_session(title="private title")
    ada.write(category="CONTEXT", content="ada's note, shared", session=sid)
    buyer = _buyer(client, ledger)
    token = ada.mint_token(audience=buyer.audience, kinds=["pact.outcome"], expires=int(time.time()) + 600)
    # items of other kinds are not listed, on any tier or status, nor shown one by one
    for tier in (None, "HOT", "WARM", "COLD", "RECORD"):
        body: dict[str, Any] = {"ask": "items", "status": "all"}
        if tier is not None:
            body["tier"] = tier
        assert _ask(buyer, "ada", token, body)["answer"]["items"] == [], tier
    own = ada.agent.transport.signed(
        ada.agent.signer, "GET", "/v1/agents/ada/memory", params={"status": "all"}
    )
    refs = [i["ref"] for i in own.json()["items"]]
    assert refs
    before = _nonces(ledger)
    for ref in refs:
        with pytest.raises(EngramError) as e:
            _ask(buyer, "ada", token, {"ask": "item", "ref": ref})
        assert not isinstance(e.value, StorageError) and e.value.check
    size = ledger.size()
    spent = _nonces(ledger) - before
    # every query but items and item is the agent's own, refused before a nonce is spent
    for body in AGENT_ONLY:
        with pytest.raises(EngramError) as e:
            _ask(buyer, "ada", token, body)
        assert e.value.check == "auth.agent", (body, e.value)
    assert _nonces(ledger) - before == spent and ledger.size() == size
    # the token is ada's: at bob's door it opens nothing, and spends nothing
    before = _nonces(ledger)
    with pytest.raises(EngramError) as e:
        _ask(buyer, "bob", token, {"ask": "items"})
    assert e.value.check == "token.signature", e.value
    assert _nonces(ledger) == before


def test_an_agent_cannot_ask_of_another_agents_memory(client: TestClient, ledger: Ledger) -> None:
    ada = _connect(client, ledger, "ada")
    bob = _connect(client, ledger, "bob")
    ada.write(category="CONTEXT", content="ada's private note")
    before, size = _nonces(ledger), ledger.size()
    for body in [{"ask": "items"}, {"ask": "item", "ref": "1.0"}, *AGENT_ONLY]:
        with pytest.raises(EngramError) as e:
            bob.agent.transport.signed(bob.agent.signer, "POST", "/v1/agents/ada/ask", body=body)
        assert e.value.check == "auth.agent", (body, e.value)
    assert _nonces(ledger) == before and ledger.size() == size


def test_an_agent_asking_for_another_agents_item_by_ref_learns_nothing(
    client: TestClient, ledger: Ledger
) -> None:
    """The ref names a log entry, not an owner: ada asking her own door for bob's item ref,
    or for a mesh proof of it outside any mesh, is refused typed, without bob's content."""
    ada = _connect(client, ledger, "ada")
    bob = _connect(client, ledger, "bob")
    bob.write(category="CONTEXT", content="bob's secret plan")
    mine = bob.agent.transport.signed(bob.agent.signer, "GET", "/v1/agents/bob/memory").json()
    ref = mine["items"][0]["ref"]
    http = ada.agent.transport
    for body in ({"ask": "item", "ref": ref}, {"ask": "mesh_proof", "mesh": "bob/team", "ref": ref}):
        with pytest.raises(EngramError) as e:
            http.signed(ada.agent.signer, "POST", "/v1/agents/ada/ask", body=body)
        assert not isinstance(e.value, StorageError) and e.value.check, (body, e.value)
        assert "secret plan" not in str(e.value)
    page = http.signed(ada.agent.signer, "POST", "/v1/agents/ada/ask", body={"ask": "items", "status": "all"})
    assert "secret plan" not in page.text
