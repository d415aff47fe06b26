"""RFC 9162 proofs: generated proofs verify for random shapes; any tamper is rejected."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.errors import ProofError
from verifier.merkle import (
    EMPTY_ROOT,
    consistency_ranges,
    inclusion_proof_length,
    inclusion_ranges,
    leaf_hash,
    node_hash,
    range_hash,
    range_nodes,
    root_from_leaf_hashes,
    verify_consistency,
    verify_inclusion,
)


def hashes_for(n: int) -> list[bytes]:
    return [leaf_hash(i.to_bytes(4, "big")) for i in range(n)]


def mth(hs: list[bytes], lo: int, hi: int) -> bytes:
    return root_from_leaf_hashes(hs[lo:hi])


@st.composite
def tree_and_index(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=600))
    return n, draw(st.integers(min_value=0, max_value=n - 1))


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    n = draw(st.integers(min_value=0, max_value=600))
    return draw(st.integers(min_value=0, max_value=n)), n


@given(tree_and_index())
def test_inclusion_proofs_verify(case: tuple[int, int]) -> None:
    n, m = case
    hs = hashes_for(n)
    proof = [mth(hs, lo, hi) for lo, hi in inclusion_ranges(m, n)]
    assert len(proof) == inclusion_proof_length(m, n)
    verify_inclusion(leaf_hash=hs[m], index=m, size=n, proof=proof, root=mth(hs, 0, n))


@given(tree_and_index(), st.data())
def test_any_flipped_bit_in_an_inclusion_proof_is_rejected(
    case: tuple[int, int], data: st.DataObject
) -> None:
    n, m = case
    hs = hashes_for(n)
    proof = [mth(hs, lo, hi) for lo, hi in inclusion_ranges(m, n)]
    root = mth(hs, 0, n)
    target = data.draw(st.integers(min_value=0, max_value=len(proof) + 1))  # proof hashes, leaf, root
    bit = data.draw(st.integers(min_value=0, max_value=255))
    items = [*proof, hs[m], root]
    flipped = bytearray(items[target])
    flipped[bit // 8] ^= 1 << (bit % 8)
    items[target] = bytes(flipped)
    with pytest.raises(ProofError):
        verify_inclusion(leaf_hash=items[-2], index=m, size=n, proof=items[:-2], root=items[-1])


@given(two_sizes())
def test_consistency_proofs_verify(case: tuple[int, int]) -> None:
    m, n = case
    hs = hashes_for(n)
    proof = [mth(hs, lo, hi) for lo, hi in consistency_ranges(m, n)]
    verify_consistency(old_size=m, new_size=n, old_root=mth(hs, 0, m), new_root=mth(hs, 0, n), proof=proof)


@given(two_sizes(), st.data())
def test_any_flipped_bit_in_a_consistency_proof_is_rejected(
    case: tuple[int, int], data: st.DataObject
) -> None:
    m, n = case
    hs = hashes_for(n)
    proof = [mth(hs, lo, hi) for lo, hi in consistency_ranges(m, n)]
    items = [*proof, mth(hs, 0, m), mth(hs, 0, n)]
    # From the empty tree every tree is consistent: the new root is then unconstrained.
    last = len(items) - (2 if m == 0 < n else 1)
    target = data.draw(st.integers(min_value=0, max_value=last))
    bit = data.draw(st.integers(min_value=0, max_value=255))
    flipped = bytearray(items[target])
    flipped[bit // 8] ^= 1 << (bit % 8)
    items[target] = bytes(flipped)
    with pytest.raises(ProofError):
        verify_consistency(old_size=m, new_size=n, old_root=items[-2], new_root=items[-1], proof=items[:-2])


@given(two_sizes())
def test_a_rewritten_history_is_not_consistent(case: tuple[int, int]) -> None:
    m, n = case
    if m == 0:
        return
    hs = hashes_for(n)
    forged = list(hs)
    forged[m - 1] = leaf_hash(b"rewritten")
    proof = [mth(forged, lo, hi) for lo, hi in consistency_ranges(m, n)]
    with pytest.raises(ProofError):
        verify_consistency(
            old_size=m, new_size=n, old_root=mth(hs, 0, m), new_root=mth(forged, 0, n), proof=proof
        )


@settings(max_examples=50)
@given(st.integers(min_value=1, max_value=5000))
def test_range_nodes_fold_to_the_root(n: int) -> None:
    hs = hashes_for(n)

    def node(level: int, idx: int) -> bytes:
        return mth(hs, idx << level, (idx + 1) << level)

    assert range_hash([node(lv, i) for lv, i in range_nodes(0, n)]) == mth(hs, 0, n)


def test_edge_cases() -> None:
    hs = hashes_for(4)
    root = mth(hs, 0, 4)
    with pytest.raises(ProofError, match="index"):
        verify_inclusion(leaf_hash=hs[0], index=0, size=0, proof=[], root=EMPTY_ROOT)
    with pytest.raises(ProofError):
        verify_inclusion(leaf_hash=hs[0], index=-1, size=4, proof=[], root=root)
    with pytest.raises(ProofError):  # oversized proof rejected before hashing
        verify_inclusion(leaf_hash=hs[0], index=0, size=4, proof=[root] * 65, root=root)
    with pytest.raises(ProofError):  # hash of the wrong length
        verify_inclusion(leaf_hash=hs[0][:31], index=0, size=1, proof=[], root=hs[0])
    verify_consistency(old_size=0, new_size=4, old_root=EMPTY_ROOT, new_root=root, proof=[])
    with pytest.raises(ProofError, match="empty"):
        verify_consistency(old_size=0, new_size=4, old_root=EMPTY_ROOT, new_root=root, proof=[root])
    with pytest.raises(ProofError):
        verify_consistency(old_size=0, new_size=4, old_root=root, new_root=root, proof=[])
    verify_consistency(old_size=4, new_size=4, old_root=root, new_root=root, proof=[])
    with pytest.raises(ProofError):
        verify_consistency(old_size=4, new_size=4, old_root=root, new_root=hs[0], proof=[])
    with pytest.raises(ProofError):
        verify_consistency(old_size=5, new_size=4, old_root=root, new_root=root, proof=[])
    with pytest.raises(ProofError):  # a non-trivial consistency proof is never empty
        verify_consistency(old_size=3, new_size=4, old_root=mth(hs, 0, 3), new_root=root, proof=[])


def test_leaf_and_node_hashes_are_domain_separated() -> None:
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    # A leaf whose bytes are a node's children does not hash to that node.
    assert leaf_hash(a + b) != node_hash(a, b)
    assert node_hash(a, b) == hashlib.sha256(b"\x01" + a + b).digest()
    # [a,b,c] differs from [a,b,c,c]: no odd-node duplication.
    c = leaf_hash(b"c")
    assert root_from_leaf_hashes([a, b, c]) != root_from_leaf_hashes([a, b, c, c])
