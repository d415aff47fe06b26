"""The log never trusts a derived row for a security decision (issue 15). On both backends:

* key state comes from the log's key entries, so ``UPDATE agent_keys SET retired_at = NULL``
  does not bring a revoked key back: its events are refused, requests find no active key,
  and the append names the changed row and column;
* a checkpoint row counts only if the log key signed it: a row INSERTed past the end (what a
  role with only SELECT and INSERT can do) is never served;
* ``log_state.last_timestamp_us`` must be the last entry's own timestamp: set into the future,
  the log refuses to stamp from it, in a warm process and in a fresh one;
* the signer keeps its own record of the last checkpoint it signed (ledger.signed_head): a
  consistently rolled-back database cannot make it sign a second checkpoint of that size.

Nothing is written on any refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from engram.client.sdk import Agent
from engram.protocol.errors import LogIntegrityError
from engram.protocol.wire import Submission
from ledger.compose import memory_rules
from ledger.log import Ledger
from ledger.signed_head import ForkRefusedError, SignedHead, SignedHeadRecord
from ledger.storage.store import SqlStore, StoredCheckpoint
from tests.conftest import StepClock
from verifier.keys import KeyRecord
from verifier.merkle import range_nodes


def _owner(engine: Engine, sql: str, params: dict[str, object] | None = None) -> None:
    """What whoever owns the tables can do: the append-only guards off, then ``sql``."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            names = [
                r[0] for r in conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
            ]
            for name in names:
                if name.endswith(("_no_update", "_no_delete", "_no_replace")):
                    conn.execute(text(f"DROP TRIGGER {name}"))
        else:
            for table in (
                "leaves",
                "bodies",
                "nodes",
                "checkpoints",
                "stream_heads",
                "agent_keys",
                "log_state",
            ):
                conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER ALL"))
        conn.execute(text(sql), params or {})


def _event(ledger: Ledger, agent: Agent, clock: StepClock, body: dict[str, object]) -> Submission:
    """The agent's next commitment, signed against the stream head the database shows."""
    head = ledger.stream_head(agent.agent_id, "commitment")
    return agent.signer.event(
        "commitment",
        body,
        version=0 if head is None else head.version + 1,
        prev=None if head is None else head.leaf_hash.hex(),
        client_time_us=clock(),
    )


def _fresh(ledger: Ledger, clock: StepClock, record: Path | None = None) -> Ledger:
    """Another process on the same database (empty caches, no frontier)."""
    return Ledger(
        SqlStore(ledger.store.engine), ledger.log_key, clock=clock, rules=memory_rules(), signed_head=record
    )


def test_an_unrevoked_key_stays_revoked(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    mallory_copy = make_agent("alice")
    mallory_copy.append("commitment", {"promise": "before the theft was noticed"})
    stolen = mallory_copy.signer.key_id
    mallory_copy.revoke("key stolen")
    assert ledger.store.active_key_id("alice") is None
    # One UPDATE on the mutable key table, as the issue measured it.
    with ledger.store.engine.begin() as conn:
        conn.execute(
            text("UPDATE agent_keys SET retired_at = NULL, retired_how = NULL WHERE key_id = :k"),
            {"k": stolen},
        )
    # Requests: the key state comes from the log, not the table.
    assert ledger.store.active_key_id("alice") is None
    assert [k.retired_how for k in ledger.store.keys_of("alice")] == ["revoked"]
    for process in (ledger, _fresh(ledger, clock)):
        size = process.size()
        with pytest.raises(LogIntegrityError) as e:
            process.append([_event(process, mallory_copy, clock, {"promise": "signed with the stolen key"})])
        assert e.value.check == "state.agent_keys"
        assert f"agent_keys row {stolen}: retired_at is None, the log says" in str(e.value)
        assert process.size() == size


def test_a_changed_public_key_row_is_named(ledger: Ledger, make_agent: Callable[..., Agent]) -> None:
    alice = make_agent("alice")
    with ledger.store.engine.begin() as conn:
        conn.execute(text("UPDATE agent_keys SET public_key = :pk WHERE agent = 'alice'"), {"pk": bytes(32)})
    size = ledger.size()
    with pytest.raises(LogIntegrityError, match=f"agent_keys row {alice.signer.key_id}: public_key is"):
        alice.append("commitment", {"promise": "after the swap"})
    assert ledger.size() == size
    assert ledger.store.public_key(alice.signer.key_id) is None  # the row is not the key its id names


def test_a_checkpoint_row_inserted_past_the_end_is_never_served(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "one"})
    real = ledger.latest_checkpoint()
    with ledger.store.engine.begin() as conn:  # INSERT is all it takes (no owner rights)
        conn.execute(
            text("INSERT INTO checkpoints (size, root, note, signed_at_us) VALUES (:s, :r, :n, 0)"),
            {"s": real.size + 1000, "r": bytes(32), "n": b"not a note"},
        )
    for process in (ledger, _fresh(ledger, clock)):
        assert process.latest_checkpoint() == real
        assert process.store.latest_cosigned()[0] == real
        assert process.store.checkpoint(real.size + 1000) is None
        assert [cp.size for cp in process.store.checkpoints_upto(real.size + 1000)][-1] == real.size
        process.prove_inclusion(0, real.size)
    receipt = alice.append("commitment", {"promise": "the log carries on"})
    assert ledger.latest_checkpoint().size == receipt.index + 1


def test_a_forged_checkpoint_at_the_next_size_is_not_served(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    alice = make_agent("alice")
    real = ledger.latest_checkpoint()
    other = StoredCheckpoint(size=real.size + 1, root=bytes(32), note=real.note, signed_at_us=0)
    with ledger.store.engine.begin() as conn:  # a real note, but of another size and root
        conn.execute(
            text("INSERT INTO checkpoints (size, root, note, signed_at_us) VALUES (:s, :r, :n, 0)"),
            {"s": other.size, "r": other.root, "n": other.note},
        )
    assert _fresh(ledger, clock).latest_checkpoint() == real
    # issue 25, finding 10: the next append's checkpoint takes its place (it was a stop for good)
    receipt = alice.append("commitment", {"promise": "neither blocked nor forked"})
    latest = ledger.latest_checkpoint()
    assert latest.size == receipt.index + 1 and latest.root != other.root
    assert _fresh(ledger, clock).latest_checkpoint() == latest


def test_forged_checkpoint_rows_ahead_are_skipped(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock
) -> None:
    """Regression (issue 25, finding 10): one checkpoint row INSERTed at a future size stopped
    every append for good once the log reached that size (a StorageError without a check),
    and eight such rows stopped the ledger from opening. A role with SELECT and INSERT could
    do it. The reads skip rows ahead of the log, and the append replaces the one at its size;
    a row the log has reached still cannot be deleted."""
    alice = make_agent("alice")
    real = ledger.latest_checkpoint()
    with ledger.store.engine.begin() as conn:
        for k in range(1, 13):
            conn.execute(
                text("INSERT INTO checkpoints (size, root, note, signed_at_us) VALUES (:s, :r, :n, 0)"),
                {"s": real.size + k, "r": bytes([k]) * 32, "n": b"forged note %d" % k},
            )
    fresh = _fresh(ledger, clock)
    assert fresh.latest_checkpoint() == real  # it opens and serves the real one
    for i in range(14):  # through every forged size and past them
        fresh.append([_event(fresh, alice, clock, {"promise": f"entry {i}"})])
    latest = fresh.latest_checkpoint()
    assert latest.size == real.size + 14
    for size in range(real.size + 1, latest.size + 1):
        assert fresh.store.checkpoint(size) is not None  # each one is now a checkpoint the log signed
    with pytest.raises(Exception, match="append-only"), ledger.store.engine.begin() as conn:
        conn.execute(text("DELETE FROM checkpoints WHERE size = :s"), {"s": real.size})  # still refused


@pytest.mark.parametrize("warm", [True, False], ids=["warm-process", "fresh-process"])
def test_a_future_last_timestamp_is_refused(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock, warm: bool
) -> None:
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "now"})
    with ledger.store.engine.begin() as conn:
        conn.execute(text("UPDATE log_state SET last_timestamp_us = 4102444800000000"))  # 2100
    process = ledger if warm else _fresh(ledger, clock)
    size = process.size()
    with pytest.raises(LogIntegrityError) as e:
        process.append([_event(process, alice, clock, {"promise": "stamped in 2100?"})])
    assert e.value.check == "state.last_timestamp"
    assert "log_state.last_timestamp_us is 4102444800000000" in str(e.value)
    assert process.size() == size


def _roll_back_last_entry(ledger: Ledger) -> None:
    """A consistent rollback of the last entry by whoever owns the tables: its leaf, body,
    nodes, checkpoint and stream head gone, the state row set back."""
    engine = ledger.store.engine
    n = ledger.size()
    last = n - 1
    keep = set(range_nodes(0, last))
    with engine.connect() as conn:
        prev_ts = conn.execute(
            text("SELECT timestamp_us FROM leaves WHERE idx = :i"), {"i": last - 1}
        ).scalar_one()
        agent, kind, version = conn.execute(
            text("SELECT agent, kind, version FROM leaves WHERE idx = :i"), {"i": last}
        ).one()
        prev = conn.execute(
            text("SELECT idx, leaf_hash FROM leaves WHERE agent = :a AND kind = :k AND version = :v"),
            {"a": agent, "k": kind, "v": version - 1},
        ).one_or_none()
        doomed = [
            (lv, i)
            for lv, i in conn.execute(text("SELECT level, idx FROM nodes"))
            if (i + 1) << lv > last and (lv, i) not in keep
        ]
    _owner(engine, "DELETE FROM bodies WHERE idx = :i", {"i": last})
    _owner(engine, "DELETE FROM leaves WHERE idx = :i", {"i": last})
    for lv, i in doomed:
        _owner(engine, "DELETE FROM nodes WHERE level = :l AND idx = :i", {"l": lv, "i": i})
    _owner(engine, "DELETE FROM checkpoints WHERE size = :s", {"s": n})
    _owner(engine, "UPDATE log_state SET size = :s, last_timestamp_us = :t", {"s": last, "t": prev_ts})
    if prev is None:
        _owner(engine, "DELETE FROM stream_heads WHERE agent = :a AND kind = :k", {"a": agent, "k": kind})
    else:
        _owner(
            engine,
            "UPDATE stream_heads SET version = :v, leaf_hash = :h, idx = :i WHERE agent = :a AND kind = :k",
            {"v": version - 1, "h": prev[1], "i": prev[0], "a": agent, "k": kind},
        )


def test_a_rolled_back_database_cannot_make_the_signer_fork(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock, tmp_path: Path
) -> None:
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "kept"})
    alice.append("commitment", {"promise": "rolled back later"})
    signed = ledger.latest_checkpoint()
    record = tmp_path / "log.key.signed-head"
    assert SignedHeadRecord(record, ledger.origin).read() == SignedHead(signed.size, signed.root)
    _roll_back_last_entry(ledger)
    # Without the record, the rolled-back database is self-consistent: a fresh process
    # would sign a second checkpoint of that size with another root.
    assert _fresh(ledger, clock).latest_checkpoint().size == signed.size - 1
    process = _fresh(ledger, clock, record)
    with pytest.raises(ForkRefusedError) as e:
        process.append([_event(process, alice, clock, {"promise": "a different second entry"})])
    assert e.value.check == "signer.fork"
    assert f"already signed a checkpoint of size {signed.size}" in str(e.value)
    assert process.size() == signed.size - 1


def test_a_record_behind_the_database_is_proven_and_advanced(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock, tmp_path: Path
) -> None:
    alice = make_agent("alice")
    other_host = tmp_path / "other-host.signed-head"
    early = ledger.latest_checkpoint()
    SignedHeadRecord(other_host, ledger.origin).advance(SignedHead(early.size, early.root))
    for i in range(5):
        alice.append("commitment", {"promise": f"appended elsewhere {i}"})
    process = _fresh(ledger, clock, other_host)
    receipt = process.append([_event(process, alice, clock, {"promise": "appended here"})])[0]
    assert SignedHeadRecord(other_host, ledger.origin).read() == SignedHead(
        receipt.index + 1, process.latest_checkpoint().root
    )
    # A record this log's tree does not extend (another root at that size) is a fork.
    SignedHeadRecord(other_host, ledger.origin).advance(SignedHead(receipt.index + 2 + 100, bytes(32)))
    with pytest.raises(ForkRefusedError):
        process.append([_event(process, alice, clock, {"promise": "refused"})])


@pytest.mark.parametrize(
    "content",
    [b"", b"engram-signed-head/v1\nother/origin\n3\n" + b"A" * 43 + b"=\n", b"\xff" * 10, b"x" * 5000],
    ids=["empty", "another-log", "binary", "oversized"],
)
def test_an_unreadable_record_stops_the_signer(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock, tmp_path: Path, content: bytes
) -> None:
    alice = make_agent("alice")
    record = tmp_path / "log.key.signed-head"
    record.write_bytes(content)
    process = _fresh(ledger, clock, record)
    size = process.size()
    with pytest.raises(ForkRefusedError) as e:
        process.append([_event(process, alice, clock, {"promise": "refused"})])
    assert e.value.check == "signer.record"
    assert process.size() == size


def test_the_key_records_from_the_log_match_the_table_in_honest_use(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    alice = make_agent("alice")
    alice.rotate()
    alice.append("commitment", {"promise": "with the new key"})
    bob = make_agent("bob")
    bob.revoke("done")
    with ledger.store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT key_id, agent, public_key, added_at, retired_at, retired_how FROM agent_keys")
        )
        table = {
            r[0]: KeyRecord(
                key_id=r[0],
                agent=r[1],
                public_key=bytes(r[2]),
                added_at=r[3],
                retired_at=r[4],
                retired_how=r[5],
            )
            for r in rows
        }
    for agent in ("alice", "bob"):
        assert ledger.store.keys_of(agent) == sorted(
            (k for k in table.values() if k.agent == agent), key=lambda k: k.added_at
        )
    assert ledger.store.active_key_id("alice") == alice.signer.key_id
    assert ledger.store.active_key_id("bob") is None


def test_missing_record_refuses_to_sign(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock, tmp_path: Path
) -> None:
    """Regression (issue 25, finding 8): with the signer's record deleted, a consistently
    rolled-back database made the log sign a second checkpoint of the same size. A missing
    record while the log holds entries now stops signing until it is re-anchored."""
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "kept"})
    alice.append("commitment", {"promise": "rolled back later"})
    signed = ledger.latest_checkpoint()
    record = tmp_path / "log.key.signed-head"
    record.unlink()
    _roll_back_last_entry(ledger)
    process = _fresh(ledger, clock, record)
    with pytest.raises(ForkRefusedError) as e:
        process.append([_event(process, alice, clock, {"promise": "a different second entry"})])
    assert e.value.check == "signer.record_missing" and "engram log reanchor" in str(e.value)
    assert process.size() == signed.size - 1
    assert not record.exists()  # nothing was signed, nothing recorded


def test_unwritable_record_refuses_to_sign(
    ledger: Ledger, make_agent: Callable[..., Agent], clock: StepClock, tmp_path: Path
) -> None:
    """Regression (issue 25, finding 8): a record that cannot be written (a key on a
    read-only mount) stopped moving while the log went on signing, so a rollback to any size
    at or above it passed. The commit that could not be recorded stands (it is durable and
    acknowledged), and the next append is refused until the record can be written."""
    alice = make_agent("alice")
    alice.append("commitment", {"promise": "recorded"})
    record = tmp_path / "log.key.signed-head"
    blocker = record.with_name(record.name + ".tmp")
    blocker.mkdir()  # the record's temporary file cannot be created (root ignores chmod)
    process = _fresh(ledger, clock, record)
    receipt = process.append([_event(process, alice, clock, {"promise": "committed, not recorded"})])[0]
    assert receipt.index == process.size() - 1
    with pytest.raises(ForkRefusedError) as e:
        process.append([_event(process, alice, clock, {"promise": "refused"})])
    assert e.value.check == "signer.record_unwritable"
    size = process.size()
    blocker.rmdir()  # writable again: the record catches up and the log signs on
    process.append([_event(process, alice, clock, {"promise": "signed again"})])
    assert process.size() == size + 1
    assert SignedHeadRecord(record, ledger.origin).read() == SignedHead(
        process.size(), process.latest_checkpoint().root
    )


def test_audit_names_rollback_behind_signer_record(
    ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """Regression (issue 25, finding 10): engram audit called a consistent rollback clean
    (exit 0) while the append path refused it with signer.fork: it did not read the record."""
    from ledger.audit import audit

    alice = make_agent("alice")
    alice.append("commitment", {"promise": "kept"})
    alice.append("commitment", {"promise": "rolled back later"})
    record = SignedHeadRecord(tmp_path / "log.key.signed-head", ledger.origin)
    assert audit(ledger.store, ledger.verifier_key, signed_head=record).clean
    _roll_back_last_entry(ledger)
    assert audit(ledger.store, ledger.verifier_key).clean  # the tables alone agree with each other
    report = audit(ledger.store, ledger.verifier_key, signed_head=record)
    assert not report.clean
    assert any(f.table == "signer record" and "signer.fork" in f.message for f in report.findings)


def test_a_text_body_is_named_not_a_type_error(
    backend: str, ledger: Ledger, make_agent: Callable[..., Agent], tmp_path: Path
) -> None:
    """Regression (issue 25, finding 10): a body row rewritten as TEXT (what the sqlite3
    shell's replace() stores) made engram audit, memory rebuild, recall and writes raise an
    untyped TypeError from bytes(). Each now names the table, row and column. (PostgreSQL's
    bytea column cannot hold text: SQLite only.)"""
    from engram.client.agent_memory import AgentMemory
    from ledger.audit import audit
    from ledger.memory.service import MemoryService
    from ledger.memory.transport import InProcessMemory

    memory = MemoryService(ledger, access_log="off")
    alice = make_agent("alice")
    alice.transport = InProcessMemory(memory)
    r = AgentMemory(alice).write(category="LEARNING", content="Staging restarts nightly")
    if backend == "postgres":  # bytea cannot hold text: the database itself refuses the change
        with pytest.raises(Exception, match=r"bytea|type"):
            _owner(ledger.store.engine, "UPDATE bodies SET body = 'x'::text WHERE idx = :i", {"i": r.index})
        assert audit(ledger.store, ledger.verifier_key).clean
        return
    _owner(
        ledger.store.engine, "UPDATE bodies SET body = 'replaced by the shell' WHERE idx = :i", {"i": r.index}
    )
    with pytest.raises(LogIntegrityError) as e:
        ledger.store.body(r.index)
    assert e.value.check == "state.bodies" and f"bodies row {r.index}: column body holds str" in str(e.value)
    report = audit(ledger.store, ledger.verifier_key)
    assert any(
        f.table == "bodies" and f.column == "body" and "holds str" in f.message for f in report.findings
    )
    with pytest.raises(LogIntegrityError) as e2:
        MemoryService(ledger, access_log="off").rebuild()
    assert e2.value.check == "state.bodies"


def test_a_failed_rebuild_leaves_the_projection_serving(
    backend: str, ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    """Regression (issue 25, finding 10): ``engram memory rebuild`` dropped the projection
    before replaying, so one bad body took memory down for every agent. Every entry is now
    read and decoded first: a body its leaf did not commit to stops the rebuild naming the
    row, and the projection in place still answers for every agent, byte for byte."""
    from engram.client.agent_memory import AgentMemory
    from ledger.memory.service import MemoryService
    from ledger.memory.transport import InProcessMemory

    memory = MemoryService(ledger, access_log="off")
    transport = InProcessMemory(memory)
    alice, bob = make_agent("alice"), make_agent("bob")
    alice.transport = bob.transport = transport
    alice_memory, bob_memory = AgentMemory(alice), AgentMemory(bob)
    alice_memory.write(category="LEARNING", content="Staging restarts nightly")
    bad = alice_memory.write(category="LEARNING", content="The runbook lives in ops/")
    bob_memory.write(category="PREFERENCE", content="Bob wants terse answers")
    before = memory.digest()
    assert memory.projection.count() == 3
    # A body of the same type and length that its leaf did not commit to.
    _owner(
        ledger.store.engine,
        "UPDATE bodies SET salt = :s WHERE idx = :i",
        {"s": b"\x00" * len(ledger.store.body(bad.index)[0]), "i": bad.index},  # type: ignore[index]
    )
    with pytest.raises(LogIntegrityError) as e:
        MemoryService(ledger, access_log="off").rebuild()
    assert e.value.check == "state.bodies" and f"bodies row {bad.index}" in str(e.value)
    assert memory.projection.digest() == before
    assert [it.content for it in memory.projection.items("bob")] == ["Bob wants terse answers"]
    assert len(memory.projection.items("alice")) == 2
