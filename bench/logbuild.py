"""Building large logs fast: pre-signed events appended with ``Ledger.append_batch``.

The log's rules hold as for any client: ``agents`` agents are registered (operator
authority), then each batch carries one event per agent of one group, each the next version
of its stream with ``prev`` the leaf hash of that stream's last receipt. That dependency is
why a batch can only be signed once the previous batch of the same agents is appended, so the
agents form two groups: a child process signs one group's next batch while this process
appends the other's, and signing (client work) overlaps appending (the log's work) on a
second core. Nothing is skipped: every event is verified, sequenced, hashed into the tree and
covered by a signed checkpoint, one per batch.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import secrets
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram.protocol.signer import AgentSigner
from ledger.log import Ledger

__all__ = ["LogBuilder"]

KINDS = ("commitment", "memory.written")
_MAX_BATCH = 10_000  # Ledger.append_batch's limit


def _now_us() -> int:
    return time.time_ns() // 1000


class _Bodies:
    """Event bodies of ``kind``: commitments (~250 bytes) or WARM memories with varied words."""

    def __init__(self, kind: str, seed: int) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        self.kind = kind
        self.rng = random.Random(seed)
        self.n = 0
        if kind == "memory.written":
            from engram.protocol.gate import WriteGate

            self.gate = WriteGate()

    def next(self) -> dict[str, Any]:
        self.n += 1
        if self.kind == "commitment":
            return {"promise": f"promise {self.n}: " + "y" * 220}
        from bench.bench_memory import sentence
        from engram.protocol.bodies import written_body

        return written_body(
            self.gate,
            category=self.rng.choice(["LEARNING", "FAILURE", "CONTEXT"]),
            content=sentence(self.rng),
            tags=[self.rng.choice(["ops", "billing", "infra"])],
            confidence=self.rng.randint(0, 100),
            tier="WARM",
        )


def _sign_loop(conn: Connection, origin: str, names: list[str], seeds: list[bytes], kind: str) -> None:
    """The child: sign the batch asked for (agent index, version, prev) and send it back."""
    signers = [
        AgentSigner(n, Ed25519PrivateKey.from_private_bytes(s), origin=origin)
        for n, s in zip(names, seeds, strict=True)
    ]
    bodies = _Bodies(kind, seed=len(names))
    while True:
        job = conn.recv()
        if job is None:
            return
        group, heads = job
        subs = [
            signers[i].event(kind, bodies.next(), version=v, prev=p, client_time_us=_now_us())
            for i, v, p in heads
        ]
        conn.send((group, subs))


class LogBuilder:
    """Grow ``ledger`` to given sizes with batches of pre-signed events (see module docstring)."""

    def __init__(self, ledger: Ledger, *, agents: int, kind: str = "commitment", tag: str = "build") -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}")
        n = max(2, agents)
        self.ledger = ledger
        self.names = [f"{tag}-{i}" for i in range(n)]
        seeds = [secrets.token_bytes(32) for _ in range(n)]
        regs = [
            AgentSigner(name, Ed25519PrivateKey.from_private_bytes(s), origin=ledger.origin).registration(
                client_time_us=_now_us()
            )
            for name, s in zip(self.names, seeds, strict=True)
        ]
        for start in range(0, n, _MAX_BATCH // 2):
            ledger.append_batch(regs[start : start + _MAX_BATCH // 2], operator=True)
        self.size = ledger.size()
        half = n // 2
        self.groups: list[Sequence[int]] = [range(0, half), range(half, n)]
        self.heads: dict[int, tuple[int, str | None]] = {}
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_sign_loop, args=(child, ledger.origin, self.names, seeds, kind), daemon=True
        )
        self._proc.start()
        child.close()
        self._request(0)
        #: events appended by grow_to and the seconds it took (signing overlapped)
        self.appended = 0
        self.seconds = 0.0

    def _request(self, group: int) -> None:
        self._conn.send((group, [(i, *self.heads.get(i, (0, None))) for i in self.groups[group]]))

    def grow_to(self, size: int) -> None:
        """Append until the log holds exactly ``size`` entries (a checkpoint is signed there)."""
        t0 = time.perf_counter()
        while self.size < size:
            group, subs = self._conn.recv()
            self._request(1 - group)  # signed in the child while this batch is appended
            k = min(len(subs), size - self.size)
            receipts = self.ledger.append_batch(subs[:k])
            for i, r in zip(self.groups[group], receipts, strict=False):
                self.heads[i] = (r.version + 1, r.leaf_hash.hex())
            self.size = receipts[-1].index + 1
            self.appended += k
        self.seconds += time.perf_counter() - t0

    @property
    def rate(self) -> float:
        return self.appended / self.seconds if self.seconds else float("nan")

    def close(self) -> None:
        try:
            self._conn.recv()  # the batch signed ahead (it may not fit the pipe's buffer)
            self._conn.send(None)
        finally:
            self._proc.join(timeout=30)
            if self._proc.is_alive():
                self._proc.terminate()
            self._conn.close()

    def __enter__(self) -> LogBuilder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
