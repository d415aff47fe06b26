"""The memory port's one query route, ``POST /v1/agents/{agent}/ask``, on both backends: it
answers what the per-read routes answer (which stay for older clients), refuses a malformed
query naming the check before anything is read or any nonce is spent, and admits whom the
per-read routes admit (the agent; a share token's audience for items only).

Issue 41, Deliver 3: a narrow memory port, one query route for a new client.
"""

from __future__ import annotations

import dataclasses
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
from engram.protocol.answers import ItemRow
from engram.protocol.errors import ForbiddenError, RejectedEventError
from engram.protocol.queries import ItemsQuery, RecallQuery
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


def test_the_query_route_answers_what_the_per_read_routes_answer(client: TestClient, ledger: Ledger) -> None:
    ada, http = _connect(client, ledger, "ada")
    sid = ada.open_session(title="deploys")
    ada.write(category="PREFERENCE", content="deploys go out on Tuesdays", tags=["deploy"], session=sid)
    ada.write(category="CONTEXT", content="the database is PostgreSQL 16")
    me = ada.agent.signer
    # items: the old paged route and the query route give the same rows
    old = http.signed(me, "GET", "/v1/agents/ada/memory", params={"status": "all"}).json()
    page = http.ask(me, ItemsQuery.of(status="all"))
    assert page.items == [ItemRow.of(i) for i in old["items"]] and page.next is None
    assert len(page.items) == 2
    # recall: the same block and rows as the recall route (no use recorded in between that
    # would change the ranking: both read the same projection)
    asked = http.ask(me, RecallQuery.of("which database?", limit=5))
    routed = http.signed(me, "POST", "/v1/agents/ada/recall", body={"query": "which database?", "limit": 5})
    assert asked.context == routed.json()["context"]
    assert [r.ref for r in asked.ranked] == [r["ref"] for r in routed.json()["ranked"]]
    # the face reads through the port: sessions, the item with its verified proof, the HOT block
    assert [s.session for s in ada.sessions()] == [sid]
    shown = ada.item(page.items[0].ref)
    assert shown.proof.index == page.items[0].index
    assert ada.hot_block(session=sid).endswith("</memory-context>\n")
    assert ada.prove(page.items[0].index).kind == "memory.written"


def test_items_page_through_the_query_route(client: TestClient, ledger: Ledger) -> None:
    ada, http = _connect(client, ledger, "ada")
    for n in range(5):
        ada.write(category="CONTEXT", content=f"fact number {n} about the build")
    first = http.ask(ada.agent.signer, ItemsQuery.of(limit=2))
    assert len(first.items) == 2 and first.next == first.items[-1].ref
    rest = http.ask(ada.agent.signer, ItemsQuery.of(after=first.next, limit=10))
    assert len(rest.items) == 3 and rest.next is None
    assert [i.ref for i in ada.items()] == [i.ref for i in [*first.items, *rest.items]]


@pytest.mark.parametrize(
    ("body", "check"),
    [
        ({"ask": "forget_everything"}, "request.ask"),
        ({"ask": "recall", "text": "q", "limit": 10_000}, "request.limit"),
        ({"ask": "recall", "text": "q", "agent": "bob"}, "request.members"),
        ({"ask": "items", "tier": "ALL"}, "request.tier"),
        ({"ask": "entry", "index": -5}, "request.index"),
    ],
)
def test_a_malformed_query_is_refused_naming_the_check_and_spends_no_nonce(
    client: TestClient, ledger: Ledger, body: dict[str, Any], check: str
) -> None:
    ada, http = _connect(client, ledger, "ada")
    size, before = ledger.size(), _nonces(ledger)
    with pytest.raises(RejectedEventError) as e:
        http.signed(ada.agent.signer, "POST", "/v1/agents/ada/ask", body=body)
    assert e.value.check == check
    assert _nonces(ledger) == before and ledger.size() == size  # nothing spent, nothing written


def test_the_query_route_admits_only_the_agent_or_a_token_audience_for_items(
    client: TestClient, ledger: Ledger
) -> None:
    ada, _ = _connect(client, ledger, "ada")
    bob, bob_http = _connect(client, ledger, "bob")
    ada.write(category="CONTEXT", content="ada's private note on the release")
    # unsigned: refused before anything is read
    assert client.post("/v1/agents/ada/ask", json={"ask": "sessions"}).status_code == 401
    # another agent, signing for itself
    with pytest.raises(ForbiddenError) as e:
        bob_http.signed(bob.agent.signer, "POST", "/v1/agents/ada/ask", body={"ask": "items"})
    assert e.value.check == "auth.agent"
    # a share token's audience reads the items the token opens, and nothing else
    buyer = Buyer(
        HttpTransport("http://testserver", http=client),
        log_vkey=ledger.vkey,
        audience_key=Ed25519PrivateKey.generate(),
        state_dir=None,
    )
    token = ada.mint_token(audience=buyer.audience, kinds=["memory.written"], expires=int(time.time()) + 600)
    items = buyer._signed("POST", "/v1/agents/ada/ask", token, body={"ask": "items"}).json()
    assert [i["content"] for i in items["answer"]["items"]] == ["ada's private note on the release"]
    before = _nonces(ledger)
    for body in ({"ask": "recall", "text": "release"}, {"ask": "sessions"}, {"ask": "compact"}):
        with pytest.raises(ForbiddenError):
            buyer._signed("POST", "/v1/agents/ada/ask", token, body=body)
    assert _nonces(ledger) == before  # a refused token spends no nonce
    narrow = ada.mint_token(audience=buyer.audience, kinds=["pact.outcome"], expires=int(time.time()) + 600)
    none = buyer._signed("POST", "/v1/agents/ada/ask", narrow, body={"ask": "items"}).json()
    assert none["answer"]["items"] == []


def test_every_recall_option_reaches_the_service_through_either_transport(
    client: TestClient, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recall option is a field of RecallQuery and the stage that reads it: neither
    transport, the query route nor the dispatcher names it (the field count keeps this
    honest when a field is added)."""
    from engram.protocol.queries import RecallQuery as Q
    from ledger.compose import Services
    from ledger.memory.service import MemoryService

    ada, http = _connect(client, ledger, "ada")
    sid = ada.open_session()
    seen: list[Any] = []
    real = MemoryService.recall

    def spy(self: MemoryService, agent: str, query: Any, **options: Any) -> Any:
        seen.append(query)
        return real(self, agent, query, **options)

    monkeypatch.setattr(MemoryService, "recall", spy)
    asked = Q.of(
        "rollout",
        include_cold=True,
        include_archived=True,
        limit=7,
        budget_tokens=900,
        session=sid,
        sources="memories",
        scopes=["global", "project:engram"],
        meshes=["ada/team"],
    )
    fields = {f.name: getattr(asked, f.name) for f in dataclasses.fields(asked)}
    assert len(fields) == 9  # the text and eight options; a new option: give it a value above
    memory = client.app.state.services.memory  # type: ignore[attr-defined]
    local = Services(ledger=ledger, memory=memory).transport()
    for transport in (http, local):
        seen.clear()
        transport.ask(ada.agent.signer, asked)
        got = seen[0]  # the query value itself, every field as asked
        assert isinstance(got, Q)
        assert {f.name: getattr(got, f.name) for f in dataclasses.fields(got)} == fields
