"""The committing pass applies the memory projection for what it commits (issue 43,
Deliver 1; ledger.memory.in_pass), on both backends: the events it folds are the ones a
read of the log gives, the projection it leaves is the one a rebuild gives, the follower
applies nothing of it, a failing hook costs the append nothing, and a kill in the middle
of a batch leaves the projection equal to a rebuild after the restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection, text

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import EngramError
from engram.protocol.keyfiles import LogKey
from ledger.append import CommittedBatch
from ledger.compose import memory_rules
from ledger.log import Ledger
from ledger.memory.projection_events import committed_events, read_events
from ledger.memory.projection_state import BatchState
from ledger.memory.service import MemoryService
from ledger.memory.state import LoggedEvent
from ledger.storage.db import make_engine
from ledger.storage.store import SqlStore
from tests.contract.conftest import MemoryOf
from tests.contract.test_ingest_batches import CountingEmbedder
from tests.contract.test_memory_projection import memory_for, pure_replay_digest

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "crash.example/in-pass"


def _workload(ada: AgentMemory, bob: AgentMemory, *, erase: bool, round_: int = 0) -> None:
    """Sessions with turns and closes (distilled), memories, a duplicate (a confirmation),
    a supersession, records, and (``erase``) an erasure that takes a duplicate with it."""
    sid = ada.open_session(title=f"triage {round_}")
    ada.turn(sid, "user", f"I prefer short answers. We decided to drop IE11 in round {round_}.")
    ada.turn(sid, "assistant", "Noted. Turns out the root cause was a stale cache key.")
    ada.turn(sid, "user", "We are blocked on the finance approval.")
    ada.close_session(sid)
    first = ada.write(category="LEARNING", content=f"Customer {round_} prefers email")
    ada.write(category="LEARNING", content=f"customer {round_} prefers email!")  # confirms it
    phone = bob.write(category="CONTEXT", content=f"Samir's phone number is 555 01{round_:02d}")
    bob.supersede(f"{phone.index}.0", content="Samir's phone number is 555 0199", reason="new number")
    bob.record("commitment", {"promise": f"ship report {round_}", "counterparty": "ops"})
    other = bob.open_session()
    bob.turn(other, "user", "Deploys freeze on Fridays, we decided.")
    if erase:
        ada.erase(first.index, reason="asked to forget")
    bob.close_session(other)


def _caught_up_equals_rebuild(memory: MemoryService) -> None:
    memory.sync()
    incremental = memory.digest()
    assert incremental[0] == memory.ledger.size()
    assert pure_replay_digest(memory.ledger) == incremental
    assert memory.rebuild() == incremental


def test_a_mixed_workload_is_applied_in_pass_and_equals_a_rebuild(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    memory.sync()  # the policy key's entry, appended before the service registered its hook
    start, synced = memory.ledger.size(), memory.projection.synced
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    _workload(ada, bob, erase=False)
    size = memory.ledger.size()
    # Every entry was applied by the pass that committed it; the follower applied none.
    assert memory.in_pass.applied == size - start and memory.in_pass.left == 0
    assert memory.projection.synced == synced
    assert memory.projection.applied_size() == size
    _caught_up_equals_rebuild(memory)


def test_erasures_are_left_to_the_follower_and_the_projection_still_equals_a_rebuild(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    memory.sync()
    start, synced = memory.ledger.size(), memory.projection.synced
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    for n in range(2):
        _workload(ada, bob, erase=True, round_=n)
    size = memory.ledger.size()
    assert memory.in_pass.left > 0  # the erasures (and what followed before a catch-up)
    assert memory.in_pass.applied + memory.in_pass.left == size - start
    assert memory.projection.synced - synced <= memory.in_pass.left  # the rest was the pass's
    _caught_up_equals_rebuild(memory)


def test_concurrent_writers_batches_are_applied_in_pass_and_equal_a_rebuild(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """Concurrent single appends commit as group-commit batches of several entries; each
    batch is applied by its pass."""
    memory = MemoryService(ledger, access_log="off")
    memory.sync()
    start = ledger.size()
    agents = [memory_for(memory, make_agent(f"writer-{i}")) for i in range(6)]
    errors: list[BaseException] = []

    def work(agent: AgentMemory) -> None:
        try:
            sid = agent.open_session()
            for i in range(4):
                agent.turn(sid, "user", f"{agent.agent_id} says the build {i} is green")
                agent.write(category="LEARNING", content=f"{agent.agent_id} learned fact {i}")
            agent.close_session(sid)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert memory.in_pass.applied + memory.in_pass.left == ledger.size() - start
    assert memory.in_pass.applied > 0
    _caught_up_equals_rebuild(memory)


def test_a_sessions_turns_are_applied_by_their_passes_and_embedded_in_one_batch(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """Each turn is applied by the append that commits it (no catch-up transaction), nothing
    is embedded per write, and recall reads the last turn at once, embedding every turn in
    one batch (the embedding stays off the write transaction)."""
    embedder = CountingEmbedder()
    memory = MemoryService(ledger, embedder=embedder, access_log="off")
    memory.sync()
    ada = memory_for(memory, make_agent("ada"))
    sid = ada.open_session(title="ingest")
    applied, synced = memory.in_pass.applied, memory.projection.synced
    for i in range(12):
        ada.turn(sid, "user" if i % 2 == 0 else "assistant", f"turn number {i} mentions the staging database")
    last = ada.turn(sid, "user", "Zanzibar is where the offsite happens")
    assert memory.in_pass.applied - applied == 13 and memory.projection.synced == synced
    assert memory.projection.applied_size() == ledger.size()
    assert embedder.calls == []  # nothing embedded per write
    res = memory.recall("ada", "Zanzibar offsite", record_access=False)
    assert res.ranked and res.ranked[0].index == last.index
    assert embedder.calls[0] == 13  # every turn in one batch (then the query)


Pairs = list[tuple[list[LoggedEvent] | None, list[LoggedEvent]]]


def _compared_on_commit(memory: MemoryService) -> Pairs:
    """Wrap the memory service's hook: once each batch committed (its announcement), record
    the events built from the batch and what ``read_events`` reads back from the log then
    (the announcement's errors are only logged: the test compares the pairs)."""
    hook = memory.in_pass
    engine = memory.ledger.store.engine
    compared: Pairs = []

    def comparing(conn: Connection, batch: CommittedBatch) -> Callable[[], None] | None:
        announce = hook(conn, batch)
        built = committed_events(batch)

        def check() -> None:
            with engine.connect() as read:
                compared.append((built, read_events(read, batch.start, batch.end)))
            if announce is not None:
                announce()

        return check

    memory.ledger.on_commit_tx = comparing
    return compared


def test_the_events_a_batch_folds_are_the_ones_a_read_of_the_log_gives(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """committed_events (built from the batch in memory) == read_events (read back from the
    committed log) for every batch, over every kind of the workload."""
    compared = _compared_on_commit(memory)
    ada, bob = memory_of(make_agent("ada")), memory_of(make_agent("bob"))
    _workload(ada, bob, erase=True)
    built = [b for b, _ in compared if b is not None]
    assert len(built) >= 15 and len(built) < len(compared)  # the erasing batch builds none
    for b, read in compared:
        assert b is None or b == read


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    texts=st.lists(
        st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(
            lambda s: s.strip() != ""
        ),
        min_size=1,
        max_size=3,
    )
)
def test_built_events_equal_read_events_for_any_text(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf, texts: list[str]
) -> None:
    """Property: whatever text a memory or a turn holds (any script, escapes, duplicates),
    the events built from the batch are those read_events returns."""
    compared = _compared_on_commit(memory)
    agent = memory_of(make_agent(f"p{memory.ledger.size()}"))
    sid = agent.open_session()
    for t in texts:
        try:
            agent.write(category="LEARNING", content=t)
            agent.turn(sid, "user", t)
        except EngramError:  # refused before the log (gate, limits): nothing appended
            continue
    assert compared
    for b, read in compared:
        assert b == read
    memory.sync()
    assert memory.digest() == pure_replay_digest(memory.ledger)


def test_a_failing_hook_leaves_the_append_committed_and_the_follower_catches_up(
    memory: MemoryService,
    make_agent: Callable[..., Agent],
    memory_of: MemoryOf,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass fails after writing its rows (before the cursor): the savepoint takes its
    rows back, the entries commit, the cursor stays, and the follower applies them once
    (rows left behind would count a session's turns twice: digest != rebuild)."""
    memory.sync()
    ada = memory_of(make_agent("ada"))
    sid = ada.open_session(title="before")
    flush = BatchState.flush

    def failing_flush(self: BatchState) -> None:
        flush(self)
        raise RuntimeError("injected after the projection rows were written")

    monkeypatch.setattr(BatchState, "flush", failing_flush)
    monkeypatch.setattr(memory.follower, "sync", lambda *a, **k: memory.projection.applied_size())
    size = memory.ledger.size()
    turn = ada.turn(sid, "user", "We decided to keep the cache key per tenant.")
    assert turn.index == size and memory.ledger.size() == size + 1  # committed
    assert memory.ledger.store.leaf(turn.index) is not None
    assert memory.projection.applied_size() == size  # the cursor stayed
    assert memory.projection.session("ada", sid).turns == 0  # no row of the pass was kept
    monkeypatch.undo()
    memory.sync()
    assert memory.projection.session("ada", sid).turns == 1
    _caught_up_equals_rebuild(memory)


def test_a_database_error_in_the_hook_is_rolled_back_to_its_savepoint(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """A statement that fails in the hook (on PostgreSQL it aborts the transaction) is rolled
    back to the savepoint: the append commits, and the log goes on."""
    hook = memory.in_pass

    def broken(conn: Connection, batch: CommittedBatch) -> Callable[[], None] | None:
        hook(conn, batch)
        conn.execute(text("SELECT no_such_column FROM mem_cursor"))
        return None

    memory.ledger.on_commit_tx = broken
    ada = memory_of(make_agent("ada"))
    w = ada.write(category="LEARNING", content="Deploys freeze on Fridays")
    assert memory.ledger.store.leaf(w.index) is not None
    memory.ledger.on_commit_tx = hook
    ada.write(category="LEARNING", content="Releases go out on Tuesdays")
    _caught_up_equals_rebuild(memory)


def test_a_reader_waiting_for_the_follower_returns_once_the_pass_applied_its_entry(
    memory: MemoryService, make_agent: Callable[..., Agent], memory_of: MemoryOf
) -> None:
    """While following, a reader that needs entry i waits for the follower's announcement;
    the pass that applied i announces it (no follower round runs here: without the
    announcement the wait ends unanswered)."""
    memory.sync()
    ada = memory_of(make_agent("ada"))
    follower = memory.follower
    follower._following = True
    try:
        target = memory.ledger.size() + 1
        got: list[int | None] = []
        reader = threading.Thread(target=lambda: got.append(follower._by_follower(target)))
        reader.start()
        ada.write(category="LEARNING", content="The staging database is rebuilt nightly")
        reader.join()
    finally:
        follower._following = False
    assert got == [target]
    assert memory.sync_through(target - 1) == target


#: A writer over a fresh log: the mixed workload in a loop, every acknowledged write
#: printed; at its 40th batch the pass kills the process (SIGKILL) after writing its
#: projection rows, before the transaction commits.
WRITER = """
import os, signal, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import EngramError
from engram.protocol.keyfiles import LogKey
from ledger.compose import create_ledger
from ledger.memory.service import MemoryService
from ledger.memory.state import LoggedEvent
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import make_engine
from tests.contract.test_projection_in_pass import _workload

ledger = create_ledger(
    make_engine(sys.argv[1]),
    LogKey(sys.argv[2], Ed25519PrivateKey.from_private_bytes(bytes(range(32)))),
    policy_key=Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))),
)
memory = MemoryService(ledger, access_log="off")
memory.sync()
hook, batches = memory.in_pass, [0]

def killing(conn, batch):
    announce = hook(conn, batch)
    batches[0] += 1
    if batches[0] == 40:
        print("killing", batch.start, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return announce

ledger.on_commit_tx = killing
mems = []
for name in ("ada", "bob"):
    agent = Agent.generate(name, log_vkey=ledger.vkey, transport=InProcessMemory(memory), state_dir=None)
    agent.register()
    mems.append(AgentMemory(agent))
n = 0
while True:
    _workload(mems[0], mems[1], erase=n % 2 == 1, round_=n)
    print("size", ledger.size(), flush=True)
    n += 1
"""


def test_a_kill_in_the_middle_of_a_batch_leaves_the_projection_equal_to_a_rebuild(db_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", WRITER, db_url, ORIGIN], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
    killed_at = int(next(line for line in run.stdout.splitlines() if line.startswith("killing")).split()[1])
    engine = make_engine(db_url)
    try:
        ledger = Ledger(
            SqlStore(engine),
            LogKey(ORIGIN, Ed25519PrivateKey.from_private_bytes(bytes(range(32)))),
            policy_key=Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))),
            rules=memory_rules(),
        )
        # The batch died with its projection rows: the log and the cursor end before it.
        assert ledger.size() == killed_at
        memory = MemoryService(ledger, access_log="off")
        assert memory.projection.applied_size() <= killed_at
        _caught_up_equals_rebuild(memory)
    finally:
        engine.dispose()
