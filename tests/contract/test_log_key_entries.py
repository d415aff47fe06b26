"""Issue 28: the key entries a process appends are remembered parsed (KeyStreams.appended), so
deriving a fresh agent's keys for its first write does not parse its registration leaf again;
what the remembered parse gives is what parsing the stored bytes gives."""

from __future__ import annotations

from collections.abc import Callable

from engram.client.sdk import Agent
from ledger.log import Ledger
from ledger.storage.store import KeyStreams


def test_appended_key_entries_derive_as_parsed_from_the_log(
    ledger: Ledger, make_agent: Callable[..., Agent]
) -> None:
    a = make_agent("alice")
    a.rotate()
    b = make_agent("bob")
    b.revoke("lost")
    streams = ledger.store.key_streams
    size = ledger.size()
    with ledger.store.read() as conn:
        raws = [
            bytes(r[0])
            for r in conn.exec_driver_sql(
                "SELECT leaf FROM leaves WHERE kind IN ('key.registered', 'key.rotated', 'key.revoked')"
            )
        ]
    assert raws and all(raw in streams._parsed for raw in raws)  # remembered, not re-parsed
    with ledger.store.read() as conn:
        remembered = streams.derive(conn, ["alice", "bob"], size)
        parsed = KeyStreams().derive(conn, ["alice", "bob"], size)  # from the bytes
    assert remembered == parsed
    assert parsed[1] == {"alice": a.signer.key_id, "bob": None}
