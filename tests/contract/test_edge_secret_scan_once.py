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


def test_a_text_the_signer_redacted_is_not_scanned_again_by_the_edge_of_its_process(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 43, Deliver 4: the embedded log's edge checks the text its process's signer
    produced (the secret replaced by a marker) from the redaction memo: no rule runs on it
    again (engram/protocol/redact.py, _SEEN, says why that is safe)."""
    with redact._SEEN_LOCK:  # what this test's signer leaves there, nothing from before
        redact._SEEN.clear()
    agent = make_agent("redacted-once")
    sub = signed_commitment(agent, f"deploy with {SECRET} tonight, the edge's memo")
    rounds: list[str] = []
    real = redact._one_round

    def counting(text: str, *args: object, **kw: object) -> tuple[str, list[str]]:
        rounds.append(text)
        return real(text, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(redact, "_one_round", counting)
    prepared = ledger.prepare(sub)
    assert "[REDACTED:github_token]" in prepared.body["promise"]
    assert SECRET not in prepared.body["promise"]
    assert rounds == []


@pytest.mark.parametrize(
    "tamper",
    [
        lambda text: text.replace("[REDACTED:github_token]", SECRET),  # the secret put back
        lambda text: f"{text} and {SECRET}",  # a secret added to the produced text
        lambda text: text.replace("[REDACTED:github_token]", SECRET[:12] + "\n" + SECRET[12:]),  # wrapped
    ],
    ids=["put-back", "appended", "wrapped"],
)
def test_a_secret_injected_after_redaction_is_refused_at_the_edge_and_nothing_is_written(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    monkeypatch: pytest.MonkeyPatch,
    tamper: Callable[[str], str],
) -> None:
    """The memo answers only for the exact text the redaction produced: a client that takes
    that text, puts a secret into it and signs the result without the signer's redaction is
    scanned in full and refused (``gate.secret``), nothing written."""
    agent = make_agent("tamperer")
    produced, found = redact.redact_secrets(f"deploy with {SECRET} tonight, tamper")
    assert found == ["github_token"]
    forged = tamper(produced)
    with monkeypatch.context() as m:  # a client that skips the signer's redaction
        m.setattr(signer_module, "redact_body", lambda body: body)
        bad = agent.signer.event("commitment", {"promise": forged}, version=0, prev=None, client_time_us=1)
    size = ledger.size()
    with pytest.raises(RejectedEventError) as refused:
        ledger.append([bad])
    assert refused.value.check == "gate.secret"
    assert ledger.size() == size
