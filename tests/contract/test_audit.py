"""``engram audit`` names any changed row (issue 15, Deliver 1). On both backends, a log
with keys rotated and revoked, memories, a session and an erasure audits clean; then every
column of every compared table is changed in turn (what whoever owns the tables can do),
and the audit must name that table and column (or, for a key column, the row it moved),
and audit clean again once the value is restored.

Not compared, by design (ledger/audit.py says why): mem_vectors, cosignatures,
request_nonces, and mem_cursor's embedding and full-text bookkeeping columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, LargeBinary, String, Text, text
from sqlalchemy.exc import DBAPIError

from engram.client.agent_memory import AgentMemory
from engram.client.sdk import Agent
from ledger.audit import audit
from ledger.log import Ledger
from ledger.memory.service import MemoryService
from ledger.memory.transport import InProcessMemory
from ledger.storage.schema import metadata

#: table -> ORDER BY picking the row to change (the newest: no unique key collides)
TABLES = {
    "log_state": "id",
    "leaves": "idx DESC",
    "bodies": "idx DESC",
    "nodes": "level DESC, idx DESC",
    "checkpoints": "size DESC",
    "stream_heads": "idx DESC",
    "agent_keys": "added_at DESC",
    "mem_items": "idx DESC, pos DESC",
    "mem_sessions": "opened_index DESC",
}
#: mem_cursor: only the applied size is a function of the log
CURSOR = ("applied_size",)


def _owner(engine: Engine) -> None:
    """Take the append-only guards off, as the tables' owner can."""
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            for (name,) in list(conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))):
                if name.endswith(("_no_update", "_no_delete", "_no_replace")):
                    conn.execute(text(f"DROP TRIGGER {name}"))
        else:
            for table in TABLES:
                conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER ALL"))


def _changed(value: Any, column: Any, step: int) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + step
    if isinstance(value, bytes | memoryview):
        b = bytearray(bytes(value) or b"\x00")
        b[0] ^= 0x01
        return bytes(b)
    if isinstance(value, str):  # the same length (key ids and hashes are bounded columns)
        last = "xy"[step > 1] if value[-1:] not in ("x", "y") else "z"
        return value[:-1] + last if value else "x"
    if value is None:
        if isinstance(column.type, LargeBinary):
            return b"\x01" * 32
        if isinstance(column.type, String | Text):
            return "revoked"
        return 7
    raise AssertionError(f"no change for {type(value)}")


def _log(ledger: Ledger, make_agent: Callable[..., Agent]) -> MemoryService:
    memory = MemoryService(ledger)
    transport = InProcessMemory(memory)
    alice = make_agent("alice")
    alice.transport = transport
    mem = AgentMemory(alice)
    mem.write(category="LEARNING", content="the heron nests by the river")
    mem.write(category="COMMITMENT", content="ship the audit by friday", tags=["task"])
    mem.record("pact.outcome", {"pact": "p1", "result": "fulfilled", "quality": 90})
    session = mem.open_session(title="planning")
    mem.turn(session, role="user", content="what is left for friday?")
    mem.close_session(session)
    alice.rotate()
    mem.write(category="LEARNING", content="kingfishers dive for minnows")
    bob = make_agent("bob")
    bob.transport = transport
    AgentMemory(bob).write(category="LEARNING", content="bob knows something")
    bob.revoke("lost laptop")
    memory.digest()  # the projection has caught up
    return memory


def test_every_column_of_every_table_changed_is_named(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    _log(ledger, make_agent)
    engine = ledger.store.engine
    first = audit(ledger.store, ledger.verifier_key)
    assert first.clean, [str(f) for f in first.findings]
    _owner(engine)
    checked = 0
    refused: list[str] = []
    targets = [(t, c.name) for t in TABLES for c in metadata.tables[t].columns]
    targets += [("mem_cursor", c) for c in CURSOR]
    for table, col in targets:
        t = metadata.tables[table]
        pk = [c.name for c in t.primary_key.columns]
        order = TABLES.get(table, "id")
        with engine.connect() as conn:
            row = conn.execute(text(f"SELECT * FROM {table} ORDER BY {order} LIMIT 1")).mappings().one()
        old = row[col]
        where = " AND ".join(f'"{k}" = :pk_{k}' for k in pk)
        for step in (1, 1000):
            new = _changed(old, t.c[col], step)
            keys = {f"pk_{k}": row[k] for k in pk}
            try:
                with engine.begin() as conn:
                    conn.execute(text(f'UPDATE {table} SET "{col}" = :v WHERE {where}'), {"v": new, **keys})
                break
            except DBAPIError:  # a unique key taken by the first change: go further
                continue
        else:
            refused.append(f"{table}.{col}")  # the database itself forbids the change
            continue
        report = audit(ledger.store, ledger.verifier_key)
        named = [f for f in report.findings if f.table == table and f.column in (col, None)]
        if table == "bodies" and col == "salt":
            named += [f for f in report.findings if f.table == "bodies" and f.column == "body"]
        assert named, f"{table}.{col} changed from {old!r} to {new!r}: {[str(f) for f in report.findings]}"
        restored = {f"pk_{k}": (new if k == col else row[k]) for k in pk}
        with engine.begin() as conn:
            conn.execute(text(f'UPDATE {table} SET "{col}" = :v WHERE {where}'), {"v": old, **restored})
        checked += 1
    # What the database itself refuses: CHECK (id = 1) of a single-row table, and on SQLite
    # (foreign keys enforced; PostgreSQL's are triggers the owner turned off) moving a leaf
    # away from its body or a body away from its leaf.
    assert "log_state.id" in refused
    assert set(refused) <= {"log_state.id", "leaves.idx", "bodies.idx"}, refused
    assert checked == len(targets) - len(refused) > 60
    after = audit(ledger.store, ledger.verifier_key)
    assert after.clean, [str(f) for f in after.findings]


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ("DELETE FROM nodes WHERE level = 1 AND idx = 0", "nodes"),
        ("DELETE FROM checkpoints WHERE size = 3", "checkpoints"),
        ("DELETE FROM stream_heads WHERE agent = 'bob' AND kind = 'key.revoked'", "stream_heads"),
        ("DELETE FROM agent_keys WHERE agent = 'bob'", "agent_keys"),
        ("DELETE FROM mem_sessions", "mem_sessions"),
        (
            "INSERT INTO checkpoints (size, root, note, signed_at_us) VALUES (100000, X'00', X'00', 0)",
            "checkpoints",
        ),
        ("INSERT INTO nodes (level, idx, hash) VALUES (20, 0, X'00')", "nodes"),
        (
            "INSERT INTO stream_heads (agent, kind, version, leaf_hash, idx) VALUES ('eve', 'commitment', 0, X'00', 1)",
            "stream_heads",
        ),
    ],
    ids=[
        "node",
        "middle-checkpoint",
        "stream-head",
        "key-rows",
        "sessions",
        "checkpoint-insert",
        "node-insert",
        "head-insert",
    ],
)
def test_deleted_and_inserted_rows_are_named(
    ledger: Ledger, make_agent: Callable[..., Agent], sql: str, table: str
) -> None:
    _log(ledger, make_agent)
    _owner(ledger.store.engine)
    if ledger.store.engine.dialect.name == "postgresql":
        sql = sql.replace("X'00'", "'\\x00'::bytea")
    with ledger.store.engine.begin() as conn:
        conn.execute(text(sql))
    report = audit(ledger.store, ledger.verifier_key)
    assert any(f.table == table for f in report.findings), [str(f) for f in report.findings]
