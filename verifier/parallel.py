"""Signature checks of a replay spread over worker processes.

The auditor's replay is sequential by nature: which key must have signed entry ``i``
depends on every key event before it. The expensive part, the Ed25519 verification, is not:
it only needs the public key a signature claims. :class:`SignatureChecker` therefore lets
worker processes verify each entry's signature against the key its envelope *names* (a key
id is a hash of its key, learned from the registrations and rotations in the leaves seen so
far), ahead of the sequential replay; the replay then only decides, in order, whether that
key is the one valid for the agent at that index, and verifies inline whatever was not
verified ahead or was verified under another key. So an ahead-of-time check can only save
work, never admit an entry: the answer is the same as with one process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from verifier.event import Leaf, event_signing_input

__all__ = ["SignatureChecker", "default_jobs"]

#: Below this many entries the pool costs more than it saves.
MIN_PARALLEL_ENTRIES = 4096


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def _verify_many(tasks: Sequence[tuple[bytes, bytes, bytes]]) -> list[bool]:
    """(public key, signature, message) -> whether it verifies; in a worker process."""
    out = []
    for public_key, signature, message in tasks:
        try:
            Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
            out.append(True)
        except (InvalidSignature, ValueError):
            out.append(False)
    return out


class SignatureChecker:
    """Submit a bundle's parsed leaves; get back, per leaf, the key its signature verified
    under ahead of the replay (None: not checked ahead, the replay checks it)."""

    def __init__(self, jobs: int) -> None:
        self.pool = ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else None
        #: key id -> public key, from the key events of the leaves submitted so far
        self.keys: dict[str, bytes] = {}

    def submit(self, leaves: Sequence[Leaf]) -> Future[list[bytes | None]] | list[bytes | None]:
        tasks: list[tuple[bytes, bytes, bytes]] = []
        slots: list[int] = []
        keys: list[bytes | None] = [None] * len(leaves)
        for i, leaf in enumerate(leaves):
            env = leaf.envelope
            if env.new_key is not None:
                # A registration is signed by the key it introduces; a rotation by the old one.
                self.keys.setdefault(env.new_key.key_id, env.new_key.public_key)
            public_key = self.keys.get(env.key_id)
            if public_key is None:
                continue
            keys[i] = public_key
            slots.append(i)
            tasks.append((public_key, leaf.signature, event_signing_input(leaf.envelope_jcs())))
        if self.pool is None or not tasks:
            return [None] * len(leaves)
        done: Future[list[bytes | None]] = Future()

        def finish(f: Future[list[bool]]) -> None:
            try:
                ok = f.result()
            except Exception:  # a broken worker: the replay verifies everything itself
                done.set_result([None] * len(leaves))
                return
            out: list[bytes | None] = [None] * len(leaves)
            for slot, good in zip(slots, ok, strict=True):
                if good:
                    out[slot] = keys[slot]
            done.set_result(out)

        self.pool.submit(_verify_many, tasks).add_done_callback(finish)
        return done

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
