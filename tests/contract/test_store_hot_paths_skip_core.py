"""The store's hot paths run on the driver's connection (issue 43, Deliver 2): an append
batch, a projection sync and recall's item reads build and compile no SQLAlchemy statement
(no ``Connection.execute``) and send none through ``exec_driver_sql``. Their statements
still reach SQLAlchemy's statement listeners (ledger.storage.dbapi), which the
statement-count tests rely on. On both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Connection, event

from engram.client.sdk import Agent
from engram.protocol.signer import AgentSigner
from ledger.log import Ledger
from ledger.memory.projection_state import BatchState, SqlState
from ledger.memory.service import MemoryService
from ledger.memory.state import Session
from tests.contract.test_memory_projection import memory_for


@contextmanager
def _watched(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[str], list[str]]]:
    """(statements sent through SQLAlchemy's Core or exec_driver_sql; every statement
    SQLAlchemy's listeners saw) while the block runs."""
    core: list[str] = []
    seen: list[str] = []
    execute, driver_sql = Connection.execute, Connection.exec_driver_sql

    def counted_execute(self: Connection, statement: Any, *args: Any, **kw: Any) -> Any:
        core.append(str(statement)[:80])
        return execute(self, statement, *args, **kw)

    def counted_driver_sql(self: Connection, statement: str, *args: Any, **kw: Any) -> Any:
        core.append(statement[:80])
        return driver_sql(self, statement, *args, **kw)

    def listen(_c: object, _cur: object, statement: str, *_: object) -> None:
        seen.append(statement)

    monkeypatch.setattr(Connection, "execute", counted_execute)
    monkeypatch.setattr(Connection, "exec_driver_sql", counted_driver_sql)
    event.listen(ledger.store.engine, "before_cursor_execute", listen)
    try:
        yield core, seen
    finally:
        event.remove(ledger.store.engine, "before_cursor_execute", listen)
        monkeypatch.undo()


def _starting(seen: list[str], prefix: str) -> int:
    return sum(1 for s in seen if s.lstrip().upper().startswith(prefix))


def test_an_append_batch_runs_no_core_statement(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    signers = [AgentSigner(f"a{i}", Ed25519PrivateKey.generate(), origin=ledger.origin) for i in range(8)]
    ledger.append([s.registration(client_time_us=1) for s in signers], operator=True)
    prepared = [
        ledger.prepare(s.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=2))
        for s in signers
    ]
    with _watched(ledger, monkeypatch) as (core, seen):
        ledger.append_batch(prepared)
    assert core == []
    # The batch's statements were run, and observed: one executemany for the eight leaves.
    assert _starting(seen, "INSERT INTO LEAVES") == 1, seen
    assert _starting(seen, "INSERT INTO CHECKPOINTS") == 1, seen


def test_a_projection_sync_and_recall_run_no_core_statement(
    ledger: Ledger, make_agent: Callable[..., Agent], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = MemoryService(ledger, access_log="off")
    ada = memory_for(memory, make_agent("ada"))
    ada.write(category="LEARNING", content="The staging database moved to Frankfurt.")
    with _watched(ledger, monkeypatch) as (core, seen):
        for i in range(3):
            ada.write(category="LEARNING", content=f"Release {i} ships on a Thursday.")
    assert core == []
    assert _starting(seen, "UPDATE MEM_CURSOR SET APPLIED_SIZE") >= 1, seen
    assert _starting(seen, "INSERT INTO MEM_ITEMS") >= 1, seen
    with _watched(ledger, monkeypatch) as (core, seen):
        res = memory.recall("ada", "when does a release ship", record_access=False)
    assert res.ranked
    assert core == []
    assert _starting(seen, "SELECT") >= 1, seen


def test_a_batch_state_over_the_append_transaction_commits_and_rolls_back_with_it(ledger: Ledger) -> None:
    """The projection applied inside the append transaction (issue 43, Deliver 1) writes on
    the transaction's driver connection: what BatchState flushed there is committed with the
    batch, and gone with it when the batch fails."""

    class Refused(Exception):
        pass

    def put(name: str) -> None:
        with ledger.store.write() as tx:
            state = BatchState(tx.db)
            state.put_session(Session(agent="ada", session=name, opened_index=1, opened_us=1))
            state.flush()
            assert BatchState(tx._conn).session("ada", name) is not None  # same transaction
            if name == "refused":
                raise Refused

    put("kept")
    with pytest.raises(Refused):
        put("refused")
    with ledger.store.fast_read() as db:
        assert SqlState(db).session("ada", "kept") is not None
        assert SqlState(db).session("ada", "refused") is None
