"""The service's background projector (issue 14, Deliver 4 and 6): a lagging projection
catches up at start-up without any request, and follows appends made elsewhere."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.errors import RejectedEventError
from ledger.log import Ledger
from ledger.memory.service import MemoryService

OPERATOR = "2KszfFVxSihaUFeuDLDTyjZFHFyM2i4VjKml0tK_"


def _wait_applied(memory: MemoryService, size: int, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while memory.projection.applied_size() < size and time.monotonic() < deadline:
        time.sleep(0.05)
    return memory.projection.applied_size()


def test_a_lagging_projection_catches_up_at_start_up_and_follows_the_log(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    for i in range(30):  # appended in process: nothing applies them to the projection
        alice.append("commitment", {"promise": f"kept promise {i}"})
    memory = MemoryService(ledger)
    assert memory.projection.applied_size() < ledger.size()
    app = create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
    with TestClient(app):
        assert _wait_applied(memory, ledger.size()) == ledger.size()  # no request was made
        alice.append("commitment", {"promise": "made while the service runs"})
        assert _wait_applied(memory, ledger.size()) == ledger.size()
    assert memory.rebuild() == memory.digest()


def test_a_reader_naming_its_last_write_reads_it_without_waiting_for_the_rest(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engram-Min-Index (issue 14, Deliver 4): the HTTP client sends the index of its last
    acknowledged write with each read; the service answers once the projection holds that
    entry, and refuses an index beyond the log."""
    memory = MemoryService(ledger)
    client = TestClient(
        create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
    )
    t = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    agent = Agent.generate("reader", log_vkey=ledger.vkey, transport=t)
    agent.register()
    remote = AgentMemory(agent, t)
    written = remote.write(category="LEARNING", content="the build cache lives on the second disk")
    assert t.last_index == written.index
    # Entries appended elsewhere after it: a reader naming its write does not apply them.
    # (Left to the follower, as a process without the memory service leaves them: the append
    # pass's own projector is off for them.)
    ledger.on_commit_tx = None
    other = make_agent("other")
    for i in range(5):
        other.append("commitment", {"promise": f"later {i}"})
    applied = memory.projection.applied_size()
    assert applied < ledger.size()
    assert written.ref in [i.ref for i in remote.items(tier="WARM")]
    assert memory.projection.applied_size() == applied  # answered without syncing further
    assert memory.sync_through(None) == ledger.size()  # no index: as of the latest checkpoint
    t.last_index = ledger.size() + 10
    with pytest.raises(RejectedEventError, match="not in the log"):
        remote.items()


def test_sync_through_refuses_an_entry_beyond_the_log(ledger: Ledger) -> None:
    memory = MemoryService(ledger)
    with pytest.raises(RejectedEventError) as e:
        memory.sync_through(ledger.size())
    assert e.value.check == "request.min_index"
    assert memory.sync_through(ledger.size() - 1) == ledger.size()
