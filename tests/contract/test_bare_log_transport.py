"""The bare log's in-process transport holds memory kinds off: a session, memory or record
event goes in through the memory service's door (``Services.transport()``), where the
memory rules follow it, never straight to the log by default.

Issue 41, Deliver 4: the bare-log ``InProcess`` transport bypassed the memory door by
convention only.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from ledger.inprocess import MEMORY_KINDS, InProcess
from ledger.log import Ledger
from ledger.memory.door import FOLDED_KINDS


def test_the_held_kinds_are_the_kinds_the_memory_rules_follow() -> None:
    assert MEMORY_KINDS == FOLDED_KINDS
    assert {"session.opened", "memory.written", "memory.erased", "pact.outcome"} <= MEMORY_KINDS
    assert not {"key.registered", "key.rotated", "share.revoked"} & MEMORY_KINDS


@pytest.mark.parametrize("kind", sorted(MEMORY_KINDS))
def test_the_bare_transport_refuses_every_memory_kind_and_writes_nothing(
    kind: str, ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    ada = make_agent("ada")  # registered through the log's own transport
    sub = ada.signer.event(kind, {"any": "body"}, version=0, prev=None, client_time_us=1)
    size = ledger.size()
    with pytest.raises(RejectedEventError) as e:
        InProcess(ledger).submit([sub])
    assert e.value.check == "transport.memory_door"
    assert ledger.size() == size
    # built log_only (no memory service serves the log), the event reaches the log's own
    # checks: it is refused there for its body, not at the door
    with pytest.raises(RejectedEventError) as e:
        InProcess(ledger, log_only=True).submit([sub])
    assert e.value.check != "transport.memory_door"


def test_the_bare_transport_still_takes_key_and_share_events(ledger: Ledger) -> None:
    ada = Agent.generate("ada", log_vkey=ledger.vkey, transport=InProcess(ledger), state_dir=None)
    assert ada.register().kind == "key.registered"
    assert ada.append("share.revoked", {"token_id": "ab" * 16}).kind == "share.revoked"
