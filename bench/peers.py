"""Peers measured in the same run (benchmark-only extras, ``pip install -e '.[bench]'``).

Each is driven through its own public API, read from its installed source; nothing of theirs
is copied. What each does per event differs from Engram (none signs a checkpoint or proves
inclusion per append), so the ratios say what Engram's guarantees cost, not who is faster.

* ``pymerkle`` (SqliteTree): durable single appends (``append_entry``: one transaction each,
  SQLite's default rollback journal and synchronous=FULL); bulk appends (``append_entries``)
  to the same sizes as Engram's proof benchmark, then inclusion proofs of random leaves from
  a freshly opened tree (``cold``: its subroot cache empty) and the next ones (``warm``).
* ``eventsourcing`` (SQLiteApplicationRecorder, WAL; synchronous as its connections have it,
  recorded in the note): one stored event per ``insert_events`` call, 1 client and 8 threads.
* ``provara-protocol``: its SQLite vault (``provara.storage_sqlite.Vault``: hash chain,
  Ed25519 per event) appending with its own pragmas (WAL + synchronous=NORMAL: a commit is
  not fsynced) and with synchronous=FULL (durable, as Engram), and ``verify_chain``; its SDK's
  NDJSON vault (``provara.Vault.append_event``, which rescans the file for the actor's last
  event on every append and does not fsync) and the SDK's signature + causal-chain checks.
"""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
import uuid
from pathlib import Path

from bench.common import fig, median, rss_mib
from bench.plan import Config, size_tag
from bench.report import Figure

ENTRY = 450  # bytes per entry, about an Engram leaf


def pymerkle(cfg: Config, out: list[Figure]) -> None:
    from pymerkle import SqliteTree

    s = cfg.sizes
    d = tempfile.mkdtemp(prefix="pymerkle-", dir=cfg.workdir)
    single = SqliteTree(os.path.join(d, "single.db"))
    t0 = time.perf_counter()
    for i in range(s.peer_appends):
        single.append_entry(f"entry {i} ".encode() + os.urandom(ENTRY))
    out.append(
        fig(
            "peer.pymerkle.append",
            "pymerkle SqliteTree.append_entry (one transaction each)",
            s.peer_appends / (time.perf_counter() - t0),
            "entries/s",
            note="SQLite defaults: rollback journal, synchronous=FULL",
        )
    )
    single.close()

    path = os.path.join(d, "tree.db")
    rng = random.Random(14)
    bulk_n = 0
    bulk_s = 0.0
    tree = SqliteTree(path)
    for n in sorted(s.proof_sizes):
        todo = n - tree.get_size()
        t0 = time.perf_counter()
        tree.append_entries(f"entry {i} ".encode() + os.urandom(ENTRY) for i in range(todo))
        bulk_s += time.perf_counter() - t0
        bulk_n += todo
        tree.close()
        fresh = SqliteTree(path)  # a fresh tree object: its subroot cache is empty
        k = s.proofs_k
        rates = []
        for _ in ("cold", "warm"):
            idx = [rng.randrange(n) + 1 for _ in range(k)]  # pymerkle counts leaves from 1
            t0 = time.perf_counter()
            for i in idx:
                fresh.prove_inclusion(i, n)
            rates.append(k / (time.perf_counter() - t0))
        tag = size_tag(n)
        at = f"at {n:,} entries"
        out.append(
            fig(
                f"peer.pymerkle.{tag}.cold",
                f"pymerkle inclusion proofs {at}, fresh tree",
                rates[0],
                "proofs/s",
            )
        )
        out.append(
            fig(f"peer.pymerkle.{tag}.warm", f"pymerkle inclusion proofs {at}, warm", rates[1], "proofs/s")
        )
        out.append(fig(f"peer.pymerkle.{tag}.rss", f"RSS of the pymerkle process {at}", rss_mib(), "MiB"))
        tree = fresh
    tree.close()
    out.append(
        fig(
            "peer.pymerkle.bulk",
            "pymerkle SqliteTree.append_entries (bulk, one transaction)",
            bulk_n / bulk_s,
            "entries/s",
        )
    )


def eventsourcing(cfg: Config, out: list[Figure]) -> None:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    s = cfg.sizes
    d = tempfile.mkdtemp(prefix="eventsourcing-", dir=cfg.workdir)
    datastore = SQLiteDatastore(db_name=os.path.join(d, "es.db"))
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()
    with datastore.transaction(commit=False) as c:
        c.execute("PRAGMA synchronous")
        row = c.fetchone()
        sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(int(row[0]), str(row[0]))
    state = b"s" * ENTRY

    def append(originator: uuid.UUID, version: int) -> float:
        t = time.perf_counter()
        recorder.insert_events(
            [
                StoredEvent(
                    originator_id=originator, originator_version=version, topic="bench:Event", state=state
                )
            ]
        )
        return time.perf_counter() - t

    one = uuid.uuid4()
    t0 = time.perf_counter()
    lat = [append(one, v) for v in range(1, s.peer_appends + 1)]
    note = f"WAL, synchronous={sync}; one event per insert_events"
    out.append(
        fig(
            "peer.eventsourcing.c1.rate",
            "eventsourcing SQLite recorder, 1 client",
            s.peer_appends / (time.perf_counter() - t0),
            "events/s",
            note=note,
        )
    )
    out.append(
        fig(
            "peer.eventsourcing.c1.p50",
            "eventsourcing SQLite recorder, 1 client, p50",
            median(lat) * 1000,
            "ms",
        )
    )

    per = max(2, s.peer_appends // 8)
    errors: list[BaseException] = []

    def work() -> None:
        me = uuid.uuid4()
        try:
            for v in range(1, per + 1):
                append(me, v)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    out.append(
        fig(
            "peer.eventsourcing.c8.rate",
            "eventsourcing SQLite recorder, 8 threads",
            8 * per / (time.perf_counter() - t0),
            "events/s",
            note=note,
        )
    )
    datastore.close()


def provara(cfg: Config, out: list[Figure]) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from provara.storage_sqlite import Vault as SqliteVault

    s = cfg.sizes
    d = Path(tempfile.mkdtemp(prefix="provara-", dir=cfg.workdir))
    key = Ed25519PrivateKey.generate()
    payload = {"subject": "bench", "predicate": "observed", "value": "v" * 200}
    for label, pragma in (("sqlite", None), ("sqlite_full", "FULL")):
        vault = SqliteVault(d / f"{label}.sqlite")
        if pragma:
            vault.conn.execute(f"PRAGMA synchronous={pragma}")
        t0 = time.perf_counter()
        for _ in range(s.peer_appends):
            vault.append("OBSERVATION", payload, key)
        rate = s.peer_appends / (time.perf_counter() - t0)
        sync = vault.conn.execute("PRAGMA synchronous").fetchone()[0]
        out.append(
            fig(
                f"peer.provara.{label}.append",
                f"provara SQLite vault append, 1 client, synchronous={'FULL' if sync == 2 else 'NORMAL'}",
                rate,
                "events/s",
                note="WAL; NORMAL does not fsync each commit" if sync != 2 else "WAL, fsync per commit",
            )
        )
        if label == "sqlite":
            t0 = time.perf_counter()
            ok, msg = vault.verify_chain()
            if not ok:
                raise RuntimeError(f"provara verify_chain failed: {msg}")
            out.append(
                fig(
                    "peer.provara.sqlite.verify",
                    "provara SQLite vault verify_chain (hash chain + Ed25519)",
                    s.peer_appends / (time.perf_counter() - t0),
                    "events/s",
                )
            )
        vault.close()

    from provara import Vault
    from provara.backpack_signing import load_keys_registry
    from provara.bootstrap_v0 import bootstrap_backpack
    from provara.sync_v0 import load_events, verify_all_causal_chains, verify_all_signatures

    path = d / "sdk-vault"
    # The SDK chains an actor's events by key (append_event's prev is the key's last event)
    # but verify_all_causal_chains chains them by actor label: one label for the vault's key
    # keeps the two views the same chain.
    boot = bootstrap_backpack(path, actor="bench", quiet=True)
    if not boot.success or boot.root_key_id is None or boot.root_private_key_b64 is None:
        raise RuntimeError(f"provara bootstrap failed: {boot.errors}")
    sdk = Vault(path)
    t0 = time.perf_counter()
    for _ in range(s.provara_sdk_appends):
        sdk.append_event("OBSERVATION", payload, boot.root_key_id, boot.root_private_key_b64, actor="bench")
    out.append(
        fig(
            "peer.provara.sdk.append",
            f"provara SDK Vault.append_event (NDJSON), to {s.provara_sdk_appends} events",
            s.provara_sdk_appends / (time.perf_counter() - t0),
            "events/s",
            note="rescans the file per append (cost grows with the log); no fsync",
        )
    )
    t0 = time.perf_counter()
    events = load_events(path / "events" / "events.ndjson")
    valid, invalid, errors = verify_all_signatures(
        events, load_keys_registry(path / "identity" / "keys.json")
    )
    chains = verify_all_causal_chains(events)
    if invalid or not all(chains.values()):
        raise RuntimeError(f"provara SDK verification failed: {errors[:1]} {chains}")
    out.append(
        fig(
            "peer.provara.sdk.verify",
            "provara SDK verify_all_signatures + verify_all_causal_chains",
            len(events) / (time.perf_counter() - t0),
            "events/s",
            note=f"{valid} signatures",
        )
    )
