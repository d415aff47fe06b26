"""Fixtures the contract tests share (each runs on SQLite and PostgreSQL: ``ledger`` and
``make_agent`` come from tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.wire import Submission
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory

#: The type of the ``memory_of`` fixture.
MemoryOf = Callable[[Agent], AgentMemory]


@pytest.fixture
def memory(ledger: Ledger) -> MemoryService:
    """The memory service over the test's ledger, recording each recall's use before it
    returns (``access_log="sync"``: what a test reads next already counts it)."""
    return MemoryService(ledger, access_log="sync")


@pytest.fixture
def memory_of(memory: MemoryService) -> MemoryOf:
    """``memory_of(agent)``: the agent's :class:`AgentMemory` through the in-process
    transport of the test's memory service (what the HTTP routes call). The agent is
    rebound to that transport (made by ``make_agent`` on the bare log, it keeps its key,
    clock and verified checkpoints); one AgentMemory per agent."""
    transport = InProcessMemory(memory)
    made: dict[int, AgentMemory] = {}

    def of(agent: Agent) -> AgentMemory:
        am = made.get(id(agent))
        if am is None:
            agent.transport = transport
            am = made[id(agent)] = AgentMemory(agent)
        return am

    return of


def unchecked_bundle(ledger: Ledger, claim: Mapping[str, Any], **options: Any) -> bytes:
    """The bundle the log builds for ``claim`` without the builder's own verification
    (``create_bundle`` refuses a claim its verifier would fail, issue 40): what an older or a
    crafted builder hands a buyer, for the tests of what the verifier then says."""
    from ledger.bundle import _assemble

    defaults: dict[str, Any] = {
        "trusted_size": None,
        "trusted_sizes": (),
        "token": None,
        "audience": None,
        "disclose_bodies": True,
        "at_size": None,
    }
    return _assemble(ledger, claim, **(defaults | options))


def signed_commitment(agent: Agent, promise: str) -> Submission:
    """A commitment ``agent`` signs as its next event, not yet sent (the tests of what the
    log's edge and group commit do with one submission)."""
    version, prev = agent._next("commitment")
    return agent.signer.event(
        "commitment",
        {"promise": promise, "counterparty": "ops"},
        version=version,
        prev=prev,
        client_time_us=1,
    )
