"""Secrets in the forms people paste, over HTTP, on both backends (issue 40, finding 6): the
SDK over ``HttpTransport`` redacts them before signing, and the service refuses a signed
body that still carries one (``gate.secret``, 422, nothing written) on the memory routes, the
fast write path and ``POST /v1/events`` alike."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.gate import GateRejection
from engram.protocol.wire import Submission
from ledger.log import Ledger
from tests.unit.test_redaction_forms import FORMS_ONCE_SIGNED_IN_CLEAR

OPERATOR = "Xq3mVb8LrT2wN7cK5pZ9sD4fG6hJ1aEoU0iYtR8e"
ROOT = Path(__file__).resolve().parents[2]
CORPUS = {c["form"]: c for c in json.loads((ROOT / "tests/fixtures/secrets/corpus.json").read_text("utf-8"))}
FORMS = FORMS_ONCE_SIGNED_IN_CLEAR  # the forms the issue named, listed once


def _secrets(case: dict[str, Any]) -> list[str]:
    return case["secret"] if isinstance(case["secret"], list) else [case["secret"]]


@pytest.fixture
def client(ledger: Ledger) -> TestClient:
    return TestClient(create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger))


@pytest.fixture
def connect(client: TestClient, ledger: Ledger) -> Callable[[str], AgentMemory]:
    def make(name: str) -> AgentMemory:
        transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
        agent = Agent.generate(name, log_vkey=ledger.vkey, transport=transport)
        agent.register()
        return AgentMemory(agent, transport)

    return make


def _clean(ledger: Ledger, index: int, case: dict[str, Any]) -> None:
    got = ledger.store.body(index)
    assert got is not None
    text = got[1].decode()
    for secret in _secrets(case):
        assert secret not in text and json.dumps(secret)[1:-1] not in text, (case["form"], secret)


def test_every_pasted_form_is_redacted_before_signing_over_http(
    connect: Callable[[str], AgentMemory], ledger: Ledger
) -> None:
    """Issue 40, finding 6, through the SDK over HTTP: each form as a turn (the hooks'
    ``--server`` path) and as a memory; no byte of it is in what the service stored."""
    mem = connect("ada")
    sid = mem.open_session(title="pasting things")
    for form in FORMS:
        case = CORPUS[form]
        turn = mem.turn(sid, "user", case["text"])
        _clean(ledger, turn.index, case)
        try:
            written = mem.write(category="CONTEXT", content="noted: " + case["text"])
        except GateRejection:
            continue
        _clean(ledger, written.index, case)


def _wire(sub: Submission) -> dict[str, str]:
    return {k: base64.b64encode(getattr(sub, k)).decode() for k in ("envelope", "signature", "body", "salt")}


@pytest.mark.parametrize("form", FORMS)
def test_a_signed_body_still_carrying_a_form_is_refused_over_http(
    form: str,
    connect: Callable[[str], AgentMemory],
    client: TestClient,
    ledger: Ledger,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client that signs without redacting: the turn route (fast path), the memories route
    and ``POST /v1/events`` each answer 422 ``gate.secret`` and write nothing."""
    mem = connect("ada")
    sid = mem.open_session()
    signer = mem.agent.signer
    monkeypatch.setattr("engram.protocol.signer.redact_body", lambda body: body)
    text = CORPUS[form]["text"]
    head = ledger.size()
    turn = signer.event(
        "session.turn",
        {"session": sid, "turn": 0, "role": "user", "content": text},
        version=0,
        prev=None,
        client_time_us=mem.agent.clock(),
    )
    memory = signer.event(
        "memory.written",
        {
            "category": "CONTEXT",
            "content": text,
            "tags": [],
            "confidence": 70,
            "provenance": [],
            "tier": "WARM",
        },
        version=0,
        prev=None,
        client_time_us=mem.agent.clock(),
    )
    for path, payload in (
        (f"/v1/agents/{mem.agent_id}/sessions/{sid}/turns", _wire(turn)),
        (f"/v1/agents/{mem.agent_id}/memories", _wire(memory)),
        ("/v1/events", {"events": [_wire(turn)]}),
    ):
        resp = client.post(path, json=payload)
        assert resp.status_code == 422, (path, resp.text)
        assert resp.json()["check"] == "gate.secret", resp.json()
    assert ledger.size() == head
