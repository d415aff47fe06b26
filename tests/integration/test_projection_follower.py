"""The service's background projector (issue 14, Deliver 4 and 6): a lagging projection
catches up at start-up without any request, and follows appends made elsewhere."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client.sdk import Agent
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
