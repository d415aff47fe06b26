"""Issue 43 (Deliver 4): a single append's stateless checks run in its caller's thread
before it queues for the group commit, so the leader appends events already checked and
callers check their own while a batch commits; a bad event is refused before it queues."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import SignatureError
from engram.protocol.wire import Receipt, Submission
from ledger.envelopes import Prepared
from ledger.log import Ledger
from tests.contract.conftest import signed_commitment


def test_a_single_append_is_prepared_in_its_callers_thread_before_it_queues(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group commit's leader appends events already checked (so callers check their own
    while a batch commits), and a bad event is refused before it queues, alone."""
    assert ledger.group_commit is not None
    queued: list[object] = []
    real = ledger.group_commit.append

    def spy(sub: Submission | Prepared, **kw: Any) -> Receipt:
        queued.append(sub)
        return real(sub, **kw)

    agent = make_agent("prepared")
    monkeypatch.setattr(ledger.group_commit, "append", spy)
    good = agent.append("commitment", {"promise": "checked before it queued"})
    assert len(queued) == 1 and isinstance(queued[0], Prepared)
    assert ledger.leaf(good.index) == good.leaf
    forged = signed_commitment(agent, "forged")
    forged = Submission(envelope=forged.envelope, signature=bytes(64), body=forged.body, salt=forged.salt)
    with pytest.raises(SignatureError):
        ledger.append([forged])
    assert len(queued) == 1  # refused at the edge, never queued
