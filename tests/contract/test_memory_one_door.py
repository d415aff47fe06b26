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
from engram.client.agent_memory import AgentMemory
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
from engram.protocol.errors import ConfigError
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import Receipt, Submission
from ledger.compose import Services, create_ledger
from ledger.inprocess import InProcess
from ledger.log import Ledger
from ledger.memory.policy import PolicyConfig
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
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
        transport = InProcess(ledger, log_only=True)
    _script(_agent(ledger, transport), ledger, lambda index: memory.erasure_plan("door-agent", index))
    return _view(memory)


def test_every_memory_kind_through_every_door_yields_one_projection(
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


#: What differs between two logs of the same events: the server timestamps in the leaves and
#: so every hash over them (both sides verified each proof before answering).
_CLOCKED = {
    "created_us",
    "last_access_us",
    "tier_history",
    "as_of_size",
    "timestamp_us",
    "checkpoint",
    "leaf_hash",
    "root",
    "proof",
}


def _plain(value: Any) -> Any:
    """An answer as JSON without what each transport's clocks and checkpoints make differ."""
    if hasattr(value, "to_json"):
        value = value.to_json()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _CLOCKED}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _answers(mem: AgentMemory) -> list[Any]:
    """One agent's day through every AgentMemory operation; every answer, in order."""
    out: list[Any] = []
    mem.agent.register()
    sid = mem.open_session(title="Sprint planning", session="s-1")
    out.append(sid)
    out.append(mem.turn(sid, "user", "We ship on Fridays; the cache key went stale."))
    out.append(mem.turn(sid, "assistant", "Noted. I will rotate the cache key before Friday."))
    out.append(mem.session(sid))
    writes = [
        mem.write(category="PREFERENCE", content=f"The user prefers {d} in the morning.", tier="HOT")
        for d in ("tea", "coffee", "cocoa", "mate", "water")
    ]
    out += writes
    out.append(mem.write(category="PREFERENCE", content="the user prefers WATER in the morning.", tier="HOT"))
    first = writes[0].ref
    assert first is not None
    out.append(mem.supersede(first, content="The user prefers green tea in the morning.", reason="said so"))
    out.append(mem.exempt(f"{writes[1].index}.0", reason="a standing preference"))
    out.append(mem.record("pact.outcome", {"pact": "p-1", "result": "fulfilled", "quality": 92}))
    out.append(mem.close_session(sid, summary="Planned the Friday release."))
    out.append(mem.sessions())
    out.append(mem.erasure_plan(writes[2].index))
    out.append(mem.erase(writes[2].index, reason="asked to forget"))
    out.append(mem.items(status="all"))
    out.append(mem.items(tier="RECORD", status="all"))
    out.append(mem.item(f"{writes[3].index}.0"))
    out.append(mem.recall("morning drink", include_cold=True))
    out.append(mem.hot_block(None))
    out.append(mem.prove(writes[4].index))
    out.append(mem.session_turns("s-none"))
    return [_plain(a if not hasattr(a, "refs") else {"refs": a.refs, "also": a.also}) for a in out]


def test_one_agent_memory_answers_the_same_over_both_transports(
    fresh: Callable[[], Ledger],
) -> None:
    """``AgentMemory`` over the in-process transport and over HTTP (the memory routes) gives
    equal answers to the same day, on two logs with the same keys (issue 27, finding 2: five
    faces answered differently; the item ref pattern already disagreed)."""
    answers: dict[str, list[Any]] = {}
    for door in ("in-process", "http"):
        ledger = fresh()
        memory = _memory(ledger)
        if door == "http":
            client = TestClient(
                create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
            )
            transport: Transport = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
        else:
            transport = InProcessMemory(memory)
        answers[door] = _answers(AgentMemory(_agent(ledger, transport)))
    local, remote = answers["in-process"], answers["http"]
    assert len(local) == len(remote)
    for n, (a, b) in enumerate(zip(local, remote, strict=True)):
        assert a == b, f"answer {n} differs"
    closed = local[13]
    assert closed["distilled"] is not None and closed["decisions"] >= 1  # the rules acted
    assert local[9]["duplicate"] is True  # the near-duplicate confirmed the first
    assert local[21].endswith("</memory-context>\n")  # the HOT block is closed either way


def test_agent_memory_refuses_a_bare_log(fresh: Callable[[], Ledger]) -> None:
    """A bare log's transport takes events without the memory rules: AgentMemory refuses it
    instead of writing memories nobody files (issue 27, finding 2)."""
    ledger = fresh()
    with pytest.raises(ConfigError, match="bare log"):
        AgentMemory(_agent(ledger, InProcess(ledger)))
