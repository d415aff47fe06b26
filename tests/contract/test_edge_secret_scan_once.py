"""Issue 43 (Deliver 4): the log's edge scans each string of a body for secrets once (the
gated texts are strings of the body, which the whole-body check covers), and still refuses
a secret in a gated text by name with nothing written."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol import redact
from engram.protocol import signer as signer_module
from engram.protocol.errors import RejectedEventError
from ledger.log import Ledger
from tests.contract.conftest import signed_commitment

SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape


def test_the_edge_scans_each_string_of_a_body_for_secrets_once(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gated texts (a commitment's promise and counterparty) are strings of the body:
    the whole-body secret check covers them, and the gate's own check no longer scans them
    a second time."""
    agent = make_agent("once")
    sub = signed_commitment(agent, "promise: ship the retry loop with idempotency keys")
    scanned: list[str] = []
    real = redact.redact_secrets

    def counting(text: str) -> tuple[str, list[str]]:
        scanned.append(text)
        return real(text)

    monkeypatch.setattr(redact, "redact_secrets", counting)
    prepared = ledger.prepare(sub)
    assert prepared.body["promise"].startswith("promise:")
    assert scanned.count("promise: ship the retry loop with idempotency keys") == 1
    assert scanned.count("ops") == 1


def test_a_secret_in_a_gated_text_is_still_refused_by_name_and_nothing_is_written(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = make_agent("secretive")
    with monkeypatch.context() as m:  # a client that skips the signer's redaction
        m.setattr(signer_module, "redact_body", lambda body: body)
        bad = agent.signer.event(
            "commitment", {"promise": f"use {SECRET} for the deploy"}, version=0, prev=None, client_time_us=1
        )
    size = ledger.size()
    with pytest.raises(RejectedEventError) as refused:
        ledger.append([bad])
    assert refused.value.check == "gate.secret"
    assert "$.promise" in str(refused.value)
    assert ledger.size() == size
    kept = agent.append("commitment", {"promise": "the stream is untouched"})
    assert kept.index == size and kept.version == 0
