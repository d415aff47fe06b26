"""RFC 9162 Merkle tree hashing and proof verification (pure, over bytes).

Trust role: this module decides whether a leaf is in a tree and whether one tree extends
another. It never trusts a size or root that did not come from a verified checkpoint; the
caller passes those in.

Hashing (RFC 9162 §2.1.1, identical to RFC 6962 §2.1 with SHA-256)::

    MTH({})    = SHA-256()
    leaf hash  = SHA-256(0x00 || leaf bytes)
    node hash  = SHA-256(0x01 || left || right)
    MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n])), k the largest power of two < n

The 0x00 / 0x01 prefixes separate leaves from interior nodes, so a leaf can never be
mistaken for a node (the second-preimage weakness of unprefixed trees), and the split rule
means no node is ever duplicated (``[a,b,c]`` and ``[a,b,c,c]`` have different roots).

Proof *generation* helpers are pure too: they return which tree ranges (and which stored
perfect-subtree nodes) a proof needs, so that storage can fetch O(log n) hashes in one read.
The merkletools package is not used: it does not install on Python 3.11 and lacks the
RFC 6962 domain separation.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verifier.errors import ProofError

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "MAX_PROOF_HASHES",
    "CompactRange",
    "VerifiedConsistency",
    "VerifiedInclusion",
    "consistency_ranges",
    "inclusion_proof_length",
    "inclusion_ranges",
    "leaf_hash",
    "node_hash",
    "range_hash",
    "range_nodes",
    "root_from_leaf_hashes",
    "tree_hash_from",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE = 32
#: A tree of up to 2**63 leaves needs at most 63 hashes in any proof (plus one for the
#: power-of-two case of consistency); longer proofs are rejected before any hashing.
MAX_PROOF_HASHES = 64
MAX_TREE_SIZE = 2**63 - 1
EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(leaf: bytes) -> bytes:
    """SHA-256(0x00 || leaf), the RFC 9162 leaf hash."""
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right), the RFC 9162 interior node hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """Largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_from_leaf_hashes(hashes: Sequence[bytes]) -> bytes:
    """MTH over leaf hashes, computed directly from the definition (reference; O(n))."""
    n = len(hashes)
    if n == 0:
        return EMPTY_ROOT
    if n == 1:
        return hashes[0]
    k = _split(n)
    return node_hash(root_from_leaf_hashes(hashes[:k]), root_from_leaf_hashes(hashes[k:]))


# ---------------------------------------------------------------------------------------
# Proof planning (used by the ledger to generate proofs from stored nodes)
# ---------------------------------------------------------------------------------------


def range_nodes(lo: int, hi: int) -> list[tuple[int, int]]:
    """Perfect aligned subtrees ``(level, index)`` covering leaves ``[lo, hi)``, left first.

    Node ``(level, index)`` is MTH of leaves ``[index * 2**level, (index + 1) * 2**level)``.
    Every range produced by :func:`inclusion_ranges` and :func:`consistency_ranges`
    decomposes this way, and its MTH is the right fold of these nodes (:func:`range_hash`).
    """
    if not 0 <= lo < hi:
        raise ValueError(f"empty or negative range [{lo}, {hi})")
    out: list[tuple[int, int]] = []
    start, remaining = lo, hi - lo
    while remaining:
        level = remaining.bit_length() - 1
        size = 1 << level
        if start % size:
            raise ValueError(f"range [{lo}, {hi}) is not RFC 9162-aligned")
        out.append((level, start >> level))
        start += size
        remaining -= size
    return out


def range_hash(node_hashes: Sequence[bytes]) -> bytes:
    """MTH of a range from the hashes of its :func:`range_nodes` (right fold)."""
    if not node_hashes:
        raise ValueError("a range has at least one node")
    acc = node_hashes[-1]
    for h in reversed(node_hashes[:-1]):
        acc = node_hash(h, acc)
    return acc


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose MTHs form PATH(index, D[size]) (RFC 9162 §2.1.3.1), leaf side first."""
    if not 0 <= index < size:
        raise ValueError(f"index {index} is not below size {size}")
    out: list[tuple[int, int]] = []
    lo, hi, m = 0, size, index
    while hi - lo > 1:
        k = _split(hi - lo)
        if m < k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, m = lo + k, m - k
    out.reverse()
    return out


def consistency_ranges(old: int, new: int) -> list[tuple[int, int]]:
    """Leaf ranges whose MTHs form PROOF(old, D[new]) (RFC 9162 §2.1.4.1).

    Returns an empty list for ``old == 0`` or ``old == new``.
    """
    if not 0 <= old <= new:
        raise ValueError(f"old size {old} is not within [0, {new}]")
    if old in (0, new):
        return []
    out: list[tuple[int, int]] = []
    lo, hi, m, complete = 0, new, old, True
    while True:
        n = hi - lo
        if m == n:
            if not complete:
                out.append((lo, hi))
            break
        k = _split(n)
        if m <= k:
            out.append((lo + k, hi))
            hi = lo + k
        else:
            out.append((lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    out.reverse()
    return out


def inclusion_proof_length(index: int, size: int) -> int:
    """Exact number of hashes in an inclusion proof (inner + border decomposition)."""
    if not 0 <= index < size:
        raise ValueError(f"index {index} is not below size {size}")
    inner = (index ^ (size - 1)).bit_length()
    border = bin(index >> inner).count("1")
    return inner + border


# ---------------------------------------------------------------------------------------
# Verification (RFC 9162 §2.1.3.2 and §2.1.4.2)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedInclusion:
    """A leaf hash proven to be at ``index`` in the tree of ``size`` with ``root``."""

    leaf_hash: bytes
    index: int
    size: int
    root: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifiedConsistency:
    """The tree (``old_size``, ``old_root``) is a prefix of (``new_size``, ``new_root``)."""

    old_size: int
    old_root: bytes
    new_size: int
    new_root: bytes


def _check_hash(value: bytes, what: str) -> None:
    if not isinstance(value, bytes) or len(value) != HASH_SIZE:
        raise ProofError(f"{what} must be {HASH_SIZE} bytes", check="proof.hash_size")


def _check_proof_list(proof: Sequence[bytes], what: str) -> None:
    if len(proof) > MAX_PROOF_HASHES:
        raise ProofError(
            f"{what} has {len(proof)} hashes, more than {MAX_PROOF_HASHES}",
            check=f"{what}.length",
        )
    for i, p in enumerate(proof):
        _check_hash(p, f"{what} hash {i}")


def verify_inclusion(
    *, leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> VerifiedInclusion:
    """Verify that ``leaf_hash`` is at ``index`` in the tree (``size``, ``root``).

    Steps (RFC 9162 §2.1.3.2), each raising :class:`ProofError` naming the check:

    1. ``inclusion.range``: 0 <= index < size <= 2**63-1.
    2. ``inclusion.length``: the proof has exactly the length the tree shape implies.
    3. ``inclusion.root``: folding the path from the leaf gives ``root`` (constant-time compare).
    """
    _check_hash(leaf_hash, "leaf hash")
    _check_hash(root, "root")
    _check_proof_list(proof, "inclusion")
    if not (isinstance(index, int) and isinstance(size, int) and 0 <= index < size <= MAX_TREE_SIZE):
        raise ProofError(f"index {index} is not within a tree of size {size}", check="inclusion.range")
    expected = inclusion_proof_length(index, size)
    if len(proof) != expected:
        raise ProofError(
            f"proof has {len(proof)} hashes; index {index} in size {size} needs {expected}",
            check="inclusion.length",
        )
    fn, sn, r = index, size - 1, leaf_hash
    for p in proof:
        if sn == 0:
            raise ProofError("proof is longer than the path to the root", check="inclusion.length")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("proof is shorter than the path to the root", check="inclusion.length")
    if not hmac.compare_digest(r, root):
        raise ProofError("recomputed root does not match the checkpoint root", check="inclusion.root")
    return VerifiedInclusion(leaf_hash=leaf_hash, index=index, size=size, root=root)


def verify_consistency(
    *, old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> VerifiedConsistency:
    """Verify that tree (``old_size``, ``old_root``) is a prefix of (``new_size``, ``new_root``).

    Steps (RFC 9162 §2.1.4.2 plus the tlog-witness edge cases), each raising
    :class:`ProofError`:

    1. ``consistency.range``: 0 <= old_size <= new_size <= 2**63-1.
    2. ``consistency.empty``: old_size 0 needs an empty proof and old_root = SHA-256("");
       equal sizes need an empty proof and equal roots.
    3. ``consistency.length``: a non-trivial proof is non-empty and exactly as long as the
       tree shapes imply.
    4. ``consistency.old_root`` / ``consistency.new_root``: both recomputed roots match.
    """
    _check_hash(old_root, "old root")
    _check_hash(new_root, "new root")
    _check_proof_list(proof, "consistency")
    if not (
        isinstance(old_size, int) and isinstance(new_size, int) and 0 <= old_size <= new_size <= MAX_TREE_SIZE
    ):
        raise ProofError(
            f"old size {old_size} is not within [0, new size {new_size}]", check="consistency.range"
        )
    trivial = _trivial_consistency(old_size, new_size, old_root, new_root, proof)
    if trivial is not None:
        return trivial
    expected = len(consistency_ranges(old_size, new_size))
    if len(proof) != expected:
        raise ProofError(
            f"proof has {len(proof)} hashes; sizes {old_size}->{new_size} need {expected}",
            check="consistency.length",
        )
    fr, sr = _consistency_roots(old_size, new_size, old_root, proof)
    if not hmac.compare_digest(fr, old_root):
        raise ProofError("recomputed old root does not match", check="consistency.old_root")
    if not hmac.compare_digest(sr, new_root):
        raise ProofError("recomputed new root does not match", check="consistency.new_root")
    return VerifiedConsistency(old_size=old_size, old_root=old_root, new_size=new_size, new_root=new_root)


def _trivial_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> VerifiedConsistency | None:
    """Step 2: from the empty tree, or between equal sizes, the proof is empty and the roots
    are known; None when the sizes need a real proof."""
    if new_size == 0 and not hmac.compare_digest(new_root, EMPTY_ROOT):
        raise ProofError('the empty tree\'s root must be SHA-256("")', check="consistency.new_root")
    if old_size == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty", check="consistency.empty")
        if not hmac.compare_digest(old_root, EMPTY_ROOT):
            raise ProofError('the empty tree\'s root must be SHA-256("")', check="consistency.old_root")
        return VerifiedConsistency(old_size=0, old_root=old_root, new_size=new_size, new_root=new_root)
    if old_size == new_size:
        if proof:
            raise ProofError("a proof between equal sizes must be empty", check="consistency.empty")
        if not hmac.compare_digest(old_root, new_root):
            raise ProofError("equal sizes with different roots", check="consistency.new_root")
        return VerifiedConsistency(old_size=old_size, old_root=old_root, new_size=new_size, new_root=new_root)
    return None


def _consistency_roots(
    old_size: int, new_size: int, old_root: bytes, proof: Sequence[bytes]
) -> tuple[bytes, bytes]:
    """Steps 3-4 (RFC 9162 §2.1.4.2): the old and new roots recomputed from the proof."""
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # exact power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("proof is longer than the tree allows", check="consistency.length")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("proof is shorter than the tree requires", check="consistency.length")
    return fr, sr


class CompactRange:
    """The right border of a growing tree: its perfect subtrees ``(level, index, hash)``.

    Appending a leaf hash returns every node it completes (the leaf itself at level 0 and
    each merged parent), which the ledger stores and a replaying auditor discards; the root
    is the right fold of the border. Memory is O(log n).
    """

    __slots__ = ("nodes", "size")

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()) -> None:
        coords = range_nodes(0, size) if size else []
        if len(coords) != len(hashes):
            raise ValueError(f"a tree of size {size} has {len(coords)} border nodes, got {len(hashes)}")
        self.size = size
        self.nodes: list[tuple[int, int, bytes]] = [
            (lv, i, h) for (lv, i), h in zip(coords, hashes, strict=True)
        ]

    def append(self, leaf_hash: bytes) -> list[tuple[int, int, bytes]]:
        completed = [(0, self.size, leaf_hash)]
        self.nodes.append(completed[0])
        while len(self.nodes) >= 2 and self.nodes[-1][0] == self.nodes[-2][0]:
            (level, left_idx, left), (_, _, right) = self.nodes[-2], self.nodes[-1]
            merged = (level + 1, left_idx >> 1, node_hash(left, right))
            self.nodes[-2:] = [merged]
            completed.append(merged)
        self.size += 1
        return completed

    def root(self) -> bytes:
        return range_hash([h for _, _, h in self.nodes]) if self.nodes else EMPTY_ROOT


def tree_hash_from(get_node: Callable[[int, int], bytes], size: int) -> bytes:
    """MTH of the first ``size`` leaves from stored perfect-subtree nodes."""
    if size == 0:
        return EMPTY_ROOT
    return range_hash([get_node(level, idx) for level, idx in range_nodes(0, size)])
