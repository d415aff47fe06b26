"""Issue 28, Deliver 4: the append runs a handful of SQL statements per batch, whatever the
batch's size (executemany and multi-row inserts), so that a group commit of tens of events
costs at most 6 statements per event amortised, on both backends. Counted at the driver
(SQLAlchemy's before_cursor_execute), so every statement sent to the database is seen."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import event

from engram.protocol.signer import AgentSigner
from ledger.log import Ledger


def _count(ledger: Ledger, work: Callable[[], object]) -> Counter[str]:
    seen: Counter[str] = Counter()

    def count(conn: object, cursor: object, statement: str, *rest: object) -> None:
        seen[" ".join(statement.split()[:3])] += 1

    engine = ledger.store.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        work()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return seen


def test_an_append_costs_a_fixed_number_of_statements_per_batch(ledger: Ledger) -> None:
    totals = {}
    for n in (1, 8, 32):
        signers = [
            AgentSigner(f"s{n}-{i}", Ed25519PrivateKey.generate(), origin=ledger.origin) for i in range(n)
        ]
        ledger.append([s.registration(client_time_us=1) for s in signers], operator=True)
        subs = [
            s.event("commitment", {"promise": "p"}, version=0, prev=None, client_time_us=2) for s in signers
        ]
        prepared = [ledger.prepare(s) for s in subs]  # the edge's work: its key reads are cached
        seen = _count(ledger, lambda p=prepared: ledger.append_batch(p))  # type: ignore[misc]
        totals[n] = sum(seen.values())
        assert totals[n] / n <= 6 or n == 1, (n, seen)
    # The batch's statements do not grow with its size: one of each, for 1 event or 32.
    assert totals[32] == totals[8] == totals[1], totals
    assert totals[1] <= 16, totals
