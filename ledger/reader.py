"""The log's read side: checkpoints, entries, stream heads, keys, tiles and proofs.

Everything here reads; nothing writes, signs or takes the writer lock. Proofs are built from
the stored Merkle nodes and, where a checkpoint was signed at a size, checked against its root
(a disagreement is a :class:`StorageError`, never a wrong proof); the single-proof and batch
forms are verified with :mod:`verifier` before they are returned. The append side
(:mod:`ledger.append`) and this reader are composed into one face, :class:`ledger.log.Ledger`;
a reader alone (``LogReader(store)``) serves what needs no key.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator, Sequence
from typing import Any

from engram.protocol.errors import MalformedError, StorageError
from engram.protocol.wire import ConsistencyProof, InclusionProof
from ledger.storage.store import SqlStore, StoredCheckpoint, StreamHead
from verifier.jcs import parse_strict
from verifier.keys import KeyRecord
from verifier.merkle import (
    EMPTY_ROOT,
    consistency_ranges,
    inclusion_ranges,
    range_hash,
    range_nodes,
    verify_consistency,
    verify_inclusion,
)

__all__ = ["LogReader", "check_size", "inclusion_proofs"]


def check_size(store: SqlStore, size: int, latest: int | None = None) -> int:
    """``size`` must be within the latest checkpoint's (``latest``, or read); returns that size."""
    if latest is None:
        latest = store.latest_checkpoint().size
    if not 0 <= size <= latest:
        raise MalformedError(
            f"size {size} is not within the latest checkpoint's size {latest}", check="proof.size"
        )
    return latest


def inclusion_proofs(store: SqlStore, indices: Sequence[int], size: int) -> list[InclusionProof]:
    """Inclusion proofs for several indices in the tree of ``size``: one read transaction,
    O(log n) stored hashes per proof."""
    if size < 1:
        raise MalformedError(f"size {size} holds no leaf", check="proof.size")
    for i in indices:
        if not 0 <= i < size:
            raise MalformedError(
                f"there is no entry at index {i} in the tree of size {size} (its entries are 0 to {size - 1})",
                check="proof.index",
            )
    plans = [(i, inclusion_ranges(i, size)) for i in indices]
    coords: list[tuple[int, int]] = [(0, i) for i in indices]
    for _, ranges in plans:
        for lo, hi in ranges:
            coords.extend(range_nodes(lo, hi))
    coords.extend(range_nodes(0, size))
    latest, got, cps = store.proof_material(coords, [size])
    check_size(store, size, latest)
    root = range_hash([got[c] for c in range_nodes(0, size)])
    cp = cps.get(size)
    if cp is not None and not hmac.compare_digest(cp.root, root):
        raise StorageError(f"stored Merkle nodes disagree with the checkpoint at size {size}")
    out = []
    for i, ranges in plans:
        hashes = tuple(range_hash([got[c] for c in range_nodes(lo, hi)]) for lo, hi in ranges)
        out.append(
            InclusionProof(
                index=i,
                size=size,
                leaf_hash=got[(0, i)],
                root=root,
                hashes=hashes,
                checkpoint=None if cp is None else cp.note,
            )
        )
    return out


class LogReader:
    """The reads of one log's store (what the HTTP layer, the pages and the memory service ask)."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    # -- reads and proofs -------------------------------------------------------------

    def latest_checkpoint(self) -> StoredCheckpoint:
        return self.store.latest_checkpoint()

    def cosigned_note(self, checkpoint: StoredCheckpoint) -> bytes:
        """The checkpoint's signed note followed by the witness cosignatures collected for it."""
        return checkpoint.note + "".join(self.store.cosignature_lines(checkpoint.size)).encode("utf-8")

    def size(self) -> int:
        return self.store.latest_checkpoint().size

    def stream_bodies(
        self, agent: str, kind: str, size: int | None = None, *, max_bytes: int = 1 << 20
    ) -> list[tuple[int, dict[str, Any] | None]]:
        """A stream's entries below ``size`` (default: the log's size), in version order, each
        with its parsed body, or None where the body was erased."""
        return [
            (i, None if raw is None else parse_strict(raw, max_bytes=max_bytes))
            for i, raw in self.store.stream_bodies(agent, kind, self.size() if size is None else size)
        ]

    def stream_head(self, agent: str, kind: str) -> StreamHead | None:
        return self.store.stream_head(agent, kind)

    # What the HTTP layer and the web pages read of the log: each is one read of the store.

    def stream_heads(self, agent: str) -> list[StreamHead]:
        return self.store.stream_heads(agent)

    def stream_count(self, agent: str, kind: str) -> int:
        """How many entries of ``kind`` ``agent`` has in the latest checkpoint."""
        return len(self.store.stream_indices(agent, kind, self.size()))

    def agent_keys(self, agent: str) -> list[KeyRecord]:
        """An agent's key history (empty: no such agent)."""
        return self.store.keys_of(agent)

    def active_key_id(self, agent: str) -> str | None:
        return self.store.active_key_id(agent)

    def leaf(self, index: int) -> bytes | None:
        return self.store.leaf(index)

    def body(self, index: int) -> tuple[bytes, bytes] | None:
        """Entry ``index``'s (salt, body), or None where it was erased."""
        return self.store.body(index)

    def index_of_leaf_hash(self, leaf_hash: bytes) -> int | None:
        return self.store.index_of_leaf_hash(leaf_hash)

    def leaves_with_hashes(self, start: int, end: int) -> Iterator[tuple[int, bytes, bytes]]:
        return self.store.leaves_with_hashes(start, end)

    def latest_cosigned_note(self) -> bytes:
        """The latest checkpoint's note followed by its witness cosignatures (one read)."""
        cp, lines = self.store.latest_cosigned()
        return cp.note + "".join(lines).encode("utf-8")

    def tile(self, level: int, n: int, width: int) -> bytes:
        """A C2SP tlog-tiles tile: the hash tile at ``level`` (0-7) or, at level -1, the
        entry bundle; ``width`` of its 256 entries."""
        from ledger.tiles import entry_bundle, hash_tile

        return entry_bundle(self.store, n, width) if level < 0 else hash_tile(self.store, level, n, width)

    def root_at(self, size: int) -> bytes:
        self._check_size(size)
        if size == 0:
            return EMPTY_ROOT
        coords = range_nodes(0, size)
        got = self.store.nodes(coords)
        return range_hash([got[c] for c in coords])

    def _check_size(self, size: int, latest: int | None = None) -> int:
        return check_size(self.store, size, latest)

    def prove_inclusion_many(self, indices: Sequence[int], size: int) -> list[InclusionProof]:
        """Inclusion proofs for several indices in the tree of ``size``: one read transaction,
        O(log n) stored hashes per proof (:func:`inclusion_proofs`)."""
        return inclusion_proofs(self.store, indices, size)

    def prove_inclusion_batch(self, indices: Sequence[int], size: int) -> list[InclusionProof]:
        """:meth:`prove_inclusion_many`, each proof checked against the root before it is
        returned (what the batch proof endpoint serves)."""
        proofs = self.prove_inclusion_many(indices, size)
        for p in proofs:
            verify_inclusion(leaf_hash=p.leaf_hash, index=p.index, size=size, proof=p.hashes, root=p.root)
        return proofs

    def prove_inclusion(self, index: int, size: int | None = None) -> InclusionProof:
        """Inclusion proof of leaf ``index`` in the tree of ``size`` (default: latest checkpoint)."""
        if size is None:
            size = self.size()
        proof = self.prove_inclusion_many([index], size)[0]
        verify_inclusion(
            leaf_hash=proof.leaf_hash, index=index, size=size, proof=proof.hashes, root=proof.root
        )
        return proof

    def prove_consistency(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        """Consistency proof from ``old_size`` to ``new_size`` (default: latest checkpoint)."""
        if new_size is None:
            new_size = self.size()
        if not 0 <= old_size <= new_size:
            raise MalformedError(f"old size {old_size} is not within [0, {new_size}]", check="proof.size")
        ranges = consistency_ranges(old_size, new_size)
        coords = [c for lo, hi in ranges for c in range_nodes(lo, hi)]
        if old_size:
            coords += range_nodes(0, old_size)
        if new_size:
            coords += range_nodes(0, new_size)
        latest, got, cps = self.store.proof_material(coords, [old_size, new_size])
        self._check_size(new_size, latest)
        hashes = tuple(range_hash([got[c] for c in range_nodes(lo, hi)]) for lo, hi in ranges)
        old_root = range_hash([got[c] for c in range_nodes(0, old_size)]) if old_size else EMPTY_ROOT
        new_root = range_hash([got[c] for c in range_nodes(0, new_size)]) if new_size else EMPTY_ROOT
        old_cp, new_cp = cps.get(old_size), cps.get(new_size)
        # Roots come from the nodes; where a checkpoint was signed they must be its root.
        for cp, root in ((old_cp, old_root), (new_cp, new_root)):
            if cp is not None and not hmac.compare_digest(cp.root, root):
                raise StorageError(f"stored Merkle nodes disagree with the checkpoint at size {cp.size}")
        verify_consistency(
            old_size=old_size, new_size=new_size, old_root=old_root, new_root=new_root, proof=hashes
        )
        return ConsistencyProof(
            old_size=old_size,
            new_size=new_size,
            old_root=old_root,
            new_root=new_root,
            hashes=hashes,
            old_checkpoint=None if old_cp is None else old_cp.note,
            new_checkpoint=None if new_cp is None else new_cp.note,
        )
