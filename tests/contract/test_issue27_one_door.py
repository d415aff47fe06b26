"""Issue 27, finding 4 ("three doors for one memory event, and one skips the rules"): every
memory kind, sent through each door, leaves the same projection and the same log, on both
backends.

The doors: the in-process transport of a process with a memory service
(``Services.transport()``), the memory routes (``HttpTransport`` posts each event to its
route) and ``POST /v1/events`` (every event through the batch route). ``POST /v1/events`` and
the in-process transport used to append memory kinds straight to the log: the HOT caps were
not held after a write and a closed session was never distilled. The same script through a
bare log (``InProcess(ledger)``, no memory service) is the control: it must differ, or the
script does not exercise the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from api.app import create_app
from api.settings import ApiSettings
from engram.client.http import HttpTransport, _wire
from engram.client.sdk import Agent, Transport
from engram.protocol.bodies import (
    closed_body,
    erased_body,
    exempt_body,
    opened_body,
    superseded_body,
    turn_body,
    written_body,
)
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt, Submission
from ledger.compose import Services, create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.policy import PolicyConfig
from ledger.memory.service import MemoryService
from ledger.storage.db import make_engine
from tests.conftest import ORIGIN, PgServer, StepClock

OPERATOR = "10gjKeMzZ2FOkT83D_jOtrIdAL-SZjCQ9vFczLrY"
AGENT_SEED = bytes(range(7, 39))


class EventsOnly(HttpTransport):
    """Every event through ``POST /v1/events``, never a memory route."""

    def submit(self, submissions: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        headers = self._operator() if operator else {}
        resp = self.request(
            "POST", "/v1/events", body={"events": [_wire(s) for s in submissions]}, headers=headers
        )
        return [self._remember(r) for r in resp.json()["receipts"]]


@pytest.fixture
def fresh(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[], Ledger]]:
    """New empty ledgers on the test's backend, all with the same keys and clock start."""
    engines: list[Engine] = []
    urls: list[str] = []

    def make() -> Ledger:
        n = len(engines)
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / f'door{n}.db'}"
        else:
            server: PgServer = request.getfixturevalue("pg_server")
            url = server.new_database()
            urls.append(url)
        engine = make_engine(url)
        engines.append(engine)
        return create_ledger(
            engine,
            LogKey(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32)))),
            clock=StepClock(),
            policy_key=Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))),
            signed_head=tmp_path / f"door{n}.signed-head",
        )

    yield make
    for e in engines:
        e.dispose()
    if urls:
        server = request.getfixturevalue("pg_server")
        for url in urls:
            server.drop(url)


def _memory(ledger: Ledger) -> MemoryService:
    return MemoryService(ledger, config=PolicyConfig(hot_max_items=3), access_log="off")


def _agent(ledger: Ledger, transport: Transport) -> Agent:
    signer = AgentSigner("door-agent", Ed25519PrivateKey.from_private_bytes(AGENT_SEED), origin=ORIGIN)
    return Agent(signer, log_vkey=ledger.vkey, transport=transport, clock=StepClock(), state_dir=None)


def _script(agent: Agent, ledger: Ledger, plan_erasure: Callable[[int], Any]) -> None:
    """Every agent-signed memory kind, once or more, in an order that makes each rule act."""
    gate = ledger.gate
    agent.register()
    agent.append("session.opened", opened_body("s-1", "Sprint planning"))
    agent.append("session.turn", turn_body("s-1", 0, "user", "We ship on Fridays; the cache key went stale."))
    agent.append(
        "session.turn", turn_body("s-1", 1, "assistant", "Noted. I will rotate the cache key before Friday.")
    )
    first = None
    for drink in ("tea", "coffee", "cocoa", "mate", "water"):  # five HOT writes: caps hold three
        r = agent.append(
            "memory.written",
            written_body(
                gate, category="PREFERENCE", content=f"The user prefers {drink} in the morning.", tier="HOT"
            ),
        )
        first = first or r
    assert first is not None
    agent.append(
        "memory.superseded",
        superseded_body(
            gate, f"{first.index}.0", content="The user prefers green tea in the morning.", reason="said so"
        ),
    )
    agent.append("memory.decay_exempted", exempt_body(f"{first.index + 1}.0", reason="a standing preference"))
    agent.append("pact.outcome", {"pact": "p-1", "result": "fulfilled", "quality": 92})
    agent.append("session.closed", closed_body("s-1", "Planned the Friday release."))
    plan = plan_erasure(first.index + 2)
    agent.append(
        "memory.erased",
        erased_body(
            first.index + 2, plan.refs, reason="asked to forget", also=plan.also, sessions=plan.sessions
        ),
    )


def _view(memory: MemoryService) -> dict[str, Any]:
    """What the doors must agree on: the log's entries (who, what kind) and the projection's
    items and sessions, without timestamps (each door's clocks are called a different
    number of times)."""
    memory.sync()
    store = memory.ledger.store
    from verifier.event import Leaf

    log = [
        (Leaf.from_bytes(raw).envelope.agent, Leaf.from_bytes(raw).envelope.kind)
        for _, raw in store.leaves_iter(0, memory.ledger.size())
    ]
    items = [
        (i.ref, i.tier, i.status, i.category, i.content, tuple(i.tags), i.source_kind)
        for agent in memory.projection.agents()
        for tiers in (None, ["RECORD"])
        for i in memory.projection.items(agent, tiers=tiers, status=None)
    ]
    sessions = [
        (s.agent, s.session, s.status, s.title, s.turns, s.distilled)
        for agent in memory.projection.agents()
        for s in memory.projection.sessions(agent)
    ]
    return {"log": log, "items": items, "sessions": sessions}


def _through(door: str, ledger: Ledger) -> dict[str, Any]:
    memory = _memory(ledger)
    if door in ("routes", "events"):
        client = TestClient(
            create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
        )
        cls = EventsOnly if door == "events" else HttpTransport
        transport: Transport = cls("http://testserver", operator_token=OPERATOR, http=client)
    elif door == "in-process":
        transport = Services(ledger=ledger, memory=memory).transport()
    else:  # the control: the log alone, no memory rules
        transport = InProcess(ledger)
    _script(_agent(ledger, transport), ledger, lambda index: memory.erasure_plan("door-agent", index))
    return _view(memory)


def test_issue27_f4_every_memory_kind_through_every_door_yields_one_projection(
    fresh: Callable[[], Ledger],
) -> None:
    views = {door: _through(door, fresh()) for door in ("in-process", "routes", "events", "bare log")}
    reference = views["in-process"]
    kinds = [k for _, k in reference["log"]]
    # the rules acted: caps moved a HOT memory to WARM, the session was distilled
    assert "memory.tier_changed" in kinds and "memory.distilled" in kinds, kinds
    assert any(s[5] for s in reference["sessions"]), reference["sessions"]
    assert views["routes"] == reference
    assert views["events"] == reference
    assert views["bare log"] != reference  # the control: without the door, no rules
