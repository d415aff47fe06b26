"""The log's entries as the projection folds them: each leaf parsed, each body opened against
the commitment its leaf signed, erased entries replaced by their stand-ins.

Trust role: the projection folds in only what an entry signed. A stored row that does not
parse, or a body that is not the one its leaf committed to, is named by a typed
:class:`~engram.protocol.errors.LogIntegrityError`, never projected into recall.
"""

from __future__ import annotations

import hmac
from typing import Any

from sqlalchemy import Connection, and_, select

from engram.protocol.errors import LogIntegrityError, StorageError
from ledger.append import CommittedBatch
from ledger.memory.state import STANDS_IN_KINDS, LoggedEvent, stand_in, stand_ins
from ledger.storage.schema import bodies, leaves
from ledger.storage.store import blob
from verifier.errors import MalformedError, VerificationError
from verifier.event import Leaf, commitment_of
from verifier.jcs import parse_strict

__all__ = ["committed_events", "event_rows", "read_events"]


def read_events(conn: Connection, start: int, end: int) -> list[LoggedEvent]:
    """The entries ``start`` to ``end`` (exclusive) as the projection folds them; a missing
    leaf is a storage error."""
    out = event_rows(conn, and_(leaves.c.idx >= start, leaves.c.idx < end))
    if [ev.index for ev in out] != list(range(start, end)):
        raise StorageError(f"leaves {start}..{end} are not all present")
    return out


def committed_events(batch: CommittedBatch) -> list[LoggedEvent] | None:
    """The entries an append just wrote, as :func:`read_events` returns them once the batch
    committed, built from the batch in memory (its leaves and the body bytes it stored;
    nothing is read back). None when the batch erased a body: what an erasure takes
    changes how earlier entries read (their bodies go, stand-ins replace some), which only a
    read of the log after the erasure gives.

    Why it equals :func:`read_events` otherwise: each entry's leaf is the one stored (the
    same bytes; index, timestamp, agent and kind come from it), each entry has its body row
    (the append writes one per entry) holding exactly these bytes, parsed here as there, and
    with every body present no stand-in applies. The commitment :func:`event_rows` checks
    was checked on these bytes before the lock (``verify_body`` at the prepare edge).
    ``tests/contract/test_projection_in_pass.py`` compares the two."""
    if batch.erased:
        return None
    return [
        LoggedEvent(
            index=leaf.index,
            timestamp_us=leaf.timestamp_us,
            agent=leaf.envelope.agent,
            kind=leaf.envelope.kind,
            body=parse_strict(raw, max_bytes=1 << 24),
        )
        for leaf, raw in zip(batch.leaves, batch.bodies, strict=True)
    ]


def event_rows(conn: Connection, where: Any) -> list[LoggedEvent]:
    """The entries ``where`` selects, in log order, each body opened against its leaf's
    commitment (a row that fails raises :class:`LogIntegrityError` naming it)."""
    rows = conn.execute(
        select(leaves.c.idx, leaves.c.leaf, bodies.c.salt, bodies.c.body)
        .select_from(leaves.outerjoin(bodies, bodies.c.idx == leaves.c.idx))
        .where(where)
        .order_by(leaves.c.idx)
    ).all()
    out = []
    for r in rows:
        try:
            leaf = Leaf.from_bytes(blob(r.leaf, "leaves", r.idx, "leaf"))
        except MalformedError as e:
            raise LogIntegrityError(
                f"leaves row {r.idx}: the stored leaf does not parse ({e}); run `engram audit`",
                check="state.leaves",
            ) from e
        body = None
        if r.body is not None:
            # The projection folds in only what the entry signed: a body
            # changed in the table is named, not projected into recall.
            raw = blob(r.body, "bodies", r.idx, "body")
            try:
                opened = hmac.compare_digest(
                    commitment_of(leaf.envelope.kind, blob(r.salt, "bodies", r.idx, "salt"), raw),
                    leaf.envelope.body_commitment,
                )
            except VerificationError:
                opened = False  # a per-entry distilled body that does not parse or has no form
            if not opened:
                raise LogIntegrityError(
                    f"bodies row {r.idx}: the stored body is not the one entry {r.idx} committed to; "
                    "not projected (run `engram audit`)",
                    check="state.bodies",
                )
            try:
                body = parse_strict(raw, max_bytes=1 << 24)
            except MalformedError as e:  # committed to, so signed that way: still named
                raise LogIntegrityError(
                    f"bodies row {r.idx}: the stored body does not parse ({e}); run `engram audit`",
                    check="state.bodies",
                ) from e
        out.append(
            LoggedEvent(
                index=leaf.index,
                timestamp_us=leaf.timestamp_us,
                agent=leaf.envelope.agent,
                kind=leaf.envelope.kind,
                body=body,
            )
        )
    erased = {ev.agent for ev in out if ev.body is None and ev.kind in STANDS_IN_KINDS}
    if not erased:
        return out
    replays = stand_ins(
        parse_strict(blob(r.body, "bodies", r.idx, "body"), max_bytes=1 << 24)
        for r in conn.execute(
            select(bodies.c.idx, bodies.c.body)
            .select_from(leaves.join(bodies, bodies.c.idx == leaves.c.idx))
            .where(and_(leaves.c.agent.in_(sorted(erased)), leaves.c.kind == "memory.erased"))
        )
    )
    return [stand_in(ev, replays) for ev in out]
