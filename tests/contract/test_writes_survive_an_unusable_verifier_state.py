"""A write the log committed is answered with its receipt even when the client cannot use
its remembered-state directory (issue 40, finding 11, the client's half, attacked from
outside), on both backends: the SDK checked each receipt against the state directory
(verifier/state.py) after the service had committed the entry, so an unwritable directory
(a sandboxed harness, a full disk) turned an acknowledged write into ``state.io``, and a
retry wrote a record twice. The receipt is still checked against this process's last
checkpoint (inclusion and consistency: a fork still fails), and the entry is answered."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import ProofError
from ledger.inprocess import InProcess
from ledger.log import Ledger
from tests.conftest import StepClock


def test_a_committed_write_is_answered_when_the_state_directory_is_unusable(
    ledger: Ledger, clock: StepClock, tmp_path: Path
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    ada = Agent.generate(
        "ada",
        log_vkey=ledger.vkey,
        transport=InProcess(ledger, log_only=True),
        clock=clock,
        state_dir=blocked / "state",
    )
    size = ledger.size()
    ada.register()
    receipt = ada.append("pact.outcome", {"pact": "p1", "result": "fulfilled", "quality": 90})
    assert ledger.size() == size + 2 and receipt.index == size + 1
    again = ada.append("pact.outcome", {"pact": "p2", "result": "fulfilled", "quality": 80})
    assert again.index == size + 2


def test_a_fork_still_fails_without_the_state_directory(
    ledger: Ledger, clock: StepClock, tmp_path: Path
) -> None:
    """The fallback keeps the fork check: a receipt's checkpoint inconsistent with the last
    one this process verified is refused (what no state directory at all also checks)."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    transport = InProcess(ledger, log_only=True)
    ada = Agent.generate(
        "ada", log_vkey=ledger.vkey, transport=transport, clock=clock, state_dir=blocked / "s"
    )
    ada.register()
    real = transport.consistency

    def forged(old: int, new: int) -> list[bytes]:
        return [b"\x00" * 32 for _ in real(old, new)] or [b"\x00" * 32]

    transport.consistency = forged  # type: ignore[method-assign]
    with pytest.raises(ProofError):
        ada.append("pact.outcome", {"pact": "p1", "result": "fulfilled", "quality": 90})
