"""Replay a whole log, entry by entry, with the trusted core only (the auditor's check).

Trust role: given the log's verifier key and its leaves in order, decide whether the log
is well formed and matches a signed checkpoint. Nothing here trusts the server: keys come
from earlier leaves, sizes and roots from verified checkpoints.

For each leaf, in order (``LogReplay.add``):

1. ``leaf.*`` / ``canonical.*``: the bytes are exactly a well-formed leaf of this origin;
2. ``log.index``: its index is its position;
3. ``log.timestamp``: its server timestamp is strictly greater than the previous one;
4. ``key.*`` / ``event.signature``: it is signed by the key valid for its agent at that
   index (verifier.keys), which also advances the key history;
5. ``stream.chain``: its version is its stream's next and ``prev`` is the stream head's
   leaf hash (nothing dropped, reordered or inserted in any stream);
6. the leaf hash extends the tree.

``LogReplay.check_checkpoint`` then requires a verified checkpoint's size and root to equal
the replayed tree's (``replay.size`` / ``replay.root``), and ``check_consistency_with``
requires successive checkpoints to describe prefixes of the same replayed tree.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from verifier.errors import MalformedError, ProofError, StreamChainError
from verifier.event import DEFAULT_MAX_LEAF_BYTES, Leaf
from verifier.keys import KeyHistory
from verifier.merkle import CompactRange
from verifier.note import VerifiedCheckpoint, check_origin

__all__ = ["LogReplay"]


class LogReplay:
    """Incremental audit of one log; feed it every leaf from index 0."""

    def __init__(self, origin: str, *, max_leaf_bytes: int = DEFAULT_MAX_LEAF_BYTES) -> None:
        self.origin = check_origin(origin)
        self.max_leaf_bytes = max_leaf_bytes
        self.keys = KeyHistory()
        self.heads: dict[tuple[str, str], tuple[int, str]] = {}
        self.last_timestamp_us = 0
        self.tree = CompactRange()
        self.roots: dict[int, bytes] = {}  # roots at sizes the caller asked to remember
        #: called with the (level, index, hash) nodes each leaf completes (tile checks)
        self.on_nodes: Callable[[list[tuple[int, int, bytes]]], None] | None = None

    @property
    def size(self) -> int:
        return self.tree.size

    def parse(self, leaf_bytes: bytes) -> Leaf:
        """Step 1 alone: the bytes are exactly a well-formed leaf of this origin."""
        return Leaf.from_bytes(leaf_bytes, max_bytes=self.max_leaf_bytes, origin=self.origin)

    def add(self, leaf_bytes: bytes) -> Leaf:
        """Check the next leaf (steps 1-6); raise a VerificationError naming the check."""
        return self.add_parsed(self.parse(leaf_bytes))

    def add_parsed(self, leaf: Leaf, *, verified_with: bytes | None = None) -> Leaf:
        """Steps 2-6 for a leaf :meth:`parse` returned. ``verified_with``: a key its signature
        was already verified under (verifier.parallel; see KeyHistory.check_and_apply)."""
        if leaf.index != self.tree.size:
            raise MalformedError(
                f"leaf at position {self.tree.size} says index {leaf.index}", check="log.index"
            )
        if leaf.timestamp_us <= self.last_timestamp_us:
            raise MalformedError(
                f"timestamp {leaf.timestamp_us} at index {leaf.index} does not increase "
                f"(previous {self.last_timestamp_us})",
                check="log.timestamp",
            )
        self.keys.check_and_apply(leaf, verified_with=verified_with)
        env = leaf.envelope
        version, prev = self.heads.get(env.stream, (-1, None))
        if env.version != version + 1 or env.prev != prev:
            raise StreamChainError(
                f"stream {env.agent}/{env.kind} at index {leaf.index}: version {env.version} "
                f"prev {env.prev} does not follow version {version} {prev}",
                check="stream.chain",
            )
        self.heads[env.stream] = (env.version, leaf.hash.hex())
        self.last_timestamp_us = leaf.timestamp_us
        completed = self.tree.append(leaf.hash)
        if self.on_nodes is not None:
            self.on_nodes(completed)
        return leaf

    def remember_root(self) -> bytes:
        """Record the root at the current size (for later consistency checks)."""
        root = self.tree.root()
        self.roots[self.tree.size] = root
        return root

    def check_checkpoint(self, checkpoint: VerifiedCheckpoint) -> None:
        """The verified checkpoint describes exactly the replayed tree."""
        if checkpoint.origin != self.origin:
            raise ProofError("checkpoint is for another log", check="replay.origin")
        if checkpoint.size != self.tree.size:
            raise ProofError(
                f"checkpoint size {checkpoint.size} is not the replayed size {self.tree.size}",
                check="replay.size",
            )
        if not hmac.compare_digest(checkpoint.root, self.tree.root()):
            raise ProofError("checkpoint root is not the root of the replayed leaves", check="replay.root")

    def check_consistency_with(self, checkpoint: VerifiedCheckpoint) -> None:
        """A verified checkpoint at a size already passed (and remembered) matches that prefix."""
        root = self.roots.get(checkpoint.size)
        if root is None:
            raise ProofError(f"no replayed root remembered at size {checkpoint.size}", check="replay.size")
        if not hmac.compare_digest(root, checkpoint.root):
            raise ProofError(
                f"checkpoint at size {checkpoint.size} is inconsistent with the replayed log",
                check="replay.consistency",
            )
