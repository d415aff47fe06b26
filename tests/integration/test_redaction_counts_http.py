"""The HTTP write answers say how many secrets their event's body had redacted (issue 40,
finding 6), on both backends and on both the fast write path and the framework's: the
memories and records routes (``WriteOut.redacted``), a turn's receipt, a session's opening
and closing answers and each receipt of ``POST /v1/events``; and the SDK over HTTP answers
the same as in process."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.wire import Submission
from ledger.log import Ledger

OPERATOR = "Xq3mVb8LrT2wN7cK5pZ9sD4fG6hJ1aEoU0iYtR8e"
VAULT = "hvs.CAESIiQS3YbhVtqSpUFg5KufQh5dM0DqK3uk"
PROSE = "The prod DB password is hunter2-SECRET-key."


@pytest.fixture(params=[True, False], ids=["fast-path", "framework"])
def client(request: pytest.FixtureRequest, ledger: Ledger) -> TestClient:
    app = create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger)
    app.state.fast_writes = request.param
    return TestClient(app)


@pytest.fixture
def connect(client: TestClient, ledger: Ledger) -> Callable[[str], AgentMemory]:
    def make(name: str) -> AgentMemory:
        transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
        agent = Agent.generate(name, log_vkey=ledger.vkey, transport=transport)
        agent.register()
        return AgentMemory(agent, transport)

    return make


def _wire(sub: Submission) -> dict[str, str]:
    return {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}


def _sign(mem: AgentMemory, kind: str, body: dict[str, Any]) -> dict[str, str]:
    head = mem.agent._next(kind, refresh=True)  # the stream's head, as the SDK would sign it
    return _wire(
        mem.agent.signer.event(kind, body, version=head[0], prev=head[1], client_time_us=mem.agent.clock())
    )


def test_the_http_write_answers_say_how_many_secrets_were_redacted(
    connect: Callable[[str], AgentMemory], client: TestClient
) -> None:
    mem = connect("ada")
    base = f"/v1/agents/{mem.agent_id}"
    opened = client.post(
        f"{base}/sessions", json=_sign(mem, "session.opened", {"session": "s-1", "title": VAULT})
    )
    assert opened.status_code == 201 and opened.json()["redacted"] == 1
    body = {"session": "s-1", "turn": 0, "role": "user", "content": f"{PROSE} and {VAULT}"}
    turn = client.post(f"{base}/sessions/s-1/turns", json=_sign(mem, "session.turn", body))
    assert turn.status_code == 201 and turn.json()["redacted"] == 2
    memory = {
        "category": "CONTEXT",
        "content": PROSE,
        "tags": [],
        "confidence": 70,
        "provenance": [],
        "tier": "WARM",
    }
    written = client.post(f"{base}/memories", json=_sign(mem, "memory.written", memory))
    assert written.status_code == 201 and written.json()["redacted"] == 1
    plain = {**memory, "content": "Staging restarts nightly"}
    assert client.post(f"{base}/memories", json=_sign(mem, "memory.written", plain)).json()["redacted"] == 0
    record = {"pact": "p-1", "result": "fulfilled", "quality": 90, "evidence": PROSE}
    rec = client.post(f"{base}/records", json=_sign(mem, "pact.outcome", record))
    assert rec.status_code == 201 and rec.json()["redacted"] == 1
    batch = client.post(
        "/v1/events", json={"events": [_sign(mem, "memory.written", {**memory, "content": VAULT})]}
    )
    assert batch.status_code == 201 and [r["redacted"] for r in batch.json()["receipts"]] == [1]
    close = client.post(
        f"{base}/sessions/s-1/close", json=_sign(mem, "session.closed", {"session": "s-1", "summary": PROSE})
    )
    assert close.status_code == 201 and close.json()["redacted"] == 1


def test_the_sdk_over_http_answers_the_counts_it_answers_in_process(
    connect: Callable[[str], AgentMemory],
) -> None:
    mem = connect("ada")
    sid = mem.open_session()
    assert mem.turn(sid, "user", f"{PROSE} {VAULT}").redacted == 2
    assert mem.write(category="LEARNING", content=f"vault login {VAULT}").redacted == 1
    assert mem.close_session(sid, summary=PROSE).redacted == 1
