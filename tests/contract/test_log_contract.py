"""The log contract: every backend (SQLite, PostgreSQL) passes the same suite, including the
attacks found in review, each pinned by a named test that it stays refused (key batches,
small-order keys, chain starts, rewritten rows, corrupted hashes, forks, re-signed
envelopes, the database role)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from alembic import command
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from engram.protocol.errors import (
    CanonicalFormError,
    ConfigError,
    ConflictError,
    KeyStateError,
    LimitExceededError,
    MalformedError,
    OriginMismatchError,
    PrevMismatchError,
    ProofError,
    RejectedEventError,
    SignatureError,
    StorageError,
    UnknownKeyError,
    VerificationError,
    VersionConflictError,
    VersionGapError,
)
from engram.protocol.keyfiles import LogKey
from engram.protocol.signer import AgentSigner
from engram.protocol.wire import StreamState
from ledger.compose import create_ledger, memory_rules
from ledger.inprocess import InProcess
from ledger.log import Ledger, Receipt, Submission
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.db import alembic_config, make_engine
from ledger.storage.store import SqlStore
from ledger.tiles import TILE_WIDTH, export_tiles, tile_path, tiles_for_size
from tests.conftest import PgServer, StepClock
from verifier.event import Envelope, Leaf, NewKey, agent_key_id, body_commitment, sign_event
from verifier.jcs import canonical_bytes
from verifier.keys import KeyHistory
from verifier.merkle import EMPTY_ROOT, leaf_hash, root_from_leaf_hashes, verify_consistency, verify_inclusion
from verifier.note import VerifierKey, verify_checkpoint
from verifier.replay import LogReplay

ROOT = Path(__file__).resolve().parents[2]


PACT = {"pact": "p", "result": "fulfilled", "quality": 90}

#: Valid bodies of two record kinds, for tests that need many events on a few streams.
BODIES = (
    lambda i: ("commitment", {"promise": f"promise {i}"}),
    lambda i: ("eval.outcome", {"eval": f"e-{i}", "result": "pass", "score": i % 101}),
)


def replay(ledger: Ledger) -> KeyHistory:
    """Audit the whole log with the trusted core only (verifier.replay.LogReplay): every leaf,
    key, stream chain and timestamp; the latest checkpoint's root; and every checkpoint the
    log ever signed is a prefix of the replayed tree."""
    vkey = VerifierKey.parse(ledger.vkey)
    cp = verify_checkpoint(ledger.latest_checkpoint().note, vkey)
    sizes = set(ledger.store.checkpoint_sizes())
    audit = LogReplay(cp.origin)
    audit.remember_root()
    for _, raw in ledger.store.leaves_iter(0, cp.size):
        audit.add(raw)
        if audit.size in sizes:
            audit.remember_root()
    audit.check_checkpoint(cp)
    for size in sizes:
        audit.check_consistency_with(verify_checkpoint(ledger.store.checkpoint(size).note, vkey))
    return audit.keys


def test_init_signs_the_empty_checkpoint_and_registers_the_policy_agent(ledger: Ledger) -> None:
    assert ledger.store.checkpoint(0) is not None
    assert (
        verify_checkpoint(ledger.store.checkpoint(0).note, VerifierKey.parse(ledger.vkey)).root == EMPTY_ROOT
    )
    assert ledger.size() == 1
    history = replay(ledger)
    assert history.active_key("engram.policy") is not None


def test_append_returns_a_receipt_the_verifier_accepts(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    r = alice.append("pact.outcome", {"pact": "p-1", "result": "fulfilled", "quality": 94})
    cp = verify_checkpoint(r.checkpoint, VerifierKey.parse(ledger.vkey))
    assert (r.index, cp.size) == (2, 3)
    verify_inclusion(
        leaf_hash=leaf_hash(r.leaf), index=r.index, size=cp.size, proof=r.proof.hashes, root=cp.root
    )
    assert ledger.store.leaf(r.index) == r.leaf
    salt, body = ledger.store.body(r.index)
    assert body == canonical_bytes({"pact": "p-1", "result": "fulfilled", "quality": 94})
    assert Leaf.from_bytes(r.leaf).envelope.body_commitment == body_commitment(salt, body)
    assert ledger.store.index_of_leaf_hash(r.leaf_hash) == r.index


def test_proofs_verify_for_random_indices_and_sizes(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    agents = [make_agent(f"agent-{i}") for i in range(3)]
    for i in range(70):
        agents[i % 3].append(*BODIES[i % 2](i))
    latest = ledger.size()
    vkey = VerifierKey.parse(ledger.vkey)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        size = data.draw(st.integers(min_value=1, max_value=latest))
        index = data.draw(st.integers(min_value=0, max_value=size - 1))
        proof = ledger.prove_inclusion(index, size)
        cp = verify_checkpoint(proof.checkpoint, vkey)  # every batch signed a checkpoint
        assert cp.size == size
        verify_inclusion(
            leaf_hash=leaf_hash(ledger.store.leaf(index)),
            index=index,
            size=size,
            proof=proof.hashes,
            root=cp.root,
        )
        old = data.draw(st.integers(min_value=0, max_value=size))
        cons = ledger.prove_consistency(old, size)
        old_cp = verify_checkpoint(ledger.store.checkpoint(old).note, vkey)
        verify_consistency(
            old_size=old, new_size=size, old_root=old_cp.root, new_root=cp.root, proof=cons.hashes
        )

    check()
    replay(ledger)


def test_timestamps_strictly_increase_even_when_the_clock_goes_back(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    alice = make_agent("alice")
    stamps = []
    for step in (1000, -5_000_000, 0, 0, -1, 10):
        clock.step = step
        stamps.append(alice.append("commitment", {"promise": f"step {step}"}).timestamp_us)
    assert all(b > a for a, b in itertools.pairwise(stamps))
    replay(ledger)


def test_stored_hash_reads_are_logarithmic(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    alice = make_agent("alice")
    for i in range(40):
        alice.append("commitment", {"promise": f"p{i}"})
    seen: list[int] = []
    original = ledger.store.proof_material

    def counting(coords, sizes):
        seen.append(len(set(coords)))
        return original(coords, sizes)

    ledger.store.proof_material = counting  # type: ignore[method-assign]
    ledger.prove_inclusion(17)
    ledger.prove_consistency(13)
    size = ledger.size()
    bound = 3 * (size.bit_length() + 1)
    assert seen and all(n <= bound for n in seen), (seen, bound)


# -- bad input: typed errors, nothing written ---------------------------------------------


def _snapshot(ledger: Ledger) -> tuple:
    return (ledger.store.counts(), ledger.latest_checkpoint().note, ledger.store.state())


def _event(agent: Agent, kind: str = "pact.outcome", body: dict | None = None, **over: object) -> Submission:
    head = agent.transport.head(agent.agent_id, kind)
    version = over.pop("version", 0 if head is None else head.version + 1)
    prev = over.pop("prev", None if head is None else head.leaf_hash)
    body = body or {"pact": "p", "result": "fulfilled", "quality": 90}
    return agent.signer.event(kind, body, version=version, prev=prev, client_time_us=1)


BAD_INPUTS: list[tuple[str, Callable[[Ledger, Agent, Agent], Submission], type[Exception]]] = [
    ("bad signature", lambda L, a, b: _with(_event(a), signature=bytes(64)), SignatureError),
    ("short signature", lambda L, a, b: _with(_event(a), signature=bytes(10)), MalformedError),
    (
        "non-canonical envelope",
        lambda L, a, b: _with(_event(a), envelope=_event(a).envelope.replace(b'{"agent"', b'{ "agent"')),
        CanonicalFormError,
    ),
    ("float in body", lambda L, a, b: _rebody(_event(a), b'{"quality":94.5}'), CanonicalFormError),
    (
        "body does not match commitment",
        lambda L, a, b: _with(_event(a), body=b'{"pact":"q","quality":90,"result":"fulfilled"}'),
        SignatureError,
    ),
    ("wrong salt size", lambda L, a, b: _with(_event(a), salt=bytes(8)), MalformedError),
    (
        "body over the limit",
        lambda L, a, b: _event(
            a, body={"pact": "p", "result": "fulfilled", "quality": 9, "evidence": "y" * 70_000}
        ),
        LimitExceededError,
    ),
    (
        "unknown key id",
        lambda L, a, b: Agent.generate(
            "alice", log_vkey=L.vkey, transport=InProcess(L, log_only=True)
        ).signer.event("pact.outcome", PACT, version=0, prev=None, client_time_us=1),
        UnknownKeyError,
    ),
    (
        "another agent's key",
        lambda L, a, b: AgentSigner("alice", b.signer.private_key, origin=L.origin).event(
            "pact.outcome", PACT, version=0, prev=None, client_time_us=1
        ),
        KeyStateError,
    ),
    (
        "wrong origin",
        lambda L, a, b: AgentSigner("alice", a.signer.private_key, origin="other.example/log").event(
            "pact.outcome", PACT, version=0, prev=None, client_time_us=1
        ),
        OriginMismatchError,
    ),
    ("version gap", lambda L, a, b: _event(a, version=5, prev="00" * 32), VersionGapError),
    ("version reuse", lambda L, a, b: _event(a, version=0, prev=None), VersionConflictError),
    ("prev mismatch", lambda L, a, b: _event(a, prev="ab" * 32), PrevMismatchError),
    ("unknown kind", lambda L, a, b: _event(a, kind="pact.unknown"), RejectedEventError),
    (
        "reserved agent id",
        lambda L, a, b: AgentSigner("engram.policy", a.signer.private_key, origin=L.origin).event(
            "pact.outcome", PACT, version=0, prev=None, client_time_us=1
        ),
        RejectedEventError,
    ),
    (
        "registration without operator",
        lambda L, a, b: AgentSigner("mallory", Ed25519PrivateKey.generate(), origin=L.origin).registration(
            client_time_us=1
        ),
        RejectedEventError,
    ),
]


def _with(sub: Submission, **changes: bytes) -> Submission:
    fields = {"envelope": sub.envelope, "signature": sub.signature, "body": sub.body, "salt": sub.salt}
    fields.update(changes)
    return Submission(**fields)


def _rebody(sub: Submission, body: bytes) -> Submission:
    return _with(sub, body=body)


@pytest.mark.parametrize(("name", "build", "error"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_gets_a_typed_error_and_writes_nothing(
    ledger: Ledger, make_agent: Callable[..., Agent], name: str, build: Callable, error: type[Exception]
) -> None:
    alice, bob = make_agent("alice"), make_agent("bob")
    alice.append("pact.outcome", {"pact": "p-0", "result": "fulfilled", "quality": 90})
    before = _snapshot(ledger)
    sub = build(ledger, alice, bob)
    with pytest.raises(error) as e:
        ledger.append([sub])
    assert str(e.value)
    if isinstance(e.value, ConflictError):
        assert e.value.head_version == 0 and e.value.next_version == 1
    assert _snapshot(ledger) == before
    # A good event in the same batch is not written either: batches are atomic.
    with pytest.raises(error):
        ledger.append([_event(bob, "commitment", {"promise": "t"}), sub])
    assert _snapshot(ledger) == before
    replay(ledger)


def test_oversized_leaf_is_refused(
    ledger: Ledger,
    make_agent: Callable[..., Agent],
    log_key,
    clock: StepClock,
) -> None:
    alice = make_agent("alice")
    sub = _event(alice, "commitment", {"promise": "t"})
    # The leaf wraps the envelope with index, timestamp and signature, so it is larger.
    strict = Ledger(ledger.store, log_key, clock=clock, max_leaf_bytes=len(sub.envelope) + 10)
    before = _snapshot(ledger)
    with pytest.raises(LimitExceededError) as e:
        strict.append([sub])
    assert e.value.check == "leaf.size"
    assert _snapshot(ledger) == before
    assert ledger.append([sub])[0].version == 0


def test_sdk_retries_when_another_writer_moved_the_stream(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    alice = make_agent("alice")
    twin = Agent(alice.signer, log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True), clock=clock)
    alice.append("commitment", {"promise": "n1"})
    twin.heads["commitment"] = alice.heads["commitment"]
    alice.append("commitment", {"promise": "n2"})
    r = twin.append("commitment", {"promise": "n3"})  # stale head -> conflict -> retried
    assert r.version == 2
    replay(ledger)


def test_key_rotation_and_revocation(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    alice = make_agent("alice")
    old = alice.signer
    alice.append("commitment", {"promise": "x"})
    alice.rotate()
    alice.append("commitment", {"promise": "y"})
    head = ledger.stream_head("alice", "commitment")
    with pytest.raises(KeyStateError, match="rotated"):
        ledger.append(
            [
                old.event(
                    "commitment",
                    {"promise": "p"},
                    version=head.version + 1,
                    prev=head.leaf_hash.hex(),
                    client_time_us=1,
                )
            ]
        )
    ledger.force_revoke("alice", "key leaked")
    with pytest.raises(KeyStateError, match="revoked"):
        alice.append("commitment", {"promise": "z"})
    assert [k.retired_how for k in ledger.store.keys_of("alice")] == ["rotated", "revoked"]
    history = replay(ledger)
    assert history.active_key("alice") is None
    # The agent can be given a new key by the operator afterwards.
    fresh = Agent.generate("alice", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    fresh.register()
    fresh.append("commitment", {"promise": "again"})
    replay(ledger)


# -- storage invariants -------------------------------------------------------------------


@pytest.mark.parametrize("table", ["leaves", "nodes", "checkpoints"])
def test_log_tables_are_append_only_in_the_database(ledger: Ledger, engine: Engine, table: str) -> None:
    column = {"leaves": "leaf", "nodes": "hash", "checkpoints": "note"}[table]
    for sql in (f"UPDATE {table} SET {column} = {column}", f"DELETE FROM {table}"):
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(sql))
    if engine.dialect.name == "postgresql":
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {table} CASCADE"))
    replay(ledger)


def test_alembic_check_finds_no_drift(ledger: Ledger, engine: Engine) -> None:
    cfg = alembic_config()
    with engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.check(cfg)  # raises AutogenerateDiffsDetected on drift


def test_tiles_export_is_complete_and_recomputes_the_root(
    ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    alice = make_agent("alice")
    for i in range(300):
        alice.append(*BODIES[0](i)) if i % 50 else alice.append_many([BODIES[0](i), BODIES[1](i)])
    size = ledger.size()
    summary = export_tiles(ledger.store, tmp_path / "tiles")
    assert summary.size == size
    d = tmp_path / "tiles"
    cp = verify_checkpoint((d / "checkpoint").read_bytes(), VerifierKey.parse(ledger.vkey))
    expected = set()
    for level, n, width in tiles_for_size(size):
        data = (d / tile_path(level, n, width)).read_bytes()
        assert len(data) == 32 * width
        expected.add(tile_path(level, n, width))
    leaf_hashes = []
    for n in range(-(-size // TILE_WIDTH)):
        width = min(TILE_WIDTH, size - n * TILE_WIDTH)
        data = (d / tile_path("entries", n, width)).read_bytes()
        expected.add(tile_path("entries", n, width))
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack(">H", data[pos : pos + 2])
            leaf_hashes.append(leaf_hash(data[pos + 2 : pos + 2 + length]))
            pos += 2 + length
    level0 = b"".join((d / tile_path(0, n, w)).read_bytes() for lv, n, w in tiles_for_size(size) if lv == 0)
    assert level0 == b"".join(leaf_hashes)
    assert root_from_leaf_hashes(leaf_hashes) == cp.root and cp.size == size
    written = {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()} - {
        "checkpoint",
        "engram/checkpoints.jsonl",
    }
    assert written == expected
    assert tile_path(1, 0, 1) in expected  # level 1 exists once a full level-0 tile does


# -- concurrency and crashes ---------------------------------------------------------------


def _every_checkpoint_pair_consistent(ledger: Ledger) -> None:
    vkey = VerifierKey.parse(ledger.vkey)
    for old, new in itertools.pairwise(ledger.store.checkpoint_sizes()):
        o = verify_checkpoint(ledger.store.checkpoint(old).note, vkey)
        n = verify_checkpoint(ledger.store.checkpoint(new).note, vkey)
        verify_consistency(
            old_size=old,
            new_size=new,
            old_root=o.root,
            new_root=n.root,
            proof=ledger.prove_consistency(old, new).hashes,
        )


def _worker(db_url: str, name: str, count: int, *, register: bool) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "tests.contract.worker", db_url, name, str(count)]
    if register:
        args.append("--register")
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_concurrent_processes_append_into_one_gap_free_sequence(ledger: Ledger, db_url: str) -> None:
    workers = [_worker(db_url, f"w{i}", 40, register=True) for i in range(4)]
    acks: list[int] = []
    for w in workers:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        acks += [int(line.split()[1]) for line in out.splitlines()]
    assert len(acks) == 160 and len(set(acks)) == 160
    size = ledger.size()
    assert size == 1 + 4 + 160
    assert ledger.store.counts()["leaves"] == size
    _every_checkpoint_pair_consistent(ledger)
    replay(ledger)


@pytest.mark.slow
def test_a_killed_writer_loses_no_acknowledged_entry(ledger: Ledger, db_url: str) -> None:
    w = _worker(db_url, "crashy", 100_000, register=True)
    acked: list[tuple[int, str]] = []
    deadline = time.monotonic() + 60
    assert w.stdout is not None
    while len(acked) < 60 and time.monotonic() < deadline:
        line = w.stdout.readline()
        if not line:
            break
        _, idx, h = line.split()
        acked.append((int(idx), h))
    os.kill(w.pid, signal.SIGKILL)  # no clean shutdown: mid-transaction at any point
    w.wait(timeout=30)
    assert len(acked) >= 60
    for idx, h in acked:
        assert leaf_hash(ledger.store.leaf(idx)).hex() == h
    state = ledger.store.state()
    cp = ledger.latest_checkpoint()
    assert state.size == cp.size == ledger.store.counts()["leaves"]
    replay(ledger)  # stored hashes and the checkpoint agree with the leaves
    # And the log keeps working after the crash.
    bob = Agent.generate("bob", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    bob.register()
    assert bob.append("commitment", {"promise": "after the crash"}).index == cp.size + 1


@pytest.mark.slow
def test_killing_a_process_mid_batch_loses_no_acknowledged_entry_of_any_process(
    ledger: Ledger, db_url: str
) -> None:
    """The sequencer under faults (issue 14): three processes of eight threads each share
    batches through their group commits; one is SIGKILLed while its batches are in flight.
    Every entry any process acknowledged is in the log at its index with its hash, indices
    are dense, every pair of checkpoints is consistent, and the log goes on."""

    def start(name: str, count: int) -> subprocess.Popen[str]:
        args = [sys.executable, "-m", "tests.contract.worker", db_url, name, str(count), "--register"]
        return subprocess.Popen(
            [*args, "--threads", "8"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    victim = start("victim", 100_000)
    others = [start(f"steady{i}", 15) for i in range(2)]
    acked: list[tuple[int, str]] = []
    assert victim.stdout is not None
    deadline = time.monotonic() + 120
    while len(acked) < 80 and time.monotonic() < deadline:
        line = victim.stdout.readline()
        if not line:
            break
        _, idx, h = line.split()
        acked.append((int(idx), h))
    os.kill(victim.pid, signal.SIGKILL)
    rest, _ = victim.communicate(timeout=30)  # acks written before the kill
    acked += [(int(i), h) for _, i, h in (ln.split() for ln in rest.splitlines() if ln.startswith("ack "))]
    assert len(acked) >= 80
    for w in others:
        out, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
        acked += [(int(i), h) for _, i, h in (ln.split() for ln in out.splitlines())]
    indices = [i for i, _ in acked]
    assert len(indices) == len(set(indices))
    for idx, h in acked:
        assert leaf_hash(ledger.store.leaf(idx)).hex() == h
    state = ledger.store.state()
    cp = ledger.latest_checkpoint()
    assert state.size == cp.size == ledger.store.counts()["leaves"]
    assert [i for i, _, _ in ledger.store.leaves_with_hashes(0, cp.size)] == list(range(cp.size))
    _every_checkpoint_pair_consistent(ledger)
    replay(ledger)
    bob = Agent.generate("bob", log_vkey=ledger.vkey, transport=InProcess(ledger, log_only=True))
    bob.register()
    assert bob.append("commitment", {"promise": "after the crash"}).index == cp.size + 1


def test_node_reads_are_index_lookups_not_scans(ledger: Ledger, engine: Engine) -> None:
    from ledger.storage.store import nodes_query

    query = nodes_query([(0, 5), (0, 9), (3, 1), (7, 0)])
    sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            plan = " ".join(str(row) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
            assert "SCAN nodes" not in plan and "USING INDEX" in plan, plan
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")  # a tiny table would be scanned anyway
            plan = " ".join(str(row) for row in conn.exec_driver_sql("EXPLAIN " + sql))
            assert "Seq Scan" not in plan, plan


def test_tiles_update_brings_a_mirror_up_to_date(
    ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """`engram export tiles --update` (issue 13): a mirror at an older size, brought up to date,
    is byte for byte a fresh export, writing only what changed; a directory that is not a
    mirror of this log is refused and left as it was."""
    alice = make_agent("alice")
    for i in range(300):
        alice.append(*BODIES[0](i))
    mirror = tmp_path / "mirror"
    export_tiles(ledger.store, mirror)
    for i in range(300, 650):
        alice.append(*BODIES[0](i))
    summary = export_tiles(ledger.store, mirror, update=(ledger.vkey, ledger.root_at))
    fresh = tmp_path / "fresh"
    full = export_tiles(ledger.store, fresh)
    assert summary.size == full.size == ledger.size()
    assert summary.entry_bundles < full.entry_bundles and summary.hash_tiles < full.hash_tiles
    for p in fresh.rglob("*"):
        if p.is_file():
            assert (mirror / p.relative_to(fresh)).read_bytes() == p.read_bytes(), p
    # up to date already: only the tail is rewritten, and the result is unchanged
    export_tiles(ledger.store, mirror, update=(ledger.vkey, ledger.root_at))
    assert (mirror / "checkpoint").read_bytes() == (fresh / "checkpoint").read_bytes()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not a mirror")
    with pytest.raises(ConfigError, match="no checkpoint"):
        export_tiles(ledger.store, other, update=(ledger.vkey, ledger.root_at))
    (other / "checkpoint").write_bytes(b"example.org/other\n3\nAAAA\n\n")
    with pytest.raises(ConfigError, match="not a checkpoint of this log"):
        export_tiles(ledger.store, other, update=(ledger.vkey, ledger.root_at))
    assert sorted(x.name for x in other.iterdir()) == ["checkpoint", "notes.txt"]
    with pytest.raises(ConfigError, match="--update"):
        export_tiles(ledger.store, mirror)


def test_group_commit_batches_concurrent_appends_and_refuses_a_bad_one_alone(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """Concurrent single appends share transactions (fewer checkpoints than events), every
    caller gets its own verified receipt, indices stay dense, streams stay exact; a bad event
    among them is refused alone with its typed error and writes nothing."""
    import threading

    agents = [make_agent(f"gc{i}") for i in range(16)]
    start = ledger.size()
    cp_before = len(list(ledger.store.checkpoints_upto(start)))
    errors: list[BaseException] = []
    receipts: list[int] = []
    lock = threading.Lock()
    go = threading.Barrier(len(agents) + 1)

    def work(a: Agent) -> None:
        go.wait()
        for i in range(12):
            try:
                r = a.append(*BODIES[0](i))  # the SDK verifies the receipt and its proof
            except BaseException as e:
                with lock:
                    errors.append(e)
            else:
                with lock:
                    receipts.append(r.index)

    def bad() -> None:
        go.wait()
        kind, body = BODIES[1](0)  # a stream no other thread writes; version 0, but a zeroed signature
        forged = agents[0].signer.event(kind, body, version=0, prev=None, client_time_us=1)
        sub = dataclasses.replace(forged, signature=bytes(64))
        try:
            ledger.append([sub])
        except BaseException as e:
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=work, args=(a,)) for a in agents[1:]] + [threading.Thread(target=bad)]
    threads.append(threading.Thread(target=work, args=(agents[0],)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 1 and isinstance(errors[0], VerificationError), errors
    assert sorted(receipts) == list(range(start, start + 16 * 12))
    assert ledger.size() == start + 16 * 12
    cps = len(list(ledger.store.checkpoints_upto(ledger.size()))) - cp_before
    assert cps < 16 * 12, cps  # batches formed: one checkpoint per batch, not per event
    assert ledger.group_commit is not None and ledger.group_commit.events >= 16 * 12 - cps
    replay(ledger)  # every stream's chain and key history still replays


IDENTITY_POINT = bytes([1]) + bytes(31)


# A signature that verifies for every message under the identity key: R = B, S = 1.
BASE_POINT = bytes([0x58]) + bytes([0x66]) * 31


UNIVERSAL_SIG = BASE_POINT + (1).to_bytes(32, "little")


def _active_in_db(ledger: Ledger, agent: str) -> list[str]:
    return [k.key_id for k in ledger.store.keys_of(agent) if k.retired_at is None]


def test_rotate_then_revoke_in_one_batch_stores_the_revocation(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    k2 = Ed25519PrivateKey.generate()
    rotate = alice.signer.event("key.rotated", {}, version=0, prev=None, client_time_us=1, new_key=k2)
    revoke = AgentSigner("alice", k2, origin=ledger.origin).event(
        "key.revoked", {"reason": "test"}, version=0, prev=None, client_time_us=1
    )
    ledger.append([rotate, revoke])
    assert _active_in_db(ledger, "alice") == []
    with pytest.raises(KeyStateError, match="revoked"):
        ledger.append(
            [
                AgentSigner("alice", k2, origin=ledger.origin).event(
                    "commitment", {"promise": "p"}, version=0, prev=None, client_time_us=1
                )
            ]
        )
    assert replay(ledger).active_key("alice") is None


def test_register_then_revoke_in_one_batch(ledger: Ledger) -> None:
    k = Ed25519PrivateKey.generate()
    signer = AgentSigner("bob", k, origin=ledger.origin)
    ledger.append(
        [
            signer.registration(client_time_us=1),
            signer.event("key.revoked", {}, version=0, prev=None, client_time_us=1),
        ],
        operator=True,
    )
    assert _active_in_db(ledger, "bob") == []
    assert replay(ledger).active_key("bob") is None


def test_register_then_rotate_in_one_batch_leaves_one_active_key(ledger: Ledger) -> None:
    k1, k2 = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    signer = AgentSigner("carol", k1, origin=ledger.origin)
    ledger.append(
        [
            signer.registration(client_time_us=1),
            signer.event("key.rotated", {}, version=0, prev=None, client_time_us=1, new_key=k2),
        ],
        operator=True,
    )
    k2_id = agent_key_id(k2.public_key().public_bytes_raw())
    assert _active_in_db(ledger, "carol") == [k2_id]
    assert replay(ledger).active_key("carol") == k2_id


def _envelope_bytes(obj: dict) -> bytes:
    return canonical_bytes(obj)


@pytest.mark.parametrize("kind", ["key.rotated", "key.registered"])
def test_small_order_keys_are_refused(ledger: Ledger, make_agent: Callable[..., Agent], kind: str) -> None:
    alice = make_agent("alice")
    weak = NewKey(key_id=agent_key_id(IDENTITY_POINT), public_key=IDENTITY_POINT, pop=UNIVERSAL_SIG)
    body = canonical_bytes({})
    env = {
        "v": 1,
        "origin": ledger.origin,
        "agent": "alice" if kind == "key.rotated" else "mallory",
        "key_id": alice.signer.key_id if kind == "key.rotated" else weak.key_id,
        "kind": kind,
        "version": 0,
        "client_time_us": 1,
        "body_commitment": body_commitment(bytes(16), body),
        "new_key": weak.to_obj(),
    }
    raw = _envelope_bytes(env)
    sig = (
        alice.signer.private_key.sign(b"engram/event/v1\x00" + raw)
        if kind == "key.rotated"
        else UNIVERSAL_SIG
    )
    before = _snapshot(ledger)
    with pytest.raises(MalformedError) as e:
        ledger.append([Submission(envelope=raw, signature=sig, body=body, salt=bytes(16))], operator=True)
    assert e.value.check == "key.small_order"
    assert _snapshot(ledger) == before


def test_prev_null_at_version_zero_is_refused(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    alice = make_agent("alice")
    good = alice.signer.event("commitment", {"promise": "x"}, version=0, prev=None, client_time_us=1)
    obj = json.loads(good.envelope)
    obj["prev"] = None
    raw = canonical_bytes(obj)
    sig = alice.signer.private_key.sign(b"engram/event/v1\x00" + raw)
    before = _snapshot(ledger)
    with pytest.raises(MalformedError) as e:
        ledger.append([Submission(envelope=raw, signature=sig, body=good.body, salt=good.salt)])
    assert e.value.check == "envelope.prev"
    assert _snapshot(ledger) == before
    # The same malleability at the leaf level: a second encoding of a logged leaf is refused.
    r = alice.append("commitment", {"promise": "y"})
    leaf = json.loads(r.leaf)
    leaf["event"]["prev"] = None
    with pytest.raises(VerificationError):
        Leaf.from_bytes(canonical_bytes(leaf))


def test_replacing_rows_is_refused_by_the_database(ledger: Ledger, engine: Engine) -> None:
    sqlite = engine.dialect.name == "sqlite"
    statements = {
        "leaves": "INSERT OR REPLACE INTO leaves SELECT * FROM leaves WHERE idx = 0"
        if sqlite
        else "INSERT INTO leaves SELECT * FROM leaves WHERE idx = 0 ON CONFLICT (idx) DO UPDATE SET leaf = 'x'",
        "nodes": "INSERT OR REPLACE INTO nodes (level, idx, hash) VALUES (0, 0, x'00')"
        if sqlite
        else "INSERT INTO nodes VALUES (0, 0, '\\x00') ON CONFLICT (level, idx) DO UPDATE SET hash = EXCLUDED.hash",
        "checkpoints": "REPLACE INTO checkpoints (size, root, note, signed_at_us) VALUES (0, x'00', x'00', 1)"
        if sqlite
        else "INSERT INTO checkpoints VALUES (0, '\\x00', '\\x00', 1) ON CONFLICT (size) DO UPDATE SET note = EXCLUDED.note",
    }
    for sql in statements.values():
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(sql))
    replay(ledger)


def _tamper_node(engine: Engine) -> None:
    """What an attacker who owns the tables can do: drop the guard, rewrite a stored hash."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.execute(text("DROP TRIGGER nodes_no_update"))
        else:
            conn.execute(text("ALTER TABLE nodes DISABLE TRIGGER nodes_append_only"))
        # Node (1, 0) covers leaves 0-1: part of the tree border at size 3.
        conn.execute(text("UPDATE nodes SET hash = :h WHERE level = 1 AND idx = 0"), {"h": bytes(32)})


def test_the_log_refuses_to_sign_over_corrupted_hashes(
    ledger: Ledger, make_agent: Callable[..., Agent], engine: Engine
) -> None:
    """A process that opens a database whose stored hashes were rewritten refuses to sign
    over them or to prove from them. The process that committed the tree keeps extending
    the tree it committed (its in-memory frontier, issue 14), so it never signs a checkpoint
    inconsistent with one it signed either."""
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "n1"})
    _tamper_node(engine)
    restarted = Ledger(
        SqlStore(engine), ledger.log_key, clock=ledger.clock, policy_key=ledger.policy_key, rules=ledger.rules
    )
    head = ledger.stream_head("alice", "commitment")
    assert head is not None
    n2 = alice.signer.event(
        "commitment", {"promise": "n2"}, version=head.version + 1, prev=head.leaf_hash.hex(), client_time_us=1
    )
    before = _snapshot(ledger)
    with pytest.raises(StorageError, match="disagree"):
        restarted.append([n2])
    assert _snapshot(ledger) == before
    with pytest.raises(StorageError, match="disagree"):
        restarted.prove_consistency(1)
    receipt = ledger.append([n2])[0]
    assert receipt.index == before[2].size
    replay(ledger)  # every checkpoint, the new one too, is a prefix of the leaves' tree


class _ForkingTransport:
    """Sends the first submission to one log and later ones to a fork with the same key."""

    def __init__(self, first: Ledger, fork: Ledger) -> None:
        self.first, self.fork, self.calls = InProcess(first, log_only=True), InProcess(fork, log_only=True), 0

    def _target(self) -> InProcess:
        return self.first if self.calls <= 1 else self.fork

    def submit(self, subs: Sequence[Submission], *, operator: bool = False) -> list[Receipt]:
        self.calls += 1
        return self._target().submit(subs, operator=operator)

    def head(self, agent: str, kind: str) -> StreamState | None:
        return self._target().head(agent, kind)

    def consistency(self, old: int, new: int) -> Sequence[bytes]:
        return self._target().consistency(old, new)


def test_the_sdk_detects_a_forked_log(
    ledger: Ledger,
    backend: str,
    tmp_path: Path,
    log_key: LogKey,
    clock: StepClock,
    request: pytest.FixtureRequest,
) -> None:
    fork_url = (
        f"sqlite:///{tmp_path / 'fork.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_server").new_database()
    )
    fork = create_ledger(make_engine(fork_url), log_key, clock=clock)  # same key, other history
    key = Ed25519PrivateKey.generate()
    fork.append([AgentSigner("alice", key, origin=fork.origin).registration(client_time_us=1)], operator=True)
    filler = AgentSigner("filler", Ed25519PrivateKey.generate(), origin=fork.origin)
    fork.append([filler.registration(client_time_us=1)], operator=True)  # the fork grows past the anchor
    agent = Agent(
        AgentSigner("alice", key, origin=ledger.origin),
        log_vkey=ledger.vkey,
        transport=_ForkingTransport(ledger, fork),
        clock=clock,
    )
    agent.register()  # on the first log: its checkpoint becomes the agent's anchor
    with pytest.raises(ProofError):
        agent.append("commitment", {"promise": "on the fork"})


def test_policy_agent_cannot_be_force_revoked_and_a_foreign_policy_key_is_refused(
    ledger: Ledger, log_key: LogKey, clock: StepClock
) -> None:
    with pytest.raises(RejectedEventError):
        ledger.force_revoke("engram.policy", "oops")
    from engram.protocol.errors import ConfigError

    with pytest.raises(ConfigError, match="policy"):
        Ledger(ledger.store, log_key, clock=clock, policy_key=Ed25519PrivateKey.generate())


def test_envelope_of_a_logged_event_signed_again_by_another_agent_is_refused(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice, bob = make_agent("alice"), make_agent("bob")
    r = alice.append("commitment", {"promise": "x"})
    env = Leaf.from_bytes(r.leaf).envelope
    # bob re-signs alice's envelope: his key does not belong to alice.
    forged = Envelope(
        **{**{f: getattr(env, f) for f in env.__slots__}, "version": 1, "prev": r.leaf_hash.hex()}
    )
    salt, body = ledger.store.body(r.index)
    with pytest.raises(VerificationError):
        ledger.append(
            [
                Submission(
                    envelope=forged.canonical(),
                    signature=sign_event(forged, bob.signer.private_key),
                    body=body,
                    salt=salt,
                )
            ]
        )


@pytest.mark.postgres
def test_postgres_service_role_can_append_but_not_rewrite(
    pg_server: PgServer, log_key: LogKey, clock: StepClock, policy_key: Ed25519PrivateKey
) -> None:
    """The PostgreSQL role split of docs/tour.md: the service role cannot touch the guards."""
    import secrets

    role = f"engram_app_{secrets.token_hex(4)}"
    db_url = pg_server.new_database()
    owner = make_engine(db_url)
    create_ledger(owner, log_key, clock=clock, policy_key=policy_key)
    with owner.begin() as conn:
        conn.execute(text(f'CREATE ROLE "{role}" LOGIN'))
        conn.execute(text(GRANTS.format(role=role)))
    app_engine = make_engine(db_url.replace("postgres@", f"{role}@", 1))
    try:
        app = Ledger(SqlStore(app_engine), log_key, clock=clock, rules=memory_rules())
        agent = Agent.generate(
            "alice", log_vkey=app.vkey, transport=InProcess(app, log_only=True), clock=clock
        )
        agent.register()
        agent.append("commitment", {"promise": "by the service role"})
        memory = MemoryService(app)
        agent.transport = InProcessMemory(memory)
        AgentMemory(agent).write(category="LEARNING", content="written through the service role")
        assert memory.rebuild() == memory.digest()
        for sql in (
            "ALTER TABLE leaves DISABLE TRIGGER leaves_append_only",
            "DROP TRIGGER nodes_append_only ON nodes",
            "UPDATE leaves SET leaf = leaf",
        ):
            with (
                pytest.raises(DBAPIError, match=r"must be owner|permission denied"),
                app_engine.begin() as conn,
            ):
                conn.execute(text(sql))
        # DELETE on checkpoints reaches only rows ahead of the log (issue 25, finding 10)
        with pytest.raises(DBAPIError, match="append-only"), app_engine.begin() as conn:
            conn.execute(text("DELETE FROM checkpoints WHERE size = 1"))
        replay(app)
    finally:
        app_engine.dispose()
        with owner.begin() as conn:
            conn.execute(text(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"'))
            conn.execute(text(f'DROP ROLE "{role}"'))
        owner.dispose()


GRANTS = """
GRANT SELECT, INSERT ON leaves, nodes, checkpoints TO "{role}";
GRANT DELETE ON checkpoints TO "{role}";
GRANT SELECT, INSERT, UPDATE ON log_state, stream_heads, agent_keys TO "{role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON bodies TO "{role}";
GRANT SELECT ON alembic_version TO "{role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON mem_items, mem_sessions, mem_cursor, mem_vectors TO "{role}";
"""
