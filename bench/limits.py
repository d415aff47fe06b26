"""The limits every other figure is a ratio of: what one core and the databases can do.

* Ed25519 verify/s on one core with ``cryptography`` (what Engram uses) and with PyNaCl
  (libsodium), over a 300-byte message (an envelope's size); sign/s with ``cryptography``.
* SHA-256 Merkle node hashes/s through ``verifier.merkle.node_hash`` (RFC 9162 interior node).
* Batched insert rows/s, durable: rows shaped like a leaf (index, ~450 bytes, 32-byte hash)
  in batches, one commit each, with Engram's engine settings (SQLite WAL + synchronous=FULL,
  PostgreSQL synchronous_commit=on).
"""

from __future__ import annotations

import os
import time

from bench.common import database, fig
from bench.plan import Config
from bench.report import Figure

MESSAGE = b"e" * 300


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("nan")


def verify_rates(n: int) -> tuple[float, float, float]:
    """(cryptography verify/s, PyNaCl verify/s, cryptography sign/s), one thread."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pub = key.public_key()
    t0 = time.perf_counter()
    for _ in range(n):
        sig = key.sign(MESSAGE)
    sign = _rate(n, time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(n):
        pub.verify(sig, MESSAGE)
    verify = _rate(n, time.perf_counter() - t0)

    import nacl.signing

    nkey = nacl.signing.SigningKey.generate()
    signed = nkey.sign(MESSAGE)
    vk = nkey.verify_key
    t0 = time.perf_counter()
    for _ in range(n):
        vk.verify(signed.message, signed.signature)
    nacl_verify = _rate(n, time.perf_counter() - t0)
    return verify, nacl_verify, sign


def node_hash_rate(n: int) -> float:
    from verifier.merkle import node_hash

    left, right = os.urandom(32), os.urandom(32)
    t0 = time.perf_counter()
    for _ in range(n):
        left = node_hash(left, right)
    return _rate(n, time.perf_counter() - t0)


def insert_rate(url: str, rows: int, batch: int) -> float:
    """Rows/s inserted in batches of ``batch`` (executemany), one durable commit per batch."""
    from sqlalchemy import text

    from ledger.storage.db import WRITE_OPTION, make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as c:
            c = c.execution_options(**{WRITE_OPTION: True})
            c.execute(text("CREATE TABLE bench_rows (idx BIGINT PRIMARY KEY, leaf BYTEA, hash BYTEA)"))
            c.commit()
        payload = os.urandom(450)
        digest = os.urandom(32)
        t0 = time.perf_counter()
        done = 0
        with engine.connect() as c:
            c = c.execution_options(**{WRITE_OPTION: True})
            stmt = text("INSERT INTO bench_rows (idx, leaf, hash) VALUES (:i, :leaf, :hash)")
            while done < rows:
                k = min(batch, rows - done)
                c.execute(stmt, [{"i": done + j, "leaf": payload, "hash": digest} for j in range(k)])
                c.commit()
                done += k
        return _rate(done, time.perf_counter() - t0)
    finally:
        engine.dispose()


def run(cfg: Config, out: list[Figure]) -> None:
    s = cfg.sizes
    verify, nacl_verify, sign = verify_rates(s.verify_n)
    note = "one thread, 300-byte message"
    out.append(
        fig(
            "limits.verify.cryptography",
            "Ed25519 verify, cryptography, 1 core",
            verify,
            "verify/s",
            note=note,
        )
    )
    out.append(
        fig("limits.verify.pynacl", "Ed25519 verify, PyNaCl, 1 core", nacl_verify, "verify/s", note=note)
    )
    out.append(
        fig("limits.sign.cryptography", "Ed25519 sign, cryptography, 1 core", sign, "sign/s", note=note)
    )
    out.append(
        fig(
            "limits.sha256.node",
            "SHA-256 Merkle node hashes (verifier.merkle.node_hash)",
            node_hash_rate(s.hash_n),
            "hashes/s",
        )
    )
    backends = ["sqlite"] + (["postgresql"] if cfg.pg_url else [])
    for b in backends:
        with database(b, cfg.pg_url, cfg.workdir, "limits") as url:
            rate = insert_rate(url, s.insert_rows, s.insert_batch)
        out.append(
            fig(
                f"limits.insert.{b}",
                f"{'SQLite' if b == 'sqlite' else 'PostgreSQL'} batched insert, {s.insert_batch} rows/commit",
                rate,
                "rows/s",
                note="durable commits, leaf-shaped rows",
            )
        )
