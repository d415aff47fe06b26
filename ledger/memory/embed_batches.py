"""Embedding batches of texts of similar length: what the follower hands the embedder.

Batched embedding pads every text of a batch to the longest one (a static embedding sums a
``texts x tokens x dim`` block, a transformer attends over it), so one long turn in a batch of
short memories made the whole batch cost as if every text were that long: the batches the
projection's follower embeds (issue 42, Deliver 5) were slower than one call per write.
:class:`LengthBatched` wraps any :class:`~ledger.memory.embed.Embedder`: it sorts the texts
by length, cuts batches whose padded size stays under a budget, and returns the vectors in
the caller's order. The vectors are the model's own (padding is masked), only cheaper.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.memory.embed import Embedder, EmbedderError, Vectors

__all__ = ["PADDED_CHARS", "LengthBatched"]

#: The most characters one batch holds once padded (texts x the longest text's length).
PADDED_CHARS = 64_000


class LengthBatched:
    """``inner``, called on batches of texts of similar length (see module doc)."""

    def __init__(self, inner: Embedder, padded_chars: int = PADDED_CHARS) -> None:
        self.inner = inner
        self.padded_chars = padded_chars

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if len(texts) <= 1:
            return self.inner.embed(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.inner.dim), dtype=np.float32)
        start = 0
        while start < len(order):
            end = start + 1
            # sorted ascending: the batch's padded size is its count times its last length
            while (
                end < len(order) and (end - start + 1) * max(1, len(texts[order[end]])) <= self.padded_chars
            ):
                end += 1
            picked = order[start:end]
            vecs = self.inner.embed([texts[i] for i in picked])
            if getattr(vecs, "shape", None) != (len(picked), self.inner.dim):
                raise EmbedderError(
                    f"[embed.shape] the embedder returned shape {getattr(vecs, 'shape', None)} "
                    f"for {len(picked)} texts"
                )
            out[picked] = vecs
            start = end
        return out
