"""Abuse of the application on a live ``engram serve --workers 2`` (issue 15, Deliver 6), both
backends: replayed requests and events, requests outside the time window, another agent's
signature, rotated and revoked keys, cross-agent reads, token escalation, oversize and deeply
nested payloads, malformed Unicode. Each is answered with its status and problem type,
nothing is written (the log's size is unchanged after every refusal), and an honest client
is served after each one. (The connection-level cases are in test_connection_abuse.py.)"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.client import AgentMemory
from engram.client.http import Buyer, HttpTransport
from engram.client.sdk import Agent
from engram.protocol.httpsign import sign_request
from tests.e2e.processes import ENGRAM, free_port, listening

TOKEN = "live-abuse-" + secrets.token_hex(16)
PROBLEMS = "https://engram.dev/problems/"


def _size(url: str) -> int:
    return int(httpx.get(url + "/checkpoint", timeout=10).text.splitlines()[1])


def _wire(sub: Any) -> dict[str, str]:
    return {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}


def test_abuse_is_refused_with_its_problem_and_writes_nothing(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    env = {**os.environ, "ENGRAM_HOME": str(tmp_path / "home"), "ENGRAM_OPERATOR_TOKEN": TOKEN}
    for name in [
        n for n in env if n.startswith("ENGRAM_") and n not in {"ENGRAM_HOME", "ENGRAM_OPERATOR_TOKEN"}
    ]:
        del env[name]
    env["ENGRAM_MAX_REQUEST_BYTES"] = "65536"
    if backend == "postgres":
        env["ENGRAM_DATABASE_URL"] = request.getfixturevalue("pg_server").new_database()
    subprocess.run(
        [ENGRAM, "init", "--origin", "abuse.example/log"], env=env, check=True, capture_output=True
    )
    vkey = subprocess.run(
        [ENGRAM, "log", "key"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    origin = vkey.split("+")[0]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with listening([ENGRAM, "serve", "--port", str(port), "--workers", "2"], env, port, what="engram serve"):
        _run_cases(url, vkey, origin)


def _run_cases(url: str, vkey: str, origin: str) -> None:
    def connect(name: str) -> AgentMemory:
        t = HttpTransport(url, operator_token=TOKEN)
        agent = Agent.generate(name, log_vkey=vkey, transport=t, state_dir=None)
        agent.register()
        return AgentMemory(agent, t)

    ada, bob, honest = connect("ada"), connect("bob"), connect("carol")
    ada.write(category="LEARNING", content="Ada's private note about the vault.", tags=["vault"])
    ada.record("pact.outcome", {"pact": "p1", "result": "fulfilled", "quality": 93, "evidence": "ci green"})
    ada_key = ada.agent.signer.private_key
    http = httpx.Client(base_url=url, timeout=30)

    def signed(
        method: str, target: str, key: Ed25519PrivateKey, signer: str = "agent:ada", **kw: Any
    ) -> dict[str, str]:
        return sign_request(key, origin=origin, method=method, target=target, signer=signer, **kw)

    memory = "/v1/agents/ada/memory"
    good = signed("GET", memory, ada_key)
    assert http.get(memory, headers=good).status_code == 200
    event = ada.agent.signer.event(
        "commitment", {"promise": "ship it"}, version=0, prev=None, client_time_us=int(time.time() * 1e6)
    )
    first = http.post("/v1/agents/ada/records", json=_wire(event))
    assert first.status_code == 201, first.text
    leaf_hash = first.json()["receipt"]["leaf_hash"]
    head = leaf_hash if len(leaf_hash) == 64 else base64.b64decode(leaf_hash).hex()
    buyer_key = Ed25519PrivateKey.generate()
    buyer = Buyer(HttpTransport(url), log_vkey=vkey, audience_key=buyer_key)
    token = ada.mint_token(audience=buyer.audience, kinds=["pact.outcome"], expires=int(time.time()) + 600)
    bundle_target = "/v1/bundles?agent=ada&kind=pact.outcome"
    assert buyer.bundle(token, agent="ada", kinds=["pact.outcome"])  # the token works as granted

    def bundle(target: str, tok: str, key: Ed25519PrivateKey = buyer_key) -> httpx.Response:
        headers = signed("GET", target, key, signer=buyer.audience) | {"engram-share-token": tok}
        return http.get(target, headers=headers)

    ada_public = ada.agent.signer.public_key
    widened = _widen(token, ada_public)
    nested = b'{"query": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    recall = "/v1/agents/ada/recall"
    cases: list[tuple[str, Callable[[], httpx.Response], int, str, str | None]] = [
        ("replayed signed request", lambda: http.get(memory, headers=good), 401, "replayed-request", None),
        (
            "replayed event",
            lambda: http.post("/v1/agents/ada/records", json=_wire(event)),
            409,
            "stream-conflict",
            None,
        ),
        (
            "request from before the time window",
            lambda: http.get(memory, headers=signed("GET", memory, ada_key, now_s=int(time.time()) - 3600)),
            401,
            "unauthenticated",
            "auth.time",
        ),
        (
            "request from after the time window",
            lambda: http.get(memory, headers=signed("GET", memory, ada_key, now_s=int(time.time()) + 3600)),
            401,
            "unauthenticated",
            "auth.time",
        ),
        (
            "another agent's signature claiming ada",
            lambda: http.get(memory, headers=signed("GET", memory, bob.agent.signer.private_key)),
            401,
            "unauthenticated",
            "auth.signature",
        ),
        (
            "a signature for another target",
            lambda: http.get(memory, headers=signed("GET", memory + "?tier=HOT", ada_key)),
            401,
            "unauthenticated",
            "auth.signature",
        ),
        (
            "bob reading ada's memory with his own signature",
            lambda: http.get(
                memory, headers=signed("GET", memory, bob.agent.signer.private_key, "agent:bob")
            ),
            403,
            "forbidden",
            None,
        ),
        (
            "bob recalling ada's memory",
            lambda: http.post(
                recall,
                content=b'{"query": "vault"}',
                headers=signed(
                    "POST", recall, bob.agent.signer.private_key, "agent:bob", body=b'{"query": "vault"}'
                )
                | {"content-type": "application/json"},
            ),
            403,
            "forbidden",
            None,
        ),
        (
            "bob writing into ada's streams",
            lambda: http.post("/v1/agents/ada/memories", json=_wire(_bob_event(bob))),
            403,
            "forbidden",
            None,
        ),
        (
            "a token used for a kind it does not grant",
            lambda: bundle("/v1/bundles?agent=ada&kind=memory.written", token),
            403,
            "token-refused",
            None,
        ),
        (
            "a token widened by an appended block",
            lambda: bundle("/v1/bundles?agent=ada&kind=memory.written", widened),
            403,
            "token-refused",
            None,
        ),
        (
            "a token with a byte changed",
            lambda: bundle(bundle_target, _flip(token)),
            403,
            "token-refused",
            None,
        ),
        (
            "a token presented by another audience key",
            lambda: bundle(bundle_target, token, Ed25519PrivateKey.generate()),
            401,
            "unauthenticated",
            None,
        ),
        (
            "an oversize body",
            lambda: http.post(
                "/v1/events",
                content=b"{" + b" " * 70_000 + b"}",
                headers={"content-type": "application/json"},
            ),
            413,
            "too-large",
            None,
        ),
        (
            "a deeply nested body",
            lambda: http.post(
                recall,
                content=nested,
                headers=signed("POST", recall, ada_key, body=nested) | {"content-type": "application/json"},
            ),
            400,
            "malformed",
            None,
        ),
        (
            "bytes that are not UTF-8",
            lambda: http.post(
                "/v1/events",
                content=b'{"events": ["\xff\xfe"]}',
                headers={"content-type": "application/json"},
            ),
            400,
            "malformed",
            None,
        ),
        (
            "a lone surrogate in a string",
            lambda: http.post(
                "/v1/oracle/claims",
                content=b'{"agent": "ada\\ud800", "predicate": "count"}',
                headers={"content-type": "application/json"},
            ),
            400,
            "malformed",
            None,
        ),
    ]
    for name, send, status, slug, check in cases:
        before = _size(url)
        r = send()
        assert r.status_code == status, (name, r.status_code, r.text[:300])
        assert r.headers["content-type"] == "application/problem+json", name
        doc = r.json()
        assert doc["type"] == PROBLEMS + slug, (name, doc)
        if check is not None:
            assert doc.get("check") == check, (name, doc)
        assert _size(url) == before, f"{name}: something was written"
        assert honest.items() is not None  # another client is still served
    # keys: after a rotation the old key signs nothing; after a revocation no key does
    old = ada_key
    ada.agent.rotate()
    r = http.get(memory, headers=signed("GET", memory, old))
    assert r.status_code == 401 and r.json()["check"] == "auth.signature", r.text
    assert http.get(memory, headers=signed("GET", memory, ada.agent.signer.private_key)).status_code == 200
    stale = ada.agent.signer.private_key
    ada.agent.revoke("key lost")
    size = _size(url)
    r = http.get(memory, headers=signed("GET", memory, stale))
    assert r.status_code == 401 and r.json()["type"] == PROBLEMS + "unauthenticated", r.text
    late = ada.agent.signer.event(
        "commitment",
        {"promise": "after revocation"},
        version=1,
        prev=head,
        client_time_us=int(time.time() * 1e6),
    )
    r = http.post("/v1/agents/ada/records", json=_wire(late))  # signed by the revoked key
    assert r.status_code == 422 and r.json()["type"] == PROBLEMS + "verification-failed", r.text
    assert _size(url) == size
    assert honest.items() is not None


def _bob_event(bob: AgentMemory) -> Any:
    from engram.protocol.bodies import written_body

    body = written_body(bob.gate, category="LEARNING", content="Bob writes into Ada's memory.")
    return bob.agent.signer.event("memory.written", body, version=0, prev=None, client_time_us=1)


def _widen(token: str, agent_key: bytes) -> str:
    """The token with a block appended that grants another kind (validly chained: anyone
    holding a token can append a block, so only the authorizer's rules stop this)."""
    import biscuit_auth as b

    parsed = b.Biscuit.from_base64(token, b.PublicKey.from_bytes(agent_key, b.Algorithm.Ed25519))
    out: str = parsed.append(b.BlockBuilder('right("memory.written");')).to_base64()
    return out


def _flip(token: str) -> str:
    mid = len(token) // 2
    return token[:mid] + ("A" if token[mid] != "A" else "B") + token[mid + 1 :]
