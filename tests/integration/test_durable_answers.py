"""Issue 28, Deliver 2: while the service's follower runs, a write is answered once its entry
is durable in the log, never after a projection sync; the follower applies it and holds the
HOT caps; a reader that must see a write names it (Engram-Min-Index) and sees it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from engram.client import AgentMemory
from engram.client.http import HttpTransport
from engram.client.sdk import Agent
from engram.protocol.bodies import written_body
from engram.protocol.gate import WriteGate
from ledger.log import Ledger
from ledger.memory.policy import PolicyConfig
from ledger.memory.service import MemoryService

OPERATOR = "2KszfFVxSihaUFeuDLDTyjZFHFyM2i4VjKml0tK_"


def _until(check: Callable[[], bool], timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _client(
    ledger: Ledger, memory: MemoryService, agent: str
) -> tuple[TestClient, HttpTransport, AgentMemory]:
    client = TestClient(
        create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
    )
    t = HttpTransport("http://testserver", operator_token=OPERATOR, http=client)
    a = Agent.generate(agent, log_vkey=ledger.vkey, transport=t)
    a.register()
    return client, t, AgentMemory(a, t)


def test_a_stalled_projection_never_blocks_a_record_or_a_turn(ledger: Ledger) -> None:
    """The projector is held (a projection that lags as far as it can): records, turns and
    a session's opening are still answered, durable, with their item named; a read naming the
    last write waits for the projection and then sees every one of them."""
    memory = MemoryService(ledger, access_log="off")
    # The follower's path (the pass left the entries, as it leaves an erasure's): the append
    # pass's own projector is off here; tests/contract/test_projection_in_pass.py covers it.
    ledger.on_commit_tx = None
    client, t, mem = _client(ledger, memory, "writer")
    with client:
        assert _until(lambda: memory.follower._following)
        sid = mem.open_session(title="stalled")
        answers: list[object] = []
        with memory.follower._projector:  # nothing can apply the log while this is held
            applied_before = memory.projection.applied_size()
            done = threading.Event()

            def write() -> None:
                answers.append(mem.record("commitment", {"promise": "ship the fix by Friday"}))
                answers.append(mem.turn(sid, "user", "the fix ships Friday"))
                done.set()

            threading.Thread(target=write, daemon=True).start()
            assert done.wait(30), "a write waited on the projection"
            assert memory.projection.applied_size() == applied_before
        record, turn = answers
        assert record.ref == f"{record.index}.0"  # type: ignore[attr-defined]
        assert ledger.leaf(turn.index) is not None  # type: ignore[attr-defined]
        # The reader names its last write: the projection holds it when the read answers.
        assert t.last_index == turn.index  # type: ignore[attr-defined]
        items = mem.items(tier="COLD")
        assert record.ref in [i.ref for i in items]  # type: ignore[attr-defined]
        assert memory.projection.applied_size() > turn.index  # type: ignore[attr-defined]
    assert memory.rebuild() == memory.digest()


def test_the_follower_holds_the_hot_caps_after_answering(ledger: Ledger) -> None:
    memory = MemoryService(ledger, config=PolicyConfig(hot_max_items=3), access_log="off")
    client, _, mem = _client(ledger, memory, "capped")
    with client:
        assert _until(lambda: memory.follower._following)
        written = [
            mem.write(category="PREFERENCE", content=f"prefers tea number {i}", tier="HOT") for i in range(6)
        ]
        assert all(w.ref is not None for w in written)  # a memory's answer names its item
        assert _until(lambda: len(memory.projection.items("capped", tiers=["HOT"])) <= 3)
        moved = ledger.stream_count("capped", "memory.tier_changed")
        assert moved >= 3  # policy-signed: the log records why they left HOT
    assert memory.rebuild() == memory.digest()


def test_caps_left_undone_by_a_dead_process_are_held_at_start_up(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """A process that died between acknowledging writes and holding the caps: the next
    follower decides the caps again from the log at start-up."""
    memory = MemoryService(ledger, config=PolicyConfig(hot_max_items=2), access_log="off")
    agent = make_agent("orphan")
    for i in range(5):  # appended straight to the log: no door, so no caps were held
        body = written_body(WriteGate(), category="PREFERENCE", content=f"likes window seat {i}", tier="HOT")
        agent.append("memory.written", body)
    memory.sync()
    assert len(memory.projection.items("orphan", tiers=["HOT"])) == 5
    client = TestClient(
        create_app(ApiSettings(operator_token=OPERATOR), ledger=ledger, memory_service=memory)
    )
    with client:
        assert _until(lambda: len(memory.projection.items("orphan", tiers=["HOT"])) <= 2)
    assert memory.rebuild() == memory.digest()


def test_readers_wait_for_the_follower_instead_of_applying_the_log(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deliver 5: while the follower runs, the requests' reads (a recall naming the reader's
    last write, one naming none, a tier view) never apply the log themselves: only the
    follower's thread runs projection transactions, which would otherwise queue on the
    writer lock the appends hold. Each read still sees every write it must."""
    memory = MemoryService(ledger, access_log="off")
    appliers: set[int] = set()
    sync = memory.projection.sync

    def recorded(upto: int | None = None) -> int:
        appliers.add(threading.get_ident())
        return sync(upto)

    monkeypatch.setattr(memory.projection, "sync", recorded)
    client, t, mem = _client(ledger, memory, "reader")
    with client:
        assert _until(lambda: memory.follower._following)
        for i in range(5):
            w = mem.write(category="LEARNING", content=f"the deploy script needs flag number {i}")
            found = mem.recall(f"deploy script flag number {i}")
            assert w.ref in [r.ref for r in found.ranked]  # named its write: sees it
        t.last_index = None  # a reader naming no write: the latest checkpoint, via the follower
        assert len(mem.items(tier="WARM")) == 5
        assert appliers == {memory.follower._follower}
    assert memory.rebuild() == memory.digest()


def test_a_reader_applies_the_log_itself_when_the_follower_stalls(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower that does not come round in FOLLOWER_WAIT_S (stuck behind a slow
    embedder, say) costs a reader that wait once: it then applies the log itself and sees
    its write."""
    from ledger.memory import follower as service

    monkeypatch.setattr(service, "FOLLOWER_WAIT_S", 0.2)
    memory = MemoryService(ledger, access_log="off")
    # The follower's path (the pass left the entries, as it leaves an erasure's): the append
    # pass's own projector is off here; tests/contract/test_projection_in_pass.py covers it.
    ledger.on_commit_tx = None
    client, _, mem = _client(ledger, memory, "patient")
    with client:
        assert _until(lambda: memory.follower._following)
        stalled = threading.Event()
        release = threading.Event()
        original = memory.follower._round

        def stuck(*, everyone: bool = False, embed: bool = False) -> None:
            stalled.set()
            release.wait(30)
            original(everyone=everyone, embed=embed)

        monkeypatch.setattr(memory.follower, "_round", stuck)
        memory.follower._wake.set()
        assert stalled.wait(10)
        try:
            started = time.monotonic()
            w = mem.write(category="LEARNING", content="the cache key includes the tenant id")
            found = mem.recall("cache key tenant")
            assert w.ref in [r.ref for r in found.ranked]
            # The write's answer names its item: it waited for the follower once, then
            # applied the log itself; the recall then found its entry applied.
            assert time.monotonic() - started >= 0.2
        finally:
            release.set()
    assert memory.rebuild() == memory.digest()
